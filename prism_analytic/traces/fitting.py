"""Latency fitting per op signature: candidate families, a stated criterion, goodness of fit.

Each sample pool is fitted with every candidate family by maximum likelihood
(``scipy.stats.<family>.fit``); the family with the lowest AIC is chosen (or the lowest KS
statistic with ``criterion="ks"``). Candidates with infinite variance or a tail reaching beyond
twice the sample's range are not eligible (see :func:`_plausible`). Goodness of fit is the
one-sample KS test of the chosen fit (its p-value is optimistic because the parameters were
estimated from the same sample; it is used only to fall back to the empirical law when even that
optimistic test rejects at 1%). Confidence intervals of the mean and the 0.95 quantile come from
the bootstrap. Before samples from successive steps are pooled, :func:`ljung_box` tests them for
autocorrelation (statsmodels).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

__all__ = ["FAMILIES", "LatencyFit", "fit_latency", "ljung_box"]

#: Candidate families: name -> (scipy distribution, fixed keyword arguments of ``fit``).
FAMILIES = {
    "normal": (stats.norm, {}),
    "gamma": (stats.gamma, {"floc": 0.0}),
    "lognormal": (stats.lognorm, {"floc": 0.0}),
    "shifted lognormal": (stats.lognorm, {}),
    "shifted gamma": (stats.gamma, {}),
    "student t": (stats.t, {}),
    "laplace": (stats.laplace, {}),
    "logistic": (stats.logistic, {}),
    "gumbel": (stats.gumbel_r, {}),
}
_POSITIVE = {"gamma", "lognormal"}


@dataclass(frozen=True)
class LatencyFit:
    """A fitted latency law and how well it fits.

    Attributes
    ----------
    family : str
        Chosen family, or ``"empirical"`` when no family passes.
    params : tuple
        scipy parameters of the chosen family (empty for empirical).
    n : int
        Sample size.
    aic : dict
        AIC of every candidate that could be fitted.
    ks : float
        KS statistic of the chosen law against the sample.
    ks_pvalue : float
        Its p-value (optimistic: parameters estimated from the sample).
    mean_ci, q95_ci : tuple
        Bootstrap 90% intervals of the sample mean and 0.95 quantile.
    criterion : str
        ``"aic"`` or ``"ks"``.
    samples : numpy.ndarray
        The sample (kept for the empirical fallback and for resampling).
    """

    family: str
    params: tuple
    n: int
    aic: dict
    ks: float
    ks_pvalue: float
    mean_ci: tuple
    q95_ci: tuple
    criterion: str
    samples: np.ndarray = field(repr=False)

    @property
    def frozen(self):
        """The frozen scipy law (``None`` for empirical)."""
        if self.family == "empirical":
            return None
        return FAMILIES[self.family][0](*self.params)

    def sample(self, size, rng) -> np.ndarray:
        """Draw ``size`` values with ``rng`` from the fitted law (empirical: resample the data)."""
        if self.frozen is None:
            return rng.choice(self.samples, size=size, replace=True)
        return self.frozen.rvs(size=size, random_state=rng)

    def distribution(self):
        """The fitted law as a ``prism_analytic`` distribution (for the analytic engine)."""
        import prism_analytic as pa

        if self.frozen is None:
            return pa.empirical(self.samples)
        return pa.from_scipy(self.frozen)

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {
            "family": self.family,
            "params": [float(p) for p in self.params],
            "n": self.n,
            "criterion": self.criterion,
            "aic": {k: float(v) for k, v in self.aic.items()},
            "ks": float(self.ks),
            "ks_pvalue": float(self.ks_pvalue),
            "mean_ci90": [float(x) for x in self.mean_ci],
            "q95_ci90": [float(x) for x in self.q95_ci],
        }


def fit_latency(
    samples,
    *,
    families=None,
    criterion: str = "aic",
    fallback_pvalue: float = 0.01,
    rng=0,
) -> LatencyFit:
    """Fit candidate families to a latency sample and choose one.

    Parameters
    ----------
    samples : array_like
        Finite values (at least 8).
    families : sequence of str, optional
        Subset of :data:`FAMILIES` (default all; positive-support families are skipped when a
        value is <= 0).
    criterion : {"aic", "ks"}
        How the family is chosen.
    fallback_pvalue : float
        Below this KS p-value the empirical law is used instead.
    rng : int or numpy.random.Generator
        Seed for the bootstrap.

    Returns
    -------
    LatencyFit

    Raises
    ------
    ValueError
        Fewer than 8 values, non-finite values, unknown family or criterion.
    """
    x = np.asarray(samples, dtype=float).ravel()
    if x.size < 8:
        raise ValueError(f"samples: need at least 8 values to fit a latency law, got {x.size}")
    if not np.isfinite(x).all():
        raise ValueError("samples: values must be finite")
    if criterion not in ("aic", "ks"):
        raise ValueError(f"criterion must be 'aic' or 'ks', got {criterion!r}")
    names = list(FAMILIES) if families is None else list(families)
    unknown = [f for f in names if f not in FAMILIES]
    if unknown:
        raise ValueError(f"families: unknown {unknown}; allowed {list(FAMILIES)}")
    rng = np.random.default_rng(rng)
    aic, fits = {}, {}
    if np.ptp(x) > 0:
        for name in names:
            if name in _POSITIVE and x.min() <= 0:
                continue
            dist, kw = FAMILIES[name]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    params = dist.fit(x, **kw)
                    ll = np.sum(dist.logpdf(x, *params))
                except Exception:  # noqa: BLE001 - a family that cannot be fitted is skipped
                    continue
            if not np.isfinite(ll) or not _plausible(dist(*params), x):
                continue
            k = len(params) - len(kw)
            aic[name] = 2 * k - 2 * ll
            fits[name] = params
    family, params, ks, pval = "empirical", (), 0.0, 1.0
    if fits:
        if criterion == "aic":
            best = min(aic, key=aic.get)
        else:
            best = min(fits, key=lambda f: stats.kstest(x, FAMILIES[f][0](*fits[f]).cdf)[0])
        res = stats.kstest(x, FAMILIES[best][0](*fits[best]).cdf)
        if res.pvalue >= fallback_pvalue:
            family, params, ks, pval = best, tuple(fits[best]), res.statistic, res.pvalue
        else:
            ks, pval = res.statistic, res.pvalue
    mean_ci = _boot(x, np.mean, rng)
    q95_ci = _boot(x, lambda v, axis=-1: np.quantile(v, 0.95, axis=axis), rng)
    return LatencyFit(family, params, x.size, aic, ks, pval, mean_ci, q95_ci, criterion, x)


def _plausible(frozen, x) -> bool:
    """Reject fits whose variance is infinite or whose tail runs far beyond the data.

    Small, spiky samples let a Student t with under 2 degrees of freedom, or a shifted
    lognormal with a huge shape, win on likelihood; their draws are then absurd. A candidate
    must have finite variance and a 0.999 quantile within twice the sample's range of its
    largest value (and symmetrically at 0.001).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        var = frozen.var()
        lo, hi = frozen.ppf([0.001, 0.999])
    span = np.ptp(x)
    return bool(np.isfinite(var) and hi <= x.max() + 2 * span and lo >= x.min() - 2 * span)


def _boot(x, stat, rng):
    if np.ptp(x) == 0:
        return (float(x[0]), float(x[0]))
    res = stats.bootstrap(
        (x,), stat, n_resamples=300, confidence_level=0.9, method="percentile", rng=rng
    )
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def ljung_box(series, lags: int = 4) -> float:
    """Ljung-Box p-value of a per-step series (small: autocorrelated, do not pool blindly).

    Parameters
    ----------
    series : array_like
        Values in step order (at least ``lags + 4``).
    lags : int
        Largest lag tested.

    Returns
    -------
    float
        The smallest p-value over lags 1..``lags`` (NaN when the series is too short or
        constant).
    """
    from statsmodels.stats.diagnostic import acorr_ljungbox

    x = np.asarray(series, dtype=float)
    if x.size < lags + 4 or np.ptp(x) == 0:
        return float("nan")
    table = acorr_ljungbox(x, lags=lags)
    return float(table["lb_pvalue"].min())
