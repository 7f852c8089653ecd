"""Skew-aware canonical core: Clark-Mehler on full differences, a third cumulant, a Pearson III law.

The Clark-Mehler form (:mod:`.canonical`) is high in mean and low in std on deep tied lattices,
and its output is a normal. This module changes both the moments and the shape:

* **Mehler on full differences.** A residual ``R_k = max(A, B) - linear part`` is a function of
  the whole standardised difference ``U_k = (A - B - E) / theta_k``, residual parts included
  (in a tied lattice much of ``A - B`` is earlier residuals shared by neighbouring maxima), so
  Mehler's formula gets ``Cov(D_k, D_l) / (theta_k theta_l)``, tracked per live node ``j`` as
  ``Cov(X_j, D_l) / theta_l``. The rest (residual weights, window) is Clark-Mehler's.
* **The ops' third cumulants in every max.** With skewed ops each live node keeps its loadings
  on the most recent ops (:data:`OP_WINDOW_PER_WIDTH`); they give ``D = A - B`` its skewness,
  which enters Clark's mean and ``E[(D+)^2]`` as the Gram-Charlier He3 term
  (:func:`~.gram_charlier.gram_charlier_max`), plus the first-order Stein terms of a max of
  skewed inputs (:meth:`_FullEngine._op_skew_max`), an op's skewness clipped to
  +-:data:`MAX_SKEW_D`. With symmetric ops each max is Clark's, bit for bit. The kurtosis core
  (:mod:`.kurtosis_core`) adds ``D``'s excess kurtosis to these terms.
* **A third cumulant from the Wiener-chaos form** ``mu + G + sum_k w_k g_k(U_k)``: the terms of
  one residual with itself and with ``G`` are exact; those between different residuals keep
  their He2 part (diagram formula). The ops' own third cumulants reach the sink through its
  linear loadings, found by one reverse pass. The law is a Pearson III with that mean, std and
  skewness.

All analytic (no sampling); about 1.4x Clark-Mehler's cost with symmetric ops. Accuracy:
``validation/results/skew_core_agreement.md`` (``validation/skew_core_agreement.py``) and
``validation/results/skew_core_k3.md``; interleaved schedules and 1F1B 32 x 64 remain
short of KS 0.03 (strongly skewed ``A - B``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import networkx as nx
import numpy as np
from scipy import special, stats

from ..distributions import Distribution, from_scipy, normal, point_mass
from .blas_threads import single_blas_thread
from .canonical import (
    MIN_WINDOW,
    WINDOW_PER_WIDTH,
    _clark,
    _Engine,
    _prepare,
    _unit_hermite,
)
from .gram_charlier import gram_charlier_max

__all__ = [
    "SkewResult",
    "skew_makespan",
    "skew_pipeline",
    "cached_skew_pipeline",
    "clear_cache",
    "skew_law",
    "third_cumulant",
    "MAX_SKEW",
    "MAX_SKEW_D",
    "OP_WINDOW_PER_WIDTH",
    "MIN_OP_WINDOW",
    "SKEW_OPS_CAP",
    "STEADY_CAP",
    "STEADY_RTOL",
]

#: Largest compact pipeline evaluated op by op (longer ones are truncated and extrapolated):
#: extrapolating in the transient over-states the variance; keeps the suite's 32 x 64 whole.
SKEW_OPS_CAP = 8192
#: A pipeline longer than this many ops is first evaluated at the two block sizes that fit it and
#: one block more (:func:`_steady`); in the steady state the makespan is extrapolated from them
#: (cheaper than the sizes that fit :data:`SKEW_OPS_CAP`, and equal to ~1e-9 sd).
STEADY_CAP = 2048
#: Steady state: extrapolating the two blocks' increments over the blocks still to come agrees
#: to this fraction of the makespan's sd (mean), variance and sd^3 (third cumulant).
STEADY_RTOL = 1e-5
#: Largest |skewness| given to the Pearson III law (shape 4 / skew^2 >= 1: a bounded density).
#: Makespans of tied lattices measure 0.03-0.2; the clip only guards degenerate inputs.
MAX_SKEW = 2.0
#: Largest |skewness| of an input difference used (skewed ops only).
MAX_SKEW_D = 1.0
#: Recent ops whose loadings every live node keeps (skewed ops only): this many per unit of
#: DAG width, at least :data:`MIN_OP_WINDOW` (more ops barely move KS).
OP_WINDOW_PER_WIDTH = 4
MIN_OP_WINDOW = 64
#: Smallest variance of a unit-theta rectifier residual whose own third moments are used.
MIN_RESIDUAL_VAR = 1e-9
#: Residuals whose He2 weight on the sink is below this fraction of the largest are left out of
#: the third cumulant (their contributions scale with the cube of the weight: < 1e-9 relative).
_KEEP_RTOL = 1e-3


@dataclass(frozen=True)
class SkewResult:
    """Mean, standard deviation and skewness of a makespan from the skew-aware core.

    Attributes
    ----------
    mean, std : float
        Moments (Clark-Mehler on full differences, with the ops' skewness terms).
    skew : float
        Skewness ``kappa3 / std^3`` (Wiener-chaos estimate, clipped to +-:data:`MAX_SKEW`).
    window : int
        Residual window.
    n_ops : int
        Number of DAG nodes (0 when extrapolated from truncated pipelines).
    """

    mean: float
    std: float
    skew: float
    window: int
    n_ops: int = 0

    def law(self) -> Distribution:
        """The approximating Pearson III law (see :func:`skew_law`)."""
        return skew_law(self.mean, self.std, self.skew)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-friendly)."""
        return {
            "mean": self.mean,
            "std": self.std,
            "skew": self.skew,
            "window": self.window,
            "n_ops": self.n_ops,
        }


def skew_law(mean: float, std: float, skew: float) -> Distribution:
    """Pearson type III law with the given mean, std (>= 0) and skewness.

    A shifted gamma (mirrored for negative skew); a normal when the skew is 0 and a point mass
    when the std is 0.

    Examples
    --------
    >>> d = skew_law(10.0, 1.0, 0.5)
    >>> round(d.mean(), 9), round(d.std(), 9)
    (10.0, 1.0)
    """
    for name, val in (("mean", mean), ("std", std), ("skew", skew)):
        if not math.isfinite(val):
            raise ValueError(f"{name} must be finite, got {val!r}")
    if std < 0:
        raise ValueError(f"std must be >= 0, got {std!r}")
    if std == 0:
        return point_mass(mean)
    g = float(np.clip(skew, -MAX_SKEW, MAX_SKEW))
    if g == 0:
        return normal(mean, std)
    return from_scipy(stats.pearson3(g, loc=mean, scale=std))


class _FullEngine(_Engine):
    """Clark-Mehler with Mehler correlations of the full differences, and the sink's kappa3.

    ``M[j, l]`` holds ``Cov(X_j, D_l) / theta_l`` (instead of the projection of the linear
    part of ``X_j`` on the linear direction of ``D_l``), ``uF[l]`` the factor part of
    ``D_l / theta_l``, and ``G`` the correlations between the window's ``U_l``.

    With skewed ops (``op_k3`` given, not all zero) each live node also keeps its loadings on
    the ``R`` most recent ops (``L``, ring of columns; ``K3``, ``V``: those ops' third
    cumulants and variances), from which each max gets ``D``'s skewness and the Stein terms
    (:meth:`_op_skew_max`). With symmetric ops ``R = 0`` and every max is Clark's.

    Subclasses (:mod:`.kurtosis_core`) change the moments of each max through
    :meth:`_correct` and :meth:`_finish`, and name in :attr:`slot_rows` their own per-slot
    arrays (besides ``L``), which this class grows, zeroes and copies with the slots.
    """

    #: The core shape this engine computes (the pipeline cache tells shapes apart by it).
    shape: ClassVar[str] = "skew"
    #: Attributes holding one row per slot besides the canonical state (``(cap, k)`` arrays).
    slot_rows: ClassVar[tuple[str, ...]] = ("L",)
    #: Ops whose |skewness| is at most this count as symmetric in the maxima (:func:`_op_k3`).
    #: A normal law put on a grid (an explicit core's edge) keeps a cell-centre third moment
    #: of rounding size (skewness <= 1.5e-14 on an op-by-op 1F1B 8 x 32 at CV 5%), which would
    #: otherwise switch on the op ring and move the last bits of symmetric-op results; real
    #: skewed ops sit far above (a lognormal at CV 0.1% has skewness 3e-3). The sink's third
    #: cumulant still reads every op's own value.
    op_skew_floor: ClassVar[float] = 1e-9
    #: Whether the pipeline driver may propagate two truncated schedules' common start once
    #: and copy the engine (:func:`_forked`); a subclass with per-DAG state of its own sets
    #: False or extends :meth:`_rebind`.
    forkable: ClassVar[bool] = True
    #: Schedule periods per extrapolation block (:func:`_block_sizes`): an engine whose block
    #: increments repeat only every k periods (the cumulant core's alternate) sets k.
    block_periods: ClassVar[int] = 1

    @classmethod
    def for_dag(
        cls, n_factors: int, window: int, gens: list[np.ndarray], k3_arr: np.ndarray | None
    ) -> _FullEngine:
        """An engine for one DAG (``gens``: its generations; ``k3_arr``: its ops' kappa3).

        The ops' third cumulants are taken in the order the driver adds ops (generation by
        generation); an op law without a finite third moment is left out of the op-skew terms
        (its skew has no finite value).
        """
        op_k3 = None
        if k3_arr is not None:
            seq = np.concatenate([k3_arr[np.asarray(g, dtype=np.intp)] for g in gens])
            op_k3 = np.where(np.isfinite(seq), seq, 0.0)
        width = max(len(g) for g in gens)
        return cls(n_factors, window, op_k3, max(MIN_OP_WINDOW, OP_WINDOW_PER_WIDTH * width))

    def __init__(
        self,
        n_factors: int,
        window: int,
        op_k3: np.ndarray | None = None,
        op_window: int = 0,
        cap: int = 32,
    ) -> None:
        super().__init__(n_factors, window, cap)
        skewed = op_k3 is not None and bool(np.any(op_k3 != 0))
        self.R = op_window if skewed else 0
        self.L = np.zeros((self.cap, self.R))
        self.K3 = np.zeros(self.R)
        self.V = np.ones(self.R)
        self.oring = 0
        self._k3_seq = op_k3 if skewed else None
        self._k3_at = 0
        self.G = np.eye(self.W)
        # per residual: weight s (std of s * unit residual), and Clark's alpha and whether it is
        # live, from which E[g^3] and E[U g^2] of the unit one follow (:meth:`rectifier`)
        self.S = np.zeros(self.W)
        self.AL = np.zeros(self.W)
        self.LIVE = np.zeros(self.W, dtype=bool)
        self.last = -1  # the slot written last: the sink once run() is over
        self.tape: list[tuple] = []

    def _rebind(self, fresh: _FullEngine) -> bool:
        """Continue, after a shared start, as the engine ``fresh`` (built for another DAG).

        Takes over ``fresh``'s op third cumulants; False when they differ in a way that would
        have changed the shared start (another op window, or other third cumulants of the ops
        added so far).
        """
        if not isinstance(fresh, _FullEngine) or fresh.R != self.R:
            return False
        if self.R:
            done = self._k3_seq[: self._k3_at]
            if not np.array_equal(fresh._k3_seq[: self._k3_at], done):
                return False
            self._k3_seq = fresh._k3_seq
        return True

    def fork(self) -> _FullEngine:
        """A copy to continue from (the tape's records are never changed once written: shared)."""
        return copy.deepcopy(self, {id(self.tape): list(self.tape)})

    def _resume(self, preds: list, state: tuple, pre: np.ndarray) -> tuple:
        """A fresh propagation state for ``preds``'s DAG that continues the forked ``state``."""
        own = self._begin(preds)
        adopt_prefix(own, state, pre)
        return own

    def _grow(self) -> None:
        old = self.cap
        super()._grow()
        for name in self.slot_rows:
            rows = getattr(self, name)
            grown = np.zeros((self.cap,) + rows.shape[1:])
            grown[:old] = rows
            setattr(self, name, grown)

    def _mats(self) -> tuple[np.ndarray, ...]:
        # Only C: this engine's residual directions come from the covariances (``cov_dirs``),
        # so the Gram matrix P of the linear parts is never read; it is not kept up to date
        # by zeros / copy / add (it stays 0: _commit_batch only mixes its rows).
        return (self.C,)

    # A tape of the slot operations, for the sink's linear loadings on every op (reverse mode).
    def zeros(self, k: int) -> np.ndarray:
        new = super().zeros(k)
        self.tape.append(("z", new.copy()))
        for name in self.slot_rows:
            getattr(self, name)[new] = 0.0
        return new

    def copy(self, src: np.ndarray) -> np.ndarray:
        new = super().copy(src)
        self.tape.append(("c", new.copy(), np.asarray(src).copy()))
        for name in self.slot_rows:
            rows = getattr(self, name)
            rows[new] = rows[src]
        return new

    def add(self, slots: np.ndarray, m: np.ndarray, s: np.ndarray, lm: np.ndarray) -> None:
        super().add(slots, m, s, lm)
        self.tape.append(("a", np.asarray(slots).copy()))
        self.last = int(slots[-1])
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
        # An op's skewness is clipped to +-MAX_SKEW_D, the bound D's skewness gets: the
        # Gram-Charlier and first-order Stein terms hold for mild skew only, and an op far
        # beyond it (a 0.2% chance of 3x: skewness 21) drove the loadings, compounded through
        # the lattice, to a mean 1,000 sd off. Lognormals up to CV 33% are untouched.
        cap = MAX_SKEW_D * np.abs(s) ** 3
        k3 = self._k3_seq[self._k3_at : self._k3_at + g]
        self.K3[pos] = np.minimum(np.maximum(k3, -cap), cap)
        self.V[pos] = np.maximum(s * s, 1e-300)
        self._k3_at += g

    def maxes(self, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
        out = super().maxes(ia, ib)
        self.last = int(out[-1])
        return out

    def op_loadings(self, gens: list[np.ndarray], n: int) -> np.ndarray:
        """Each op's coefficient in the linear part of the sink (``d sink / d D_i``).

        Reverse accumulation over the tape: a max passes ``T`` and ``1 - T`` of its adjoint to
        its inputs (the linear part of Clark's max), a copy passes all of it back.
        """
        adj = np.zeros(self.cap)
        adj[self.last] = 1.0
        out = np.zeros(n)
        k = len(gens)
        for rec in reversed(self.tape):
            kind = rec[0]
            if kind == "a":
                k -= 1
                out[gens[k]] = adj[rec[1]]
            elif kind == "m":
                _, iy, ia, ib, t = rec
                w = adj[iy]
                adj[iy] = 0.0
                np.add.at(adj, ia, t * w)
                np.add.at(adj, ib, (1.0 - t) * w)
            elif kind == "c":
                w = adj[rec[1]]
                adj[rec[1]] = 0.0
                np.add.at(adj, rec[2], w)
            else:
                adj[rec[1]] = 0.0
        return out

    def _correct(
        self,
        ia: np.ndarray,
        ib: np.ndarray,
        clark: tuple[np.ndarray, ...],
        vb: np.ndarray,
        cab: np.ndarray,
        th2: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, Any]:
        """Mean and variance of each max of a batch, and what :meth:`_finish` needs.

        ``clark``: :func:`~.canonical._clark`'s output. With symmetric ops Clark's mean and
        variance, unchanged; with skewed ops those of :meth:`_op_skew_max` (``g2 = 0``). They
        are corrected here, before the residual weights are solved, so that the covariance
        bookkeeping matches; a subclass may correct them further.
        """
        if not self.R:
            return clark[4], clark[5], None
        return self._op_skew_max(ia, ib, clark, vb, cab, th2, 0.0)

    def _op_skew_max(
        self,
        ia: np.ndarray,
        ib: np.ndarray,
        clark: tuple[np.ndarray, ...],
        vb: np.ndarray,
        cab: np.ndarray,
        th2: np.ndarray,
        g2: np.ndarray | float,
    ) -> tuple[np.ndarray, np.ndarray, tuple | None]:
        """Clark's max with the ops' skewness terms and ``D``'s excess kurtosis ``g2``.

        With skewed ops (``R > 0``): ``D``'s skewness ``g1 = sum_r d_r^3 kappa3_r / theta^3``
        from its loadings ``d_r`` on the recent ops (clipped to +-:data:`MAX_SKEW_D`) enters
        the Gram-Charlier mean and ``E[(D+)^2]`` (:func:`~.gram_charlier.gram_charlier_max`),
        and the first-order Stein terms of a max of skewed inputs: ``Var(max)`` gains
        ``phi(alpha) / theta * kappa(e, D, D)`` (``B = beta D + e`` the larger-mean input,
        ``kappa(e, D, D) = kappa(B, D, D) - beta kappa3(D)``: the ``beta`` part is already in the
        Gram-Charlier ``Cov(D, D+)``) and the max's
        covariance with op ``r`` gains ``phi(alpha) / (2 theta) d_r^2 kappa3_r``. The third
        value (skewed ops only) is that extra covariance, with the inputs' op-loading rows and
        Clark's ``T``, ``1 - T``, for :meth:`_finish`.
        """
        t, tc, thph, _, mu, var, tie = clark
        ok = ~tie & (th2 > 0)
        th = np.sqrt(np.where(ok, th2, 1.0))
        g1 = 0.0
        extra = None
        if self.R:
            la, lb = self.L[ia], self.L[ib]  # (L is not written before _finish)
            d = la - lb
            dd = d * d * self.K3[None, :]
            g1 = np.where(ok, (d * dd).sum(axis=1) / th**3, 0.0)
            g1 = np.minimum(np.maximum(g1, -MAX_SKEW_D), MAX_SKEW_D)
            dens = np.where(ok, thph / np.maximum(th2, 1e-300), 0.0)  # phi(alpha) / theta
            cov_op = 0.5 * dens[:, None] * dd  # (g, R): extra Cov(max, w_r)
            extra = (cov_op, la, lb, t, tc)
            # 2 Cov(B, D+) = 2 beta Cov(D, D+) + kappa(e, D, D) phi(alpha) / theta with
            # B = beta D + e: the first term (D's skewness in it) is gram_charlier_max's, so the
            # Stein term takes kappa(e, D, D) = kappa(B, D, D) - beta kappa3(D), not kappa(B, D, D)
            beta = np.where(ok, (cab - vb) / np.where(ok, th2, 1.0), 0.0)
            k_edd = np.sum(lb * dd, axis=1) - beta * g1 * th**3
            var = var + dens * k_edd
        d_mu, d_var = gram_charlier_max(self.mu[ia] - self.mu[ib], th, t, thph, cab, vb, g2, g1)
        mu = mu + np.where(ok, d_mu, 0.0)
        var = np.maximum(var + np.where(ok, d_var, 0.0), 0.0)
        return mu, var, extra

    def _finish(self, iy: np.ndarray, rows: np.ndarray, extra: tuple | None) -> None:
        """The op-skew covariances (skewed ops only) into ``rows`` and the new op loadings.

        ``extra`` is what :meth:`_correct` returned; ``rows`` (the new maxima's covariance
        rows, slots ``iy``) is changed in place.
        """
        if extra is None:
            return
        cov_op, la, lb, t, tc = extra
        rows += cov_op @ self.L.T  # through each live node's loadings on those ops
        self.L[iy] = t[:, None] * la + tc[:, None] * lb + cov_op / self.V

    def _max_batch(self, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
        g = len(ia)
        self.n_max += g
        iy = self.alloc(g)
        C = self.C
        va, vb, cab = C[ia, ia], C[ib, ib], C[ia, ib]
        th2 = va + vb - 2.0 * cab
        clark = _clark(self.mu[ia], self.mu[ib], va, vb, cab)
        t, tc, thph, al, _, _, tie = clark
        mu, var, extra = self._correct(ia, ib, clark, vb, cab, th2)
        # the inputs' covariance rows, gathered once (C is not written before the end)
        ca, cb = C[ia], C[ib]
        rows = t[:, None] * ca + tc[:, None] * cb
        self.tape.append(("m", iy.copy(), ia.copy(), ib.copy(), t))
        hh, live = _unit_hermite(al, thph, tie)
        rv = live.astype(float)
        # The new residual's direction is that of the full difference A - B (earlier residuals
        # included), normalised by theta: inv = 1 / theta, r = Corr(D_l, D_new).
        inv = np.where(live, 1.0 / np.sqrt(np.where(live, th2, 1.0)), 0.0)  # 1 / theta
        dc = ca - cb  # Cov(D_new, X_j) for every slot j
        blk, s, pos, r, r12 = self._commit_batch(
            iy, ia, ib, t, tc, va, vb, cab, var, rows, hh, rv, dc, inv, cov_dirs=True
        )
        self._finish(iy, rows, extra)
        # the ring slots as a slice where they do not wrap (strided fancy writes cost more)
        at = slice(int(pos[0]), int(pos[0]) + g) if pos[-1] == pos[0] + g - 1 else pos
        self.S[at] = s
        self.AL[at], self.LIVE[at] = al, live
        np.fill_diagonal(r12, 1.0)
        G = self.G
        G[at, :] = r
        G[:, at] = r.T
        if isinstance(at, slice):
            G[at, at] = r12
        else:
            G[pos[:, None], pos] = r12  # (np.ix_ costs ~10 us a call)
        C[iy, :] = rows
        C[:, iy] = rows.T
        C[iy[:, None], iy] = blk
        self.mu[iy] = mu
        if self.nf:  # (no shared factors: fa has no columns)
            self.fa[iy] = t[:, None] * self.fa[ia] + tc[:, None] * self.fa[ib]
        return iy

    def rectifier(self) -> tuple[np.ndarray, np.ndarray]:
        """``(E[g^3], E[U g^2])`` of the window's unit residuals (:func:`_rectifier_moments`).

        Computed when asked (the sink's :meth:`kappa3`), for the whole window at once, rather
        than for every batch of maxima: the same elementwise operations on the same alphas,
        so the same values (0 where no residual was ever written).
        """
        return _rectifier_moments(self.AL, self.LIVE)

    def kappa3(self, slot: int) -> float:
        """Third cumulant of the node in ``slot`` (module docstring).

        Terms of one residual with itself and with the Gaussian part are exact (closed-form
        moments of the rectifier); terms between different residuals keep their He2 part.
        """
        w = self.cw[slot] * self.S  # weights on the unit residuals
        x = self.cw[slot] * self.H[:, 0]  # their He2 coefficients
        big = np.max(np.abs(x), initial=0.0)
        if big == 0:
            return 0.0
        m = self.M[slot]  # Cov(X, U_k) = Cov(Gaussian part, U_k)
        gam, tau = self.rectifier()
        own = float(np.sum(6.0 * x * m**2 + 3.0 * w**2 * m * tau + w**3 * gam))
        keep = np.flatnonzero(np.abs(x) >= _KEEP_RTOL * big)
        a = self.G[np.ix_(keep, keep)] * x[keep][None, :]  # G X: tr((G X)^3) is the triple sum
        cross = 8.0 * (float(np.sum((a @ a) * a.T)) - float(np.sum(x[keep] ** 3)))
        return own + cross


def _rectifier_moments(al: np.ndarray, live: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(E[g^3], E[U g^2])`` of the unit residual ``g`` of ``(U + alpha)^+``, ``U ~ N(0, 1)``.

    ``g`` is ``(U + alpha)^+ - Phi(alpha) U`` centred and scaled to unit variance. It is
    evaluated at ``-|alpha|`` (the residual of ``(U + a)^+`` is that of ``(-U - a)^+`` up to a
    constant: E[g^3] is the same and E[U g^2] changes sign), where every raw moment is a small
    tail quantity, so nothing cancels. Raw moments come from the partial moments
    ``J_n = int_c^inf u^n phi(u) du = c^(n-1) phi(c) + (n - 1) J_(n-2)``, ``c = |alpha|``.
    """
    c = np.minimum(np.abs(al), 30.0)  # (no overflow of c^n; beyond 20 it is left out below)
    phi = np.exp(-0.5 * c * c) / math.sqrt(2.0 * math.pi)
    tail = special.ndtr(-c)
    jn = [tail, phi]
    for n in range(2, 6):
        jn.append(c ** (n - 1) * phi + (n - 1) * jn[n - 2])

    # Y = (U - c)^+, a >= 1: E[Y^a U^b] = sum_j C(a, j) (-c)^(a - j) J_(j + b)
    def ey(a: int, b: int) -> np.ndarray:
        return sum(math.comb(a, j) * (-c) ** (a - j) * jn[j + b] for j in range(a + 1))

    beta = -tail  # g = Y + beta U - E[Y]
    m1 = ey(1, 0)
    # moments of h = Y + beta U (mean m1): central second, third and E[U (h - m1)^2]
    e = {(a, b): ey(a, b) for a in range(1, 4) for b in range(4 - a)}
    e.update({(0, 2): 1.0, (0, 3): 0.0})  # Y^0 = 1 on the whole line: moments of U itself
    h2 = e[2, 0] + 2 * beta * e[1, 1] + beta**2 * e[0, 2]
    h3 = e[3, 0] + 3 * beta * e[2, 1] + 3 * beta**2 * e[1, 2] + beta**3 * e[0, 3]
    uh2 = e[2, 1] + 2 * beta * e[1, 2] + beta**2 * e[0, 3]
    uh = e[1, 1] + beta * e[0, 2]
    var = h2 - m1**2
    mu3 = h3 - 3 * m1 * h2 + 2 * m1**3
    u_c2 = uh2 - 2 * m1 * uh  # E[U (h - m1)^2] (E[U] = 0)
    # A residual whose variance (in theta^2 units) is below MIN_RESIDUAL_VAR (|alpha| > ~5.6)
    # is left out: its weight s is then solved from Var(max) - (linear part), a difference at
    # the rounding floor (~1e-16 of the variance), while its standardised skewness grows like
    # 1/sqrt(variance) (3.8e3 at |alpha| = 5, 7.6e11 at 10): s^3 times that would be noise
    # blown up to any size. The true contribution there is below 1e-12 theta^3.
    ok = live & (var > MIN_RESIDUAL_VAR)
    sd = np.sqrt(np.where(ok, var, 1.0))
    gam = np.where(ok, mu3 / sd**3, 0.0)
    tau = np.where(ok, u_c2 / sd**2, 0.0) * np.where(al >= 0, -1.0, 1.0)
    return gam, tau


def _window(gens: list, preds: list, window: int | None) -> int:
    n_res = sum(max(len(p) - 1, 0) for p in preds) + len(preds)
    if window is None:
        window = max(MIN_WINDOW, WINDOW_PER_WIDTH * max(len(g) for g in gens))
    elif isinstance(window, bool) or not isinstance(window, int | np.integer) or window < 1:
        raise ValueError(f"window must be a positive integer or None, got {window!r}")
    return int(min(window, n_res))


def _run(
    gens,
    preds,
    m_arr,
    s_arr,
    lmat,
    window: int,
    k3_arr: np.ndarray | None = None,
    engine: type[_FullEngine] = _FullEngine,
) -> tuple[float, float, float]:
    """(mean, variance, kappa3) of the makespan by ``engine`` (the full-difference one).

    ``k3_arr``: the ops' own third cumulants; they reach the sink through its linear loadings
    (``sum_i a_i^3 kappa3_i``, exact for the linear part).
    """
    eng = engine.for_dag(lmat.shape[1], window, gens, _op_k3(engine, k3_arr, s_arr, lmat))
    mu, var, _ = eng.run(gens, preds, m_arr, s_arr, lmat)
    return _finish_run(eng, gens, preds, mu, var, k3_arr)


def _op_k3(
    engine: type, k3_arr: np.ndarray | None, s_arr: np.ndarray, lmat: np.ndarray
) -> np.ndarray | None:
    """The ops' third cumulants as the engine's maxima see them.

    Those of ops whose |skewness| (against the op's whole sd, shared factors included) is at
    most the engine's ``op_skew_floor`` are set to 0; ``k3_arr`` itself (the same object)
    where the engine has no floor or nothing is under it.
    """
    floor = getattr(engine, "op_skew_floor", 0.0)
    if k3_arr is None or floor <= 0:
        return k3_arr
    sd3 = (s_arr * s_arr + np.sum(lmat * lmat, axis=1)) ** 1.5
    tiny = np.abs(k3_arr) <= floor * sd3
    return np.where(tiny, 0.0, k3_arr) if np.any(tiny & (k3_arr != 0)) else k3_arr


def _finish_run(
    eng: Any, gens: list, preds: list, mu: float, var: float, k3_arr: np.ndarray | None
) -> tuple[float, float, float]:
    """:func:`_run`'s result from an engine that has propagated the whole DAG."""
    with single_blas_thread():
        k3 = eng.kappa3(eng.last)
    if k3_arr is not None and np.any(k3_arr != 0):
        load = eng.op_loadings(gens, len(preds))
        with np.errstate(invalid="ignore"):
            k3 += float(np.sum(np.where(load != 0, load**3 * k3_arr, 0.0)))
    return float(mu), float(max(var, 0.0)), k3


def third_cumulant(law: Distribution) -> float:
    """Third cumulant of an op latency law (0 for a normal or a point mass).

    Closed form for scipy laws; the cell-centre sum for a lattice law (exact to O(h^2), as
    its variance); otherwise a 4,096-point midpoint rule on the quantile function. A law
    without a finite third moment gives ``inf`` (the skewness is then clipped).
    """
    from ..distributions import GridDistribution

    frozen = getattr(law, "frozen", None)
    if frozen is not None:
        with np.errstate(all="ignore"):
            g = float(frozen.stats(moments="s"))
        sd = float(law.std())
        return g * sd**3 if np.isfinite(g) else (np.inf if sd > 0 else 0.0)
    if isinstance(law, GridDistribution):
        w = 0.5 * (law.lo + law.hi)
        w = w / max(float(w.sum()), 1e-300)
        x = law.points
        m = float(np.dot(w, x))
        return float(np.dot(w, (x - m) ** 3))
    u = (np.arange(4096) + 0.5) / 4096
    x = np.asarray(law.quantile(u), dtype=float)
    return float(np.mean((x - x.mean()) ** 3))


def _skewness(var: float, k3: float) -> float:
    return float(np.clip(k3 / var**1.5, -MAX_SKEW, MAX_SKEW)) if var > 0 else 0.0


def skew_makespan(
    graph: nx.DiGraph,
    mean: Mapping[Hashable, float],
    std: Mapping[Hashable, float],
    *,
    loadings: Mapping[Hashable, Mapping[Hashable, float]] | None = None,
    window: int | None = None,
    kappa3: Mapping[Hashable, float] | None = None,
) -> SkewResult:
    """Mean, std and skewness of the makespan of a DAG with random node latencies.

    Same model and arguments as :func:`~.canonical.canonical_makespan` (``method`` is fixed:
    Clark-Mehler on full differences, module docstring).

    Parameters
    ----------
    graph : networkx.DiGraph
        A directed acyclic graph; nodes are ops.
    mean, std : Mapping
        Per-node latency mean (finite) and private standard deviation (finite, >= 0).
    loadings : Mapping of Mapping, optional
        ``loadings[node][factor]``: the node's loading on a shared standard-normal factor.
    window : int, optional
        Residuals correlated with a new one (default 32 x graph width, >= 64).
    kappa3 : Mapping, optional
        Per-node third cumulant of the latency (missing nodes: 0, as for normal latencies);
        see :func:`third_cumulant`.

    Returns
    -------
    SkewResult

    Raises
    ------
    ValueError
        As :func:`~.canonical.canonical_makespan`.

    Examples
    --------
    >>> g = nx.DiGraph([("a", "b"), ("b", "c")])  # a chain: an exact sum, no skew
    >>> r = skew_makespan(g, dict(a=1.0, b=2.0, c=3.0), dict(a=0.3, b=0.4, c=0.0))
    >>> round(r.mean, 12), round(r.std, 12), r.skew
    (6.0, 0.5, 0.0)
    """
    return _makespan(_FullEngine, graph, mean, std, loadings, window, kappa3)


def _makespan(
    engine: type[_FullEngine],
    graph: nx.DiGraph,
    mean: Mapping[Hashable, float],
    std: Mapping[Hashable, float],
    loadings: Mapping[Hashable, Mapping[Hashable, float]] | None,
    window: int | None,
    kappa3: Mapping[Hashable, float] | None,
) -> SkewResult:
    """:func:`skew_makespan` by ``engine`` (this module's or a subclass's)."""
    order, gens, m_arr, s_arr, lmat, preds = _prepare(graph, mean, std, loadings)
    w = _window(gens, preds, window)
    k3_arr = None
    if kappa3 is not None:
        k3_arr = np.array([float(kappa3.get(n, 0.0)) for n in order])
        if np.any(np.isnan(k3_arr)):
            raise ValueError("kappa3 must not be NaN (inf stands for an infinite third moment)")
    mu, var, k3 = _run(gens, preds, m_arr, s_arr, lmat, w, k3_arr, engine)
    return SkewResult(mu, math.sqrt(var), _skewness(var, k3), w, len(order))


def skew_pipeline(
    spec: Any, *, window: int | None = None, cap: int | None = None
) -> tuple[SkewResult, dict[str, Any]]:
    """The skew-aware core on a plain compact pipeline (no shared factors).

    A pipeline of more than ``cap`` ops (default :data:`SKEW_OPS_CAP`) is evaluated at two
    truncated microbatch counts and extrapolated block by block
    (:func:`~.pipeline_core.truncation`): the mean, the variance and the third cumulant each
    grow linearly per block once the warm-up is over. Where three shorter evaluations (of
    about :data:`STEADY_CAP` ops) show that the warm-up is already over (:data:`STEADY_RTOL`),
    the extrapolation starts from them (``info["steady_state_gap"]``: the largest difference,
    relative, between extrapolating their two blocks).

    Returns
    -------
    tuple
        The :class:`SkewResult` and ``info`` (``ops``, ``evaluated_microbatches`` and, when
        extrapolated, the per-block increments).

    Raises
    ------
    ValueError
        If the spec has shared microbatch or stage factors.
    """
    return _pipeline(_FullEngine, "skew_pipeline", spec, window, cap)


def _pipeline(
    engine: type[_FullEngine], name: str, spec: Any, window: int | None, cap: int | None
) -> tuple[SkewResult, dict[str, Any]]:
    """:func:`skew_pipeline` by ``engine``; ``name`` is the caller's, for error messages."""
    from . import pipeline_core as pc

    if spec.microbatch_factor is not None or spec.stage_factor is not None:
        raise ValueError(f"{name}: shared factors are handled by conditioning, not here")
    cap = SKEW_OPS_CAP if cap is None else cap

    def direct(sp: Any) -> tuple[float, float, float, int]:
        st = pc._structure(sp.stages, sp.microbatches, sp.schedule, sp.vpp)
        m_arr, s_arr, lmat = pc._factor_model(sp, st)
        w = st["window"] if window is None else _window(st["gens"], st["preds"], window)
        k3_arr = np.array([k3_law[k] for k in st["keys"]])
        return (*_run(st["gens"], st["preds"], m_arr, s_arr, lmat, w, k3_arr, engine), w)

    k3_law = {k: third_cumulant(law) for k, law in spec.laws.items()}

    # the size the cap's truncation would start from (its steady-state check only if needed)
    first = pc.first_size(spec, cap)
    steady = _steady(engine, spec, window, k3_law, spec.microbatches if first is None else first)
    if steady is not None:
        return steady
    cut = _block_sizes(engine, spec, cap)
    while cut is not None:
        m1, m2 = cut
        r1, r2 = _forked(engine, spec, (m1, m2), window, k3_law) or [
            direct(spec.with_microbatches(m)) for m in (m1, m2)
        ]
        # steady: not short of the busiest stage's rate; competing paths' increments unchanged
        nxt = pc.next_pair(
            spec, cut, (r1[:2], r2[:2]), lambda m: direct(spec.with_microbatches(m))[:2]
        )
        if nxt == cut:
            return _extrapolate(spec, (m1, m2), (r1, r2))
        cut = nxt  # still in its transient: larger sizes, or None: whole
    mu, var, k3, w = direct(spec)
    info = {"ops": spec.n_ops, "evaluated_microbatches": [spec.microbatches]}
    return SkewResult(mu, math.sqrt(var), _skewness(var, k3), w, spec.n_ops), info


def _extrapolate(
    spec: Any, sizes: tuple[int, int], res: tuple[tuple[float, float, float, int], ...]
) -> tuple[SkewResult, dict[str, Any]]:
    """The whole pipeline from its evaluations at the last two ``sizes``, block by block.

    The mean, the variance and the third cumulant each grow by the increment of the last block
    per block still to come.
    """
    m1, m2 = sizes[-2:]
    r1, r2 = res[-2:]
    blocks = (spec.microbatches - m2) / (m2 - m1)
    d = [b - a for a, b in zip(r1[:3], r2[:3], strict=True)]
    mu = r2[0] + blocks * d[0]
    var = r2[1] + blocks * max(d[1], 0.0)
    k3 = r2[2] + blocks * d[2]
    info = {
        "ops": spec.n_ops,
        "evaluated_microbatches": list(sizes),
        "extrapolated_blocks": blocks,
        "mean_increment_per_block": d[0],
        "variance_increment_per_block": d[1],
        "kappa3_increment_per_block": d[2],
    }
    return SkewResult(mu, math.sqrt(var), _skewness(var, k3), r2[3], spec.n_ops), info


def _block_sizes(engine: type[_FullEngine], spec: Any, cap: int) -> tuple[int, int] | None:
    """:func:`~.pipeline_core.truncation`'s two sizes, one engine block (not one period) apart.

    An engine with :attr:`~_FullEngine.block_periods` ``k > 1`` gets ``(m2 - j p, m2)``, ``j``
    the most periods up to ``k`` that leave at least one period before them (the cap is not
    exceeded: a cap that holds only two periods keeps them one period apart).
    """
    from . import pipeline_core as pc

    k = getattr(engine, "block_periods", 1)
    cut = pc.truncation(spec, cap, periods=k)  # checks the steady state over all k periods
    if cut is None or k == 1:
        return cut
    m2, p = cut[1], spec.period
    return m2 - min(k, m2 // p - 1) * p, m2


def _steady(
    engine: type[_FullEngine],
    spec: Any,
    window: int | None,
    k3_law: Mapping[str, float],
    replaced: int,
) -> tuple[SkewResult, dict[str, Any]] | None:
    """The pipeline from three short evaluations, when they show its steady state; else None.

    Evaluates (forked) the schedule at the three consecutive block sizes ``m1 < m2 < m3`` of
    :data:`STEADY_CAP` ops and compares the increments of its two blocks: when extrapolating
    each over the blocks still to come gives the same mean, variance and third cumulant to
    :data:`STEADY_RTOL` (of the makespan's sd, variance and sd^3), the schedule's transient is
    over by ``m1`` and the answer is extrapolated from the last block; otherwise (a schedule
    still in its transient: interleaved 8 x 256 with lognormal ops differs by 0.5 sd there)
    None, and the caller evaluates the pipeline as before: whole, or at the sizes of
    :data:`SKEW_OPS_CAP`, the largest of them ``replaced`` microbatches. Only tried when the
    trial's largest schedule has at most half as many (a refused trial then costs at most about
    half as much again); not for engines that cannot fork.
    """
    short = _block_sizes(engine, spec, STEADY_CAP)
    if short is None:
        return None
    m1, m2 = short
    sizes = (m1, m2, 2 * m2 - m1)
    if 2 * sizes[2] > replaced:
        return None
    res = _forked(engine, spec, sizes, window, k3_law)
    if res is None:
        return None
    out = _extrapolate(spec, sizes, res)
    blocks, var = out[1]["extrapolated_blocks"], out[0].std ** 2
    if not var > 0:
        return None
    d12 = [b - a for a, b in zip(res[0][:3], res[1][:3], strict=True)]
    d23 = [b - a for a, b in zip(res[1][:3], res[2][:3], strict=True)]
    scale = (math.sqrt(var), var, var**1.5)
    gap = max(blocks * abs(b - a) / c for a, b, c in zip(d12, d23, scale, strict=True))
    if not gap <= STEADY_RTOL:
        return None
    out[1]["steady_state_gap"] = gap
    return out


def _forked(
    engine: type[_FullEngine],
    spec: Any,
    sizes: tuple[int, ...],
    window: int | None,
    k3_law: Mapping[str, float],
) -> list[tuple[float, float, float, int]] | None:
    """``direct`` at several microbatch counts, their common first generations propagated once.

    A longer schedule begins like a shorter one (:func:`~.canonical.shared_generations`:
    llama3-70b at 32 GPUs, m = 200 and 204, shares 1,980 of its 2,006 and 2,046 generations),
    so those generations go through one engine, which is then copied, and each schedule
    continues from its own copy, as :meth:`~.canonical._Engine.run_forked` does for the
    Gaussian core. Each schedule sees exactly the state, and performs exactly the operations,
    of its own :func:`_run`: the results are bit-identical to two separate evaluations. None
    when the engine cannot be forked or the two engines would differ from the start (another
    window, op window or op third cumulants).
    """
    from . import pipeline_core as pc
    from .canonical import shared_generations

    if not getattr(engine, "forkable", False):
        return None
    dags, engines, k3s, wins = [], [], [], []
    for m in sizes:
        st = pc._structure(spec.stages, m, spec.schedule, spec.vpp)
        m_arr, s_arr, lmat = pc._factor_model(spec.with_microbatches(m), st)
        w = st["window"] if window is None else _window(st["gens"], st["preds"], window)
        k3_arr = np.array([k3_law[k] for k in st["keys"]])
        dags.append((st["gens"], st["preds"], m_arr, s_arr, lmat))
        engines.append(
            engine.for_dag(lmat.shape[1], w, st["gens"], _op_k3(engine, k3_arr, s_arr, lmat))
        )
        k3s.append(k3_arr)
        wins.append(w)
    shared = shared_generations(dags)
    if len(set(wins)) > 1 or shared == 0:
        return None
    pre = np.concatenate([np.asarray(g, dtype=np.intp) for g in dags[0][0][:shared]])
    if any(not np.array_equal(k3s[0][pre], k[pre]) for k in k3s[1:]):
        return None
    base = engines[0]
    gens0, preds0, m0, s0, l0 = dags[0]
    with single_blas_thread():
        state = base._begin(preds0)
        base._advance(state, gens0[:shared], preds0, m0, s0, l0)
    out = []
    for (gens, preds, m_arr, s_arr, lmat), fresh, k3_arr, w in zip(
        dags, engines, k3s, wins, strict=True
    ):
        eng = base.fork()
        if not eng._rebind(fresh):
            return None
        with single_blas_thread():
            own = eng._resume(preds, state, pre)
            eng._advance(own, gens[shared:], preds, m_arr, s_arr, lmat)
            mu, var, _ = eng._end(own, None)
        out.append((*_finish_run(eng, gens, preds, mu, var, k3_arr), w))
    return out


def adopt_prefix(own: tuple, state: tuple, pre: np.ndarray) -> None:
    """Give a fresh propagation state ``own`` the forked ``state`` of the prefix nodes ``pre``.

    ``(remaining successors, slot, sinks)``: the prefix nodes have identical successors in
    every forked DAG, so identical remaining counts and slots.
    """
    own[0][pre] = state[0][pre]
    own[1][pre] = state[1][pre]
    own[2].extend(state[2])


#: Pipeline results of every engine (this module's and :mod:`.kurtosis_core`'s), keyed by
#: ``(engine.shape, key, window)``; the callers' ``key`` must identify the whole op laws, not
#: only their moments (these cores read the laws' third cumulants).
_CACHE: dict[tuple, tuple[SkewResult, dict[str, Any]]] = {}


def clear_cache() -> None:
    """Forget cached pipeline results of every core shape (for cold-start timing)."""
    _CACHE.clear()


def cached_skew_pipeline(
    key: tuple, spec: Any, window: int | None
) -> tuple[SkewResult, dict[str, Any]]:
    """:func:`skew_pipeline`, cached by ``key`` (the spec's identity) and the window."""
    return _cached_pipeline(_FullEngine, "skew_pipeline", key, spec, window)


def _cached_pipeline(
    engine: type[_FullEngine], name: str, key: tuple, spec: Any, window: int | None
) -> tuple[SkewResult, dict[str, Any]]:
    """:func:`_pipeline`, cached in :data:`_CACHE` by the engine's shape, ``key`` and window."""
    full = (engine.shape, key, window)
    if full not in _CACHE:
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[full] = _pipeline(engine, name, spec, window, None)
    return _CACHE[full]
