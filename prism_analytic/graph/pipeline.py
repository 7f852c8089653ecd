"""Pipeline-parallel schedules as step graphs: explicit (a node per op) or compact (one node).

A compact pipeline is one :class:`PipelineSpec` node: the schedule's sizes and one latency law per
(phase, stage, chunk), shared by every microbatch. Its size, and the cost of every engine on it,
does not grow with the microbatch count (the analytic engine evaluates a truncated pipeline and
extrapolates the periodic steady state; :mod:`prism_analytic.engines.pipeline_core`).
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx

from ..distributions import Distribution
from ..schedules import pipeline_dag
from .errors import GraphError
from .pipeline_spec import PipelineSpec, law_key, op_name
from .step_graph import StepGraph

__all__ = [
    "pipeline_step_graph",
    "explicit_pipeline",
    "op_name",
    "PipelineSpec",
    "law_key",
]

#: Latency of one pipeline op given (phase "F"/"B", stage, microbatch, chunk).
LatencyFn = Callable[[str, int, int, int], Distribution]


def explicit_pipeline(spec: PipelineSpec, name: str = "pipeline") -> StepGraph:
    """The same pipeline with a node per op (for the bounds engine and for tests)."""
    if spec.microbatch_factor is not None or spec.stage_factor is not None:
        raise GraphError(
            "a pipeline with shared microbatch or stage factors has no explicit op-by-op "
            "form (its ops are not independent); use the compact node"
        )
    return pipeline_step_graph(
        spec.stages,
        spec.microbatches,
        lambda ph, s, mb, c: spec.law(ph, s, c),
        schedule=spec.schedule,
        vpp=spec.vpp,
        name=name,
    )


def pipeline_step_graph(
    stages: int,
    microbatches: int,
    latency: LatencyFn,
    *,
    schedule: str = "1f1b",
    vpp: int = 1,
    name: str = "pipeline",
    compact: bool = False,
    microbatch_factor: Distribution | None = None,
    stage_factor: Distribution | None = None,
) -> StepGraph:
    """A :class:`StepGraph` for a schedule (:func:`~prism_analytic.schedules.pipeline_dag`).

    Parameters
    ----------
    stages, microbatches : int
        Pipeline size ``p x m``.
    latency : callable
        ``latency(phase, stage, microbatch, chunk) -> Distribution`` for each op.
    schedule : {"gpipe", "1f1b", "interleaved"}
    vpp : int
        Model chunks per stage (interleaved only).
    compact : bool
        One :class:`PipelineSpec` node named ``"pipeline"`` instead of a node per op. The laws
        are taken from microbatch 0 (``latency`` must not depend on the microbatch); every
        engine's cost is then independent of the microbatch count.
    microbatch_factor, stage_factor : Distribution, optional
        Shared factors (see :class:`PipelineSpec`); they need ``compact=True``.
    """
    if compact:
        laws = {
            law_key(ph, s, c): latency(ph, s, 0, c)
            for ph in ("F", "B")
            for s in range(stages)
            for c in range(vpp)
        }
        g = StepGraph(name)
        spec = PipelineSpec(
            stages, microbatches, laws, schedule, vpp, microbatch_factor, stage_factor
        )
        g.add_pipeline("pipeline", spec)
        return g
    if microbatch_factor is not None or stage_factor is not None:
        raise GraphError("shared microbatch or stage factors need compact=True")
    dag = pipeline_dag(stages, microbatches, schedule, vpp)
    g = StepGraph(name)
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
