"""Sections for the model, the parallel layout, the hardware/cluster and training."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .evaluation import EvaluationConfig
from .fields import ConfigError, _f, _Section


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
#: Data-parallel overlap efficiency (``parallelism.overlap.dp``): fitted 0.145
#: (leave-one-system-out 0.141-0.229) by ``python -m validation.fit_defaults`` on the 17
#: public MLPerf cases (sources above GEMM_EFFICIENCY_FP8). The Llama 3.1 8B jobs set it: one
#: microbatch per step, where gradient reduce-scatter and parameter all-gather are a large
#: part of the step; in the 405B jobs (32-144 microbatches) it barely matters.
DP_OVERLAP = 0.145


@dataclass(frozen=True)
class OverlapConfig(_Section):
    """How much communication hides behind concurrent compute, per parallel dimension.

    Each value f in [0, 1] is an overlap efficiency: a communication of c seconds that
    could run under a compute window of w seconds is exposed for ``max(0, c - f * w)``.
    The window per dimension is defined in :mod:`prism_analytic.workload.mean_model`.
    Defaults follow Megatron-Core: TP communication blocks unless ``--tp-comm-overlap``
    (0); context-parallel ring attention overlaps the KV exchange with the attention
    kernel (1); MoE all-to-all blocks (0); ``overlap_grad_reduce``/``overlap_param_gather``
    hide data-parallel traffic behind backward/forward, but the dp default
    (:data:`DP_OVERLAP`, 0.145) is fitted on public MLPerf step logs: in one-microbatch Llama
    3.1 8B steps most of the gradient and parameter traffic shows; ``overlap_p2p_comm``
    hides steady-state pipeline sends (1; fill and drain hops are never hidden).
    """

    _SECTION: ClassVar[str] = "parallelism.overlap"
    tp: float = _f(0.0, kind="float", ge=0.0, le=1.0)
    cp: float = _f(1.0, kind="float", ge=0.0, le=1.0)
    ep: float = _f(0.0, kind="float", ge=0.0, le=1.0)
    dp: float = _f(DP_OVERLAP, kind="float", ge=0.0, le=1.0)
    pp: float = _f(1.0, kind="float", ge=0.0, le=1.0)


#: Rank orders (fastest-varying dimension first) the placement model knows.
RANK_ORDERS = ("tp-cp-dp-pp", "tp-cp-pp-dp")
_SCHEDULES = ("gpipe", "1f1b", "interleaved")
_SHARDING = ("none", "zero1", "zero2", "fsdp")
#: Resource guards on the pipeline schedule (llama3-405b on 128 GPUs: 2,048 microbatches,
#: 524,288 ops).
MAX_MICROBATCHES = 8192
MAX_PIPELINE_OPS = 2**20
#: The largest job (replica groups hold at most 1e12 copies).
MAX_GPUS = 10**12


@dataclass(frozen=True)
class ParallelConfig(_Section):
    """Parallel layout (Megatron-LM / torchtitan vocabulary).

    Ranks are laid out in ``rank_order``: Megatron-Core's default tp (fastest) - cp - dp - pp
    keeps a tp group contiguous (inside a node when tp <= gpus_per_node) with pp outermost;
    ``"tp-cp-pp-dp"`` (Megatron-Core ``--order``/NeMo option) keeps a whole pipeline replica
    together, so on large NVLink domains (GB200 NVL72) pipeline traffic stays inside the
    domain and only data-parallel traffic crosses domains.
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
    rank_order : {"tp-cp-dp-pp", "tp-cp-pp-dp"}
        Which parallel dimension is innermost after tp and cp (see above).
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
    # guard: a pipeline schedule's cost grows with microbatches (16,000 took a minute)
    microbatches: int = _f(1, kind="int", ge=1, le=MAX_MICROBATCHES)
    micro_batch_size: int = _f(1, kind="int", ge=1)
    embedding_in_pipeline_split: bool = _f(False, kind="bool")
    overlap: OverlapConfig = _f(
        kind="section", section=OverlapConfig, default_factory=OverlapConfig
    )
    rank_order: str = _f("tp-cp-dp-pp", kind="str", choices=RANK_ORDERS)

    def _check(self) -> None:
        if self.gpus > MAX_GPUS:
            raise ConfigError(
                "job.gpus",
                f"tp*pp*dp*cp = {self.gpus:.3g} GPUs exceed the limit of {MAX_GPUS:.0e}",
            )
        ops = 2 * self.pp * self.vpp * self.microbatches
        if ops > MAX_PIPELINE_OPS:
            raise self._err(
                "microbatches",
                f"the pipeline schedule would have 2*pp*vpp*microbatches = {ops:,} ops, over "
                f"the limit of {MAX_PIPELINE_OPS:,}",
            )
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
#: GEMM precision -> the tensor-core peak it runs at (and the efficiency key it uses).
PRECISION_PEAK = {"bf16": "bf16", "fp8": "fp8", "mxfp8": "fp8", "nvfp4": "fp4"}


