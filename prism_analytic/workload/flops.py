"""FLOPs, HBM bytes and parameter counts of a decoder-only transformer.

Per-op costs are for ONE transformer layer, ONE microbatch, on ONE GPU after the
tensor- (tp) and context-parallel (cp) splits, in the notation of Megatron-LM
(Narayanan et al., SC'21; Korthikanti et al., MLSys'23):

    b micro_batch_size, s seq_len, h hidden, a heads, g kv_heads, d head_dim,
    f ffn, V vocab, t tp, c cp, T = b*s/c tokens held by one cp rank.

* GEMMs split their weight over tp, so every GEMM's FLOPs divide by t; tokens divide
  by c. A GEMM of [T, k] x [k, n] costs 2*T*k*n FLOPs forward and twice that backward
  (one GEMM for the input gradient, one for the weight gradient).
* Attention core (QK^T and AV): 2 * 2*b*s^2*a*d FLOPs forward per layer for the whole
  sequence, half of it with a causal mask (flash attention skips masked blocks), split
  over t (heads) and c (load-balanced causal chunks). Backward is 2.5x forward:
  flash attention's backward runs five matmuls against the forward's two, because it
  recomputes QK^T (Dao, FlashAttention-2, 2023).
* MoE: every token visits top_k experts, so with balanced routing each GPU does
  top_k times a dense expert MLP's work per token, split over expert tp (= tp). Expert
  parallelism (ep) spreads the experts' *weights* over ep GPUs (parameter memory and
  gradient bytes divide by ep) but not the per-GPU FLOPs.
* Memory-bound ops (norms, activations, residual adds, softmax-cross-entropy,
  embedding lookup, MoE permutation) are counted in HBM bytes; backward moves about
  twice the forward's bytes (reads the saved input and the incoming gradient, writes
  the input gradient).

Parameter counts reproduce published sizes (tested): Llama 3 8B 8.03B, 70B 70.6B, 405B
405.9B (Dubey et al. 2024, Table 3); GPT-3 175B 174.6B (Brown et al. 2020);
Mixtral 8x22B 140.6B total / 39.2B active (Mistral AI, 2024: 141B / 39B).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import ConfigError, ModelConfig, ParallelConfig

__all__ = [
    "OpCost",
    "ParamCount",
    "parameter_count",
    "layer_ops",
    "embedding_ops",
    "head_ops",
    "model_flops_per_token",
    "attention_flops_per_token",
    "BWD_GEMM_FACTOR",
    "BWD_ATTENTION_FACTOR",
    "BWD_MEMORY_FACTOR",
    "OUTPUT_LAYER_OPS",
]

#: Backward/forward FLOP ratio of a linear layer (input grad + weight grad).
BWD_GEMM_FACTOR = 2.0
#: Backward/forward FLOP ratio of flash attention (5 matmuls vs 2, recomputing QK^T).
BWD_ATTENTION_FACTOR = 2.5
#: Backward/forward HBM-bytes ratio of memory-bound ops.
BWD_MEMORY_FACTOR = 2.0

#: Ops of the output layer: low-precision training keeps them in BF16 unless told otherwise
#: (``training.logits_precision``).
OUTPUT_LAYER_OPS = ("logits",)

_ACT_BYTES = 2  # BF16 activations and weights
_OP_CLASSES = ("gemm", "attention", "memory")


@dataclass(frozen=True)
class OpCost:
    """Cost of one op for one microbatch on one GPU.

    Attributes
    ----------
    name : str
        Op name, e.g. ``"qkv_proj"``.
    op_class : {"gemm", "attention", "memory"}
        Which achieved efficiency applies.
    fwd_flops, bwd_flops : float
        Floating-point operations forward / backward.
    fwd_bytes, bwd_bytes : float
        HBM bytes moved forward / backward.
    """

    name: str
    op_class: str
    fwd_flops: float
    bwd_flops: float
    fwd_bytes: float
    bwd_bytes: float

    def __post_init__(self) -> None:
        if self.op_class not in _OP_CLASSES:  # pragma: no cover - internal
            raise ValueError(f"op_class must be one of {_OP_CLASSES}, got {self.op_class!r}")


@dataclass(frozen=True)
class ParamCount:
    """Parameter counts of a model.

    Attributes
    ----------
    total : int
        All parameters (every expert).
    active : int
        Parameters touched per token (top_k experts); equals ``total`` for dense models.
    embedding : int
        Input embedding (and learned positions); the output projection when tied.
    output : int
        Untied output projection (0 when tied).
    per_layer : int
        One transformer layer, all experts.
    per_layer_active : int
        One transformer layer, top_k experts.
    per_layer_experts : int
        The routed experts' share of ``per_layer`` (0 for dense models).
    matmul_active : int
        Active parameters that take part in a matmul per token: ``active`` minus the
        embedding lookup tables, norms and biases (the logits matmul counts, tied or
        not). This is the N of the 6N MFU convention.
    """

    total: int
    active: int
    embedding: int
    output: int
    per_layer: int
    per_layer_active: int
    per_layer_experts: int
    matmul_active: int
    details: dict[str, int] = field(default_factory=dict, compare=False)


def _layer_parts(m: ModelConfig) -> dict[str, int]:
    h, a, g, d = m.hidden, m.heads, m.kv_heads, m.head_dim
    q_out, kv_out = a * d, g * d
    parts = {
        "attn_weights": h * q_out + 2 * h * kv_out + q_out * h,
        "attn_bias": (q_out + 2 * kv_out + h) if m.bias else 0,
        "norms": 2 * h * (2 if m.norm == "layernorm" else 1),
    }
    mats = 3 if m.mlp == "swiglu" else 2
    if m.moe is None:
        parts["mlp_weights"] = mats * h * m.ffn
        parts["mlp_bias"] = ((mats - 1) * m.ffn + h) if m.bias else 0
        parts["router"] = 0
        parts["expert_weights"] = 0
        parts["expert_weights_active"] = 0
    else:
        one = mats * h * m.moe.expert_ffn + (((mats - 1) * m.moe.expert_ffn + h) if m.bias else 0)
        parts["mlp_weights"] = 0
        parts["mlp_bias"] = 0
        parts["router"] = h * m.moe.experts
        parts["expert_weights"] = m.moe.experts * one
        parts["expert_weights_active"] = m.moe.top_k * one
    return parts


def parameter_count(model: ModelConfig) -> ParamCount:
    """Count parameters.

    Parameters
    ----------
    model : ModelConfig

    Returns
    -------
    ParamCount

    Examples
    --------
    >>> from prism_analytic.workload.presets import model_preset
    >>> round(parameter_count(model_preset("llama3-8b")).total / 1e9, 2)
    8.03
    """
    m = model
    p = _layer_parts(m)
    dense_layer = p["attn_weights"] + p["attn_bias"] + p["norms"] + p["mlp_weights"] + p["mlp_bias"]
    per_layer = dense_layer + p["router"] + p["expert_weights"]
    per_layer_active = dense_layer + p["router"] + p["expert_weights_active"]
    final_norm = m.hidden * (2 if m.norm == "layernorm" else 1)
    embedding = m.vocab * m.hidden + (m.seq_len * m.hidden if m.position == "learned" else 0)
    output = 0 if m.tied_embeddings else m.vocab * m.hidden
    total = m.layers * per_layer + final_norm + embedding + output
    active = m.layers * per_layer_active + final_norm + embedding + output
    mats = 3 if m.mlp == "swiglu" else 2
    if m.moe is None:
        mlp_matmul = mats * m.hidden * m.ffn
    else:
        mlp_matmul = m.moe.top_k * mats * m.hidden * m.moe.expert_ffn
    layer_matmul = p["attn_weights"] + p["router"] + mlp_matmul
    matmul_active = m.layers * layer_matmul + m.vocab * m.hidden
    return ParamCount(
        total=total,
        active=active,
        embedding=embedding,
        output=output,
        per_layer=per_layer,
        per_layer_active=per_layer_active,
        per_layer_experts=p["expert_weights"],
        matmul_active=matmul_active,
        details=p,
    )


def attention_flops_per_token(model: ModelConfig, *, causal: bool = False) -> float:
    """Attention-core FLOPs per token, forward + backward, at full sequence length.

    ``12 * layers * heads * head_dim * seq_len`` (PaLM, Chowdhery et al. 2022, App. B),
    halved when ``causal`` counts only the unmasked half.
    """
    m = model
    full = 12.0 * m.layers * m.heads * m.head_dim * m.seq_len
    return full / 2 if causal else full


def model_flops_per_token(model: ModelConfig, *, causal: bool = False) -> float:
    """Model FLOPs per trained token, the numerator of MFU.

    ``6 * N + 12 * L * a * d * s`` with N the active matmul parameters
    (:attr:`ParamCount.matmul_active`): PaLM's definition (Chowdhery et al. 2022,
    App. B). It excludes recomputation and counts the attention core unmasked unless
    ``causal=True``; published MFUs rarely say which convention they use, and at long
    context it matters (at 128k tokens the attention term exceeds 6N for Llama 3 405B).

    Examples
    --------
    >>> from prism_analytic.workload.presets import model_preset
    >>> f"{model_flops_per_token(model_preset('llama3-405b')):.3e}"
    '2.625e+12'
    """
    n = parameter_count(model).matmul_active
    return 6.0 * n + attention_flops_per_token(model, causal=causal)


def _check_split(model: ModelConfig, par: ParallelConfig) -> None:
    if model.heads % par.tp or model.kv_heads % par.tp:
        raise ConfigError(
            "parallelism.tp",
            f"must divide model.heads ({model.heads}) and model.kv_heads ({model.kv_heads}),"
            f" got {par.tp}",
        )


def _gemm(name: str, tokens: float, k: float, n: float, weight_copies: float = 1.0) -> OpCost:
    # weight_copies > 1: a grouped GEMM over several local experts reads each one's weights
    flops = 2.0 * tokens * k * n
    nbytes = _ACT_BYTES * (tokens * k + weight_copies * k * n + tokens * n)
    return OpCost(name, "gemm", flops, BWD_GEMM_FACTOR * flops, nbytes, BWD_GEMM_FACTOR * nbytes)


def _mem(name: str, nbytes: float) -> OpCost:
    return OpCost(name, "memory", 0.0, 0.0, nbytes, BWD_MEMORY_FACTOR * nbytes)


def layer_ops(model: ModelConfig, parallel: ParallelConfig) -> tuple[OpCost, ...]:
    """Ops of one transformer layer for one microbatch on one GPU, in execution order.

    Parameters
    ----------
    model : ModelConfig
    parallel : ParallelConfig
        Uses tp, cp, micro_batch_size and sequence_parallel.

    Returns
    -------
    tuple of OpCost
        ``attn_norm, qkv_proj, rope, attention, out_proj, attn_residual, mlp_norm``, then
        ``mlp_up, mlp_act, mlp_down`` (dense) or ``router, moe_permute, expert_up,
        expert_act, expert_down, moe_unpermute`` (MoE), then ``mlp_residual``.
    """
    _check_split(model, parallel)
    m, t, c = model, parallel.tp, parallel.cp
    b, s, h = parallel.micro_batch_size, m.seq_len, m.hidden
    a, g, d = m.heads, m.kv_heads, m.head_dim
    tok = b * s / c  # tokens per cp rank
    # Sequence parallelism splits the token dimension of norms/residuals over tp too.
    tok_sp = tok / t if parallel.sequence_parallel else tok
    norm_bytes = _ACT_BYTES * 2 * tok_sp * h  # read x, write y
    resid_bytes = _ACT_BYTES * 3 * tok_sp * h  # read x and y, write x + y
    ops: list[OpCost] = [
        _mem("attn_norm", norm_bytes),
        _gemm("qkv_proj", tok, h, (a + 2 * g) * d / t),
        _mem("rope", _ACT_BYTES * 2 * tok * (a + g) * d / t),
    ]
    attn_fwd = 4.0 * b * s * s * a * d / 2.0 / (t * c)  # causal: half of QK^T + AV
    attn_bytes = _ACT_BYTES * tok * (2 * a + 2 * g) * d / t  # read Q, K, V; write O
    ops.append(
        OpCost(
            "attention",
            "attention",
            attn_fwd,
            BWD_ATTENTION_FACTOR * attn_fwd,
            attn_bytes,
            BWD_MEMORY_FACTOR * attn_bytes,
        )
    )
    ops += [
        _gemm("out_proj", tok, a * d / t, h),
        _mem("attn_residual", resid_bytes),
        _mem("mlp_norm", norm_bytes),
    ]
    gated = m.mlp == "swiglu"
    if m.moe is None:
        f = m.ffn / t
        ops += [
            _gemm("mlp_up", tok, h, (2 if gated else 1) * f),
            _mem("mlp_act", _ACT_BYTES * (3 if gated else 2) * tok * f),
            _gemm("mlp_down", tok, f, h),
        ]
    else:
        k, e, fe = m.moe.top_k, m.moe.experts, m.moe.expert_ffn / t
        routed = tok * k  # token-expert pairs this GPU computes (balanced routing)
        local = e / parallel.ep  # experts whose weights live on this GPU
        ops += [
            _gemm("router", tok_sp, h, e),
            _mem("moe_permute", _ACT_BYTES * 2 * routed * h),
            _gemm("expert_up", routed, h, (2 if gated else 1) * fe, weight_copies=local),
            _mem("expert_act", _ACT_BYTES * (3 if gated else 2) * routed * fe),
            _gemm("expert_down", routed, fe, h, weight_copies=local),
            _mem("moe_unpermute", _ACT_BYTES * 2 * routed * h),
        ]
    ops.append(_mem("mlp_residual", resid_bytes))
    return tuple(ops)


def embedding_ops(model: ModelConfig, parallel: ParallelConfig) -> tuple[OpCost, ...]:
    """The input embedding lookup (first pipeline stage), one microbatch, one GPU."""
    tok = parallel.micro_batch_size * model.seq_len / parallel.cp
    return (_mem("embedding", _ACT_BYTES * 2 * tok * model.hidden),)


def head_ops(model: ModelConfig, parallel: ParallelConfig) -> tuple[OpCost, ...]:
    """Final norm, vocab-parallel logits GEMM and cross-entropy (last pipeline stage)."""
    m, t = model, parallel.tp
    tok = parallel.micro_batch_size * m.seq_len / parallel.cp
    tok_sp = tok / t if parallel.sequence_parallel else tok
    logits = tok * m.vocab / t
    # cross-entropy: write BF16 logits, then read/write them in FP32 for the softmax
    return (
        _mem("final_norm", _ACT_BYTES * 2 * tok_sp * m.hidden),
        _gemm("logits", tok, m.hidden, m.vocab / t),
        _mem("cross_entropy", (2 + 4 + 4) * logits),
    )
