"""Pipeline-parallel schedules as step graphs."""

from __future__ import annotations

from collections.abc import Callable

from ..distributions import Distribution
from ..schedules import pipeline_dag
from .step_graph import StepGraph

__all__ = ["pipeline_step_graph", "op_name"]

#: Latency of one pipeline op given (phase "F"/"B", stage, microbatch, chunk).
LatencyFn = Callable[[str, int, int, int], Distribution]


def op_name(phase: str, stage: int, microbatch: int, chunk: int = 0) -> str:
    """The node name used for a pipeline op, e.g. ``"F s0 m3 c0"``."""
    return f"{phase} s{stage} m{microbatch} c{chunk}"


def pipeline_step_graph(
    stages: int,
    microbatches: int,
    latency: LatencyFn,
    *,
    schedule: str = "1f1b",
    vpp: int = 1,
    name: str = "pipeline",
) -> StepGraph:
    """A :class:`StepGraph` for a pipeline schedule (see :func:`~prism_analytic.schedules.pipeline_dag`).

    Parameters
    ----------
    stages, microbatches : int
        Pipeline size ``p x m``.
    latency : callable
        ``latency(phase, stage, microbatch, chunk) -> Distribution`` for each op.
    schedule : {"gpipe", "1f1b", "interleaved"}
    vpp : int
        Model chunks per stage (interleaved only).
    """
    dag = pipeline_dag(stages, microbatches, schedule, vpp)
    g = StepGraph(name)
    import networkx as nx

    for node in nx.topological_sort(dag):
        phase, s, mb, c = node
        after = [op_name(*p) for p in dag.predecessors(node)]
        g.add_op(
            op_name(phase, s, mb, c),
            latency(phase, s, mb, c),
            after,
            tags=("pipeline", f"stage{s}"),
        )
    return g
