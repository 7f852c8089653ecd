"""Synthetic step logs of jobs that are not in ``../shared/data`` (for robustness tests).

Writers of the formats ``prism calibrate --steps`` reads, with the variations other systems'
logs show: MLPerf ``:::MLLOG`` files whose ``metadata.step`` counts steps or samples, with or
without evaluation pauses, with a rank prefix (``0: :::MLLOG``), with only ``throughput``
records (no per-step time), and CSV/JSON step lists. Nothing here is copied from measured
files: the times come from the caller (e.g. the model's own law plus noise and stalls).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["draw_steps", "write_mllog", "write_csv", "write_json"]


def draw_steps(
    median_s: float,
    n: int,
    *,
    jitter: float = 0.01,
    stall_steps: tuple[int, ...] = (),
    stall_factor: float = 2.0,
    seed: int = 0,
) -> np.ndarray:
    """``n`` step times around ``median_s``: lognormal jitter plus stalls at given steps."""
    rng = np.random.default_rng(seed)
    t = median_s * np.exp(rng.normal(0.0, jitter, n))
    for i in stall_steps:
        t[i] = stall_factor * median_s
    return t


def _line(key: str, value, meta: dict, t_ms: int, prefix: str) -> str:
    rec = {
        "namespace": "",
        "time_ms": t_ms,
        "event_type": "POINT_IN_TIME",
        "key": key,
        "value": value,
        "metadata": {"file": "synthetic.py", "lineno": 1, **meta},
    }
    return f"{prefix}:::MLLOG {json.dumps(rec)}"


def write_mllog(
    path: Path,
    times: np.ndarray,
    *,
    global_batch_size: int | None = None,
    gradient_accumulation_steps: int | None = None,
    max_sequence_length: int | None = None,
    platform: str | None = None,
    eval_every: int | None = None,
    pause_factor: float = 1.4,
    step_counts: str = "samples",
    per_step_time: bool = True,
    prefix: str = "",
) -> Path:
    """Write an MLPerf-style log of ``times`` (seconds per step).

    ``step_counts`` is what ``metadata.step`` counts ("samples" like NVIDIA's NeMo logs or
    "steps"); ``eval_every`` puts an ``eval_start``/``eval_stop`` pair after every that many
    steps and makes the next step ``pause_factor`` slower; ``per_step_time=False`` writes
    ``throughput`` records (samples/s) instead of ``train_step_time``; ``prefix`` is put
    before every ``:::MLLOG`` (e.g. ``"0: "`` for a rank-prefixed launcher).
    """
    times = np.array(times, dtype=float)
    gbs = global_batch_size or 1
    t_ms = 1_700_000_000_000
    lines = [f"{prefix}launcher banner: not an MLLOG line"]
    meta_keys = {
        "submission_platform": platform,
        "global_batch_size": global_batch_size,
        "gradient_accumulation_steps": gradient_accumulation_steps,
        "max_sequence_length": max_sequence_length,
    }
    for k, v in meta_keys.items():
        if v is not None:
            lines.append(_line(k, v, {}, t_ms, prefix))
    lines.append(_line("run_start", None, {}, t_ms, prefix))
    for i, t in enumerate(times):
        if eval_every and i and i % eval_every == 0:
            lines.append(_line("eval_start", None, {"samples_count": i * gbs}, t_ms, prefix))
            t_ms += 60_000
            lines.append(_line("eval_stop", None, {"samples_count": i * gbs}, t_ms, prefix))
            t = t * pause_factor
        t_ms += int(round(t * 1000))
        step = (i + 1) * gbs if step_counts == "samples" else i + 1
        value = {"train_step_time": float(t)} if per_step_time else {"throughput": gbs / t}
        lines.append(_line("tracked_stats", value, {"step": step}, t_ms, prefix))
    lines.append(_line("run_stop", None, {"status": "success"}, t_ms, prefix))
    path.write_text("\n".join(lines) + "\n")
    return path


def write_csv(path: Path, times: np.ndarray, column: str = "step_time_s") -> Path:
    """A CSV with a step index and a step-time column."""
    rows = ["step," + column] + [f"{i},{t:.6f}" for i, t in enumerate(times)]
    path.write_text("\n".join(rows) + "\n")
    return path


def write_json(path: Path, times: np.ndarray, job: dict | None = None) -> Path:
    """A JSON object ``{"step_times_s": [...], "job": {...}}``."""
    path.write_text(json.dumps({"step_times_s": [float(t) for t in times], "job": job or {}}))
    return path
