"""The u-level round-off of four grid operations, against exact references.

Each operation gets operands whose masses sum to 1 exactly (tiny atoms beside ~1 values,
few and many cells), and its two output sides, summed in exact rational arithmetic, are
compared with the same operation done exactly on the operands' sides (rationals, or mpmath at
80 digits for ``F^n``). A side may err only towards its safe direction, or by at most the
reported ``roundoff``: the lower side's CDF may not fall below the exact one, nor its survival
rise above it; the upper side the other way round. The CDF form is checked where the exact
CDF is at most 1/2 and the survival form where the exact survival is (the halves that
quantiles and the next operations read). With ``fold_roundoff`` nothing may be reported: the
sides themselves must hold.

Every non-folded case here fails on the code before this test (its ``roundoff`` was 0 for
exact operands, and the computed sides miss the exact ones by 1e-17 to 1e-12 on the unsafe
side): convolve_grids_bounded lost up to 1.3u of the +inf atom, min/max/iid_max's log-exp
CDFs and mix_grids' weighted sums were not counted.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from prism_analytic.distributions.grid import (
    GridDistribution,
    convolve_grids_bounded,
    mix_grids,
)
from prism_analytic.distributions.grid_extremes import iid_max_grid, max_grids, min_grids
from prism_analytic.distributions.log_lattice_dist import LogLatticeDistribution
from prism_analytic.distributions.log_lattice_ops import (
    _relattice,
    log_lattice_iid_max,
    log_lattice_max,
)
from prism_analytic.policy import DEFAULT_POLICY

mpmath.mp.dps = 80
POLICY = replace(DEFAULT_POLICY, tail_mass=1e-300)  # trimmed() keeps every cell and atom
FOLD = replace(POLICY, fold_roundoff=True)
# +inf atoms whose union a + b - ab rounds 1.3u short of the exact one (found by a search)
LOSSY = (float.fromhex("0x1.c2b6b0cd71eadp-2"), float.fromhex("0x1.52e51f88cd1fap-3"))


def _exact_cells(rng: np.random.Generator, n: int, atom: float) -> np.ndarray:
    """``n`` or a few more positive floats summing exactly (in rationals) to ``1 - atom``."""
    k = rng.integers(1, 2**12, n).astype(np.int64)
    k[rng.integers(0, n, max(n // 8, 1))] = rng.integers(1, 4, max(n // 8, 1))  # tiny cells
    k = k * (2**51 // int(k.sum()))
    k[int(np.argmax(k))] += 2**51 - int(k.sum())  # multiples of 2^-52 summing to 1/2
    cells = [float(v) * 2.0**-52 for v in k]
    rest = Fraction(1, 2) - Fraction(atom)
    while rest > 0:  # the remainder's 53-bit pieces, each rounded down
        piece = float(rest)
        if Fraction(piece) > rest:
            piece = float(np.nextafter(piece, 0.0))
        cells.insert(int(rng.integers(0, len(cells) + 1)), piece)
        rest -= Fraction(piece)
    assert sum(Fraction(c) for c in cells) + Fraction(atom) == 1
    return np.array(cells)


def _grid(rng, n: int, below: float, above: float, policy=POLICY, k0: int = 0):
    lo = _exact_cells(rng, n, below)
    hi = _exact_cells(rng, n, above)
    size = max(lo.size, hi.size)
    lo, hi = np.pad(lo, (0, size - lo.size)), np.pad(hi, (0, size - hi.size))
    return GridDistribution(1.0, k0, lo, hi, below, above, policy)


def _sides(g: GridDistribution, k: np.ndarray):
    """Exact (F_lo, S_lo, F_hi, S_hi) of the stored sides at lattice indices ``k``."""
    lo = [Fraction(v) for v in g.lo]
    hi = [Fraction(v) for v in g.hi]
    c_lo, c_hi = [Fraction(0)], [Fraction(0)]
    for a, b in zip(lo, hi):
        c_lo.append(c_lo[-1] + a)
        c_hi.append(c_hi[-1] + b)
    below, above = Fraction(g.below), Fraction(g.above)
    out = []
    for kk in k:
        i = int(np.clip(kk - g.k0 + 1, 0, len(lo)))  # cells at indices <= kk
        out.append(
            (
                below + c_lo[i],
                c_lo[-1] - c_lo[i],
                c_hi[i],
                above + c_hi[-1] - c_hi[i],
            )
        )
    return out


def _check(out: GridDistribution, ref, k: np.ndarray, fold: bool) -> float:
    """Largest unsafe miss beyond roundoff (<= 0 passes); ref: exact (F_lo, S_lo, F_hi, S_hi)."""
    return _check_sides(_sides(out, k), ref, out.roundoff, fold)


def _check_sides(got, ref, roundoff: float, fold: bool) -> float:
    """:func:`_check` on exact stored sides ``got`` (rationals) beside the reference."""
    r = mpmath.mpf(0 if fold else roundoff)
    if fold:
        assert roundoff == 0.0
    half = mpmath.mpf(0.5)
    worst = mpmath.mpf(-1)
    for got_k, want in zip(got, ref, strict=True):
        f_lo, s_lo, f_hi, s_hi = (mpmath.mpf(v.numerator) / v.denominator for v in got_k)
        e_flo, e_slo, e_fhi, e_shi = want
        if e_flo <= half:
            worst = max(worst, e_flo - f_lo - r)
        if e_slo <= half:
            worst = max(worst, s_lo - e_slo - r)
        if e_fhi <= half:
            worst = max(worst, f_hi - e_fhi - r)
        if e_shi <= half:
            worst = max(worst, e_shi - s_hi - r)
    return float(worst)


def _mp(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / x.denominator


def _ref_sides(g: GridDistribution, k: np.ndarray):
    """The operand's exact sides as mpf (F_lo, S_lo, F_hi, S_hi), masses summing to 1."""
    return [tuple(_mp(v) for v in t) for t in _sides(g, k)]


