"""Run a synthetic job's program over many steps at once.

Semantics (one step): each rank runs its ops in program order. An op's member is *ready* when
its rank's previous op has ended plus a host gap (the first op: the step start plus a gap).
A unit starts when its last member is ready and ends, for all members together, one duration
later: a compute op its own duration, a collective or a send/receive pair one transfer time
drawn once per instance. Each member records its own ready time as its start, so a
collective's recorded duration includes its wait for the last member.

The loop runs over generations of units (no two units of a generation share a rank), each
step a lane of a numpy array, so the cost is one vectorised update per generation whatever
the number of ranks and steps. Steps are laid back to back:
step ``j + 1`` starts when the last op of step ``j`` ends.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prism_analytic.traces.synth_job import SynthJob
from prism_analytic.traces.synth_layout import Program

__all__ = ["SimResult", "run_steps"]

#: Op-step cells per block: bounds the memory of one block of draws and records.
_BLOCK_CELLS = 1 << 22


@dataclass
class SimResult:
    """What :func:`run_steps` returns.

    Attributes
    ----------
    step_times : numpy.ndarray
        (steps,) last end minus first start of each step.
    step_start : numpy.ndarray
        (steps,) absolute time of each step's zero (the previous step's last end).
    start, end : numpy.ndarray or None
        (ops, steps) op start and end relative to the step's zero (only when recorded).
    step_factors : numpy.ndarray
        (steps,) the shared per-step compute factor.
    mb_factors : numpy.ndarray
        (steps, dp, microbatches) the shared per-microbatch compute factor.
    """

    step_times: np.ndarray
    step_start: np.ndarray
    start: np.ndarray | None
    end: np.ndarray | None
    step_factors: np.ndarray
    mb_factors: np.ndarray


def block_size(prog: Program) -> int:
    """Steps simulated together.

    It depends on the program only, so results do not depend on whether op times are recorded.
    """
    return max(1, _BLOCK_CELLS // max(prog.n_ops, 1))


def run_steps(
    job: SynthJob, prog: Program, steps: int, rng: np.random.Generator, record: bool
) -> SimResult:
    """Simulate ``steps`` steps of ``job`` (see the module docstring)."""
    b = block_size(prog)
    plan = waves(prog)
    parts = [
        _run_block(job, prog, min(b, steps - i), rng, record, plan) for i in range(0, steps, b)
    ]
    last_end = np.concatenate([p["last_end"] for p in parts])
    step_start = np.concatenate([[0.0], np.cumsum(last_end)[:-1]])
    return SimResult(
        step_times=np.concatenate([p["step_times"] for p in parts]),
        step_start=step_start,
        start=np.concatenate([p["start"] for p in parts], axis=1) if record else None,
        end=np.concatenate([p["end"] for p in parts], axis=1) if record else None,
        step_factors=np.concatenate([p["step_f"] for p in parts]),
        mb_factors=np.concatenate([p["mb_f"] for p in parts], axis=0),
    )


def _durations(job, prog, k, rng):
    """(units, k) unit durations and the shared factors of a block of k steps."""
    step_f = job.step_factor.draw(rng, k)
    mb_f = job.mb_factor.draw(rng, (k, job.dp, job.microbatches))
    n_units = len(prog.units)
    dur = np.empty((n_units, k))
    names = np.array(prog.unit_optype, dtype=object)
    for optype in sorted(set(prog.unit_optype)):
        idx = np.flatnonzero(names == optype)
        dur[idx] = job.law(optype).draw(rng, (len(idx), k))
    comp = np.flatnonzero(prog.unit_compute)
    op = np.array([prog.units[u][0] for u in comp], dtype=np.int64)
    slow = np.ones(job.world_size)
    for r, f in job.slow_ranks.items():
        slow[r] = f
    stride = job.world_size // job.pp  # ranks per stage (stage-major rank order)
    for s, f in job.stage_scale.items():
        slow[s * stride : (s + 1) * stride] *= f
    scale = slow[prog.rank[op]][:, None] * step_f[None, :]
    mb = prog.mb[op]
    has_mb = mb >= 0
    scale[has_mb] *= mb_f[:, prog.dp_rank[op][has_mb], mb[has_mb]].T
    dur[comp] *= scale
    return dur, step_f, mb_f


@dataclass
class _Wave:
    """Units that can run together: no two share a rank (see :func:`waves`)."""

    units: np.ndarray  # unit ids
    ops: np.ndarray  # their member ops, unit after unit
    ranks: np.ndarray  # the ranks of those ops (all distinct)
    offsets: np.ndarray  # where each unit's members begin in ``ops``
    sizes: np.ndarray  # members per unit


def waves(prog: Program) -> list[_Wave]:
    """The units grouped by topological generation.

    A unit's generation is one more than the latest generation among its members' previous
    ops, so a rank has at most one op per generation and the units of a generation depend
    only on earlier ones: each generation is one vectorised update of the rank clocks.
    """
    unit_of = np.empty(prog.n_ops, dtype=np.int64)
    for u, members in enumerate(prog.units):
        unit_of[members] = u
    prev = np.full(prog.n_ops, -1)
    for ops in prog.rank_ops:
        prev[ops[1:]] = ops[:-1]
    gen = np.zeros(len(prog.units), dtype=np.int64)
    for u, members in enumerate(prog.units):  # units are in topological order
        p = prev[members]
        p = p[p >= 0]
        if len(p):
            gen[u] = gen[unit_of[p]].max() + 1
    out = []
    order = np.argsort(gen, kind="stable")
    bounds = np.flatnonzero(np.diff(gen[order])) + 1
    for us in np.split(order, bounds):
        members = [prog.units[u] for u in us]
        sizes = np.array([len(m) for m in members])
        ops = np.concatenate(members)
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        out.append(_Wave(us, ops, prog.rank[ops], offsets, sizes))
    return out


def _run_block(job, prog, k, rng, record, plan):
    dur, step_f, mb_f = _durations(job, prog, k, rng)
    gaps = job.gap.draw(rng, (prog.n_ops, k))
    clock = np.zeros((job.world_size, k))
    start = np.empty((prog.n_ops, k)) if record else None
    end = np.empty((prog.n_ops, k)) if record else None
    for w in plan:
        ready = clock[w.ranks] + gaps[w.ops]
        # a unit starts when its last member is ready; all members end together
        go = ready if len(w.ops) == len(w.units) else np.maximum.reduceat(ready, w.offsets)
        done = np.repeat(go + dur[w.units], w.sizes, axis=0)
        clock[w.ranks] = done
        if record:
            start[w.ops] = ready
            end[w.ops] = done
    first = np.array([ops[0] for ops in prog.rank_ops])
    t0 = gaps[first].min(axis=0)  # each rank's first op starts at its gap
    last_end = clock.max(axis=0)
    return {
        "step_times": last_end - t0,
        "last_end": last_end,
        "start": start,
        "end": end,
        "step_f": step_f,
        "mb_f": mb_f,
    }
