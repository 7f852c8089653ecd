"""Job configuration: model, parallelism, hardware/cluster, training and variability.

Every section is a frozen dataclass that validates itself on construction, so a
configuration built in Python is held to the same rules as one read from TOML.
:func:`load_config` reads TOML (or a mapping), rejects unknown keys, wrong types,
non-finite numbers and out-of-range values with a :class:`ConfigError` whose
message names the full key (``parallelism.tp``) and what is allowed.
:func:`validate_layout` checks the cross-section rules (Megatron-LM's) that tie the
parallel layout to the model and the GPU count.

TOML layout (every section optional except what the job needs)::

    [job]
    name = "my-run"
    preset = "llama3-405b"      # start from a model preset and its default layout
    hardware = "h100-sxm-80gb"  # start from a hardware preset
    gpus = 16384                # derive dp (and the preset's layout) from this

    [model]                     # keys of ModelConfig; [model.moe] for MoE models
    [parallelism]               # keys of ParallelConfig; [parallelism.overlap]
    [hardware]                  # HardwareConfig; [hardware.peak_flops], [hardware.efficiency]
    [training]                  # keys of TrainingConfig
    [variability.spatial]       # and .temporal, .network.{intra_node,inter_node,cross_dc},
                                # .regimes, .hiccups

Units: seconds (``*_s``), bytes, bytes/s, FLOP/s.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import tomllib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

__all__ = [
    "ConfigError",
    "LayoutWarning",
    "ModelConfig",
    "MoEConfig",
    "OverlapConfig",
    "ParallelConfig",
    "PeakFlops",
    "Efficiency",
    "HardwareConfig",
    "TrainingConfig",
    "SpatialVariability",
    "TemporalVariability",
    "TierNoise",
    "NetworkVariability",
    "RegimeConfig",
    "HiccupConfig",
    "VariabilityConfig",
    "JobConfig",
    "load_config",
    "merge_config",
    "validate_layout",
    "config_to_dict",
    "dump_toml",
]


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range.

    Attributes
    ----------
    key : str
        Full dotted key of the offending value, e.g. ``"parallelism.tp"``.
    """

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.detail = message
        super().__init__(f"{key}: {message}")


class LayoutWarning(UserWarning):
    """A layout that is valid but likely slow (e.g. tp spanning NVLink domains)."""