def _span(*grids: GridDistribution, extra: int = 0) -> np.ndarray:
    lo = min(g.k0 for g in grids) - 1
    hi = max(g.k0 + g.lo.size for g in grids) + extra
    return np.arange(lo, hi + 1)


# ----- max, iid max, min: products of CDFs (or survivals) through logs and exp -------------
@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize("cells", [3, 400])
def test_iid_max(cells: int, fold: bool) -> None:
    rng = np.random.default_rng(cells)
    g = _grid(rng, cells, 0.3, 1e-20, FOLD if fold else POLICY)
    k = _span(g)
    worst = -1.0
    for n in (7, 1000, 10**9):
        out = iid_max_grid(g, n)
        ref = []
        for f_lo, _, _, s_hi in _ref_sides(g, k):
            lo_n, hi_n = f_lo**n, (1 - s_hi) ** n  # the upper side's F = 1 - S exactly
            ref.append((lo_n, 1 - lo_n, hi_n, 1 - hi_n))
        worst = max(worst, _check(out, ref, k, fold))
    assert worst <= 0.0, worst


@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_and_min_of_three(op: str, fold: bool) -> None:
    rng = np.random.default_rng(11)
    pol = FOLD if fold else POLICY
    specs = ((5, 1e-20, 0.2, 0), (300, 0.4, 0.0, 3), (60, 0.0, 1e-18, 7))
    grids = [_grid(rng, n, b, a, pol, k0) for n, b, a, k0 in specs]
    k = _span(*grids)
    refs = [_ref_sides(g, k) for g in grids]
    ref = []
    for at_k in zip(*refs):
        if op == "max":  # product of CDFs
            f_lo = mpmath.fprod(t[0] for t in at_k)
            f_hi = mpmath.fprod(1 - t[3] for t in at_k)
            ref.append((f_lo, 1 - f_lo, f_hi, 1 - f_hi))
        else:  # product of survival functions
            s_lo = mpmath.fprod(t[1] for t in at_k)
            s_hi = mpmath.fprod(t[3] for t in at_k)
            ref.append((1 - s_lo, s_lo, 1 - s_hi, s_hi))
    out = (max_grids if op == "max" else min_grids)(grids)
    assert _check(out, ref, k, fold) <= 0.0


