"""Named models, hardware/cluster descriptions and default parallel layouts.

Model architectures are the published ones (sources next to each entry). Hardware
peaks are dense (no 2:4 sparsity) datasheet numbers; network bandwidths are the
achievable NCCL bus bandwidth (about 80-90% of the nominal per-direction link rate,
as nccl-tests reports on these systems), not the marketing bidirectional figure.
The achieved GEMM efficiencies per precision (``gemm_fp8``, ``gemm_fp4``; BF16's
:data:`GEMM_EFFICIENCY` follows FP8 by a GEMM benchmark's ratio) and the data-parallel overlap
are fitted on public MLPerf step logs by ``validation/fit_defaults.py`` (sources and intervals
in ``config/sections.py``); attention and memory efficiencies are a-priori estimates from
public kernel benchmarks. :data:`HARDWARE_SOURCES` names each preset's datasheet.

Layout policy (:func:`default_layout`): each model preset fixes tp, pp, cp, ep, the
schedule and a *target global batch in tokens*; dp = gpus / (tp * pp * cp). The
microbatches per data-parallel rank are the target batch divided over dp, rounded to
the nearest multiple of pp (at least pp, so the pipeline can fill): past
``dp = target / (pp * micro_batch_size)`` the global batch grows with the GPU count
instead of the pipeline starving. GPU counts must be multiples of tp * pp * cp (times
what ep needs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from .config import (
    ConfigError,
    Efficiency,
    HardwareConfig,
    JobConfig,
    ModelConfig,
    MoEConfig,
    OverlapConfig,
    ParallelConfig,
    PeakFlops,
    TrainingConfig,
    config_to_dict,
)
from .config.sections import GEMM_EFFICIENCY

__all__ = [
    "MODELS",
    "HARDWARE",
    "HARDWARE_SOURCES",
    "HardwareSource",
    "GEMM_EFFICIENCY",
    "PRESETS",
    "model_preset",
    "hardware_preset",
    "default_layout",
    "preset_job",
    "preset_dict",
    "allowed_gpu_multiple",
]

# --------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------


def _llama3(name: str, **dims: int) -> ModelConfig:
    # Llama 3: Dubey et al., "The Llama 3 Herd of Models", arXiv 2407.21783, Table 3;
    # vocab 128,256 and untied embeddings per the released configs; pretraining at seq 8192.
    return ModelConfig(name=name, kv_heads=8, vocab=128256, seq_len=8192, **dims)


MODELS: dict[str, ModelConfig] = {
    "llama3-8b": _llama3("llama3-8b", layers=32, hidden=4096, ffn=14336, heads=32),
    "llama3-70b": _llama3("llama3-70b", layers=80, hidden=8192, ffn=28672, heads=64),
    "llama3-405b": _llama3("llama3-405b", layers=126, hidden=16384, ffn=53248, heads=128),
    # GPT-3 175B: Brown et al., "Language Models are Few-Shot Learners", 2020, Table 2.1
    # (96 layers, d_model 12288, 96 heads of 128, ffn 4 d_model, context 2048); GPT-2 BPE
    # vocab 50,257; learned positions, LayerNorm, biases, tied embeddings.
    "gpt3-175b": ModelConfig(
        name="gpt3-175b",
        layers=96,
        hidden=12288,
        ffn=49152,
        heads=96,
        vocab=50257,
        seq_len=2048,
        mlp="gelu",
        norm="layernorm",
        bias=True,
        tied_embeddings=True,
        position="learned",
    ),
    # Mixtral 8x22B: Mistral AI release (2024-04) and its Hugging Face config: 56 layers,
    # hidden 6144, 48 heads / 8 KV heads, 8 experts of ffn 16384, top-2, vocab 32,768;
    # 141B total / 39B active parameters. Training sequence length 4096 is our assumption.
    "mixtral-8x22b": ModelConfig(
        name="mixtral-8x22b",
        layers=56,
        hidden=6144,
        ffn=16384,
        heads=48,
        kv_heads=8,
        vocab=32768,
        seq_len=4096,
        moe=MoEConfig(experts=8, top_k=2, expert_ffn=16384),
    ),
}

# --------------------------------------------------------------------------------------
# Hardware + cluster
# --------------------------------------------------------------------------------------
# GEMM efficiencies: the schema's sourced defaults (config.sections.GEMM_EFFICIENCY...).

# NVIDIA H100 SXM5 80GB datasheet: 989 TFLOP/s dense BF16, 1,979 FP8, HBM3 3.35 TB/s,
# NVLink 4 900 GB/s bidirectional (450 GB/s per direction; nccl-tests AllReduce busbw
# ~360 GB/s on 8 GPUs). Cluster: HGX/DGX nodes of 8, one 400 Gb/s NIC (ConnectX-7
# IB NDR or RoCE) per GPU in a rail-optimised fat tree (50 GB/s nominal, ~45 achieved),
# as in Meta's Llama 3 clusters (Dubey et al. 2024, Sec. 3.3.1).
_H100 = HardwareConfig(
    name="h100-sxm-80gb",
    peak_flops=PeakFlops(bf16=989e12, fp8=1979e12),
    efficiency=Efficiency(gemm=GEMM_EFFICIENCY, attention=0.50, memory=0.80),
    hbm_bandwidth=3.35e12,
    gpus_per_node=8,
    nvlink_domain=8,
    intra_node_bandwidth=360e9,
    intra_node_latency_s=2e-6,
    inter_node_bandwidth=45e9,
    inter_node_latency_s=8e-6,
)

HARDWARE: dict[str, HardwareConfig] = {
    "h100-sxm-80gb": _H100,
    # H200 SXM 141GB: H100 compute with HBM3e 4.8 TB/s; same node and network.
    "h200-sxm-141gb": replace(_H100, name="h200-sxm-141gb", hbm_bandwidth=4.8e12),
    # GB200 NVL72 datasheet: 360 PFLOP/s BF16 and 720 FP8 *with sparsity* per 72 GPUs ->
    # 2.5 / 5 PFLOP/s dense per GPU (FP4: 1,440 PFLOP/s sparse per rack -> 10 dense per GPU,
    # used by NVFP4 GEMMs); HBM3e 8 TB/s; NVLink 5 1.8 TB/s bidirectional
    # (900 GB/s per direction) across the 72-GPU rack; compute trays of 4 GPUs with one
    # 400 Gb/s ConnectX-7 each (as on the MLPerf "Carina" system).
    "gb200-nvl72": replace(
        _H100,
        name="gb200-nvl72",
        peak_flops=PeakFlops(bf16=2.5e15, fp8=5.0e15, fp4=10.0e15),
        hbm_bandwidth=8.0e12,
        gpus_per_node=4,
        nvlink_domain=72,
        intra_node_bandwidth=720e9,
    ),
    # DGX B200 (NVIDIA DGX B200 datasheet, 8 x B200-SXM-180GB): 72 PFLOP/s FP8 and 144
    # FP4 *with sparsity* per 8 GPUs -> 4.5 / 9 PFLOP/s dense per GPU, BF16 2.25 dense;
    # 1,440 GB HBM3e at 64 TB/s -> 180 GB and 8 TB/s per GPU; NVLink 5 1.8 TB/s
    # bidirectional inside the 8-GPU node (same achievable busbw as GB200's NVLink 5);
    # 8 x 400 Gb/s ConnectX-7 (one per GPU), as on University of Florida's HiPerGator
    # (MLPerf v5.1 system.json).
    "b200-sxm-180gb": replace(
        _H100,
        name="b200-sxm-180gb",
        peak_flops=PeakFlops(bf16=2.25e15, fp8=4.5e15, fp4=9.0e15),
        hbm_bandwidth=8.0e12,
        intra_node_bandwidth=720e9,
    ),
    # GB300 NVL72 (NVIDIA GB300 NVL72 datasheet, Blackwell Ultra): 1,080 PFLOP/s dense FP4,
    # 360 FP8 and 180 BF16 per 72 GPUs -> 15 / 5 / 2.5 PFLOP/s dense per GPU; 20 TB HBM3e
    # at 576 TB/s -> 288 GB (279 GB usable) and 8 TB/s per GPU; NVLink 5 1.8 TB/s across
    # the 72-GPU rack; compute trays of 4 GPUs with one 800 Gb/s ConnectX-8 per GPU (as on
    # the MLPerf "Theia" system: 4x ConnectX-8 IB XDR 800 Gb/s per tray), 90 GB/s achieved
    # by the same ~90%-of-nominal rule as the 400 Gb/s NICs above. The doubled attention
    # exponent throughput (SFU) is not modelled: attention efficiency is shared (examined as
    # `python -m validation.fit_defaults --variant sfu`: 3% on GB200's FP8-attention 8B jobs).
    "gb300-nvl72": replace(
        _H100,
        name="gb300-nvl72",
        peak_flops=PeakFlops(bf16=2.5e15, fp8=5.0e15, fp4=15.0e15),
        hbm_bandwidth=8.0e12,
        gpus_per_node=4,
        nvlink_domain=72,
        intra_node_bandwidth=720e9,
        inter_node_bandwidth=90e9,
    ),
    # A100 SXM 80GB datasheet: 312 TFLOP/s dense BF16, no FP8, HBM2e 2.04 TB/s, NVLink 3
    # 600 GB/s bidirectional (300 per direction, ~230 busbw); one 200 Gb/s NIC per GPU
    # (25 GB/s nominal, ~22 achieved). Flash attention reaches a larger fraction of the
    # A100 peak (FlashAttention-2 paper: 50-73% forward) than of H100's.
    "a100-sxm-80gb": replace(
        _H100,
        name="a100-sxm-80gb",
        peak_flops=PeakFlops(bf16=312e12),
        efficiency=Efficiency(gemm=GEMM_EFFICIENCY, attention=0.60, memory=0.80),
        hbm_bandwidth=2.039e12,
        intra_node_bandwidth=230e9,
        inter_node_bandwidth=22e9,
    ),
    # A cross-datacenter cluster description: the H100 cluster above split over two
    # sites joined by 100 Tb/s (12.5 TB/s) of aggregate bandwidth and ~1 ms latency
    # (about 200 km of fibre at 5 us/km). Illustrative, not a published system.
    "h100-2dc": replace(
        _H100, name="h100-2dc", datacenters=2, inter_dc_bandwidth=12.5e12, inter_dc_latency_s=1e-3
    ),
}


@dataclass(frozen=True)
class HardwareSource:
    """Where a hardware preset's numbers come from (the schema holds only the numbers).

    Attributes
    ----------
    datasheet : str
        The vendor document the peaks, HBM and NVLink figures are read from.
    hbm_capacity_gb : float
        HBM per GPU (GB, datasheet); not used by the step model, stated for the reader.
    network : str
        Where the scale-out NIC rate comes from.
    efficiency : str
        Where the achieved efficiencies come from (shared by every preset).
    """

    datasheet: str
    hbm_capacity_gb: float
    network: str
    efficiency: str = "config/sections.py: GEMM_EFFICIENCY* and Efficiency defaults"


_CLUSTER_H100 = "one 400 Gb/s NIC per GPU, rail-optimised (Dubey et al. 2024, Sec. 3.3.1)"
#: Source of every hardware preset's numbers (key: preset name).
HARDWARE_SOURCES: dict[str, HardwareSource] = {
    "h100-sxm-80gb": HardwareSource(
        "NVIDIA H100 Tensor Core GPU datasheet (SXM5)", 80.0, _CLUSTER_H100
    ),
    "h200-sxm-141gb": HardwareSource(
        "NVIDIA H200 Tensor Core GPU datasheet (SXM)", 141.0, _CLUSTER_H100
    ),
    "gb200-nvl72": HardwareSource(
        "NVIDIA GB200 NVL72 datasheet (sparse rack figures halved for dense)",
        186.0,
        "MLPerf v5.0 Carina/Tyche system.json: 4x ConnectX-7 IB NDR 400 Gb/s per 4-GPU tray",
    ),
    "b200-sxm-180gb": HardwareSource(
        "NVIDIA DGX B200 datasheet (sparse figures halved for dense)",
        180.0,
        "MLPerf v5.1 HiPerGator system.json (DGX B200: 8x ConnectX-7 400 Gb/s)",
    ),
    "gb300-nvl72": HardwareSource(
        "NVIDIA GB300 NVL72 datasheet (dense rack figures / 72)",
        288.0,
        "MLPerf v5.1 Theia system.json: 4x ConnectX-8 IB XDR 800 Gb/s per 4-GPU tray",
    ),
    "a100-sxm-80gb": HardwareSource(
        "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB)", 80.0, "one 200 Gb/s NIC per GPU"
    ),
    "h100-2dc": HardwareSource(
        "as h100-sxm-80gb; the 2-site link is illustrative, not a published system",
        80.0,
        _CLUSTER_H100,
    ),
}


# --------------------------------------------------------------------------------------
# Layout rules
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Rule:
    """A model preset's layout rule (positional: tp, pp, schedule, sharding, batch, note)."""

    tp: int
    pp: int
    schedule: str
    sharding: str
    batch_tokens: int  # target global batch
    note: str
    vpp: int = 1
    cp: int = 1
    ep: int = 1
    embedding_in_pipeline_split: bool = False
    micro_batch_size: int = 1
    hardware: str = "h100-sxm-80gb"


