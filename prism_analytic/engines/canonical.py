"""Correlation-aware Gaussian canonical forms for the makespan of a node-weighted DAG.

:func:`canonical_makespan` propagates ``finish(i) = max(finish(preds)) + D_i`` through a DAG in
topological order and returns a normal approximation of the makespan (max over sinks). Three
methods (notes/pipeline_makespan.md §2, §4):

* ``"clark-mehler"`` (default, "CM"): Clark's max of two Gaussians with exact covariance
  bookkeeping of the linear parts, plus the covariance between the nonlinear residuals of
  different maxima. A residual ``R_k = max(A, B) - (linear part)`` is a function of the unit
  direction ``u_k`` of ``A - B``. Its Hermite coefficients are
  ``theta * phi(alpha) * He_{n-2}(-alpha) / n!`` for n = 2..8, and Mehler's formula gives
  ``Cov(R_k, R_l) = sum_n n! h_k[n] h_l[n] (u_k . u_l)^n``. Only the ``window`` most recent
  residuals are correlated with a new one.
* ``"clark"`` ("CS"): the same bookkeeping with every residual an independent new source. This is
  Clark's (1961) full-covariance propagation, and equals CM with all Mehler terms set to 0.
* ``"independent"``: a moment-matched normal that treats the inputs of every max as independent.
  It is the naive baseline; shared factors only add variance.

Implementation. The notes' dense CM stores, per node, a coefficient vector over all S sources and
all K residuals plus a K x K residual covariance. That costs O(N^3) and took 14-57 s at 16 x 64.
Here every quantity the algorithm needs is kept as inner products over the *live* nodes only,
i.e. nodes with unprocessed successors (about 2-4 per stage in a pipeline):

* ``C``: covariance with every live node;
* ``P``: Gram matrix of the linear parts;
* ``M``: projections of the linear parts on the W windowed residual directions;
* the residual weights on those W residuals;
* each residual's Hermite vector and the factor part of its direction.

Nodes are processed one topological generation at a time, vectorised. The cost is
O(N * (L + W) * 8) for N ops and L live nodes, and does not depend on the number of sources.
With an unlimited window the result equals the dense transcription of notes §4 to 1e-12
(tests/test_canonical.py).

Default window: ``32 x width``, at least 64, where width is the largest topological generation
(at most p for a p-stage pipeline, so W = 32p). The notes' ``W ~ 8p`` is not enough at 16 x 64.
KS against MC (1e6 samples, normal ops, CV 5%) by window W (``full`` = no truncation):

==================  =====  =====  =====  =====  =====  =====  =====  =====
case                W=8    16     32     64     128    256    512    full
==================  =====  =====  =====  =====  =====  =====  =====  =====
1F1B 8x32           0.062  0.054  0.045  0.040  0.038  0.038  0.038  0.038
1F1B 16x64          0.156  0.137  0.124  0.107  0.089  0.075  0.068  0.066
16x64 mean err/σ    +0.36  +0.32  +0.29  +0.25  +0.20  +0.17  +0.15  +0.15
interleaved 8x32    0.027  0.024  0.022  0.020  0.020  0.020  0.020  0.020
imbalanced 8x32     0.010  0.015  0.022  0.027  0.029  0.030  0.030  0.030
==================  =====  =====  =====  =====  =====  =====  =====  =====

The imbalanced row improves as the window shrinks, but only by accident: a shorter window moves
CM towards CS, and on that case the truth lies between CS and full CM. At 16 x 64 the run took
0.048 s at W = 128, 0.057 s at W = 512 (the default) and 0.15 s with no truncation, measured
while the machine was lightly loaded.

Measured accuracy
-----------------
Command: ``python validation/pipeline_methods.py --samples 1000000``. The MC uses seed 12345 and
1e6 samples per case; F mean 1 and B mean 2 (divided by vpp), sd = CV * mean, CV 5% unless
"cv20"; the families are described in that script. Columns: KS distance; relative errors (in %)
of the mean, std, p50, p99, p99.9, the spread p99 - p50 and the p99 of the max over 512 replicas
(r512); the mean and r512 errors in units of the true pipeline σ; compute time in ms (best of 3).

The 2-core machine was shared with other jobs at a load average of 4-5, and times vary about 2x
with that load. CM default-window time in s over several runs was 0.005-0.009 at 4x8, 0.02-0.04
at 8x32, 0.06-0.14 at 1F1B 16x64, 0.15-0.31 at interleaved 16x64 and 0.12-0.47 at 32x64. MC with
1e6 samples took 6-100 s per case. The MC s.e. of r512 is 0.03-0.10σ (0.17σ for stragglers).

::

    case           meth      KS  mean%  std%   p50%   p99% p99.9% sprd%  r512% mean/s r512/s    ms
    ----------------------------------------------------------------------------------------------
    4x8            CM     0.009 +0.015  -0.6 +0.019 -0.021 -0.051  -1.8 -0.033  +0.02  -0.04   4.4
                   clark  0.049 +0.109  -2.7 +0.112 +0.025 -0.019  -3.8 -0.021  +0.11  -0.02   1.3
                   indep  0.386 +0.807 -24.8 +0.810 +0.228 +0.025 -25.7 -0.184  +0.85  -0.20   0.8
    8x32           CM     0.039 +0.035  -2.6 +0.039 -0.006 -0.022  -4.5 -0.092  +0.08  -0.22  20.4
                   clark  0.199 +0.195  -8.3 +0.199 +0.098 +0.064 -10.1 -0.030  +0.47  -0.07   6.1
                   indep  0.766 +0.781 -39.5 +0.784 +0.377 +0.243 -40.7 +0.017  +1.87  +0.04   4.0
    16x64          CM     0.068 +0.039  -5.0 +0.042 -0.002 -0.024  -6.9 -0.073  +0.15  -0.28  67.9
                   clark  0.301 +0.188 -12.0 +0.191 +0.103 +0.066 -13.8 -0.001  +0.71  -0.00  34.8
                   indep  0.838 +0.578 -41.9 +0.581 +0.306 +0.209 -43.1 +0.061  +2.17  +0.23  13.4
    16x64 cv20     CM     0.087 +0.167  -6.3 +0.180 -0.020 -0.116  -9.4 -0.285  +0.19  -0.33 147.7
                   clark  0.352 +0.726 -15.2 +0.738 +0.346 +0.189 -18.0 -0.061  +0.82  -0.07  58.0
                   indep  0.940 +2.244 -63.0 +2.256 +0.865 +0.389 -64.2 -0.281  +2.53  -0.33  42.9
    32x64          CM     0.090 +0.048  -8.2 +0.052 -0.017 -0.041 -11.2 -0.072  +0.19  -0.28 470.2
                   clark  0.280 +0.163 -13.5 +0.167 +0.067 +0.032 -16.3 -0.012  +0.64  -0.05  64.3
                   indep  0.826 +0.525 -45.3 +0.529 +0.240 +0.143 -47.0 +0.017  +2.06  +0.07  52.1
    vpp2 8x32      CM     0.020 +0.010  +4.4 +0.017 +0.025 +0.028  +0.8 +0.021  +0.02  +0.05  81.1
                   clark  0.037 +0.029  +4.0 +0.036 +0.040 +0.042  +0.4 +0.033  +0.07  +0.09  24.7
                   indep  0.901 +0.743 -78.2 +0.751 -0.005 -0.249 -79.0 -0.585  +1.87  -1.50  14.7
    imb 8x32       CM     0.029 -0.037  +1.2 -0.032 -0.049 -0.066  -1.7 -0.089  -0.08  -0.20  38.3
                   clark  0.062 +0.065  -1.8 +0.070 +0.021 -0.006  -4.5 -0.043  +0.14  -0.10  10.6
                   indep  0.795 +0.883 -43.4 +0.888 +0.394 +0.223 -45.0 -0.005  +1.94  -0.01   8.5
    imb 8x32 cv20  CM     0.019 +0.042  -2.3 +0.065 -0.140 -0.259  -5.8 -0.307  +0.03  -0.22  28.5
                   clark  0.185 +0.638  -8.7 +0.661 +0.220 +0.027 -11.9 -0.117  +0.42  -0.08   6.1
                   indep  0.893 +3.373 -57.4 +3.397 +1.211 +0.472 -58.9 -0.384  +2.24  -0.27   8.5
    logn 8x32      CM     0.015 -0.003  -5.1 +0.001 -0.077 -0.109  -7.7 -0.205  -0.01  -0.49  20.5
                   clark  0.164 +0.157 -10.6 +0.161 +0.027 -0.023 -13.0 -0.143  +0.37  -0.34   6.1
                   indep  0.737 +0.742 -41.1 +0.747 +0.306 +0.157 -42.7 -0.095  +1.73  -0.23   4.0
    logn 8x32 cv20 CM     0.104 -0.353 -15.7 -0.317 -1.078 -1.396 -20.0 -2.002  -0.21  -1.31  41.6
                   clark  0.112 +0.250 -21.7 +0.286 -0.719 -1.113 -25.7 -1.819  +0.15  -1.19  10.5
                   indep  0.765 +2.529 -60.6 +2.566 +0.041 -0.826 -62.6 -2.145  +1.54  -1.40   8.3
    mbf r.14 8x32  CM     0.012 -0.011  -3.2 -0.005 -0.084 -0.121  -5.2 -0.222  -0.02  -0.35  23.9
                   clark  0.134 +0.199  -6.9 +0.205 +0.069 +0.013  -8.8 -0.112  +0.31  -0.18  14.2
                   indep  0.558 +0.601 -58.3 +0.607 -0.294 -0.597 -59.1 -1.046  +0.93  -1.67   4.2
    mbf r.96 4x8   CM     0.020 -0.110  -3.1 -0.076 -0.389 -0.622  -6.1 -1.167  -0.05  -0.56   4.9
                   clark  0.027 +0.097  -4.3 +0.131 -0.255 -0.510  -7.3 -1.084  +0.04  -0.52   1.6
                   indep  0.291 +0.231 -68.1 +0.265 -3.341 -4.576 -69.1 -6.393  +0.10  -3.09   0.7
    mbf r.96 8x32  CM     0.226 -0.725 -14.9 -0.696 -1.291 -1.576 -19.1 -1.913  -0.53  -1.49  50.2
                   clark  0.092 -0.217 -17.8 -0.188 -0.888 -1.207 -21.8 -1.588  -0.16  -1.23   7.8
                   indep  0.597 -0.944 -81.5 -0.915 -3.551 -4.475 -82.4 -5.645  -0.69  -4.38   4.4
    strag 8x32     CM     0.408 +0.572 -59.8 +0.897 -2.941 -4.843 -71.8 -7.726  +0.34  -5.16  20.1
                   clark  0.488 +0.845 -62.3 +1.170 -2.774 -4.711 -73.6 -7.638  +0.50  -5.10  10.1
                   indep  0.756 +1.852 -77.0 +2.181 -2.361 -4.483 -83.9 -7.642  +1.10  -5.10   8.6

Reading the table (CM unless stated):

* Normal ops, 1F1B: KS 0.009 / 0.039 / 0.068 / 0.090 at 4x8 / 8x32 / 16x64 / 32x64, growing with
  the depth of the tied lattice (notes §5.1). The mean is high by +0.02…+0.19σ (≤ 0.05% of the
  makespan at CV 5%, 0.17% at CV 20%). std is −0.6…−8%, spread −2…−11%, r512 −0.04…−0.33σ
  (≤ 0.3% of the step time), always low because the true makespan is right-skewed.
* CS has a mean bias of +0.5…+0.8σ at depth and a std error of −8…−15%. The two cancel near the
  r512 level, so on the normal 1F1B cases CS's r512 error is smaller than CM's (|err| ≤ 0.07σ,
  against 0.2-0.33σ for CM). That is a coincidence of the level, not accuracy: CS's p50 is off by
  +0.1…+0.7%, CM's by +0.02…+0.18%.
* Interleaved v2 8x32: KS 0.020, std +4.4%. Imbalanced: KS 0.019–0.029.
* Below the study's targets (notes §6), as measured:
  - lognormal CV 20%: std −16%, r512 −1.3σ (−2.0%);
  - strongly correlated per-microbatch work factors ("mbf r.96", loading 5x the private noise) at
    8x32: KS 0.23, mean −0.53σ, std −15%, r512 −1.5σ. Here CM is *worse* than CS (KS 0.09);
    CM is accurate at 4x8 (KS 0.020) and with weak factors (r.14: KS 0.012);
  - straggler mixtures: std −60%, r512 −5σ, as for every Gaussian-family method (notes §5.4).
  For these regimes, condition on the factors or on the rare events, or use Monte Carlo.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import networkx as nx
import numpy as np
from scipy import special, stats

__all__ = ["METHODS", "HERMITE_ORDER", "CanonicalResult", "canonical_makespan", "default_window"]

METHODS: tuple[str, ...] = ("clark-mehler", "clark", "independent")
#: Highest Hermite order of the Mehler expansion (notes §4: He2 alone carries ~88% at alpha=0).
HERMITE_ORDER = 8
#: Default window = this many residuals per unit of DAG width (widest topological generation).
#: 8 per width (the study's W ~ 8p) loses accuracy at 16x64 (KS 0.089 vs 0.066 untruncated);
#: 32 per width is within 0.002 of untruncated on every measured case and costs ~20% more time.
WINDOW_PER_WIDTH = 32
#: Smallest default window, so narrow graphs keep their whole recent history.
MIN_WINDOW = 64

# theta^2 below this fraction of Var A + Var B is an exact tie of the inputs' random parts
# (e.g. two deterministic shifts of one variable): the max is then the larger-mean input.
_TIE_RTOL = 1e-12
# |a_A - a_B|^2 below this fraction of |a_A|^2 + |a_B|^2 is rounding noise: no residual direction.
_DIR_RTOL = 1e-12
# Residual weights below this are dropped (contribution < 1e-15 of a residual's variance).
_FLUSH = 1e-15
_FACT = np.array([math.factorial(n) for n in range(2, HERMITE_ORDER + 1)], dtype=float)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class CanonicalResult:
    """Normal approximation of a makespan from a canonical-form propagation.

    Attributes
    ----------
    mean, std : float
        Moments of the approximating normal (seconds, or the unit of the inputs).
    method : str
        The method that produced it (one of :data:`METHODS`).
    window : int or None
        Residual window used by "clark-mehler" (None for the other methods).
    n_ops : int
        Number of DAG nodes.
    n_max : int
        Number of pairwise maxima taken (including the final max over sinks).
    """

    mean: float
    std: float
    method: str
    window: int | None = None
    n_ops: int = 0
    n_max: int = 0

    def _z(self, x: np.ndarray) -> np.ndarray:
        if self.std > 0:
            return (x - self.mean) / self.std
        return np.where(x >= self.mean, np.inf, -np.inf)

    def cdf(self, x: float | np.ndarray) -> float | np.ndarray:
        """P(makespan <= x) under the normal approximation."""
        out = special.ndtr(self._z(np.asarray(x, dtype=float)))
        return out if np.ndim(out) else float(out)

    def sf(self, x: float | np.ndarray) -> float | np.ndarray:
        """P(makespan > x), computed directly (not as 1 - cdf)."""
        out = special.ndtr(-self._z(np.asarray(x, dtype=float)))
        return out if np.ndim(out) else float(out)

    def quantile(self, q: float | np.ndarray) -> float | np.ndarray:
        """Quantile at level ``q`` in [0, 1]."""
        qa = _check_levels(q)
        out = (
            self.mean + self.std * special.ndtri(qa)
            if self.std > 0
            else np.full_like(qa, self.mean)
        )
        return out if np.ndim(out) else float(out)

    def replica_quantile(self, q: float | np.ndarray, n: int) -> float | np.ndarray:
        """Quantile of the max of ``n`` i.i.d. copies: ``mean + std * Phi^-1(q^(1/n))``.

        The per-copy level ``q^(1/n)`` is within ~1e-12 of 1 for large ``n``, so it is formed as
        its upper tail ``p = -expm1(log(q) / n)`` and the normal quantile as ``-ndtri(p)``
        (DESIGN §5); accurate for ``n`` up to 1e9 and ``q`` up to 1 - 1e-9.
        """
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        qa = _check_levels(q)
        with np.errstate(divide="ignore"):
            upper = -np.expm1(np.log(qa) / n)
        z = -special.ndtri(upper)
        out = self.mean + self.std * z if self.std > 0 else np.full_like(qa, self.mean)
        return out if np.ndim(out) else float(out)

    def replica_cdf(self, x: float | np.ndarray, n: int) -> float | np.ndarray:
        """CDF of the max of ``n`` i.i.d. copies, ``exp(n * log1p(-sf(x)))``."""
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        out = np.exp(n * np.log1p(-np.asarray(self.sf(x))))
        return out if np.ndim(out) else float(out)

    def to_normal(self) -> stats.distributions.rv_frozen:
        """The approximation as a frozen ``scipy.stats.norm(mean, std)``."""
        return stats.norm(self.mean, self.std)

    def to_dict(self) -> dict[str, object]:
        """Plain-dict form (JSON-friendly)."""
        return {
            "mean": self.mean,
            "std": self.std,
            "method": self.method,
            "window": self.window,
            "n_ops": self.n_ops,
            "n_max": self.n_max,
        }

    def summary(self) -> str:
        """One-line human-readable summary."""
        win = f", window {self.window}" if self.window is not None else ""
        return (
            f"makespan ~ N({self.mean:.6g}, {self.std:.4g}^2) [{self.method}{win}; "
            f"{self.n_ops} ops, {self.n_max} maxima]; p50 {self.quantile(0.5):.6g}, "
            f"p99 {self.quantile(0.99):.6g}"
        )

    def plot(self, ax=None):  # matplotlib is imported lazily
        """Plot the approximate CDF on ``ax`` (a new figure if None); returns the axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        s = self.std if self.std > 0 else max(abs(self.mean), 1.0) * 1e-3
        x = np.linspace(self.mean - 4 * s, self.mean + 4 * s, 400)
        ax.plot(x, self.cdf(x), label=f"{self.method}")
        ax.set_xlabel("makespan")
        ax.set_ylabel("CDF")
        ax.legend()
        return ax


