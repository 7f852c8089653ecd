"""Sums of heavy-tailed laws on a log-spaced (octave) lattice with a guaranteed sandwich.

A linear lattice cannot hold a Pareto or a wide lognormal: the far tail needs a range of
1e10-1e30 times the bulk, and a linear cell small enough for the bulk would need far more
cells than memory allows. Here the lattice is made of octaves ``[2^j, 2^(j+1))``, each cut
into ``n`` equal cells (``n`` a power of two), so every cell is at most ``1/n`` of its value
wide, whatever the scale. The variable is ``shift + Y`` with ``Y`` on that lattice.

As in :mod:`.grid`, two discrete variables are carried: ``lo`` (every mass rounded down to
a lattice point, plus an atom at -inf, ``below``) and ``hi`` (rounded up, plus an atom at
+inf, ``above``); ``lo <= X <= hi`` stochastically. The sum of independent variables is
monotone, so summing the ``lo`` sides and rounding the result down (and the ``hi`` sides,
rounding up) keeps the sandwich: every quantile bracket provably contains the exact quantile
(up to the floating-point round-off reported in ``roundoff``).

The sum of two lattice variables is computed octave by octave. Every pair ``(x, y)`` whose
larger member lies in octave ``b`` sums to a value in octaves ``b`` or ``b + 1``, whose cells
are ``h_b = 2^b / n`` or ``2 h_b`` wide. The smaller member is rounded (down on the lower
side, up on the upper side) onto the ``h_b`` lattice first: since the larger member already
lies on it, ``floor_h(x + y) = y + floor_h(x)``, and rounding to the nested ``2 h_b`` lattice
afterwards gives the same point as rounding the exact sum, so each sum is rounded once. The
pairs of all octaves are then batched FFT convolutions of length ``2 n``: a sum costs
``O(J n log n)`` for ``J`` octaves, and ``iid_sum`` of ``m`` copies takes ``log2(m)``
doublings plus one addition per set bit of ``m``.

Each sum moves each point by at most one cell (``1/n`` of its value), so after ``s`` sums the
bracket is at most about ``s / n`` of the value wide (about half that in practice: a rounding
moves a point by half a cell on average; measured 0.2-0.5% at ``m = 1e6`` with ``n = 4096``,
``validation/heavy_tail_sums.py``). Below the first octave, a variable known to be >= 0 keeps
its lower side's mass in a zero atom rather than at -inf (mass at 0, very wide laws).

The code is split by concept: :mod:`.log_lattice_dist` (the law and its sandwich),
:mod:`.log_lattice_build` (which laws need the lattice; putting a law on it) and
:mod:`.log_lattice_ops` (sums and maxima). This module gathers their public names.
"""

from __future__ import annotations

from .log_lattice_build import (
    FAR_TAIL_RATIO,
    needs_log_lattice,
    points_per_octave,
    sum_needs_log_lattice,
    to_log_lattice,
)
from .log_lattice_dist import MAX_OCTAVES, MAX_POINTS, MIN_POINTS, LogLatticeDistribution
from .log_lattice_ops import (
    _row_errors,  # noqa: F401 - checked against roundoff.fft_l1_error in the tests
    log_lattice_convolve,
    log_lattice_iid_max,
    log_lattice_iid_sum,
)

__all__ = [
    "FAR_TAIL_RATIO",
    "MAX_OCTAVES",
    "MAX_POINTS",
    "MIN_POINTS",
    "LogLatticeDistribution",
    "log_lattice_convolve",
    "log_lattice_iid_max",
    "log_lattice_iid_sum",
    "needs_log_lattice",
    "points_per_octave",
    "sum_needs_log_lattice",
    "to_log_lattice",
]
