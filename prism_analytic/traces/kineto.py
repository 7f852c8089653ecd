"""Reader of PyTorch profiler (Kineto) Chrome-trace JSON, one file per rank.

GPU kernels (``cat == "kernel"``) become events; each is assigned to the ``ProfilerStep#N``
window in which its CUDA launch happened (matched through the ``correlation`` id), so a kernel
that runs after the CPU window closed still belongs to its step. NCCL kernels are named
``nccl:<collective>`` and keep their process group and message size.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np

from prism_analytic.traces.errors import TraceFormatError, require_pandas
from prism_analytic.traces.table import EventTable, validate_events

__all__ = ["read_kineto"]

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_US = 1e-6


def _load(path: Path) -> dict:
    if not path.exists():
        raise FileNotFoundError(f"Kineto trace not found: {path}")
    if path.stat().st_size == 0:
        raise TraceFormatError(f"{path}: file is empty")
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.open(path, "rt") as fh:
                data = json.load(fh)
        else:
            data = json.loads(path.read_text())
    except (json.JSONDecodeError, EOFError, OSError, UnicodeDecodeError) as exc:
        raise TraceFormatError(
            f"{path}: not a complete Chrome-trace JSON (truncated or damaged): {exc}; a trace is"
            " a per-op .parquet or .csv table, or Kineto .json / .json.gz (a file or a folder)"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceFormatError(f"{path}: no 'traceEvents' list; not a Kineto/Chrome trace")
    return data


def _number(event: dict, key: str, path: Path, index: int) -> float:
    value = event.get(key)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TraceFormatError(
            f"{path}: event {index} ({event.get('name')!r}): {key!r} is {value!r}, "
            "expected a number (microseconds)"
        ) from None
    if not np.isfinite(x):
        raise TraceFormatError(f"{path}: event {index} ({event.get('name')!r}): {key} is {x}")
    return x


def _read_one(path: Path, rank_hint: int | None):
    data = _load(path)
    info = data.get("distributedInfo") or {}
    rank = info.get("rank", rank_hint)
    if rank is None:
        raise TraceFormatError(
            f"{path}: no distributedInfo.rank; pass files of a distributed run (one per rank)"
        )
    windows, launches, kernels = [], {}, []
    for i, ev in enumerate(data["traceEvents"]):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat, name = ev.get("cat"), str(ev.get("name", ""))
        m = _STEP.match(name)
        if m and cat in ("user_annotation", "cpu_op", "python_function"):
            ts, dur = _number(ev, "ts", path, i), _number(ev, "dur", path, i)
            windows.append((ts, ts + dur, int(m.group(1))))
        elif cat == "cuda_runtime":
            corr = (ev.get("args") or {}).get("correlation")
            if corr is not None:
                launches[corr] = _number(ev, "ts", path, i)
        elif cat == "kernel":
            ts, dur = _number(ev, "ts", path, i), _number(ev, "dur", path, i)
            if dur < 0:
                raise TraceFormatError(f"{path}: event {i} ({name[:60]!r}): negative dur {dur}")
            kernels.append((i, ev, ts, dur))
    if not windows:
        raise TraceFormatError(f"{path}: no ProfilerStep#N annotations; cannot bound the steps")
    if not kernels:
        raise TraceFormatError(f"{path}: no GPU kernel events (cat 'kernel')")
    windows.sort()
    starts = np.array([w[0] for w in windows])
    ends = np.array([w[1] for w in windows])
    rows, outside = [], 0
    for _i, ev, ts, dur in kernels:
        args = ev.get("args") or {}
        t_launch = launches.get(args.get("correlation"), ts)
        j = int(np.searchsorted(starts, t_launch, side="right")) - 1
        if j < 0 or t_launch > ends[j]:
            outside += 1
            continue
        coll = args.get("Collective name")
        name = f"nccl:{coll}" if coll else str(ev.get("name"))
        rows.append(
            {
                "rank": int(rank),
                "step": windows[j][2],
                "name": name,
                "start_s": ts * _US,
                "duration_s": dur * _US,
                "stream": int(args.get("stream", -1)),
                "comm_group": str(args.get("Process Group Ranks", "")) if coll else "",
                "message_elems": int(args.get("In msg nelems", 0) or 0) if coll else 0,
            }
        )
    meta = {"world_size": info.get("world_size"), "pg_config": info.get("pg_config")}
    return rows, outside, meta


def read_kineto(paths, *, rank: int | None = None) -> EventTable:
    """Read Kineto traces (a file, a list of files, or a folder of ``*.json[.gz]``).

    Parameters
    ----------
    paths : str, Path or sequence of them
        One file per rank, or a folder holding them.
    rank : int, optional
        Rank of a single file that lacks ``distributedInfo``.

    Returns
    -------
    EventTable
        Kernels per rank and step; ``dropped`` counts kernels launched outside every
        ``ProfilerStep`` window.

    Raises
    ------
    TraceFormatError
        Empty, truncated or non-Kineto files, events without numeric ``ts``/``dur``, negative
        durations, two files claiming one rank, files of different world sizes.
    """
    pd = require_pandas()
    if isinstance(paths, (str, Path)):
        p = Path(paths)
        if p.is_dir():
            files = sorted(
                f for f in p.iterdir() if f.name.endswith(".json") or f.name.endswith(".json.gz")
            )
            if not files:
                raise FileNotFoundError(f"{p}: no Kineto .json or .json.gz files in this folder")
        else:
            files = [p]
    else:
        files = [Path(f) for f in paths]
    all_rows, outside, seen, world = [], 0, {}, None
    for f in files:
        rows, out, meta = _read_one(f, rank if len(files) == 1 else None)
        r = rows[0]["rank"] if rows else rank
        if r in seen:
            raise TraceFormatError(f"{f}: rank {r} already read from {seen[r]}; mixed-up files?")
        seen[r] = f
        ws = meta.get("world_size")
        if world is not None and ws is not None and ws != world:
            raise TraceFormatError(f"{f}: world size {ws} differs from {world} of the other files")
        world = ws if ws is not None else world
        all_rows.extend(rows)
        outside += out
    frame = pd.DataFrame(all_rows)
    if frame.empty:
        raise TraceFormatError(f"{files[0]}: no kernel launched inside a ProfilerStep window")
    for col in ("dp_rank", "stage", "microbatch", "chunk"):
        frame[col] = -1
    frame = frame.sort_values(["rank", "step", "start_s"]).reset_index(drop=True)
    frame["seq_id"] = frame.groupby(["rank", "step", "name"]).cumcount()
    source = ", ".join(str(f) for f in files)
    validate_events(frame, source)
    dropped = {"kernels launched outside ProfilerStep windows": outside} if outside else {}
    return EventTable(frame, source, dropped, {"format": "kineto", "world_size": world})
