"""Kurtosis-aware canonical core: the skew core with a Gram-Charlier correction of every max.

Why. On a tied pipeline lattice the Gaussian closure of Clark's max is wrong *locally*: the
difference ``D = A - B`` of the two inputs of a max is leptokurtic (a difference of two maxima
sharing most of their history behaves like a reflected walk) and individually skewed. Measured
against Monte Carlo (``validation/lattice_closure_study.py``): excess kurtosis 0.57 on average
on an interleaved 8 x 8 x vpp 4 schedule (0.21 on 1F1B 8 x 32); Clark's ``E[max]`` from the
*exact* moments of ``A`` and ``B`` is high by 0.0063 node-sd per max (summed over 489 maxima:
3.10; with a Gram-Charlier correction at the exact kurtosis 0.60, at the exact skewness and
kurtosis 0.03). On interleaved schedules with ``m = p`` the local errors add up to a wrong
growth rate: the mean error grows linearly with the topological generation. With skewed ops
(lognormal) Clark's variance of each max is also low (1.5% on average at CV 20%): the max
picks up the right tail of its skewed inputs.

What. The skew core (:mod:`.skew_core`: Clark-Mehler on full differences, a third cumulant
of the makespan, a Pearson III law) in which each max's mean and variance get the
Gram-Charlier correction of ``D`` (:func:`gram_charlier_max`):

* ``D``'s excess kurtosis ``g2`` from the canonical form itself: its linear part and the He2
  parts of the residuals it carries give, by the diagram formula for second-chaos variables,
  ``kappa4(D) = 48 (x o c)' R (x o c) + 48 tr((X R)^4)`` (``x``: He2 coefficients of ``D`` on
  the window's residuals, ``c``: their covariances with ``D``, ``R``: their correlations; the
  :data:`TOP_RESIDUALS` largest ``|x|``), clipped to ``[0, 4]`` (a non-negative density);
* with skewed ops (a third cumulant not 0), each live node also keeps its loadings on the most
  recent ops (:data:`OP_WINDOW_PER_WIDTH`), which give ``D``'s skewness from the ops (He3 term)
  and the first-order Stein terms of a max of skewed inputs: ``Var(max)`` gains
  ``phi(alpha) / theta * kappa(B, D, D)`` (``B`` the larger-mean input) and the max's
  covariance with op ``r`` gains ``phi(alpha) / (2 theta) d_r^2 kappa3_r``. With normal ops
  these terms are 0 and are not computed.

No sampling and no fitted constant; it is an estimate, checked against Monte Carlo
(``tests/test_kurtosis_core.py``; ``validation/results/lattice_closure_study.md``, 1e5
samples). Normal ops: 1F1B 32 x 64 KS 0.021 / 0.016 at CV 5% / 20% (skew core 0.035 / 0.033;
spread still -7% / -6%), 8 x 32 0.004 (0.017), interleaved 16 x 64 at CV 20% 0.025 (Gaussian
0.28); over-corrected on 1F1B 16 x 64 at CV 5% (mean -0.07 sd, KS 0.013 -> 0.028); the README
body (interleaved 16 x 16 x vpp 8) stays far off (KS 0.56 -> 0.42, mean +1.51 -> +1.10 sd).
Lognormal ops at CV 20%: 1F1B 8 x 32 0.018 (Gaussian 0.106), 4 x 8 in 512 replicas 0.017
(0.51), 16 x 64 0.12 (0.25). Worse than the Gaussian core on some imbalanced and CV 5%
lognormal variants (see the table).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any

import networkx as nx
import numpy as np

from .skew_core import (
    SkewResult,
    _cached_pipeline,
    _FullEngine,
    _makespan,
    _pipeline,
    clear_cache,
)

__all__ = [
    "TOP_RESIDUALS",
    "MAX_KURTOSIS",
    "gram_charlier_max",
    "kurtosis_makespan",
    "kurtosis_pipeline",
    "cached_kurtosis_pipeline",
    "clear_cache",
]

#: Residuals (largest He2 weight in ``D``) kept in the fourth-cumulant estimate of each max.
#: 16 and 48 gave KS within 0.004 of each other on interleaved 8 x 8 x vpp 4.
TOP_RESIDUALS = 16
#: Largest excess kurtosis used: the pure-He4 Gram-Charlier density is >= 0 for g2 in [0, 4].
MAX_KURTOSIS = 4.0
#: Largest |skewness| of an input difference used (skewed ops only).
MAX_SKEW_D = 1.0
#: Recent ops whose loadings every live node keeps (skewed ops only): this many per unit of
#: DAG width, at least :data:`MIN_OP_WINDOW`. Lognormal CV 20% 1F1B 8 x 32: 16 ops KS 0.027,
#: 64 ops 0.018, 256 ops 0.018; 16 x 64: 64 ops 0.125, 256 ops 0.117.
OP_WINDOW_PER_WIDTH = 4
MIN_OP_WINDOW = 64
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def gram_charlier_max(
    dmu: np.ndarray,
    theta: np.ndarray,
    t: np.ndarray,
    thph: np.ndarray,
    cab: np.ndarray,
    vb: np.ndarray,
    g2: np.ndarray,
    g1: np.ndarray | float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Corrections ``(d_mean, d_var)`` of Clark's max for a non-Gaussian difference of the inputs.

    ``max(A, B) = B + D+`` with ``D = A - B`` of mean ``dmu`` and sd ``theta``; the density of
    ``D``'s standardised form is ``phi(z) (1 + g1 He3(z) / 6 + g2 He4(z) / 24)`` (Gram-Charlier).
    The partial moments follow by parts (``He_n phi = (-1)^n phi^(n)``), the covariance of ``B``
    with ``D+`` from ``B = beta D + e``, ``beta = Cov(B, D) / theta^2``, ``e`` independent of
    ``D``. The engine passes ``g1 = 0`` for symmetric ops and, with skewed ops, D's skewness
    from the recent ops' third cumulants (:meth:`_KurtosisEngine._correct`).

    Parameters
    ----------
    dmu, theta : numpy.ndarray
        Mean and sd of ``D`` (theta > 0).
    t, thph : numpy.ndarray
        Clark's ``Phi(alpha)`` and ``theta phi(alpha)``.
    cab, vb : numpy.ndarray
        ``Cov(A, B)`` and ``Var B``.
    g2 : numpy.ndarray
        Excess kurtosis of ``D``.
    g1 : numpy.ndarray or float
        Skewness of ``D`` (default 0).

    Returns
    -------
    tuple of numpy.ndarray
        Additive corrections to Clark's mean and variance (both 0 where ``g2 = 0``).

    Examples
    --------
    >>> import numpy as np
    >>> z = np.zeros(1)
    >>> d_mean, _ = gram_charlier_max(z, np.ones(1), z + 0.5, z + 0.3989422804, z, np.ones(1),
    ...                               np.ones(1))
    >>> round(float(d_mean[0]), 6)  # -phi(0) / 24
    -0.016623
    """
    al = dmu / theta
    ph = _INV_SQRT_2PI * np.exp(-0.5 * al * al)
    d1 = theta * ph * (g2 * (al * al - 1.0) / 24.0 - g1 * al / 6.0)  # E[D+]
    d2 = theta * theta * ph * (g1 / 3.0 - g2 * al / 12.0)  # E[(D+)^2]
    e1 = dmu * t + thph  # Clark's E[D+]
    beta = (cab - vb) / (theta * theta)
    d_var_dplus = d2 - 2.0 * e1 * d1 - d1 * d1
    d_cov = d2 - dmu * d1  # Cov(D, D+)
    return d1, d_var_dplus + 2.0 * beta * d_cov


