"""Write a synthetic trace as PyTorch-profiler (Kineto) Chrome-trace JSON, one file per rank.

Each rank's file has ``distributedInfo`` (rank, world size), one ``ProfilerStep#N``
annotation per step (the steps tile time back to back) and one GPU kernel event per op:
compute ops named by their optype, communication ops carrying ``Collective name`` (the optype)
and ``Process Group Ranks`` (the ranks of that instance) as NCCL kernels do. Times are in
microseconds. :func:`prism_analytic.traces.kineto.read_kineto` reads the folder back (the
communication ops then come as ``nccl:<optype>``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from prism_analytic.traces.synth_job import COMPUTE_OPTYPES

__all__ = ["write_kineto"]

_US = 1e6
_COMPUTE_STREAM, _COMM_STREAM = 7, 20


def write_kineto(trace, folder) -> list[Path]:
    """Write ``folder/rank<r>.json`` for every rank of ``trace`` (a :class:`SynthTrace`).

    Returns
    -------
    list of Path
        The files written, by rank.
    """
    prog = trace.program
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    group_ranks = np.empty(prog.n_ops, dtype=object)
    for members in prog.units:
        text = str(sorted({int(prog.rank[i]) for i in members}))
        for i in members:
            group_ranks[i] = text if len(members) > 1 else ""
    f = trace.frame
    steps = np.sort(f["step"].unique())
    # steps tile time: a window ends where the next step starts, the last at the last end
    window_end = np.append(trace.step_start[1:], (f["start_ts"] + f["duration"]).max())
    windows = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{int(s)}",
            "ts": float(trace.step_start[i] * _US),
            "dur": float((window_end[i] - trace.step_start[i]) * _US),
            "pid": 0,
            "tid": 0,
        }
        for i, s in enumerate(steps)
    ]
    comm = ~np.isin(prog.optype.astype(str), COMPUTE_OPTYPES)
    # frame rows are (step, op) in op order, so the op id of a row is its position mod n_ops
    op_of_row = np.arange(len(f)) % prog.n_ops
    by_rank = np.argsort(prog.rank[op_of_row], kind="stable")
    counts = np.bincount(prog.rank, minlength=len(prog.rank_ops)) * len(steps)
    written = []
    world = int(trace.job.world_size)
    for r, rows in enumerate(np.split(by_rank, np.cumsum(counts)[:-1])):
        events = list(windows)
        starts = f["start_ts"].to_numpy()[rows] * _US
        durs = f["duration"].to_numpy()[rows] * _US
        names = f["optype"].astype(str).to_numpy()[rows]
        for row, ts, dur, name in zip(rows, starts, durs, names, strict=True):
            op = op_of_row[row]
            ev = {"ph": "X", "cat": "kernel", "name": name, "ts": float(ts), "dur": float(dur)}
            ev.update(pid=0, tid=_COMPUTE_STREAM)
            args = {"stream": _COMPUTE_STREAM}
            if comm[op]:
                args = {
                    "stream": _COMM_STREAM,
                    "Collective name": name,
                    "Process Group Ranks": group_ranks[op],
                }
                ev["tid"] = _COMM_STREAM
            ev["args"] = args
            events.append(ev)
        path = folder / f"rank{r}.json"
        doc = {"distributedInfo": {"rank": r, "world_size": world}, "traceEvents": events}
        path.write_text(json.dumps(doc))
        written.append(path)
    return written
