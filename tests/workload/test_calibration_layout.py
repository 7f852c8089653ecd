"""Rank order and partly used NVLink domains."""

from __future__ import annotations

import pytest

from prism_analytic.workload.config import ConfigError
from prism_analytic.workload.jobs import merge_config
from prism_analytic.workload.mean_model import op_means
from prism_analytic.workload.presets import preset_job

# the MLPerf GB200 layout: a 64-GPU replica (tp 4, cp 2, pp 8) per 72-GPU NVL72 rack
MLPERF = {
    "parallelism": {"tp": 4, "cp": 2, "pp": 8, "dp": 16, "vpp": 8, "microbatches": 48},
    "training": {"precision": "fp8", "param_gather_bytes": 1},
}


def _job(**extra):
    over = {k: dict(v) for k, v in MLPERF.items()}
    for sec, kv in extra.items():
        over.setdefault(sec, {}).update(kv)
    return merge_config(preset_job("llama3-405b", 1024, hardware="gb200-nvl72"), over)


def test_default_order_puts_pipeline_traffic_across_racks():
    om = op_means(_job())
    assert om.pp_send.tier == "inter_node"  # pp stride tp*cp*dp = 128 > 72
    dp = {o.name: o for o in om.dp_step}["dp_grad_reduce_scatter"]
    assert dp.tier == "inter_node" and dp.group_size >= 32


def test_pipeline_innermost_keeps_pipeline_traffic_in_the_rack():
    om = op_means(_job(parallelism={"rank_order": "tp-cp-pp-dp"}))
    assert om.pp_send.tier == "intra_node"
    levels = {o.name: o for o in om.dp_step}["dp_grad_reduce_scatter"]
    assert levels.tier == "inter_node" and levels.group_size == 16 * 2  # dp racks x cp


def test_used_part_of_a_domain_and_its_check():
    full = op_means(_job(parallelism={"rank_order": "tp-cp-pp-dp"}))
    used = op_means(
        _job(parallelism={"rank_order": "tp-cp-pp-dp"}, hardware={"nvlink_domain_used": 64})
    )
    assert used.pp_send.tier == full.pp_send.tier == "intra_node"
    with pytest.raises(ConfigError, match="nvlink_domain_used"):
        _job(hardware={"nvlink_domain_used": 80})
    with pytest.raises(ConfigError, match="rank_order"):
        _job(parallelism={"rank_order": "pp-dp-tp-cp"})