class _KurtosisEngine(_FullEngine):
    """The skew core's engine with the Gram-Charlier correction of every max (module doc).

    With skewed ops (``op_k3`` given, not all zero) it also keeps each live node's loadings on
    the ``R`` most recent ops (``L``, ring of columns; ``K3``, ``V``: those ops' third cumulants
    and variances), from which the ops' part of the third cumulants of a max's inputs follows.
    """

    shape = "kurtosis"
    slot_rows = ("L",)

    @classmethod
    def for_dag(
        cls, n_factors: int, window: int, gens: list[np.ndarray], k3_arr: np.ndarray | None
    ) -> _KurtosisEngine:
        """An engine for one DAG, with its ops' third cumulants in the order they are added."""
        op_k3 = None
        if k3_arr is not None:
            # in the order the driver adds ops (generation by generation); an op law without a
            # finite third moment is left out of the op-skew terms (its skew has no finite value)
            seq = np.concatenate([k3_arr[np.asarray(g, dtype=np.intp)] for g in gens])
            op_k3 = np.where(np.isfinite(seq), seq, 0.0)
        width = max(len(g) for g in gens)
        return cls(n_factors, window, op_k3, max(MIN_OP_WINDOW, OP_WINDOW_PER_WIDTH * width))

    def __init__(
        self, n_factors: int, window: int, op_k3: np.ndarray | None = None, op_window: int = 0
    ) -> None:
        super().__init__(n_factors, window)
        skewed = op_k3 is not None and bool(np.any(op_k3 != 0))
        self.R = op_window if skewed else 0
        self.L = np.zeros((self.cap, self.R))
        self.K3 = np.zeros(self.R)
        self.V = np.ones(self.R)
        self.oring = 0
        self._k3_seq = op_k3 if skewed else None
        self._k3_at = 0

    def _rebind(self, fresh: _FullEngine) -> bool:
        """Take over ``fresh``'s op third cumulants (False: another op window or other ops).

        The ops added so far must have the same third cumulants in ``fresh``'s DAG, else the
        shared start would not be that DAG's.
        """
        if not isinstance(fresh, _KurtosisEngine) or fresh.R != self.R:
            return False
        if self.R:
            done = self._k3_seq[: self._k3_at]
            if not np.array_equal(fresh._k3_seq[: self._k3_at], done):
                return False
            self._k3_seq = fresh._k3_seq
        return super()._rebind(fresh)

    def add(self, slots: np.ndarray, m: np.ndarray, s: np.ndarray, lm: np.ndarray) -> None:
        super().add(slots, m, s, lm)
        if not self.R:
            return
        # the ops just added (one per slot, in the order the driver adds generations) enter the
        # ring of recent ops, evicting the oldest; each slot has loading 1 on its own op
        g = len(slots)
        pos = (self.oring + np.arange(g)) % self.R
        # the same columns as a slice where they do not wrap (strided fancy writes cost more)
        cols = slice(self.oring, self.oring + g) if self.oring + g <= self.R else pos
        self.oring = (self.oring + g) % self.R
        self.L[:, cols] = 0.0
        self.L[slots, pos] = 1.0
        self.K3[pos] = self._k3_seq[self._k3_at : self._k3_at + g]
        self.V[pos] = np.maximum(s * s, 1e-300)
        self._k3_at += g

    def excess_kurtosis(self, ia: np.ndarray, ib: np.ndarray, th2: np.ndarray) -> np.ndarray:
        """Excess kurtosis of ``D = A - B`` for each pair, from the He2 chaos (module doc)."""
        g = len(ia)
        x = (self.cw[ia] - self.cw[ib]) * self.H[:, 0][None, :]
        c = self.M[ia] - self.M[ib]  # Cov(D, U_k)
        k = min(TOP_RESIDUALS, x.shape[1])
        if k == 0:
            return np.zeros(g)
        idx = np.argpartition(-np.abs(x), k - 1, axis=1)[:, :k]
        at = np.arange(g)[:, None]  # (the gathers of take_along_axis, without its checks)
        xs = x[at, idx]
        xc = xs * c[at, idx]
        r = self.G[idx[:, :, None], idx[:, None, :]]  # (g, k, k) correlations of the U's
        lin = np.einsum("gk,gkl,gl->g", xc, r, xc)
        a = r * xs[:, None, :]  # R X
        a2 = a @ a
        quad = np.einsum("gkl,glk->g", a2, a2)  # tr((R X)^4)
        k4 = 48.0 * (lin + quad)
        g2 = np.divide(k4, th2 * th2, out=np.zeros(g), where=th2 > 0)
        return np.minimum(np.maximum(g2, 0.0), MAX_KURTOSIS)  # np.clip's values, one call less

    def _correct(
        self,
        ia: np.ndarray,
        ib: np.ndarray,
        clark: tuple[np.ndarray, ...],
        vb: np.ndarray,
        cab: np.ndarray,
        th2: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, tuple | None]:
        """Clark's mean and variance with the Gram-Charlier (and op-skew) corrections.

        The third value (skewed ops only) is each max's extra covariance with the recent ops,
        with the inputs' op-loading rows and Clark's ``T``, ``1 - T``, for :meth:`_finish`.
        """
        t, tc, thph, _, mu, var, tie = clark
        g2 = self.excess_kurtosis(ia, ib, th2)
        ok = ~tie & (th2 > 0)
        th = np.sqrt(np.where(ok, th2, 1.0))
        g1 = 0.0
        extra = None
        if self.R:
            # skewed ops: D's third cumulant from the recent ops' (sum d_r^3 k3_r), and the
            # Stein terms of the max: Cov(max, w_r) gains phi(alpha) / (2 theta) d_r^2 k3_r,
            # Var(max) gains phi(alpha) / theta * kappa(B, D, D) (B: the larger-mean input)
            la, lb = self.L[ia], self.L[ib]  # (L is not written before _finish)
            d = la - lb
            dd = d * d * self.K3[None, :]
            g1 = np.where(ok, (d * dd).sum(axis=1) / th**3, 0.0)
            g1 = np.minimum(np.maximum(g1, -MAX_SKEW_D), MAX_SKEW_D)
            dens = np.where(ok, thph / np.maximum(th2, 1e-300), 0.0)  # phi(alpha) / theta
            cov_op = 0.5 * dens[:, None] * dd  # (g, R): extra Cov(max, w_r)
            extra = (cov_op, la, lb, t, tc)
            var = var + dens * np.sum(lb * dd, axis=1)
        d_mu, d_var = gram_charlier_max(self.mu[ia] - self.mu[ib], th, t, thph, cab, vb, g2, g1)
        mu = mu + np.where(ok, d_mu, 0.0)
        var = np.maximum(var + np.where(ok, d_var, 0.0), 0.0)
        return mu, var, extra

    def _finish(self, iy: np.ndarray, rows: np.ndarray, extra: tuple | None) -> None:
        """The op-skew covariances (skewed ops only) into ``rows`` and the new op loadings."""
        if extra is None:
            return
        cov_op, la, lb, t, tc = extra
        rows += cov_op @ self.L.T  # through each live node's loadings on those ops
        self.L[iy] = t[:, None] * la + tc[:, None] * lb + cov_op / self.V


