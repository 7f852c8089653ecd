"""Guaranteed bounds on one candidate's objective, at a chosen grid, for the layout search.

The bounds engine (:mod:`~prism_analytic.engines.bounds`) gives two laws that stochastically
bracket the step time: ``lower`` below it (the minimum CDF of a few path sums) and ``upper``
above it (independence at every max). Any lattice spacing keeps both guaranteed (each side is
rounded outwards), so a coarse grid gives cheaper, looser, still guaranteed bounds.

The search needs the *lower* bound of every candidate but the *upper* bound of only a few
(the incumbents), and the upper side is by far the dearer one (a pass over every pipeline op).
:func:`lower_law` therefore evaluates the lower side alone: the engine's own lower path (the
same functions, the same guarantee) without the upper pass.

Only quantile objectives have guaranteed bounds here: the upper law keeps an atom at +inf
(trimmed tails, at least 1e-18), so it bounds no mean, and the run-time model has no bounds.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

__all__ = [
    "QUANTILE_LEVELS",
    "Grid",
    "COARSE",
    "FINE",
    "lower_law",
    "bound_laws",
    "objective_lower",
    "objective_upper",
    "has_guaranteed_bounds",
]

#: Objectives with guaranteed bounds and their levels.
QUANTILE_LEVELS = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}


class Grid:
    """A bound resolution: relative lattice width and the number of dominant paths.

    Parameters
    ----------
    name : str
        ``"coarse"`` or ``"fine"`` (named in every proof).
    rel_width : float
        Lattice spacing relative to the critical path's mean per node (the engine's rule;
        the bounds engine never goes finer than 2.5e-3).
    paths : int
        Dominant paths in the lower bound (more paths: a tighter, dearer lower bound).
    """

    def __init__(self, name: str, rel_width: float, paths: int) -> None:
        self.name, self.rel_width, self.paths = name, float(rel_width), int(paths)

    def __repr__(self) -> str:
        return f"Grid({self.name!r}, rel_width={self.rel_width:g}, paths={self.paths})"

    def policy(self, graph: Any, *, resolve: bool = True) -> Any:
        """The grid policy the bounds engine evaluates ``graph`` under at this resolution.

        ``resolve``: coarsen where a replica speed mixture would overflow ``max_cells``, as
        ``predict`` does (a walk of the graph's critical path; any lattice keeps the bounds
        guaranteed, so a lower bound on a coarse lattice may skip it: an overflow is then an
        error, and that candidate is kept without a bound).
        """
        from ..policy import DEFAULT_POLICY
        from .resolution import resolve_policy

        policy = replace(DEFAULT_POLICY, rel_width=self.rel_width)
        if resolve:
            policy = resolve_policy(graph, policy)
        # the adjustments of bound_distributions: tiny tails, round-off folded outwards
        return replace(
            policy,
            tail_mass=min(policy.tail_mass, 1e-30),
            rel_width=max(self.rel_width, 2.5e-3),
            fold_roundoff=True,
        )


#: Stage one: every valid candidate (a 4x coarser lattice, one path).
COARSE = Grid("coarse", 1e-2, 1)
#: Stage two: the survivors (the bounds engine's default lattice and paths).
FINE = Grid("fine", 2.5e-3, 8)


def has_guaranteed_bounds(objective: str) -> bool:
    """Whether ``objective`` can be pruned on guaranteed bounds (the quantiles)."""
    return objective in QUANTILE_LEVELS


def _pipeline_lower(spec: Any, h: float, policy: Any, paths: int) -> Any:
    """The lower side of :func:`~prism_analytic.engines.pipeline_bounds.pipeline_bound_grids`."""
    from ..graph import GraphError
    from .pipeline_bounds import _op_pmfs, _paths_lower

    if spec.microbatch_factor is not None or spec.stage_factor is not None:
        raise GraphError("bounds: pipelines with shared factors are not supported")
    arr = spec.arrays
    keys = arr["law_keys"]
    # lattice pmfs only of the laws on the chosen paths (a few of the 2 p v laws)
    ops = _Lazy(lambda j: _op_pmfs(spec.laws[keys[j]], h, policy.tail_mass))
    # one mean per distinct law (the pipeline has few laws and many ops)
    mean = np.array([float(spec.laws[k].mean()) for k in keys])[arr["law_index"]]
    return _paths_lower(arr, mean, ops, paths, h, policy.tail_mass, policy)


class _Lazy:
    """``ops[j]`` computed on first use (the engine's path sum reads only its paths' laws)."""

    def __init__(self, make: Any) -> None:
        self._make, self._done = make, {}

    def __getitem__(self, j: Any) -> Any:
        j = int(j)
        if j not in self._done:
            self._done[j] = self._make(j)
        return self._done[j]


def _lower_evaluator(policy: Any, paths: int) -> Any:
    from ..graph import PIPELINE
    from .bounds import _Bounds

    class _LowerOnly(_Bounds):
        """The engine's evaluator, with a pipeline's lower side computed without its upper."""

        def node(self, g: Any, v: str, h: float, side: str) -> Any:
            d = g.graph.nodes[v]
            if d["type"] == PIPELINE and side == "lower":
                key = (id(d["spec"]), h, "lower")
                if key not in self._bodies:
                    self._bodies[key] = _pipeline_lower(d["spec"], h, self.policy, self.paths)
                return self._bodies[key]
            return super().node(g, v, h, side)

    return _LowerOnly(policy, paths)


def lower_law(graph: Any, grid: Grid) -> Any:
    """A law stochastically below the step time of ``graph`` (use its lower sandwich side).

    The engine's lower bound (:func:`~prism_analytic.engines.bounds.bound_distributions`,
    ``lower``) at ``grid``, without computing the upper one.
    """
    from ..distributions.grid import mix_grids
    from .blas_threads import single_blas_thread
    from .predict import check_grid_size

    graph.validate()
    check_grid_size(graph, "bounds")
    # the coarse grid skips the resolution walk (see Grid.policy)
    ev = _lower_evaluator(grid.policy(graph, resolve=grid is not COARSE), grid.paths)
    states = list(graph.regime_states())
    with single_blas_thread():
        if len(states) == 1:
            return ev.lower(graph.conditioned(states[0][1]) if graph.regimes else graph)
        weights = np.array([p for p, _ in states])
        laws = [ev.lower(graph.conditioned(f)) for _, f in states]
        return mix_grids(laws, weights / weights.sum())


def bound_laws(graph: Any, grid: Grid) -> tuple[Any, Any]:
    """(lower, upper): the bounds engine at ``grid`` (both guaranteed)."""
    from .blas_threads import single_blas_thread
    from .bounds import bound_distributions
    from .predict import check_grid_size

    graph.validate()
    check_grid_size(graph, "bounds")
    with single_blas_thread():
        return bound_distributions(graph, grid.policy(graph), paths=grid.paths)


def objective_lower(law: Any, objective: str) -> float:
    """A guaranteed lower bound on ``objective`` from a lower law (-inf when there is none)."""
    q = QUANTILE_LEVELS[objective]
    value = float(law.quantile_bracket(q)[0])
    return value if not math.isnan(value) else -math.inf


def objective_upper(law: Any, objective: str) -> float:
    """A guaranteed upper bound on ``objective`` from an upper law (+inf when there is none)."""
    q = QUANTILE_LEVELS[objective]
    value = float(law.quantile_bracket(q)[1])
    return value if not math.isnan(value) else math.inf
