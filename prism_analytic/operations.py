"""Operations on independent random variables. Each name says what it assumes.

* :func:`convolve` - the sum of independent variables (numerical convolution);
* :func:`iid_sum` - the sum of m i.i.d. copies, by repeated squaring (m up to 1e9);
* :func:`max_independent`, :func:`min_independent` - extremes of independent variables;
* :func:`iid_max` - the slowest of n identical ranks, exactly F^n (n up to 1e12);
* :func:`order_statistic` - the k-th smallest of n i.i.d. copies.

Exact operands give exact (lazy) results for the extremes; sums, and anything involving a
grid, give a :class:`~prism_analytic.distributions.GridDistribution` whose
``quantile_bracket`` provably contains the exact answer (up to the floating-point round-off
reported in ``roundoff``, or including it with ``GridPolicy(fold_roundoff=True)``). A constant
operand is a shift, never a lattice; levels a lattice cannot resolve are reported as ``nan``
with an infinite bracket side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ._checks import check_count
from .distributions import (
    Distribution,
    GridDistribution,
    IIDMax,
    MaxOfIndependent,
    MinOfIndependent,
    OrderStatistic,
    PointMass,
    point_mass,
    to_grid,
)
from .distributions.centred_sum import iid_sum_grid
from .distributions.closed_sums import closed_form_iid_sum
from .distributions.doubling import sum_by_doubling
from .distributions.grid import convolve_grids
from .distributions.grid_extremes import (
    iid_max_grid,
    max_grids,
    min_grids,
    order_statistic_grid,
)
from .distributions.log_lattice import (
    LogLatticeDistribution,
    log_lattice_convolve,
    log_lattice_iid_max,
    log_lattice_iid_sum,
    needs_log_lattice,
    sum_needs_log_lattice,
)
from .policy import DEFAULT_POLICY, GridPolicy

__all__ = [
    "convolve",
    "iid_sum",
    "max_independent",
    "min_independent",
    "iid_max",
    "order_statistic",
    "sum_spacing",
]

#: Largest replica count accepted: beyond this the question is not a training job.
MAX_COUNT = 10**12

#: From this many copies on, ``iid_sum`` of a normal or gamma law is its closed form (exact; smaller
#: sums stay on the lattice like other operations, so the lattice path keeps its own tests).
CLOSED_FORM_MIN_COPIES = 512


def _check_policy(policy: object) -> GridPolicy:
    if policy is None:
        return DEFAULT_POLICY
    if not isinstance(policy, GridPolicy):
        raise TypeError(f"policy must be a GridPolicy or None, got {type(policy).__name__}")
    return policy


def _check_dists(dists: Sequence[object], name: str = "dists") -> list[Distribution]:
    if len(dists) == 0:
        raise ValueError(f"{name} must contain at least one distribution")
    for i, d in enumerate(dists):
        if not isinstance(d, Distribution):
            raise TypeError(f"{name}[{i}] must be a Distribution, got {type(d).__name__}: {d!r}")
    return list(dists)


def _scale(d: Distribution) -> tuple[float, float]:
    """(mean, spread) of an operand; the spread falls back to the IQR for heavy tails.

    Heavy means an infinite variance, or a standard deviation above 10 interquartile ranges
    (lognormal sigma >= 2): the standard deviation then measures the far tail, and a lattice
    sized by it would put the whole bulk into one cell.
    """
    mean, std = d.mean(), d.std()
    q1, q3 = (float(v) for v in d.quantile([0.25, 0.75]))
    iqr = q3 - q1
    if not (math.isfinite(mean) and math.isfinite(std)) or (iqr > 0 and std > 10 * iqr):
        mean = float(d.quantile(0.5)) if not math.isfinite(mean) else mean
        std = iqr / 1.349
    return mean, std


def sum_spacing(dists: Sequence[Distribution], terms: int, policy: GridPolicy) -> float:
    """Lattice spacing for a sum of ``terms`` operands so the bracket meets ``policy.rel_width``.

    Every discretised operand widens the bracket by one cell, so the spacing is the target
    width ``rel_width * scale`` shared among the terms. Existing grids cannot be refined.
    """
    stats = [_scale(d) for d in dists]
    total_mean = sum(m for m, _ in stats) * terms / len(stats)
    total_std = math.sqrt(sum(s * s for _, s in stats) * terms / len(stats))
    if math.isinf(total_std):  # squares overflow for scales above ~1e154: hypot does not
        total_std = math.hypot(*(s for _, s in stats)) * math.sqrt(terms / len(stats))
    scale = max(abs(total_mean), total_std)
    if scale == 0:
        scale = 1.0
    # Results longer than max_cells are re-binned as they grow (GridDistribution.trimmed), which
    # costs far less bracket width than starting coarse.
    h = policy.rel_width * scale / terms
    grid_h = [d.h for d in dists if isinstance(d, GridDistribution)]
    return max([h, *grid_h])


def _check_sum_fits(dists: Sequence[Distribution], terms: int) -> None:
    """Refuse a sum whose location or spread overflows float64, naming the operands at fault."""
    scales = [_scale(d) for d in dists]
    total = sum(abs(m) + sd for m, sd in scales) * terms / len(scales)
    if math.isfinite(total):
        return
    culprits = [
        f"operand {i} ({d!r}: mean {m:.3g}, scale {sd:.3g})"
        for i, (d, (m, sd)) in enumerate(zip(dists, scales))
        if not (math.isfinite(m) and math.isfinite(sd) and (abs(m) + sd) * terms < 1e300)
    ]
    raise ValueError(
        "the sum overflows float64, so no lattice can hold it: "
        + ("; ".join(culprits) or f"{terms} terms of {len(scales)} operands")
        + ". Rescale the operands (other time units) or drop the overflowing one."
    )


def convolve(*dists: Distribution, policy: GridPolicy | None = None) -> Distribution:
    """The distribution of the sum of independent variables.

    Parameters
    ----------
    *dists : Distribution
        Independent operands.
    policy : GridPolicy, optional
        Discretisation policy (default :data:`~prism_analytic.policy.DEFAULT_POLICY`).

    Returns
    -------
    Distribution
        A :class:`GridDistribution` (or a point mass if every operand is one).

    Examples
    --------
    >>> from prism_analytic import convolve, exponential
    >>> s = convolve(*[exponential(1.0)] * 10)
    >>> low, high = s.quantile_bracket(0.5)
    >>> bool(low <= 9.66871461471 <= high)  # Gamma(10) median
    True
    """
    items = _check_dists(dists)
    policy = _check_policy(policy)
    if all(isinstance(d, PointMass) for d in items):
        return point_mass(sum(d.value for d in items))
    # A constant only shifts the sum: exact, and no lattice has to span it.
    shift = sum(d.value for d in items if isinstance(d, PointMass))
    items = [d for d in items if not isinstance(d, PointMass)]
    if shift != 0:
        return convolve(*items, policy=policy).shift(shift)
    if len(items) == 1:
        return items[0]
    _check_sum_fits(items, len(items))
    if sum_needs_log_lattice(items, policy):  # heavy tails: log-spaced cells
        return log_lattice_convolve(items, policy)
    h = sum_spacing(items, len(items), policy)
    grids = [to_grid(d, h, policy) for d in items]
    out = grids[0]
    for g in grids[1:]:
        out = convolve_grids(out, g)
    return out


def iid_sum(dist: Distribution, m: int, policy: GridPolicy | None = None) -> Distribution:
    """The sum of ``m`` independent copies of ``dist``, by repeated squaring (O(log m) FFTs).

    Normal and gamma (exponential) laws give their closed form from
    :data:`CLOSED_FORM_MIN_COPIES` copies on. Otherwise the lattice follows the sum's spread
    (:mod:`~prism_analytic.distributions.centred_sum`: the bracket grows like sqrt(m)) unless
    the location-relative rounding sandwich is narrower (few copies of a spread-out law) or the
    law is heavy-tailed (tail index <= 4), where the sandwich is used. Laws whose far tail a
    linear lattice cannot hold (Pareto alpha < 3, lognormal sigma >= 1.5; see
    :func:`~prism_analytic.distributions.log_lattice.needs_log_lattice`) are summed on a
    log-spaced lattice with the same guarantee instead. Mean and variance are
    ``m`` times the operand's (exact for exact operands).

    Parameters
    ----------
    dist : Distribution
        The law of one copy.
    m : int
        Number of copies, 1 <= m <= 1e9.
    policy : GridPolicy, optional
        Lattice policy (default :data:`~prism_analytic.policy.DEFAULT_POLICY`).

    Returns
    -------
    Distribution
        A closed form, a point mass, or a :class:`GridDistribution`.
    """
    (dist,) = _check_dists([dist], "dist")
    m = check_count(m, "m", minimum=1, maximum=10**9)
    policy = _check_policy(policy)
    if m == 1:
        return dist
    if isinstance(dist, PointMass):
        return point_mass(dist.value * m)
    # From CLOSED_FORM_MIN_COPIES copies on a closed form, where the family has one, is exact and
    # cheaper than any lattice (smaller sums stay on the lattice like every other sum).
    closed = closed_form_iid_sum(dist, m) if m >= CLOSED_FORM_MIN_COPIES else None
    if closed is not None:
        return closed
    _check_sum_fits([dist], m)
    if needs_log_lattice(dist, policy):  # heavy tails: log-spaced cells (log_lattice.py)
        return log_lattice_iid_sum(dist, m, policy)
    # A bracket that follows the spread (centred rounding), unless the location-relative
    # sandwich is already narrower (few copies of a spread-out law).
    centred = iid_sum_grid(dist, m, policy)
    if centred is not None:
        mean, std = _scale(dist)
        sandwich_width = policy.rel_width * max(abs(mean) * m, std * math.sqrt(m))
        if centred.width(0.5) <= sandwich_width:
            return centred
    base = to_grid(dist, sum_spacing([dist], m, policy), policy)
    return sum_by_doubling(base, m, convolve_grids, lambda g: convolve_grids(g, g))


def _on_common_grid(items: list[Distribution], policy: GridPolicy) -> list[GridDistribution]:
    """Every operand as a grid on the coarsest spacing among the non-exact ones."""
    from .distributions.grid import to_grid_like

    grids = [
        d if isinstance(d, GridDistribution) else to_grid_like(d, policy)
        for d in items
        if not d.is_exact
    ]
    h = max(g.h for g in grids)
    return [to_grid(d, h, policy) for d in items]


def max_independent(*dists: Distribution, policy: GridPolicy | None = None) -> Distribution:
    """The distribution of the maximum of independent variables (product of CDFs)."""
    items = _check_dists(dists)
    if len(items) == 1:
        return items[0]
    if all(d.is_exact for d in items):
        return MaxOfIndependent(items)
    return max_grids(_on_common_grid(items, _check_policy(policy)))


def min_independent(*dists: Distribution, policy: GridPolicy | None = None) -> Distribution:
    """The distribution of the minimum of independent variables (product of survival functions)."""
    items = _check_dists(dists)
    if len(items) == 1:
        return items[0]
    if all(d.is_exact for d in items):
        return MinOfIndependent(items)
    return min_grids(_on_common_grid(items, _check_policy(policy)))


def iid_max(dist: Distribution, n: int, policy: GridPolicy | None = None) -> Distribution:
    """The slowest of ``n`` independent identical ranks: CDF F(x)^n, computed in log space.

    Parameters
    ----------
    dist : Distribution
        Per-rank latency.
    n : int
        Number of ranks, 1 <= n <= 1e12.

    Examples
    --------
    >>> from prism_analytic import iid_max, normal
    >>> round(iid_max(normal(0, 1), 65536).quantile(0.99), 4)
    5.1193
    """
    (dist,) = _check_dists([dist], "dist")
    n = check_count(n, "n", minimum=1, maximum=MAX_COUNT)
    if n == 1:
        return dist
    if isinstance(dist, PointMass):
        return dist
    if isinstance(dist, LogLatticeDistribution):  # stays on its log lattice
        return log_lattice_iid_max(dist, n)
    if dist.is_exact:
        return IIDMax(dist, n)
    (grid,) = _on_common_grid([dist], _check_policy(policy))
    return iid_max_grid(grid, n)


def order_statistic(
    dist: Distribution, k: int, n: int, policy: GridPolicy | None = None
) -> Distribution:
    """The k-th smallest of ``n`` independent copies of ``dist`` (k = 1: min, k = n: max)."""
    (dist,) = _check_dists([dist], "dist")
    n = check_count(n, "n", minimum=1, maximum=MAX_COUNT)
    k = check_count(k, "k", minimum=1)
    if k > n:
        raise ValueError(f"k must lie in [1, n] = [1, {n}], got {k}")
    if n == 1 or isinstance(dist, PointMass):
        return dist
    if dist.is_exact:
        return OrderStatistic(dist, k, n)
    (grid,) = _on_common_grid([dist], _check_policy(policy))
    return order_statistic_grid(grid, k, n)