_RULES: dict[str, _Rule] = {
    # torchtitan's Llama 3 8B recipe: FSDP only (tp 1, pp 1). 4M-token batch assumed
    # (Llama 2's pretraining batch; Llama 3 does not publish the 8B batch).
    "llama3-8b": _Rule(1, 1, "1f1b", "fsdp", 4 * 2**20, "FSDP, 4M-token batch"),
    # 70B: tp 8 inside the node, pp 4 interleaved x5 (4 layers per chunk). Assumed; batch
    # as 405B (16M tokens).
    "llama3-70b": _Rule(
        8, 4, "interleaved", "zero1", 16 * 2**20, "tp 8, pp 4 x vpp 5, 16M-token batch", vpp=5
    ),
    # 405B: Llama 3 paper Table 4 (tp 8, cp 1, pp 16, 16M-token batch, dp 64 at 8k GPUs
    # and 128 at 16k). Sec. 3.3.2: one layer is dropped from the first and the last stage
    # so that "the first model chunk on the first stage has only the embedding" -> 126 + 2
    # slots at one slot per chunk over 16 stages, i.e. vpp 8.
    "llama3-405b": _Rule(
        tp=8,
        pp=16,
        vpp=8,
        schedule="interleaved",
        sharding="zero1",
        batch_tokens=16 * 2**20,
        embedding_in_pipeline_split=True,
        note="Llama 3 paper layout: tp 8, pp 16, 16M-token batch",
    ),
    # GPT-3 175B as trained by Megatron-LM (Narayanan et al. SC'21): tp 8, pp 8,
    # interleaved; GPT-3's 3.2M-token batch (1536 x 2048).
    "gpt3-175b": _Rule(
        tp=8,
        pp=8,
        vpp=2,
        schedule="interleaved",
        sharding="zero1",
        batch_tokens=1536 * 2048,
        note="Megatron tp 8, pp 8 x vpp 2, 1536 x 2048 batch",
    ),
    # Mixtral 8x22B: no published training layout; tp 4, pp 4 (14 layers per stage), ep 8
    # over the data-parallel ranks, 4M-token batch — assumptions.
    "mixtral-8x22b": _Rule(
        4, 4, "1f1b", "zero1", 4 * 2**20, "tp 4, pp 4, ep 8, 4M-token batch", ep=8
    ),
}

