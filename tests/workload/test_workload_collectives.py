"""Alpha-beta collective times: closed forms, hierarchy, placement, input checks."""

from __future__ import annotations

import dataclasses
import math

import pytest

from prism_analytic.workload.collectives import (
    Level,
    Tier,
    allgather_time,
    allreduce_time,
    alltoall_time,
    collective_time,
    cross_dc_tier,
    hierarchical_allgather_time,
    hierarchical_allreduce_time,
    hierarchical_alltoall_time,
    hierarchical_reduce_scatter_time,
    inter_node_tier,
    intra_node_tier,
    p2p_time,
    placement_levels,
    reduce_scatter_time,
    ring_allreduce_time,
    tree_allreduce_time,
)
from prism_analytic.workload.presets import hardware_preset

FAST = Tier("intra_node", 100e9, 1e-6)
SLOW = Tier("inter_node", 10e9, 10e-6)
H100 = hardware_preset("h100-sxm-80gb")
GB200 = hardware_preset("gb200-nvl72")


def test_ring_allreduce_closed_form():
    s, n = 1e9, 8
    assert ring_allreduce_time(s, n, FAST) == pytest.approx(2 * 7 / 8 * s / 100e9 + 14e-6)


def test_tree_allreduce_closed_form():
    assert tree_allreduce_time(1e6, 1024, SLOW) == pytest.approx(2e6 / 10e9 + 20 * 10e-6)


def test_auto_picks_the_faster():
    small, big = 1e3, 1e10
    assert allreduce_time(small, 1024, SLOW) == tree_allreduce_time(small, 1024, SLOW)
    # few ranks, big buffer: the ring's 2(n-1)/n bandwidth term wins
    assert allreduce_time(big, 8, SLOW) == ring_allreduce_time(big, 8, SLOW)
    # many ranks: the ring's 2(n-1) latency steps lose to the tree's 2 log2(n)
    assert allreduce_time(big, 1024, SLOW) == tree_allreduce_time(big, 1024, SLOW)
    assert allreduce_time(big, 8, SLOW, "tree") == tree_allreduce_time(big, 8, SLOW)


def test_allgather_reduce_scatter_alltoall_closed_forms():
    s, n = 4e8, 4
    expect = 3 / 4 * s / 100e9 + 3e-6
    assert allgather_time(s, n, FAST) == pytest.approx(expect)
    assert reduce_scatter_time(s, n, FAST) == pytest.approx(expect)
    assert alltoall_time(s, n, FAST) == pytest.approx(expect)
    # AllReduce = ReduceScatter + AllGather on a ring
    assert ring_allreduce_time(s, n, FAST) == pytest.approx(2 * expect)


def test_p2p():
    assert p2p_time(1e6, SLOW) == pytest.approx(1e6 / 10e9 + 10e-6)
    assert p2p_time(0, SLOW) == SLOW.latency_s


def test_single_rank_costs_nothing():
    for fn in (
        ring_allreduce_time,
        tree_allreduce_time,
        allgather_time,
        reduce_scatter_time,
        alltoall_time,
    ):
        assert fn(1e9, 1, SLOW) == 0.0


def test_monotone_in_bytes_and_ranks():
    sizes = [0, 1e3, 1e6, 1e9]
    for fn in (ring_allreduce_time, allgather_time, alltoall_time):
        times = [fn(s, 16, SLOW) for s in sizes]
        assert times == sorted(times)
        assert fn(1e9, 64, SLOW) > fn(1e9, 8, SLOW)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "1e9", True, None])
def test_bad_bytes_rejected(bad):
    with pytest.raises(ValueError, match="nbytes"):
        ring_allreduce_time(bad, 8, FAST)


@pytest.mark.parametrize("bad", [0, -2, 2.0, True])
def test_bad_rank_count_rejected(bad):
    with pytest.raises(ValueError, match="n must be an integer"):
        allgather_time(1e6, bad, FAST)


def test_bad_tier_rejected():
    with pytest.raises(TypeError, match="Tier"):
        p2p_time(1e6, (1e9, 1e-6))
    with pytest.raises(ValueError, match="bandwidth"):
        Tier("x", -1.0, 0.0)
    with pytest.raises(ValueError, match="bandwidth"):
        Tier("x", float("nan"), 0.0)
    with pytest.raises(ValueError, match="latency_s"):
        Tier("x", 1e9, -1e-6)


def test_bad_algorithm_and_kind():
    with pytest.raises(ValueError, match="algorithm"):
        allreduce_time(1e6, 8, FAST, "butterfly")
    with pytest.raises(ValueError, match="kind"):
        collective_time("broadcast", 1e6, (Level(8, FAST),))
    with pytest.raises(ValueError, match="empty"):
        hierarchical_allreduce_time(1e6, ())