def _check_levels(q: float | np.ndarray) -> np.ndarray:
    qa = np.asarray(q, dtype=float)
    if not np.all((qa >= 0) & (qa <= 1)):
        raise ValueError(f"quantile levels q must lie in [0, 1], got {q!r}")
    return qa


def default_window(graph: nx.DiGraph) -> int:
    """Default residual window: ``max(64, 32 * width)``, width = largest topological generation.

    For a p-stage pipeline the width is at most p, so this is ``W = 32p``: four times the study's
    ``W ~ 8p`` (notes §4), which was measured to lose accuracy at 16 x 64. See the module
    docstring for the measured accuracy cost.

    Examples
    --------
    >>> from prism_analytic.schedules import pipeline_dag
    >>> default_window(pipeline_dag(16, 64))
    512
    """
    width = max((len(gen) for gen in nx.topological_generations(graph)), default=1)
    return max(MIN_WINDOW, WINDOW_PER_WIDTH * width)


def canonical_makespan(
    graph: nx.DiGraph,
    mean: Mapping[Hashable, float],
    std: Mapping[Hashable, float],
    *,
    method: str = "clark-mehler",
    loadings: Mapping[Hashable, Mapping[Hashable, float]] | None = None,
    window: int | None = None,
) -> CanonicalResult:
    """Normal approximation of the makespan of a DAG with random node latencies.

    Each node's latency is ``D_i = mean[i] + sum_f loadings[i][f] * Z_f + std[i] * Z_i`` with
    independent standard normals ``Z_f`` (shared factors, e.g. per-microbatch work or a
    persistent per-stage speed; DESIGN §3) and ``Z_i`` (private noise). ``finish(i)`` is the max
    of the predecessors' finishes plus ``D_i``; the makespan is the max over sinks. Maxima of more
    than two inputs are taken pairwise in increasing-mean order.

    Parameters
    ----------
    graph : networkx.DiGraph
        A directed acyclic graph; nodes are ops.
    mean, std : Mapping
        Per-node latency mean (finite) and private standard deviation (finite, >= 0).
    method : {"clark-mehler", "clark", "independent"}
        ``"clark-mehler"`` (default): Clark's max with an exact Gaussian covariance bookkeeping
        plus the correlation between the nonlinear residuals of different maxima from Mehler's
        formula (Hermite order 8), windowed (notes §4). ``"clark"``: the same bookkeeping with
        every residual an independent source (shared-residual Clark, "CS" in the notes; equal to
        full-covariance Clark 1961). ``"independent"``: moment-matched normal assuming the inputs
        of every max independent (naive baseline; shared factors only add variance).
    loadings : Mapping of Mapping, optional
        ``loadings[node][factor]``: the node's loading on a shared standard-normal factor.
    window : int, optional
        Number of most recent residuals whose Mehler correlation with a new maximum is kept
        ("clark-mehler" only). Default :func:`default_window` (32 x graph width, >= 64). A value
        >= the number of maxima gives the untruncated method. Maxima of one topological
        generation are batched: they all see the window as it was before that generation.

    Returns
    -------
    CanonicalResult

    Raises
    ------
    ValueError
        If the graph is empty or cyclic, a node lacks a finite mean or a finite std >= 0, a
        loading is not finite or names an unknown node, or ``method``/``window`` is invalid.

    Examples
    --------
    >>> g = nx.DiGraph([("a", "c"), ("b", "c")])
    >>> r = canonical_makespan(g, {"a": 1.0, "b": 1.0, "c": 0.0}, {"a": 1.0, "b": 1.0, "c": 0.0})
    >>> round(r.mean, 6)  # E max of two independent N(1, 1) = 1 + 1/sqrt(pi)
    1.56419
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    order, gens, m_arr, s_arr, lmat, preds = _prepare(graph, mean, std, loadings)
    if method == "independent":
        mu, var, nmax = _propagate_independent(gens, preds, m_arr, s_arr, lmat)
        return CanonicalResult(float(mu), math.sqrt(max(var, 0.0)), method, None, len(order), nmax)
    if method == "clark-mehler":
        if window is None:
            window = max(MIN_WINDOW, WINDOW_PER_WIDTH * max(len(g) for g in gens))
        elif isinstance(window, bool) or not isinstance(window, int | np.integer) or window < 1:
            raise ValueError(f"window must be a positive integer or None, got {window!r}")
        n_res = sum(max(len(p) - 1, 0) for p in preds) + len(order)
        window = int(min(window, n_res))
    else:
        window = None
    eng = _Engine(lmat.shape[1], window)
    mu, var, nmax = eng.run(gens, preds, m_arr, s_arr, lmat)
    return CanonicalResult(float(mu), math.sqrt(max(var, 0.0)), method, window, len(order), nmax)


def _prepare(graph, mean, std, loadings):
    """Validate inputs; return topological order, generations (as index arrays) and arrays."""
    if not isinstance(graph, nx.DiGraph):
        raise ValueError(f"graph must be a networkx.DiGraph, got {type(graph).__name__}")
    if graph.number_of_nodes() == 0:
        raise ValueError("graph has no nodes")
    if not nx.is_directed_acyclic_graph(graph):
        raise ValueError("graph must be a directed acyclic graph (it has a cycle)")
    gens_nodes = [list(g) for g in nx.topological_generations(graph)]
    order = [n for g in gens_nodes for n in g]
    index = {n: i for i, n in enumerate(order)}
    m_arr = np.empty(len(order))
    s_arr = np.empty(len(order))
    for i, n in enumerate(order):
        for name, src, out in (("mean", mean, m_arr), ("std", std, s_arr)):
            try:
                val = float(src[n])
            except KeyError:
                raise ValueError(f"node {n!r} has no {name}") from None
            except (TypeError, ValueError):
                raise ValueError(f"node {n!r}: {name} must be a number, got {src[n]!r}") from None
            if not math.isfinite(val) or (name == "std" and val < 0):
                allowed = "finite and >= 0" if name == "std" else "finite"
                raise ValueError(f"node {n!r}: {name} must be {allowed}, got {val!r}")
            out[i] = val
    factors: dict[Hashable, int] = {}
    entries = []
    for node, row in (loadings or {}).items():
        if node not in index:
            raise ValueError(f"loadings given for node {node!r}, which is not in the graph")
        for f, val in row.items():
            val = float(val)
            if not math.isfinite(val):
                raise ValueError(
                    f"node {node!r}: loading on factor {f!r} must be finite, got {val}"
                )
            entries.append((index[node], factors.setdefault(f, len(factors)), val))
    lmat = np.zeros((len(order), len(factors)))
    for i, j, val in entries:
        lmat[i, j] += val
    preds = [[index[p] for p in graph.predecessors(n)] for n in order]
    gens, start = [], 0
    for g in gens_nodes:
        gens.append(np.arange(start, start + len(g)))
        start += len(g)
    return order, gens, m_arr, s_arr, lmat, preds


def _clark(mu_a, mu_b, v_a, v_b, c_ab):
    """Clark's max moments, vectorised, with exact-tie handling.

    Returns T, Tc = 1 - T (computed as a complement), theta * phi(alpha), alpha, mean, var, tie.
    """
    th2 = v_a + v_b - 2.0 * c_ab
    tie = th2 <= _TIE_RTOL * (v_a + v_b)
    th = np.sqrt(np.where(tie, 1.0, th2))
    dmu = mu_a - mu_b
    al = np.where(tie, 0.0, dmu / th)
    t_hi = (dmu >= 0).astype(float)
    t = np.where(tie, t_hi, special.ndtr(al))
    tc = np.where(tie, 1.0 - t_hi, special.ndtr(-al))
    thph = np.where(tie, 0.0, th * _INV_SQRT_2PI * np.exp(-0.5 * al * al))
    mu = mu_a * t + mu_b * tc + thph
    # Var written around the inputs (no E[X^2] - E[X]^2 cancellation of large means).
    var = v_a * t + v_b * tc + dmu * dmu * t * tc + dmu * thph * (tc - t) - thph * thph
    return t, tc, thph, al, mu, np.maximum(var, 0.0), tie


def _propagate_independent(gens, preds, m_arr, s_arr, lmat):
    """Moment-matched normal with independent inputs at every max (the naive baseline)."""
    n = len(preds)
    mu = np.zeros(n)
    var = np.zeros(n)
    v_own = s_arr**2 + np.sum(lmat**2, axis=1)
    nmax = 0

    def reduce(groups):
        """Pairwise Clark max (zero covariance) within each group, increasing-mean order."""
        nonlocal nmax
        groups = [sorted(g, key=lambda k: mu[k]) for g in groups]
        m_acc = np.array([mu[g[0]] for g in groups])
        v_acc = np.array([var[g[0]] for g in groups])
        for rnd in range(1, max(len(g) for g in groups)):
            act = np.array([len(g) > rnd for g in groups])
            nxt = np.array([g[rnd] for g in groups if len(g) > rnd])
            out = _clark(m_acc[act], mu[nxt], v_acc[act], var[nxt], 0.0)
            m_acc[act], v_acc[act] = out[4], out[5]
            nmax += len(nxt)
        return m_acc, v_acc

    for gen in gens:
        has = [i for i in gen if preds[i]]
        if has:
            m0, v0 = reduce([preds[i] for i in has])
            mu[has], var[has] = m0, v0
        mu[gen] += m_arr[gen]
        var[gen] += v_own[gen]
    n_succ = np.zeros(n, dtype=int)
    for ps in preds:
        n_succ[ps] += 1
    m_fin, v_fin = reduce([np.flatnonzero(n_succ == 0).tolist()])
    return m_fin[0], v_fin[0], nmax


class _Engine:
    """Canonical-form state over the *live* nodes only (nodes with unprocessed successors).

    Representation (notes §4, rewritten without the S- and K-dimensional vectors): each live
    slot holds its mean, its covariance with every live slot (``C``), the Gram matrix of its
    linear coefficients with every live slot (``P``, = C minus the residual part), its loadings
    on shared factors (``fa``), and, for the window of the W most recent residuals, its
    residual weights (``cw``) and the projection of its linear part on each residual's direction
    (``M``). A residual is kept as its Hermite vector ``H`` and the factor part of its direction
    ``uF``. Every quantity the dense algorithm needs is a linear function of these, so the cost
    is O(N * (L + W)) for N ops and L live slots, independent of the number of sources.
    ``window=None`` switches Mehler off: "clark" (CS).
    """

    def __init__(self, n_factors: int, window: int | None, cap: int = 32) -> None:
        self.nf = n_factors
        self.mehler = window is not None
        self.W = window if window is not None else 0
        self.cap = cap
        self.mu = np.zeros(cap)
        self.C = np.zeros((cap, cap))
        self.fa = np.zeros((cap, n_factors))
        self.free = list(range(cap - 1, -1, -1))
        self.n_max = 0
        if self.mehler:
            self.P = np.zeros((cap, cap))
            self.cw = np.zeros((cap, self.W))
            self.M = np.zeros((cap, self.W))
            self.H = np.zeros((self.W, HERMITE_ORDER - 1))
            self.uF = np.zeros((self.W, n_factors))
            self.ring = 0

    # -- slot management -------------------------------------------------------------------
    def _grow(self) -> None:
        old, new = self.cap, 2 * self.cap

        def pad(a: np.ndarray, both: bool) -> np.ndarray:
            out = np.zeros((new, new) if both else (new,) + a.shape[1:])
            out[tuple(slice(0, s) for s in a.shape)] = a
            return out

        self.mu = pad(self.mu, False)
        self.C = pad(self.C, True)
        self.fa = pad(self.fa, False)
        if self.mehler:
            self.P = pad(self.P, True)
            self.cw = pad(self.cw, False)
            self.M = pad(self.M, False)
        self.free = list(range(new - 1, old - 1, -1)) + self.free
        self.cap = new

    def alloc(self, k: int) -> np.ndarray:
        while len(self.free) < k:
            self._grow()
        return np.array([self.free.pop() for _ in range(k)], dtype=np.intp)

    def release(self, slots) -> None:
        self.free.extend(int(s) for s in slots)

    def _mats(self) -> tuple[np.ndarray, ...]:
        return (self.C, self.P) if self.mehler else (self.C,)

    def zeros(self, k: int) -> np.ndarray:
        new = self.alloc(k)
        self.mu[new] = 0.0
        self.fa[new] = 0.0
        for a in self._mats():
            a[new, :] = 0.0
            a[:, new] = 0.0
        if self.mehler:
            self.cw[new] = 0.0
            self.M[new] = 0.0
        return new

    def copy(self, src: np.ndarray) -> np.ndarray:
        new = self.alloc(len(src))
        self.mu[new] = self.mu[src]
        self.fa[new] = self.fa[src]
        for a in self._mats():
            a[new, :] = a[src, :]
            a[:, new] = a[:, src]  # reads the rows just written, so the new-new block is right
        if self.mehler:
            self.cw[new] = self.cw[src]
            self.M[new] = self.M[src]
        return new

    # -- operations ------------------------------------------------------------------------
    def add(self, slots: np.ndarray, m: np.ndarray, s: np.ndarray, lm: np.ndarray) -> None:
        """In place X += D for distinct slots (D independent of everything but its factors)."""
        self.mu[slots] += m
        if self.nf:
            ext = lm @ self.fa.T  # Cov(D_x, X_j) through the shared factors
            blk = lm @ lm.T
            for a in self._mats():
                a[slots, :] += ext
                a[:, slots] += ext.T
                a[np.ix_(slots, slots)] += blk
            if self.mehler:
                self.M[slots] += lm @ self.uF.T
            self.fa[slots] += lm
        for a in self._mats():
            a[slots, slots] += s * s

    def maxes(self, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
        """New slots holding max(A_k, B_k) for each pair (batched; a ring window bounds size)."""
        step = self.W if self.mehler else len(ia)
        out = [self._max_batch(ia[k : k + step], ib[k : k + step]) for k in range(0, len(ia), step)]
        return np.concatenate(out)

    def _max_batch(self, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
        g = len(ia)
        self.n_max += g
        iy = self.alloc(g)
        C = self.C
        va, vb, cab = C[ia, ia], C[ib, ib], C[ia, ib]
        t, tc, thph, al, mu, var, tie = _clark(self.mu[ia], self.mu[ib], va, vb, cab)
        rows = t[:, None] * C[ia] + tc[:, None] * C[ib]
        if not self.mehler:
            blk = t[None, :] * rows[:, ia] + tc[None, :] * rows[:, ib]
            blk[np.diag_indices(g)] = var
        else:
            # Hermite coefficients of theta*(U + alpha)^+ for n = 2..NH: theta*phi*He_{n-2}(-al)/n!
            hh = np.empty((g, HERMITE_ORDER - 1))
            x = -al
            he_prev, he = np.zeros(g), np.ones(g)
            for k in range(HERMITE_ORDER - 1):
                hh[:, k] = thph * he / _FACT[k]
                he_prev, he = he, x * he - k * he_prev
            coef = _FACT * hh
            rv = np.sum(coef * hh, axis=1)
            P = self.P
            pa, pb = P[ia], P[ib]
            dp = pa - pb  # (a_A - a_B) . a_j for every slot j
            ar = np.arange(g)
            d2 = dp[ar, ia] - dp[ar, ib]
            ok = (d2 > _DIR_RTOL * (P[ia, ia] + P[ib, ib])) & (d2 > 0) & ~tie
            inv_dn = np.where(ok, 1.0 / np.sqrt(np.where(ok, d2, 1.0)), 0.0)
            # Mehler: Cov(R_l, R_new / s) = sum_n n! h_l[n] hhat[n] r^n, r = u_l . u_new
            r = np.clip((self.M[ia] - self.M[ib]) * inv_dn[:, None], -1.0, 1.0)
            q = _mehler(coef, self.H, r)
            cwl = t[:, None] * self.cw[ia] + tc[:, None] * self.cw[ib]
            # Weights decay geometrically through the tightness products; flush them before they
            # become subnormal (which slows BLAS ~50x) -- below 1e-15 they change nothing.
            cwl[np.abs(cwl) < _FLUSH] = 0.0
            beta = np.sum(cwl * q, axis=1)
            base = t * t * va + tc * tc * vb + 2.0 * t * tc * cab
            dv = np.maximum(var - base, 0.0)
            disc = np.sqrt(beta * beta + rv * dv)
            # Root of rv s^2 + 2 beta s = dv (so that Var = Clark's), in its cancellation-free form.
            den = np.where(beta >= 0, beta + disc, rv)
            num = np.where(beta >= 0, dv, disc - beta)
            s = np.maximum(np.divide(num, den, out=np.zeros(g), where=den > 0), 0.0)
            var = base + 2.0 * s * beta + s * s * rv
            # einsum's own loops, not BLAS: these products are small, and a threaded BLAS on a
            # busy 2-core machine was measured 5-10x slower than this.
            rows += s[:, None] * np.einsum("gw,cw->gc", q, self.cw)
            prow = t[:, None] * pa + tc[:, None] * pb
            # Within the batch: new residual directions r12 and their Mehler covariance.
            r12 = np.clip((dp[:, ia] - dp[:, ib]) * inv_dn[:, None] * inv_dn[None, :], -1.0, 1.0)
            m12 = _mehler(coef, hh, r12)
            blk = t[None, :] * rows[:, ia] + tc[None, :] * rows[:, ib]
            blk += s[None, :] * (np.einsum("gw,hw->gh", cwl, q) + s[:, None] * m12)
            blk[np.diag_indices(g)] = var
            pblk = t[None, :] * prow[:, ia] + tc[None, :] * prow[:, ib]
            P[iy, :] = prow
            P[:, iy] = prow.T
            P[np.ix_(iy, iy)] = pblk
            # New residuals enter the ring, evicting the oldest.
            pos = (self.ring + ar) % self.W
            self.ring = (self.ring + g) % self.W
            self.M[iy] = t[:, None] * self.M[ia] + tc[:, None] * self.M[ib]
            self.cw[iy] = cwl
            self.cw[:, pos] = 0.0
            self.cw[iy, pos] = 1.0
            self.M[:, pos] = dp.T * inv_dn[None, :]
            self.M[np.ix_(iy, pos)] = (prow[:, ia] - prow[:, ib]) * inv_dn[None, :]
            self.H[pos] = s[:, None] * hh
            if self.nf:
                self.uF[pos] = (self.fa[ia] - self.fa[ib]) * inv_dn[:, None]
        C[iy, :] = rows
        C[:, iy] = rows.T
        C[np.ix_(iy, iy)] = blk
        self.mu[iy] = mu
        self.fa[iy] = t[:, None] * self.fa[ia] + tc[:, None] * self.fa[ib]
        return iy

    # -- driver ----------------------------------------------------------------------------
    def run(self, gens, preds, m_arr, s_arr, lmat):
        n = len(preds)
        remaining = np.zeros(n, dtype=int)
        for ps in preds:
            for p in ps:
                remaining[p] += 1
        slot = np.full(n, -1, dtype=np.intp)
        sinks = []
        for gen in gens:
            srcs = [i for i in gen if not preds[i]]
            ones = [i for i in gen if len(preds[i]) == 1]
            multi = [i for i in gen if len(preds[i]) >= 2]
            if srcs:
                slot[srcs] = self.zeros(len(srcs))
            if ones:
                # The last consumer of a node takes its slot over; others get a copy.
                move = [i for i in ones if remaining[preds[i][0]] == 1]
                cp = [i for i in ones if remaining[preds[i][0]] != 1]
                for i in move:
                    slot[i] = slot[preds[i][0]]
                    slot[preds[i][0]] = -1
                if cp:
                    slot[cp] = self.copy(slot[[preds[i][0] for i in cp]])
            if multi:
                ordered = {i: sorted(preds[i], key=lambda k: self.mu[slot[k]]) for i in multi}
                acc = {i: slot[ordered[i][0]] for i in multi}
                rnd = 1
                while True:
                    act = [i for i in multi if len(ordered[i]) > rnd]
                    if not act:
                        break
                    ia = np.array([acc[i] for i in act], dtype=np.intp)
                    ib = np.array([slot[ordered[i][rnd]] for i in act], dtype=np.intp)
                    iy = self.maxes(ia, ib)
                    if rnd > 1:
                        self.release(ia)  # intermediate maxima of >2-input nodes
                    acc.update(zip(act, iy, strict=True))
                    rnd += 1
                slot[multi] = [acc[i] for i in multi]
            self.add(slot[gen], m_arr[gen], s_arr[gen], lmat[gen])
            for i in gen:
                for p in preds[i]:
                    remaining[p] -= 1
                    if remaining[p] == 0 and slot[p] >= 0:
                        self.release([slot[p]])
                        slot[p] = -1
            sinks += [i for i in gen if remaining[i] == 0]
        # Final max over sinks, pairwise in increasing-mean order.
        sinks.sort(key=lambda k: self.mu[slot[k]])
        acc = slot[sinks[0]]
        for k in sinks[1:]:
            acc = self.maxes(np.array([acc]), np.array([slot[k]]))[0]
        return self.mu[acc], self.C[acc, acc], self.n_max


def _mehler(coef: np.ndarray, h: np.ndarray, r: np.ndarray) -> np.ndarray:
    """sum_n coef[i, n] * h[l, n] * r[i, l]^n over n = 2..NH (``coef`` already holds n!)."""
    rn = r * r
    out = np.zeros_like(r)
    for k in range(HERMITE_ORDER - 1):
        out += np.outer(coef[:, k], h[:, k]) * rn
        rn = rn * r
    return out
