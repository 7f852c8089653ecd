"""Readers of measured step times: MLPerf ``:::MLLOG`` files, CSV and JSON step lists.

Every reader returns a :class:`StepLog` (one run: step times in seconds, in order, and what
the file says about the job). :func:`read_step_log` picks the reader from the content, and
:func:`pool_logs` checks that several runs describe the same job before pooling them.

Formats
-------
* MLPerf Training logs: lines containing ``:::MLLOG {json}``; steps are ``tracked_stats``
  records with ``value.train_step_time``; ``global_batch_size``,
  ``gradient_accumulation_steps``, ``max_sequence_length`` and ``submission_platform`` are
  kept as job metadata; a step that follows an ``eval_stop`` record is flagged
  (:attr:`StepLog.after_pause`). A launcher's rank label before the mark (``0: :::MLLOG``)
  is allowed; step records of several ranks interleaved in one file are refused (each step
  would count more than once). ``metadata.step`` is not read (it counts samples in some
  logs, steps in others); records carrying only ``throughput`` (an average over several
  steps) are refused by name.
* CSV: a header with one of the columns :data:`CSV_COLUMNS` (seconds) or
  :data:`MS_COLUMNS` (milliseconds), or a single unnamed column of numbers (seconds).
* JSON: a list of numbers; a list of objects with a key of :data:`CSV_COLUMNS`; an object
  with ``"step_times_s"`` (list) and optional ``"job"`` metadata; or the straggler-trace
  result files (``step_t_base``: ``{step: seconds}``, Lin et al. OSDI'25).

Bad input raises :class:`StepLogError` (a ``ValueError``) naming the file and what is wrong.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = [
    "StepLog",
    "StepLogError",
    "CSV_COLUMNS",
    "read_step_log",
    "read_mllog",
    "pool_logs",
    "MIN_STEPS",
]

#: Column / key names accepted for a step time in seconds.
CSV_COLUMNS = ("step_time_s", "step_time", "train_step_time", "seconds", "time_s")
#: Column / key names accepted for a step time in milliseconds (divided by 1000 on reading).
MS_COLUMNS = ("step_time_ms", "train_step_time_ms")
#: Fewest steps (after dropping warm-up) that a fit accepts.
MIN_STEPS = 20
_MARK = ":::MLLOG "
#: a launcher's rank label before the MLLOG mark (``srun --label``: ``"12: :::MLLOG {...}"``)
_RANK = re.compile(r"^\s*(\d+)\s*:\s*$")
_META_KEYS = (
    "global_batch_size",
    "gradient_accumulation_steps",
    "max_sequence_length",
    "submission_platform",
)


class StepLogError(ValueError):
    """A step log that cannot be read or used; the message names the file and the problem."""


@dataclass(frozen=True)
class StepLog:
    """Measured step times of one run.

    Attributes
    ----------
    source : str
        File name.
    times_s : numpy.ndarray
        Step wall times in seconds, in order, warm-up dropped.
    meta : dict
        Job facts the file states (e.g. ``global_batch_size``); compared by :func:`pool_logs`.
    after_pause : numpy.ndarray of bool
        Steps that directly follow an evaluation pause (MLPerf ``eval_stop``); all False
        for formats that do not record pauses.
    """

    source: str
    times_s: np.ndarray
    meta: dict = field(default_factory=dict)
    after_pause: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.after_pause is None:
            object.__setattr__(self, "after_pause", np.zeros(len(self.times_s), dtype=bool))

    @property
    def n(self) -> int:
        """Number of steps."""
        return len(self.times_s)


def _check_times(times: list[float], where: str) -> None:
    for i, t in enumerate(times):
        if not (isinstance(t, int | float) and math.isfinite(t) and t > 0):
            raise StepLogError(f"{where}: step {i} has time {t!r}; step times must be > 0 s")


def read_mllog(text: str, source: str, drop_first: int = 2) -> StepLog:
    """Parse an MLPerf ``:::MLLOG`` log (see the module notes)."""
    times: list[float] = []
    pause: list[bool] = []
    meta: dict = {}
    pending_pause = False
    interval_stats = 0  # tracked_stats without a per-step time (e.g. throughput averages)
    ranks: dict[str, int] = {}  # rank label -> first line with a step record
    for lineno, line in enumerate(text.splitlines(), 1):
        i = line.find(_MARK)
        if i < 0:
            continue
        try:
            rec = json.loads(line[i + len(_MARK) :])
        except json.JSONDecodeError as err:
            raise StepLogError(
                f"{source}:{lineno}: truncated or invalid MLLOG JSON ({err.msg})"
            ) from None
        if not isinstance(rec, dict):
            raise StepLogError(f"{source}:{lineno}: MLLOG record is not a JSON object")
        key, value = rec.get("key"), rec.get("value")
        if key == "tracked_stats" and isinstance(value, dict) and "train_step_time" in value:
            t = value["train_step_time"]
            _check_times([t], f"{source}:{lineno}")
            label = _RANK.match(line[:i])
            if label:
                ranks.setdefault(label.group(1), lineno)
                if len(ranks) > 1:
                    (r0, l0), (r1, l1) = list(ranks.items())[:2]
                    raise StepLogError(
                        f"{source}: step records of several ranks are interleaved (rank {r0}"
                        f" from line {l0}, rank {r1} at line {l1}): every step would count"
                        f" more than once; keep one rank's lines (e.g. grep '^{r0}: ')"
                    )
            times.append(float(t))
            pause.append(pending_pause)
            pending_pause = False
        elif key == "tracked_stats" and isinstance(value, dict) and "throughput" in value:
            interval_stats += 1
        elif key == "eval_stop":
            pending_pause = True
        elif key in _META_KEYS and value is not None:
            meta[key] = value
    if not times:
        if interval_stats:
            # a throughput is an average over the steps since the previous record: its spread
            # is not a step's, so it is not turned into step times here
            raise StepLogError(
                f"{source}: {interval_stats} 'tracked_stats' records carry only 'throughput'"
                " (an average over several steps), no per-step value.train_step_time; give"
                " per-step times instead (a CSV with a step_time_s column, or a JSON list),"
                " or calibrate to the rate with --tokens-per-s"
            )
        raise StepLogError(
            f"{source}: no step records (expected ':::MLLOG' lines with key 'tracked_stats'"
            " and value.train_step_time)"
        )
    return StepLog(source, np.asarray(times[drop_first:]), meta, np.asarray(pause[drop_first:]))


def _from_csv(text: str, source: str, drop_first: int) -> StepLog:
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    if not rows:
        raise StepLogError(f"{source}: empty CSV, no step records")
    header = [c.strip().lower() for c in rows[0]]
    col = next((header.index(c) for c in CSV_COLUMNS + MS_COLUMNS if c in header), None)
    scale = 1e-3 if col is not None and header[col] in MS_COLUMNS else 1.0
    if col is None:
        if len(header) != 1:
            raise StepLogError(
                f"{source}: no step-time column; name one of {', '.join(CSV_COLUMNS)}"
                f" (seconds) or {', '.join(MS_COLUMNS)} (milliseconds) in the header"
            )
        col, body = 0, rows
        try:
            float(rows[0][0])
        except ValueError:
            body = rows[1:]
    else:
        body = rows[1:]
    times = []
    for k, r in enumerate(body, 2 if body is not rows else 1):
        try:
            times.append(float(r[col]) * scale)
        except (ValueError, IndexError):
            raise StepLogError(
                f"{source}: row {k} has no numeric step time in column {col + 1}"
            ) from None
    if not times:
        raise StepLogError(f"{source}: no step records under the header")
    _check_times(times, source)
    return StepLog(source, np.asarray(times[drop_first:]), {})


def _from_json(text: str, source: str, drop_first: int) -> StepLog:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise StepLogError(
            f"{source}: truncated or invalid JSON at line {err.lineno} column {err.colno}"
            f" ({err.msg})"
        ) from None
    meta: dict = {}
    if isinstance(data, dict) and "step_t_base" in data:  # straggler-trace result file
        steps = data["step_t_base"]
        if not isinstance(steps, dict) or not steps:
            raise StepLogError(f"{source}: 'step_t_base' must be a non-empty {{step: seconds}}")
        try:
            items = sorted(steps.items(), key=lambda kv: int(kv[0]))
        except ValueError:
            raise StepLogError(f"{source}: 'step_t_base' keys must be step numbers") from None
        times = [v for _, v in items]
        job = data.get("job_meta")
        meta = dict(job) if isinstance(job, dict) else {}
        drop_first = 0  # the artifact already lists measured (post warm-up) steps only
    elif isinstance(data, dict):
        if "step_times_s" not in data:
            raise StepLogError(
                f"{source}: JSON object without 'step_times_s' (or 'step_t_base'); no step records"
            )
        times = data["step_times_s"]
        meta = data.get("job", {}) if isinstance(data.get("job", {}), dict) else {}
    elif isinstance(data, list):
        times = []
        for i, x in enumerate(data):
            if isinstance(x, dict):
                key = next((c for c in CSV_COLUMNS + MS_COLUMNS if c in x), None)
                if key is None:
                    raise StepLogError(
                        f"{source}: item {i} has none of the keys"
                        f" {', '.join(CSV_COLUMNS + MS_COLUMNS)}"
                    )
                ms = key in MS_COLUMNS and isinstance(x[key], int | float)
                times.append(x[key] * 1e-3 if ms else x[key])
            else:
                times.append(x)
    else:
        raise StepLogError(f"{source}: JSON must be a list or an object, no step records")
    if not isinstance(times, list) or not times:
        raise StepLogError(f"{source}: no step records")
    _check_times(times, source)
    return StepLog(source, np.asarray(times, dtype=float)[drop_first:], meta)


def read_step_log(path: str | Path, *, drop_first: int = 2) -> StepLog:
    """Read one run's step times, choosing the format from the content.

    Parameters
    ----------
    path : str or Path
    drop_first : int
        Warm-up steps to drop from the start (MLPerf, CSV and plain JSON lists; the
        straggler-trace files list measured steps only and drop nothing).

    Raises
    ------
    FileNotFoundError
        No such file.
    StepLogError
        No step records, truncated JSON, non-positive times.
    """
    if isinstance(drop_first, bool) or not isinstance(drop_first, int) or drop_first < 0:
        raise StepLogError(f"drop_first must be an integer >= 0, got {drop_first!r}")
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no such step log: {str(p)!r}")
    raw = p.read_bytes()
    if b"\0" in raw[: 1 << 16]:  # text logs hold no NUL byte; a binary file would parse as junk
        raise StepLogError(
            f"{p.name}: a binary file, not a step log; give an MLPerf ':::MLLOG' text log, a"
            f" CSV with a {' / '.join(CSV_COLUMNS[:1] + MS_COLUMNS[:1])} column, or JSON"
            " (a list of step times or {'step_times_s': [...]})"
        )
    text = raw.decode("utf-8", errors="replace")
    if _MARK in text:
        return read_mllog(text, p.name, drop_first)
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        return _from_json(text, p.name, drop_first)
    return _from_csv(text, p.name, drop_first)


def pool_logs(logs: list[StepLog], *, min_steps: int = MIN_STEPS) -> StepLog:
    """Pool runs of one job into one sample; refuse mixed jobs and too few steps.

    Runs are mixed when a job fact both files state differs (global batch, gradient
    accumulation, sequence length, platform, ``world_size``/``gpus``).
    """
    if not logs:
        raise StepLogError("no step logs given")
    ref = logs[0]
    for lg in logs[1:]:
        for k in set(ref.meta) & set(lg.meta):
            if ref.meta[k] != lg.meta[k]:
                raise StepLogError(
                    f"mixed jobs: {ref.source} has {k} = {ref.meta[k]!r} but {lg.source} has"
                    f" {lg.meta[k]!r}; calibrate one job (one size) at a time"
                )
    meta: dict = {}
    for lg in logs:
        meta.update(lg.meta)
    pooled = StepLog(
        "+".join(lg.source for lg in logs),
        np.concatenate([lg.times_s for lg in logs]),
        meta,
        np.concatenate([lg.after_pause for lg in logs]),
    )
    if pooled.n < min_steps:
        raise StepLogError(
            f"too few steps to fit: {pooled.n} after dropping warm-up (and, for the median and"
            f" stall fit, the steps right after an evaluation pause); need >= {min_steps}"
        )
    return pooled


def without_pauses(logs: list[StepLog]) -> list[StepLog]:
    """The runs with the steps directly after an evaluation pause left out.

    Those steps are slow for a known reason at known positions (the training state is
    rebuilt after evaluation; ``[training.evaluation]`` holds their cost), not draws of the
    step law, so stall counts and quantile ratios are taken without them.
    """
    out = []
    for lg in logs:
        keep = ~np.asarray(lg.after_pause, dtype=bool)
        out.append(StepLog(lg.source, lg.times_s[keep], lg.meta))
    return out


def per_run_normalised(logs: list[StepLog]) -> np.ndarray:
    """Every run's steps divided by that run's median, pooled (removes allocation effects)."""
    return np.concatenate([lg.times_s / np.median(lg.times_s) for lg in logs if lg.n])
