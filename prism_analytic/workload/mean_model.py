"""Deterministic first-principles step time: the *mean* path, no randomness.

This module turns a :class:`~prism_analytic.workload.config.JobConfig` into

* :func:`op_means`: the mean duration of every op the step DAG is built from (per
  layer per microbatch compute by op, tp/cp/ep collectives, pipeline p2p, dp/FSDP
  collectives, optimizer), with how much of each is *exposed* after overlap;
* the closed-form step time from those means is :mod:`.step_estimate`.

Cost model (one GPU of the slowest pipeline stage):

* compute op: ``max(flops / (peak * eff_class), bytes / (hbm * eff_memory))`` — a
  roofline with achieved efficiencies per op class; GEMMs use the training precision's
  peak (FP8 or BF16), attention the peak of ``training.attention_precision`` (BF16 unless
  FP8 attention is set), the logits GEMM BF16's unless ``training.logits_precision`` is "same".
* communication: alpha-beta times of :mod:`.collectives` on the tier(s) the group
  spans; exposed part ``max(0, c - f * w)`` with overlap efficiency ``f`` from
  ``parallelism.overlap`` and window ``w`` = the compute it can hide behind: the
  adjacent GEMM (tp), the attention kernel (cp), the expert GEMM (ep), a chunk's
  forward (pp steady-state sends), a microbatch's stage backward/forward (dp).
* pipeline: ``(m + (p - 1) / v) * t_stage`` with ``t_stage`` the slowest stage's
  forward + backward per microbatch (all its v chunks), i.e. bubble fraction
  ``(p - 1) / (v m)`` for 1F1B/GPipe (v = 1) and interleaved; plus ``2 (p - 1)`` p2p hops
  during fill and drain that nothing hides.
* step: pipeline + exposed per-step dp communication + optimizer + fixed overhead.
* MFU = model FLOPs per step / (step time * GPUs * BF16 peak), model FLOPs from
  :func:`~prism_analytic.workload.flops.model_flops_per_token` (6N + attention).

What it leaves out (each is either in the achieved GEMM efficiency or the DAG's job):
GPU frequency effects, load imbalance between MoE experts, stragglers and every other
source of variance. Kernel launch gaps are left out unless ``training.kernel_launch_s`` is
set (see :func:`launch_gap_s`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from . import collectives as coll
from .config import JobConfig, Layout, LayoutWarning, validate_layout
from .flops import (
    OUTPUT_LAYER_OPS,
    OpCost,
    embedding_ops,
    head_ops,
    layer_ops,
    parameter_count,
)

__all__ = ["OpMean", "OpMeans", "launch_gap_s", "op_means"]


@dataclass(frozen=True)
class OpMean:
    """Mean cost of one execution of one op on one GPU.

    Attributes
    ----------
    name : str
        E.g. ``"qkv_proj"``, ``"tp_allgather_attn"``, ``"dp_grad_reduce_scatter"``.
    kind : {"compute", "collective", "p2p"}
    op_class : str
        Compute: ``"gemm"``, ``"attention"``, ``"memory"``. Communication: ``"allreduce"``,
        ``"allgather"``, ``"reduce_scatter"``, ``"alltoall"``, ``"p2p"``.
    phase : {"fwd", "bwd", "step"}
    seconds : float
        Mean duration of one execution.
    exposed_s : float
        The part on the critical path after overlap (``seconds`` for compute).
    group : str or None
        Parallel dimension of a communication: ``"tp"``, ``"cp"``, ``"ep"``, ``"pp"``,
        ``"dp"``, ``"edp"`` (expert data parallel).
    group_size : int
        Participants (1 for compute).
    tier : str or None
        Slowest tier crossed: ``"intra_node"``, ``"inter_node"``, ``"cross_dc"``.
    nbytes : float
        Buffer size (collectives as in :mod:`.collectives`) or HBM bytes (compute).
    flops : float
    count : int
        Executions per container unit (e.g. ``cp-1`` ring steps folded into one op).
    hidden_s : float or None
        Communication only: the compute time one execution can hide behind (overlap
        efficiency times window), so that a noisy instance is exposed for
        ``max(0, seconds * noise - hidden_s)`` (the step builder draws the noise per
        instance); None for compute and where nothing overlaps.
    """

    name: str
    kind: str
    op_class: str
    phase: str
    seconds: float
    exposed_s: float
    group: str | None = None
    group_size: int = 1
    tier: str | None = None
    nbytes: float = 0.0
    flops: float = 0.0
    count: int = 1
    hidden_s: float | None = None


def total_seconds(ops: Iterable[OpMean], exposed: bool = True) -> float:
    """Total time of ``ops`` (count x seconds), exposed part only unless ``exposed=False``."""
    return math.fsum(o.count * (o.exposed_s if exposed else o.seconds) for o in ops)


@dataclass(frozen=True)
class OpMeans:
    """Per-op means of a job, grouped by where they occur in the step.

    Attributes
    ----------
    layer_fwd, layer_bwd : tuple of OpMean
        One transformer layer, one microbatch, in execution order: compute ops and the
        tp/cp/ep communication they issue (``recompute_*`` ops in backward under full
        recomputation).
    embedding_fwd, embedding_bwd : tuple of OpMean
        First pipeline stage, one microbatch.
    head_fwd, head_bwd : tuple of OpMean
        Last pipeline stage (final norm, logits, loss), one microbatch.
    pp_send : OpMean or None
        One activation (forward) or gradient (backward) transfer between adjacent
        pipeline chunks, one microbatch; ``None`` when pp = 1.
    dp_microbatch : tuple of OpMean
        Data-parallel communication repeated every microbatch (ZeRO-2, FSDP).
    dp_step : tuple of OpMean
        Data-parallel communication once per step (gradient sync, parameter gather).
    optimizer : OpMean
        The optimizer update, once per step.
    layers_per_chunk : int
        Transformer layers per model chunk (virtual stage) of a middle stage.
    chunks_per_stage : int
        vpp.
    stages : int
        pp.
    microbatches : int
        Per data-parallel rank per step.
    first_stage_layers, last_stage_layers : int
        Transformer layers on the first/last stage (one fewer per end with
        ``embedding_in_pipeline_split``).
    """

    layer_fwd: tuple[OpMean, ...]
    layer_bwd: tuple[OpMean, ...]
    embedding_fwd: tuple[OpMean, ...]
    embedding_bwd: tuple[OpMean, ...]
    head_fwd: tuple[OpMean, ...]
    head_bwd: tuple[OpMean, ...]
    pp_send: OpMean | None
    dp_microbatch: tuple[OpMean, ...]
    dp_step: tuple[OpMean, ...]
    optimizer: OpMean
    layers_per_chunk: int
    chunks_per_stage: int
    stages: int
    microbatches: int
    first_stage_layers: int
    last_stage_layers: int

    @property
    def layer_fwd_s(self) -> float:
        """Exposed time of one layer's forward (compute + exposed comm)."""
        return total_seconds(self.layer_fwd)

    @property
    def layer_bwd_s(self) -> float:
        """Exposed time of one layer's backward."""
        return total_seconds(self.layer_bwd)

    def compute_by_class(self, phase: str = "fwd") -> dict[str, float]:
        """One layer's compute seconds by op class (``gemm``, ``attention``, ``memory``)."""
        ops = self.layer_fwd if phase == "fwd" else self.layer_bwd
        out = {"gemm": 0.0, "attention": 0.0, "memory": 0.0}
        for o in ops:
            if o.kind == "compute":
                out[o.op_class] += o.count * o.seconds
        return out

    def comm_by_group(self, phase: str = "fwd") -> dict[str, float]:
        """One layer's communication seconds (not exposure) by parallel group."""
        ops = self.layer_fwd if phase == "fwd" else self.layer_bwd
        out: dict[str, float] = {}
        for o in ops:
            if o.kind != "compute":
                out[o.group or "?"] = out.get(o.group or "?", 0.0) + o.count * o.seconds
        return out

    def summary(self) -> str:
        """Per-layer times in milliseconds."""
        comp = self.compute_by_class("fwd")
        comm = self.comm_by_group("fwd")
        return (
            f"layer fwd {self.layer_fwd_s * 1e3:.3f} ms exposed (gemm {comp['gemm'] * 1e3:.3f},"
            f" attention {comp['attention'] * 1e3:.3f}, memory {comp['memory'] * 1e3:.3f},"
            f" comm {', '.join(f'{g} {v * 1e3:.3f}' for g, v in comm.items()) or 'none'});"
            f" layer bwd {self.layer_bwd_s * 1e3:.3f} ms; {self.stages} stages x"
            f" {self.chunks_per_stage} chunks x {self.layers_per_chunk} layers,"
            f" {self.microbatches} microbatches"
        )

    def to_dict(self) -> dict:
        """Nested plain dict."""
        return asdict(self)


