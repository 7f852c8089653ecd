"""Convolution of non-negative arrays with a rigorous per-cell round-off bound, and sandwich folds.

An FFT convolution's error is absolute: about ``1e-16`` of the total mass in *every* cell, so a
far tail of probability ``1e-14`` (what the maximum of ``1e12`` copies reads) can be off by tens
of percent, and clipping negative noise adds a positive bias. :func:`bounded_convolve` returns
the estimate together with a bound ``err[k] >= |est[k] - exact[k]|`` for every cell:

* plain FFT: every entry's error is at most the error's 2-norm (:func:`.roundoff.fft_l2_error`);
* exponentially tilted FFT: ``a_i e^{t i}`` and ``b_j e^{t j}`` convolve to ``c_k e^{t k}``, so
  the tilted transform's 2-norm bound, multiplied back by ``e^{-t k}``, decays along the tail
  at the tail's own rate (``t`` is measured from the operands' tails); relative errors of the
  tilt weights (the rounding of their arguments ``t k`` dominates: at most ``T u`` for a total
  tilt ``T <= 300``) are added with a margin;
* direct summation (short operands): relative error ``gamma_m`` of a sum of non-negative terms.

Each cell keeps the estimate with the smaller bound. :func:`fold_down` and :func:`fold_up` turn
an estimate and its bound into a lower (upper) variable that is provably stochastically
smaller (larger) than the exact one: a lower side may only lose mass from each cell (the
deficit goes to the first cell, where the exact law has none below), an upper side may only
gain it (the excess is taken from the bottom).
"""

from __future__ import annotations

import numpy as np

from .roundoff import DIRECT_MAX, UNIT_ROUNDOFF, fft_convolve, fft_l2_error

__all__ = ["bounded_convolve", "fold_down", "fold_up", "tail_rate"]

_U = UNIT_ROUNDOFF
#: Largest total tilt ``t * (len(a) + len(b))``: tilted values stay below e^300 ~ 1e130, so
#: their squares and the norm products of the bound do not overflow, and the untilt factors
#: stay above e^-300 (no subnormals).
_MAX_TILT = 300.0


def tail_rate(p: np.ndarray, hi_level: float = 1e-6, lo_level: float = 1e-13) -> float:
    """Per-cell exponential decay rate of ``p``'s upper tail between two tail levels.

    ``-log(S[i2] / S[i1]) / (i2 - i1)`` where ``S`` is the mass above each cell and ``i1``,
    ``i2`` the first cells with ``S <= hi_level`` and ``S <= lo_level`` (the grid's last cells
    when it ends first). Only the tightness of :func:`bounded_convolve` depends on it.
    """
    s = np.cumsum(p[::-1])[::-1]
    pos = np.nonzero(s > 0)[0]
    if pos.size < 2:
        return 0.0
    last = int(pos[-1])
    i1 = min(int(np.searchsorted(-s, -hi_level, side="left")), last - 1)
    i2 = min(max(int(np.searchsorted(-s, -lo_level, side="left")), i1 + 1), last)
    if s[i1] <= 0 or s[i2] <= 0:
        return 0.0
    return max(float(np.log(s[i1] / s[i2]) / (i2 - i1)), 0.0)


def _direct_bound(est: np.ndarray, m: int) -> np.ndarray:
    gamma = m * _U / (1 - m * _U)  # sum of m non-negative products, each rounded once
    return 2.0 * gamma * np.abs(est) + np.finfo(float).tiny


def bounded_convolve(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Convolution of non-negative arrays and a rigorous bound on each cell's round-off.

    Parameters
    ----------
    a, b : ndarray
        Non-negative 1-d arrays (point masses).

    Returns
    -------
    est : ndarray
        The convolution, clipped at zero (the exact one is non-negative).
    err : ndarray
        ``err[k] >= |est[k] - exact[k]|`` for every ``k``.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if (a < 0).any() or (b < 0).any():
        raise ValueError("bounded_convolve: operands must be non-negative")
    m = min(a.size, b.size)
    if m <= DIRECT_MAX:
        est = np.convolve(a, b)
        return est, _direct_bound(est, m)
    est = np.maximum(fft_convolve(a, b), 0.0)
    err = np.full(est.size, fft_l2_error(a, b))
    t = min(tail_rate(a), tail_rate(b), _MAX_TILT / (a.size + b.size))
    if t * (a.size + b.size) < 1.0:  # no useful tilt: the plain bound is as good
        return est, err
    ka, kb, kc = np.arange(a.size), np.arange(b.size), np.arange(est.size)
    at, bt = a * np.exp(t * ka), b * np.exp(t * kb)
    untilt = np.exp(-t * kc)
    tilted = fft_convolve(at, bt) * untilt
    e_fft = fft_l2_error(at, bt) * untilt
    # Each weight exp(t k) is off by the rounding of its argument (|t k| u <= T u, T the total
    # tilt) plus exp's own; three weights and two products per term, all terms non-negative:
    # a relative error below (3 T + 8) u, taken with margin.
    rel = (4.0 * t * (a.size + b.size) + 16.0) * _U
    err_t = (1 + rel) * e_fft + rel * (np.abs(tilted) + e_fft)
    better = err_t < err
    est = np.where(better, np.maximum(tilted, 0.0), est)
    return est, np.where(better, err_t, err)


def fold_down(est: np.ndarray, err: np.ndarray, total: float) -> np.ndarray:
    """A lower side from an estimate: each cell loses its bound, the deficit joins cell 0.

    Every exact cell is at least ``max(est - err, 0)``, so the mass above any point can only
    shrink: the result is stochastically smaller than the exact pmf of mass ``total`` (whose
    support starts at cell 0).
    """
    out = np.maximum(est - err, 0.0)
    out[0] += max(total - float(out.sum()), 0.0)
    return out


def fold_up(est: np.ndarray, err: np.ndarray, total: float) -> np.ndarray:
    """An upper side from an estimate: each cell gains its bound, the excess leaves the bottom.

    The mass above any point only grows (capped at ``total``): the result is stochastically
    larger than the exact pmf of mass ``total``. A deficit (round-off in ``total``) joins the
    last cell, which only raises the mass above every point.
    """
    out = est + err
    excess = float(out.sum()) - total
    if excess <= 0:
        out[-1] -= excess
        return out
    # empty the bottom cells up to the one where the cumulative mass reaches ``excess``; the
    # cells above stay untouched (a difference of CDFs would lose the far tail's precision)
    below = np.cumsum(out)
    cut = min(int(np.searchsorted(below, excess, side="left")), out.size - 1)
    out[:cut] = 0.0
    out[cut] = max(float(below[cut]) - excess, 0.0)
    return out
