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

Implementation: the notes' dense CM is O(N^3); here every quantity is kept as inner products
over the *live* nodes only (nodes with unprocessed successors): ``C`` (covariance with every live
node), ``P`` (Gram matrix of the linear parts), ``M`` (projections on the W windowed residual
directions), the residual weights and each residual's Hermite vector. Nodes are processed one
topological generation at a time: O(N * (L + W) * 8), independent of the number of sources; with
an unlimited window it equals the dense form to 1e-12 (tests/engines/test_canonical.py). Default
window:
``32 x width``, at least 64. Accuracy by window and method: ``validation/results/
canonical_accuracy.md`` (``validation/pipeline_methods.py``); tied interleaved lattices are the
worst case (tests/engines/test_crosscheck_interleaved.py).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from itertools import chain

import networkx as nx
import numpy as np
from scipy import special

from .blas_threads import single_blas_thread

__all__ = ["METHODS", "HERMITE_ORDER", "CanonicalResult", "canonical_makespan"]

METHODS: tuple[str, ...] = ("clark-mehler", "clark", "independent")
#: Highest Hermite order of the Mehler expansion (notes §4: He2 alone carries ~88% at alpha=0).
HERMITE_ORDER = 8
#: Default window = this many residuals per unit of DAG width (widest topological generation):
#: within KS 0.002 of untruncated on every measured case (8 per width is not, at 16 x 64).
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
        so accurate for ``n`` up to 1e9 and ``q`` up to 1 - 1e-9.
        """
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        qa = _check_levels(q)
        with np.errstate(divide="ignore"):
            upper = -np.expm1(np.log(qa) / n)
        z = -special.ndtri(upper)
        out = self.mean + self.std * z if self.std > 0 else np.full_like(qa, self.mean)
        return out if np.ndim(out) else float(out)


def _check_levels(q: float | np.ndarray) -> np.ndarray:
    qa = np.asarray(q, dtype=float)
    if not np.all((qa >= 0) & (qa <= 1)):
        raise ValueError(f"quantile levels q must lie in [0, 1], got {q!r}")
    return qa


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
    persistent per-stage speed) and ``Z_i`` (private noise). ``finish(i)`` is the max
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
        ("clark-mehler" only). Default 32 x graph width (its widest topological generation),
        >= 64; a value >= the number of maxima gives the untruncated method. Maxima of one
        topological generation are batched: they all see the window as it was before it.

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
    v_sum = v_a + v_b
    th2 = v_sum - 2.0 * c_ab
    tie = th2 <= _TIE_RTOL * v_sum
    dmu = mu_a - mu_b
    # no tie: the same values without the tie branches (np.where's other side);
    # count_nonzero costs a quarter of any()
    if not np.count_nonzero(tie):
        th = np.sqrt(th2)
        al = dmu / th
        t, tc = special.ndtr(al), special.ndtr(-al)
        thph = th * _INV_SQRT_2PI * np.exp(-0.5 * al * al)
    else:
        th = np.sqrt(np.where(tie, 1.0, th2))
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
        # the last k free slots, in the order k pop()s would take them (one slice, not k pops)
        cut = len(self.free) - k
        taken = self.free[cut:]
        del self.free[cut:]
        return np.array(taken[::-1], dtype=np.intp)

    def release(self, slots) -> None:
        self.free.extend(slots.tolist() if isinstance(slots, np.ndarray) else map(int, slots))

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
        var = s * s
        for a in self._mats():
            a[slots, slots] += var

    def maxes(self, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
        """New slots holding max(A_k, B_k) for each pair (batched; a ring window bounds size)."""
        step = self.W if self.mehler else len(ia)
        if 0 < len(ia) <= step:  # one batch (the usual case): no list and no concatenate
            return self._max_batch(ia, ib)
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
            np.fill_diagonal(blk, var)
        else:
            hh, live = _unit_hermite(al, thph)
            rv = live.astype(float)
            P = self.P
            dp = P[ia] - P[ib]  # (a_A - a_B) . a_j for every slot j
            ar = np.arange(g)
            d2 = dp[ar, ia] - dp[ar, ib]
            # The new residual's direction is that of the linear parts' difference a_A - a_B.
            ok = (d2 > _DIR_RTOL * (P[ia, ia] + P[ib, ib])) & (d2 > 0) & ~tie
            if np.count_nonzero(ok) == g:  # (the masked form's values, without its where()s)
                inv_dn = 1.0 / np.sqrt(d2)
            else:
                inv_dn = np.where(ok, 1.0 / np.sqrt(np.where(ok, d2, 1.0)), 0.0)
            blk = self._commit_batch(
                iy, ia, ib, t, tc, va, vb, cab, var, rows, hh, rv, dp, inv_dn, cov_dirs=False
            )[0]
        C[iy, :] = rows
        C[:, iy] = rows.T
        C[iy[:, None], iy] = blk
        self.mu[iy] = mu
        if self.nf:  # (no shared factors: fa has no columns)
            self.fa[iy] = t[:, None] * self.fa[ia] + tc[:, None] * self.fa[ib]
        return iy

    def _commit_batch(
        self,
        iy: np.ndarray,
        ia: np.ndarray,
        ib: np.ndarray,
        t: np.ndarray,
        tc: np.ndarray,
        va: np.ndarray,
        vb: np.ndarray,
        cab: np.ndarray,
        var: np.ndarray,
        rows: np.ndarray,
        hh: np.ndarray,
        rv: np.ndarray,
        dd: np.ndarray,
        inv: np.ndarray,
        cov_dirs: bool,
    ) -> tuple[np.ndarray, ...]:
        """Residual weights, Mehler covariances and ring update of a batch of new maxima.

        The bookkeeping shared by this engine and the skew engine (:mod:`.skew_core`); each
        computes its own residual direction first and passes it as ``dd`` (``(g, n)``: the
        direction's unnormalised inner product with every slot) and ``inv`` (one over its norm,
        0 where there is no residual). Writes ``P`` and the Mehler state (``M``, ``cw``, ``H``,
        ``uF``, the ring) and adds the residual terms to ``rows`` in place; ``C``, ``mu`` and
        ``fa`` are left to the caller.

        Parameters
        ----------
        iy, ia, ib : numpy.ndarray
            New slots and the slots of the two inputs of each max.
        t, tc : numpy.ndarray
            Clark's tightness ``T`` and ``1 - T``.
        va, vb, cab : numpy.ndarray
            Variances and covariance of the inputs.
        var : numpy.ndarray
            Clark's variance of each max.
        rows : numpy.ndarray
            ``(g, n)`` covariance rows of the linear parts (updated in place).
        hh : numpy.ndarray
            ``(g, NH - 1)`` unit Hermite coefficients of each residual (:func:`_unit_hermite`).
        rv : numpy.ndarray
            1.0 where a residual exists, else 0.0.
        dd, inv : numpy.ndarray
            The residual directions, as above.
        cov_dirs : bool
            Whether the new nodes' own components along the new directions come from the
            covariance rows (True: the skew engine's full difference ``A - B``) or from the
            linear parts' Gram rows (False: this engine's ``a_A - a_B``).

        Returns
        -------
        tuple of numpy.ndarray
            ``(blk, s, pos, r, r12)``: the new-new covariance block (Clark's variance on the
            diagonal), the residual weights, the ring slots the residuals took, and the
            correlations of the new directions with the window's and among themselves.
        """
        g = len(ia)
        coef = _FACT * hh
        # Mehler: Cov(R_l, R_new / s) = sum_n n! h_l[n] hhat[n] r^n, r = u_l . u_new
        # the inputs' rows of M, gathered once: the new directions' cosines here, the new
        # nodes' own rows of M below (M is not written in between)
        W = self.W
        m_a, m_b = self.M[ia], self.M[ib]
        # Within the batch: new residual directions r12 and their Mehler covariance, summed
        # in the same call as the window's (elementwise: the same values as two calls). The
        # products and clips below are those of clip((m_a - m_b) * inv) and
        # clip(d * inv_i * inv_j), written in place into one buffer.
        r_all = np.empty((g, W + g))
        r, r12 = r_all[:, :W], r_all[:, W:]
        np.subtract(m_a, m_b, out=r)
        r *= inv[:, None]
        np.clip(r, -1.0, 1.0, out=r)
        d12 = dd[:, ia] - dd[:, ib]
        d12 *= inv[:, None]
        d12 *= inv[None, :]
        # clip's value (max, then min), as two ufuncs: np.clip's wrapper costs ~2 us a call
        np.minimum(np.maximum(d12, -1.0, out=d12), 1.0, out=r12)
        h_t = np.empty((HERMITE_ORDER - 1, W + g))  # C order (einsum is slow on F order)
        h_t[:, :W] = self.H.T
        h_t[:, W:] = hh.T
        both = _mehler_t(coef, h_t, r_all)
        q = np.ascontiguousarray(both[:, :W])  # (BLAS reads q: the layout it always had)
        m12 = both[:, W:]
        # t * cw[ia] + tc * cw[ib], in place in the gathered rows (a product commutes exactly)
        cwl = self.cw[ia]
        cwl *= t[:, None]
        cw_b = self.cw[ib]
        cw_b *= tc[:, None]
        cwl += cw_b
        # Weights decay geometrically through the tightness products; flush them before they
        # become subnormal (which slows BLAS ~50x) -- below 1e-15 they change nothing.
        cwl[np.abs(cwl) < _FLUSH] = 0.0
        beta = (cwl * q).sum(axis=1)
        base = t * t * va + tc * tc * vb + 2.0 * t * tc * cab
        dv = np.maximum(var - base, 0.0)
        disc = np.sqrt(beta * beta + rv * dv)
        # Root of rv s^2 + 2 beta s = dv (so that Var = Clark's), in its cancellation-free form.
        up = beta >= 0
        den = np.where(up, beta + disc, rv)
        num = np.where(up, dv, disc - beta)
        pos_den = den > 0
        if np.count_nonzero(pos_den) == g:  # (the masked division's values)
            s = np.maximum(num / den, 0.0)
        else:
            s = np.maximum(np.divide(num, den, out=np.zeros(g), where=pos_den), 0.0)
        var = base + 2.0 * s * beta + s * s * rv
        # BLAS on one thread (run() holds single_blas_thread): 4-5x faster than einsum's
        # loops at 16 x 512 x 128; a threaded BLAS on a busy 2-core box was 5-10x slower.
        rows += s[:, None] * (q @ self.cw.T)
        if not cov_dirs:  # (the skew engine never reads the Gram matrix P: not kept there)
            P = self.P
            prow = t[:, None] * P[ia] + tc[:, None] * P[ib]
            pblk = t[None, :] * prow[:, ia] + tc[None, :] * prow[:, ib]
            P[iy, :] = prow
            P[:, iy] = prow.T
            P[iy[:, None], iy] = pblk  # (np.ix_ costs ~10 us a call)
        blk = t[None, :] * rows[:, ia] + tc[None, :] * rows[:, ib]
        blk += s[None, :] * (cwl @ q.T + s[:, None] * m12)
        np.fill_diagonal(blk, var)
        # New residuals enter the ring, evicting the oldest.
        if self.ring + g <= self.W:
            pos = np.arange(self.ring, self.ring + g)
            cols = slice(self.ring, self.ring + g)  # (strided fancy writes cost ~4x a slice's)
        else:
            pos = (self.ring + np.arange(g)) % self.W
            cols = pos
        self.ring = (self.ring + g) % self.W
        own = rows if cov_dirs else prow
        m_a *= t[:, None]  # t * m_a + tc * m_b, in place (m_a, m_b are gathered copies)
        m_b *= tc[:, None]
        m_a += m_b
        self.M[iy] = m_a
        self.cw[iy] = cwl
        self.cw[:, cols] = 0.0
        self.cw[iy, pos] = 1.0
        self.M[:, cols] = dd.T * inv[None, :]
        self.M[iy[:, None], pos] = (own[:, ia] - own[:, ib]) * inv[None, :]
        self.H[cols] = s[:, None] * hh
        if self.nf:
            self.uF[cols] = (self.fa[ia] - self.fa[ib]) * inv[:, None]
        return blk, s, pos, r, r12

    # -- driver ----------------------------------------------------------------------------
    def run(self, gens, preds, m_arr, s_arr, lmat, groups=None):
        """Propagate the DAG; ``(mean, var, n_max)`` of its makespan.

        ``groups`` (one label 0..G-1 per node) marks G independent DAGs evaluated in one
        pass (their maxima batched together: fewer, larger numpy calls); the result is then a
        list of G ``(mean, var, n_max)``, one makespan per DAG.
        """
        with single_blas_thread():  # small products: threads only wait on a busy box
            return self._run(gens, preds, m_arr, s_arr, lmat, groups)

    def _run(self, gens, preds, m_arr, s_arr, lmat, groups):
        state = self._begin(preds)
        self._advance(state, gens, preds, m_arr, s_arr, lmat)
        return self._end(state, groups)

    def run_forked(self, dags, shared):
        """``(mean, var, n_max)`` of several DAGs whose first ``shared`` generations coincide.

        ``dags`` is a sequence of ``(gens, preds, m_arr, s_arr, lmat)``. The shared generations
        (see :func:`shared_generations`) are propagated once; the engine is then copied and each
        DAG continues from its own copy. Every DAG sees exactly the state, and performs exactly
        the operations, of a run of its own, so the results equal separate :meth:`run` calls.
        """
        with single_blas_thread():
            gens0, preds0, m0, s0, l0 = dags[0]
            state = self._begin(preds0)
            self._advance(state, gens0[:shared], preds0, m0, s0, l0)
            pre = np.concatenate([np.asarray(g, dtype=np.intp) for g in gens0[:shared]] or [[]])
            pre = pre.astype(np.intp)
            out = []
            for gens, preds, m_arr, s_arr, lmat in dags:
                eng = copy.deepcopy(self)
                own = eng._begin(preds)
                # prefix nodes: identical successors, so identical remaining counts and slots
                own[0][pre] = state[0][pre]
                own[1][pre] = state[1][pre]
                own[2].extend(state[2])
                eng._advance(own, gens[shared:], preds, m_arr, s_arr, lmat)
                out.append(eng._end(own, None))
            return out

    def _begin(self, preds):
        """Initial ``(remaining successors, slot, sinks)`` of a DAG's propagation."""
        n = len(preds)
        return _successor_counts(preds), np.full(n, -1, dtype=np.intp), []

    def _end(self, state, groups):
        slot, sinks = state[1], state[2]
        if groups is not None:
            labels = np.asarray(groups)
            return [
                self._sink_max(slot, [k for k in sinks if labels[k] == g])
                for g in range(int(labels.max()) + 1)
            ]
        return self._sink_max(slot, sinks)

    def _advance(self, state, gens, preds, m_arr, s_arr, lmat):
        """Propagate the generations ``gens`` (in order) from ``state``, updated in place."""
        remaining, slot, sinks = state
        # The per-node bookkeeping runs on Python lists: indexing a numpy array by one scalar
        # costs ~5x a list's (llama3-405b's 4,096 ops: 16 -> 8 ms); written back at the end.
        rem = remaining.tolist()
        n_pred = [len(q) for q in preds]
        for gen in gens:
            gl = gen.tolist() if isinstance(gen, np.ndarray) else [int(i) for i in gen]
            srcs = [i for i in gl if not n_pred[i]]
            ones = [i for i in gl if n_pred[i] == 1]
            multi = [i for i in gl if n_pred[i] >= 2]
            if srcs:
                slot[srcs] = self.zeros(len(srcs))
            if ones:
                # The last consumer of a node takes its slot over; others get a copy.
                move = [i for i in ones if rem[preds[i][0]] == 1]
                cp = [i for i in ones if rem[preds[i][0]] != 1]
                for i in move:
                    slot[i] = slot[preds[i][0]]
                    slot[preds[i][0]] = -1
                if cp:
                    slot[cp] = self.copy(slot[[preds[i][0] for i in cp]])
            if multi and all(n_pred[i] == 2 for i in multi):
                # two inputs each (every pipeline op): the increasing-mean order of sorted(),
                # ties in input order, without a Python sort per node
                first = np.array([preds[i][0] for i in multi], dtype=np.intp)
                second = np.array([preds[i][1] for i in multi], dtype=np.intp)
                swap = self.mu[slot[second]] < self.mu[slot[first]]
                ia = slot[np.where(swap, second, first)]
                ib = slot[np.where(swap, first, second)]
                slot[multi] = self.maxes(ia, ib)
            elif multi:
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
            # Each input loses a pending successor; one left with none frees its slot, in the
            # order the counts reach zero (the free list's order decides later slots).
            done = []
            for i in gl:
                for p in preds[i]:
                    rem[p] -= 1
                    if rem[p] == 0:
                        done.append(p)
            if done:
                held = slot[done]
                keep = held >= 0  # a slot handed over to a single successor is not freed
                self.release(held[keep])
                slot[np.asarray(done, dtype=np.intp)[keep]] = -1
            sinks += [i for i in gl if rem[i] == 0]
        remaining[:] = rem

    def _sink_max(self, slot, sinks):
        """Final max over sinks, pairwise in increasing-mean order."""
        sinks = sorted(sinks, key=lambda k: self.mu[slot[k]])
        acc = slot[sinks[0]]
        for k in sinks[1:]:
            acc = self.maxes(np.array([acc]), np.array([slot[k]]))[0]
        self.sink_loadings = self.fa[acc].copy()  # the makespan's loadings on shared factors
        return self.mu[acc], self.C[acc, acc], self.n_max