# ----- mixture: weighted sums -------------------------------------------------------------
@pytest.mark.parametrize("fold", [False, True])
def test_mix(fold: bool) -> None:
    rng = np.random.default_rng(5)
    pol = FOLD if fold else POLICY
    grids = [
        _grid(rng, n, b, a, pol, k0)
        for n, b, a, k0 in ((4, 1e-20, 0.3, 0), (500, 0.1, 1e-19, 2), (1, 0.45, 0.0, 9))
    ]
    p = np.array([0.1, 0.7, 0.2])
    weights = p / p.sum()  # as the engines pass them: not summing to 1 exactly
    total = sum(Fraction(w) for w in weights)
    k = _span(*grids)
    refs = [_ref_sides(g, k) for g in grids]
    ref = []
    for at_k in zip(*refs):
        ref.append(
            tuple(
                mpmath.fsum(_mp(Fraction(w) / total) * t[j] for w, t in zip(weights, at_k))
                for j in range(4)
            )
        )
    assert _check(mix_grids(grids, weights), ref, k, fold) <= 0.0


# ----- convolution with per-cell round-off folded in (the bounds engine's) -------------------
def _conv_ref(a: GridDistribution, b: GridDistribution, k: np.ndarray):
    """Exact sides of the sum: atoms a + b - ab, cells by exact convolution."""
    out = []

    def side(x, y, ka, kb):
        cells = {}
        for i, u in enumerate(x):
            for j, v in enumerate(y):
                cells[ka + kb + i + j] = cells.get(ka + kb + i + j, 0) + Fraction(u) * Fraction(v)
        return cells

    lo = side(a.lo, b.lo, a.k0, b.k0)
    hi = side(a.hi, b.hi, a.k0, b.k0)
    below = Fraction(a.below) + Fraction(b.below) - Fraction(a.below) * Fraction(b.below)
    above = Fraction(a.above) + Fraction(b.above) - Fraction(a.above) * Fraction(b.above)
    for kk in k:
        f_lo = below + sum((v for i, v in lo.items() if i <= kk), Fraction(0))
        s_lo = sum((v for i, v in lo.items() if i > kk), Fraction(0))
        f_hi = sum((v for i, v in hi.items() if i <= kk), Fraction(0))
        s_hi = above + sum((v for i, v in hi.items() if i > kk), Fraction(0))
        out.append(tuple(_mp(v) for v in (f_lo, s_lo, f_hi, s_hi)))
    return out


@pytest.mark.parametrize(
    "atoms",
    [
        (LOSSY, LOSSY),  # one-cell-like operands, large atoms: the union lost 1.3u
        ((1e-20, 3e-21), (LOSSY[0], 1e-19)),  # tiny atoms beside ~1 cells
    ],
)
def test_convolve_bounded(atoms) -> None:
    rng = np.random.default_rng(3)
    (b1, b2), (a1, a2) = atoms
    a = _grid(rng, 1, b1, a1, FOLD)
    b = _grid(rng, 2, b2, a2, FOLD, 4)
    k = np.arange(a.k0 + b.k0 - 1, a.k0 + b.k0 + a.lo.size + b.lo.size + 1)
    out = convolve_grids_bounded(a, b)
    assert _check(out, _conv_ref(a, b, k), k, fold=True) <= 0.0


