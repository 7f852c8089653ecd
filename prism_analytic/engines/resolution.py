"""The one place that decides the grid resolution for a graph (used inside ``predict``).

The analytic and bounds engines discretise a replica body with spacing
``rel_width * mean / depth`` and then spread it over the replica speed factor's range
``[Q(tail), Q(1 - tail)]``. When that takes far more than ``max_cells`` cells the result is
wrong (the mixture of re-binned grids mislocates the law: a 95 s pipeline body in 1,024 replicas
came back as a 14 s step). :func:`resolve_policy` raises ``rel_width`` just enough that every
speed mixture fits, up to :data:`MAX_REL_WIDTH`; the numerical bracket widens accordingly and is
still reported. ``predict`` applies it to every policy, so the library, the CLI and the
breakdown give the same answer for the same graph.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..graph import REPLICA, StepGraph
from ..policy import DEFAULT_POLICY, GridPolicy
from .grid_cache import cached_value

__all__ = ["resolve_policy", "MAX_REL_WIDTH"]

#: Largest ``rel_width`` :func:`resolve_policy` moves to. Checked on llama3-405b at 1,024 GPUs
#: (a 65,536-op pipeline body): 2e-3 and 3e-3 give mean 110.93 s against Monte Carlo's
#: 110.87 s; at 4.5e-3 the engine's canonical core returned NaN.
MAX_REL_WIDTH = 3e-3


def _speed_range(speed: Any, tail: float) -> tuple[float, float]:
    """``speed``'s ``tail`` and ``1 - tail`` quantiles, kept across evaluations.

    A speed mixture's quantiles are found by bisection (~6 ms CPU for llama3-405b's, every
    prediction); a repeated prediction of the same graph reads them back (the same floats).
    """
    return cached_value(
        speed,
        ("speed range", speed._key(), tail),
        lambda: (float(speed.quantile(tail)), float(speed.isf(tail))),
    )


def resolve_policy(graph: StepGraph, base: GridPolicy | None = None) -> GridPolicy:
    """The grid policy under which ``graph`` is evaluated: ``base``, coarsened only if needed.

    Parameters
    ----------
    graph : StepGraph
        The step graph (replica groups with a ``speed`` factor are what may need coarsening).
    base : GridPolicy, optional
        The requested policy (default :data:`~prism_analytic.policy.DEFAULT_POLICY`).

    Returns
    -------
    GridPolicy
        ``base`` itself when it fits, else ``base`` with ``rel_width`` raised (at most to
        ``max(MAX_REL_WIDTH, base.rel_width)``). Idempotent: resolving a resolved policy
        returns it unchanged.
    """
    from .analytic import mean_critical_path

    base = base or DEFAULT_POLICY
    if not isinstance(base, GridPolicy):
        raise TypeError(f"policy must be a GridPolicy, got {type(base).__name__}")
    need = base.rel_width
    for _, d in graph.graph.nodes(data=True):
        if d.get("type") != REPLICA or d.get("speed") is None:
            continue
        lo, hi = _speed_range(d["speed"], base.tail_mass)
        _, depth = mean_critical_path(d["body"])
        need = max(need, (hi - lo) / max(lo, 1e-12) * depth / base.max_cells)
    if need <= base.rel_width:
        return base
    return dataclasses.replace(base, rel_width=min(need, max(MAX_REL_WIDTH, base.rel_width)))
