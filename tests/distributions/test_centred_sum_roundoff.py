"""The round-off of ``centred_sum._to_grid``: re-binning, normalisation, moving mass to atoms.

Two lattice sums (lower run on one spacing, upper run on another, as the grid path of
``iid_sum_grid`` produces them) go through ``_to_grid``; the same steps done in exact rational
arithmetic (the finer run re-binned onto the coarser lattice, floor for the lower side and
ceiling for the upper, each normalised by its exact total, the failure probability moved to
the tail atoms) are the reference. The stored sides, summed exactly, must stay within the
reported ``roundoff`` of it (or on the safe side, folded), in the halves the readers use
(:func:`test_op_roundoff._check_sides`). The old code dropped the re-binning's error and
counted none of the normalisation's or the move's: it misses on the unsafe side
(:func:`test_old_to_grid_misses`).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from test_op_roundoff import FOLD, POLICY, _check_sides, _mp, _sides

from prism_analytic.distributions import centred_sum
from prism_analytic.distributions.centred_sum import LatticeSum, _to_grid


def _side(rng: np.random.Generator, n: int, h: float, k0: int, fail: float) -> LatticeSum:
    cells = rng.uniform(0.0, 1.0, n)
    cells[::3] *= 1e-15  # tiny cells beside large ones: sums and divisions round
    cells /= cells.sum()
    return LatticeSum(cells, k0, h, 0.0, 0.0, fail, 0.0)


def _exact(side: LatticeSum, h: float, down: bool) -> dict[int, Fraction]:
    """The side re-binned to ``h`` (floor if ``down`` else ceiling), normalised exactly."""
    ratio = Fraction(side.h) / Fraction(h)
    out: dict[int, Fraction] = {}
    for i, v in enumerate(side.pmf):
        pos = (side.k0 + i) * ratio
        k = pos.numerator // pos.denominator if down else -((-pos.numerator) // pos.denominator)
        out[k] = out.get(k, Fraction(0)) + Fraction(v)
    total = sum(out.values())
    return {k: v / total for k, v in out.items()}


def _move(cells: dict[int, Fraction], amount: Fraction, top: bool) -> dict[int, Fraction]:
    """``amount`` of mass taken from the top (or bottom) cells, exactly."""
    out = dict(cells)
    for k in sorted(out, reverse=top):
        take = min(out[k], amount)
        out[k] -= take
        amount -= take
    return out


def _reference(side_lo: LatticeSum, side_hi: LatticeSum, at: np.ndarray):
    h = max(side_lo.h, side_hi.h)
    below, above = Fraction(side_lo.fail), Fraction(side_hi.fail)
    lo = _move(_exact(side_lo, h, True), below, top=True)
    hi = _move(_exact(side_hi, h, False), above, top=False)
    out = []
    for k in at:
        f_lo = below + sum((v for i, v in lo.items() if i <= k), Fraction(0))
        s_lo = sum((v for i, v in lo.items() if i > k), Fraction(0))
        f_hi = sum((v for i, v in hi.items() if i <= k), Fraction(0))
        s_hi = above + sum((v for i, v in hi.items() if i > k), Fraction(0))
        out.append(tuple(_mp(v) for v in (f_lo, s_lo, f_hi, s_hi)))
    return out


CASES = [((1.0, 2.0), 0.0), ((2.0, 1.0), 0.0), ((1.0, 1.0), 1e-10), ((1.0, 4.0), 3e-12)]


def _run(to_grid, spacing, fail: float, fold: bool, seed: int) -> float:
    rng = np.random.default_rng(seed)
    side_lo = _side(rng, 90, spacing[0], 3, fail)
    side_hi = _side(rng, 70, spacing[1], 5, fail)
    out = to_grid(side_lo, side_hi, FOLD if fold else POLICY, None, np.inf)
    at = np.arange(out.k0 - 1, out.k0 + out.lo.size + 1)
    return _check_sides(_sides(out, at), _reference(side_lo, side_hi, at), out.roundoff, fold)


@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize(("spacing", "fail"), CASES)
def test_to_grid_counts_its_roundoff(spacing, fail: float, fold: bool) -> None:
    for seed in range(3):
        assert _run(_to_grid, spacing, fail, fold, seed) <= 0.0


def _old_to_grid(side_lo, side_hi, policy, moments, tail):
    """The old ``_to_grid`` (re-binning's error dropped, nothing else counted)."""
    from prism_analytic.distributions.grid import GridDistribution, move_mass_down, move_mass_up

    d_lo = int(np.floor(side_lo.low / side_lo.h))
    d_hi = int(np.ceil(side_hi.high / side_hi.h))
    g_lo = GridDistribution(side_lo.h, side_lo.k0 + d_lo, side_lo.pmf, side_lo.pmf)
    g_hi = GridDistribution(side_hi.h, side_hi.k0 + d_hi, side_hi.pmf, side_hi.pmf)
    h = max(g_lo.h, g_hi.h)
    g_lo, g_hi = g_lo.rebin(h), g_hi.rebin(h)
    k0 = min(g_lo.k0, g_hi.k0)
    k1 = max(g_lo.k0 + g_lo.lo.size, g_hi.k0 + g_hi.hi.size)
    lo = np.pad(g_lo.lo, (g_lo.k0 - k0, k1 - g_lo.k0 - g_lo.lo.size))
    hi = np.pad(g_hi.hi, (g_hi.k0 - k0, k1 - g_hi.k0 - g_hi.hi.size))
    lo, hi = lo / lo.sum(), hi / hi.sum()
    below, above = min(side_lo.fail, 1.0), min(side_hi.fail, 1.0)
    roundoff = max(side_lo.roundoff, side_hi.roundoff)
    if policy.fold_roundoff:
        below, above = min(below + side_lo.roundoff, 1.0), min(above + side_hi.roundoff, 1.0)
        roundoff = 0.0
    lo, hi = move_mass_down(lo, below), move_mass_up(hi, above)
    return GridDistribution(h, k0, lo, hi, below, above, policy, moments, tail, roundoff)


def test_old_to_grid_misses() -> None:
    # the same checks fail on the old code: they can fail
    worst = max(
        _run(_old_to_grid, spacing, fail, fold, seed)
        for spacing, fail in CASES
        for fold in (False, True)
        for seed in range(3)
    )
    assert worst > 0.0


def test_base_normalisation_is_counted_per_copy() -> None:
    # an exact law's cell masses are normalised once; every copy of the sum carries that L1
    # error, so the sum of m copies reports at least m times it
    run = centred_sum.centred_iid_sum(np.full(7, 1.0 / 7.0), 0, 1.0, 64, 3.0, 0.0, 0.0, cap=4096)
    assert run.roundoff >= 64 * centred_sum.NORMALISE_L1
