"""FLOPs, bytes and parameter counts against closed forms and published sizes."""

from __future__ import annotations

import dataclasses

import pytest

from prism_analytic.workload.config import ConfigError, ModelConfig, MoEConfig, ParallelConfig
from prism_analytic.workload.flops import (
    BWD_ATTENTION_FACTOR,
    BWD_GEMM_FACTOR,
    attention_flops_per_token,
    embedding_ops,
    head_ops,
    layer_ops,
    model_flops_per_token,
    parameter_count,
)
from prism_analytic.workload.presets import MODELS, model_preset

# Published parameter counts: Llama 3 paper Table 3 / model cards (8.03B, 70.6B, 405B);
# GPT-3 paper (175B); Mistral AI (Mixtral 8x22B: 141B total, 39B active).
PUBLISHED = {
    "llama3-8b": (8.03e9, None),
    "llama3-70b": (70.6e9, None),
    "llama3-405b": (405e9, None),
    "gpt3-175b": (175e9, None),
    "mixtral-8x22b": (141e9, 39e9),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_published(name):
    total, active = PUBLISHED[name]
    pc = parameter_count(model_preset(name))
    assert pc.total == pytest.approx(total, rel=0.02)
    if active is not None:
        assert pc.active == pytest.approx(active, rel=0.02)
    else:
        assert pc.active == pc.total


def test_llama3_8b_exact_count():
    # 32 * (attention 41.9M + MLP 176.2M + 2 norms) + final norm + 2 * 128256 * 4096
    assert parameter_count(model_preset("llama3-8b")).total == 8_030_261_248


def test_model_flops_per_token_is_6n_plus_attention():
    m = model_preset("llama3-405b")
    n = parameter_count(m).matmul_active
    attn = 12 * m.layers * m.heads * m.head_dim * m.seq_len
    assert model_flops_per_token(m) == pytest.approx(6 * n + attn)
    assert model_flops_per_token(m, causal=True) == pytest.approx(6 * n + attn / 2)
    assert attention_flops_per_token(m) == pytest.approx(attn)


def test_matmul_params_exclude_lookup_tables():
    m = model_preset("llama3-8b")
    pc = parameter_count(m)
    # untied: the input table is a lookup (no FLOPs), the output projection a matmul
    norms = m.layers * 2 * m.hidden + m.hidden
    assert pc.matmul_active == pc.total - m.vocab * m.hidden - norms
    g = parameter_count(model_preset("gpt3-175b"))
    assert g.output == 0 and g.matmul_active < g.total


def _par(**kw) -> ParallelConfig:
    return ParallelConfig(**kw)


@pytest.mark.parametrize("name", ["llama3-8b", "gpt3-175b", "mixtral-8x22b"])
def test_layer_gemm_flops_are_two_per_matmul_param_per_token(name):
    m = model_preset(name)
    par = _par(tp=2, cp=2, micro_batch_size=2)
    ops = {o.name: o for o in layer_ops(m, par)}
    tokens = par.micro_batch_size * m.seq_len
    gemm = sum(o.fwd_flops for o in ops.values() if o.op_class == "gemm" and o.name != "router")
    pc = parameter_count(m)
    router = m.hidden * m.moe.experts if m.moe else 0
    per_layer = (pc.matmul_active - m.vocab * m.hidden) / m.layers - router
    assert gemm == pytest.approx(2 * per_layer * tokens / (par.tp * par.cp))
    if m.moe:  # the router is replicated over tp (no sequence parallelism here)
        assert ops["router"].fwd_flops == pytest.approx(2 * router * tokens / par.cp)


def test_backward_factors():
    for op in layer_ops(model_preset("llama3-70b"), _par(tp=8)):
        if op.op_class == "gemm":
            assert op.bwd_flops == BWD_GEMM_FACTOR * op.fwd_flops == 2 * op.fwd_flops
        elif op.op_class == "attention":
            assert op.bwd_flops == BWD_ATTENTION_FACTOR * op.fwd_flops
        else:
            assert op.fwd_flops == 0 and op.bwd_bytes > op.fwd_bytes > 0


def test_attention_core_is_causal_and_split():
    m = model_preset("llama3-405b")
    par = _par(tp=8, cp=4)
    attn = next(o for o in layer_ops(m, par) if o.name == "attention")
    s, a, d = m.seq_len, m.heads, m.head_dim
    assert attn.fwd_flops == pytest.approx(2 * s * s * a * d / (8 * 4))


def test_tp_and_cp_divide_every_gemm():
    m = model_preset("llama3-70b")
    one = {o.name: o.fwd_flops for o in layer_ops(m, _par())}
    split = {o.name: o.fwd_flops for o in layer_ops(m, _par(tp=4, cp=2))}
    for name, f in one.items():
        assert split[name] == pytest.approx(f / 8)


def test_gqa_shrinks_the_qkv_projection():
    mha = dataclasses.replace(model_preset("llama3-70b"), kv_heads=64)
    gqa = model_preset("llama3-70b")
    q = {o.name: o for o in layer_ops(gqa, _par())}["qkv_proj"].fwd_flops
    q_mha = {o.name: o for o in layer_ops(mha, _par())}["qkv_proj"].fwd_flops
    assert q / q_mha == pytest.approx((64 + 16) / (3 * 64))


def test_gelu_uses_two_matrices_swiglu_three():
    base = dict(layers=2, hidden=64, ffn=256, heads=4, vocab=100, seq_len=32)
    gelu = {o.name: o for o in layer_ops(ModelConfig(**base, mlp="gelu"), _par())}
    swi = {o.name: o for o in layer_ops(ModelConfig(**base), _par())}
    assert swi["mlp_up"].fwd_flops == 2 * gelu["mlp_up"].fwd_flops


def test_moe_flops_follow_top_k_not_experts_nor_ep():
    base = model_preset("mixtral-8x22b")
    par = _par(tp=2)
    k2 = {o.name: o for o in layer_ops(base, par)}
    more = dataclasses.replace(base, moe=MoEConfig(experts=64, top_k=2, expert_ffn=16384))
    k2_64 = {o.name: o for o in layer_ops(more, par)}
    assert k2_64["expert_up"].fwd_flops == pytest.approx(k2["expert_up"].fwd_flops)
    k1 = dataclasses.replace(base, moe=MoEConfig(experts=8, top_k=1, expert_ffn=16384))
    assert {o.name: o for o in layer_ops(k1, par)}["expert_up"].fwd_flops == pytest.approx(
        k2["expert_up"].fwd_flops / 2
    )
    ep = {o.name: o for o in layer_ops(base, _par(tp=2, ep=8))}
    assert ep["expert_up"].fwd_flops == k2["expert_up"].fwd_flops
    # ... but a GPU holding fewer experts reads fewer weight bytes
    assert ep["expert_up"].fwd_bytes < k2["expert_up"].fwd_bytes


def test_sequence_parallel_splits_norm_bytes():
    m = model_preset("llama3-70b")
    no = {o.name: o for o in layer_ops(m, _par(tp=8))}
    sp = {o.name: o for o in layer_ops(m, _par(tp=8, sequence_parallel=True))}
    assert sp["attn_norm"].fwd_bytes == pytest.approx(no["attn_norm"].fwd_bytes / 8)
    assert sp["qkv_proj"].fwd_flops == no["qkv_proj"].fwd_flops


def test_head_and_embedding_ops():
    m = model_preset("llama3-8b")
    par = _par(tp=2)
    head = {o.name: o for o in head_ops(m, par)}
    assert head["logits"].fwd_flops == pytest.approx(2 * m.seq_len * m.hidden * m.vocab / 2)
    (emb,) = embedding_ops(m, par)
    assert emb.op_class == "memory" and emb.fwd_flops == 0


def test_tp_must_divide_heads():
    with pytest.raises(ConfigError, match=r"^parallelism\.tp: "):
        layer_ops(model_preset("llama3-8b"), _par(tp=3))


def test_every_preset_has_positive_finite_costs():
    for m in MODELS.values():
        for op in layer_ops(m, _par()):
            for v in (op.fwd_flops, op.bwd_flops, op.fwd_bytes, op.bwd_bytes):
                assert v >= 0 and v == v and v != float("inf")