def kurtosis_makespan(
    graph: nx.DiGraph,
    mean: Mapping[Hashable, float],
    std: Mapping[Hashable, float],
    *,
    loadings: Mapping[Hashable, Mapping[Hashable, float]] | None = None,
    window: int | None = None,
    kappa3: Mapping[Hashable, float] | None = None,
) -> SkewResult:
    """Mean, std and skewness of a DAG's makespan by the kurtosis-corrected core (an estimate).

    Parameters
    ----------
    graph, mean, std, loadings, window, kappa3
        As :func:`~.skew_core.skew_makespan`: the same model, the same :class:`SkewResult`
        returned, the same ``ValueError`` on bad input.

    Examples
    --------
    >>> g = nx.DiGraph([("a", "c"), ("b", "c")])  # one max of independent inputs: Clark's
    >>> r = kurtosis_makespan(g, dict(a=1.0, b=1.0, c=0.0), dict(a=1.0, b=1.0, c=0.0))
    >>> round(r.mean, 5)
    1.56419
    """
    return _makespan(_KurtosisEngine, graph, mean, std, loadings, window, kappa3)


def kurtosis_pipeline(
    spec: Any, *, window: int | None = None, cap: int | None = None
) -> tuple[SkewResult, dict[str, Any]]:
    """The kurtosis-corrected core on a plain compact pipeline (no shared factors).

    Truncation, extrapolation, returns and errors as :func:`~.skew_core.skew_pipeline`
    (pipelines of more than ``cap`` ops, default :data:`~.skew_core.SKEW_OPS_CAP`).
    """
    return _pipeline(_KurtosisEngine, "kurtosis_pipeline", spec, window, cap)


def cached_kurtosis_pipeline(
    key: tuple, spec: Any, window: int | None
) -> tuple[SkewResult, dict[str, Any]]:
    """:func:`kurtosis_pipeline`, cached by ``key`` (the spec's identity) and the window.

    The cache is the skew core's, keyed by shape too; :func:`clear_cache` (the skew core's)
    empties it for both shapes.
    """
    return _cached_pipeline(_KurtosisEngine, "kurtosis_pipeline", key, spec, window)
