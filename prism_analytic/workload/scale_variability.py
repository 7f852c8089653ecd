"""Variability that grows with the job's size: fold ``variability.scale`` into a job.

Each mechanism of :class:`~.config.ScaleVariability` is turned into the sections the step
builder already understands, for the job's own GPU, node and rack counts, so the builder and
every engine see one ordinary job. :func:`apply_scale_variability` returns the job with the
mechanisms folded in and ``variability.scale`` reset to all-off, so applying it twice changes
nothing.

* fleet heterogeneity -> ``spatial.cv`` becomes ``sqrt(cv^2 + (1 - 1/m) population_cv^2)``
  with ``m = ceil(G / population_gpus)`` (a lognormal with the combined spread stands in for
  the mixture of populations);
* per-node collective tail -> the inter-node tier's ``tail_prob`` becomes
  ``1 - (1 - tail_prob) (1 - p)^n`` with n the nodes spanned by the data-parallel group
  (the largest inter-node group; :func:`nodes_spanned`), and its ``tail_factor`` the one
  with the same mean excess over both events, a hit costing
  ``1 + (node_tail_factor - 1) * node_tail_tier_growth^(t - 1)`` with t the fat-tree tiers
  (:func:`fat_tree_tiers`) of the group's extent (:func:`group_extent_nodes`);
* rack throttling and fail-slow GPUs -> a rare whole-step delay (``hiccups``): probability
  ``1 - (1 - p)^units`` and size ``fraction * mean-model step``, merged with the configured
  hiccup into one with the combined probability and the same mean delay (the merge keeps
  the mean and the probability of any delay; it narrows the two sizes into one).
"""

from __future__ import annotations

import dataclasses
import math

from .config import JobConfig, ScaleVariability

__all__ = [
    "apply_scale_variability",
    "fat_tree_tiers",
    "group_extent_nodes",
    "nodes_spanned",
    "scale_factors",
]


def fat_tree_tiers(nodes: int, radix: int) -> int:
    """Switch tiers a collective over ``nodes`` compactly placed nodes crosses.

    In a fat tree of ``radix``-port switches, a leaf switch serves ``radix / 2`` nodes and
    each tier above multiplies the nodes reachable below one switch by ``radix / 2``, so
    ``nodes`` need the smallest ``t >= 1`` with ``(radix / 2) ** t >= nodes`` (1 = one leaf
    switch). Compact placement is assumed: a scattered allocation crosses more tiers.

    Parameters
    ----------
    nodes : int
        Nodes spanned (>= 1).
    radix : int
        Switch port count (even, >= 4).
    """
    if int(nodes) != nodes or nodes < 1:
        raise ValueError(f"nodes must be an integer >= 1, got {nodes!r}")
    if int(radix) != radix or radix < 4 or radix % 2:
        raise ValueError(f"radix must be an even integer >= 4, got {radix!r}")
    half, t, reach = radix // 2, 1, radix // 2
    while reach < nodes:
        reach *= half
        t += 1
    return t


def nodes_spanned(job: JobConfig) -> int:
    """Nodes the data-parallel group spans.

    ``dp * cp`` ranks, ``gpus_per_node // tp`` of them per node, never more than the job's
    nodes.
    """
    p, hw = job.parallelism, job.hardware
    nodes = max(1, job.gpus // hw.gpus_per_node)
    per_node = max(1, hw.gpus_per_node // max(1, p.tp))  # dp ranks sharing a node
    return max(1, min(nodes, math.ceil(p.dp * p.cp / per_node)))


def _any(p: float, units: int) -> float:
    """P(at least one of ``units`` independent units is hit), each with probability p."""
    return -math.expm1(units * math.log1p(-p)) if p > 0 else 0.0


def group_extent_nodes(job: JobConfig) -> int:
    """Nodes between the data-parallel group's first and last member.

    With the default ``tp-cp-dp-pp`` order the group is a contiguous block
    (:func:`nodes_spanned`); with ``tp-cp-pp-dp`` its members are strided over the whole
    job, so its messages cross the switch tiers of every node of the job.
    """
    if job.parallelism.rank_order == "tp-cp-pp-dp":
        return max(1, job.gpus // job.hardware.gpus_per_node)
    return nodes_spanned(job)


def _tiers(job: JobConfig) -> int:
    return fat_tree_tiers(group_extent_nodes(job), job.variability.scale.fat_tree_radix)


def _hit_factor(job: JobConfig) -> float:
    """Multiplier of a collective instance hit by a per-node event (tiers included)."""
    sc = job.variability.scale
    f1 = sc.node_tail_factor or job.variability.network.inter_node.tail_factor
    tiers = _tiers(job)
    return 1.0 + (f1 - 1.0) * sc.node_tail_tier_growth ** (tiers - 1)


def scale_factors(job: JobConfig) -> dict[str, float]:
    """What each mechanism becomes for this job (for reports and tests)."""
    sc: ScaleVariability = job.variability.scale
    racks = max(1, math.ceil(job.gpus / sc.rack_gpus))
    m = max(1, math.ceil(job.gpus / sc.population_gpus))
    return {
        "populations": m,
        "extra_spatial_var": (1 - 1 / m) * sc.population_cv**2,
        "nodes_spanned": nodes_spanned(job),
        "collective_hit_prob": _any(sc.node_tail_prob, nodes_spanned(job)),
        "collective_tiers": _tiers(job),
        "collective_hit_factor": _hit_factor(job),
        "racks": racks,
        "rack_hit_prob": _any(sc.rack_throttle_prob, racks),
        "fail_slow_hit_prob": _any(sc.fail_slow_prob, job.gpus),
    }


def apply_scale_variability(job: JobConfig) -> JobConfig:
    """``job`` with its ``variability.scale`` mechanisms folded in (module notes)."""
    sc = job.variability.scale
    if not sc.active:
        return job
    from .step_estimate import step_time

    f = scale_factors(job)
    v = job.variability
    spatial = dataclasses.replace(v.spatial, cv=math.sqrt(v.spatial.cv**2 + f["extra_spatial_var"]))
    inter = v.network.inter_node
    if f["collective_hit_prob"] > 0:
        # The tier's own tail and the per-node event merge into one tail with the probability
        # of either and the same mean excess (exact for the mean; the two sizes become one).
        p1, p2 = inter.tail_prob, f["collective_hit_prob"]
        q = 1 - (1 - p1) * (1 - p2)
        excess = (p1 * (inter.tail_factor - 1) + p2 * (f["collective_hit_factor"] - 1)) / q
        inter = dataclasses.replace(
            inter, tail_prob=min(q, 1 - 1e-12), tail_factor=min(1.0 + excess, 1000.0)
        )
    network = dataclasses.replace(v.network, inter_node=inter)
    hic = v.hiccups
    events = [(hic.probability, hic.size_s)] if hic.probability > 0 else []
    if f["rack_hit_prob"] > 0 or f["fail_slow_hit_prob"] > 0:
        base = step_time(job).step_s
        events.append((f["rack_hit_prob"], sc.rack_throttle * base))
        events.append((f["fail_slow_hit_prob"], (sc.fail_slow_factor - 1) * base))
    events = [(p, s) for p, s in events if p > 0 and s > 0]
    if events:
        p_none = math.prod(1 - p for p, _ in events)
        p_any = 1 - p_none
        mean_delay = sum(p * s for p, s in events)
        hic = dataclasses.replace(hic, probability=min(p_any, 1.0), size_s=mean_delay / p_any)
    var = dataclasses.replace(
        v, spatial=spatial, network=network, hiccups=hic, scale=ScaleVariability()
    )
    return job.replace(variability=var)
