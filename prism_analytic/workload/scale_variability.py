"""Variability that grows with the job's size: ``variability.scale`` in a job's step.

Each mechanism of :class:`~.config.ScaleVariability` becomes, for the job's own GPU, node and
rack counts, either a change of an ordinary section (:func:`apply_scale_variability`) or an
independent rare event that the step builder adds as its own component
(:func:`scale_events`). Nothing is merged: two events of different sizes are never narrowed
into one (an earlier merge kept the mean but could *lower* the variance when a mechanism was
switched on).

* fleet heterogeneity -> ``spatial.cv`` becomes ``sqrt(cv^2 + (1 - 1/m) population_cv^2)``
  with ``m = ceil(G / population_gpus)`` (:func:`apply_scale_variability`; a lognormal with
  the combined spread stands in for the mixture of populations: this one is an
  approximation of shape, exact in the variance);
* per-node collective tail -> every inter-node collective instance gets, besides its tier's
  own tail, an independent event of probability ``1 - (1 - p)^n`` with n the nodes spanned
  by the data-parallel group (the largest inter-node group; :func:`nodes_spanned`) and
  factor ``1 + (node_tail_factor - 1) * node_tail_tier_growth^(t - 1)`` with t the fat-tree
  tiers (:func:`fat_tree_tiers`) of the group's extent (:func:`group_extent_nodes`). The
  builder's law is the exact mixture of none / tier tail / event / both (both: excesses
  add; :func:`prism_analytic.distributions.exposed.tail_components`);
* rack throttling and fail-slow GPUs -> two independent whole-step delays, each its own
  op beside the configured hiccup: probability ``1 - (1 - p)^units`` and size
  ``fraction * mean-model step`` (``rack_throttle``, ``fail_slow_factor - 1``); their sum
  with the hiccup is an exact convolution.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .config import JobConfig, ScaleVariability

__all__ = [
    "COLLECTIVE_EVENT_TIER",
    "ScaleEvents",
    "collective_event",
    "apply_scale_variability",
    "fat_tree_tiers",
    "group_extent_nodes",
    "nodes_spanned",
    "scale_events",
    "scale_factors",
]

#: The communication tier the per-node collective event strikes.
COLLECTIVE_EVENT_TIER = "inter_node"


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


def collective_event(
    scale: ScaleVariability, tier_factor: float, nodes: int, extent_nodes: int | None = None
) -> tuple[float, float]:
    """``(probability, factor)`` of the per-node event on one collective instance.

    For a collective over ``nodes`` nodes whose members lie ``extent_nodes`` nodes apart
    (default ``nodes``: compact placement), with ``scale`` the job's ``variability.scale``
    and ``tier_factor`` the inter-node tier's ``tail_factor`` (used when
    ``node_tail_factor`` is 0). What :func:`scale_factors` computes for a job's data-parallel
    group, for any node count (figures of a collective alone).
    """
    f1 = scale.node_tail_factor or tier_factor
    tiers = fat_tree_tiers(extent_nodes or nodes, scale.fat_tree_radix)
    factor = 1.0 + (f1 - 1.0) * scale.node_tail_tier_growth ** (tiers - 1)
    return _any(scale.node_tail_prob, nodes), factor


def _hit_factor(job: JobConfig) -> float:
    """Multiplier of a collective instance hit by a per-node event (tiers included)."""
    v = job.variability
    return collective_event(
        v.scale, v.network.inter_node.tail_factor, nodes_spanned(job), group_extent_nodes(job)
    )[1]


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


@dataclass(frozen=True)
class ScaleEvents:
    """The rare events of ``variability.scale``, each an independent component of the step.

    Attributes
    ----------
    step_delays : tuple of (str, float, float)
        Whole-step delays ``(op name, probability per step, seconds)``, added by the builder
        as ops in series after the configured hiccup (independent of it and of each other).
    collective_events : tuple of (float, float)
        ``(probability, factor)`` per instance of every collective on the
        :data:`COLLECTIVE_EVENT_TIER` tier, independent of the tier's own tail.
    """

    step_delays: tuple[tuple[str, float, float], ...] = ()
    collective_events: tuple[tuple[float, float], ...] = ()

    def tier_events(self, tier: str | None) -> tuple[tuple[float, float], ...]:
        """The events of the tier named ``tier`` (None: intra-node, which gets none)."""
        return self.collective_events if tier == COLLECTIVE_EVENT_TIER else ()


def scale_events(job: JobConfig) -> ScaleEvents:
    """The independent rare events ``job``'s ``variability.scale`` adds (module notes).

    Empty when no event mechanism is on (fleet heterogeneity is not an event: see
    :func:`apply_scale_variability`).
    """
    sc = job.variability.scale
    if sc.node_tail_prob <= 0 and sc.rack_throttle_prob <= 0 and sc.fail_slow_prob <= 0:
        return ScaleEvents()
    f = scale_factors(job)
    coll: tuple[tuple[float, float], ...] = ()
    if f["collective_hit_prob"] > 0 and f["collective_hit_factor"] > 1:
        coll = ((f["collective_hit_prob"], f["collective_hit_factor"]),)
    delays: list[tuple[str, float, float]] = []
    if f["rack_hit_prob"] > 0 or f["fail_slow_hit_prob"] > 0:
        from .step_estimate import step_time

        base = step_time(job).step_s  # the mean model's step (no variability in it)
        for name, p, frac in (
            ("rack_throttle", f["rack_hit_prob"], sc.rack_throttle),
            ("fail_slow", f["fail_slow_hit_prob"], sc.fail_slow_factor - 1),
        ):
            if p > 0 and frac * base > 0:
                delays.append((name, min(p, 1.0), frac * base))
    return ScaleEvents(tuple(delays), coll)


def _stall_in_seconds(job: JobConfig) -> JobConfig:
    """``job`` with a stall sized as a fraction of the step (``hiccups.size_rel``) in seconds.

    The fraction is of the job's deterministic (mean-model) step, the reference of
    ``temporal.step_jitter_rel`` too; ``job`` itself when ``size_rel`` is 0.
    """
    hic = job.variability.hiccups
    if hic.size_rel <= 0:
        return job
    from .step_estimate import step_time

    seconds = hic.seconds(step_time(job).step_s)
    hiccups = dataclasses.replace(hic, size_s=seconds, size_rel=0.0)
    return job.replace(variability=dataclasses.replace(job.variability, hiccups=hiccups))


def apply_scale_variability(job: JobConfig) -> JobConfig:
    """``job`` with fleet heterogeneity folded into ``variability.spatial`` (module notes).

    ``population_cv`` is then reset to 0, so applying it twice changes nothing; the event
    mechanisms stay in ``variability.scale`` for :func:`scale_events` (the step builder adds
    them as independent components). A stall sized as a fraction of the step
    (``hiccups.size_rel``) becomes seconds for this job here too. ``job`` itself when
    neither applies.
    """
    job = _stall_in_seconds(job)
    sc = job.variability.scale
    if sc.population_cv <= 0:
        return job
    v = job.variability
    extra = scale_factors(job)["extra_spatial_var"]  # 0 within one population
    cv = math.sqrt(v.spatial.cv**2 + extra) if extra > 0 else v.spatial.cv
    spatial = dataclasses.replace(v.spatial, cv=cv)
    scale = dataclasses.replace(sc, population_cv=0.0)
    return job.replace(variability=dataclasses.replace(v, spatial=spatial, scale=scale))