# --------------------------------------------------------------------------------------
# Field rules. Each field carries its kind and range in `metadata`, so one checker serves
# both Python construction (__post_init__) and TOML loading (which adds unknown-key checks).
# --------------------------------------------------------------------------------------
def _f(
    default: Any = dataclasses.MISSING,
    *,
    kind: str,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: tuple[Any, ...] | None = None,
    optional: bool = False,
    section: type | None = None,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    meta = {
        "kind": kind, "gt": gt, "ge": ge, "le": le, "lt": lt,
        "choices": choices, "optional": optional, "section": section,
    }
    if default_factory is not dataclasses.MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def _allowed(meta: Mapping[str, Any]) -> str:
    parts = []
    if meta["choices"] is not None:
        return "one of " + ", ".join(repr(c) for c in meta["choices"])
    if meta["gt"] is not None:
        parts.append(f"> {meta['gt']:g}")
    if meta["ge"] is not None:
        parts.append(f">= {meta['ge']:g}")
    if meta["lt"] is not None:
        parts.append(f"< {meta['lt']:g}")
    if meta["le"] is not None:
        parts.append(f"<= {meta['le']:g}")
    return " and ".join(parts) if parts else "any value"


def _coerce(value: Any, meta: Mapping[str, Any], key: str) -> Any:
    """Check one value's type and range; return it normalised (int -> float for floats)."""
    kind = meta["kind"]
    if value is None:
        if meta["optional"]:
            return None
        raise ConfigError(key, f"is required ({kind}, {_allowed(meta)})")
    if kind == "section":
        cls = meta["section"]
        if not isinstance(value, cls):
            raise ConfigError(key, f"must be a {cls.__name__}, got {type(value).__name__}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(key, f"must be true or false, got {type(value).__name__} {value!r}")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(key, f"must be a string, got {type(value).__name__} {value!r}")
        if meta["choices"] is not None and value not in meta["choices"]:
            raise ConfigError(key, f"got {value!r}; allowed: {_allowed(meta)}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ConfigError(
                key, f"must be an integer ({_allowed(meta)}), got {type(value).__name__} {value!r}"
            )
        out: Any = int(value)
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ConfigError(
                key, f"must be a number ({_allowed(meta)}), got {type(value).__name__} {value!r}"
            )
        out = float(value)
        if not math.isfinite(out):
            raise ConfigError(key, f"must be finite ({_allowed(meta)}), got {out!r}")
    elif kind == "floats":
        if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
            raise ConfigError(key, f"must be a list of numbers, got {type(value).__name__}")
        items = list(value)
        if not items:
            raise ConfigError(key, "must be a non-empty list of numbers")
        sub = dict(meta, kind="float")
        return tuple(_coerce(v, sub, f"{key}[{i}]") for i, v in enumerate(items))
    else:  # pragma: no cover - programming error
        raise AssertionError(kind)
    if meta["choices"] is not None and out not in meta["choices"]:
        raise ConfigError(key, f"got {out!r}; allowed: {_allowed(meta)}")
    bad = (
        (meta["gt"] is not None and not out > meta["gt"])
        or (meta["ge"] is not None and not out >= meta["ge"])
        or (meta["lt"] is not None and not out < meta["lt"])
        or (meta["le"] is not None and not out <= meta["le"])
    )
    if bad:
        raise ConfigError(key, f"must be {_allowed(meta)}, got {out!r}")
    return out


class _Section:
    """Mixin: validates and normalises every rule-carrying field after construction."""

    _SECTION: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if "kind" not in f.metadata:
                continue
            value = _coerce(getattr(self, f.name), f.metadata, f"{self._SECTION}.{f.name}")
            object.__setattr__(self, f.name, value)
        self._check()

    def _check(self) -> None:
        """Cross-field rules inside one section (override)."""

    def _err(self, name: str, message: str) -> ConfigError:
        return ConfigError(f"{self._SECTION}.{name}", message)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (TOML-shaped; ``None`` values omitted)."""
        return config_to_dict(self)


# --------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MoEConfig(_Section):
    """Mixture-of-experts MLP replacing the dense MLP in every layer.

    Parameters
    ----------
    experts : int
        Routed experts per layer.
    top_k : int
        Experts each token is routed to (1 <= top_k <= experts).
    expert_ffn : int
        Hidden size of one expert's MLP (SwiGLU/GeLU per ``ModelConfig.mlp``).
    """

    _SECTION: ClassVar[str] = "model.moe"
    experts: int = _f(kind="int", ge=1)
    top_k: int = _f(kind="int", ge=1)
    expert_ffn: int = _f(kind="int", ge=1)

    def _check(self) -> None:
        if self.top_k > self.experts:
            raise self._err(
                "top_k", f"must be <= model.moe.experts ({self.experts}), got {self.top_k}"
            )


@dataclass(frozen=True)
class ModelConfig(_Section):
    """Decoder-only transformer architecture.

    Parameters
    ----------
    name : str
        Label.
    layers, hidden, ffn, heads : int
        Transformer layers, model width, dense-MLP hidden size, query heads.
    kv_heads : int, optional
        Key/value heads (grouped-query attention); defaults to ``heads`` (MHA).
    vocab, seq_len : int
        Vocabulary size and training sequence length (tokens).
    head_dim : int, optional
        Defaults to ``hidden // heads``.
    mlp : {"swiglu", "gelu"}
        SwiGLU (3 matrices, Llama) or GeLU (2 matrices, GPT-3).
    norm : {"rmsnorm", "layernorm"}
    bias : bool
        Linear layers carry biases (GPT-3 yes, Llama no).
    tied_embeddings : bool
        Output projection shares the input embedding matrix.
    position : {"rope", "learned"}
        Learned absolute position embeddings add ``seq_len * hidden`` parameters.
    moe : MoEConfig, optional
        Makes every layer's MLP a mixture of experts.
    """

    _SECTION: ClassVar[str] = "model"
    layers: int = _f(kind="int", ge=1)
    hidden: int = _f(kind="int", ge=1)
    ffn: int = _f(kind="int", ge=1)
    heads: int = _f(kind="int", ge=1)
    vocab: int = _f(kind="int", ge=1)
    seq_len: int = _f(kind="int", ge=1)
    kv_heads: int | None = _f(None, kind="int", ge=1, optional=True)
    head_dim: int | None = _f(None, kind="int", ge=1, optional=True)
    name: str = _f("custom", kind="str")
    mlp: str = _f("swiglu", kind="str", choices=("swiglu", "gelu"))
    norm: str = _f("rmsnorm", kind="str", choices=("rmsnorm", "layernorm"))
    bias: bool = _f(False, kind="bool")
    tied_embeddings: bool = _f(False, kind="bool")
    position: str = _f("rope", kind="str", choices=("rope", "learned"))
    moe: MoEConfig | None = _f(None, kind="section", section=MoEConfig, optional=True)

    def _check(self) -> None:
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.heads % self.kv_heads:
            raise self._err(
                "kv_heads", f"must divide model.heads ({self.heads}), got {self.kv_heads}"
            )
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise self._err(
                    "heads",
                    f"must divide model.hidden ({self.hidden}) unless model.head_dim is set,"
                    f" got {self.heads}",
                )
            object.__setattr__(self, "head_dim", self.hidden // self.heads)


# --------------------------------------------------------------------------------------
# Parallelism
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OverlapConfig(_Section):
    """How much communication hides behind concurrent compute, per parallel dimension.

    Each value f in [0, 1] is an overlap efficiency: a communication of c seconds that
    could run under a compute window of w seconds is exposed for ``max(0, c - f * w)``.
    The window per dimension is defined in :mod:`prism_analytic.workload.mean_model`.
    Defaults follow Megatron-Core: TP communication blocks unless ``--tp-comm-overlap``
    (0); context-parallel ring attention overlaps the KV exchange with the attention
    kernel (1); MoE all-to-all blocks (0); ``overlap_grad_reduce``/``overlap_param_gather``
    hide data-parallel traffic behind backward/forward (1); ``overlap_p2p_comm`` hides
    steady-state pipeline sends (1; fill and drain hops are never hidden).
    """

    _SECTION: ClassVar[str] = "parallelism.overlap"
    tp: float = _f(0.0, kind="float", ge=0.0, le=1.0)
    cp: float = _f(1.0, kind="float", ge=0.0, le=1.0)
    ep: float = _f(0.0, kind="float", ge=0.0, le=1.0)
    dp: float = _f(1.0, kind="float", ge=0.0, le=1.0)
    pp: float = _f(1.0, kind="float", ge=0.0, le=1.0)


_SCHEDULES = ("gpipe", "1f1b", "interleaved")
_SHARDING = ("none", "zero1", "zero2", "fsdp")


@dataclass(frozen=True)
class ParallelConfig(_Section):
    """Parallel layout (Megatron-LM / torchtitan vocabulary).

    Ranks are laid out in Megatron's default order tp (fastest) - cp - dp - pp, so a
    tp group is contiguous (inside a node when tp <= gpus_per_node) and pp is outermost.
    Expert parallelism folds over the dp x cp ranks (Megatron-Core MoE, expert tp = tp).

    Parameters
    ----------
    tp, pp, dp, cp, ep : int
        Tensor, pipeline, data, context and expert parallel sizes. GPUs = tp*pp*dp*cp.
    vpp : int
        Virtual pipeline stages (model chunks) per pipeline rank; > 1 only for the
        ``"interleaved"`` schedule.
    schedule : {"gpipe", "1f1b", "interleaved"}
    sequence_parallel : bool
        Megatron sequence parallelism (norms/dropout split over tp; AllReduce becomes
        AllGather + ReduceScatter).
    sharding : {"none", "zero1", "zero2", "fsdp"}
        Data-parallel state sharding (Megatron distributed optimizer = zero1).
    microbatches : int
        Microbatches per optimizer step per data-parallel rank (gradient accumulation).
    micro_batch_size : int
        Sequences per microbatch.
    embedding_in_pipeline_split : bool
        Count the embedding and the loss as one layer slot each when splitting layers
        over pipeline chunks (Megatron ``account_for_embedding/loss_in_pipeline_split``;
        Llama 3 405B drops one layer from the first and the last stage the same way).
    overlap : OverlapConfig
    """

    _SECTION: ClassVar[str] = "parallelism"
    tp: int = _f(1, kind="int", ge=1)
    pp: int = _f(1, kind="int", ge=1)
    dp: int = _f(1, kind="int", ge=1)
    cp: int = _f(1, kind="int", ge=1)
    ep: int = _f(1, kind="int", ge=1)
    vpp: int = _f(1, kind="int", ge=1)
    schedule: str = _f("1f1b", kind="str", choices=_SCHEDULES)
    sequence_parallel: bool = _f(False, kind="bool")
    sharding: str = _f("zero1", kind="str", choices=_SHARDING)
    microbatches: int = _f(1, kind="int", ge=1)
    micro_batch_size: int = _f(1, kind="int", ge=1)
    embedding_in_pipeline_split: bool = _f(False, kind="bool")
    overlap: OverlapConfig = _f(
        kind="section", section=OverlapConfig, default_factory=OverlapConfig
    )

    def _check(self) -> None:
        if self.schedule == "interleaved":
            if self.pp < 2:
                raise self._err("schedule", "'interleaved' needs parallelism.pp >= 2")
            if self.vpp < 2:
                raise self._err("vpp", f"schedule 'interleaved' needs vpp >= 2, got {self.vpp}")
        elif self.vpp != 1:
            raise self._err(
                "vpp", f"must be 1 unless schedule is 'interleaved' (schedule {self.schedule!r})"
            )

    @property
    def gpus(self) -> int:
        """GPUs the layout occupies: tp * pp * dp * cp."""
        return self.tp * self.pp * self.dp * self.cp

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step: microbatches * micro_batch_size * dp."""
        return self.microbatches * self.micro_batch_size * self.dp


# --------------------------------------------------------------------------------------
# Hardware and cluster
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PeakFlops(_Section):
    """Dense (no sparsity) tensor-core peak FLOP/s per GPU, per dtype.

    ``fp8`` is ``None`` on GPUs without FP8 tensor cores (A100).
    """

    _SECTION: ClassVar[str] = "hardware.peak_flops"
    bf16: float = _f(kind="float", gt=0.0)
    fp8: float | None = _f(None, kind="float", gt=0.0, optional=True)

    def for_dtype(self, dtype: str) -> float:
        """Peak for ``"bf16"`` or ``"fp8"``; ConfigError when the GPU lacks it."""
        value = {"bf16": self.bf16, "fp8": self.fp8}.get(dtype)
        if value is None:
            raise ConfigError("training.precision", f"{dtype!r} has no peak on this hardware "
                              "(set hardware.peak_flops." + dtype + ")")
        return value


@dataclass(frozen=True)
class Efficiency(_Section):
    """Achieved fraction of peak, per op class.

    gemm : fraction of the dtype's tensor peak reached by the model's GEMMs.
    attention : fraction of the BF16 peak reached by fused (flash) attention.
    memory : fraction of HBM bandwidth reached by memory-bound kernels.
    """

    _SECTION: ClassVar[str] = "hardware.efficiency"
    # defaults: GEMM as calibrated in presets.GEMM_EFFICIENCY; flash attention ~half of
    # peak (FlashAttention-2/3 papers, forward+backward); memory-bound kernels ~80% of HBM
    gemm: float = _f(0.525, kind="float", gt=0.0, le=1.0)
    attention: float = _f(0.5, kind="float", gt=0.0, le=1.0)
    memory: float = _f(0.8, kind="float", gt=0.0, le=1.0)


@dataclass(frozen=True)
class HardwareConfig(_Section):
    """One GPU type and the cluster it sits in.

    The "intra-node" tier is the NVLink domain (8 GPUs of an HGX node, or 72 of a
    GB200 NVL72 rack); "inter-node" is the scale-out network (one NIC rail per GPU);
    "cross-DC" links datacenters. Bandwidths are the achievable per-GPU, per-direction
    bus bandwidth of NCCL collectives at large messages (nccl-tests ``busbw``), not the
    nominal link rate; latencies are per algorithm step (one hop), in seconds.

    Parameters
    ----------
    peak_flops : PeakFlops
    efficiency : Efficiency
    hbm_bandwidth : float
        HBM bytes/s.
    gpus_per_node : int
        GPUs per server/tray (failure and placement unit).
    nvlink_domain : int
        GPUs sharing one NVLink fabric (>= gpus_per_node).
    intra_node_bandwidth, intra_node_latency_s : float
    inter_node_bandwidth, inter_node_latency_s : float
    datacenters : int
        Datacenters the job spans; they split the data-parallel dimension.
    inter_dc_bandwidth : float
        Aggregate bytes/s between one datacenter and the others, shared by all its GPUs.
    inter_dc_latency_s : float
    """

    _SECTION: ClassVar[str] = "hardware"
    peak_flops: PeakFlops = _f(kind="section", section=PeakFlops)
    hbm_bandwidth: float = _f(kind="float", gt=0.0)
    gpus_per_node: int = _f(kind="int", ge=1)
    nvlink_domain: int = _f(kind="int", ge=1)
    intra_node_bandwidth: float = _f(kind="float", gt=0.0)
    inter_node_bandwidth: float = _f(kind="float", gt=0.0)
    intra_node_latency_s: float = _f(2e-6, kind="float", ge=0.0)
    inter_node_latency_s: float = _f(8e-6, kind="float", ge=0.0)
    datacenters: int = _f(1, kind="int", ge=1)
    inter_dc_bandwidth: float = _f(12.5e12, kind="float", gt=0.0)
    inter_dc_latency_s: float = _f(1e-3, kind="float", ge=0.0)
    efficiency: Efficiency = _f(kind="section", section=Efficiency, default_factory=Efficiency)
    name: str = _f("custom", kind="str")

    def _check(self) -> None:
        if self.nvlink_domain < self.gpus_per_node:
            raise self._err(
                "nvlink_domain",
                f"must be >= hardware.gpus_per_node ({self.gpus_per_node}),"
                f" got {self.nvlink_domain}",
            )


# --------------------------------------------------------------------------------------
# Training settings that change cost but are not parallelism
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainingConfig(_Section):
    """Numerics and bookkeeping that change the step's cost.

    Parameters
    ----------
    precision : {"bf16", "fp8"}
        Dtype of the linear-layer GEMMs (attention stays BF16, as in Transformer Engine).
    recompute : {"none", "selective", "full"}
        Activation recomputation. "selective" recomputes only the attention core,
        which flash attention does anyway, so it costs the same as "none"; "full"
        re-runs every layer's forward during backward.
    grad_reduce_bytes : {2, 4}
        Bytes per gradient element in the data-parallel reduction (Megatron's default
        accumulates and reduces in FP32).
    param_gather_bytes : {1, 2}
        Bytes per parameter in the ZeRO/FSDP all-gather (1 for FP8 parameter gather).
    optimizer_bytes_per_param : float
        HBM traffic of the Adam update per parameter: FP32 grad read (4), master
        weight, m and v read+write (24), BF16 weight write (2) = 30.
    step_overhead_s : float
        Fixed per-step host time (data loading, logging, launch gaps).
    """

    _SECTION: ClassVar[str] = "training"
    precision: str = _f("bf16", kind="str", choices=("bf16", "fp8"))
    recompute: str = _f("selective", kind="str", choices=("none", "selective", "full"))
    grad_reduce_bytes: int = _f(4, kind="int", choices=(2, 4))
    param_gather_bytes: int = _f(2, kind="int", choices=(1, 2))
    optimizer_bytes_per_param: float = _f(30.0, kind="float", gt=0.0)
    step_overhead_s: float = _f(0.0, kind="float", ge=0.0)


# --------------------------------------------------------------------------------------
# Variability
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpatialVariability(_Section):
    """Persistent per-GPU speed factor, drawn once per allocation.

    A GPU's time multiplier is ``body * outlier`` where ``body`` has mean 1 and
    coefficient of variation ``cv``, and ``outlier`` is ``slow_factor`` with probability
    ``slow_fraction`` (else 1).

    Defaults are measured by :func:`prism_analytic.workload.variability.spatial_stats`
    on the TACC Longhorn SGEMM data (392 V100s, Sinha et al., "Not All GPUs Are Created
    Equal", SC'22; data in ``shared/data/gpu_variability``): robust body CV 0.017
    (1.4826 MAD of per-GPU medians), 1.0% of GPUs beyond 3 robust sd, those outliers
    1.10x the median on average (the slowest 1.20x). Sinha et al. report outliers up to
    1.5x across clusters: use ``slow_factor = 1.5`` for a pessimistic what-if.
    """

    _SECTION: ClassVar[str] = "variability.spatial"
    cv: float = _f(0.017, kind="float", ge=0.0, lt=1.0)
    slow_fraction: float = _f(0.010, kind="float", ge=0.0, le=1.0)
    slow_factor: float = _f(1.10, kind="float", ge=1.0, le=100.0)


@dataclass(frozen=True)
class TemporalVariability(_Section):
    """Fresh per-execution noise of one kernel on one GPU.

    ``kernel_cv`` default 0.012: the Longhorn SGEMM data's within-GPU run-to-run CV of
    100-kernel means is 0.0012, i.e. about 0.012 per kernel if kernels in a run were
    independent. PRISM (arXiv 2510.15596 v2) reports temporal variation of 0.98-6.46%
    on one GPU; the default sits at the low end.
    """

    _SECTION: ClassVar[str] = "variability.temporal"
    kernel_cv: float = _f(0.012, kind="float", ge=0.0, lt=1.0)


@dataclass(frozen=True)
class TierNoise(_Section):
    """Latency noise of one communication tier, as a multiplier with mean near 1.

    ``body``: lognormal with shape ``sigma`` (normalised to mean 1); ``tail``: with
    probability ``tail_prob`` the duration is multiplied by ``tail_factor``.
    """

    _SECTION: ClassVar[str] = "variability.network.<tier>"
    sigma: float = _f(0.05, kind="float", ge=0.0, le=5.0)
    tail_prob: float = _f(0.0, kind="float", ge=0.0, lt=1.0)
    tail_factor: float = _f(1.0, kind="float", ge=1.0, le=1000.0)


def _intra() -> TierNoise:
    # PRISM Fig. 5 (1 node of 8x H200, NVLink): nearly deterministic at large messages,
    # rare stragglers at small ones. Values shaped to that caption; PRISM's data are not
    # public.
    return TierNoise(sigma=0.02, tail_prob=0.001, tail_factor=2.0)


def _inter() -> TierNoise:
    # PRISM Fig. 5 (8 nodes, EFA): millisecond-level fluctuation, tail up to an order of
    # magnitude above the mean -> heavy lognormal body plus a 1% 10x tail (assumption
    # shaped to the caption, not a fit).
    return TierNoise(sigma=0.3, tail_prob=0.01, tail_factor=10.0)


def _cross_dc() -> TierNoise:
    # Wide-area links: no public per-collective measurement at this scale; assumed at
    # least as noisy as the inter-node tier (PRISM: cross-DC variability degrades
    # performance unless bandwidth is high).
    return TierNoise(sigma=0.4, tail_prob=0.02, tail_factor=10.0)


@dataclass(frozen=True)
class NetworkVariability(_Section):
    """Collective-latency noise per tier: intra-node (NVLink), inter-node, cross-DC."""

    _SECTION: ClassVar[str] = "variability.network"
    intra_node: TierNoise = _f(kind="section", section=TierNoise, default_factory=_intra)
    inter_node: TierNoise = _f(kind="section", section=TierNoise, default_factory=_inter)
    cross_dc: TierNoise = _f(kind="section", section=TierNoise, default_factory=_cross_dc)


@dataclass(frozen=True)
class RegimeConfig(_Section):
    """Per-step network regime: a common shock on every communication of one step.

    With probability ``probabilities[r]`` all communication in a step is slowed by
    ``slowdowns[r]`` (PRISM v2: "all communication in a sampled step drawn under one
    shared regime"). No fitted values are public, so the default is a single neutral
    regime; e.g. ``probabilities = [0.95, 0.05]``, ``slowdowns = [1.0, 1.5]`` models 5%
    congested steps.
    """

    _SECTION: ClassVar[str] = "variability.regimes"
    probabilities: tuple[float, ...] = _f((1.0,), kind="floats", ge=0.0, le=1.0)
    slowdowns: tuple[float, ...] = _f((1.0,), kind="floats", gt=0.0, le=1000.0)

    def _check(self) -> None:
        if len(self.probabilities) != len(self.slowdowns):
            raise self._err(
                "slowdowns",
                f"needs one entry per probability ({len(self.probabilities)}),"
                f" got {len(self.slowdowns)}",
            )
        total = math.fsum(self.probabilities)
        if abs(total - 1.0) > 1e-9:
            raise self._err("probabilities", f"must sum to 1, got {total!r}")


@dataclass(frozen=True)
class HiccupConfig(_Section):
    """Rare whole-step stalls (GC, checkpoint I/O, network flaps), additive.

    Defaults measured on the MLPerf Training v5.0 Llama 3.1 405B logs (GB200, 512-2,496
    GPUs, 4,376 steps; ``shared/data/mlperf_llama405b``): 0.39% of steps (17) exceed 1.1x
    their size's median step time, by a median 1.2 s (see
    :func:`prism_analytic.workload.variability.step_outlier_stats`).
    """

    _SECTION: ClassVar[str] = "variability.hiccups"
    probability: float = _f(0.0039, kind="float", ge=0.0, le=1.0)
    size_s: float = _f(1.2, kind="float", ge=0.0)


@dataclass(frozen=True)
class VariabilityConfig(_Section):
    """All sources of randomness the step-DAG builder draws from."""

    _SECTION: ClassVar[str] = "variability"
    spatial: SpatialVariability = _f(
        kind="section", section=SpatialVariability, default_factory=SpatialVariability
    )
    temporal: TemporalVariability = _f(
        kind="section", section=TemporalVariability, default_factory=TemporalVariability
    )
    network: NetworkVariability = _f(
        kind="section", section=NetworkVariability, default_factory=NetworkVariability
    )
    regimes: RegimeConfig = _f(kind="section", section=RegimeConfig, default_factory=RegimeConfig)
    hiccups: HiccupConfig = _f(kind="section", section=HiccupConfig, default_factory=HiccupConfig)


# --------------------------------------------------------------------------------------
# Job
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobConfig(_Section):
    """A whole training job: what is trained, how it is split, where, and how noisy."""

    _SECTION: ClassVar[str] = "job"
    model: ModelConfig = _f(kind="section", section=ModelConfig)
    parallelism: ParallelConfig = _f(kind="section", section=ParallelConfig)
    hardware: HardwareConfig = _f(kind="section", section=HardwareConfig)
    training: TrainingConfig = _f(kind="section", section=TrainingConfig,
                                  default_factory=TrainingConfig)
    variability: VariabilityConfig = _f(
        kind="section", section=VariabilityConfig, default_factory=VariabilityConfig
    )
    name: str = _f("job", kind="str")

    @property
    def gpus(self) -> int:
        """GPUs of the job (tp * pp * dp * cp)."""
        return self.parallelism.gpus

    def replace(self, **changes: Any) -> JobConfig:
        """Copy with whole sections replaced (``job.replace(parallelism=...)``)."""
        return dataclasses.replace(self, **changes)

    def summary(self) -> str:
        """One paragraph describing the job."""
        m, p, h = self.model, self.parallelism, self.hardware
        moe = f", MoE {m.moe.experts}x top-{m.moe.top_k}" if m.moe else ""
        return (
            f"{self.name}: {m.name} ({m.layers} layers, hidden {m.hidden}{moe}, seq {m.seq_len})"
            f" on {self.gpus} x {h.name}; tp {p.tp} pp {p.pp} (vpp {p.vpp}, {p.schedule})"
            f" dp {p.dp} cp {p.cp} ep {p.ep}, {p.microbatches} microbatches x"
            f" {p.micro_batch_size} seq, global batch {p.global_batch} seq,"
            f" sharding {p.sharding}, {self.training.precision}"
        )


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------
_TOP_KEYS = ("job", "model", "parallelism", "hardware", "training", "variability")
_JOB_KEYS = ("name", "preset", "hardware", "gpus")


def _section_fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls) if "kind" in f.metadata}


