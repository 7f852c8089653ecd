"""Worst-case floating-point error of the atom and CDF arithmetic of the grid operations.

A grid's bracket is guaranteed only if every rounding that can move a CDF value is either
counted in ``GridDistribution.roundoff`` or moved outwards (``GridPolicy.fold_roundoff``).
The FFT's own error has its bounds (:mod:`.roundoff`, :mod:`.bounded_conv`); this module
bounds the rest: the +-inf atoms, the cumulative sums an operation reads its operands
through, the logarithms and exponentials of ``F^n`` and of products of CDFs, the weighted
sums of a mixture, and the sums of re-binning and trimming (``GridDistribution.rebin``,
``trimmed``), and order statistics (``scipy.special.betainc`` publishes no error bound: its
values are checked against rigorous enclosures, :mod:`.binomial_tail`, and the distance is
counted, :func:`order_statistic_error`). Not bounded: the log-lattice sums' and re-roundings'
arithmetic (its maxima and ``F^n`` are counted), and a law's own CDF evaluation when it is
discretised (:func:`~.grid.discretize` takes ``dist._cdf`` and ``dist._sf`` as exact; a
guaranteed bracket relies on them, see README "What is guaranteed").

Model: IEEE double precision, round to nearest, ``fl(x op y) = (x op y)(1 + d)`` with
``|d| <= u`` (:data:`UNIT_ROUNDOFF`), and ``exp``, ``expm1``, ``log``, ``log1p`` within one
unit in the last place (``2u`` relative; glibc's are within one). Underflow adds at most
``2^-1074`` per operation, far below every bound here. ``gamma(k) = k u / (1 - k u)``
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Lemma 3.1): a sum of
``k + 1`` non-negative terms, in any order, is within ``gamma(k)`` of relative error.

What is checked how: ``tests/distributions/test_op_roundoff.py`` builds operands whose masses sum
to 1
exactly, computes each operation's two sides in exact rational (or 60-digit) arithmetic and
checks that the stored sides, summed exactly, stay within the reported ``roundoff`` of them
(or on the safe side, when folded): the F form where the exact CDF is at most 1/2 and the
survival form where the exact survival is at most 1/2 (the halves the readers use). Order
statistics: ``tests/distributions/test_order_statistic_roundoff.py`` (80-digit binomial sums);
centred sums'
final grid: ``tests/distributions/test_centred_sum_roundoff.py`` (exact rationals).
"""

from __future__ import annotations

import math

import numpy as np

from .roundoff import UNIT_ROUNDOFF

__all__ = [
    "gamma",
    "union_up",
    "log_sum_rel_error",
    "exp_log_cdf_error",
    "exp_log_fold",
    "mix_error",
    "order_statistic_error",
]

_U = UNIT_ROUNDOFF
_EPS = 2.0 * _U
#: Smallest positive subnormal: covers an underflowed product.
_TINY = 5e-324


def gamma(k: int) -> float:
    """``k u / (1 - k u)``: relative error of a sum of ``k + 1`` non-negative terms."""
    k = max(int(k), 0)
    return k * _U / (1.0 - k * _U)


def union_up(a: float, b: float) -> float:
    """P(A or B) = ``a + b - ab`` for independent events, rounded never below the exact value.

    ``fl(fl(a + b) - fl(ab))`` is off by at most ``u (a + b) + u ab + u s`` + O(u^2), ``s`` the
    exact union; ``s + ab = a + b`` makes that ``2u (a + b)``, and ``a + b <= 2 s`` (``s`` is at
    least ``max(a, b)``) at most ``4u s`` (plus O(u^2)). Multiplying by ``1 + 4 eps = 1 + 8u``
    (exact in binary) and rounding once more leaves at least ``s (1 - 4u)(1 + 8u)(1 - u) > s``.
    A subnormal result gets one more smallest subnormal (its rounding is absolute).
    """
    s = a + b - a * b
    if s <= 0.0:
        return 0.0
    return min(s * (1.0 + 4.0 * _EPS) + _TINY, 1.0)


def log_sum_rel_error(cells: int, terms: int) -> float:
    """Relative error bound of ``sum_i c_i log F_i(x)`` as :mod:`.grid_extremes` computes it.

    Derivation (each operand is read through its cumulative sums of ``cells`` masses plus an
    atom, then ``log`` of the CDF where the survival is at least 1/2, else ``log1p(-S)``):

    * the sums (``np.cumsum``: sequential, non-negative terms): relative ``gamma(cells)``;
    * ``log1p(-S)`` with ``S < 1/2``: an error ``d S`` in ``S`` moves it by at most
      ``d S / (1 - S) <= 2 d S``, and ``|log1p(-S)| >= S``: relative ``2 gamma(cells)``;
      ``log F`` with ``F <= 1/2`` (plus that sum's error): absolute ``gamma(cells)``, and
      ``|log F| >= log 2``: relative ``1.45 gamma(cells)``; each function's own ``2u``;
    * the sum over ``terms`` operands (all terms <= 0) or the product ``n log F``: ``gamma(terms)``.

    Products of ``(1 + d)`` factors: the O(u^2) remainder is covered by one more ``u``.
    """
    return 2.0 * gamma(cells + 1) + gamma(terms) + 5.0 * _U


