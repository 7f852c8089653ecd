"""Third-cumulant closure core: every max closed with the joint third cumulants it propagates.

Why: on deep tied lattices the Clark-Mehler cores under-state the correlation of sibling maxima:
Stein's ``Cov(X, max(A, B)) = Cov(X, B) + Cov(X, D+)`` (``D = A - B``) has a second-order term
``kappa(X, D, D) phi(alpha) / (2 theta)`` whose He2-chaos estimate barely tracks the truth.

What: no residual model. Each live node carries its mean, its covariance with every live node
(``C``) and its joint third cumulant with every pair of live nodes (``K``, ``L x L x L``). A max
``Y = B + f(D)``, ``f = (.)+``, ``B`` the larger-mean input, is closed around a Gram-Charlier law
of ``D`` (its skewness from ``K``): every live ``X_j`` is split as ``beta_j D + e_j`` with
``e_j`` uncorrelated with ``D``; the terms in ``D`` alone are exact moments of the rectifier
under that law (:func:`_rectifier`), those in ``e_j`` first-order Stein terms in the
third cumulants ``kappa(e_j, D, D) = kappa(X_j, D, D) - beta_j kappa3(D)``::

    Cov(Y, X_j)        = Cov(B, X_j) + beta_j Cov(f, D) + kappa(e_j, D, D) E[f''] / 2
    kappa(Y, X_j, X_l) = kappa(B, X_j, X_l) + beta_j beta_l kappa(f, D, D)
                         + beta_j kappa(f, D, e_l) + beta_l kappa(f, D, e_j)
                         + E[f'] kappa(D, e_j, e_l)
    kappa(f, D, e)     = kappa(e, D, D) (2 E[f'] - E[D] E[f'']) / 2
    kappa(f, f, X_j)   = beta_j kappa(f, f, D) + kappa(e_j, D, D) (E[f'] - E[f] E[f''])

(``Var Y`` and ``kappa3(Y)``, ``kappa(Y, Y, X_j)`` by multilinearity from the same terms). With
jointly normal inputs every formula is exact; ops add their own variance and third cumulant
exactly. The makespan gets the Pearson III law of its mean, std and ``K[sink, sink, sink]``.

The mean of each max also needs ``D``'s excess kurtosis (a difference of tied maxima is
leptokurtic), which third cumulants do not carry: it is taken from the kurtosis core's estimate
(:meth:`~.kurtosis_core._KurtosisEngine.excess_kurtosis`, run on the same DAG) and enters *only*
the mean of each max (in the variance terms too it raised the std by 5-10%). An estimate,
checked against Monte Carlo in ``tests/engines/test_cumulant_core.py``.

Known limitation: on interleaved lattices much deeper (``stages x vpp``) than wide the std is
high, by a drift that grows through the tied rows (interleaved 16 x 16 x vpp 8: +10-11%), from
a propagated ``kappa(B, D, D)`` of the wrong sign (``validation/results/cumulant_drift_study.md``).

Cost: O(L^2) per max for ``L`` live nodes plus the kurtosis core's run, about 0.1 ms an op in
all; long pipelines go through the skew core's driver (forked truncations, steady state from
three short evaluations: :func:`~.skew_core._steady`). Shared factors are not supported (the
analytic engine routes such cores elsewhere). Timings:
``validation/results/bench_scale_cumulant.md``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

import networkx as nx
import numpy as np
from scipy import special

from .blas_threads import single_blas_thread
from .canonical import _successor_counts
from .kurtosis_core import MAX_KURTOSIS, _KurtosisEngine
from .skew_core import (
    SkewResult,
    _cached_pipeline,
    _makespan,
    _pipeline,
    adopt_prefix,
    clear_cache,
)

__all__ = [
    "MAX_SKEW_D",
    "cumulant_makespan",
    "cumulant_pipeline",
    "cached_cumulant_pipeline",
    "clear_cache",
]

#: Largest |skewness| of an input difference given to the Gram-Charlier law (the density stays
#: close to non-negative in the range that matters; makespan-scale skews are ~0.1).
MAX_SKEW_D = 1.0
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
# theta^2 below this fraction of Var A + Var B: an exact tie of the inputs' random parts.
_TIE_RTOL = 1e-12
#: Up to this many slots the engine's arrays grow one slot at a time, so that the ``[:hw]`` views
#: every max works on are whole, contiguous arrays (plane operations about 2x faster at 34 live
#: nodes); the copies cost about ``hw^4 / 4`` element moves in all (1e7 at 80). Beyond, doubling.
_EXACT_CAP = 80


def _rectifier(
    dm: float, th: float, g1: float, g2: float, g2_mean: float | None
) -> tuple[dict[str, float], float | None]:
    """Moments of ``f = D+`` and its joint cumulants with ``D``, ``D`` Gram-Charlier.

    ``D = dm + th Z`` (``th > 0``) with ``Z``'s density ``phi(z) (1 + g1 He3(z) / 6 + g2
    He4(z) / 24)``. Partial moments ``int_c^inf z^n p(z) dz`` (``c = -dm / th``) follow from
    ``J_n = int_c^inf z^n phi`` (``J_n = c^(n-1) phi(c) + (n - 1) J_(n-2)``); for ``c < 0`` the
    mirror ``f = D + (-D)+`` is evaluated instead, so every moment is a small tail quantity.

    Returns ``({P, dens0, Ef, Vf, CfD, kfDD, kffD, k3f}, Ef at the kurtosis g2_mean or None)``:
    one evaluation of ``J_n`` serves both, with the floating-point operations of two calls.
    """
    c = -dm / th
    if c < 0:
        m, ef = _rectifier(-dm, th, -g1, g2, g2_mean)
        vd, k3d = th * th, g1 * th**3
        cov_hd = -m["CfD"]  # h = (-D)+: Cov(h, D) = -Cov(h, -D)
        k_hdd, k_hhd = m["kfDD"], -m["kffD"]
        out = {
            "P": 1.0 - m["P"],
            "dens0": m["dens0"],
            "Ef": dm + m["Ef"],
            "Vf": vd + 2.0 * cov_hd + m["Vf"],
            "CfD": vd + cov_hd,
            "kfDD": k3d + k_hdd,
            "kffD": k3d + 2.0 * k_hdd + k_hhd,
            "k3f": k3d + 3.0 * k_hdd + 3.0 * k_hhd + m["k3f"],
        }
        return out, (None if ef is None else dm + ef)
    phi = _INV_SQRT_2PI * math.exp(-0.5 * c * c)
    j = [float(special.ndtr(-c)), phi]
    for n in range(2, 8):
        j.append(c ** (n - 1) * phi + (n - 1) * j[n - 2])
    pm = _gram_charlier_partials(j, g1, g2, 4)
    # E[((z - c)+)^a z^b] = sum_k C(a, k) (-c)^(a - k) pm[k + b], written out term by term in
    # the order (and with the roundings) of that sum
    nc = -c
    p2, p3 = nc**2, nc**3
    m1 = 0.0 + nc * pm[0] + pm[1]
    e11 = 0.0 + nc * pm[1] + pm[2]
    e12 = 0.0 + nc * pm[2] + pm[3]
    e20 = 0.0 + p2 * pm[0] + (2 * nc) * pm[1] + pm[2]
    e21 = 0.0 + p2 * pm[1] + (2 * nc) * pm[2] + pm[3]
    e30 = 0.0 + p3 * pm[0] + (3 * p2) * pm[1] + (3 * nc) * pm[2] + pm[3]
    he3, he4 = c**3 - 3.0 * c, c**4 - 6.0 * c * c + 3.0
    th3 = th**3
    out = {
        "P": pm[0],
        "dens0": phi * (1.0 + g1 * he3 / 6.0 + g2 * he4 / 24.0) / th,
        "Ef": th * m1,
        "Vf": th * th * (e20 - m1 * m1),
        "CfD": th * th * e11,
        "kfDD": th3 * (e12 - m1),
        "kffD": th3 * (e21 - 2.0 * m1 * e11),
        "k3f": th3 * (e30 - 3.0 * m1 * e20 + 2.0 * m1**3),
    }
    if g2_mean is None:
        return out, None
    q = _gram_charlier_partials(j, g1, g2_mean, 2)
    return out, th * (0.0 + nc * q[0] + q[1])


def _gram_charlier_partials(j: list[float], g1: float, g2: float, k: int) -> list[float]:
    """``int_c^inf z^n p(z) dz`` for ``n < k``, ``p`` the Gram-Charlier density."""
    return [
        j[n]
        + g1 / 6.0 * (j[n + 3] - 3.0 * j[n + 1])
        + g2 / 24.0 * (j[n + 4] - 6.0 * j[n + 2] + 3.0 * j[n])
        for n in range(k)
    ]


class _NoTape(list):
    """A tape that keeps nothing: the recorder's sink loadings are never asked for."""

    def append(self, record: Any) -> None:  # noqa: D102 (list's)
        return None