def _check_mapping(value: Any, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"must be a table of keys, got {type(value).__name__} {value!r}")
    return value


def _build(cls: type, data: Any, path: str) -> Any:
    """Construct section ``cls`` from a mapping, naming every problem by its full key."""
    data = _check_mapping(data, path)
    fields = _section_fields(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{path}.{unknown[0]}",
            f"unknown key; allowed keys in [{path}]: {', '.join(sorted(fields))}",
        )
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        key = f"{path}.{name}"
        if name in data:
            value = data[name]
            if f.metadata["kind"] == "section":
                if value is None and f.metadata["optional"]:
                    kwargs[name] = None
                    continue
                # a partial table keeps this field's own defaults for the keys it omits
                # (e.g. variability.network.inter_node keeps its 10x tail)
                if f.default_factory is not dataclasses.MISSING:
                    value = _deep_merge(config_to_dict(f.default_factory()),
                                        _check_mapping(value, key))
                kwargs[name] = _build(f.metadata["section"], value, key)
            else:
                # type-check now so the error names the TOML key, not the class default
                kwargs[name] = _coerce(value, f.metadata, key)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(key, f"is required ({f.metadata['kind']}, {_allowed(f.metadata)})")
    try:
        return cls(**kwargs)
    except ConfigError as err:
        # a reused section (TierNoise) knows only a generic path: rewrite it
        if err.key.startswith(cls._SECTION + ".") and cls._SECTION != path:
            raise ConfigError(path + err.key[len(cls._SECTION):], err.detail) from None
        raise


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _read_source(source: str | Path | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(source, Mapping):
        return source
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and "=" not in source
    ):
        path = Path(source)
        if not path.is_file():
            raise ConfigError("<file>", f"no such config file: {str(path)!r}")
        text = path.read_text(encoding="utf-8")
        where = str(path)
    elif isinstance(source, str):
        text, where = source, "<string>"
    else:
        raise ConfigError(
            "<source>", f"must be a TOML path, TOML text or a mapping, got {type(source).__name__}"
        )
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError("<toml>", f"{where} is not valid TOML: {err}") from None


