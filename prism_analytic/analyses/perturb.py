"""Step graphs with one kernel class's mean or variability changed.

Two perturbations per kernel class ``c`` (an :class:`~prism_analytic.workload.mean_model.OpMean`
``op_class``, or ``"optimizer"``), both through the public builder:

* **mean** ``x (1 + e)``: every op of the class takes ``1 + e`` times as long (law scaled,
  coefficient of variation kept). Overlap is recomputed by the builder (an op hidden behind
  compute stays hidden while it fits).
* **variability** ``x lam``: every op of the class keeps its mean and its deviations from the
  mean are multiplied by ``lam`` (standard deviation ``x lam``). In the pipeline body, where
  the builder combines ops by their first two moments, this is done by giving the op
  ``seconds x lam^2`` and ``count / lam^2`` (mean ``count x seconds`` unchanged, variance
  ``count x seconds^2 x cv^2`` times ``lam^2``); step-level ops (data-parallel collectives,
  fill/drain hops, optimizer) become ``mu + lam (X - mu)`` (``lam = 0``: a point mass at
  ``mu``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import networkx as nx

from ..distributions import Distribution, point_mass
from ..graph import REPLICA, StepGraph

__all__ = [
    "KERNEL_CLASSES",
    "class_of_node",
    "perturbed_graph",
    "class_time_per_rank",
    "class_moments_per_rank",
]

#: Kernel classes, in report order: (key, label).
KERNEL_CLASSES = (
    ("gemm", "GEMM"),
    ("attention", "attention"),
    ("memory", "elementwise/norm"),
    ("allgather", "AllGather"),
    ("reduce_scatter", "ReduceScatter"),
    ("allreduce", "AllReduce"),
    ("p2p", "send/recv"),
    ("alltoall", "all-to-all"),
    ("optimizer", "optimizer"),
)

_GROUPS = (
    "layer_fwd",
    "layer_bwd",
    "embedding_fwd",
    "embedding_bwd",
    "head_fwd",
    "head_bwd",
    "dp_microbatch",
    "dp_step",
)


def _cls(o: Any, is_optimizer: bool = False) -> str:
    return "optimizer" if is_optimizer else o.op_class


def _map_means(om: Any, fn) -> Any:
    """``om`` with ``fn(op, class)`` applied to every op."""
    changes = {g: tuple(fn(o, _cls(o)) for o in getattr(om, g)) for g in _GROUPS}
    if om.pp_send is not None:
        changes["pp_send"] = fn(om.pp_send, _cls(om.pp_send))
    changes["optimizer"] = fn(om.optimizer, "optimizer")
    return dataclasses.replace(om, **changes)


def class_of_node(graph: StepGraph, name: str, om: Any) -> str | None:
    """Kernel class of a step-level op of a builder graph (None: overhead, hiccup)."""
    if name == "optimizer":
        return "optimizer"
    if name == "pp_fill_drain":
        return "p2p"
    for o in om.dp_step:
        if o.name == name:
            return o.op_class
    return None


def _spread(d: Distribution, lam: float) -> Distribution:
    mu = float(d.mean())
    if lam <= 0:
        return point_mass(mu)
    return d.scale(lam).shift((1.0 - lam) * mu)


def perturbed_graph(job: Any, om: Any, cls: str, what: str, value: float) -> StepGraph:
    """The builder's step graph with class ``cls`` perturbed.

    Parameters
    ----------
    job : JobConfig
    om : OpMeans
        The job's :func:`~prism_analytic.workload.mean_model.op_means`.
    cls : str
        A key of :data:`KERNEL_CLASSES`.
    what : {"mean", "variability"}
    value : float
        ``mean``: the time factor ``1 + e`` (> 0); ``variability``: the deviation factor
        ``lam`` (>= 0).
    """
    from ..workload.builder import build_step_graph

    keys = [k for k, _ in KERNEL_CLASSES]
    if cls not in keys:
        raise ValueError(f"kernel class must be one of {keys}, got {cls!r}")
    if what == "mean":
        if not value > 0:
            raise ValueError(f"a mean factor must be > 0, got {value!r}")

        def fn(o, c):
            if c != cls:
                return o
            return dataclasses.replace(o, seconds=o.seconds * value, exposed_s=o.exposed_s * value)

        return build_step_graph(job, means=_map_means(om, fn))
    if what != "variability":
        raise ValueError(f"what must be 'mean' or 'variability', got {what!r}")
    if not value >= 0:
        raise ValueError(f"a variability factor must be >= 0, got {value!r}")
    lam2 = max(value, 1e-4) ** 2  # 1e-4: variance 1e-8 of the original, i.e. removed
    from ..workload.comm_noise import CommNoise

    noise = CommNoise.of(job)  # the builder's law: tier noise and variability.scale's events

    def fn_var(o, c):
        if c != cls:
            return o
        hidden = getattr(o, "hidden_s", None)
        if o.kind != "compute" and hidden is not None and hidden > 0 and o.seconds > 0:
            # noise before overlap: max(0, seconds * M - hidden). The builder combines it by
            # its moments, so stand in an un-hidden op with the same mean and lam^2 x variance
            law = noise.instance(o)
            mu, var = float(law.mean()), float(law.var())
            mult = noise.multiplier(o.tier)
            m1, v1 = float(mult.mean()), float(mult.var())
            if mu <= 0 or var <= 0 or v1 <= 0:
                return o
            e = lam2 * var * m1 / (v1 * mu)
            return dataclasses.replace(o, hidden_s=None, exposed_s=e, count=o.count * mu / (e * m1))
        return dataclasses.replace(
            o, seconds=o.seconds * lam2, exposed_s=o.exposed_s * lam2, count=o.count / lam2
        )

    body_graph = build_step_graph(job, means=_map_means(om, fn_var))
    base = build_step_graph(job, means=om)
    out = StepGraph(base.name)
    for name in nx.topological_sort(base.graph):
        d = base.graph.nodes[name]
        after = list(base.graph.predecessors(name))
        if d["type"] == REPLICA:
            p = body_graph.node(name)
            out.add_replica_group(name, p["body"], p["n"], after, slow=p["slow"], speed=p["speed"])
            continue
        lat = d["latency"]
        if class_of_node(base, name, om) == cls:
            lat = _spread(lat, value)
        out.add_op(name, lat, after, kind=d["kind"], tags=d["tags"])
    for r in base.regimes:
        out.add_regime(r.name, dict(r.probs), dict(r.factors), applies_to=r.applies_to)
    return out


def class_time_per_rank(job: Any, om: Any, exposed: bool = True) -> dict[str, float]:
    """Mean seconds of each class per step on one GPU of a middle stage.

    ``exposed``: the parts left on the critical path after overlap (else the full times).

    Layers x chunks x microbatches of the layer ops, per-microbatch data-parallel traffic,
    the pipeline sends, the once-per-step collectives and the optimizer.
    """
    p = job.parallelism
    per_stage_layers = om.layers_per_chunk * om.chunks_per_stage if p.pp > 1 else job.model.layers
    out = {k: 0.0 for k, _ in KERNEL_CLASSES}
    m = om.microbatches

    def t(o: Any) -> float:
        return o.count * (o.exposed_s if exposed else o.seconds)

    for g in ("layer_fwd", "layer_bwd"):
        for o in getattr(om, g):
            out[o.op_class] += t(o) * per_stage_layers * m
    for o in om.dp_microbatch:
        out[o.op_class] += t(o) * m
    if om.pp_send is not None:
        out["p2p"] += t(om.pp_send) * m * om.chunks_per_stage * 2
    for o in om.dp_step:
        out[o.op_class] += t(o)
    out["optimizer"] += om.optimizer.seconds
    return out


def class_moments_per_rank(job: Any, om: Any) -> dict[str, tuple[float, float]]:
    """``{class: (mean, sd)}`` of each class's exposed time per step on one GPU.

    Executions as in :func:`class_time_per_rank`, each independent: compute kernels with
    coefficient of variation ``variability.temporal.kernel_cv``, communication as its mean
    exposed time times the noise multiplier the step builder draws for its tier
    (:meth:`~prism_analytic.workload.comm_noise.CommNoise.multiplier`: the tier's law with
    ``variability.scale``'s per-node event). The inputs of the closed-form (i.i.d. normal
    ranks) model. Communication hidden on average (exposed mean 0) is left out although the
    builder exposes its slow instances (``max(0, seconds * M - hidden)``): those are rare
    spikes, whose variance a normal rank law would spread over the bulk (llama3-8b FSDP on 64
    GPUs: the closed form's GEMM variability derivatives 6.7x below the engine's with them,
    0.00% apart without).
    """
    from ..workload.comm_noise import CommNoise

    p, v = job.parallelism, job.variability
    noise = CommNoise.of(job)
    layers = om.layers_per_chunk * om.chunks_per_stage if p.pp > 1 else job.model.layers
    m = om.microbatches
    mean = {k: 0.0 for k, _ in KERNEL_CLASSES}
    var = {k: 0.0 for k, _ in KERNEL_CLASSES}

    def add(o: Any, times: float, cls: str | None = None) -> None:
        cls = cls or o.op_class
        if o.kind == "compute":
            if o.seconds <= 0:
                return
            mu, sd = o.seconds, v.temporal.kernel_cv * o.seconds
        else:
            if o.exposed_s <= 0:
                return
            mult = noise.multiplier(o.tier)
            mu, sd = o.exposed_s * float(mult.mean()), o.exposed_s * float(mult.std())
        mean[cls] += times * o.count * mu
        var[cls] += times * o.count * sd * sd

    for g in ("layer_fwd", "layer_bwd"):
        for o in getattr(om, g):
            add(o, layers * m)
    for o in om.dp_microbatch:
        add(o, m)
    if om.pp_send is not None:
        add(om.pp_send, m * om.chunks_per_stage * 2)
    for o in om.dp_step:
        add(o, 1)
    add(om.optimizer, 1, "optimizer")
    return {k: (mean[k], var[k] ** 0.5) for k in mean}