def test_bounds_engine_reports_nothing_it_does_not_read() -> None:
    # BoundsResult reads no roundoff: its F^n, maxima and regime mixture must fold theirs
    import prism_analytic as pa
    from prism_analytic.engines.bounds import bound_distributions
    from prism_analytic.graph import StepGraph

    body = StepGraph("body")
    body.add_op("a", pa.lognormal(1.0, 0.1))
    body.add_op("b", pa.lognormal(1.0, 0.2))
    body.add_op("c", pa.normal(2.0, 0.1), after=["a", "b"])  # a max, then a sum
    g = StepGraph("g")
    g.add_replica_group("ranks", body, 10**6, speed=pa.lognormal(1.0, 0.02))
    g.add_op("comm", pa.lognormal(0.5, 0.1), after=["ranks"], kind="comm")
    g.add_regime("net", {"calm": 0.9, "slow": 0.1}, {"calm": 1.0, "slow": 2.0}, applies_to="comm")
    lower, upper = bound_distributions(g)
    assert lower.roundoff == 0.0 and upper.roundoff == 0.0


# ----- re-binning and trimming (inside every operation) ----------------------------------------
def _sides_of_cells(lo, hi, below, above, k0: int, k: np.ndarray):
    """Exact (F_lo, S_lo, F_hi, S_hi) of rational cells at lattice indices ``k``, as mpf."""
    out = []
    for kk in k:
        f_lo = below + sum((v for i, v in enumerate(lo) if k0 + i <= kk), Fraction(0))
        s_lo = sum((v for i, v in enumerate(lo) if k0 + i > kk), Fraction(0))
        f_hi = sum((v for i, v in enumerate(hi) if k0 + i <= kk), Fraction(0))
        s_hi = above + sum((v for i, v in enumerate(hi) if k0 + i > kk), Fraction(0))
        out.append(tuple(_mp(v) for v in (f_lo, s_lo, f_hi, s_hi)))
    return out


@pytest.mark.parametrize("fold", [False, True])
def test_rebin(fold: bool) -> None:
    rng = np.random.default_rng(17)
    g = _grid(rng, 300, 0.3, 1e-20, FOLD if fold else POLICY)
    g.lo[::7] *= 1e-16  # tiny cells beside ~1e-3 ones: their sums round
    g.hi[::5] *= 1e-16
    out = g.rebin(2.5)
    # the exact re-binning: the same cell-to-cell map (floor for lo, ceil for hi), rational sums
    k_old = g.k0 + np.arange(g.lo.size)
    new_lo = np.floor(k_old * (g.h / 2.5)).astype(np.int64)
    new_hi = np.ceil(k_old * (g.h / 2.5)).astype(np.int64)
    k0, size = int(new_lo[0]), int(new_hi[-1] - new_lo[0] + 1)
    lo, hi = [Fraction(0)] * size, [Fraction(0)] * size
    for i in range(g.lo.size):
        lo[new_lo[i] - k0] += Fraction(g.lo[i])
        hi[new_hi[i] - k0] += Fraction(g.hi[i])
    k = np.arange(k0 - 1, k0 + size + 1)
    ref = _sides_of_cells(lo, hi, Fraction(g.below), Fraction(g.above), k0, k)
    assert _check(out, ref, k, fold) <= 0.0


@pytest.mark.parametrize("fold", [False, True])
def test_trimmed(fold: bool) -> None:
    pol = replace(FOLD if fold else POLICY, tail_mass=1e-15)
    lo = np.array([2e-17, 3e-17, 0.25, 0.25, 0.2, 4e-17, 2e-17])
    hi = np.array([3e-17, 1e-17, 0.2, 0.25, 0.25, 2e-17, 5e-17])
    below, above = 0.3, 0.3
    g = GridDistribution(1.0, 0, lo, hi, below, above, pol)
    out = g.trimmed()
    assert out.lo.size < lo.size  # mass was moved into the atoms and the end cells
    k = np.arange(-1, lo.size + 1)
    # moving mass down (lower side) or up (upper side) is exact in reals: the reference is the
    # untrimmed sides themselves (their masses need not sum to 1 for this comparison)
    ref = _sides_of_cells(
        [Fraction(v) for v in lo], [Fraction(v) for v in hi], Fraction(below), Fraction(above), 0, k
    )
    assert _check(out, ref, k, fold) <= 0.0