# --------------------------------------------------------------------------------------
def _compute(job: JobConfig, op: OpCost, phase: str) -> OpMean:
    hw, eff = job.hardware, job.hardware.efficiency
    flops = op.fwd_flops if phase == "fwd" else op.bwd_flops
    nbytes = op.fwd_bytes if phase == "fwd" else op.bwd_bytes
    mem_s = nbytes / (hw.hbm_bandwidth * eff.memory)
    if op.op_class == "gemm":
        prec = job.training.precision
        if op.name in OUTPUT_LAYER_OPS and job.training.logits_precision == "bf16":
            prec = "bf16"  # the output layer sits outside the FP8/FP4 autocast
        flop_s = flops / (hw.peak_flops.for_dtype(prec) * eff.for_precision(prec))
    elif op.op_class == "attention":
        flop_s = flops / (hw.peak_flops.for_dtype(job.training.attention_precision) * eff.attention)
    else:
        flop_s = 0.0
    s = max(flop_s, mem_s)
    return OpMean(op.name, "compute", op.op_class, phase, s, s, nbytes=nbytes, flops=flops)


def _exposed(comm_s: float, overlap: float, window_s: float) -> float:
    return max(0.0, comm_s - overlap * window_s)


def _comm(
    name: str,
    kind: str,
    phase: str,
    seconds: float,
    exposed: float,
    group: str,
    levels: tuple[coll.Level, ...],
    nbytes: float,
    count: int = 1,
    hidden: float | None = None,
) -> OpMean:
    size = math.prod(lv.size for lv in levels)
    return OpMean(
        name,
        "p2p" if kind == "p2p" else "collective",
        kind,
        phase,
        seconds,
        exposed,
        group,
        size,
        levels[-1].tier.name,
        nbytes,
        0.0,
        count,
        hidden,
    )