class _G2Recorder(_KurtosisEngine):
    """The kurtosis core, recording the excess kurtosis it gives each max node's ``D``.

    Its ``G2`` slot row holds, per slot, that value and a flag "made by a max in this
    generation"; after each generation's ops are added, the flagged slots' values are stored
    by node (``g2_node``). Intermediate maxima of nodes with more than two inputs are not kept.
    It goes over each range of generations before the closure does
    (:meth:`_CumulantEngine._advance`), forks with it and keeps no tape (only the closure's own
    third cumulant is read at the sink).
    """

    slot_rows = ("L", "G2")

    def __init__(self, *args: Any, gens: list[np.ndarray] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tape = _NoTape()
        self.G2 = np.zeros((self.cap, 2))
        self._gens = gens or []
        self._k = 0
        n = sum(len(g) for g in self._gens)
        self.g2_node = np.zeros(n)
        self._last = np.zeros(0)

    @classmethod
    def for_gens(
        cls, window: int, gens: list[np.ndarray], k3_arr: np.ndarray | None
    ) -> _G2Recorder:
        """A recorder for one DAG (no shared factors), with the kurtosis core's op window."""
        base = _KurtosisEngine.for_dag(0, window, gens, k3_arr)
        return cls(0, window, base._k3_seq, base.R, gens=gens)

    def _rebind(self, fresh: Any) -> bool:
        """Continue on ``fresh``'s DAG: its generations, its node count (values kept)."""
        if not isinstance(fresh, _G2Recorder) or not super()._rebind(fresh):
            return False
        g2 = np.zeros(len(fresh.g2_node))
        n = min(len(g2), len(self.g2_node))
        g2[:n] = self.g2_node[:n]  # the shared start's nodes have the same index in both
        self.g2_node, self._gens = g2, fresh._gens
        return True

    def excess_kurtosis(self, ia: np.ndarray, ib: np.ndarray, th2: np.ndarray) -> np.ndarray:
        self._last = super().excess_kurtosis(ia, ib, th2)
        return self._last

    def _max_batch(self, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
        iy = super()._max_batch(ia, ib)
        self.G2[iy, 0] = self._last
        self.G2[iy, 1] = 1.0
        return iy

    def add(self, slots: np.ndarray, m: np.ndarray, s: np.ndarray, lm: np.ndarray) -> None:
        super().add(slots, m, s, lm)
        if self._k < len(self._gens):
            nodes = np.asarray(self._gens[self._k], dtype=np.intp)
            fresh = self.G2[slots, 1] > 0
            self.g2_node[nodes[fresh]] = self.G2[slots[fresh], 0]
        self._k += 1
        self.G2[slots, 1] = 0.0


class _CumulantEngine:
    """Mean, covariance and third-cumulant tensor over the live nodes (module docstring).

    Has the interface the skew core's pipeline driver uses (``for_dag``, ``run``, ``kappa3``,
    ``last``, ``op_loadings``, and for the forked evaluation of truncated schedules ``fork``,
    ``_rebind``, ``_begin``, ``_resume``, ``_advance``, ``_end``), so its truncation, steady-state
    shortcut and cache serve this core too.

    Storage: slots ``[0, hw)`` are the only ones ever handed out (the free list gives the lowest
    first), and a free slot's rows, columns and planes of ``C`` and ``K`` are kept at zero, so
    every max works on the ``[:hw]`` views: the values on live slots are those of the live
    nodes alone (every operation is elementwise), without gathering them.
    """

    shape: ClassVar[str] = "cumulant"
    forkable: ClassVar[bool] = True
    #: The closure's per-period increments alternate in the steady state, so truncated
    #: schedules are extrapolated by blocks of two periods (their sum is steady).
    block_periods: ClassVar[int] = 2

    @classmethod
    def for_dag(
        cls, n_factors: int, window: int, gens: list[np.ndarray], k3_arr: np.ndarray | None
    ) -> _CumulantEngine:
        """An engine for one DAG (``k3_arr``: its ops' third cumulants, by node index)."""
        if n_factors:
            raise ValueError("cumulant core: shared factors are not supported (condition on them)")
        return cls(window, k3_arr, _G2Recorder.for_gens(window, gens, k3_arr))

    def __init__(
        self,
        window: int,
        k3_arr: np.ndarray | None = None,
        chaos: _G2Recorder | None = None,
        cap: int = 4,
    ) -> None:
        self.window = window
        self.k3_arr = None if k3_arr is None else np.where(np.isfinite(k3_arr), k3_arr, 0.0)
        self.chaos = chaos  # the kurtosis core on the same DAG: each max's D excess kurtosis
        self.cap = cap
        self.hw = 0
        self.mu = np.zeros(cap)
        self.C = np.zeros((cap, cap))
        self.K = np.zeros((cap, cap, cap))
        self.free = list(range(cap - 1, -1, -1))
        self.last = -1
        self.n_max = 0

    # -- slots -----------------------------------------------------------------------------
    def _grow(self) -> None:
        old = self.cap
        new = old + 1 if old < _EXACT_CAP else 2 * old
        mu, C, K = np.zeros(new), np.zeros((new, new)), np.zeros((new, new, new))
        mu[:old], C[:old, :old], K[:old, :old, :old] = self.mu, self.C, self.K
        self.mu, self.C, self.K = mu, C, K
        self.free = list(range(new - 1, old - 1, -1)) + self.free
        self.cap = new

    def _alloc(self) -> int:
        """A free slot (its rows, columns and planes are zero)."""
        if not self.free:
            self._grow()
        s = self.free.pop()
        self.hw = max(self.hw, s + 1)
        return s

    def _release(self, s: int) -> None:
        n = self.hw
        self.C[s, :n] = 0.0
        self.C[:n, s] = 0.0
        self.K[s, :n, :n] = 0.0
        self.K[:n, s, :n] = 0.0
        self.K[:n, :n, s] = 0.0
        self.free.append(s)

    def _zeros(self) -> int:
        s = self._alloc()
        self.mu[s] = 0.0
        return s

    def _copy(self, src: int) -> int:
        s = self._alloc()
        n = self.hw
        C, K = self.C[:n, :n], self.K[:n, :n, :n]
        self.mu[s] = self.mu[src]
        C[s] = C[src]
        C[:, s] = C[:, src]  # reads the row just written: the diagonal is right
        K[s] = K[src]
        K[:, s] = K[:, src]
        K[:, :, s] = K[:, :, src]
        return s

    # -- the max ---------------------------------------------------------------------------
    def _excess_kurtosis(self, node: int, a: int, b: int) -> float:
        """Excess kurtosis of ``D = X_a - X_b`` at the max that makes ``node``.

        ``a``, ``b``: the slots of its inputs (``b`` the larger-mean one), the state still that
        before the max. This one is the kurtosis core's He2-chaos estimate (module docstring).
        """
        return float(self.chaos.g2_node[node]) if self.chaos is not None else 0.0

    def _max(self, a: int, b: int, g2: float) -> int:
        """A new slot holding ``max(X_a, X_b)``; ``b`` the larger-mean input."""
        self.n_max += 1
        C = self.C
        vb = float(C[b, b])
        vab = float(C[a, a]) + vb
        th2 = vab - 2.0 * float(C[a, b])
        if th2 <= _TIE_RTOL * vab:  # tied random parts: the larger mean
            return self._copy(b)
        y = self._alloc()
        n = self.hw
        C, K = self.C[:n, :n], self.K[:n, :n, :n]  # (after a possible growth)
        th = math.sqrt(th2)
        th3 = th**3
        dm = float(self.mu[a] - self.mu[b])
        c = C[a] - C[b]  # Cov(D, X_j)
        kb = K[b]
        kd = K[a] - kb  # kappa(D, X_j, X_l)
        kdd = kd[a] - kd[b]  # kappa(D, D, X_j)
        k3d_raw = float(kdd[a] - kdd[b])
        g1 = min(max(k3d_raw / th3, -MAX_SKEW_D), MAX_SKEW_D)  # (np.clip's values)
        k3d = g1 * th3
        # D's kurtosis enters the mean only (module docstring)
        r, ef = _rectifier(dm, th, g1, 0.0, min(g2, MAX_KURTOSIS) if g2 > 0 else None)
        if ef is None:
            ef = r["Ef"]
        p, dens = r["P"], r["dens0"]
        beta = c / th2
        ke = kdd - beta * k3d  # kappa(e_j, D, D)
        # (0.5 x) y is x (0.5 y) exactly (a power-of-two scale): one array operation less
        cov = C[b] + beta * r["CfD"] + ke * (0.5 * dens)
        var = vb + 2.0 * (float(cov[b]) - vb) + r["Vf"]
        kfde = ke * (0.5 * (2.0 * p - dm * dens))  # kappa(f, D, e_j)
        col = beta[:, None]  # outer products by broadcasting (np.outer's values)
        bk = col * ke
        bb = col * beta
        # the same operations, in place (no temporaries): kd - bb k3d - bk - bk'
        kdee = np.subtract(kd, np.multiply(bb, k3d), out=kd)  # kappa(D, e_j, e_l)
        kdee -= bk
        kdee -= bk.T
        bf = col * kfde
        kf = np.multiply(bb, r["kfDD"], out=bb)  # bb kfDD + bf + bf' + p kdee
        kf += bf
        kf += bf.T
        kdee *= p
        kf += kdee  # kappa(f, X_j, X_l)
        kff = beta * r["kffD"] + ke * (p - r["Ef"] * dens)  # kappa(f, f, X_j)
        kyy = K[b, b] + 2.0 * kf[b] + kff
        k3y = K[b, b, b] + 3.0 * kf[b, b] + 3.0 * kff[b] + r["k3f"]
        ky = np.add(kf, kb, out=kf)
        # y's own entries come out 0 above (its slot is zero) and are written last
        self.mu[y] = self.mu[b] + ef
        C[y] = cov
        C[:, y] = cov
        C[y, y] = max(var, 0.0)
        K[y] = ky
        K[:, y] = ky
        K[:, :, y] = ky
        K[y, y] = kyy
        K[y, :, y] = kyy
        K[:, y, y] = kyy
        K[y, y, y] = k3y
        return y

    def _max_of(self, slots: list[int], node: int) -> int:
        """Pairwise max in increasing-mean order.

        The last max (``node``'s own) gets ``node``'s D kurtosis; none when ``node < 0`` (the
        final max over the sinks).
        """
        if len(slots) == 2:  # (every pipeline op) sorted()'s order: ties in input order
            lo, hi = slots if not self.mu[slots[1]] < self.mu[slots[0]] else slots[::-1]
            return self._max(lo, hi, self._excess_kurtosis(node, lo, hi) if node >= 0 else 0.0)
        slots = sorted(slots, key=lambda s: self.mu[s])
        acc = slots[0]
        for k, s in enumerate(slots[1:], start=2):
            a, b = (acc, s) if self.mu[acc] <= self.mu[s] else (s, acc)
            g2 = self._excess_kurtosis(node, a, b) if k == len(slots) and node >= 0 else 0.0
            new = self._max(a, b, g2)
            if k > 2:
                self._release(acc)  # intermediate maxima of > 2-input nodes
            acc = new
        return acc

    # -- driver ----------------------------------------------------------------------------
    def fork(self) -> _CumulantEngine:
        """A copy to continue from (the recorder inside it included)."""
        return copy.deepcopy(self)

    def _rebind(self, fresh: _CumulantEngine) -> bool:
        """Continue, after a shared start, on ``fresh``'s DAG (its ops' third cumulants)."""
        if (self.chaos is None) != (fresh.chaos is None):
            return False
        if self.chaos is not None and not self.chaos._rebind(fresh.chaos):
            return False
        self.k3_arr = fresh.k3_arr  # (equal on the shared start: checked by the caller)
        return True

    def _begin(self, preds: list) -> tuple:
        """``(remaining successors, slot, sinks, the recorder's state)`` of a propagation."""
        chaos = None if self.chaos is None else self.chaos._begin(preds)
        return _successor_counts(preds), np.full(len(preds), -1, dtype=np.intp), [], chaos

    def _resume(self, preds: list, state: tuple, pre: np.ndarray) -> tuple:
        """A fresh state for ``preds``'s DAG that continues the forked ``state`` (and recorder)."""
        own = self._begin(preds)
        adopt_prefix(own, state, pre)
        if self.chaos is not None:
            adopt_prefix(own[3], state[3], pre)
        return own

    def run(self, gens, preds, m_arr, s_arr, lmat) -> tuple[float, float, int]:
        """``(mean, variance, n_max)`` of the makespan; the sink stays in slot :attr:`last`."""
        with single_blas_thread():
            state = self._begin(preds)
            self._advance(state, gens, preds, m_arr, s_arr, lmat)
            return self._end(state, None)

    def _advance(self, state, gens, preds, m_arr, s_arr, lmat) -> None:
        """Propagate the generations ``gens`` (in order) from ``state``, updated in place.

        The recorder goes first over the same generations: a node's D kurtosis depends only on
        the generations before it, so the values are those of a whole run of its own.
        """
        remaining, slot, sinks, chaos = state
        if self.chaos is not None:
            self.chaos._advance(chaos, gens, preds, m_arr, s_arr, lmat)
        rem = remaining.tolist()  # (scalar indexing of lists is ~5x faster than of arrays)
        sl = slot.tolist()
        k3 = self.k3_arr
        mu, C, K = self.mu, self.C, self.K
        for gen in gens:
            gl = gen.tolist() if isinstance(gen, np.ndarray) else [int(i) for i in gen]
            for i in gl:
                ps = preds[i]
                if not ps:
                    s = self._zeros()
                elif len(ps) == 1:
                    q = ps[0]
                    if rem[q] == 1:  # the last consumer takes the slot over (same values)
                        s, sl[q] = sl[q], -1
                    else:
                        s = self._copy(sl[q])
                else:
                    s = self._max_of([sl[q] for q in ps], i)
                if self.mu is not mu:  # grown
                    mu, C, K = self.mu, self.C, self.K
                mu[s] += m_arr[i]
                C[s, s] += s_arr[i] ** 2
                if k3 is not None:
                    K[s, s, s] += k3[i]
                sl[i] = s
                for q in ps:
                    rem[q] -= 1
                    if rem[q] == 0 and sl[q] >= 0:
                        self._release(sl[q])
                        sl[q] = -1
            sinks += [i for i in gl if rem[i] == 0]
        remaining[:] = rem
        slot[:] = sl

    def _end(self, state: tuple, groups: None) -> tuple[float, float, int]:
        """The max over the sinks (in node order); ``(mean, variance, n_max)``."""
        slot, sinks = state[1], sorted(state[2])
        ends = [int(slot[i]) for i in sinks]
        self.last = self._max_of(ends, -1) if len(ends) > 1 else ends[0]
        return float(self.mu[self.last]), float(self.C[self.last, self.last]), self.n_max

    def kappa3(self, slot: int) -> float:
        """Third cumulant of the node in ``slot``."""
        return float(self.K[slot, slot, slot])

    def op_loadings(self, gens: list[np.ndarray], n: int) -> np.ndarray:
        """Zeros: the ops' third cumulants are already in ``K`` (nothing to add at the sink)."""
        return np.zeros(n)


def cumulant_makespan(
    graph: nx.DiGraph,
    mean: Mapping[Hashable, float],
    std: Mapping[Hashable, float],
    *,
    window: int | None = None,
    kappa3: Mapping[Hashable, float] | None = None,
) -> SkewResult:
    """Mean, std and skewness of a DAG's makespan by the third-cumulant closure (an estimate).

    Parameters
    ----------
    graph, mean, std, window, kappa3
        As :func:`~.skew_core.skew_makespan` (``window``: the kurtosis core's, which supplies
        each max's excess kurtosis); no shared-factor loadings.

    Returns
    -------
    SkewResult

    Raises
    ------
    ValueError
        As :func:`~.skew_core.skew_makespan`.

    Examples
    --------
    >>> g = nx.DiGraph([("a", "c"), ("b", "c")])  # one max of independent normals: exact
    >>> r = cumulant_makespan(g, dict(a=1.0, b=1.0, c=0.0), dict(a=1.0, b=1.0, c=0.0))
    >>> round(r.mean, 5)
    1.56419
    """
    return _makespan(_CumulantEngine, graph, mean, std, None, window, kappa3)  # type: ignore[arg-type]


def cumulant_pipeline(
    spec: Any, *, window: int | None = None, cap: int | None = None
) -> tuple[SkewResult, dict[str, Any]]:
    """The closure on a plain compact pipeline (no shared factors).

    Truncation, extrapolation, returns and errors as :func:`~.skew_core.skew_pipeline`.
    """
    return _pipeline(_CumulantEngine, "cumulant_pipeline", spec, window, cap)  # type: ignore[arg-type]


def cached_cumulant_pipeline(
    key: tuple, spec: Any, window: int | None
) -> tuple[SkewResult, dict[str, Any]]:
    """:func:`cumulant_pipeline`, cached by ``key`` and the window (the skew core's cache)."""
    return _cached_pipeline(_CumulantEngine, "cumulant_pipeline", key, spec, window)  # type: ignore[arg-type]