def load_config(source: str | Path | Mapping[str, Any], *, check_layout: bool = True) -> JobConfig:
    """Read and validate a job configuration.

    Parameters
    ----------
    source : str, Path or Mapping
        A TOML file path, TOML text, or an already-parsed mapping of the same shape.
    check_layout : bool
        Also run :func:`validate_layout` (errors raise; warnings are emitted as
        :class:`LayoutWarning`).

    Returns
    -------
    JobConfig

    Raises
    ------
    ConfigError
        Naming the full key (``parallelism.tp``) and what is allowed.

    Notes
    -----
    ``[job] preset = NAME`` starts from that model preset and, when ``job.gpus`` is set,
    its :func:`~prism_analytic.workload.presets.default_layout`; ``[job] hardware = NAME``
    starts from a hardware preset. Everything else in the file overrides key by key. When
    ``job.gpus`` is set and ``parallelism.dp`` is not, dp = gpus / (tp * pp * cp).

    Examples
    --------
    >>> job = load_config('''
    ... [job]
    ... preset = "llama3-8b"
    ... gpus = 64
    ... ''')
    >>> job.parallelism.dp, job.gpus
    (64, 64)
    """
    raw = dict(_check_mapping(_read_source(source), "<config>"))
    unknown = sorted(set(raw) - set(_TOP_KEYS))
    if unknown:
        raise ConfigError(unknown[0], f"unknown section; allowed: {', '.join(_TOP_KEYS)}")
    for sec, value in raw.items():
        _check_mapping(value, sec)
    job_tab = dict(_check_mapping(raw.pop("job", {}), "job"))
    bad = sorted(set(job_tab) - set(_JOB_KEYS))
    if bad:
        raise ConfigError(
            f"job.{bad[0]}", f"unknown key; allowed keys in [job]: {', '.join(_JOB_KEYS)}"
        )
    gpus = job_tab.get("gpus")
    if gpus is not None:
        gpus = _coerce(gpus, {**_STR_META, "kind": "int", "ge": 1}, "job.gpus")
    default_name = f"{job_tab['preset']}@{gpus}" if "preset" in job_tab else "job"
    name = _coerce(job_tab.get("name", default_name), _STR_META, "job.name")

    base: dict[str, Any] = {}
    user_par = raw.get("parallelism", {})
    if "preset" in job_tab:
        from . import presets  # lazy: presets imports this module

        preset = _coerce(job_tab["preset"], _STR_META, "job.preset")
        base = presets.preset_dict(preset, gpus)
    if "hardware" in job_tab:
        from . import presets

        hw_name = _coerce(job_tab["hardware"], _STR_META, "job.hardware")
        base["hardware"] = config_to_dict(presets.hardware_preset(hw_name))
    merged = _deep_merge(base, raw)
    how = {"model": "or set job.preset", "parallelism": "or set job.preset and job.gpus",
           "hardware": "or set job.hardware or job.preset"}
    for sec in ("model", "parallelism", "hardware"):
        if sec not in merged:
            raise ConfigError(sec, f"section is required ({how[sec]})")

    par = dict(_check_mapping(merged["parallelism"], "parallelism"))
    if gpus is not None and "dp" not in _check_mapping(user_par, "parallelism"):
        # derive dp so that overriding tp/pp/cp keeps the GPU count
        for k in ("tp", "pp", "cp"):
            _coerce(par.get(k, 1), {**_STR_META, "kind": "int", "ge": 1}, f"parallelism.{k}")
        mp = par.get("tp", 1) * par.get("pp", 1) * par.get("cp", 1)
        if gpus % mp:
            raise ConfigError(
                "job.gpus",
                f"{gpus} is not a multiple of tp*pp*cp = {mp}; allowed: multiples of {mp}",
            )
        par["dp"] = gpus // mp
    merged["parallelism"] = par

    job = JobConfig(
        name=name,
        model=_build(ModelConfig, merged["model"], "model"),
        parallelism=_build(ParallelConfig, merged["parallelism"], "parallelism"),
        hardware=_build(HardwareConfig, merged["hardware"], "hardware"),
        training=_build(TrainingConfig, merged.get("training", {}), "training"),
        variability=_build(VariabilityConfig, merged.get("variability", {}), "variability"),
    )
    if check_layout:
        validate_layout(job, gpus)
    return job