PRESETS: dict[str, str] = {
    "llama3-8b": "Llama 3 8B (dense, GQA 32/8), FSDP, 4M-token batch",
    "llama3-70b": "Llama 3 70B (dense, GQA 64/8), tp 8 x pp 4 (vpp 5), 16M-token batch",
    "llama3-405b": "Llama 3 405B (dense, GQA 128/8), Llama 3 paper layout tp 8 x pp 16 (vpp 8)",
    "gpt3-175b": "GPT-3 175B (MHA, GeLU), Megatron tp 8 x pp 8 (vpp 2), 3.2M-token batch",
    "mixtral-8x22b": "Mixtral 8x22B MoE (8 experts, top-2), tp 4 x pp 4, ep 8",
    "h100-sxm-80gb": "NVIDIA H100 SXM 80GB, 8-GPU NVLink nodes, 400G NIC per GPU",
    "h200-sxm-141gb": "NVIDIA H200 SXM 141GB, 8-GPU NVLink nodes, 400G NIC per GPU",
    "gb200-nvl72": "NVIDIA GB200 NVL72, 72-GPU NVLink racks, 400G NIC per GPU",
    "b200-sxm-180gb": "NVIDIA DGX B200 (B200 SXM 180GB), 8-GPU NVLink nodes, 400G NIC per GPU",
    "gb300-nvl72": "NVIDIA GB300 NVL72 (Blackwell Ultra), 72-GPU NVLink racks, 800G NIC per GPU",
    "a100-sxm-80gb": "NVIDIA A100 SXM 80GB, 8-GPU NVLink nodes, 200G NIC per GPU",
    "h100-2dc": "H100 cluster split over 2 datacenters, 100 Tb/s between them",
}