def _successor_counts(preds: list) -> np.ndarray:
    """Number of successors of each node, given each node's predecessor list."""
    flat = np.fromiter(chain.from_iterable(preds), dtype=np.intp)
    return np.bincount(flat, minlength=len(preds)).astype(int)


def shared_generations(dags) -> int:
    """Number of leading topological generations that all ``dags`` have in common, op for op.

    ``dags`` holds ``(gens, preds, m_arr, s_arr, lmat)`` per DAG (the arguments of
    :meth:`_Engine.run`). A generation is shared when it holds the same node indices in every
    DAG and each of its nodes has the same predecessors, the same number of successors and the
    same latency (mean, sd, loadings) in every DAG: the propagation of those generations is then
    the same computation in every DAG, and :meth:`_Engine.run_forked` may do it once.
    """
    succ = [_successor_counts(preds) for _, preds, *_ in dags]
    gens0, preds0, m0, s0, l0 = dags[0]
    for k, gen in enumerate(gens0):
        idx = np.asarray(gen, dtype=np.intp)
        for (gens, preds, m_arr, s_arr, lmat), cnt in zip(dags[1:], succ[1:], strict=True):
            same = (
                k < len(gens)
                and np.array_equal(gens[k], idx)
                and all(list(preds[i]) == list(preds0[i]) for i in idx)
                and np.array_equal(cnt[idx], succ[0][idx])
                and np.array_equal(m_arr[idx], m0[idx])
                and np.array_equal(s_arr[idx], s0[idx])
                and np.array_equal(lmat[idx], l0[idx])
            )
            if not same:
                return k
    return len(gens0)


