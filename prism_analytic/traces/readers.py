"""Readers of per-op tables (parquet/CSV) and step-time lists into canonical form.

The per-op schema is that of the straggler-analysis traces (Lin et al., OSDI 2025): columns
``dp_rank, stage, rank, step, optype, start_ts, duration`` (seconds) and optionally ``seq_id``,
``mc`` (chunk), ``mb_id`` (microbatch), ``gmc``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from prism_analytic.traces.errors import TraceFormatError, require_pandas
from prism_analytic.traces.table import EventTable, check_time_order, sort_events, validate_events

__all__ = [
    "read_op_table",
    "read_step_times",
    "read_step_series",
    "read_trace",
    "OP_TABLE_REQUIRED",
]

#: Columns an op table must have.
OP_TABLE_REQUIRED = ("dp_rank", "stage", "rank", "step", "optype", "start_ts", "duration")
_OPTIONAL = {"seq_id": "seq_id", "mb_id": "microbatch", "mc": "chunk"}
#: What a trace may be, for messages about files that are none of it.
TRACE_FORMATS = "a per-op .parquet or .csv table, or Kineto .json / .json.gz (a file or a folder)"
#: What a step-time file may be.
STEP_FORMATS = "a JSON list or object of step times, or a CSV with a step_time_s column"


def _check_file(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(f"trace file not found: {path}")
    if path.is_dir():
        raise TraceFormatError(f"{path}: is a folder, expected a file")
    if path.stat().st_size == 0:
        raise TraceFormatError(f"{path}: file is empty")


def _load_frame(path: Path):
    pd = require_pandas()
    suffix = "".join(path.suffixes[-2:]).lower()
    try:
        if suffix.endswith(".parquet"):
            return pd.read_parquet(path)
        if suffix.endswith(".csv") or suffix.endswith(".csv.gz"):
            return pd.read_csv(path)
    except Exception as exc:  # pyarrow/pandas raise many types for damaged files
        raise TraceFormatError(
            f"{path}: cannot be read as {suffix.lstrip('.')} (truncated or not that format?): "
            f"{type(exc).__name__}: {' '.join(str(exc).split())}; a trace is {TRACE_FORMATS}"
        ) from None
    raise TraceFormatError(f"{path}: unknown op-table format {suffix!r}; use .parquet or .csv")


def read_op_table(path, *, incomplete_steps: str = "error") -> EventTable:
    """Read a per-op table (parquet or CSV) into the canonical event table.

    Parameters
    ----------
    path : str or Path
        ``.parquet`` or ``.csv`` file with the columns of :data:`OP_TABLE_REQUIRED`.
    incomplete_steps : {"error", "drop"}
        A step in which some rank recorded no ops: raise (default), or drop the step and count
        it in :attr:`EventTable.dropped`.

    Returns
    -------
    EventTable

    Raises
    ------
    TraceFormatError
        Empty, truncated or wrong-schema files, non-numeric values, NaN or negative durations,
        steps with missing ranks; the message names the file, the row and the problem.
    """
    if incomplete_steps not in ("error", "drop"):
        raise ValueError(f"incomplete_steps must be 'error' or 'drop', got {incomplete_steps!r}")
    pd = require_pandas()
    path = Path(path)
    _check_file(path)
    raw = _load_frame(path)
    missing = [c for c in OP_TABLE_REQUIRED if c not in raw.columns]
    if missing:
        raise TraceFormatError(
            f"{path}: not a per-op table: columns {missing} missing (has {list(raw.columns)}); "
            f"required: {list(OP_TABLE_REQUIRED)}"
        )
    if len(raw) == 0:
        raise TraceFormatError(f"{path}: table has no rows")
    out = pd.DataFrame(index=raw.index)
    for src, dst in [
        ("rank", "rank"),
        ("step", "step"),
        ("dp_rank", "dp_rank"),
        ("stage", "stage"),
    ]:
        out[dst] = _int_column(raw[src], src, path)
    out["name"] = raw["optype"].astype(str)
    for src, dst in [("start_ts", "start_s"), ("duration", "duration_s")]:
        out[dst] = _float_column(raw[src], src, path)
    for src, dst in _OPTIONAL.items():
        out[dst] = _int_column(raw[src], src, path) if src in raw.columns else -1
    out["chunk"] = out["chunk"].clip(lower=-1)
    source = str(path)
    validate_events(out.rename(index=lambda i: i), source)
    out, moved = sort_events(out)
    check_time_order(out, source)
    dropped: dict[str, int] = {}
    out = _check_complete_steps(out, source, incomplete_steps, dropped)
    meta: dict = {"format": "op-table"}
    if moved:
        meta["rows_sorted"] = (
            "rows stored in neither rank-and-step groups nor time order; sorted by rank, step"
            " and start time (the result does not depend on the row order)"
        )
    return EventTable(out.reset_index(drop=True), source, dropped, meta)


def _int_column(col, name, path):
    pd = require_pandas()
    values = pd.to_numeric(col, errors="coerce")
    bad = values.isna() | (values != values.round())
    if bad.any():
        i = bad.to_numpy().nonzero()[0][0]
        raise TraceFormatError(
            f"{path}: row {col.index[i]}: column {name!r} is {col.iloc[i]!r}, expected an integer"
        )
    return values.astype("int64")


def _float_column(col, name, path):
    pd = require_pandas()
    values = pd.to_numeric(col, errors="coerce")
    bad = values.isna() & col.notna()
    if bad.any():
        i = bad.to_numpy().nonzero()[0][0]
        raise TraceFormatError(
            f"{path}: row {col.index[i]}: column {name!r} is {col.iloc[i]!r}, expected a number"
        )
    return values.astype("float64")


def _check_complete_steps(frame, source, policy, dropped):
    ranks = set(frame["rank"].unique())
    per_step = frame.groupby("step")["rank"].agg(lambda r: ranks - set(r))
    bad = per_step[per_step.map(len) > 0]
    if len(bad) == 0:
        return frame
    if policy == "error":
        step, miss = bad.index[0], sorted(int(r) for r in bad.iloc[0])
        raise TraceFormatError(
            f"{source}: step {step}: ranks {miss} recorded no ops ({len(bad)} incomplete steps); "
            "pass incomplete_steps='drop' to leave such steps out (they are counted)"
        )
    dropped["steps with missing ranks"] = len(bad)
    return frame[~frame["step"].isin(bad.index)]


def read_step_times(path) -> np.ndarray:
    """Measured step times (seconds) from CSV or JSON, in file (or step-id) order.

    See :func:`read_step_series` for the accepted layouts.

    Parameters
    ----------
    path : str or Path
        The file.

    Returns
    -------
    numpy.ndarray
    """
    return read_step_series(path).to_numpy()


def read_step_series(path):
    """Measured step times (seconds) from CSV or JSON.

    Accepted: a JSON list of numbers; a JSON object ``{step: seconds}``; an object with one of
    the keys ``step_t_base``, ``step_times_s``, ``step_time_s`` holding either; a CSV with a
    column ``step_time_s`` (or ``step_time``, or a single column).

    Parameters
    ----------
    path : str or Path
        The file.

    Returns
    -------
    pandas.Series
        Step times indexed by step id (objects keyed by integer step ids, or a CSV ``step``
        column) or by position.

    Raises
    ------
    TraceFormatError
        Empty or malformed files, non-numeric, NaN, infinite, zero or negative values.
    """
    path = Path(path)
    _check_file(path)
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise TraceFormatError(
                f"{path}: not valid JSON (truncated?): {exc}; expected {STEP_FORMATS}"
            ) from None
        values, labels = _json_values(data, path)
        steps = _int_labels(labels)
    elif path.suffix.lower() == ".csv":
        pd = require_pandas()
        try:
            frame = pd.read_csv(path)
        except Exception as exc:
            raise TraceFormatError(
                f"{path}: cannot be read as CSV: {exc}; expected {STEP_FORMATS}"
            ) from None
        cols = [c for c in ("step_time_s", "step_time") if c in frame.columns]
        if not cols and frame.shape[1] != 1:
            raise TraceFormatError(
                f"{path}: need a column 'step_time_s' (or 'step_time', or a single column); "
                f"has {list(frame.columns)}"
            )
        col = frame[cols[0] if cols else frame.columns[0]]
        values, labels = list(col), [f"row {i}" for i in col.index]
        steps = list(frame["step"]) if "step" in frame.columns else None
    else:
        raise TraceFormatError(f"{path}: step times must be .json or .csv")
    pd = require_pandas()
    out = _check_values(values, labels, path)
    index = steps if steps is not None else range(len(out))
    return pd.Series(out, index=list(index), name="step_time_s")


def _int_labels(labels):
    try:
        return [int(lab.split(" ", 1)[1]) for lab in labels if lab.startswith("step ")] or None
    except ValueError:
        return None


def _json_values(data, path):
    if isinstance(data, dict):
        for key in ("step_t_base", "step_times_s", "step_time_s"):
            if key in data:
                return _json_values(data[key], path)
        try:
            keys = sorted(data, key=int)
        except (TypeError, ValueError):
            keys = list(data)
        return [data[k] for k in keys], [f"step {k}" for k in keys]
    if isinstance(data, list):
        return data, [f"item {i}" for i in range(len(data))]
    raise TraceFormatError(f"{path}: expected a list or an object of step times")


def _check_values(values, labels, path):
    if len(values) == 0:
        raise TraceFormatError(f"{path}: no step times")
    out = np.empty(len(values))
    for i, (v, lab) in enumerate(zip(values, labels)):
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise TraceFormatError(f"{path}: {lab}: {v!r} is not a number") from None
        if not math.isfinite(x) or x <= 0:
            raise TraceFormatError(f"{path}: {lab}: step time {v!r} must be finite and > 0")
        out[i] = x
    return out


def read_trace(path, **kwargs) -> EventTable:
    """Read any supported trace: per-op parquet/CSV, or Kineto JSON (one file or a folder).

    Parameters
    ----------
    path : str or Path
        A ``.parquet``/``.csv`` op table, a Kineto ``.json``/``.json.gz`` file, or a folder of
        Kineto files (one per rank).
    **kwargs
        Passed to the reader.

    Returns
    -------
    EventTable
    """
    from prism_analytic.traces.kineto import read_kineto

    path = Path(path)
    name = path.name.lower()
    if path.is_dir() or name.endswith(".json") or name.endswith(".json.gz"):
        return read_kineto(path, **kwargs)
    return read_op_table(path, **kwargs)
