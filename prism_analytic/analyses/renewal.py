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
law of the work (a normal mixture over allocations, whose deviation from its mean is scaled
by the slope of the expected wall in the work) and with the compound Poisson law of fail-slow
episodes. The lattice is sized from proven tail bounds (the failure counts are stochastically
below gamma variables), so that the mass it folds over is at most ``4 * TAIL_EPS``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

__all__ = [
    "LOG_FLOAT_MAX",
    "TAIL_EPS",
    "WallLaw",
    "WorkMixture",
    "expected_run",
    "log_cf_excess",
    "log_expected_run",
    "log_expected_segment",
    "run_wall_law",
    "wall_upper_bound",
]

#: Beyond this log-mean (seconds) a run's figures are not representable as floats: ``inf``.
LOG_FLOAT_MAX = 690.0
#: Probability each tail bound of the lattice leaves out.
TAIL_EPS = 1e-10


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
    w = np.asarray(work_s, dtype=float)
    n = np.floor(w / interval_s)
    r = np.maximum(w - n * interval_s, 0.0)
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
    subtracted (requires ``lam T`` and ``lam R`` below ``LOG_FLOAT_MAX``).
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
    with np.errstate(over="ignore", invalid="ignore"):
        out = -_clog1p(math.exp(lam * t) * excess)
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
    """A run's wall time (seconds) on a lattice: points ``x``, CDF there, exact mean.

    ``h`` is the lattice step; the law is smoothed by a normal of std ``2 h`` (so that its
    inversion does not ring at atoms), and at most ``outside`` of its mass folds over the
    lattice's ends. ``slope`` is the factor the work's deviation from its mean is scaled by;
    ``shift`` the shift that gives the lattice the exact mean (what scaling the work's
    deviation linearly misses, at most a segment's worth).
    """

    x: np.ndarray
    cdf: np.ndarray
    mean: float
    h: float
    outside: float
    slope: float
    shift: float


def wall_upper_bound(
    lam: float, segments: float, t_full: float, restart_s: float, eps: float = TAIL_EPS
) -> float:
    """Lost time (failed attempts + restarts) of ``segments`` segments exceeded w.p. <= 2 eps.

    A Geometric(p) count ``N`` has ``P(N >= k) = (1 - p)^k``, so it is stochastically below
    ``E / theta`` with ``E`` ~ Exp(1), ``theta = -log(1 - p)``: a sum of ``m`` counts is
    below Gamma(m, 1 / theta). Each lost attempt is at most ``T``, each failed restart ``R``.
    """
    if lam <= 0 or segments <= 0:
        return 0.0
    # one segment's failures: P(N >= k) = (1 - e^(-lam T))^k, theta = -log(1 - e^(-lam T))
    th_t = -math.log(-math.expm1(-lam * t_full))
    n_q = float(stats.gamma.isf(eps, segments, scale=1.0 / th_t))
    lost = n_q * (t_full + restart_s)
    if restart_s > 0 and n_q > 0:
        th_r = -math.log(-math.expm1(-lam * restart_s))
        lost += restart_s * float(stats.gamma.isf(eps, n_q, scale=1.0 / th_r))
    return lost


def _failslow_upper_bound(mean_count: float, jump_s: float, eps: float = TAIL_EPS) -> float:
    """Compound Poisson of Exp(jump_s) jumps, exceeded with probability <= 2 eps."""
    if mean_count <= 0 or jump_s <= 0:
        return 0.0
    k = float(stats.poisson.isf(eps, mean_count)) + 1.0
    return float(stats.gamma.isf(eps, k, scale=jump_s))