@dataclass(frozen=True)
class PeakFlops(_Section):
    """Dense (no sparsity) tensor-core peak FLOP/s per GPU, per dtype.

    ``fp8`` is ``None`` on GPUs without FP8 tensor cores (A100); ``fp4`` on GPUs without
    FP4 tensor cores (everything before Blackwell). MXFP8 GEMMs run at the FP8 peak and
    NVFP4 GEMMs at the FP4 peak (block scaling is applied inside the tensor core).
    """

    _SECTION: ClassVar[str] = "hardware.peak_flops"
    bf16: float = _f(kind="float", gt=0.0)
    fp8: float | None = _f(None, kind="float", gt=0.0, optional=True)
    fp4: float | None = _f(None, kind="float", gt=0.0, optional=True)

    def for_dtype(self, dtype: str) -> float:
        """Peak for a GEMM precision (``PRECISION_PEAK`` maps it to a peak key)."""
        key = PRECISION_PEAK.get(dtype, dtype)
        value = {"bf16": self.bf16, "fp8": self.fp8, "fp4": self.fp4}.get(key)
        if value is None:
            raise ConfigError(
                "training.precision",
                f"{dtype!r} has no peak on this hardware (set hardware.peak_flops.{key})",
            )
        return value


# Achieved GEMM efficiencies per precision. A public GEMM benchmark gives their ratios; the
# public MLPerf step logs give their level (fitted, below).
# Benchmark: NVIDIA Transformer Engine, "GEMM Profiling Across Precisions", worked example "5B
# Model on B300" (docs/features/low_precision_training/gemm_profiling/gemm_profiling.rst,
# https://nvidia.github.io/TransformerEngine/ , "GEMM Speedups Across Precisions"): the 12
# GEMMs of one transformer layer (hidden 4096, intermediate 16384, 15,872 tokens; 19.17 TFLOP)
# take 12.227 ms in BF16, 8.507 ms in MXFP8 and 6.439 ms in NVFP4 in *autocast* mode, i.e.
# with the per-step quantization kernels that real training runs. Divided by B300's dense
# peaks (2.25 PFLOP/s BF16, 4.5 FP8) this is 0.697 of the BF16 peak and 0.501 of the FP8
# peak (and NVFP4 1.899x BF16: 0.331 of a peak 4x BF16's). One GEMM in isolation runs faster
# than a whole training step's GEMMs: end to end, MLPerf steps fit lower fractions.
# Transfer to other GPUs: the best-shape matmul fractions (MAMF table, stas00/ml-engineering
# compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS comparison table") are
# alike across generations: BF16 H100 SXM 80.3%, GB200 72.9%, B300 78.6%; FP8 H100 70.9%,
# GB200 72.3%, B300 74.5%; so one fraction per precision is used for every GPU type.
# Hopper's per-tensor FP8 is not in either source: the FP8 fraction stands in for it.
_TE_LAYER_TFLOP = 19.17  # 12 GEMMs of one layer, 2*M*K*N summed, in TFLOP
#: Transformer Engine benchmark fractions (BF16, MXFP8), kept for the BF16/FP8 ratio.
TE_GEMM_BF16 = round(_TE_LAYER_TFLOP / 12.227e-3 / 2.25e3, 3)  # 0.697
TE_GEMM_FP8 = round(_TE_LAYER_TFLOP / 8.507e-3 / 4.5e3, 3)  # 0.501

# Fitted: `python -m validation.fit_defaults` on the 17 public MLPerf Training v5.0/v5.1
# cases (shared/data/mlperf_training_set: Tyche GB200, Theia GB300, HiPerGator B200, Llama
# 3.1 405B and 8B; shared/data/mlperf_llama405b: Carina GB200 512-2,496; each job as
# validation/configs/mlperf*.toml states it), least squares on the log of the measured median
# step, each system x benchmark weighted equally; the interval is the range of the four
# leave-one-system-out fits. Results and held-out errors: validation/results/fit_defaults.md.
#: Achieved FP8/MXFP8 GEMM efficiency (fraction of the FP8 dense peak), quantization included:
#: fitted 0.450 (leave-one-system-out 0.435-0.460), the logits GEMM kept in BF16
#: (``training.logits_precision``).
GEMM_EFFICIENCY_FP8 = 0.450
#: Achieved NVFP4 GEMM efficiency (fraction of the FP4 dense peak): fitted 0.388 (0.372-0.441;
#: only Tyche GB200 and Theia GB300 ran NVFP4).
GEMM_EFFICIENCY_FP4 = 0.388
#: Achieved BF16 GEMM efficiency (fraction of the BF16 dense peak). The public set has no BF16
#: GEMM: the fitted FP8 fraction times the benchmark's BF16/FP8 ratio (0.697 / 0.501).
GEMM_EFFICIENCY = round(GEMM_EFFICIENCY_FP8 * TE_GEMM_BF16 / TE_GEMM_FP8, 3)  # 0.626