def _unknown(kind: str, name: Any, names: Any, key: str) -> ConfigError:
    return ConfigError(key, f"unknown {kind} {name!r}; available: {', '.join(sorted(names))}")


def model_preset(name: str) -> ModelConfig:
    """The :class:`ModelConfig` of a model preset (``PRESETS`` lists the names)."""
    if name not in MODELS:
        raise _unknown("model preset", name, MODELS, "job.preset")
    return MODELS[name]


def hardware_preset(name: str) -> HardwareConfig:
    """The :class:`HardwareConfig` of a hardware/cluster preset."""
    if name not in HARDWARE:
        raise _unknown("hardware preset", name, HARDWARE, "job.hardware")
    return HARDWARE[name]


def allowed_gpu_multiple(preset_name: str) -> int:
    """GPU counts a model preset's layout accepts are multiples of this number.

    tp * pp * cp, times what expert parallelism needs (ep must divide dp * cp).
    """
    if preset_name not in _RULES:
        raise _unknown("model preset", preset_name, _RULES, "job.preset")
    r = _RULES[preset_name]
    return r.tp * r.pp * r.cp * (r.ep // math.gcd(r.ep, r.cp))


def default_layout(preset_name: str, gpus: int) -> ParallelConfig:
    """A valid parallel layout of a model preset on ``gpus`` GPUs.

    Parameters
    ----------
    preset_name : str
        A model preset (``llama3-8b``, ``llama3-70b``, ``llama3-405b``, ``gpt3-175b``,
        ``mixtral-8x22b``).
    gpus : int
        A positive multiple of :func:`allowed_gpu_multiple`.

    Returns
    -------
    ParallelConfig
        tp, pp, cp, ep, vpp and schedule from the preset; dp = gpus / (tp pp cp);
        microbatches = target global batch / (dp * micro_batch_size) rounded to the
        nearest multiple of pp, at least pp (1 when pp = 1).

    Raises
    ------
    ConfigError
        ``job.gpus`` when the count is not a positive multiple of the preset's unit.

    Examples
    --------
    >>> lay = default_layout("llama3-405b", 16384)
    >>> lay.tp, lay.pp, lay.dp, lay.microbatches, lay.global_batch
    (8, 16, 128, 16, 2048)
    """
    if preset_name not in _RULES:
        raise _unknown("model preset", preset_name, _RULES, "job.preset")
    r, model = _RULES[preset_name], MODELS[preset_name]
    unit = allowed_gpu_multiple(preset_name)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < unit or gpus % unit:
        near = ""
        if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0:
            lo = max(unit, gpus // unit * unit)
            near = f"; nearest allowed: {lo}" + ("" if lo == gpus else f" or {lo + unit}")
        raise ConfigError(
            "job.gpus",
            f"{preset_name} (tp {r.tp} x pp {r.pp} x cp {r.cp}, ep {r.ep}) needs a positive"
            f" multiple of {unit} GPUs, got {gpus!r}{near}",
        )
    dp = gpus // (r.tp * r.pp * r.cp)
    per_rank = r.batch_tokens / model.seq_len / (dp * r.micro_batch_size)
    if r.pp > 1:
        microbatches = max(r.pp, r.pp * round(per_rank / r.pp))
    else:
        microbatches = max(1, round(per_rank))
    return ParallelConfig(
        tp=r.tp,
        pp=r.pp,
        dp=dp,
        cp=r.cp,
        ep=r.ep,
        vpp=r.vpp,
        schedule=r.schedule,
        sequence_parallel=r.tp > 1,
        sharding=r.sharding,
        microbatches=microbatches,
        micro_batch_size=r.micro_batch_size,
        embedding_in_pipeline_split=r.embedding_in_pipeline_split,
        overlap=OverlapConfig(),
    )


def preset_job(preset_name: str, gpus: int, *, hardware: str | None = None) -> JobConfig:
    """A complete :class:`JobConfig` from a model preset, on its default (or given) hardware.

    Examples
    --------
    >>> job = preset_job("llama3-405b", 16384)
    >>> job.gpus, job.hardware.name
    (16384, 'h100-sxm-80gb')
    """
    layout = default_layout(preset_name, gpus)
    hw = hardware_preset(hardware or _RULES[preset_name].hardware)
    return JobConfig(
        name=f"{preset_name}@{gpus}",
        model=MODELS[preset_name],
        parallelism=layout,
        hardware=hw,
        training=TrainingConfig(),
    )


def preset_dict(preset_name: str, gpus: int | None) -> dict[str, Any]:
    """TOML-shaped mapping of a preset (for :func:`~.jobs.load_config` merging).

    Without ``gpus`` the mapping has no ``parallelism`` section.
    """
    if preset_name not in MODELS:
        raise _unknown("model preset", preset_name, MODELS, "job.preset")
    out: dict[str, Any] = {
        "model": config_to_dict(MODELS[preset_name]),
        "hardware": config_to_dict(HARDWARE[_RULES[preset_name].hardware]),
    }
    if gpus is not None:
        out["parallelism"] = config_to_dict(default_layout(preset_name, gpus))
    return out
