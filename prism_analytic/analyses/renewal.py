"""The renewal law of a run with failures, restarts and checkpoints, in every failure regime.

Model (Daly 2006; failures a Poisson process of rate ``lam`` in wall time, also during
restarts and checkpoint writes):

* The work ``W`` is cut into ``n = floor(W / tau)`` segments of ``tau`` seconds of work, each
  followed by a checkpoint of ``C`` seconds, and a last segment of ``r = W - n tau`` (no
  checkpoint after it). A segment needs ``T`` uninterrupted seconds (``T = tau + C``, or
  ``r``).
* An attempt at a segment fails with probability ``1 - e^(-lam T)``; it then loses the time
  to the failure, ``X`` ~ Exp(lam) truncated to ``[0, T]``, and a restart, and the segment is
  redone from its start (the last checkpoint).
* A restart needs ``R`` uninterrupted seconds; a failure during it loses ``Y`` ~ Exp(lam)
  truncated to ``[0, R]`` and the restart begins again.

So a segment takes ``S(T) = T + sum_{i <= N} (X_i + Q_i)`` with ``N`` ~ Geometric(e^(-lam T))
failures and restarts ``Q = R + sum_{j <= K} Y_j``, ``K`` ~ Geometric(e^(-lam R)); the run is
the sum of independent segments. Everything has a closed form:

* ``E[S(T)] = expm1(lam T) e^(lam R) / lam`` (:func:`log_expected_segment`, in logs, so
  that it never overflows; a mean beyond the largest float is reported as ``inf``).
* The characteristic function ``E[exp(u (S - T))]`` (:func:`log_cf_excess`) is written
  without a difference of nearly equal numbers, so that it stays exact when ``e^(-lam T)``
  or ``e^(-lam R)`` is tiny (failure-dominated runs) and when it is close to 1 (rare
  failures); the run's characteristic function is its ``n``-th power times the last
  segment's.

:func:`run_wall_law` inverts that characteristic function on a lattice, convolved with the
law of the work (a normal mixture over allocations, cut into narrow strata, each with its own
number of segments) and with the fail-slow episodes, a compound Poisson time whose count
follows the run's own length (the run's transform taken at a shifted exponent). The lattice is
sized from proven tail bounds (Chernoff bounds of the failure counts, gamma quantiles of the
lost times, Poisson and gamma quantiles of the fail-slow episodes), so that the mass it folds
over is at most ``10 * TAIL_EPS`` plus the work's tails beyond 8 sigma.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

__all__ = [
    "LOG_FLOAT_MAX",
    "TAIL_EPS",
    "WallLaw",
    "WorkMixture",
    "expected_run",
    "log_cf_excess",
    "log_expected_run",
    "log_expected_segment",
    "negbin_upper",
    "run_wall_law",
    "segments",
    "work_strata",
    "wall_upper_bound",
]

#: Beyond this log-mean (seconds) a run's figures are not representable as floats: ``inf``.
LOG_FLOAT_MAX = 690.0
#: Probability each tail bound of the lattice leaves out.
TAIL_EPS = 1e-10
#: Most strata of the work's law.
MAX_STRATA = 480


def log_expected_segment(lam: float, t: np.ndarray | float, restart_s: float) -> np.ndarray:
    """``log E[S(T)]`` of a segment needing ``T`` uninterrupted seconds (``-inf`` at T = 0).

    ``E[S(T)] = expm1(lam T) e^(lam R) / lam`` (``T`` when ``lam = 0``).
    """
    t = np.asarray(t, dtype=float)
    with np.errstate(divide="ignore"):
        if lam <= 0:
            return np.log(t)
        x = lam * t
        # log expm1(x) without overflow: x + log(1 - e^(-x))
        log_em1 = np.where(
            x > 30, x + np.log1p(-np.exp(-np.minimum(x, 700))), np.log(np.expm1(np.minimum(x, 30)))
        )
        return log_em1 + lam * restart_s - math.log(lam)


def log_expected_run(
    lam: float, work_s: np.ndarray | float, interval_s: float, ckpt_s: float, restart_s: float
) -> np.ndarray:
    """``log E[wall | W]`` of ``W`` seconds of work checkpointed every ``interval_s``."""
    n, r = segments(np.asarray(work_s, dtype=float), interval_s)
    full = log_expected_segment(lam, interval_s + ckpt_s, restart_s)
    with np.errstate(divide="ignore"):
        a = np.where(n > 0, np.log(np.maximum(n, 1.0)) + full, -np.inf)
    b = log_expected_segment(lam, r, restart_s)
    return np.logaddexp(a, b)


def expected_run(
    lam: float, work_s: np.ndarray | float, interval_s: float, ckpt_s: float, restart_s: float
) -> np.ndarray:
    """``E[wall | W]`` (seconds; ``inf`` where it exceeds ``exp(LOG_FLOAT_MAX)``)."""
    lg = log_expected_run(lam, work_s, interval_s, ckpt_s, restart_s)
    return np.where(lg > LOG_FLOAT_MAX, np.inf, np.exp(np.minimum(lg, LOG_FLOAT_MAX)))


def _cexpm1(z: np.ndarray) -> np.ndarray:
    """``exp(z) - 1`` for complex ``z``, accurate for small ``|z|`` (numpy's is not)."""
    a, b = z.real, z.imag
    re = np.expm1(a) * np.cos(b) - 2.0 * np.sin(0.5 * b) ** 2
    return re + 1j * np.exp(a) * np.sin(b)


def _clog1p(z: np.ndarray) -> np.ndarray:
    """``log(1 + z)`` for complex ``z``, accurate for small ``|z|`` (numpy's is not)."""
    re = 0.5 * np.log1p(2.0 * z.real + z.real**2 + z.imag**2)
    return re + 1j * np.arctan2(z.imag, 1.0 + z.real)


def log_cf_excess(u: np.ndarray, lam: float, t: float, restart_s: float) -> np.ndarray:
    """``log E[exp(u (S(T) - T))]`` for ``Re u <= 0``, ``u != 0`` (0 at ``u = 0``).

    With ``A = E[e^(uX); X < T]`` and ``phi_Q`` the restart's transform,
    ``E[e^(u (S - T))] = 1 / (1 + e^(lam T) (D - e^(-lam T)))``, ``D = 1 - A phi_Q``; the
    difference ``D - e^(-lam T)`` is expanded so that no two nearly equal numbers are
    subtracted.
    """
    u = np.asarray(u, dtype=complex)
    if lam <= 0 or t <= 0:
        return np.zeros_like(u)
    r = restart_s
    lmu = lam - u
    a_t = -lam * _cexpm1(-lmu * t) / lmu  # E[e^(uX); X < T]
    e_r = np.exp(-lmu * r)
    one_m_phi_q = u * _cexpm1(-lmu * r) / (lam * e_r - u)  # 1 - E[e^(uQ)]
    # D - e^(-lam T) = (1 - A - e^(-lam T)) + A (1 - phi_Q)
    head = (lam * math.exp(-lam * t) * _cexpm1(u * t) + u * math.expm1(-lam * t)) / lmu
    excess = head + a_t * one_m_phi_q
    if lam * t < 600:
        with np.errstate(over="ignore", invalid="ignore"):
            out = -_clog1p(math.exp(lam * t) * excess)
    else:  # e^(lam T) would overflow: -log(1 + e^(lam T) x) = -(lam T + log(e^(-lam T) + x))
        with np.errstate(divide="ignore", invalid="ignore"):
            out = -(lam * t + np.log(math.exp(-lam * t) + excess))
    return np.where(u == 0, 0.0, out)


@dataclass(frozen=True)
class WorkMixture:
    """The law of the run's work (seconds): a mixture of normals (one per allocation)."""

    weights: np.ndarray
    means: np.ndarray
    variances: np.ndarray

    def mean(self) -> float:
        """Expected work."""
        return float(self.weights @ self.means)

    def cdf(self, x: np.ndarray) -> np.ndarray:
        """P(W <= x)."""
        sd = np.sqrt(np.maximum(self.variances, 1e-300))
        return special.ndtr((x[:, None] - self.means[None, :]) / sd[None, :]) @ self.weights

    def range(self, z: float = 9.0) -> tuple[float, float]:
        """Where the work lies but for ``ndtr(-z)`` of its mass on either side."""
        sd = np.sqrt(self.variances)
        return float((self.means - z * sd).min()), float((self.means + z * sd).max())

    def nodes(self, k: int = 24) -> tuple[np.ndarray, np.ndarray]:
        """Gauss-Hermite nodes and weights of the whole mixture (for expectations)."""
        z, w = np.polynomial.hermite_e.hermegauss(k)
        w = w / w.sum()
        sd = np.sqrt(self.variances)
        x = self.means[:, None] + sd[:, None] * z[None, :]
        return x.ravel(), (self.weights[:, None] * w[None, :]).ravel()


@dataclass(frozen=True)
class WallLaw:
    """A run's wall time (seconds): points ``x``, the CDF there, the exact mean.

    Each stratum of the work has its own lattice, smoothed by a normal of twice its step
    (so that the inversion does not ring at atoms): its quantile at level ``p`` lies within
    13 steps of the exact one at a level within ``2e-9 + 10 TAIL_EPS`` of ``p`` (six
    smoothing stds, one step). ``resolution``: half the spread of p1, p50 and p99 between
    the mixtures with every stratum so moved down and up; ``h``: the strata's mean step;
    ``outside``: the mass the lattices may fold over or leave out. ``shift``: the exact mean
    less the lattices' (a fraction of a step or of a stratum's width; the law is not moved).
    ``at_inf``: the probability of a run no float holds (a failure whose expected cost
    exceeds ``exp(LOG_FLOAT_MAX)``); the CDF tops out at ``1 - at_inf``.
    """

    x: np.ndarray
    cdf: np.ndarray
    mean: float
    h: float
    outside: float
    shift: float
    resolution: float = 0.0
    at_inf: float = 0.0


def negbin_upper(m: float, lam_t: float, eps: float = TAIL_EPS) -> float:
    """A count the failures of ``m`` segments reach with probability ``<= eps`` (Chernoff).

    One segment's failures ``N`` have ``P(N >= k) = q^k``, ``q = 1 - e^(-lam T)``; for the
    sum ``S`` of ``m`` of them and any ``a`` above its mean, ``P(S >= a) <= exp(f(a))`` with
    ``f(a) = a (log1p(m / a) + log q) + m (log1p(a / m) - lam T)`` (the Chernoff bound at its
    optimal exponent). Returns the root of ``f(a) = log eps``.
    """
    if m <= 0 or lam_t <= 0:
        return 0.0
    log_q = math.log1p(-math.exp(-lam_t)) if lam_t > 0.7 else math.log(-math.expm1(-lam_t))
    mean = m * math.expm1(lam_t)

    def f(a: float) -> float:
        return a * (math.log1p(m / a) + log_q) + m * (math.log1p(a / m) - lam_t) - math.log(eps)

    hi = max(2 * mean, 1.0)
    while f(hi) > 0:
        hi *= 2
    return float(optimize.brentq(f, mean, hi, rtol=1e-10)) if f(mean) > 0 else hi


def wall_upper_bound(
    lam: float, segments: float, t: float, restart_s: float, eps: float = TAIL_EPS
) -> float:
    """Lost time (failed attempts + restarts) of ``segments`` segments, exceeded w.p. <= 4 eps.

    At most ``N`` = :func:`negbin_upper` failures, each restarted in ``R`` and losing at most
    ``T`` and (a truncated exponential is below an untruncated one) a total below
    Gamma(N, 1 / lam); likewise at most ``K`` failed restarts, each losing at most ``R``.
    """
    if lam <= 0 or segments <= 0 or t <= 0:
        return 0.0
    n_q = negbin_upper(segments, lam * t, eps)
    lost = n_q * restart_s + min(n_q * t, _gamma_isf(eps, n_q, 1.0 / lam))
    if restart_s > 0:
        k_q = negbin_upper(n_q, lam * restart_s, eps)
        lost += min(k_q * restart_s, _gamma_isf(eps, k_q, 1.0 / lam))
    return lost


def _gamma_isf(eps: float, shape: float, scale: float) -> float:
    """Upper ``eps`` quantile of a Gamma(shape, scale) sum (0 for an empty sum)."""
    return float(stats.gamma.isf(eps, shape, scale=scale)) if shape > 0 else 0.0


def _with_failslow(base: float, eta: float, jump: float) -> float:
    """A wall time a run of base time ``base`` exceeds w.p. <= 2 TAIL_EPS with fail-slow.

    A ``t >= base + b(eta t)``, ``b`` the compound Poisson bound: a run longer than ``t``
    would need the episodes within ``[0, t]`` to add more than ``t - base >= b(eta t)``.
    """
    t = base
    for _ in range(200):
        need = base + _failslow_upper_bound(eta * t, jump)
        if t >= need:
            return t
        t = need * 1.01 if t > base else need
    return t


def _failslow_upper_bound(mean_count: float, jump_s: float, eps: float = TAIL_EPS) -> float:
    """Compound Poisson of Exp(jump_s) jumps, exceeded with probability <= 2 eps."""
    if mean_count <= 0 or jump_s <= 0:
        return 0.0
    k = float(stats.poisson.isf(eps, mean_count)) + 1.0
    return float(stats.gamma.isf(eps, k, scale=jump_s))


def work_strata(work: WorkMixture, k: int = 48, z: float = 8.0) -> tuple[np.ndarray, ...]:
    """Strata of the work's law: probability, conditional mean and std, edges (k + 1).

    The edges are the work's quantiles at normal scores ``linspace(-z, z, k + 1)``: narrow
    strata everywhere, finest in the tails (``ndtr(-z)`` of mass left out on either side).
    """
    lo, hi = work.range(z + 1.0)
    grid = np.linspace(lo, hi, 4097)
    c = work.cdf(grid)
    levels = special.ndtr(np.linspace(-z, z, k + 1))
    keep = np.r_[True, np.diff(c) > 0]
    edges = np.interp(levels, c[keep], grid[keep])
    p = np.diff(levels)
    # within a stratum: the conditional mean and std from the CDF on a fine sub-grid
    sub = np.linspace(0.0, 1.0, 17)
    pts = edges[:-1, None] + sub[None, :] * np.diff(edges)[:, None]
    cp = work.cdf(pts.ravel()).reshape(pts.shape)
    mass = np.diff(cp, axis=1)
    mid = 0.5 * (pts[:, 1:] + pts[:, :-1])
    tot = np.maximum(mass.sum(axis=1), 1e-300)
    mean = (mass * mid).sum(axis=1) / tot
    width = np.diff(pts, axis=1)
    var = (mass * ((mid - mean[:, None]) ** 2 + width**2 / 12)).sum(axis=1) / tot
    return p / p.sum(), mean, np.sqrt(var), edges


def run_wall_law(
    work: WorkMixture,
    interval_s: float,
    lam: float,
    ckpt_s: float,
    restart_s: float,
    *,
    failslow: tuple[float, float] = (0.0, 0.0),
    cells: int = 1 << 14,
    strata: int = 48,
) -> WallLaw:
    """The law of a run's wall time: work, checkpoints, failures, restarts, fail-slow.

    The work's law is cut into ``strata`` narrow strata (:func:`work_strata`; more, up to
    ``MAX_STRATA``, where the expected wall varies by more than 5% across one); given the
    work ``W_k`` of a stratum the run's law is exact (the ``n_k``-th power of a full
    segment's transform times the last segment's); within a stratum the work's spread enters
    as a normal of its std times ``(W_k + n_k C) / W_k`` (the work and its checkpoints; the
    failures' dependence on the work is the strata's). Each stratum's runs without a
    failure and with one or more are inverted on lattices of their own (``cells`` points).

    Parameters
    ----------
    work : WorkMixture
        The work's law (the steps alone).
    interval_s : float
        Work between checkpoints (> 0; ``inf``: no checkpoint).
    lam : float
        Failures per second of wall time (>= 0).
    ckpt_s, restart_s : float
        Checkpoint write and restart times (>= 0).
    failslow : (rate per second, extra seconds per episode)
        Fail-slow episodes: Poisson in the wall time (their own extra time included), each
        adding an Exp(extra) time; their count follows the run's own length.
    cells : int
        Points of each lattice (a power of two is fastest).
    strata : int
        Strata of the work's law.

    Returns
    -------
    WallLaw
        Mean ``inf`` when the expected wall time exceeds ``exp(LOG_FLOAT_MAX)`` seconds; the
        runs whose failures no float holds are the CDF's missing top, ``at_inf``.
    """
    xs, ws = work.nodes()
    log_m = log_expected_run(lam, xs, interval_s, ckpt_s, restart_s)
    eta, jump = failslow
    loss = eta * jump
    if loss >= 1:
        raise ValueError(f"fail-slow episodes must add less than the wall time, got {loss:.4g}")
    # beyond LOG_FLOAT_MAX no float holds the mean: inf (the runs without a failure, if
    # they have a chance, still have finite quantiles)
    finite = float(log_m.max()) <= LOG_FLOAT_MAX
    mean_total = float(ws @ np.exp(log_m)) / (1.0 - loss) if finite else math.inf

    p, w_k, sd_k, edges, t_full = *work_strata(work, strata), interval_s + ckpt_s
    # strata fine enough that the expected wall varies by < 5% across each one
    step = float(np.abs(np.diff(log_expected_run(lam, edges, interval_s, ckpt_s, restart_s))).max())
    if step > 0.05 and strata < MAX_STRATA:
        k = int(min(MAX_STRATA, math.ceil(strata * step / 0.05)))
        p, w_k, sd_k, edges = work_strata(work, k)
    n_k, r_k = segments(w_k, interval_s)
    with np.errstate(invalid="ignore"):  # no checkpoint: 0 segments of infinite length
        z_min = np.where(n_k > 0, n_k * t_full, 0.0) + r_k
    # within a stratum: the work itself and its checkpoints (the failures' law is the
    # stratum's own)
    spread_k = sd_k * z_min / np.maximum(w_k, 1e-300)
    # strata whose failed runs no float holds: those runs count as inf
    huge = log_expected_run(lam, edges[1:], interval_s, ckpt_s, restart_s) > LOG_FLOAT_MAX
    lost_k = [
        math.inf
        if hk
        else wall_upper_bound(lam, nk, t_full, restart_s) + wall_upper_bound(lam, 1, rk, restart_s)
        for nk, rk, hk in zip(n_k, r_k, huge, strict=True)
    ]
    fs = (eta, jump)
    laws: list[tuple[np.ndarray, np.ndarray, float]] = []
    weights: list[float] = []
    dropped, at_inf = 0.0, 0.0
    for pk, nk, rk, zk, sk, lk in zip(p, n_k, r_k, z_min, spread_k, lost_k, strict=True):
        # the runs without a failure (probability e^(-lam z)) and those with one or more,
        # each on its own lattice: a rare but long failure does not coarsen the rest
        p_fail = -math.expm1(-lam * zk) if lam > 0 else 0.0
        lo = max(zk - 9 * sk, 0.0)
        spec = (lam, t_full, restart_s, nk, rk, zk, sk, fs)
        if p_fail < 1.0:
            top = _with_failslow(zk + 9 * sk, eta, jump)
            laws.append(_lattice_law(spec, False, lo, top, cells))
            weights.append(pk * (1.0 - p_fail))
        if not math.isfinite(lk):
            at_inf += pk * p_fail
        elif p_fail > 1e-13:
            top = _with_failslow(zk + 9 * sk + lk, eta, jump)
            laws.append(_lattice_law(spec, True, lo, top, cells))
            weights.append(pk * p_fail)
        else:
            dropped += pk * p_fail
    if not laws:
        inf = np.array([np.inf, np.inf])
        return WallLaw(inf, np.zeros(2), mean_total, math.inf, dropped, math.inf, math.inf, 1.0)
    w = np.array(weights)
    x = np.unique(np.concatenate([xl[:: max(xl.size // 512, 1)] for xl, _, _ in laws]))
    x = np.unique(np.concatenate([x, [xl[-1] for xl, _, _ in laws]]))
    lattice_mean = sum(wk * float(np.diff(c, prepend=0.0) @ xl) for wk, (xl, c, _) in zip(w, laws))
    cdf = _mixture(x, w, laws, 0.0)
    # each lattice's quantiles are within 13 of its steps of the exact ones: the mixture's
    # p1, p50, p99 within the quantiles of the mixtures so moved
    lo_c, hi_c = _mixture(x, w, laws, 13.0), _mixture(x, w, laws, -13.0)
    levels = [q for q in (0.01, 0.5, 0.99) if q < hi_c[-1]]
    res = max(
        (float(np.interp(q, lo_c, x) - np.interp(q, hi_c, x)) / 2 for q in levels),
        default=math.inf,
    )
    h = float(w @ np.array([hk for _, _, hk in laws])) / float(w.sum())
    outside = 10 * TAIL_EPS + 2 * float(special.ndtr(-8.0)) + dropped
    shift = mean_total - lattice_mean
    return WallLaw(x, cdf, mean_total, h, outside, shift, max(res, 0.0), at_inf)


def _mixture(x: np.ndarray, p: np.ndarray, laws: list, steps: float) -> np.ndarray:
    """CDF of a mixture of lattice laws at ``x``, each moved by ``steps`` of its steps."""
    out = np.zeros(x.size)
    for pk, (xl, c, hk) in zip(p, laws, strict=True):
        out += pk * np.interp(x, xl + steps * hk, c, left=0.0, right=1.0)
    return np.minimum(out, 1.0)


def _lattice_law(
    spec: tuple, failed: bool, lo: float, hi: float, cells: int
) -> tuple[np.ndarray, np.ndarray, float]:
    """A stratum's run time, without failures or given one at least, on its own lattice.

    ``spec`` is ``(lam, T_full, R, n, r, z, spread, (fail-slow count, extra))``. Returns the
    points, the CDF there and the lattice step.
    """
    lam, t_full, restart_s, n, r, z, spread, (eta, jump) = spec
    width = max(hi - lo, abs(lo) * 1e-12, 1e-9)
    h = width / (0.9 * cells)
    x0 = lo - 0.05 * width
    u = -2j * math.pi * np.arange(cells // 2 + 1) / (cells * h)
    sigma = 2.0 * h  # smoothing: the inversion below resolves nothing finer than h
    v = _failslow_subordinator(u, eta, jump)
    # fail-slow episodes at rate eta in the wall time add to a run of base time B a compound
    # Poisson time: E[e^(u (B + FS))] = E[e^(v B)], v = u + eta (phi_J'(u) - 1)
    lg = v * z - u * x0 + 0.5 * (u * sigma) ** 2 + 0.5 * (v * spread) ** 2
    cf = np.exp(lg)
    u = v
    if failed:
        # E[e^(u L); L > 0] / P(L > 0) for the lost time L, whose atom at 0 is e^(-lam z):
        # (expm1(log phi_L) + 1 - e^(-lam z)) / (1 - e^(-lam z)), no difference of near-equals
        log_phi = np.zeros_like(u)
        if n > 0:
            log_phi = log_phi + n * log_cf_excess(u, lam, t_full, restart_s)
        if r > 0:
            log_phi = log_phi + log_cf_excess(u, lam, r, restart_s)
        q = -math.expm1(-lam * z)
        cf = cf * (_cexpm1(log_phi) + q) / q
    pmf = np.clip(np.fft.irfft(cf, cells), 0.0, None)
    # no run is shorter than its work and checkpoints: the smoothing's mass below goes there
    first = int(np.clip(math.ceil((lo - x0) / h + 0.5), 0, cells - 1))
    pmf[first] += pmf[:first].sum()
    pmf[:first] = 0.0
    pmf /= pmf.sum()
    x = x0 + h * (np.arange(cells) + 0.5)
    return x[first:], np.cumsum(pmf)[first:], h


def _failslow_subordinator(u: np.ndarray, eta: float, jump: float) -> np.ndarray:
    """``u + eta (phi_J'(u) - 1)``: the exponent a run's base time is taken at.

    ``J'`` is an episode's extra time ``J`` ~ Exp(jump) with the episodes arriving during it:
    ``phi_J'(u) = phi_J(u + eta (phi_J'(u) - 1))``, a contraction while ``eta E[J] < 1``.
    """
    if eta <= 0 or jump <= 0:
        return u
    phi = 1.0 / (1.0 - u * jump)
    for _ in range(500):
        new = 1.0 / (1.0 - (u + eta * (phi - 1.0)) * jump)
        done = np.max(np.abs(new - phi)) < 1e-15
        phi = new
        if done:
            break
    return u + eta * (phi - 1.0)


def segments(work: np.ndarray, interval_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Full checkpoint segments and the last segment's work (``inf`` interval: none)."""
    if math.isinf(interval_s):
        return np.zeros_like(work), np.asarray(work, dtype=float)
    n = np.floor(work / interval_s)
    return n, np.maximum(work - n * interval_s, 0.0)
