"""Run a sweep: evaluate every configuration not yet in the table, on any executor."""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .evaluate import EvalSettings, evaluate_point, int_columns, row_columns
from .spec import SweepPoint, SweepSpec
from .table import FINAL, Journal, check_output, finished_rows, to_frame, write_table

__all__ = ["SweepOutcome", "run_sweep", "run_points"]


@dataclass
class SweepOutcome:
    """What a sweep run did.

    Attributes
    ----------
    table : pandas.DataFrame or list of dict
        Every row of the sweep (and older rows of the same output), in sweep order; a
        DataFrame when pandas is available.
    evaluated, skipped : int
        Configurations evaluated now, and skipped because the output already had them.
    lost : list of str
        Executor failures (e.g. a task that killed dask workers too often): those
        configurations have no row; a rerun evaluates them.
    ids : list of str
        Config ids of this sweep, in order (the table may hold older rows after them).
    """

    table: Any
    evaluated: int
    skipped: int
    lost: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)


def run_points(
    points: list[SweepPoint],
    settings: EvalSettings,
    *,
    executor: Executor | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    max_inflight: int = 1024,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Evaluate ``points`` (in this process when ``executor`` is None); rows in completion order.

    Returns
    -------
    rows : list of dict
    lost : list of str
        One message per configuration the executor failed to run.
    """
    rows: list[dict[str, Any]] = []
    lost: list[str] = []

    def done(row: dict[str, Any]) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)

    if executor is None:
        for p in points:
            done(evaluate_point(p, settings))
        return rows, lost
    pending: dict[cf.Future, SweepPoint] = {}
    try:
        _drain(points, settings, executor, pending, done, lost, max_inflight)
    except BaseException:
        # interrupted: drop what has not started, so closing the pool does not wait for it
        for fut in pending:
            fut.cancel()
        raise
    return rows, lost


def _drain(
    points: list[SweepPoint],
    settings: EvalSettings,
    executor: Executor,
    pending: dict[cf.Future, SweepPoint],
    done: Callable[[dict[str, Any]], None],
    lost: list[str],
    max_inflight: int,
) -> None:
    """Keep up to ``max_inflight`` configurations submitted until all have finished."""
    queue = iter(points)
    exhausted = False
    while pending or not exhausted:
        while not exhausted and len(pending) < max_inflight:
            p = next(queue, None)
            if p is None:
                exhausted = True
                break
            pending[executor.submit(evaluate_point, p, settings)] = p
        if not pending:
            break
        finished, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
        for fut in finished:
            p = pending.pop(fut)
            try:
                done(fut.result())
            except Exception as exc:  # noqa: BLE001 - the executor's failure, not the row's
                lost.append(f"configuration {p.index}: {type(exc).__name__}: {exc}")


def run_sweep(
    spec: SweepSpec,
    settings: EvalSettings,
    out: str | Path | None = None,
    *,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SweepOutcome:
    """Evaluate a sweep, writing (and resuming) the table ``out``.

    Parameters
    ----------
    spec : SweepSpec
    settings : EvalSettings
    out : path, optional
        CSV or Parquet table; rows already there (status ok/invalid/infeasible) are skipped.
        Without it, nothing is written and the rows are only returned.
    executor : concurrent.futures.Executor, optional
        From :func:`~prism_analytic.sweep.executor.open_executor`; None runs in this process.
    progress : callable, optional
        ``progress(done, total)`` after every configuration.

    Returns
    -------
    SweepOutcome
    """
    points = spec.configurations()
    ident = settings.identity()
    ids = [p.config_id(ident) for p in points]
    columns = row_columns(spec.keys, settings)
    ints = int_columns(spec.keys)
    path = check_output(out) if out is not None else None
    have = finished_rows(path) if path is not None else {}
    todo = [p for p, i in zip(points, ids) if have.get(i, {}).get("status") not in FINAL]
    skipped = len(points) - len(todo)
    journal = Journal(path) if path is not None else None
    count = [skipped]
    if progress is not None:
        progress(skipped, len(points))

    def on_row(row: dict[str, Any]) -> None:
        have[row["config_id"]] = row
        if journal is not None:
            journal.append(row)
        count[0] += 1
        if progress is not None:
            progress(count[0], len(points))

    try:
        rows, lost = run_points(todo, settings, executor=executor, on_row=on_row)
    finally:
        if journal is not None:
            journal.close()
            # written even when interrupted: the rows so far are kept, a rerun resumes
            table = write_table(path, have, ids, columns, ints)
    if path is None:
        table = to_frame([have[i] for i in ids if i in have], columns, ints)
    return SweepOutcome(table=table, evaluated=len(rows), skipped=skipped, lost=lost, ids=ids)
