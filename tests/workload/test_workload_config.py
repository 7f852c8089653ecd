"""Job configuration: TOML loading, strict validation, layout rules, merging."""

from __future__ import annotations

import dataclasses

import pytest

from prism_analytic.workload.config import (
    ConfigError,
    JobConfig,
    LayoutWarning,
    ModelConfig,
    NetworkVariability,
    ParallelConfig,
    RegimeConfig,
    TierNoise,
    dump_toml,
    validate_layout,
)
from prism_analytic.workload.jobs import load_config, merge_config
from prism_analytic.workload.presets import hardware_preset, model_preset, preset_job

PRESET_405B = """
[job]
preset = "llama3-405b"
gpus = 16384
"""


def _raises(source, key: str, *fragments: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(source)
    err = info.value
    assert err.key == key, str(err)
    assert str(err).startswith(key + ":"), str(err)
    for frag in fragments:
        assert frag in str(err), str(err)
    return err


def _with(section: str, body: str) -> str:
    return PRESET_405B + f"\n[{section}]\n{body}\n"


# --------------------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------------------
def test_preset_toml_gives_the_paper_layout():
    job = load_config(PRESET_405B)
    p = job.parallelism
    assert (p.tp, p.pp, p.dp, p.cp, p.vpp) == (8, 16, 128, 1, 8)
    assert job.gpus == 16384
    assert job.name == "llama3-405b@16384"
    assert job.model == model_preset("llama3-405b")


def test_round_trip_through_toml(tmp_path):
    job = preset_job("mixtral-8x22b", 1024)
    path = tmp_path / "job.toml"
    path.write_text(dump_toml(job))
    assert load_config(path) == job
    assert load_config(str(path)) == job


def test_mapping_source_and_full_sections():
    data = {
        "model": {
            "layers": 4,
            "hidden": 256,
            "ffn": 512,
            "heads": 4,
            "vocab": 1000,
            "seq_len": 128,
        },
        "parallelism": {"tp": 2, "dp": 2},
        "hardware": {
            "peak_flops": {"bf16": 1e15},
            "hbm_bandwidth": 2e12,
            "gpus_per_node": 8,
            "nvlink_domain": 8,
            "intra_node_bandwidth": 3e11,
            "inter_node_bandwidth": 4e10,
        },
    }
    job = load_config(data)
    assert job.gpus == 4
    assert job.model.kv_heads == 4 and job.model.head_dim == 64


def test_overriding_tp_rederives_dp():
    job = load_config(_with("parallelism", "tp = 4"))
    assert job.parallelism.tp == 4 and job.parallelism.dp == 256 and job.gpus == 16384


def test_hardware_preset_by_name():
    src = PRESET_405B.replace("gpus = 16384", 'gpus = 16384\nhardware = "h200-sxm-141gb"')
    job = load_config(src)
    assert job.hardware == hardware_preset("h200-sxm-141gb")


def test_merge_config_preset_plus_overrides():
    base = preset_job("llama3-70b", 1024)
    job = merge_config(base, "[parallelism]\npp = 8\nvpp = 2\n[training]\nrecompute = 'full'\n")
    assert job.parallelism.pp == 8 and job.parallelism.dp == 16 and job.gpus == 1024
    assert job.training.recompute == "full"
    assert job.model == base.model
    # overriding variability keeps the other tiers' defaults
    job2 = merge_config(base, {"variability": {"network": {"inter_node": {"sigma": 0.5}}}})
    assert job2.variability.network.inter_node.sigma == 0.5
    assert job2.variability.network.intra_node == base.variability.network.intra_node


def test_merge_config_explicit_dp_changes_gpu_count():
    job = merge_config(preset_job("llama3-405b", 16384), {"parallelism": {"dp": 64}})
    assert job.gpus == 8192 and job.parallelism.dp == 64


def test_merge_config_rejects_preset_in_overrides():
    with pytest.raises(ConfigError, match=r"^job.preset:"):
        merge_config(preset_job("llama3-8b", 8), '[job]\npreset = "llama3-70b"\n')


def test_partial_nested_table_keeps_that_fields_defaults():
    job = load_config(_with("variability.network.inter_node", "sigma = 0.5"))
    tier = job.variability.network.inter_node
    default = NetworkVariability().inter_node
    assert tier.sigma == 0.5
    assert (tier.tail_factor, tier.tail_prob) == (default.tail_factor, default.tail_prob)


def test_configs_are_frozen():
    job = preset_job("llama3-8b", 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.parallelism.tp = 2  # type: ignore[misc]


# --------------------------------------------------------------------------------------
# bad input: every message names the full key
# --------------------------------------------------------------------------------------
def test_unknown_key_is_rejected():
    _raises(_with("parallelism", "tpp = 2"), "parallelism.tpp", "unknown key", "tp")


def test_unknown_nested_key_is_rejected():
    _raises(
        _with("variability.network.inter_node", "jitter = 1.0"),
        "variability.network.inter_node.jitter",
        "unknown key",
        "sigma",
    )


def test_unknown_section_is_rejected():
    _raises(PRESET_405B + "\n[cluster]\nx = 1\n", "cluster", "unknown section")


def test_unknown_job_key_is_rejected():
    _raises("[job]\nnodes = 4\n", "job.nodes", "unknown key")


def test_string_where_integer_expected():
    _raises(_with("parallelism", 'tp = "8"'), "parallelism.tp", "integer", "str")


def test_float_where_integer_expected():
    _raises(_with("parallelism", "tp = 8.0"), "parallelism.tp", "integer", "float")


def test_bool_where_integer_expected():
    _raises(_with("parallelism", "tp = true"), "parallelism.tp", "integer")


def test_bool_where_number_expected():
    _raises(_with("hardware", "hbm_bandwidth = true"), "hardware.hbm_bandwidth", "number")


def test_number_where_bool_expected():
    _raises(
        _with("parallelism", "sequence_parallel = 1"),
        "parallelism.sequence_parallel",
        "true or false",
    )


@pytest.mark.parametrize(
    "key", ["tp", "pp", "cp", "ep", "vpp", "microbatches", "micro_batch_size", "dp"]
)
def test_non_positive_parallel_sizes(key):
    _raises(_with("parallelism", f"{key} = 0"), f"parallelism.{key}", ">= 1")


@pytest.mark.parametrize(
    "key", ["layers", "hidden", "ffn", "heads", "kv_heads", "vocab", "seq_len"]
)
def test_non_positive_model_sizes(key):
    _raises(_with("model", f"{key} = -1"), f"model.{key}", ">= 1")


def test_nan_is_rejected():
    _raises(_with("hardware", "hbm_bandwidth = nan"), "hardware.hbm_bandwidth", "finite")


def test_infinity_is_rejected():
    _raises(_with("hardware.efficiency", "gemm = inf"), "hardware.efficiency.gemm", "finite")


@pytest.mark.parametrize(
    "key", ["intra_node_bandwidth", "inter_node_bandwidth", "inter_dc_bandwidth"]
)
def test_negative_bandwidth_is_rejected(key):
    _raises(_with("hardware", f"{key} = -1.0"), f"hardware.{key}", "> 0")


def test_negative_latency_is_rejected():
    _raises(
        _with("hardware", "inter_node_latency_s = -1e-6"), "hardware.inter_node_latency_s", ">= 0"
    )


def test_zero_peak_is_rejected():
    _raises(_with("hardware.peak_flops", "bf16 = 0.0"), "hardware.peak_flops.bf16", "> 0")


def test_efficiency_above_one_is_rejected():
    _raises(_with("hardware.efficiency", "memory = 1.5"), "hardware.efficiency.memory", "<= 1")


def test_overlap_out_of_range():
    _raises(_with("parallelism.overlap", "tp = 1.5"), "parallelism.overlap.tp", "<= 1")


def test_bad_schedule_names_the_choices():
    _raises(
        _with("parallelism", 'schedule = "zero-bubble"'),
        "parallelism.schedule",
        "'gpipe'",
        "'1f1b'",
        "'interleaved'",
    )


def test_bad_sharding_names_the_choices():
    _raises(_with("parallelism", 'sharding = "zero3"'), "parallelism.sharding", "'fsdp'")


def test_bad_precision():
    _raises(_with("training", 'precision = "fp4"'), "training.precision", "'bf16'", "'fp8'")


def test_nested_tier_noise_is_named_by_its_path():
    _raises(
        _with("variability.network.inter_node", "sigma = -0.1"),
        "variability.network.inter_node.sigma",
        ">= 0",
    )


def test_tail_factor_below_one():
    _raises(
        _with("variability.network.cross_dc", "tail_factor = 0.5"),
        "variability.network.cross_dc.tail_factor",
        ">= 1",
    )


def test_regime_probabilities_must_sum_to_one():
    _raises(
        _with("variability.regimes", "probabilities = [0.5, 0.4]\nslowdowns = [1.0, 2.0]"),
        "variability.regimes.probabilities",
        "sum to 1",
    )


def test_regime_lengths_must_match():
    _raises(
        _with("variability.regimes", "probabilities = [0.5, 0.5]\nslowdowns = [1.0]"),
        "variability.regimes.slowdowns",
        "one entry per probability",
    )


def test_regime_entries_are_checked():
    _raises(
        _with("variability.regimes", "probabilities = [1.0]\nslowdowns = [-1.0]"),
        "variability.regimes.slowdowns[0]",
        "> 0",
    )


def test_spatial_slow_fraction_above_one():
    _raises(
        _with("variability.spatial", "slow_fraction = 2.0"),
        "variability.spatial.slow_fraction",
        "<= 1",
    )


def test_hiccup_probability_negative():
    _raises(
        _with("variability.hiccups", "probability = -0.1"),
        "variability.hiccups.probability",
        ">= 0",
    )


def test_kv_heads_must_divide_heads():
    _raises(_with("model", "kv_heads = 7"), "model.kv_heads", "divide model.heads")


def test_top_k_above_experts():
    src = "[job]\npreset = 'mixtral-8x22b'\ngpus = 128\n[model.moe]\ntop_k = 9\n"
    _raises(src, "model.moe.top_k", "<= model.moe.experts")


def test_missing_required_key():
    data = {
        "model": {"hidden": 256, "ffn": 512, "heads": 4, "vocab": 1000, "seq_len": 128},
        "parallelism": {},
        "hardware": {
            "peak_flops": {"bf16": 1e15},
            "hbm_bandwidth": 2e12,
            "gpus_per_node": 8,
            "nvlink_domain": 8,
            "intra_node_bandwidth": 3e11,
            "inter_node_bandwidth": 4e10,
        },
    }
    _raises(data, "model.layers", "is required")
    del data["hardware"]["peak_flops"]
    data["model"]["layers"] = 2
    _raises(data, "hardware.peak_flops", "is required")


def test_missing_sections():
    _raises("[job]\nname = 'x'\n", "model", "section is required")
    _raises("[job]\npreset = 'llama3-8b'\n", "parallelism", "job.gpus")


def test_section_of_wrong_type():
    _raises({"model": 3}, "model", "table")


def test_invalid_toml():
    _raises("[parallelism\ntp = 1", "<toml>", "not valid TOML")


def test_missing_file(tmp_path):
    _raises(tmp_path / "absent.toml", "<file>", "absent.toml")


def test_unknown_preset_names_available():
    _raises("[job]\npreset = 'llama9'\ngpus = 8\n", "job.preset", "llama3-405b")


def test_gpus_not_a_multiple_of_model_parallel():
    _raises("[job]\npreset = 'llama3-405b'\ngpus = 1000\n", "job.gpus", "multiple of 128")


def test_python_construction_is_validated_too():
    with pytest.raises(ConfigError, match=r"^parallelism\.tp: "):
        ParallelConfig(tp=0)
    with pytest.raises(ConfigError, match=r"^model\.heads: .*integer"):
        ModelConfig(layers=1, hidden=8, ffn=8, heads=2.5, vocab=8, seq_len=8)
    with pytest.raises(ConfigError, match=r"^variability\.regimes\.probabilities"):
        RegimeConfig(probabilities=(0.3,), slowdowns=(1.0,))
    with pytest.raises(ConfigError, match="sigma"):
        TierNoise(sigma=float("nan"))


def test_vpp_needs_interleaved():
    with pytest.raises(ConfigError, match=r"^parallelism\.vpp: .*interleaved"):
        ParallelConfig(pp=4, vpp=2, schedule="1f1b")
    with pytest.raises(ConfigError, match=r"^parallelism\.vpp: "):
        ParallelConfig(pp=4, vpp=1, schedule="interleaved")
    with pytest.raises(ConfigError, match=r"^parallelism\.schedule: "):
        ParallelConfig(pp=1, vpp=2, schedule="interleaved")


# --------------------------------------------------------------------------------------
# layout rules
# --------------------------------------------------------------------------------------
def _job(**par) -> JobConfig:
    base = preset_job("llama3-405b", 16384)
    return dataclasses.replace(base, parallelism=dataclasses.replace(base.parallelism, **par))


def _layout_raises(job: JobConfig, key: str, *fragments: str, gpus: int | None = None) -> None:
    with pytest.raises(ConfigError) as info:
        validate_layout(job, gpus)
    assert info.value.key == key, str(info.value)
    for frag in fragments:
        assert frag in str(info.value), str(info.value)


def test_valid_layout_has_no_warnings():
    assert validate_layout(preset_job("llama3-405b", 16384), 16384) == ()


def test_gpu_count_must_match_product():
    _layout_raises(_job(), "parallelism.dp", "16384", "set dp = 64", gpus=8192)


def test_tp_must_divide_heads_and_kv_heads():
    _layout_raises(_job(tp=16, dp=64), "parallelism.tp", "model.kv_heads")
    _layout_raises(_job(tp=3), "parallelism.tp", "model.heads")


def test_layers_must_split_over_chunks():
    _layout_raises(
        _job(embedding_in_pipeline_split=False), "parallelism.pp", "embedding_in_pipeline_split"
    )
    _layout_raises(_job(pp=5, vpp=2), "parallelism.pp", "pp*vpp")


def test_interleaved_microbatches_multiple_of_pp():
    _layout_raises(_job(microbatches=24), "parallelism.microbatches", "multiple of pp (16)")
    _layout_raises(_job(microbatches=8), "parallelism.microbatches", "multiple of pp")


def test_1f1b_few_microbatches_warns():
    job = dataclasses.replace(preset_job("mixtral-8x22b", 128))
    job = dataclasses.replace(job, parallelism=dataclasses.replace(job.parallelism, microbatches=2))
    with pytest.warns(LayoutWarning, match="bubble"):
        msgs = validate_layout(job)
    assert any("parallelism.microbatches" in m for m in msgs)


def test_cp_needs_divisible_sequence():
    job = _job(cp=3, dp=1, microbatches=16)
    _layout_raises(job, "parallelism.cp", "model.seq_len")


def test_ep_rules():
    _layout_raises(_job(ep=2), "parallelism.ep", "MoE")
    moe = preset_job("mixtral-8x22b", 128)
    bad = dataclasses.replace(moe, parallelism=dataclasses.replace(moe.parallelism, ep=3))
    _layout_raises(bad, "parallelism.ep", "model.moe.experts")
    bad = dataclasses.replace(moe, parallelism=dataclasses.replace(moe.parallelism, dp=4))
    _layout_raises(bad, "parallelism.ep", "dp*cp")


def test_datacenters_must_divide_dp():
    job = preset_job("llama3-405b", 384)  # dp 3
    job = dataclasses.replace(job, hardware=hardware_preset("h100-2dc"))
    _layout_raises(job, "hardware.datacenters", "dp (3)")


def test_fp8_needs_fp8_peak():
    job = dataclasses.replace(
        preset_job("gpt3-175b", 64), hardware=hardware_preset("a100-sxm-80gb")
    )
    job = dataclasses.replace(job, training=dataclasses.replace(job.training, precision="fp8"))
    _layout_raises(job, "training.precision", "peak_flops.fp8")


def test_tp_beyond_nvlink_domain_warns():
    job = _job(tp=16, dp=64)
    job = dataclasses.replace(job, model=dataclasses.replace(job.model, kv_heads=16))
    with pytest.warns(LayoutWarning, match="nvlink_domain"):
        msgs = validate_layout(job)
    assert any("parallelism.tp" in m for m in msgs)


def test_sequence_parallel_without_tp_warns():
    job = preset_job("llama3-8b", 8)
    job = dataclasses.replace(
        job, parallelism=dataclasses.replace(job.parallelism, sequence_parallel=True)
    )
    with pytest.warns(LayoutWarning, match="sequence_parallel"):
        validate_layout(job)


def test_load_config_runs_layout_checks():
    _raises(_with("parallelism", "microbatches = 20"), "parallelism.microbatches")
    job = load_config(_with("parallelism", "microbatches = 20"), check_layout=False)
    assert job.parallelism.microbatches == 20
