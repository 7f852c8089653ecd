"""The per-GPU memory estimate against published numbers it must reproduce."""

from __future__ import annotations

import pytest

from prism_analytic.sweep.memory import (
    layer_activation_bytes,
    memory_estimate,
    model_state_bytes,
)
from prism_analytic.workload.config import ConfigError
from prism_analytic.workload.jobs import build_job, merge_config


@pytest.mark.parametrize(
    "sharding, gb",
    # ZeRO (Rajbhandari et al., SC'20), Figure 1: Psi = 7.5B, K = 12, Nd = 64, FP16 grads
    [("none", 120.0), ("zero1", 31.4), ("zero2", 16.6), ("fsdp", 1.9)],
)
def test_model_state_matches_the_zero_paper(sharding, gb):
    parts = model_state_bytes(7.5e9, 64, sharding, grad_bytes=2)
    assert sum(parts.values()) / 1e9 == pytest.approx(gb, abs=0.05)


@pytest.mark.parametrize("d", [1, 8, 64, 512])
def test_model_state_matches_megatron_distributed_optimizer_table(d):
    # Megatron-LM docs (distributed optimizer): bf16 params with fp32 grads take 18 bytes per
    # parameter without it and 6 + 12/d with it
    assert sum(model_state_bytes(1.0, d, "none").values()) == 18
    assert sum(model_state_bytes(1.0, d, "zero1").values()) == pytest.approx(6 + 12 / d)


def _gpt3(tp: int, sp: bool):
    job = build_job("gpt3-175b", 1024)
    return merge_config(
        job, {"parallelism": {"tp": tp, "sequence_parallel": sp}, "training": {"recompute": "none"}}
    )


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_activations_match_korthikanti(tp):
    # Korthikanti et al. 2023, Table 2 with flash attention (no 5as/h term): per layer
    # 34 s b h / t with sequence parallelism, s b h (10 + 24 / t) without
    m = _gpt3(tp, True).model
    sbh = m.seq_len * 1 * m.hidden
    saved, layer_input = layer_activation_bytes(_gpt3(tp, True))
    assert saved == pytest.approx(34 * sbh / tp)
    assert layer_input == pytest.approx(2 * sbh / tp)
    saved, _ = layer_activation_bytes(_gpt3(tp, False))
    assert saved == pytest.approx(sbh * (10 + 24 / tp))


def test_memory_moves_the_right_way():
    base = build_job("llama3-405b", 16384)
    full = merge_config(base, {"training": {"recompute": "full"}})
    cp2 = merge_config(base, {"parallelism": {"cp": 2}})
    e0, e_full, e_cp = (memory_estimate(j) for j in (base, full, cp2))
    assert e_full.activations < e0.activations / 5
    assert e_cp.activations == pytest.approx(e0.activations / 2, rel=0.01)
    assert e0.weights == e_full.weights
    # tp 1 pp 1 puts all 405B parameters' weights and FP32 gradients on every GPU
    flat = merge_config(base, {"parallelism": {"tp": 1, "pp": 1, "vpp": 1, "schedule": "1f1b"}})
    assert not memory_estimate(flat).fits
    assert memory_estimate(flat).weights / 1e9 > 800


def test_unknown_capacity_needs_an_override():
    job = merge_config(build_job("llama3-8b", 64), {"hardware": {"name": "my-gpu"}})
    with pytest.raises(ConfigError, match="--memory-gb"):
        memory_estimate(job)
    assert memory_estimate(job, capacity_gb=96).capacity == 96e9