_STR_META: dict[str, Any] = {
    "kind": "str", "gt": None, "ge": None, "le": None, "lt": None,
    "choices": None, "optional": False, "section": None,
}


def merge_config(
    base: JobConfig | Mapping[str, Any],
    overrides: str | Path | Mapping[str, Any],
    *,
    check_layout: bool = True,
) -> JobConfig:
    """Apply user overrides (TOML path/text or mapping) on top of a job or mapping.

    Keys are merged table by table: ``{"parallelism": {"tp": 4}}`` changes only tp.
    Overrides may not contain ``[job] preset/hardware``; put those in ``base`` or use
    :func:`load_config`. If the override changes tp/pp/cp but not dp, dp is re-derived
    to keep the base's GPU count; an explicit dp instead changes the GPU count.
    """
    base_map = config_to_dict(base) if isinstance(base, JobConfig) else dict(base)
    over = dict(_check_mapping(_read_source(overrides), "<overrides>"))
    gpus = base.gpus if isinstance(base, JobConfig) else None
    job_over = dict(_check_mapping(over.pop("job", {}), "job"))
    if "dp" in _check_mapping(over.get("parallelism", {}), "parallelism"):
        gpus = None  # an explicit dp sets the GPU count
        if isinstance(base_map.get("job"), Mapping):
            base_map["job"] = {k: v for k, v in base_map["job"].items() if k != "gpus"}
    for k in ("preset", "hardware"):
        if k in job_over:
            raise ConfigError(
                f"job.{k}", "cannot be overridden onto an existing job; use load_config"
            )
    if "gpus" in job_over:
        gpus = job_over["gpus"]
    merged = _deep_merge(base_map, over)
    merged["job"] = {**dict(merged.get("job", {})), **job_over}
    if isinstance(base, JobConfig):
        merged["job"].setdefault("name", base.name)
    if gpus is not None:
        merged["job"]["gpus"] = gpus
        if "dp" not in over.get("parallelism", {}):
            merged["parallelism"] = {k: v for k, v in merged["parallelism"].items() if k != "dp"}
    return load_config(merged, check_layout=check_layout)


