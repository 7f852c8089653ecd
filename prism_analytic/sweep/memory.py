"""Per-GPU memory of a training layout: model state plus activations, against HBM capacity.

This is an *estimate* used to rule layouts in or out of a search, not a guarantee. It counts
what dominates on a GPU of the pipeline's first stage (the one holding the most activations):

* Model state (bytes per parameter, Megatron-LM's distributed-optimizer table): weights in
  BF16 (2), main gradients in ``training.grad_reduce_bytes`` (4 = FP32 by default) and Adam
  state in FP32 (master weight, m, v: 12). ``zero1`` shards the 12 over the data-parallel
  group (dp * cp), ``zero2`` also the gradients, ``fsdp`` everything; ``none`` shards
  nothing. With FP32 gradients this gives Megatron's 18 bytes/param (none) and
  6 + 12/d (distributed optimizer); with 2-byte gradients the ZeRO paper's (2 + 2 + K) Psi
  family (Rajbhandari et al., SC'20, Fig. 1). Both are checked in the tests.
* Activations (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
  Models", MLSys 2023, Sec. 4): per layer and microbatch, BF16 tensors saved for backward,
  generalised from their 34 s b h (GPT, MHA, 4h GeLU MLP, with dropout masks) to grouped-query
  attention and SwiGLU; flash attention keeps no s^2 score matrix (so ``recompute =
  "selective"`` costs the same as ``"none"``); ``full`` keeps only each layer's input
  (2 s b h) plus one layer's working set. Sequence parallelism divides everything by tp,
  context parallelism divides the sequence by cp.
* In-flight microbatches on the first stage: gpipe all of them; 1F1B min(pp, m); interleaved
  Megatron's warm-up count (pp - 1) * 2 + (vpp - 1) * pp + 1 model chunks, capped at m * vpp.
* Logits of the output layer (FP32, on the last stage) are counted too, since with a large
  vocabulary they are often the single biggest tensor.

Not counted: CUDA context, NCCL buffers, allocator fragmentation (use ``reserve_gb``) and
framework-specific savings (FP8 activation caching, CPU offload). Capacities are datasheet
GB (1e9 bytes), which is below the usable GiB figure, so the rule errs toward "does not fit".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..workload.config import ConfigError, JobConfig

__all__ = [
    "HBM_GB",
    "MemoryEstimate",
    "memory_estimate",
    "model_state_bytes",
    "layer_activation_bytes",
    "hbm_capacity_gb",
]

#: HBM per GPU in GB (1e9 bytes), by hardware preset (vendor datasheets: H100 SXM5 80 GB,
#: H200 SXM 141 GB, GB200 NVL72 13.4 TB HBM3e over 72 GPUs = 186 GB, A100 SXM 80 GB, DGX B200
#: 1,440 GB over 8 GPUs = 180 GB, GB300 NVL72 20.7 TB over 72 GPUs = 288 GB).
HBM_GB: dict[str, float] = {
    "h100-sxm-80gb": 80.0,
    "h200-sxm-141gb": 141.0,
    "gb200-nvl72": 186.0,
    "a100-sxm-80gb": 80.0,
    "h100-2dc": 80.0,
    "b200-sxm-180gb": 180.0,
    "gb300-nvl72": 288.0,
}

_WEIGHT_BYTES = 2.0  # BF16 weights
_ADAM_BYTES = 12.0  # FP32 master weight, first and second moments


def hbm_capacity_gb(job: JobConfig, override_gb: float | None = None) -> float:
    """HBM per GPU in GB: ``override_gb`` if given, else the hardware preset's datasheet figure.

    Raises
    ------
    ConfigError
        For a custom hardware name without a known capacity and no override.
    """
    if override_gb is not None:
        if not override_gb > 0:
            raise ConfigError("--memory-gb", f"must be > 0, got {override_gb!r}")
        return float(override_gb)
    name = job.hardware.name
    if name not in HBM_GB:
        raise ConfigError(
            "--memory-gb",
            f"no HBM capacity known for hardware {name!r} (known: {', '.join(HBM_GB)});"
            " give the capacity per GPU in GB",
        )
    return HBM_GB[name]


def model_state_bytes(
    params: float, shard: int, sharding: str, *, grad_bytes: float = 4.0
) -> dict[str, float]:
    """Bytes of weights, gradients and Adam state for ``params`` parameters on one GPU.

    Parameters
    ----------
    params : float
        Parameters the GPU is responsible for before data-parallel sharding.
    shard : int
        Size of the group the state is sharded over (dp * cp).
    sharding : {"none", "zero1", "zero2", "fsdp"}
    grad_bytes : float
        Bytes per gradient element (``training.grad_reduce_bytes``).

    Returns
    -------
    dict
        ``weights``, ``grads``, ``optimizer`` in bytes.
    """
    d = float(shard)
    w, g, o = _WEIGHT_BYTES, float(grad_bytes), _ADAM_BYTES
    if sharding in ("zero1", "zero2", "fsdp"):
        o /= d
    if sharding in ("zero2", "fsdp"):
        g /= d
    if sharding == "fsdp":
        w /= d
    return {"weights": params * w, "grads": params * g, "optimizer": params * o}


def layer_activation_bytes(job: JobConfig) -> tuple[float, float]:
    """Activation bytes of one layer and one microbatch on one GPU.

    Korthikanti et al.'s count (their Sec. 4.1) with flash attention (no s^2 terms) and
    general attention/MLP widths: the norm output, Q, K, V and the attention output
    (``2 s b (h + 2 q + 2 kv)`` bytes), the MLP input, its up/gate outputs and the activation
    output (``2 s b (h + mats * ffn)``), both norms' inputs (``4 s b h``) and two 1-byte
    dropout masks (``2 s b h``). For GPT-3 (q = kv = h, GeLU, ffn = 4h) this is their
    ``34 s b h``; without sequence parallelism ``s b h (10 + 24 / tp)``.

    Returns
    -------
    tuple of float
        (bytes saved for backward, bytes of the layer's input alone, kept under full
        recomputation).
    """
    m, p = job.model, job.parallelism
    s, b, h, tp = m.seq_len / p.cp, p.micro_batch_size, m.hidden, p.tp
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    ffn = m.moe.expert_ffn * m.moe.top_k if m.moe is not None else m.ffn
    mats = 3 if m.mlp == "swiglu" else 2
    sb = s * b
    attn = 2 * sb * (h + 2 * q + 2 * kv)
    mlp = 2 * sb * (h + mats * ffn)
    norms = 4 * sb * h
    masks = 2 * sb * h
    total = attn + mlp + norms + masks
    if p.sequence_parallel or tp == 1:
        saved = total / tp
    else:
        # norms, masks and the inputs of attention and MLP are replicated over tp (10 s b h)
        replicated = norms + masks + 4 * sb * h
        saved = replicated + (total - replicated) / tp
    layer_input = 2 * sb * h / (tp if p.sequence_parallel else 1)
    return saved, layer_input


def _inflight_chunks(job: JobConfig) -> tuple[float, float]:
    """(microbatch-chunks in flight on the first stage, layers per chunk)."""
    m, p = job.model, job.parallelism
    slots = m.layers + (2 if p.embedding_in_pipeline_split else 0)
    if p.pp == 1:
        return 1.0, float(m.layers)  # gradient accumulation: one microbatch at a time
    per_chunk = slots / (p.pp * p.vpp)
    if p.schedule == "gpipe":
        return float(p.microbatches), per_chunk
    if p.schedule == "1f1b":
        return float(min(p.pp, p.microbatches)), per_chunk
    warmup = (p.pp - 1) * 2 + (p.vpp - 1) * p.pp + 1
    return float(min(warmup, p.microbatches * p.vpp)), per_chunk


@dataclass(frozen=True)
class MemoryEstimate:
    """Estimated peak bytes per GPU, by component, and the capacity it is compared with."""

    weights: float
    grads: float
    optimizer: float
    activations: float
    logits: float
    reserve: float
    capacity: float

    @property
    def total(self) -> float:
        """Sum of all components (bytes)."""
        return (
            self.weights
            + self.grads
            + self.optimizer
            + self.activations
            + self.logits
            + self.reserve
        )

    @property
    def fits(self) -> bool:
        """Whether the estimate is within the capacity."""
        return self.total <= self.capacity

    def to_dict(self) -> dict[str, float]:
        """Components in GB (1e9 bytes), the total and the capacity."""
        out = {f"{k}_gb": v / 1e9 for k, v in asdict(self).items()}
        out["total_gb"] = self.total / 1e9
        return out


def memory_estimate(
    job: JobConfig, *, capacity_gb: float | None = None, reserve_gb: float = 0.0
) -> MemoryEstimate:
    """Estimate the peak memory of one GPU of ``job`` (see the module docstring).

    Parameters
    ----------
    job : JobConfig
    capacity_gb : float, optional
        HBM per GPU; default: :data:`HBM_GB` of the job's hardware preset.
    reserve_gb : float
        Bytes set aside for CUDA context, communication buffers and fragmentation.

    Returns
    -------
    MemoryEstimate
    """
    from ..workload.mean_model import _stage_params

    if not reserve_gb >= 0:
        raise ConfigError("--reserve-gb", f"must be >= 0, got {reserve_gb!r}")
    p, t, m = job.parallelism, job.training, job.model
    capacity = hbm_capacity_gb(job, capacity_gb) * 1e9
    dense, expert = _stage_params(job)
    shard = p.dp * p.cp
    state = model_state_bytes(dense, shard, p.sharding, grad_bytes=t.grad_reduce_bytes)
    if expert:
        # experts are data-parallel over dp*cp/ep ranks (Megatron-Core expert-data-parallel)
        e = model_state_bytes(
            expert, max(1, shard // p.ep), p.sharding, grad_bytes=t.grad_reduce_bytes
        )
        state = {k: state[k] + e[k] for k in state}
    saved, layer_input = layer_activation_bytes(job)
    chunks, per_chunk = _inflight_chunks(job)
    if t.recompute == "full":
        activations = chunks * per_chunk * layer_input + saved
    else:
        activations = chunks * per_chunk * saved
    # FP32 logits of one microbatch on the last stage, split over tp (vocab-parallel)
    logits = 4.0 * m.seq_len / p.cp * p.micro_batch_size * m.vocab / p.tp
    return MemoryEstimate(
        weights=state["weights"],
        grads=state["grads"],
        optimizer=state["optimizer"],
        activations=activations,
        logits=logits,
        reserve=reserve_gb * 1e9,
        capacity=capacity,
    )
