"""Kurtosis-aware canonical core: the skew core with a Gram-Charlier correction of every max.

Why: on a tied pipeline lattice the Gaussian closure of Clark's max is wrong *locally*: the
difference ``D = A - B`` of the two inputs of a max is leptokurtic (a difference of two maxima
sharing most of their history behaves like a reflected walk) and skewed, so Clark's ``E[max]``
is high even from the exact moments of ``A`` and ``B``, and on interleaved schedules with
``m = p`` the local errors add up to a wrong growth rate.

What: the skew core (:mod:`.skew_core`) in which each max's mean and variance get the
Gram-Charlier correction of ``D`` (:func:`gram_charlier_max`):

* ``D``'s excess kurtosis ``g2`` from the canonical form itself (diagram formula for
  second-chaos variables): ``kappa4(D) = 48 (x o c)' R (x o c) + 48 tr((X R)^4)`` (``x``: He2
  coefficients of ``D`` on the window's residuals, ``c``: their covariances with ``D``, ``R``:
  their correlations; the :data:`TOP_RESIDUALS` largest ``|x|``), clipped to ``[0, 4]``;
* with skewed ops, the skew core's own op-skew terms
  (:meth:`~.skew_core._FullEngine._op_skew_max`, :data:`OP_WINDOW_PER_WIDTH`). Unlike the skew
  core, this core keeps an op's third cumulant however small (a normal law's grid rounding
  switches the terms on; its measured tables were made so).

No sampling and no fitted constant; an estimate, checked against Monte Carlo in
``tests/engines/test_kurtosis_core.py``. Tables: ``validation/results/bench_scale_kurtosis.md`` and
the agreement suite; it over-corrects 1F1B 16 x 64 at CV 5% and leaves interleaved
16 x 16 x vpp 8 far off.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import networkx as nx
import numpy as np

# the op-skew constants live with the skew core (gram_charlier_max in .gram_charlier), which
# carries the ops' third cumulants into each max (this core adds D's excess kurtosis);
# re-exported for callers
from .gram_charlier import gram_charlier_max
from .skew_core import (
    MAX_SKEW_D,
    MIN_OP_WINDOW,
    OP_WINDOW_PER_WIDTH,
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
    "MAX_SKEW_D",
    "OP_WINDOW_PER_WIDTH",
    "MIN_OP_WINDOW",
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


class _KurtosisEngine(_FullEngine):
    """The skew core's engine with the Gram-Charlier kurtosis correction of every max (module doc).

    The ops' skewness terms (recent-op loadings ``L``, ``D``'s ``g1``, the Stein terms) are the
    skew core's (:meth:`~.skew_core._FullEngine._op_skew_max`); this engine adds ``D``'s excess
    kurtosis to them, with symmetric ops too.
    """

    shape = "kurtosis"
    #: Every op's own third cumulant enters the maxima, however small, as it always did in this
    #: core (with normal ops only a grid's rounding: moving that floor would move the last bits).
    op_skew_floor = 0.0

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
        """Clark's mean and variance with the Gram-Charlier (and op-skew) corrections."""
        g2 = self.excess_kurtosis(ia, ib, th2)
        return self._op_skew_max(ia, ib, clark, vb, cab, th2, g2)


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
