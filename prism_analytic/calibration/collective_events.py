"""Rare per-iteration collective events whose rate grows with the nodes spanned.

Model (stated so that it can fail). One iteration of a collective over ``n`` nodes takes
``c_n * Y`` where ``c_n`` is a deterministic per-node latency scale and

* ``Y = M_n`` (no event): ``M_n`` the slowest of ``n`` independent per-node lognormal
  multipliers of shape ``sigma`` (median 1), i.e. ``P(M_n <= y) = Phi(ln y / sigma)^n``;
* ``Y = m_n + D`` (event), with probability ``P_n = 1 - (1 - rate)^n``: at least one of the
  ``n`` nodes is hit by an event (an OS or daemon preemption, a link retransmission) that
  delays the whole iteration by ``D`` (the collective waits for its slowest rank).
  ``m_n`` is the median of ``M_n`` and ``D`` is lognormal with median
  ``size * tier_growth ** (t_n - 1)`` (in units of ``c_n``) and shape ``size_sigma``;
  ``t_n`` is the number of switch tiers of a fat tree of radix ``radix`` the ``n`` nodes
  need (:func:`~prism_analytic.workload.scale_variability.fat_tree_tiers`), so that an
  event's size can grow with the tiers a message crosses (``tier_growth > 1``) while its
  probability grows with the nodes (per-node rate).

The event part leaves out the body's own spread (``m_n + D`` instead of ``M_n + D``): the
body is narrow (``sigma`` a few %) next to ``D`` (0.5-3x the median), so this changes
quantiles in the event range by about ``sigma * m_n``; the Monte Carlo in
:func:`predicted_ratio_interval` draws from the same law, so fit, prediction and interval
use one law.

Fit: maximum likelihood over every iteration at every fitted node count, with a free scale
``c_n`` per node count (absolute latencies differ between runs; ratios do not need them),
and a covariance from the observed information (numerical Hessian, statsmodels); the
intervals of :func:`predicted_ratio_interval` include both that parameter uncertainty and
the sampling spread of a ratio over the measured number of iterations. ``tier_growth`` is
fitted only when the fitted node counts span at least two tier levels; otherwise it is
held at 1 and reported as not identified.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np
from scipy import optimize, special
from statsmodels.tools.numdiff import approx_hess3

from ..workload.scale_variability import fat_tree_tiers

__all__ = [
    "EventNoise",
    "CollectiveEventFit",
    "fit_event_noise",
    "predicted_ratio_interval",
    "sample_iterations",
]

#: Free parameters, in the order of the fit's vector (log scale for all of them).
PARAMS = ("sigma", "rate", "size", "size_sigma", "tier_growth")


@dataclass(frozen=True)
class EventNoise:
    """Per-node body plus a rare per-node event (see the module notes).

    Parameters
    ----------
    sigma : float
        Lognormal shape of one node's latency multiplier (> 0).
    rate : float
        Per node and iteration, probability of an event, in [0, 1).
    size : float
        Median event delay at one switch tier, in units of the per-node latency scale.
    size_sigma : float
        Lognormal shape of the event delay (> 0).
    tier_growth : float
        Factor on the event delay per extra tier crossed (1 = size independent of tiers).
    radix : int
        Fat-tree switch radix that sets the tiers (>= 4, even).
    """

    sigma: float
    rate: float
    size: float
    size_sigma: float
    tier_growth: float = 1.0
    radix: int = 40

    def __post_init__(self) -> None:
        for name in ("sigma", "size", "size_sigma", "tier_growth"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if not 0 <= self.rate < 1:
            raise ValueError(f"rate must be in [0, 1), got {self.rate!r}")

    def hit_prob(self, n: int) -> float:
        """P(at least one of ``n`` nodes is hit in one iteration)."""
        return float(-math.expm1(n * math.log1p(-self.rate))) if self.rate > 0 else 0.0

    def event_median(self, n: int) -> float:
        """Median event delay for ``n`` nodes (units of the per-node scale)."""
        return self.size * self.tier_growth ** (fat_tree_tiers(n, self.radix) - 1)

    def body_median(self, n: int) -> float:
        """Median of the slowest of ``n`` body multipliers."""
        return math.exp(self.sigma * special.ndtri(0.5 ** (1.0 / n)))

    def cdf(self, y: np.ndarray, n: int) -> np.ndarray:
        """P(Y <= y) for one iteration over ``n`` nodes."""
        y = np.asarray(y, dtype=float)
        ly = np.log(np.maximum(y, 1e-300))
        body = np.exp(n * special.log_ndtr(ly / self.sigma))
        d = np.maximum(y - self.body_median(n), 1e-300)
        ev = special.ndtr((np.log(d) - math.log(self.event_median(n))) / self.size_sigma)
        ev = np.where(y > self.body_median(n), ev, 0.0)
        p = self.hit_prob(n)
        return (1 - p) * body + p * ev

    def logpdf(self, y: np.ndarray, n: int) -> np.ndarray:
        """Log density of Y for one iteration over ``n`` nodes."""
        y = np.asarray(y, dtype=float)
        ly = np.log(np.maximum(y, 1e-300))
        z = ly / self.sigma
        log_body = (
            math.log(n)
            + (n - 1) * special.log_ndtr(z)
            - 0.5 * z * z
            - 0.5 * math.log(2 * math.pi)
            - math.log(self.sigma)
            - ly
        )
        m = self.body_median(n)
        d = y - m
        ld = np.log(np.maximum(d, 1e-300))
        u = (ld - math.log(self.event_median(n))) / self.size_sigma
        log_ev = -0.5 * u * u - 0.5 * math.log(2 * math.pi) - math.log(self.size_sigma) - ld
        log_ev = np.where(d > 0, log_ev, -np.inf)
        if self.rate == 0:
            return log_body
        log_miss = n * math.log1p(-self.rate)  # log P(no node hit), kept in logs for big n
        log_hit = math.log(-math.expm1(log_miss))
        return np.logaddexp(log_body + log_miss, log_ev + log_hit)

    def quantile(self, p: np.ndarray, n: int) -> np.ndarray:
        """Quantiles of Y (bisection in log y on the monotone CDF)."""
        p = np.asarray(p, dtype=float)
        lo, hi = np.full(p.shape, -5.0), np.full(p.shape, 8.0)
        for _ in range(70):
            mid = 0.5 * (lo + hi)
            below = self.cdf(np.exp(mid), n) < p
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return np.exp(0.5 * (lo + hi))

    def ratios(self, n: int, levels=(0.9, 0.99)) -> np.ndarray:
        """``Q(p) / Q(0.5)`` at ``levels`` for ``n`` nodes (the law's, no sampling)."""
        q = self.quantile(np.array([0.5, *levels]), n)
        return q[1:] / q[0]

    def to_dict(self) -> dict:
        """Plain dict."""
        return asdict(self)


def sample_iterations(
    model: EventNoise, n: int, size: tuple[int, ...], rng: np.random.Generator
) -> np.ndarray:
    """Draws of Y for ``n`` nodes (the law of :class:`EventNoise`, scale ``c_n = 1``)."""
    u = rng.uniform(size=size)
    body = np.exp(model.sigma * special.ndtri(u ** (1.0 / n)))
    hit = rng.uniform(size=size) < model.hit_prob(n)
    d = model.event_median(n) * np.exp(model.size_sigma * rng.standard_normal(size))
    return np.where(hit, model.body_median(n) + d, body)


@dataclass(frozen=True)
class CollectiveEventFit:
    """A fitted :class:`EventNoise` with the uncertainty of its free parameters.

    ``cov`` is the covariance of the log-parameters listed in ``free`` (observed
    information); ``intervals`` are 95% Wald intervals mapped back to natural units;
    ``not_identified`` names parameters held fixed because the data cannot set them.
    """

    model: EventNoise
    free: tuple[str, ...]
    cov: np.ndarray
    scales: dict[int, float]
    loglik: float
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    not_identified: tuple[str, ...] = ()

    def draw_models(self, k: int, rng: np.random.Generator) -> list[EventNoise]:
        """``k`` models with parameters drawn from the fit's asymptotic normal law."""
        base = np.array([math.log(getattr(self.model, p)) for p in self.free])
        draws = rng.multivariate_normal(base, self.cov, size=k, method="eigh")
        out = []
        for v in draws:
            kw = {p: math.exp(x) for p, x in zip(self.free, v)}
            kw["rate"] = min(kw.get("rate", self.model.rate), 0.5)
            out.append(replace(self.model, **kw))
        return out

    def to_dict(self) -> dict:
        """Plain dict (model, intervals, identification)."""
        return {
            "model": self.model.to_dict(),
            "intervals_95": {k: list(v) for k, v in self.intervals.items()},
            "not_identified": list(self.not_identified),
            "scales_s": {str(k): v for k, v in self.scales.items()},
            "loglik": self.loglik,
        }


def _check_samples(samples: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    if not samples:
        raise ValueError("samples must hold at least one node count")
    out = {}
    for n, x in samples.items():
        if int(n) != n or n < 1:
            raise ValueError(f"samples: node count must be an integer >= 1, got {n!r}")
        x = np.asarray(x, dtype=float)
        if x.ndim != 1 or len(x) < 50:
            raise ValueError(f"samples[{n}]: need a 1-D array of >= 50 iterations")
        if not np.all(np.isfinite(x) & (x > 0)):
            raise ValueError(f"samples[{n}]: latencies must be finite and > 0")
        out[int(n)] = x
    return out


def fit_event_noise(
    samples: dict[int, np.ndarray], *, radix: int = 40, fit_tier_growth: bool | None = None
) -> CollectiveEventFit:
    """Maximum-likelihood fit of :class:`EventNoise` to iterations at several node counts.

    Parameters
    ----------
    samples : dict
        ``{nodes: per-iteration latencies (s)}`` of one collective, algorithm and message size.
    radix : int
        Fat-tree radix that sets each node count's tiers.
    fit_tier_growth : bool, optional
        Fit ``tier_growth``; default: only when the node counts span >= 2 tier levels.

    Returns
    -------
    CollectiveEventFit
    """
    samples = _check_samples(samples)
    ns = sorted(samples)
    tiers = {fat_tree_tiers(n, radix) for n in ns}
    if fit_tier_growth is None:
        fit_tier_growth = len(tiers) >= 2
    if fit_tier_growth and len(tiers) < 2:
        raise ValueError(
            f"fit_tier_growth needs node counts on >= 2 tier levels (radix {radix}: "
            f"{sorted(tiers)})"
        )
    free = PARAMS if fit_tier_growth else PARAMS[:4]
    logx = {n: np.log(samples[n]) for n in ns}

    def unpack(v: np.ndarray) -> tuple[EventNoise, dict[int, float]]:
        kw = {p: math.exp(x) for p, x in zip(free, v[: len(free)])}
        kw["rate"] = min(kw["rate"], 0.5)
        model = EventNoise(radix=radix, **kw)
        return model, {n: float(v[len(free) + i]) for i, n in enumerate(ns)}

    def nll(v: np.ndarray) -> float:
        try:
            model, logc = unpack(v)
        except (ValueError, OverflowError):
            return 1e300
        total = 0.0
        for n in ns:
            lp = model.logpdf(np.exp(logx[n] - logc[n]), n) - logc[n]
            total += float(np.sum(lp))
        return -total if math.isfinite(total) else 1e300

    # Starting values from the data (body shape from the p75/p50 spread of the slowest of n,
    # events from the iterations above 1.3x the median), then one bounded quasi-Newton run;
    # the bounds keep the body a body (sigma <= 0.5) and an event rare (rate <= 5% per node).
    n0 = ns[-1]
    x0 = samples[n0] / np.median(samples[n0])
    z = special.ndtri(0.75 ** (1 / n0)) - special.ndtri(0.5 ** (1 / n0))
    sigma0 = min(max(math.log(np.quantile(x0, 0.75)) / z, 2e-3), 0.4)
    ex = x0[x0 > 1.3] - 1
    frac = max(len(ex), 1) / len(x0)
    rate0 = min(max(-math.log1p(-min(frac, 0.5)) / n0, 1e-8), 0.04)
    size0 = float(np.median(ex)) if len(ex) else 0.5
    ssig0 = float(np.std(np.log(ex))) if len(ex) > 2 else 0.5
    lo = [math.log(1e-3), math.log(1e-9), math.log(0.02), math.log(0.05)]
    hi = [math.log(0.5), math.log(0.05), math.log(100.0), math.log(3.0)]
    if fit_tier_growth:
        lo.append(math.log(0.1))
        hi.append(math.log(10.0))
    logc0 = [
        float(np.median(logx[n])) - math.log(EventNoise(sigma0, 0.0, 1, 1).body_median(n))
        for n in ns
    ]
    lo += [v - 5 for v in logc0]
    hi += [v + 5 for v in logc0]
    # size and tier growth trade off along a ridge: start from several growths, the size
    # scaled so that the largest node count's event median stays where the data put it
    t0 = fat_tree_tiers(n0, radix)
    best = None
    for g0 in (0.7, 1.0, 1.5, 2.5) if fit_tier_growth else (1.0,):
        v0 = [
            math.log(sigma0),
            math.log(rate0),
            math.log(min(max(size0 / g0 ** (t0 - 1), 0.03), 90.0)),
            math.log(min(max(ssig0, 0.1), 2.5)),
        ]
        if fit_tier_growth:
            v0.append(math.log(g0))
        r = optimize.minimize(
            nll, np.array(v0 + logc0), method="L-BFGS-B", bounds=list(zip(lo, hi))
        )
        if best is None or r.fun < best.fun:
            best = r
    model, logc = unpack(best.x)
    hess = approx_hess3(best.x, nll)
    try:
        cov_all = np.linalg.inv(hess)
    except np.linalg.LinAlgError:
        cov_all = np.linalg.pinv(hess)
    k = len(free)
    cov = cov_all[:k, :k]
    cov = 0.5 * (cov + cov.T)
    # a non-positive variance means the likelihood is flat along that direction
    not_id = [p for i, p in enumerate(free) if not (cov[i, i] > 0 and math.isfinite(cov[i, i]))]
    if not fit_tier_growth:
        not_id.append("tier_growth")
    w, vecs = np.linalg.eigh(cov)
    cov = (vecs * np.maximum(w, 0.0)) @ vecs.T
    intervals = {}
    for i, p in enumerate(free):
        se = math.sqrt(max(cov[i, i], 0.0))
        x = math.log(getattr(model, p))
        intervals[p] = (math.exp(x - 1.96 * se), math.exp(x + 1.96 * se))
    return CollectiveEventFit(
        model=model,
        free=tuple(free),
        cov=cov,
        scales={n: math.exp(c) for n, c in logc.items()},
        loglik=-float(best.fun),
        intervals=intervals,
        not_identified=tuple(not_id),
    )


def predicted_ratio_interval(
    fit: CollectiveEventFit | EventNoise,
    n: int,
    iterations: int,
    *,
    levels: tuple[float, ...] = (0.9, 0.99),
    reps: int = 400,
    seed: int = 0,
    coverage: float = 0.90,
) -> dict[float, tuple[float, float, float]]:
    """Predictive interval of the sample ratio ``Q(p) / Q(0.5)`` over ``iterations`` draws.

    Each replicate draws a parameter vector from the fit's asymptotic law (when ``fit`` is
    an :class:`CollectiveEventFit`), then ``iterations`` iterations at ``n`` nodes, and takes the
    numpy-default sample quantiles, as the measured ratios are taken.

    Returns
    -------
    dict
        ``{level: (lower, median, upper)}`` of the replicate ratios at ``coverage``.
    """
    if iterations < 2:
        raise ValueError(f"iterations must be >= 2, got {iterations}")
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be in (0, 1), got {coverage}")
    rng = np.random.default_rng(seed)
    if isinstance(fit, CollectiveEventFit):
        models = fit.draw_models(reps, rng)
    else:
        models = [fit] * reps
    ratios = {p: np.empty(reps) for p in levels}
    for i, m in enumerate(models):
        x = sample_iterations(m, n, (iterations,), rng)
        q = np.quantile(x, [0.5, *levels])
        for j, p in enumerate(levels):
            ratios[p][i] = q[j + 1] / q[0]
    a = (1 - coverage) / 2
    return {
        p: (
            float(np.quantile(r, a)),
            float(np.median(r)),
            float(np.quantile(r, 1 - a)),
        )
        for p, r in ratios.items()
    }