def exp_log_cdf_error(rho: float) -> float:
    """Absolute CDF error of a grid rebuilt from ``exp(L)`` and ``-expm1(L)``, ``L`` off by ``rho``.

    ``L = log F_out <= 0`` computed as ``L (1 + t)``, ``|t| <= rho``: ``|e^(L(1+t)) - e^L| <=
    e^(-y) y rho e^(y rho)`` with ``y = -L``, at most ``rho / (e (1 - rho))`` over ``y >= 0``;
    the same for ``-expm1``. Add each function's own ``2u``. The masses are rebuilt as
    differences of those values (:func:`~.grid._pmf_from_cdf_sf`: each rounded, ``u`` of the
    running sum), the CDF form below the switch at 1/2 and the survival form above, where the
    two values disagree by the sum of their errors; a difference clipped at zero (a rounding
    that breaks monotonicity at that switch) adds at most that disagreement again. Four times
    the value error covers all of it, and twice ``rho`` covers the atoms computed beside it
    (products of ``terms`` atoms: ``gamma(terms)``; a union of ``m`` atoms: ``1.5 m u``, both
    inside ``rho``).
    """
    return 4.0 * (rho / (math.e * (1.0 - rho)) + 2.0 * _U) + 2.0 * rho


def exp_log_fold(rho: float) -> float:
    """Relative widening of ``L`` that moves the rebuilt sides outwards instead of reporting.

    Scaling ``L <= 0`` by ``1 + w`` lowers ``e^L`` by the factor ``e^(-|L| w)``: where the CDF
    form is read (``F <= 1/2``, ``|L| >= log 2``) that is a relative margin of at least
    ``0.69 w``; where the survival form is read (``|L| < log 2``), ``-expm1(-y (1 + w))`` is at
    least ``(1 + w y / (e^y - 1))`` times ``-expm1(-y)``, again ``>= 1 + 0.69 w``. The errors to
    beat are ``rho`` (relative in ``L``), the functions' ``2u``, the differences' ``u`` and the
    switch's disagreement (relative, both values near 1/2): ``w = 4 rho + 16u`` covers them
    with a factor-2 margin.
    """
    return 4.0 * rho + 16.0 * _U


def mix_error(weights: np.ndarray) -> float:
    """Absolute CDF error of :func:`~.grid.mix_grids` with these weights (components exact).

    Each cell and atom is ``sum_i w_i x_i`` (``m`` products, ``m - 1`` additions, all
    non-negative): relative ``gamma(m)``, so every CDF and survival value read from the sides
    is within ``gamma(m)`` of the weighted one. The weights stand for probabilities ``w_i / W``
    (``W`` their exact sum): the weighted law differs from that mixture by ``|W - 1| / W``
    times a value <= 1; ``math.fsum`` rounds ``W`` once (``u``). Two more ``u`` cover the
    O(u^2) remainders.
    """
    w = np.asarray(weights, dtype=float)
    total = math.fsum(w.tolist())
    off = abs(1.0 - total) + _U * total
    return gamma(w.size) + off / max(total - off, 0.5) + 2.0 * _U


def sum_error(*cells: int) -> float:
    """Absolute error bound of the mass sums of a fold (values <= 1, ``cells`` terms each).

    Each sum of ``n`` non-negative terms (``float(x.sum())``, ``np.cumsum``) is within
    ``gamma(n)`` of relative error; a product or difference of two such values adds ``u``
    each. Eight more ``u`` cover those and the O(u^2) remainders.
    """
    return sum(gamma(n) for n in cells) + 8.0 * _U


def order_statistic_error(err: float) -> float:
    """Absolute CDF error of :func:`~.grid_extremes.order_statistic_grid`'s sides.

    ``err`` bounds every stored CDF and survival value's distance from the exact one
    (:func:`~.binomial_tail.order_statistic_values`; both monotone along the lattice, so no
    rebuilt mass is clipped). The masses are their differences (:func:`~.grid._pmf_from_cdf_sf`,
    ``u`` each of the running sum), the CDF form up to the last point where it is <= 1/2, the
    survival form after: a CDF read past that switch is ``1 - S_i + d`` and a survival read
    before it ``1 - F_i + d``, with ``d = F + S - 1`` at the switch (at most ``2 err``: the two
    exact values sum to 1). So ``3 err`` plus ``4u`` for the differences and the sums.
    """
    return 3.0 * err + 4.0 * _U
