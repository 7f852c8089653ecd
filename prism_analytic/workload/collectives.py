"""Alpha-beta (latency-bandwidth) mean times of NCCL-style collectives.

A tier is a bandwidth ``B`` (bytes/s per GPU per direction, the achievable bus
bandwidth) and a per-step latency ``alpha`` (s). With ``n`` participants and ``S`` bytes
(the full buffer: the AllReduce buffer, the AllGather *output*, the ReduceScatter
*input*, one rank's AllToAll send buffer):

=================  ==============================================  ======================
collective         time                                            reference
=================  ==============================================  ======================
ring AllReduce     2 (n-1)/n * S/B + 2 (n-1) alpha                 Patarasuk & Yuan 2009
tree AllReduce     2 S/B + 2 ceil(log2 n) alpha                    NCCL double binary tree
ring AllGather     (n-1)/n * S/B + (n-1) alpha                     Thakur et al. 2005
ring ReduceScat.   (n-1)/n * S/B + (n-1) alpha                     Thakur et al. 2005
AllToAll           (n-1)/n * S/B + (n-1) alpha                     pairwise exchange
p2p send/recv      S/B + alpha
=================  ==============================================  ======================

The factor ``(n-1)/n`` (AllGather) and ``2(n-1)/n`` (AllReduce) is NCCL's "bus
bandwidth" correction (nccl-tests ``PERFORMANCE.md``): a tier's bandwidth should be
the busbw nccl-tests reports at large messages, which is why the same ``B`` serves every
collective.

Hierarchical collectives. A group of ``n`` ranks placed ``n_1`` per NVLink domain over
``n_2`` domains (and possibly over ``n_3`` datacenters) runs, as NCCL and
MegaScale/Llama 3 do: ReduceScatter inside the domain, the collective across domains on
``S / n_1`` bytes (each GPU drives its own NIC rail, so the rails run in parallel), then
AllGather inside the domain. :func:`placement_levels` derives the levels from Megatron's
rank order (tp fastest, then cp, dp, pp) and the hardware's domain size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .config import HardwareConfig

__all__ = [
    "Tier",
    "Level",
    "intra_node_tier",
    "inter_node_tier",
    "cross_dc_tier",
    "ring_allreduce_time",
    "tree_allreduce_time",
    "allreduce_time",
    "allgather_time",
    "reduce_scatter_time",
    "alltoall_time",
    "p2p_time",
    "placement_levels",
    "hierarchical_allreduce_time",
    "hierarchical_allgather_time",
    "hierarchical_reduce_scatter_time",
    "hierarchical_alltoall_time",
    "collective_time",
]


@dataclass(frozen=True)
class Tier:
    """A communication tier.

    Attributes
    ----------
    name : str
        ``"intra_node"``, ``"inter_node"`` or ``"cross_dc"`` (keys of the variability
        config's network tiers).
    bandwidth : float
        Achievable bytes/s per GPU per direction.
    latency_s : float
        Per-step latency (s).
    """

    name: str
    bandwidth: float
    latency_s: float

    def __post_init__(self) -> None:
        if not (
            isinstance(self.bandwidth, int | float)
            and math.isfinite(self.bandwidth)
            and self.bandwidth > 0
        ):
            raise ValueError(
                f"Tier {self.name!r}: bandwidth must be finite and > 0 bytes/s,"
                f" got {self.bandwidth!r}"
            )
        if not (
            isinstance(self.latency_s, int | float)
            and math.isfinite(self.latency_s)
            and self.latency_s >= 0
        ):
            raise ValueError(
                f"Tier {self.name!r}: latency_s must be finite and >= 0, got {self.latency_s!r}"
            )


@dataclass(frozen=True)
class Level:
    """One level of a hierarchical group: ``size`` ranks talking over ``tier``."""

    size: int
    tier: Tier


def intra_node_tier(hw: HardwareConfig) -> Tier:
    """The NVLink-domain tier of ``hw``."""
    return Tier("intra_node", hw.intra_node_bandwidth, hw.intra_node_latency_s)


def inter_node_tier(hw: HardwareConfig) -> Tier:
    """The scale-out (NIC rail) tier of ``hw``."""
    return Tier("inter_node", hw.inter_node_bandwidth, hw.inter_node_latency_s)


def cross_dc_tier(hw: HardwareConfig, gpus_per_dc_concurrent: int) -> Tier:
    """The cross-datacenter tier as seen by one GPU.

    ``hardware.inter_dc_bandwidth`` is an aggregate shared by every GPU of a
    datacenter that crosses at the same time (a data-parallel gradient sync runs on all
    of them at once), so one GPU's share is ``inter_dc_bandwidth / gpus_per_dc_concurrent``.
    """
    _check_int(gpus_per_dc_concurrent, "gpus_per_dc_concurrent")
    return Tier("cross_dc", hw.inter_dc_bandwidth / gpus_per_dc_concurrent, hw.inter_dc_latency_s)


# --------------------------------------------------------------------------------------
# input validation
# --------------------------------------------------------------------------------------
def _check_bytes(nbytes: float) -> float:
    if (
        isinstance(nbytes, bool)
        or not isinstance(nbytes, int | float)
        or not math.isfinite(nbytes)
        or nbytes < 0
    ):
        raise ValueError(f"nbytes must be a finite number >= 0, got {nbytes!r}")
    return float(nbytes)


def _check_int(n: int, name: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {n!r}")
    return n


def _check_tier(tier: Tier) -> Tier:
    if not isinstance(tier, Tier):
        raise TypeError(f"tier must be a Tier, got {type(tier).__name__}")
    return tier


# --------------------------------------------------------------------------------------
# flat collectives
# --------------------------------------------------------------------------------------
def ring_allreduce_time(nbytes: float, n: int, tier: Tier) -> float:
    """Ring AllReduce: ``2(n-1)/n * S/B + 2(n-1) alpha`` seconds.

    Examples
    --------
    >>> ring_allreduce_time(1e9, 8, Tier("intra_node", 100e9, 0.0))
    0.0175
    """
    s, n, tier = _check_bytes(nbytes), _check_int(n), _check_tier(tier)
    if n == 1:
        return 0.0
    return 2 * (n - 1) / n * s / tier.bandwidth + 2 * (n - 1) * tier.latency_s


def tree_allreduce_time(nbytes: float, n: int, tier: Tier) -> float:
    """Pipelined (double binary) tree AllReduce: ``2 S/B + 2 ceil(log2 n) alpha``.

    Reduce up and broadcast down a tree, each moving the whole buffer once per rank;
    the latency grows with the tree depth instead of n (Sanders, Speck & Traeff 2009;
    NCCL 2.4's double binary trees).
    """
    s, n, tier = _check_bytes(nbytes), _check_int(n), _check_tier(tier)
    if n == 1:
        return 0.0
    return 2 * s / tier.bandwidth + 2 * math.ceil(math.log2(n)) * tier.latency_s


def allreduce_time(nbytes: float, n: int, tier: Tier, algorithm: str = "auto") -> float:
    """AllReduce by ``algorithm`` in {"ring", "tree", "auto"}.

    ``"auto"`` takes the faster of the two, as NCCL's tuner picks.
    """
    if algorithm == "ring":
        return ring_allreduce_time(nbytes, n, tier)
    if algorithm == "tree":
        return tree_allreduce_time(nbytes, n, tier)
    if algorithm == "auto":
        return min(ring_allreduce_time(nbytes, n, tier), tree_allreduce_time(nbytes, n, tier))
    raise ValueError(f"algorithm must be 'ring', 'tree' or 'auto', got {algorithm!r}")


def allgather_time(nbytes: float, n: int, tier: Tier) -> float:
    """Ring AllGather of an ``nbytes`` *output*: ``(n-1)/n * S/B + (n-1) alpha``."""
    s, n, tier = _check_bytes(nbytes), _check_int(n), _check_tier(tier)
    if n == 1:
        return 0.0
    return (n - 1) / n * s / tier.bandwidth + (n - 1) * tier.latency_s


def reduce_scatter_time(nbytes: float, n: int, tier: Tier) -> float:
    """Ring ReduceScatter of an ``nbytes`` *input*: ``(n-1)/n * S/B + (n-1) alpha``."""
    return allgather_time(nbytes, n, tier)


def alltoall_time(nbytes: float, n: int, tier: Tier) -> float:
    """AllToAll where each rank sends ``nbytes`` in total (``nbytes/n`` to each peer).

    ``(n-1)/n * S/B + (n-1) alpha``: the local share never leaves the GPU.
    """
    return allgather_time(nbytes, n, tier)


def p2p_time(nbytes: float, tier: Tier) -> float:
    """One point-to-point send/recv: ``S/B + alpha``."""
    s, tier = _check_bytes(nbytes), _check_tier(tier)
    return s / tier.bandwidth + tier.latency_s


# --------------------------------------------------------------------------------------
# placement and hierarchical collectives
# --------------------------------------------------------------------------------------
def placement_levels(
    size: int,
    stride: int,
    hw: HardwareConfig,
    *,
    datacenters: int = 1,
    gpus_per_dc_concurrent: int | None = None,
) -> tuple[Level, ...]:
    """Levels of a group of ``size`` ranks spaced ``stride`` apart in rank order.

    Ranks fill NVLink domains in order, so ``max(1, nvlink_domain // stride)`` members
    of the group share a domain (all of them if the whole group fits). A group that
    crosses domains gets an inter-node level; ``datacenters > 1`` splits that level once
    more over a cross-DC tier (pass the GPUs of one datacenter that cross at once).

    Parameters
    ----------
    size : int
        Group size.
    stride : int
        Distance between consecutive members in global rank order (tp group: 1; cp
        group: tp; dp group: tp * cp; pp group: tp * cp * dp).
    hw : HardwareConfig
    datacenters : int
        How many datacenters the group spans (must divide the number of domains used).
    gpus_per_dc_concurrent : int, optional
        For the cross-DC share of bandwidth; required when ``datacenters > 1``.

    Returns
    -------
    tuple of Level
        Innermost first; sizes multiply to ``size`` (up to rounding when the group
        does not fill its domains evenly: the count of domains is rounded up).
    """
    size, stride = _check_int(size, "size"), _check_int(stride, "stride")
    _check_int(datacenters, "datacenters")
    if size == 1:
        return (Level(1, intra_node_tier(hw)),)
    per_domain = min(size, max(1, hw.nvlink_domain // stride))
    domains = math.ceil(size / per_domain)
    levels: list[Level] = []
    if per_domain > 1:
        levels.append(Level(per_domain, intra_node_tier(hw)))
    if domains > 1:
        if datacenters > 1:
            if domains % datacenters:
                raise ValueError(
                    f"group of {size} over {domains} NVLink domains cannot split evenly over"
                    f" {datacenters} datacenters"
                )
            if gpus_per_dc_concurrent is None:
                raise ValueError("gpus_per_dc_concurrent is required when datacenters > 1")
            if domains // datacenters > 1:
                levels.append(Level(domains // datacenters, inter_node_tier(hw)))
            levels.append(Level(datacenters, cross_dc_tier(hw, gpus_per_dc_concurrent)))
        else:
            levels.append(Level(domains, inter_node_tier(hw)))
    return tuple(levels)


def _check_levels(levels: Sequence[Level]) -> tuple[Level, ...]:
    if not levels:
        raise ValueError("levels must not be empty")
    for lv in levels:
        if not isinstance(lv, Level):
            raise TypeError(f"levels must hold Level objects, got {type(lv).__name__}")
        _check_int(lv.size, "Level.size")
    return tuple(levels)


def hierarchical_allreduce_time(
    nbytes: float, levels: Sequence[Level], algorithm: str = "auto"
) -> float:
    """ReduceScatter down the inner levels, AllReduce at the outermost, AllGather back up.

    With one level this is :func:`allreduce_time`. The outermost level works on
    ``S / prod(inner sizes)`` bytes per GPU, all rails in parallel.
    """
    s, levels = _check_bytes(nbytes), _check_levels(levels)
    total, shard = 0.0, s
    for lv in levels[:-1]:
        total += reduce_scatter_time(shard, lv.size, lv.tier)
        total += allgather_time(shard, lv.size, lv.tier)
        shard /= lv.size
    return total + allreduce_time(shard, levels[-1].size, levels[-1].tier, algorithm)


def hierarchical_allgather_time(nbytes: float, levels: Sequence[Level]) -> float:
    """AllGather of an ``nbytes`` output: outer levels gather shards, inner levels the rest."""
    s, levels = _check_bytes(nbytes), _check_levels(levels)
    total, shard = 0.0, s
    for lv in levels:
        total += allgather_time(shard, lv.size, lv.tier)
        shard /= lv.size
    return total


def hierarchical_reduce_scatter_time(nbytes: float, levels: Sequence[Level]) -> float:
    """ReduceScatter of an ``nbytes`` input (mirror image of the AllGather)."""
    return hierarchical_allgather_time(nbytes, levels)


def hierarchical_alltoall_time(nbytes: float, levels: Sequence[Level]) -> float:
    """AllToAll over a hierarchy: each level's traffic runs concurrently on its own links.

    A rank sends ``S/n`` to each of ``n - 1`` peers; of those, ``n_inner - 1`` share its
    innermost level and the rest cross the outer tiers. The time is the slowest tier's
    bandwidth term plus every tier's latency steps (a pairwise exchange).
    """
    s, levels = _check_bytes(nbytes), _check_levels(levels)
    n = math.prod(lv.size for lv in levels)
    if n == 1:
        return 0.0
    bw_terms, lat, inner = [], 0.0, 1
    for lv in levels:
        peers = inner * (lv.size - 1)  # peers first reached at this level
        bw_terms.append(peers / n * s / lv.tier.bandwidth)
        lat += (lv.size - 1) * lv.tier.latency_s
        inner *= lv.size
    return max(bw_terms) + lat


def collective_time(kind: str, nbytes: float, levels: Sequence[Level]) -> float:
    """Dispatch by ``kind`` in {"allreduce", "allgather", "reduce_scatter", "alltoall"}."""
    table = {
        "allreduce": hierarchical_allreduce_time,
        "allgather": hierarchical_allgather_time,
        "reduce_scatter": hierarchical_reduce_scatter_time,
        "alltoall": hierarchical_alltoall_time,
    }
    if kind not in table:
        raise ValueError(f"kind must be one of {sorted(table)}, got {kind!r}")
    return table[kind](nbytes, levels)
