"""Pipeline-parallel schedule DAGs (GPipe, 1F1B, Megatron interleaved 1F1B).

A schedule is returned as a :class:`networkx.DiGraph` whose nodes are operations (one forward or
backward pass of one microbatch through one model chunk on one stage) and whose edges are the
precedence constraints:

* **program order**: a stage runs one op at a time, in its schedule order;
* **data dependencies**: the forward of a microbatch on virtual stage ``j`` needs its forward on
  virtual stage ``j - 1``; the backward needs the backward on virtual stage ``j + 1``; the backward
  on the last virtual stage needs that microbatch's last forward (same stage, so program order
  already implies it and no separate edge is stored).

Makespan semantics: ``finish(op) = max(finish(pred) for pred) + latency(op)`` (0 without
predecessors), and the step's makespan is the largest finish. Only non-redundant edges are stored
(every node has at most two predecessors: its program-order predecessor and one data
predecessor), which is what the canonical-form engine wants: a redundant edge would add a Clark
maximum with a dominated input.

Node keys are readable tuples ``(phase, stage, microbatch, chunk)``, e.g. ``("F", 0, 3, 0)``, and
carry the attributes ``phase`` ("F" or "B"), ``stage``, ``microbatch``, ``chunk`` and ``position``
(the op's index in its stage's program). The graph attribute ``graph.graph`` records ``schedule``,
``stages``, ``microbatches`` and ``vpp``.

Examples
--------
>>> g = pipeline_dag(2, 3, "1f1b")
>>> g.number_of_nodes()
12
>>> [n for n in stage_program(g, 0)][:3]
[('F', 0, 0, 0), ('F', 0, 1, 0), ('B', 0, 0, 0)]
"""

from __future__ import annotations

import networkx as nx

__all__ = ["SCHEDULES", "pipeline_dag", "stage_program", "schedule_levels", "check_schedule"]

SCHEDULES: tuple[str, ...] = ("gpipe", "1f1b", "interleaved")

Op = tuple[str, int, int, int]


def _check_positive_int(name: str, value: object) -> int:
    # bool is an int subclass; True stages is almost certainly a bug, not 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _stage_programs(p: int, m: int, schedule: str, vpp: int) -> list[list[Op]]:
    """Per-stage op sequences ``(phase, stage, microbatch, chunk)`` in execution order."""
    programs: list[list[Op]] = []
    for s in range(p):
        if schedule == "gpipe":
            # torch.distributed.pipelining.ScheduleGPipe: all forwards, then backwards in order.
            prog = [("F", s, i, 0) for i in range(m)] + [("B", s, i, 0) for i in range(m)]
        elif schedule == "1f1b":
            warm = min(p - s - 1, m)
            prog = [("F", s, i, 0) for i in range(warm)]
            for i in range(m - warm):
                prog += [("F", s, warm + i, 0), ("B", s, i, 0)]
            prog += [("B", s, i, 0) for i in range(m - warm, m)]
        else:
            prog = _interleaved_program(p, m, vpp, s)
        programs.append(prog)
    return programs