def _levels(job: JobConfig, group: str) -> tuple[coll.Level, ...]:
    p, hw = job.parallelism, job.hardware
    if hw.nvlink_domain_used is not None:  # ranks fill only the used part of each domain
        hw = dataclasses.replace(hw, nvlink_domain=hw.nvlink_domain_used)
    pp_inner = p.rank_order == "tp-cp-pp-dp"
    if group == "tp":
        return coll.placement_levels(p.tp, 1, hw)
    if group == "cp":
        return coll.placement_levels(p.cp, p.tp, hw)
    if group == "ep":
        return coll.placement_levels(p.ep, p.tp, hw)
    if group == "pp":
        return coll.placement_levels(p.pp, p.tp * p.cp * (1 if pp_inner else p.dp), hw)
    dc = hw.datacenters
    per_dc = job.gpus // dc
    if pp_inner and group == "dp" and p.tp * p.cp <= hw.nvlink_domain:
        # dp ranks sit a whole pipeline replica apart; the cp ranks of each stay together
        outer = (
            coll.placement_levels(
                p.dp,
                p.tp * p.cp * p.pp,
                hw,
                datacenters=dc if p.dp > 1 else 1,
                gpus_per_dc_concurrent=per_dc,
            )
            if p.dp > 1
            else ()
        )
        inner = (coll.Level(p.cp, coll.intra_node_tier(hw)),) if p.cp > 1 else ()
        if outer and inner and outer[0].tier.name == "intra_node":
            outer = (coll.Level(p.cp * outer[0].size, outer[0].tier),) + outer[1:]
            inner = ()
        return (inner + outer) or (coll.Level(1, coll.intra_node_tier(hw)),)
    if group == "dp":
        size, stride = p.dp * p.cp, p.tp
    else:  # expert data parallel: the dp x cp ranks that hold the same experts
        size, stride = p.dp * p.cp // p.ep, p.tp * p.ep * (p.pp if pp_inner else 1)
    try:
        return coll.placement_levels(
            size, stride, hw, datacenters=dc if size > 1 else 1, gpus_per_dc_concurrent=per_dc
        )
    except ValueError:
        # the group does not fill whole domains per datacenter: treat DCs as one more level
        inner = coll.placement_levels(max(1, size // dc), stride, hw)
        return inner + (coll.Level(dc, coll.cross_dc_tier(hw, per_dc)),)


def _layer_comms(job: JobConfig, comp: dict[str, OpMean], phase: str) -> dict[str, list[OpMean]]:
    """Communication issued around the compute ops of one layer.

    Returns ``{"<op>:before" | "<op>:after": [comm ops]}``, positions in *forward* order
    (the backward sequence walks the layer in reverse, so "before" comes after).
    """
    p, m = job.parallelism, job.model
    ov = p.overlap
    out: dict[str, list[OpMean]] = {}
    act = 2.0 * p.micro_batch_size * m.seq_len / p.cp * m.hidden  # [T, h] in BF16
    moe = m.moe is not None
    up, down = ("expert_up", "expert_down") if moe else ("mlp_up", "mlp_down")
    # the MoE block's tp collectives carry the routed token copies
    size = {"attn": act, "mlp": act * (m.moe.top_k if moe else 1)}
    if p.tp > 1:
        lv = _levels(job, "tp")
        if p.sequence_parallel:
            pairs = [
                ("qkv_proj", "allgather", "attn", "before"),
                ("out_proj", "reduce_scatter", "attn", "after"),
                (up, "allgather", "mlp", "before"),
                (down, "reduce_scatter", "mlp", "after"),
            ]
        elif phase == "fwd":  # Megatron's g operator: AllReduce after the row-parallel GEMM
            pairs = [
                ("out_proj", "allreduce", "attn", "after"),
                (down, "allreduce", "mlp", "after"),
            ]
        else:  # f operator's backward: AllReduce of the input gradient of the column GEMM
            pairs = [
                ("qkv_proj", "allreduce", "attn", "before"),
                (up, "allreduce", "mlp", "before"),
            ]
        for anchor, kind, block, where in pairs:
            c = coll.collective_time(kind, size[block], lv)
            e = _exposed(c, ov.tp, comp[anchor].seconds)
            # backward mirrors forward: AllGather <-> ReduceScatter, AllReduce stays
            k = (
                kind
                if phase == "fwd"
                else {"allgather": "reduce_scatter", "reduce_scatter": "allgather"}.get(kind, kind)
            )
            hid = ov.tp * comp[anchor].seconds
            op = _comm(f"tp_{k}_{block}", k, phase, c, e, "tp", lv, size[block], hidden=hid)
            out.setdefault(f"{anchor}:{where}", []).append(op)
    if p.cp > 1:
        lv = _levels(job, "cp")
        kv = 2.0 * 2 * p.micro_batch_size * m.seq_len / p.cp * m.kv_heads * m.head_dim / p.tp
        nbytes = kv if phase == "fwd" else 2 * kv  # backward returns dK, dV as well
        step = coll.p2p_time(nbytes, lv[-1].tier)
        total = (p.cp - 1) * step
        e = _exposed(total, ov.cp, comp["attention"].seconds)
        out.setdefault("attention:before", []).append(
            _comm(
                "cp_kv_exchange",
                "p2p",
                phase,
                step,
                e / (p.cp - 1),
                "cp",
                lv,
                nbytes,
                count=p.cp - 1,
                hidden=ov.cp * comp["attention"].seconds / (p.cp - 1),
            )
        )
    if moe and p.ep > 1:
        lv = _levels(job, "ep")
        tok = p.micro_batch_size * m.seq_len / p.cp / (p.tp if p.sequence_parallel else 1)
        nbytes = 2.0 * tok * m.moe.top_k * m.hidden
        c = coll.collective_time("alltoall", nbytes, lv)
        for name, at, anchor in (
            ("ep_dispatch", "moe_permute:after", "expert_up"),
            ("ep_combine", "moe_unpermute:before", "expert_down"),
        ):
            w = comp[anchor].seconds
            e = _exposed(c, ov.ep, w)
            op = _comm(name, "alltoall", phase, c, e, "ep", lv, nbytes, hidden=ov.ep * w)
            out.setdefault(at, []).append(op)
    return out


def _layer_sequence(job: JobConfig, phase: str) -> tuple[OpMean, ...]:
    ops = layer_ops(job.model, job.parallelism)
    comp = {op.name: _compute(job, op, phase) for op in ops}
    comms = _layer_comms(job, comp, phase)
    seq: list[OpMean] = []
    order = list(ops) if phase == "fwd" else list(reversed(ops))
    for op in order:
        seq += comms.get(f"{op.name}:before" if phase == "fwd" else f"{op.name}:after", [])
        seq.append(comp[op.name])
        seq += comms.get(f"{op.name}:after" if phase == "fwd" else f"{op.name}:before", [])
    if phase == "bwd" and job.training.recompute == "full":
        fwd = _layer_sequence(job, "fwd")
        seq = [_as_recompute(o) for o in fwd] + seq
    return tuple(seq)


def _as_recompute(o: OpMean) -> OpMean:
    d = asdict(o)
    d.update(name="recompute_" + o.name, phase="bwd")
    return OpMean(**d)


def _stage_params(job: JobConfig) -> tuple[float, float]:
    """(dense, expert) parameters held by one GPU of the stage with the most of them."""
    m, p = job.model, job.parallelism
    pc = parameter_count(m)
    dense_layer = pc.per_layer - pc.per_layer_experts
    if p.pp == 1:
        layers = m.layers
        dense = layers * dense_layer + pc.embedding + pc.output
    else:
        e = 1 if p.embedding_in_pipeline_split else 0
        layers = (m.layers + 2 * e) // p.pp
        # the first stage trades e layers for the embedding, the last for the output layer
        dense = max(
            layers * dense_layer,
            (layers - e) * dense_layer + pc.embedding,
            (layers - e) * dense_layer + pc.output,
        )
    expert = layers * pc.per_layer_experts / p.ep
    return dense / p.tp, expert / p.tp


def launch_gap_s(job: JobConfig, ops: Iterable[OpMean]) -> float:
    """GPU idle time of one pass over ``ops`` while the CPU launches their kernels.

    The host issues the pass's ``n`` kernels (each op's ``count``) one after another at
    ``training.launch_s_per_kernel`` each, while the GPU runs them in their exposed time
    ``T``; when launching takes longer the pass is CPU-bound and the GPU waits
    ``n * launch - T``. Kernels queue, so short kernels behind long ones cost nothing; the
    lead a GPU-bound pass builds is not carried into the next pass (pessimistic there).

    Parameters
    ----------
    job : JobConfig
    ops : iterable of OpMean
        One pass (a layer's forward or backward for one microbatch, the embedding, the head).

    Returns
    -------
    float
        ``max(0, n * launch - T)`` in seconds; 0 when ``training.kernel_launch_s`` is 0.

    Examples
    --------
    >>> ops = (OpMean("a", "compute", "memory", "fwd", 1e-6, 1e-6),) * 10
    >>> from prism_analytic.workload.presets import preset_job
    >>> import dataclasses
    >>> job = preset_job("llama3-8b", 8)
    >>> job = dataclasses.replace(
    ...     job, training=dataclasses.replace(job.training, kernel_launch_s=3e-6))
    >>> round(launch_gap_s(job, ops) * 1e6, 6)  # 10 x 3 us of launches vs 10 x 1 us of work
    20.0
    """
    ops = tuple(ops)
    per_kernel = job.training.launch_s_per_kernel
    if per_kernel <= 0 or not ops:
        return 0.0
    kernels = sum(o.count for o in ops)
    return max(0.0, kernels * per_kernel - total_seconds(ops))


def _launch_bound(job: JobConfig, ops: tuple[OpMean, ...]) -> tuple[OpMean, ...]:
    """``ops`` with a CPU-bound pass's launch gap spread over its compute kernels.

    The gap is added to the compute ops in proportion to their time, so the pass lasts
    ``n * launch`` and the step DAG keeps its ops (their noise scales with them).
    """
    gap = launch_gap_s(job, ops)
    compute = math.fsum(o.count * o.seconds for o in ops if o.kind == "compute")
    if gap <= 0 or compute <= 0:
        return ops
    f = 1.0 + gap / compute
    return tuple(
        dataclasses.replace(o, seconds=o.seconds * f, exposed_s=o.exposed_s * f)
        if o.kind == "compute"
        else o
        for o in ops
    )


def op_means(job: JobConfig) -> OpMeans:
    """Mean duration of every op of the step, per GPU.

    Parameters
    ----------
    job : JobConfig

    Returns
    -------
    OpMeans

    Examples
    --------
    >>> from prism_analytic.workload.presets import preset_job
    >>> om = op_means(preset_job("llama3-405b", 16384))
    >>> [o.name for o in om.layer_fwd][:4]
    ['attn_norm', 'tp_allgather_attn', 'qkv_proj', 'rope']
    """
    p, m, t = job.parallelism, job.model, job.training
    with warnings.catch_warnings():  # a valid-but-slow layout still gets its numbers
        warnings.simplefilter("ignore", LayoutWarning)
        validate_layout(job)
    layer_fwd = _layer_sequence(job, "fwd")
    layer_bwd = _layer_sequence(job, "bwd")
    emb = embedding_ops(m, p)
    head = head_ops(m, p)
    emb_f = tuple(_compute(job, o, "fwd") for o in emb)
    emb_b = tuple(_compute(job, o, "bwd") for o in emb)
    head_f = tuple(_compute(job, o, "fwd") for o in head)
    head_b = tuple(_compute(job, o, "bwd") for o in head)
    if t.recompute == "full":
        head_b = tuple(_as_recompute(o) for o in head_f) + head_b
    if t.launch_s_per_kernel > 0:  # CPU-bound passes wait for their kernel launches
        layer_fwd, layer_bwd, emb_f, emb_b, head_f, head_b = (
            _launch_bound(job, ops) for ops in (layer_fwd, layer_bwd, emb_f, emb_b, head_f, head_b)
        )

    per_chunk = Layout.of(job).slots_per_chunk
    per_stage = per_chunk * p.vpp
    end_layers = per_stage - (1 if p.embedding_in_pipeline_split else 0)
    if p.pp == 1:
        per_stage, end_layers = m.layers, m.layers

    pp_send = None
    if p.pp > 1:
        lv = _levels(job, "pp")
        tier = lv[-1].tier
        act = 2.0 * p.micro_batch_size * m.seq_len / p.cp * m.hidden
        act /= p.tp if p.sequence_parallel else 1
        s = coll.p2p_time(act, tier)
        chunk_fwd = per_chunk * total_seconds(layer_fwd)
        pp_send = _comm(
            "pp_send",
            "p2p",
            "fwd",
            s,
            _exposed(s, p.overlap.pp, chunk_fwd),
            "pp",
            lv,
            act,
            hidden=p.overlap.pp * chunk_fwd,
        )

    # data-parallel traffic
    dense, expert = _stage_params(job)
    hw = job.hardware
    stage_fwd_c = per_stage * total_seconds(layer_fwd)
    stage_bwd_c = per_stage * total_seconds(layer_bwd)
    ov = p.overlap.dp
    dp_mb: list[OpMean] = []
    dp_step: list[OpMean] = []
    groups = [("dp", dense)] + ([("edp", expert)] if expert > 0 else [])
    for g, nparam in groups:
        lv = _levels(job, g)
        size = math.prod(x.size for x in lv)
        if size == 1 or nparam == 0:
            continue
        grad, par = nparam * t.grad_reduce_bytes, nparam * t.param_gather_bytes

        def dpc(name, kind, phase, c, exposed, nbytes, hidden, g=g, lv=lv):
            return _comm(f"{g}_{name}", kind, phase, c, exposed, g, lv, nbytes, hidden=hidden)

        hf, hb = ov * stage_fwd_c, ov * stage_bwd_c  # compute each can hide behind
        if p.sharding == "none":
            c = coll.collective_time("allreduce", grad, lv)
            exp_c = _exposed(c, ov, stage_bwd_c)
            dp_step.append(dpc("grad_allreduce", "allreduce", "bwd", c, exp_c, grad, hb))
        elif p.sharding in ("zero1", "zero2"):
            rs = coll.collective_time("reduce_scatter", grad, lv)
            ag = coll.collective_time("allgather", par, lv)
            target = dp_step if p.sharding == "zero1" else dp_mb
            exp_rs, exp_ag = _exposed(rs, ov, stage_bwd_c), _exposed(ag, ov, stage_fwd_c)
            target.append(dpc("grad_reduce_scatter", "reduce_scatter", "bwd", rs, exp_rs, grad, hb))
            dp_step.append(dpc("param_allgather", "allgather", "fwd", ag, exp_ag, par, hf))
        else:  # fsdp: gather weights for forward and again for backward, scatter grads
            ag = coll.collective_time("allgather", par, lv)
            rs = coll.collective_time("reduce_scatter", grad, lv)
            bwd_exposed = _exposed(ag + rs, ov, stage_bwd_c)
            share = ag / (ag + rs) if ag + rs > 0 else 0.0
            exp_ag, exp_b = _exposed(ag, ov, stage_fwd_c), bwd_exposed * share
            exp_rs, h_rs = bwd_exposed * (1 - share), hb * (1 - share)
            dp_mb += [
                dpc("param_allgather_fwd", "allgather", "fwd", ag, exp_ag, par, hf),
                dpc("param_allgather_bwd", "allgather", "bwd", ag, exp_b, par, hb * share),
                dpc("grad_reduce_scatter", "reduce_scatter", "bwd", rs, exp_rs, grad, h_rs),
            ]

    shard = p.dp * p.cp if p.sharding != "none" else 1
    eshard = max(1, p.dp * p.cp // p.ep) if p.sharding != "none" else 1
    n_opt = dense / shard + expert / eshard
    opt_s = n_opt * t.optimizer_bytes_per_param / (hw.hbm_bandwidth * hw.efficiency.memory)
    optimizer = OpMean(
        "optimizer",
        "compute",
        "memory",
        "step",
        opt_s,
        opt_s,
        nbytes=n_opt * t.optimizer_bytes_per_param,
    )
    return OpMeans(
        layer_fwd=layer_fwd,
        layer_bwd=layer_bwd,
        embedding_fwd=emb_f,
        embedding_bwd=emb_b,
        head_fwd=head_f,
        head_bwd=head_b,
        pp_send=pp_send,
        dp_microbatch=tuple(dp_mb),
        dp_step=tuple(dp_step),
        optimizer=optimizer,
        layers_per_chunk=per_chunk,
        chunks_per_stage=p.vpp,
        stages=p.pp,
        microbatches=p.microbatches,
        first_stage_layers=end_layers,
        last_stage_layers=end_layers,
    )