def config_to_dict(obj: Any) -> Any:
    """Nested plain dict of a config dataclass (tuples as lists, ``None`` omitted).

    A :class:`JobConfig` gives the TOML shape ``{"job": {...}, "model": {...}, ...}``.
    """
    if isinstance(obj, JobConfig):
        out: dict[str, Any] = {"job": {"name": obj.name, "gpus": obj.gpus}}
        for sec in ("model", "parallelism", "hardware", "training", "variability"):
            out[sec] = config_to_dict(getattr(obj, sec))
        return out
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        res: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            if "kind" not in f.metadata:
                continue
            v = getattr(obj, f.name)
            if v is None:
                continue
            res[f.name] = config_to_dict(v)
        return res
    if isinstance(obj, tuple):
        return [config_to_dict(v) for v in obj]
    return obj


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(type(v))  # pragma: no cover


def dump_toml(job: JobConfig) -> str:
    """TOML text that :func:`load_config` reads back into an equal :class:`JobConfig`."""
    lines: list[str] = []

    def emit(table: Mapping[str, Any], path: str) -> None:
        scalars = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
        subs = {k: v for k, v in table.items() if isinstance(v, Mapping)}
        if scalars or not subs:
            lines.append(f"[{path}]")
            lines.extend(f"{k} = {_toml_value(v)}" for k, v in scalars.items())
            lines.append("")
        for k, v in subs.items():
            emit(v, f"{path}.{k}")

    for sec, table in config_to_dict(job).items():
        emit(table, sec)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Cross-section rules