def run_wall_law(
    work: WorkMixture,
    interval_s: float,
    lam: float,
    ckpt_s: float,
    restart_s: float,
    *,
    failslow: tuple[float, float] = (0.0, 0.0),
    cells: int = 1 << 18,
) -> WallLaw:
    """The law of a run's wall time: work, checkpoints, failures, restarts, fail-slow.

    Parameters
    ----------
    work : WorkMixture
        The work's law (the steps alone).
    interval_s : float
        Work between checkpoints (> 0).
    lam : float
        Failures per second of wall time (>= 0).
    ckpt_s, restart_s : float
        Checkpoint write and restart times (>= 0).
    failslow : (rate per second, extra seconds per episode)
        Fail-slow episodes: Poisson in wall time, each adding an Exp(extra) time.
    cells : int
        Lattice size (a power of two is fastest).

    Returns
    -------
    WallLaw
        All ``inf`` when the expected wall time exceeds ``exp(LOG_FLOAT_MAX)`` seconds.
    """
    w_bar = work.mean()
    xs, ws = work.nodes()
    log_m = log_expected_run(lam, xs, interval_s, ckpt_s, restart_s)
    eta, jump = failslow
    loss = eta * jump
    if float(log_m.max()) > LOG_FLOAT_MAX or loss >= 1:
        inf = np.array([np.inf, np.inf])
        return WallLaw(inf, np.array([0.0, 1.0]), math.inf, math.inf, 0.0, math.inf, 0.0)
    m = np.exp(log_m)
    mean_fail = float(ws @ m)
    var_w = float(ws @ (xs - w_bar) ** 2)
    slope = float(ws @ ((m - mean_fail) * (xs - w_bar)) / var_w) if var_w > 0 else 1.0
    mean_total = mean_fail / (1.0 - loss)
    fs_count = eta * mean_total  # episodes over the whole wall (their own extra included)

    n = math.floor(w_bar / interval_s)
    r = max(w_bar - n * interval_s, 0.0)
    t_full = interval_s + ckpt_s
    z_min = n * t_full + r
    z_lost = wall_upper_bound(lam, n + 1, t_full, restart_s)
    fs_hi = _failslow_upper_bound(fs_count, jump)
    w_lo, w_hi = work.range()
    lo = z_min + slope * (w_lo - w_bar)
    hi = z_min + z_lost + fs_hi + slope * (w_hi - w_bar)
    width = max(hi - lo, abs(z_min) * 1e-12, 1e-9)
    h = width / (0.9 * cells)
    x0 = lo - 0.05 * width

    k = np.arange(cells // 2 + 1)
    u = -2j * math.pi * k / (cells * h)
    log_cf = u * (z_min - x0)
    if n > 0:
        log_cf = log_cf + n * log_cf_excess(u, lam, t_full, restart_s)
    if r > 0:
        log_cf = log_cf + log_cf_excess(u, lam, r, restart_s)
    if fs_count > 0 and jump > 0:
        log_cf = log_cf + fs_count * u * jump / (1.0 - u * jump)
    sigma = 2.0 * h  # smoothing: the inversion below resolves nothing finer than h
    log_cf = log_cf + 0.5 * (u * sigma) ** 2
    cf = np.exp(log_cf) * _work_cf(work, slope, h, cells)
    pmf = np.clip(np.fft.irfft(cf, cells), 0.0, None)
    pmf /= pmf.sum()
    x = x0 + h * (np.arange(cells) + 0.5)
    lattice_mean = float(pmf @ (x - 0.5 * h))
    shift = mean_total - lattice_mean
    outside = 4 * TAIL_EPS + 2 * float(special.ndtr(-9.0))
    return WallLaw(x + shift, np.cumsum(pmf), mean_total, h, outside, slope, shift)


def _work_cf(work: WorkMixture, slope: float, h: float, cells: int) -> np.ndarray:
    """DFT of ``slope (W - w_bar)`` discretised from its CDF on the lattice (cell masses)."""
    w_bar = work.mean()
    w_lo, w_hi = work.range()
    span = slope * (w_hi - w_lo)
    if span <= 2 * h:  # narrower than a cell: a point at its mean deviation (0)
        return np.ones(cells // 2 + 1, dtype=complex)
    # the CDF is smooth: evaluate it on 8193 points and interpolate to the cell edges
    grid = np.linspace(w_lo, w_hi, 8193)
    c = work.cdf(grid)
    j_lo = max(int(math.floor((slope * (w_lo - w_bar)) / h)) - 1, -(cells // 2))
    j_hi = min(int(math.ceil((slope * (w_hi - w_bar)) / h)) + 1, cells // 2)
    edges = (np.arange(j_lo, j_hi + 2) - 0.5) * h  # cells centred on j h
    ce = np.interp(w_bar + edges / slope, grid, c, left=0.0, right=1.0)
    mass = np.diff(ce)
    mass /= mass.sum()
    arr = np.zeros(cells)
    arr[np.arange(j_lo, j_hi + 1) % cells] = mass
    return np.fft.rfft(arr)