def test_one_level_hierarchy_equals_flat():
    lv = (Level(8, FAST),)
    assert hierarchical_allreduce_time(1e9, lv) == allreduce_time(1e9, 8, FAST)
    assert hierarchical_allgather_time(1e9, lv) == allgather_time(1e9, 8, FAST)
    assert hierarchical_reduce_scatter_time(1e9, lv) == reduce_scatter_time(1e9, 8, FAST)
    assert hierarchical_alltoall_time(1e9, lv) == pytest.approx(alltoall_time(1e9, 8, FAST))


def test_two_level_allreduce_closed_form():
    s = 1e9
    levels = (Level(8, FAST), Level(16, SLOW))
    expect = (
        reduce_scatter_time(s, 8, FAST)
        + allgather_time(s, 8, FAST)
        + allreduce_time(s / 8, 16, SLOW)
    )
    assert hierarchical_allreduce_time(s, levels) == pytest.approx(expect)
    # the hierarchy beats a flat ring over the slow tier with all 128 ranks
    assert hierarchical_allreduce_time(s, levels) < ring_allreduce_time(s, 128, SLOW)


def test_two_level_allgather_closed_form():
    s = 1e9
    levels = (Level(4, FAST), Level(8, SLOW))
    expect = allgather_time(s, 4, FAST) + allgather_time(s / 4, 8, SLOW)
    assert hierarchical_allgather_time(s, levels) == pytest.approx(expect)


def test_hierarchical_alltoall_bottleneck():
    s = 1e9
    levels = (Level(8, FAST), Level(4, SLOW))
    n = 32
    inter = 24 / n * s / SLOW.bandwidth
    lat = 7 * FAST.latency_s + 3 * SLOW.latency_s
    assert hierarchical_alltoall_time(s, levels) == pytest.approx(inter + lat)


def test_placement_tp_inside_a_node():
    (lv,) = placement_levels(8, 1, H100)
    assert lv.size == 8 and lv.tier.name == "intra_node"


def test_placement_dp_across_nodes():
    (lv,) = placement_levels(128, 8, H100)
    assert lv.size == 128 and lv.tier.name == "inter_node"


def test_placement_mixed():
    levels = placement_levels(16, 1, H100)
    assert [(lv.size, lv.tier.name) for lv in levels] == [(8, "intra_node"), (2, "inter_node")]


def test_placement_gb200_rack():
    # dp 8 at stride tp*cp = 8 fits a 72-GPU NVLink domain
    (lv,) = placement_levels(8, 8, GB200)
    assert lv.tier.name == "intra_node"
    levels = placement_levels(39, 8, GB200)
    assert [lv.tier.name for lv in levels] == ["intra_node", "inter_node"]
    assert levels[0].size == 9 and levels[1].size == math.ceil(39 / 9)


def test_placement_cross_dc():
    hw = hardware_preset("h100-2dc")
    levels = placement_levels(128, 8, hw, datacenters=2, gpus_per_dc_concurrent=8192)
    assert [(lv.size, lv.tier.name) for lv in levels] == [(64, "inter_node"), (2, "cross_dc")]
    assert levels[1].tier.bandwidth == pytest.approx(hw.inter_dc_bandwidth / 8192)
    with pytest.raises(ValueError, match="gpus_per_dc_concurrent"):
        placement_levels(128, 8, hw, datacenters=2)
    with pytest.raises(ValueError, match="datacenters"):
        placement_levels(3, 8, hw, datacenters=2, gpus_per_dc_concurrent=8)


def test_more_inter_dc_bandwidth_is_faster():
    hw = hardware_preset("h100-2dc")
    slow = placement_levels(128, 8, hw, datacenters=2, gpus_per_dc_concurrent=8192)
    fast_hw = dataclasses.replace(hw, inter_dc_bandwidth=hw.inter_dc_bandwidth * 10)
    fast = placement_levels(128, 8, fast_hw, datacenters=2, gpus_per_dc_concurrent=8192)
    assert hierarchical_allreduce_time(1e10, fast) < hierarchical_allreduce_time(1e10, slow)


def test_tiers_from_hardware():
    assert intra_node_tier(H100).bandwidth == H100.intra_node_bandwidth
    assert inter_node_tier(H100).latency_s == H100.inter_node_latency_s
    with pytest.raises(ValueError, match="gpus_per_dc_concurrent"):
        cross_dc_tier(H100, 0)


def test_placement_input_checks():
    with pytest.raises(ValueError, match="size"):
        placement_levels(0, 1, H100)
    with pytest.raises(ValueError, match="stride"):
        placement_levels(8, 0, H100)
