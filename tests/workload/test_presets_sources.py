"""Hardware presets carry their sources; the fitted defaults say where they come from."""

from __future__ import annotations

import dataclasses as dc
import inspect

import pytest

from prism_analytic.workload.config import ConfigError, Efficiency, OverlapConfig, sections
from prism_analytic.workload.mean_model import op_means
from prism_analytic.workload.presets import (
    HARDWARE,
    HARDWARE_SOURCES,
    PRESETS,
    hardware_preset,
    preset_job,
)


def test_every_hardware_preset_names_its_datasheet_network_and_hbm():
    assert set(HARDWARE_SOURCES) == set(HARDWARE)
    for name, src in HARDWARE_SOURCES.items():
        assert "datasheet" in src.datasheet or "as " in src.datasheet, name
        assert src.network and src.efficiency, name
        assert 40 <= src.hbm_capacity_gb <= 300, name
        assert name in PRESETS, name


def test_blackwell_presets_have_the_datasheet_dense_peaks_per_precision():
    b200, gb300 = hardware_preset("b200-sxm-180gb"), hardware_preset("gb300-nvl72")
    # DGX B200: 72 PF FP8 / 144 PF FP4 sparse per 8 GPUs; GB300 NVL72: 1,080 PF dense FP4
    assert (b200.peak_flops.bf16, b200.peak_flops.fp8, b200.peak_flops.fp4) == (
        2.25e15,
        4.5e15,
        9.0e15,
    )
    assert gb300.peak_flops.fp4 == pytest.approx(1080e15 / 72)
    assert gb300.peak_flops.fp8 == hardware_preset("gb200-nvl72").peak_flops.fp8
    assert (b200.nvlink_domain, b200.gpus_per_node) == (8, 8)
    assert (gb300.nvlink_domain, gb300.gpus_per_node) == (72, 4)
    # 800 Gb/s ConnectX-8 against GB200's 400 Gb/s ConnectX-7, the same achieved fraction
    assert gb300.inter_node_bandwidth == 2 * hardware_preset("gb200-nvl72").inter_node_bandwidth


def test_fitted_defaults_name_the_procedure_and_their_interval():
    src = inspect.getsource(sections)
    e, o = Efficiency(), OverlapConfig()
    for value in (e.gemm_fp8, e.gemm_fp4, o.dp):
        assert f"fitted {value}" in src  # "fitted 0.447 (leave-one-system-out ...)"
    assert src.count("validation.fit_defaults") >= 2
    # BF16 is derived from FP8 by the benchmark's ratio, not fitted on its own
    assert e.gemm == pytest.approx(e.gemm_fp8 * 0.697 / 0.501, abs=1e-3)


def test_fp8_attention_runs_at_the_fp8_peak():
    job = preset_job("llama3-8b", 8, hardware="gb200-nvl72")
    fp8 = dc.replace(job, training=dc.replace(job.training, attention_precision="fp8"))

    def attention_s(j):
        return next(o.seconds for o in op_means(j).layer_fwd if o.op_class == "attention")

    hw = job.hardware.peak_flops
    assert attention_s(fp8) == pytest.approx(attention_s(job) * hw.bf16 / hw.fp8)


def test_fp8_attention_on_a_gpu_without_fp8_is_refused_by_name():
    from prism_analytic.workload.jobs import merge_config

    job = preset_job("llama3-8b", 8, hardware="a100-sxm-80gb")
    with pytest.raises(ConfigError, match="training.attention_precision"):
        merge_config(job, {"training": {"attention_precision": "fp8"}})


def test_logits_gemm_stays_bf16_under_low_precision_unless_told_same():
    from prism_analytic.workload.jobs import merge_config

    job = preset_job("llama3-8b", 8, hardware="gb200-nvl72")

    def logits_s(j):
        return next(o.seconds for o in op_means(j).head_fwd if o.name == "logits")

    def qkv_s(j):
        return next(o.seconds for o in op_means(j).layer_fwd if o.name == "qkv_proj")

    fp8 = merge_config(job, {"training": {"precision": "fp8"}})
    same = merge_config(job, {"training": {"precision": "fp8", "logits_precision": "same"}})
    assert fp8.training.logits_precision == "bf16"
    assert logits_s(fp8) == pytest.approx(logits_s(job))  # BF16 whatever the precision
    assert qkv_s(fp8) < qkv_s(job)  # the layers' GEMMs do speed up
    hw, eff = job.hardware, job.hardware.efficiency
    ratio = (hw.peak_flops.bf16 * eff.gemm) / (hw.peak_flops.fp8 * eff.gemm_fp8)
    assert logits_s(same) == pytest.approx(logits_s(job) * ratio)
    with pytest.raises(ConfigError, match="training.logits_precision"):
        merge_config(job, {"training": {"logits_precision": "fp8"}})