# --------------------------------------------------------------------------------------
def validate_layout(job: JobConfig, gpus: int | None = None) -> tuple[str, ...]:
    """Check that the parallel layout fits the model, the hardware and the GPU count.

    Rules (Megatron-LM's, errors unless noted):

    * tp * pp * dp * cp == gpus (when ``gpus`` is given);
    * tp divides model.heads, model.kv_heads (query groups), model.ffn and, for MoE,
      model.moe.expert_ffn (expert tp = tp);
    * the layer slots (layers, plus 2 with ``embedding_in_pipeline_split``) divide evenly
      over pp * vpp model chunks, at least one slot per chunk (with the split, the first
      chunk may hold only the embedding);
    * interleaved: microbatches >= pp and microbatches % pp == 0; gpipe/1f1b with
      microbatches < pp: warning (the bubble dominates);
    * cp > 1: model.seq_len divisible by 2 * cp (causal load-balanced chunks);
    * ep > 1 needs model.moe; ep divides model.moe.experts and dp * cp;
    * datacenters > 1: dp divisible by hardware.datacenters (datacenters split dp);
    * training.precision "fp8" needs hardware.peak_flops.fp8;
    * warnings: tp > nvlink_domain, tp * cp > nvlink_domain, sequence_parallel with tp 1,
      ZeRO/FSDP sharding with dp * cp == 1.

    Parameters
    ----------
    job : JobConfig
    gpus : int, optional
        Expected GPU count.

    Returns
    -------
    tuple of str
        The warning messages (also emitted as :class:`LayoutWarning`).

    Raises
    ------
    ConfigError
        Naming the field to change.
    """
    m, p, h, t = job.model, job.parallelism, job.hardware, job.training
    if gpus is not None:
        if isinstance(gpus, bool) or not isinstance(gpus, numbers.Integral) or gpus < 1:
            raise ConfigError("job.gpus", f"must be a positive integer, got {gpus!r}")
        if p.gpus != gpus:
            mp = p.tp * p.pp * p.cp
            hint = (f"set dp = {gpus // mp}" if gpus % mp == 0
                    else f"gpus must be a multiple of {mp}")
            raise ConfigError(
                "parallelism.dp",
                f"tp*pp*dp*cp = {p.tp}*{p.pp}*{p.dp}*{p.cp} = {p.gpus} but the job has {gpus}"
                f" GPUs; {hint}",
            )
    for name, value in (("heads", m.heads), ("kv_heads", m.kv_heads), ("ffn", m.ffn)):
        if value % p.tp:
            raise ConfigError(
                "parallelism.tp", f"must divide model.{name} ({value}), got tp {p.tp}"
            )
    if m.moe is not None and m.moe.expert_ffn % p.tp:
        raise ConfigError(
            "parallelism.tp", f"must divide model.moe.expert_ffn ({m.moe.expert_ffn}), got {p.tp}"
        )
    slots = m.layers + (2 if p.embedding_in_pipeline_split else 0)
    chunks = p.pp * p.vpp
    if slots % chunks or slots // chunks < 1:
        extra = " (+2 embedding/loss slots)" if p.embedding_in_pipeline_split else ""
        hint = "" if p.embedding_in_pipeline_split or (m.layers + 2) % chunks else (
            "; parallelism.embedding_in_pipeline_split = true would make it divide"
        )
        raise ConfigError(
            "parallelism.pp",
            f"model.layers {m.layers}{extra} must split evenly over pp*vpp = {p.pp}*{p.vpp}"
            f" = {chunks} model chunks{hint}",
        )
    warns: list[str] = []
    if p.schedule == "interleaved":
        if p.microbatches < p.pp or p.microbatches % p.pp:
            raise ConfigError(
                "parallelism.microbatches",
                f"the interleaved schedule needs a positive multiple of pp ({p.pp}),"
                f" got {p.microbatches}",
            )
    elif p.pp > 1 and p.microbatches < p.pp:
        warns.append(
            f"parallelism.microbatches {p.microbatches} < pp {p.pp}: the pipeline bubble"
            " dominates the step"
        )
    if p.cp > 1 and m.seq_len % (2 * p.cp):
        raise ConfigError(
            "parallelism.cp",
            f"model.seq_len ({m.seq_len}) must be divisible by 2*cp = {2 * p.cp}",
        )
    if p.ep > 1:
        if m.moe is None:
            raise ConfigError("parallelism.ep", f"ep = {p.ep} needs an MoE model (model.moe)")
        if m.moe.experts % p.ep:
            raise ConfigError(
                "parallelism.ep", f"must divide model.moe.experts ({m.moe.experts}), got {p.ep}"
            )
        if (p.dp * p.cp) % p.ep:
            raise ConfigError(
                "parallelism.ep", f"must divide dp*cp = {p.dp * p.cp}, got {p.ep}"
            )
    if h.datacenters > 1 and p.dp % h.datacenters:
        raise ConfigError(
            "hardware.datacenters",
            f"datacenters split the data-parallel dimension: must divide dp ({p.dp}),"
            f" got {h.datacenters}",
        )
    if t.precision == "fp8" and h.peak_flops.fp8 is None:
        raise ConfigError(
            "training.precision", f"'fp8' needs hardware.peak_flops.fp8 (not set for {h.name})"
        )
    if p.tp > h.nvlink_domain:
        warns.append(
            f"parallelism.tp {p.tp} > hardware.nvlink_domain {h.nvlink_domain}: tensor-parallel"
            " collectives cross the scale-out network"
        )
    elif p.tp * p.cp > h.nvlink_domain and p.cp > 1:
        warns.append(
            f"parallelism.tp*cp = {p.tp * p.cp} > hardware.nvlink_domain {h.nvlink_domain}:"
            " context-parallel exchanges cross the scale-out network"
        )
    if p.sequence_parallel and p.tp == 1:
        warns.append("parallelism.sequence_parallel has no effect with tp 1")
    if p.sharding != "none" and p.dp * p.cp == 1:
        warns.append(f"parallelism.sharding {p.sharding!r} has no effect with dp*cp 1")
    for w in warns:
        warnings.warn(w, LayoutWarning, stacklevel=2)
    return tuple(warns)
