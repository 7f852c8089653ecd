"""The +-inf atoms of a sum, ``1 - (1 - a)(1 - b)``, and the round-off they must report.

Computed in floating point that union loses up to ~1.75 unit round-offs (atoms below ~1e-16
round to 0). The analytic path keeps the formula (its quantiles stay bit-identical) and counts
:data:`~prism_analytic.distributions.grid.ATOM_UNION_ERROR` in ``roundoff`` instead. The FFT's
own bound did not always cover it: with a one-cell operand it is only ``u |a|_1 |b|_1``. The
reference is exact rational arithmetic (:class:`fractions.Fraction`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.distributions.grid import ATOM_UNION_ERROR, GridDistribution, convolve_grids
from prism_analytic.distributions.log_lattice_dist import LogLatticeDistribution
from prism_analytic.distributions.log_lattice_ops import _add
from prism_analytic.distributions.parametric import from_scipy
from prism_analytic.graph import StepGraph
from prism_analytic.policy import DEFAULT_POLICY

POLICY = replace(DEFAULT_POLICY, tail_mass=1e-30)  # keep every atom as given
# one-cell operands whose union lost 1.29 u while the old roundoff grew by only 1.0 u
LOSSY = (float.fromhex("0x1.c2b6b0cd71eadp-2"), float.fromhex("0x1.52e51f88cd1fap-3"))


def _union_error(x: float, y: float) -> float:
    """|fl(1 - (1 - x)(1 - y)) - (x + y - xy)|, the latter exactly."""
    computed = 1.0 - (1.0 - x) * (1.0 - y)
    exact = Fraction(x) + Fraction(y) - Fraction(x) * Fraction(y)
    return abs(float(Fraction(computed) - exact))


def _one_cell(below: float) -> GridDistribution:
    return GridDistribution(0.01, 100, np.array([1.0 - below]), np.array([1.0]), below, 0.0, POLICY)


def test_union_error_bound_holds() -> None:
    rng = np.random.default_rng(7)
    # atoms at every scale, from far below the unit round-off to 1
    atoms = np.concatenate((10.0 ** rng.uniform(-20, 0, 4000), rng.uniform(0, 1, 4000)))
    pairs = list(zip(atoms[::2], atoms[1::2])) + [LOSSY]
    worst = max(_union_error(x, y) for x, y in pairs)
    assert worst <= ATOM_UNION_ERROR
    assert _union_error(*LOSSY) > np.finfo(float).eps / 2  # a bound of u alone is not enough


def test_grid_sum_reports_the_atom_loss() -> None:
    # fails on the old code: roundoff 1.11e-16 < the lost 1.44e-16 of the -inf atom
    a, b = _one_cell(LOSSY[0]), _one_cell(LOSSY[1])
    out = convolve_grids(a, b)
    exact = Fraction(LOSSY[0]) + Fraction(LOSSY[1]) - Fraction(LOSSY[0]) * Fraction(LOSSY[1])
    assert out.roundoff >= abs(float(exact - Fraction(out.below)))


def test_log_lattice_sum_counts_the_atom_error() -> None:
    # same atoms on the log lattice: reported (default) or folded outwards (fold_roundoff)
    x, y = LOSSY
    exact = Fraction(x) + Fraction(y) - Fraction(x) * Fraction(y)
    for fold in (False, True):
        policy = replace(POLICY, fold_roundoff=fold)
        a, b = (
            LogLatticeDistribution(
                4, 0, np.full((1, 4), (1 - t) / 4), np.full((1, 4), 0.25), t, policy=policy
            )
            for t in (x, y)
        )
        out = _add(a, b)
        if fold:  # the -inf atom is never below the exact union
            assert Fraction(out.below) >= exact
        else:
            assert out.roundoff >= ATOM_UNION_ERROR


@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize("q", [0.5, 0.99, 1.0 - 1e-6])
def test_tiny_atoms_under_a_huge_group(q: float, fold: bool) -> None:
    # the brief's shape: a sum whose atoms are ~1e-20 (their union rounds to 0), then the max of
    # 1e12 copies; the guaranteed bracket (roundoff folded in) holds the closed form. Passes on
    # the old code too: the lost 2e-20 is far below the FFT round-off reported beside it (the
    # unfolded numerical bracket at 1 - 1e-6, (3.684, 3.710) against 3.238, is FFT noise read
    # by F^n, inside the reported roundoff of 0.84; fold_roundoff gives (3.23825, 3.239))
    n = 10**12
    body = StepGraph("body")
    body.add_op("a", from_scipy(stats.norm(1.0, 0.1)))
    body.add_op("b", from_scipy(stats.norm(1.0, 0.1)), after=["a"])
    g = StepGraph("g")
    g.add_replica_group("ranks", body, n)
    policy = replace(DEFAULT_POLICY, tail_mass=1e-20, fold_roundoff=fold)
    r = pa.predict(g, "analytic", policy=policy)
    per_copy_sf = -math.expm1(math.log(q) / n)
    exact = 2.0 + math.sqrt(2) * 0.1 * stats.norm.isf(per_copy_sf)
    low, high = r.guaranteed_bracket(q)
    assert low <= exact <= high, (low, exact, high)
    if fold:  # nothing left to report: the numerical bracket is the guaranteed one, and tight
        assert r.roundoff == 0 and high - low < 1e-3 * exact
