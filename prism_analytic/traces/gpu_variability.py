"""Slowest of n GPUs from measured per-GPU speeds: fit on half the GPUs, check on the other.

The per-GPU value is the median over that GPU's runs of the SGEMM duration (Longhorn V100,
``sgemm-longhorn-agg.csv``). A random half of the GPUs (the fit half) is fitted with every
whole-sample family of :func:`~prism_analytic.traces.fitting.fit_latency` and with a normal
body + GPD tail (:func:`~prism_analytic.traces.tail_fit.fit_spliced`); the candidate with the
lowest AIC on the fit half is the per-GPU law F. The slowest of n GPUs is F^n
(``prism_analytic.iid_max``).

Comparison with the other half (m GPUs, the test half): its law of the slowest of n is the
plug-in law G_m^n, G_m the test half's empirical CDF, i.e. exactly what subsampling n GPUs
*with replacement* from the test half converges to. With replacement is the only definition
that exists for n > m, and it is computed exactly here (no subsampling noise). G_m^n is a step
function whose largest jump, at the test half's slowest GPU, is ``1 - (1 - 1/m)^n``; any
continuous prediction therefore has KS >= half that jump (:func:`.gpu_floors.ks_lower_bound`).
:func:`gpu_max_splits` repeats the split and reports,
beside the model's KS, three noise floors: the KS between the two halves' own plug-in laws;
the KS a *perfect* model would get (the law fitted on all GPUs taken as the truth, a test half
of m drawn from it); and the KS of this same method refitted on a fit half drawn from that
truth (only the fit half's sampling noise left).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prism_analytic.traces.errors import TraceFormatError, require_pandas
from prism_analytic.traces.fitting import fit_latency
from prism_analytic.traces.gpu_floors import ks_lower_bound, max_ks
from prism_analytic.traces.tail_fit import fit_spliced

__all__ = [
    "GpuMaxCase",
    "GpuMaxSplits",
    "PerGpuLaw",
    "empirical_max_ks",
    "fit_per_gpu_law",
    "gpu_max_case",
    "gpu_max_splits",
    "ks_lower_bound",
    "max_ks",
    "per_gpu_speeds",
]


def per_gpu_speeds(path) -> np.ndarray:
    """Per-GPU median SGEMM duration (ms) from the Longhorn aggregate CSV.

    Parameters
    ----------
    path : str or Path
        ``sgemm-longhorn-agg.csv`` (columns ``uuid`` and ``perf``).

    Returns
    -------
    numpy.ndarray
        One value per GPU.
    """
    pd = require_pandas()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"GPU variability file not found: {path}")
    try:
        frame = pd.read_csv(path)
    except Exception as exc:
        raise TraceFormatError(f"{path}: cannot be read as CSV: {exc}") from None
    missing = [c for c in ("uuid", "perf") if c not in frame.columns]
    if missing:
        raise TraceFormatError(f"{path}: columns {missing} missing; has {list(frame.columns)}")
    perf = pd.to_numeric(frame["perf"], errors="coerce")
    bad = ~np.isfinite(perf.to_numpy()) | (perf.to_numpy() <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(f"{path}: row {i}: perf {frame['perf'].iloc[i]!r} must be > 0")
    return frame.assign(perf=perf).groupby("uuid")["perf"].median().to_numpy()


@dataclass(frozen=True)
class PerGpuLaw:
    """The per-GPU law chosen by AIC on the fit half.

    Attributes
    ----------
    family : str
        Chosen candidate (a family of :data:`~prism_analytic.traces.fitting.FAMILIES`,
        ``"normal body + GPD tail"``, or ``"empirical"`` when no candidate could be fitted).
    aic : dict
        AIC of the candidates compared (the best whole-sample family and the spliced law).
    fit : object
        The chosen fit (``LatencyFit`` or ``SplicedFit``).
    """

    family: str
    aic: dict
    fit: object

    def cdf(self, x) -> np.ndarray:
        """CDF of the per-GPU law at ``x``."""
        frozen = getattr(self.fit, "frozen", None)
        if frozen is not None:
            return frozen.cdf(x)
        if self.family == "empirical":
            s = np.sort(self.fit.samples)
            return np.searchsorted(s, x, side="right") / s.size
        return self.fit.cdf(x)

    def rvs(self, size, rng) -> np.ndarray:
        """Draw ``size`` per-GPU values with the generator ``rng``."""
        if hasattr(self.fit, "sample"):
            return self.fit.sample(size, rng)
        return self.fit.rvs(size, rng)

    def distribution(self):
        """The law as a ``prism_analytic`` distribution."""
        return self.fit.distribution()

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {
            "family": self.family,
            "aic": {k: float(v) for k, v in self.aic.items()},
            "fit": self.fit.to_dict(),
        }


def fit_per_gpu_law(values, *, tail_fraction: float = 0.1, seed: int = 0) -> PerGpuLaw:
    """Fit whole-sample families and a normal body + GPD tail; keep the lowest AIC.

    Parameters
    ----------
    values : array_like
        Per-GPU values of the fit half.
    tail_fraction : float
        Share of values above the spliced law's threshold (a fixed rule, default top 10%).
    seed : int
        Seed of :func:`~prism_analytic.traces.fitting.fit_latency`'s bootstrap.

    Returns
    -------
    PerGpuLaw
    """
    whole = fit_latency(values, rng=seed)
    candidates = {}
    if whole.family != "empirical":
        candidates[whole.family] = (whole.aic[whole.family], whole)
    try:
        spliced = fit_spliced(values, tail_fraction=tail_fraction)
        candidates[spliced.family] = (spliced.aic, spliced)
    except ValueError:
        pass  # too few values above the threshold: the whole-sample families compete alone
    if not candidates:
        return PerGpuLaw("empirical", {}, whole)
    best = min(candidates, key=lambda k: candidates[k][0])
    return PerGpuLaw(best, {k: v[0] for k, v in candidates.items()}, candidates[best][1])


def empirical_max_ks(a, b, n: int) -> float:
    """KS distance between two samples' plug-in laws of the slowest of n (``G_a^n``, ``G_b^n``).

    Parameters
    ----------
    a, b : array_like
        Per-GPU values of the two samples.
    n : int
        Group size.

    Returns
    -------
    float
        ``sup_x |G_a(x)^n - G_b(x)^n|`` (both step functions: checked at every sample value).
    """
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    grid = np.concatenate([a, b])
    fa = np.searchsorted(a, grid, side="right") / a.size
    fb = np.searchsorted(b, grid, side="right") / b.size
    return float(np.max(np.abs(fa**n - fb**n)))


def _split(values, rng):
    perm = rng.permutation(values.size)
    half = values.size // 2
    return values[perm[:half]], values[perm[half:]]


@dataclass(frozen=True)
class GpuMaxCase:
    """Result of the max-over-n check on one random split.

    Attributes
    ----------
    law : PerGpuLaw
        The per-GPU law fitted on the fit half.
    n_fit, n_test : int
        GPUs in each half.
    ks : dict
        n -> exact KS between the analytic max of n and the test half's plug-in law.
    predicted_median, measured_median : dict
        n -> median of the slowest of n (ms), predicted and from the test half's plug-in law.
    noise_floor_ks : dict
        n -> KS between the fit half's and the test half's plug-in laws of the slowest of n.
    lower_bound_ks : dict
        n -> :func:`.gpu_floors.ks_lower_bound` for the test half: no continuous model goes
        below it.
    """

    law: PerGpuLaw
    n_fit: int
    n_test: int
    ks: dict
    predicted_median: dict
    measured_median: dict
    noise_floor_ks: dict
    lower_bound_ks: dict

    def to_dict(self) -> dict:
        """JSON-ready summary."""

        def f(d):
            return {str(k): float(v) for k, v in d.items()}

        return {
            "family": self.law.family,
            "law": self.law.to_dict(),
            "n_fit_gpus": self.n_fit,
            "n_test_gpus": self.n_test,
            "ks": f(self.ks),
            "predicted_median_ms": f(self.predicted_median),
            "measured_median_ms": f(self.measured_median),
            "noise_floor_ks": f(self.noise_floor_ks),
            "lower_bound_ks": f(self.lower_bound_ks),
        }


def gpu_max_case(path, *, ns=(4, 16, 64, 256), seed: int = 0) -> GpuMaxCase:
    """Fit per-GPU speed on a random half; compare the analytic max of n with the other half.

    Parameters
    ----------
    path : str or Path
        ``sgemm-longhorn-agg.csv``.
    ns : sequence of int
        Group sizes.
    seed : int
        Seed of the split.

    Returns
    -------
    GpuMaxCase
    """
    import prism_analytic as pa

    values = per_gpu_speeds(path)
    fit_half, test_half = _split(values, np.random.default_rng(seed))
    law = fit_per_gpu_law(fit_half, seed=seed)
    dist = law.distribution()
    ks, pred_med, meas_med, floor, bound = {}, {}, {}, {}, {}
    test_sorted = np.sort(test_half)
    for n in map(int, ns):
        mx = pa.iid_max(dist, n)
        ks[n] = max_ks(mx.cdf, test_half, n)
        pred_med[n] = float(mx.quantile(0.5))
        # Median of the plug-in law G^n: the test value at which G^n first reaches 1/2.
        k = int(np.ceil(test_half.size * 0.5 ** (1 / n))) - 1
        meas_med[n] = float(test_sorted[k])
        floor[n] = empirical_max_ks(fit_half, test_half, n)
        bound[n] = ks_lower_bound(test_half.size, n)
    return GpuMaxCase(law, fit_half.size, test_half.size, ks, pred_med, meas_med, floor, bound)


@dataclass(frozen=True)
class GpuMaxSplits:
    """The max-over-n check repeated over random half splits, beside its noise floors.

    Attributes
    ----------
    ns : tuple of int
        Group sizes.
    model_ks : dict
        n -> KS per split between the fitted model's F^n and the test half's plug-in law.
    halves_ks : dict
        n -> KS per split between the two halves' plug-in laws (the fit half's empirical law
        used as the model).
    perfect_model_ks : dict
        n -> KS per split between the true F^n and the plug-in law of a test half of the same
        size drawn from F, with F the law fitted (same selection) on all GPUs: what a model
        that knew the truth would score (parametric bootstrap).
    refit_ks : dict
        n -> KS per split of the same selection refitted on a fit half drawn from F, against
        a test half drawn from F: what the method itself scores when its model family is right
        and only the fit half's sampling noise remains (parametric bootstrap).
    lower_bound_ks : dict
        n -> :func:`.gpu_floors.ks_lower_bound` (the same for every split).
    families : dict
        Family chosen on the fit half -> number of splits.
    """

    ns: tuple
    model_ks: dict
    halves_ks: dict
    perfect_model_ks: dict
    refit_ks: dict
    lower_bound_ks: dict
    families: dict

    def summary(self, limit: float = 0.1) -> dict:
        """Median, 10th and 90th percentile of each KS, and the share of splits <= ``limit``."""

        def s(xs):
            xs = np.asarray(xs, dtype=float)
            return {
                "median": float(np.median(xs)),
                "p10": float(np.percentile(xs, 10)),
                "p90": float(np.percentile(xs, 90)),
                f"share_le_{limit:g}": float(np.mean(xs <= limit)),
            }

        return {
            str(n): {
                "model": s(self.model_ks[n]),
                "halves": s(self.halves_ks[n]),
                "perfect_model": s(self.perfect_model_ks[n]),
                "refit_on_truth": s(self.refit_ks[n]),
                "lower_bound": float(self.lower_bound_ks[n]),
            }
            for n in self.ns
        }

    def to_dict(self) -> dict:
        """JSON-ready summary (per-n summaries and the family counts)."""
        return {
            "splits": len(self.model_ks[self.ns[0]]),
            "by_n": self.summary(),
            "families": dict(self.families),
        }


def gpu_max_splits(path, *, ns=(4, 16, 64, 256), splits: int = 50, seed: int = 0) -> GpuMaxSplits:
    """Repeat the half split ``splits`` times; report the model's KS beside the noise floors.

    Parameters
    ----------
    path : str or Path
        ``sgemm-longhorn-agg.csv``.
    ns : sequence of int
        Group sizes.
    splits : int
        Random half splits (>= 2).
    seed : int
        Seed of the splits and of the perfect-model draws.

    Returns
    -------
    GpuMaxSplits
    """
    if isinstance(splits, bool) or not isinstance(splits, int) or splits < 2:
        raise ValueError(f"splits must be an integer >= 2, got {splits!r}")
    ns = tuple(int(n) for n in ns)
    values = per_gpu_speeds(path)
    rng = np.random.default_rng(seed)
    truth = fit_per_gpu_law(values, seed=seed)
    model, halves, perfect, refit = ({n: [] for n in ns} for _ in range(4))
    families = Counter()
    for _ in range(splits):
        fit_half, test_half = _split(values, rng)
        law = fit_per_gpu_law(fit_half, seed=seed)
        families[law.family] += 1
        synthetic = truth.rvs(test_half.size, rng)
        refitted = fit_per_gpu_law(truth.rvs(fit_half.size, rng), seed=seed)
        for n in ns:
            model[n].append(max_ks(lambda x, n=n, f=law: f.cdf(x) ** n, test_half, n))
            halves[n].append(empirical_max_ks(fit_half, test_half, n))
            perfect[n].append(max_ks(lambda x, n=n: truth.cdf(x) ** n, synthetic, n))
            refit[n].append(max_ks(lambda x, n=n, f=refitted: f.cdf(x) ** n, synthetic, n))
    m = values.size - values.size // 2
    bound = {n: ks_lower_bound(m, n) for n in ns}
    return GpuMaxSplits(ns, model, halves, perfect, refit, bound, dict(families))