# ----- the same powers and products on the log lattice ----------------------------------------
def _ll(rng, below: float, above: float, policy) -> LogLatticeDistribution:
    shape = (40, 8)  # 40 octaves of 8 points
    lo, hi = (
        np.pad(c, (0, 320 - c.size))
        for c in (_exact_cells(rng, 300, below), _exact_cells(rng, 300, above))
    )
    return LogLatticeDistribution(
        8, -20, lo.reshape(shape), hi.reshape(shape), below, above, policy=policy
    )


def _ll_sides(d: LogLatticeDistribution):
    """Exact sides before the first point and at every flat point (zero atom first)."""
    lo = [Fraction(v) for v in d._flat("lo")]
    hi = [Fraction(v) for v in d._flat("hi")]
    below, above = Fraction(d.below), Fraction(d.above)
    out = [(below, sum(lo, Fraction(0)), Fraction(0), above + sum(hi, Fraction(0)))]
    c_lo = c_hi = Fraction(0)
    t_lo, t_hi = sum(lo, Fraction(0)), sum(hi, Fraction(0))
    for a, b in zip(lo, hi, strict=True):
        c_lo, c_hi = c_lo + a, c_hi + b
        out.append((below + c_lo, t_lo - c_lo, c_hi, above + t_hi - c_hi))
    return out


@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize("op", ["iid", "max"])
def test_log_lattice_power_and_product(op: str, fold: bool) -> None:
    rng = np.random.default_rng(23)
    pol = FOLD if fold else POLICY
    a, b = _ll(rng, 0.3, 1e-20, pol), _ll(rng, 1e-19, 0.2, pol)
    if op == "iid":
        worst = -1.0
        for n in (7, 1000, 10**6):
            out = log_lattice_iid_max(a, n)
            ref = []
            for f_lo, _, _, s_hi in (tuple(_mp(v) for v in t) for t in _ll_sides(a)):
                lo_n, hi_n = f_lo**n, (1 - s_hi) ** n
                ref.append((lo_n, 1 - lo_n, hi_n, 1 - hi_n))
            worst = max(worst, _check_sides(_ll_sides(out), ref, out.roundoff, fold))
        assert worst <= 0.0, worst
        return
    out = log_lattice_max([a, b])
    ca, cb = _relattice([(a, 1.0), (b, 1.0)])  # the operands on the common lattice
    ref = []
    for ta, tb in zip(_ll_sides(ca), _ll_sides(cb), strict=True):
        f_lo = _mp(ta[0]) * _mp(tb[0])
        f_hi = (1 - _mp(ta[3])) * (1 - _mp(tb[3]))
        ref.append((f_lo, 1 - f_lo, f_hi, 1 - f_hi))
    assert _check_sides(_ll_sides(out), ref, out.roundoff, fold) <= 0.0


def test_bounds_min_cdf_folds() -> None:
    # the bounds engine's lower bound: the pointwise minimum of the paths' CDFs
    from prism_analytic.engines.bounds import _min_cdf

    rng = np.random.default_rng(29)
    specs = ((40, 1e-20, 0.2, 0), (300, 0.1, 0.0, 2), (80, 0.0, 1e-18, 5))
    grids = [_grid(rng, n, b, a, FOLD, k0) for n, b, a, k0 in specs]
    k = _span(*grids)
    refs = [_ref_sides(g, k) for g in grids]
    ref = []
    for at_k in zip(*refs):
        f_lo, f_hi = min(t[0] for t in at_k), min(1 - t[3] for t in at_k)
        ref.append((f_lo, 1 - f_lo, f_hi, 1 - f_hi))
    assert _check(_min_cdf(grids), ref, k, fold=True) <= 0.0