@dataclass(frozen=True)
class Efficiency(_Section):
    """Achieved fraction of peak, per op class.

    gemm : fraction of the BF16 tensor peak reached by the model's BF16 GEMMs (default
        :data:`GEMM_EFFICIENCY`, 0.626: the fitted FP8 fraction times Transformer Engine's
        benchmark BF16/FP8 ratio; the public MLPerf set has no BF16 job).
    gemm_fp8, gemm_fp4 : fractions of their own peaks reached by FP8/MXFP8 and NVFP4 GEMMs,
        quantization kernels included (defaults :data:`GEMM_EFFICIENCY_FP8` 0.450 and
        :data:`GEMM_EFFICIENCY_FP4` 0.388, fitted by ``validation/fit_defaults.py`` on the
        public MLPerf step logs); ``None`` (Python API) falls back to ``gemm``.
        Low-precision GEMMs reach a smaller fraction of their (higher) peak.
        ``prism calibrate`` fits the key of the job's precision.
    attention : fraction of the peak of ``training.attention_precision`` (BF16 unless FP8
        attention is set) reached by fused (flash) attention.
    memory : fraction of HBM bandwidth reached by memory-bound kernels.
    """

    _SECTION: ClassVar[str] = "hardware.efficiency"
    # defaults: GEMMs per precision fitted on MLPerf step logs (sources above GEMM_EFFICIENCY);
    # flash attention ~half of peak (FlashAttention-2/3 papers, forward+backward; fitted
    # too, the public set leaves it between 0.53 and 1.0, so the a-priori value stays);
    # memory-bound kernels ~80% of HBM
    gemm: float = _f(GEMM_EFFICIENCY, kind="float", gt=0.0, le=1.0)
    attention: float = _f(0.5, kind="float", gt=0.0, le=1.0)
    memory: float = _f(0.8, kind="float", gt=0.0, le=1.0)
    gemm_fp8: float | None = _f(GEMM_EFFICIENCY_FP8, kind="float", gt=0.0, le=1.0, optional=True)
    gemm_fp4: float | None = _f(GEMM_EFFICIENCY_FP4, kind="float", gt=0.0, le=1.0, optional=True)

    def gemm_key(self, precision: str) -> str:
        """The key holding the GEMM efficiency of ``precision`` (``gemm``, ``gemm_fp8``...)."""
        peak = PRECISION_PEAK.get(precision, precision)
        return "gemm" if peak == "bf16" else f"gemm_{peak}"

    def for_precision(self, precision: str) -> float:
        """GEMM efficiency of ``precision``: its own key when set, else ``gemm``."""
        value = getattr(self, self.gemm_key(precision), None)
        return self.gemm if value is None else value


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
    nvlink_domain_used : int, optional
        GPUs of each NVLink domain the job places ranks on (e.g. 64 of a 72-GPU NVL72 rack
        when a 64-GPU model replica is kept per rack, the rest spare); default: all.
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
    nvlink_domain_used: int | None = _f(None, kind="int", ge=1, optional=True)

    def _check(self) -> None:
        if self.nvlink_domain_used is not None and self.nvlink_domain_used > self.nvlink_domain:
            raise self._err(
                "nvlink_domain_used",
                f"must be <= hardware.nvlink_domain ({self.nvlink_domain}),"
                f" got {self.nvlink_domain_used}",
            )
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
    precision : {"bf16", "fp8", "mxfp8", "nvfp4"}
        Dtype of the linear-layer GEMMs (attention follows ``attention_precision``).
    attention_precision : {"bf16", "fp8"}
        Dtype of the fused attention kernel: BF16 (Transformer Engine's default) or FP8
        (TE ``fp8_dpa``, NeMo ``FP8_DPA=True``, as the MLPerf v5.1 Llama 3.1 8B configs set),
        which runs at the FP8 peak times ``hardware.efficiency.attention``.
    logits_precision : {"bf16", "same"}
        Dtype of the output-layer (logits) GEMM. "bf16" (default): it stays in BF16 whatever
        ``precision`` is, at the BF16 peak times ``hardware.efficiency.gemm``: Megatron-Core's
        output layer is ``tensor_parallel.ColumnParallelLinear`` (its GPT model file
        ``megatron/core/models/gpt/gpt_model.py``), a plain matmul outside Transformer
        Engine's FP8/FP4 autocast, and torchtitan's float8 conversion leaves the ``output``
        layer out. "same": it runs in
        ``precision`` like the other GEMMs. Matters for small models: 7% of Llama 3 8B's GEMM
        FLOPs, 0.5% of 405B's.
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
        Fixed per-step host time (data loading, logging).
    kernel_launch_s : float
        Host (CPU) time to launch one modelled op's kernels eagerly (the mean model has
        11-15 ops per layer pass; a framework that launches k kernels per op costs k times
        a launch). Default 0: launch gaps are not modelled, so answers stay as they were;
        at one 3.25 us launch per op no preset is CPU-bound (llama3-8b, even at seq 256 and
        tp 8, has 104-131 us of GPU work per layer pass against 49 us of launches).
        A measured size: 3.25e-6 s (CUDA.jl "Graphs" docs, https://cuda.juliagpu.org/dev/
        usage/graphs/: 80 broadcast kernels in 260 us launched one by one); a framework's
        dispatch (PyTorch eager) adds to it. A layer pass (one layer, one microbatch,
        forward or backward; also the embedding and the head) whose n kernels take longer
        to launch than to run is CPU-bound: it lasts ``n * kernel_launch_s`` instead of its
        GPU time (:func:`~prism_analytic.workload.mean_model.launch_gap_s`).
    cuda_graphs : bool
        Kernels are replayed from captured CUDA graphs (Megatron-Core ``--cuda-graph-impl``,
        TE ``make_graphed_callables``): the per-kernel host cost drops from
        ``kernel_launch_s`` to ``cuda_graph_kernel_s``. No effect while
        ``kernel_launch_s`` is 0. Measured effect (llama3-8b, 64 GPUs, seq 256, tp 8, zero1):
        mean step 0.1863 s without launches; eager at 3.25 us an op 0.1863 s (+0.01%), at
        32.5 us (ten launches an op) 0.3796 s; with CUDA graphs 0.1863 s again.
    cuda_graph_kernel_s : float
        Per-kernel cost inside a replayed graph: 0.875e-6 s (same CUDA.jl measurement: the
        80 kernels take 70 us as one graph, kernel execution included, so an upper value).
    evaluation : EvaluationConfig
        Evaluation pauses and the slow step after each (``[training.evaluation]``; off by
        default), counted by ``prism runtime``.
    """

    _SECTION: ClassVar[str] = "training"
    precision: str = _f("bf16", kind="str", choices=tuple(PRECISION_PEAK))
    attention_precision: str = _f("bf16", kind="str", choices=("bf16", "fp8"))
    logits_precision: str = _f("bf16", kind="str", choices=("bf16", "same"))
    recompute: str = _f("selective", kind="str", choices=("none", "selective", "full"))
    grad_reduce_bytes: int = _f(4, kind="int", choices=(2, 4))
    param_gather_bytes: int = _f(2, kind="int", choices=(1, 2))
    optimizer_bytes_per_param: float = _f(30.0, kind="float", gt=0.0)
    step_overhead_s: float = _f(0.0, kind="float", ge=0.0)
    kernel_launch_s: float = _f(0.0, kind="float", ge=0.0, le=1.0)
    cuda_graphs: bool = _f(False, kind="bool")
    cuda_graph_kernel_s: float = _f(0.875e-6, kind="float", ge=0.0, le=1.0)
    evaluation: EvaluationConfig = _f(
        kind="section", section=EvaluationConfig, default_factory=EvaluationConfig
    )

    def _check(self) -> None:
        if self.kernel_launch_s > 0 and self.cuda_graph_kernel_s > self.kernel_launch_s:
            raise self._err(
                "cuda_graph_kernel_s",
                f"must be <= training.kernel_launch_s ({self.kernel_launch_s:g} s): a graph"
                f" replay does not launch slower than eager launches, got"
                f" {self.cuda_graph_kernel_s:g}",
            )

    @property
    def launch_s_per_kernel(self) -> float:
        """Host time per kernel on the critical path: eager, or inside a CUDA graph."""
        if self.cuda_graphs:
            return min(self.kernel_launch_s, self.cuda_graph_kernel_s)
        return self.kernel_launch_s