def _unit_hermite(
    al: np.ndarray, thph: np.ndarray, tie: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Unit Hermite coefficients of each max's residual and where a residual exists.

    Hermite coefficients of theta*(U + alpha)^+ for n = 2..NH: theta*phi*He_{n-2}(-al)/n!,
    kept as a unit vector (sum n! h[n]^2 = 1): the residual's scale theta*phi(alpha)
    underflows to ~1e-160 when one input dominates by ~27 sd, and solving for the
    residual weight s in those units overflowed (s ~ 1e154, s * s * rv = inf). The
    weight is solved for the unit residual instead (the same s * hh, no overflow).

    Parameters
    ----------
    al : numpy.ndarray
        Clark's alpha of each max.
    thph : numpy.ndarray
        ``theta * phi(alpha)`` (0 at an exact tie or a total underflow: no residual).
    tie : numpy.ndarray, optional
        Further maxima to give no residual (the skew engine's exact ties).

    Returns
    -------
    tuple of numpy.ndarray
        ``(hh, live)``: ``(g, NH - 1)`` coefficients (zero rows where not live) and the mask.
    """
    hh = np.empty((len(al), HERMITE_ORDER - 1))
    x = -al
    # He_{k+1} = x He_k - k He_{k-1} from He_0 = 1; its first two steps are exact
    # (x * 1 - 0 * 0 = x, x * x - 1 * 1 = x * x - 1), so they are written as such
    hh[:, 0] = 1.0
    hh[:, 1] = x
    he_prev, he = x, x * x - 1.0
    hh[:, 2] = he
    for k in range(2, HERMITE_ORDER - 2):
        he_prev, he = he, x * he - k * he_prev
        hh[:, k + 1] = he
    hh /= _FACT  # column by column: he / n!, as dividing each column on its own
    norm = np.sqrt((_FACT * hh * hh).sum(axis=1))
    live = (thph > 0) & (norm > 0)  # no residual at an exact tie or a total underflow
    if tie is not None:
        live &= ~tie
    if np.count_nonzero(live) == live.size:  # the masked form's values, without its where()s
        hh *= (1.0 / norm)[:, None]
    else:
        hh *= np.where(live, 1.0 / np.where(live, norm, 1.0), 0.0)[:, None]
    return hh, live


def _mehler_t(coef: np.ndarray, h_t: np.ndarray, r: np.ndarray) -> np.ndarray:
    """sum_n coef[i, n] * h[l, n] * r[i, l]^n over n = 2..NH, given ``h.T`` as a contiguous array.

    ``coef`` already holds n!. The operations of the plain power-sum loop in its order, so the
    result is bit-identical to it (Horner's scheme differs by ~1e-16, which moves grid cells).
    """
    a = np.einsum("ik,kl->kil", coef, h_t)  # (order, i, l)
    rn = np.empty(a.shape)
    np.multiply(r, r, out=rn[0])
    for k in range(1, HERMITE_ORDER - 1):
        np.multiply(rn[k - 1], r, out=rn[k])
    a *= rn
    return a.sum(axis=0)
