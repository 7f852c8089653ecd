"""A built step graph split into what the analyses vary: replica body, allocation, tail.

The workload builder's step (:func:`~prism_analytic.workload.builder.build_step_graph`) is a
replica group of ``dp`` pipeline copies (each with a persistent speed factor, ``k`` of them
``slow_factor`` times slower) followed by step-level ops (fill/drain hops, data-parallel
collectives, optimizer, overhead, hiccup) under optional per-step regimes. The analyses need
the pieces apart:

* the **body** ``B`` (one replica's pipeline makespan, no speed factor), from the analytic
  engine;
* the **allocation**: the replica count, the speed-factor law ``G`` of a replica and the
  slow copies;
* the **tail** ``T``: the step-level ops after the barrier, with the regimes. No regime
  touches the body (the builder's pipeline ops are all ``kind="compute"``), so
  ``step | allocation = max_r(s_r B_r) + T`` with ``T`` independent of the barrier.

Given an allocation (the speed factors ``s_r``, fixed for the whole job) the barrier's CDF is
``prod_r F_B(t / s_r)`` (:meth:`StepParts.barrier_cdf`).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from ..distributions import Distribution, GridDistribution
from ..engines.predict import predict
from ..graph import REPLICA, StepGraph

__all__ = ["StepParts", "decompose", "tail_graph"]


@dataclass(frozen=True)
class StepParts:
    """The pieces of a builder step graph.

    Attributes
    ----------
    graph : StepGraph
        The whole step.
    body : GridDistribution
        One replica's makespan (no speed factor), analytic engine.
    n : int
        Replicas.
    slow : tuple of (int, float)
        ``(k, factor)``: ``k`` replicas are ``factor`` times slower (``(0, 1.0)`` if none).
    speed : Distribution or None
        Persistent per-replica speed factor (``None``: every replica runs at 1).
    tail : Distribution
        The step-level ops after the barrier, regimes included (analytic engine).
    """

    graph: StepGraph
    body: GridDistribution
    n: int
    slow: tuple[int, float]
    speed: Distribution | None
    tail: Distribution

    def barrier_cdf(self, t: np.ndarray, speeds: np.ndarray) -> np.ndarray:
        """``prod_r F_B(t / s_r)`` for one allocation (the speed factor of every replica).

        Computed in log space, speeds grouped by value so that repeated factors cost once.
        """
        t = np.asarray(t, dtype=float)
        vals, counts = np.unique(np.asarray(speeds, dtype=float), return_counts=True)
        logf = np.zeros_like(t)
        with np.errstate(divide="ignore"):
            for s, c in zip(vals, counts):
                logf += c * np.log(self.body.cdf(t / s))
        return np.exp(logf)


def tail_graph(graph: StepGraph, barrier: str = "replicas") -> StepGraph:
    """The step-level part of ``graph``: every op but the replica group, regimes kept."""
    out = StepGraph(f"{graph.name}/tail")
    for name in nx.topological_sort(graph.graph):
        if name == barrier:
            continue
        d = graph.graph.nodes[name]
        if d["type"] == REPLICA:
            raise ValueError(f"node {name!r}: only one replica group ({barrier!r}) is supported")
        after = [p for p in graph.graph.predecessors(name) if p != barrier]
        out.add_op(name, d["latency"], after, kind=d["kind"], tags=d["tags"])
    for r in graph.regimes:
        out.add_regime(r.name, dict(r.probs), dict(r.factors), applies_to=r.applies_to)
    return out


def decompose(graph: StepGraph, barrier: str = "replicas") -> StepParts:
    """Split a builder step graph into body, allocation and tail.

    Raises
    ------
    ValueError
        When ``graph`` has no replica group named ``barrier`` or a regime applies to the body.
    """
    if barrier not in graph.graph or graph.node(barrier)["type"] != REPLICA:
        raise ValueError(f"step graph {graph.name!r} has no replica group {barrier!r}")
    node = graph.node(barrier)
    body_graph: StepGraph = node["body"]
    for r in graph.regimes:
        hit = [
            n
            for n in body_graph.nodes
            if r.applies_to in (body_graph.node(n)["kind"], *body_graph.node(n)["tags"])
        ]
        if hit:
            raise ValueError(
                f"regime {r.name!r} applies to replica-body op {hit[0]!r}; the analyses need "
                "regimes on step-level ops only"
            )
    body = predict(body_graph).distribution
    tg = tail_graph(graph, barrier)
    from ..distributions import point_mass

    tail = predict(tg).distribution if len(tg) else point_mass(0.0)
    slow = node["slow"] if node["slow"] else (0, 1.0)
    return StepParts(
        graph, body, int(node["n"]), (int(slow[0]), float(slow[1])), node["speed"], tail
    )
