"""The static program of a synthetic job: every rank's ops, and which ops form one unit.

Ranks follow Megatron's default order "tp-cp-ep-dp-pp": ``rank = tp_i + tp * (cx_i + cx *
(dp_i + dp * stage))`` where ``cx`` is the context slot (ring cp or Ulysses sp); expert groups
are ``ep`` consecutive indices of ``cx_i + cx * dp_i`` within one stage and tensor index.

All ranks of a stage run the same op sequence (the stage's template): the pipeline schedule's
compute ops (:func:`prism_analytic.schedules.pipeline_dag`), each expanded into its layers'
compute and tp/cp/sp/ep collectives, the pipeline sends and receives between them, and the
data-parallel gradient reduce-scatter, optimizer and parameter all-gather at the end.

Sends and receives are rendezvous, so their placement must not deadlock. Megatron avoids the
deadlock by batching, e.g., ``send_forward_recv_backward`` into one call; the generator never
emits batched ops. It gives each transfer one global time instead, taken from the schedule run
with mean durations and free transfers: the first time after its producer ends when both ranks
are between ops, else the start of its consumer. Every rank orders its ops by these times (a
transfer before a compute op starting at the same time), so all programs are subsequences of
one global order and no two rendezvous wait for each other (:func:`build_program` also checks
it). With blocking rendezvous the 1F1B step equals the dependency DAG's makespan; interleaved
steps can be longer (a rank may wait at a send for a peer still computing).

A unit is what runs as one: a rank's compute op, a send with its receive, or the members of one
collective instance. Units come in a topological order over all ranks.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass

import networkx as nx
import numpy as np

from prism_analytic.schedules import pipeline_dag, stage_program
from prism_analytic.traces.synth_job import SynthJob

__all__ = ["Program", "build_program", "rank_coords"]


@dataclass
class Program:
    """The ops of one step on every rank, and their units.

    Attributes
    ----------
    rank, seq_id, mb, chunk, dp_rank, stage : numpy.ndarray
        Per op (ops of a rank are contiguous and in program order).
    optype : numpy.ndarray
        Per op optype (object array; the built-in names).
    label : numpy.ndarray
        Per op name written to the trace (:attr:`SynthJob.optype_names`).
    rank_ops : list of numpy.ndarray
        Op ids of each rank in program order.
    units : list of numpy.ndarray
        Member op ids of each unit, units in a topological order.
    unit_optype : list of str
        Optype of each unit (a send/recv pair is named by its send).
    unit_compute : numpy.ndarray
        True for a rank's own compute op.
    """

    rank: np.ndarray
    optype: np.ndarray
    label: np.ndarray
    seq_id: np.ndarray
    mb: np.ndarray
    chunk: np.ndarray
    dp_rank: np.ndarray
    stage: np.ndarray
    rank_ops: list
    units: list
    unit_optype: list
    unit_compute: np.ndarray

    @property
    def n_ops(self) -> int:
        """Ops per step over all ranks."""
        return len(self.rank)

    def key(self, op: int) -> tuple:
        """``(rank, optype, seq_id)`` of an op (the trace contract's op key)."""
        return (int(self.rank[op]), str(self.label[op]), int(self.seq_id[op]))


def rank_coords(job: SynthJob) -> dict[str, np.ndarray]:
    """Per-rank ``tp, cx, dp, stage`` indices and the ``ep`` group index."""
    r = np.arange(job.world_size)
    tp_i = r % job.tp
    cx_i = (r // job.tp) % job.cx
    dp_i = (r // (job.tp * job.cx)) % job.dp
    stage = r // (job.tp * job.cx * job.dp)
    ep_g = (cx_i + job.cx * dp_i) // job.ep
    return {"tp": tp_i, "cx": cx_i, "dp": dp_i, "stage": stage, "ep": ep_g}


def _layer_ops(job: SynthJob, phase: str) -> list[tuple[str, str | None]]:
    """One layer's ops in order: (optype, process group kind or None for compute)."""
    comp = "forward-compute" if phase == "F" else "backward-compute"
    pre, post = [], []
    if job.tp > 1 and job.sequence_parallel:
        pre.append(("tp-all-gather", "tp"))
    if job.sp > 1:
        pre.append(("sp-all-to-all", "cx"))
        post.append(("sp-all-to-all", "cx"))
    if job.cp > 1:
        pre.append(("cp-send-recv", "cx"))
    if job.tp > 1:
        post.append(("tp-reduce-scatter" if job.sequence_parallel else "tp-all-reduce", "tp"))
    moe = []
    if job.ep > 1:
        moe = [("ep-dispatch-all-to-all", "ep"), (comp, None), ("ep-combine-all-to-all", "ep")]
    dense = [*pre, (comp, None), *post]
    # the backward runs the layer in reverse: the MoE block's gradients first
    return dense + moe if phase == "F" else moe[::-1] + dense


def _stage_templates(job: SynthJob) -> list[list[tuple]]:
    """Per stage: entries ``(optype, group_kind, mb, chunk, link)``.

    ``group_kind`` is "tp", "cx", "ep", "dp", "emb" (first and last stage) for collectives,
    "p2p" for sends/receives (then
    ``link`` identifies the transfer: (producer node, consumer node)), None for compute.
    """
    g = pipeline_dag(job.pp, job.microbatches, job.schedule, job.vpp)
    layer = {ph: _layer_ops(job, ph) for ph in ("F", "B")}
    # each node's start in the schedule run with mean durations and free transfers
    mean = {ph: job.layers * sum(job.law(o).mean for o, _ in layer[ph]) for ph in layer}
    begin: dict = {}
    for n in nx.topological_sort(g):
        begin[n] = max((begin[q] + mean[q[0]] for q in g.predecessors(n)), default=0.0)
    keyed: list[list[tuple]] = [[] for _ in range(job.pp)]
    spans: list[tuple[list, list]] = []
    for s in range(job.pp):
        nodes = stage_program(g, s)
        for node in nodes:
            keyed[s].append(((begin[node], 1, node, node), node))
        spans.append(([begin[n] for n in nodes], [begin[n] + mean[n[0]] for n in nodes]))

    def between_ops(stage: int, t: float) -> bool:
        starts, ends = spans[stage]
        i = bisect.bisect_left(starts, t) - 1  # the last node starting before t
        return i < 0 or ends[i] <= t * (1 + 1e-12)

    for a, b in g.edges:
        if a[1] == b[1]:
            continue  # same stage: program order, no transfer
        word = "forward" if b[0] == "F" else "backward"
        # A rendezvous needs both ranks between ops: the first time after the producer ends
        # when both are, else just before the consumer starts (one of them then waits).
        # Every rank orders its ops by this one global time, so no two rendezvous can wait
        # for each other in a cycle.
        lo, hi = begin[a] + mean[a[0]], begin[b]
        candidates = [lo, hi] + [e for e in spans[a[1]][1] + spans[b[1]][1] if lo < e < hi]
        free = [t for t in candidates if between_ops(a[1], t) and between_ops(b[1], t)]
        key = (min(free) if free else hi, 0, a, b)
        keyed[a[1]].append((key, (f"{word}-send", "p2p", -1, -1, (a, b))))
        keyed[b[1]].append((key, (f"{word}-recv", "p2p", -1, -1, (a, b))))
    dp_group = job.dp * job.cx > 1
    templates = []
    for s in range(job.pp):
        out: list[tuple] = []
        for _, item in sorted(keyed[s], key=lambda e: e[0]):
            if len(item) == 5:
                out.append(item)
                continue
            phase, _, mb, chunk = item
            for _ in range(job.layers):
                for optype, kind in layer[phase]:
                    out.append((optype, kind, mb if kind is None else -1, chunk, None))
        if job.tied_embeddings and job.pp > 1 and s in (0, job.pp - 1):
            out.append(("embedding-grads-all-reduce", "emb", -1, -1, None))
        if dp_group:
            out.append(("grads-reduce-scatter", "dp", -1, -1, None))
        out.append(("optimizer", None, -1, -1, None))
        if dp_group:
            out.append(("params-all-gather", "dp", -1, -1, None))
        templates.append(out)
    return templates


def build_program(job: SynthJob) -> Program:
    """The ops and units of one step of ``job``.

    Raises
    ------
    ValueError
        If the rendezvous of the programs deadlock (a bug in the op placement).
    """
    coords = rank_coords(job)
    templates = _stage_templates(job)
    stride = job.tp * job.cx * job.dp  # rank distance between stages
    rows: list[tuple] = []
    rank_ops: list[np.ndarray] = []
    unit_of_key: dict[tuple, list[int]] = {}
    units: list[list[int]] = []
    compute: list[bool] = []
    for r in range(job.world_size):
        s, d, tp_i, cx_i = (int(coords[k][r]) for k in ("stage", "dp", "tp", "cx"))
        group_id = {
            "tp": (s, d, cx_i),
            "cx": (s, d, tp_i),
            "ep": (s, tp_i, int(coords["ep"][r])),
            "dp": (s, tp_i),
        }
        seq: dict[str, int] = {}
        first = len(rows)
        for pos, (optype, kind, mb, chunk, link) in enumerate(templates[s]):
            op = len(rows)
            rows.append((r, optype, seq.get(optype, 0), mb, chunk, d, s))
            seq[optype] = seq.get(optype, 0) + 1
            if kind is None:
                units.append([op])
                compute.append(True)
                continue
            if kind == "p2p":
                key = ("p2p", link, r % stride)
            elif kind == "emb":  # first and last stage: their templates differ in position
                key = ("emb", r % stride)
            else:
                key = (kind, pos, group_id[kind])
            members = unit_of_key.get(key)
            if members is None:
                members = unit_of_key[key] = [op]
                units.append(members)
                compute.append(False)
            else:
                members.append(op)
        rank_ops.append(np.arange(first, len(rows)))
    cols = list(zip(*rows, strict=True))
    rank, optype, seq_id, mb, chunk, dp_rank, stage = (np.array(c) for c in cols)
    optype = optype.astype(object)
    unit_optype = [_unit_name(optype, m) for m in units]
    order = _topological_units(units, rank, rank_ops)
    return Program(
        rank=rank,
        optype=optype,
        label=np.array([job.label(o) for o in optype], dtype=object),
        seq_id=seq_id,
        mb=mb,
        chunk=chunk,
        dp_rank=dp_rank,
        stage=stage,
        rank_ops=rank_ops,
        units=[np.array(units[u]) for u in order],
        unit_optype=[unit_optype[u] for u in order],
        unit_compute=np.array([compute[u] for u in order]),
    )


def _unit_name(optype: np.ndarray, members: list[int]) -> str:
    names = sorted({str(optype[i]) for i in members})
    sends = [n for n in names if n.endswith("-send")]
    return sends[0] if sends else names[0]


def _topological_units(units: list[list[int]], rank: np.ndarray, rank_ops: list) -> list[int]:
    """Units in an order where each starts after its members' previous ops (Kahn's algorithm).

    A unit is ready when it is the next op of every member rank.
    """
    unit_of = np.empty(len(rank), dtype=np.int64)
    for u, members in enumerate(units):
        unit_of[members] = u
    size = np.array([len(m) for m in units])
    at_head = np.zeros(len(units), dtype=np.int64)
    ptr = [0] * len(rank_ops)
    ready: deque[int] = deque()

    def arrive(r: int) -> None:
        if ptr[r] < len(rank_ops[r]):
            u = unit_of[rank_ops[r][ptr[r]]]
            at_head[u] += 1
            if at_head[u] == size[u]:
                ready.append(int(u))

    for r in range(len(rank_ops)):
        arrive(r)
    order = []
    while ready:
        u = ready.popleft()
        order.append(u)
        for op in units[u]:
            r = int(rank[op])
            ptr[r] += 1
            arrive(r)
    if len(order) < len(units):
        stuck = sorted({int(rank[units[u][0]]) for u in range(len(units)) if at_head[u]})[:8]
        raise ValueError(
            f"synthetic programs deadlock: {len(units) - len(order)} units never run "
            f"(ranks waiting: {stuck}); the send/receive placement is inconsistent"
        )
    return order