def _interleaved_program(p: int, m: int, v: int, s: int) -> list[Op]:
    """Megatron-LM ``forward_backward_pipelining_with_interleaving`` for one stage.

    Virtual microbatch ``k`` (0 <= k < m*v) maps to chunk ``(k mod pv) // p`` (reversed for the
    backward) and microbatch ``(k // pv) * p + k mod p`` (microbatch groups of size p, Megatron's
    default ``microbatch_group_size_per_vp_stage``). Warm-up is ``(p-s-1)*2 + (v-1)*p`` capped at
    ``m*v``, as in current Megatron-core (older releases also ran all-warm-up when m == p).
    """
    total = m * v
    group = p * v

    def op(phase: str, k: int) -> Op:
        chunk = (k % group) // p
        if phase == "B":
            chunk = v - 1 - chunk
        return (phase, s, (k // group) * p + k % p, chunk)

    warm = min((p - s - 1) * 2 + (v - 1) * p, total)
    prog = [op("F", k) for k in range(warm)]
    for k in range(total - warm):
        prog += [op("F", warm + k), op("B", k)]
    prog += [op("B", k) for k in range(total - warm, total)]
    return prog


def _data_predecessor(node: Op, p: int, v: int) -> Op | None:
    """The cross-stage (or cross-chunk) data dependency of ``node``; None if only program order."""
    phase, s, mb, c = node
    if phase == "F":
        if s > 0:
            return ("F", s - 1, mb, c)
        return ("F", p - 1, mb, c - 1) if c > 0 else None
    if s < p - 1:
        return ("B", s + 1, mb, c)
    if c < v - 1:
        return ("B", 0, mb, c + 1)
    # Last virtual stage: B after its own F, on the same stage, so program order implies it.
    return None


def check_schedule(stages: int, microbatches: int, schedule: str, vpp: int) -> tuple[int, int, int]:
    """``(stages, microbatches, vpp)`` as ints; ValueError unless valid (:func:`pipeline_dag`)."""
    p = _check_positive_int("stages", stages)
    m = _check_positive_int("microbatches", microbatches)
    v = _check_positive_int("vpp", vpp)
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if schedule == "interleaved":
        if v < 2:
            raise ValueError(f"vpp must be >= 2 for schedule 'interleaved', got {vpp}")
        if m % p != 0:
            raise ValueError(
                f"schedule 'interleaved' needs microbatches divisible by stages (Megatron), "
                f"got microbatches={m}, stages={p}"
            )
    elif v != 1:
        raise ValueError(f"vpp must be 1 for schedule {schedule!r} (use 'interleaved'), got {vpp}")
    return p, m, v


def schedule_levels(
    stages: int, microbatches: int, schedule: str = "1f1b", vpp: int = 1
) -> tuple[list[Op], list[list[int]], list[int]]:
    """The DAG of :func:`pipeline_dag` as plain lists, without networkx (fast at any size).

    Returns
    -------
    tuple
        ``(order, preds, sizes)``: the ops in topological-generation order, each op's
        predecessor indices into ``order`` (program order first, then the data dependency), and
        the size of each generation (the same generations as
        :func:`networkx.topological_generations` of :func:`pipeline_dag`).

    Examples
    --------
    >>> order, preds, sizes = schedule_levels(2, 3)
    >>> len(order), sum(sizes), order[0]
    (12, 12, ('F', 0, 0, 0))
    """
    check_schedule(stages, microbatches, schedule, vpp)
    p, v = stages, vpp
    programs = _stage_programs(p, microbatches, schedule, v)
    # each op's data dependency, looked up once (a stalled stage retries its next op per sweep)
    deps = [[_data_predecessor(node, p, v) for node in prog] for prog in programs]
    level: dict[Op, int] = {}
    pos = [0] * p
    left = sum(len(prog) for prog in programs)
    while left:
        moved = False
        for s, prog in enumerate(programs):
            dep_s, i, n = deps[s], pos[s], len(prog)
            lv_prev = level[prog[i - 1]] if i else -1  # (level of the op before: none = -1)
            while i < n:
                dep = dep_s[i]
                lv = lv_prev + 1
                if dep is not None:
                    lv_dep = level.get(dep)
                    if lv_dep is None:
                        break
                    lv = max(lv, lv_dep + 1)
                level[prog[i]] = lv_prev = lv
                i += 1
            if i > pos[s]:
                left -= i - pos[s]
                pos[s] = i
                moved = True
        if not moved:  # cannot happen for the schedules here; guards against an endless loop
            raise ValueError("schedule has a dependency cycle")
    order = sorted(level, key=level.__getitem__)
    index = {n: i for i, n in enumerate(order)}
    prev = {}
    dep_of = {}
    for prog, dep_s in zip(programs, deps, strict=True):
        prev.update(zip(prog[1:], prog[:-1], strict=False))
        dep_of.update(zip(prog, dep_s, strict=True))
    preds = []
    for n in order:
        ps = [index[prev[n]]] if n in prev else []
        dep = dep_of[n]
        if dep is not None:
            ps.append(index[dep])
        preds.append(ps)
    sizes = [0] * (max(level.values()) + 1)
    for lv in level.values():
        sizes[lv] += 1
    return order, preds, sizes


def pipeline_dag(
    stages: int, microbatches: int, schedule: str = "1f1b", vpp: int = 1
) -> nx.DiGraph:
    """Build the operation DAG of a pipeline-parallel training step.

    Parameters
    ----------
    stages : int
        Pipeline stages ``p`` (>= 1).
    microbatches : int
        Microbatches ``m`` per step (>= 1). The interleaved schedule needs ``m % p == 0``
        (Megatron's requirement).
    schedule : {"gpipe", "1f1b", "interleaved"}
        ``"gpipe"``: all forwards then all backwards on each stage. ``"1f1b"``: Megatron
        non-interleaved one-forward-one-backward (warm-up ``min(p-s-1, m)`` forwards).
        ``"interleaved"``: Megatron interleaved 1F1B with ``vpp`` model chunks per stage.
    vpp : int
        Virtual pipeline (model chunks per stage). Must be 1 for "gpipe" and "1f1b" and >= 2 for
        "interleaved"; chunk ``c`` on stage ``s`` is virtual stage ``c * p + s``.

    Returns
    -------
    networkx.DiGraph
        Nodes ``(phase, stage, microbatch, chunk)`` with attributes ``phase``, ``stage``,
        ``microbatch``, ``chunk`` and ``position``; edges are program order and data
        dependencies (see the module docstring). ``2 * m * vpp * p`` nodes.

    Raises
    ------
    ValueError
        For non-positive or non-integer sizes, an unknown schedule, a ``vpp`` that does not fit
        the schedule, or ``microbatches % stages != 0`` with "interleaved".

    Examples
    --------
    >>> g = pipeline_dag(4, 8, "interleaved", vpp=2)
    >>> g.number_of_nodes(), nx.is_directed_acyclic_graph(g)
    (128, True)
    """
    p, m, v = check_schedule(stages, microbatches, schedule, vpp)

    g = nx.DiGraph(schedule=schedule, stages=p, microbatches=m, vpp=v)
    programs = _stage_programs(p, m, schedule, v)
    for prog in programs:
        for pos, node in enumerate(prog):
            phase, s, mb, c = node
            g.add_node(node, phase=phase, stage=s, microbatch=mb, chunk=c, position=pos)
    for prog in programs:
        for prev, node in zip(prog, prog[1:], strict=False):
            g.add_edge(prev, node)
        for node in prog:
            dep = _data_predecessor(node, p, v)
            if dep is not None:
                g.add_edge(dep, node)
    return g


def stage_program(graph: nx.DiGraph, stage: int) -> list[Op]:
    """The ops of one stage in execution order (by the ``position`` attribute).

    Parameters
    ----------
    graph : networkx.DiGraph
        A graph from :func:`pipeline_dag`.
    stage : int
        Stage index, ``0 <= stage < graph.graph["stages"]``.

    Returns
    -------
    list of tuple
        Node keys of that stage sorted by position.
    """
    nodes = [n for n, d in graph.nodes(data=True) if d["stage"] == stage]
    if not nodes:
        raise ValueError(f"stage must be in [0, {graph.graph.get('stages', '?')}), got {stage}")
    return sorted(nodes, key=lambda n: graph.nodes[n]["position"])
