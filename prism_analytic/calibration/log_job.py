"""Whether the job config describes the run a step log comes from.

A calibration fits the GEMM efficiency so that the *given job* reproduces the measured median
step; if the job is not the logged run (another microbatch count, sequence length or GPU
count), the fit still returns a number, silently wrong, and every prediction from it is off
by the same factor. Step logs often state the facts needed to catch this (MLPerf
``:::MLLOG``: ``global_batch_size``, ``gradient_accumulation_steps``,
``max_sequence_length``; a JSON ``"job"`` object: any of :data:`JOB_FACTS`), so each fact a
log states is compared with the job, and a disagreement is an error naming the config key
to set. Facts a log does not state are not checked (nothing is assumed about them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .logs import StepLog
from .result import CalibrationError

__all__ = ["JOB_FACTS", "check_logs_match_job"]

#: Log metadata keys compared with the job, and what each is compared with.
JOB_FACTS = {
    "global_batch_size": "sequences per optimizer step (dp x microbatches x micro_batch_size)"
    " or the same in tokens (x model.seq_len)",
    "gradient_accumulation_steps": "parallelism.microbatches (microbatches per dp rank)",
    "max_sequence_length": "model.seq_len",
    "seq_len": "model.seq_len",
    "gpus": "the job's GPU count",
    "world_size": "the job's GPU count",
}


def _number(value: Any) -> float | None:
    """A log value as a number (MLPerf writes some integers as ``112.0``); None if not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def _mismatch(job: Any, key: str, stated: float) -> str | None:
    """Why ``stated`` (the log's ``key``) disagrees with ``job``; None when it agrees."""
    p = job.parallelism
    seq = job.model.seq_len
    if key == "global_batch_size":
        if stated in (p.global_batch, p.global_batch * seq):
            return None
        return (
            f"global_batch_size = {stated:g} but the job's global batch is {p.global_batch}"
            f" sequences ({p.global_batch * seq} tokens): parallelism.dp {p.dp} x"
            f" parallelism.microbatches {p.microbatches} x parallelism.micro_batch_size"
            f" {p.micro_batch_size}; set those to the logged run's layout"
        )
    if key == "gradient_accumulation_steps":
        if stated == p.microbatches:
            return None
        return (
            f"gradient_accumulation_steps = {stated:g} but the job has parallelism.microbatches"
            f" = {p.microbatches} (microbatches per data-parallel rank); set it to the logged"
            " run's value"
        )
    if key in ("max_sequence_length", "seq_len"):
        if stated == seq:
            return None
        return f"{key} = {stated:g} but the job has model.seq_len = {seq}; set model.seq_len"
    if key in ("gpus", "world_size"):
        if stated == job.gpus:
            return None
        return (
            f"{key} = {stated:g} but the job has {job.gpus} GPUs; give the job at the logged"
            " size (--gpus N, or [job] gpus / parallelism.dp in --config)"
        )
    return None


def check_logs_match_job(job: Any, logs: Sequence[StepLog]) -> None:
    """Raise when a fact a log states contradicts ``job`` (see the module notes).

    Parameters
    ----------
    job : JobConfig
        The job the logs are said to come from.
    logs : sequence of StepLog
        Runs read by :func:`~.logs.read_step_log`; their ``meta`` holds the stated facts.

    Raises
    ------
    CalibrationError
        Naming the log file, the stated fact, the job's value and the config key to set.
    """
    for lg in logs:
        for key in JOB_FACTS:
            if key not in lg.meta:
                continue
            stated = _number(lg.meta[key])
            if stated is None:
                continue  # a non-numeric statement is not comparable; nothing is assumed
            why = _mismatch(job, key, stated)
            if why is not None:
                raise CalibrationError(
                    f"{lg.source} is not a log of job {job.name!r}: the log states {why}"
                )
