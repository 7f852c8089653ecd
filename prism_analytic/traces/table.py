"""The canonical event table: one row per recorded op, times in seconds.

Every reader produces an :class:`EventTable`. Its frame has the columns of :data:`COLUMNS`;
integer ids that a source does not know are -1. What a reader could not use is never dropped
silently: it is counted in :attr:`EventTable.dropped` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from prism_analytic.traces.errors import TraceFormatError

__all__ = ["COLUMNS", "EventTable", "validate_events"]

#: Canonical columns and their meaning.
COLUMNS = {
    "rank": "global rank (int)",
    "step": "training step id (int)",
    "name": "op type, e.g. forward-compute or nccl:allreduce (str)",
    "start_s": "start time in seconds (float)",
    "duration_s": "duration in seconds, >= 0 (float)",
    "dp_rank": "data-parallel rank, -1 if unknown",
    "stage": "pipeline stage, -1 if unknown",
    "seq_id": "order of ops of this name in a step on a rank, -1 if unknown",
    "microbatch": "microbatch id, -1 if unknown or not per microbatch",
    "chunk": "model chunk (virtual stage) within the stage, -1 if unknown",
}
_INT_COLUMNS = ("rank", "step", "dp_rank", "stage", "seq_id", "microbatch", "chunk")


@dataclass(frozen=True)
class EventTable:
    """Canonical events of one trace.

    Attributes
    ----------
    frame : pandas.DataFrame
        One row per op with the columns of :data:`COLUMNS` (seconds).
    source : str
        File(s) it was read from.
    dropped : dict
        Reason -> number of rows or events not used (empty when everything was used).
    meta : dict
        Reader-specific facts (world size, steps, process groups ...).
    """

    frame: Any
    source: str
    dropped: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    @property
    def steps(self) -> list[int]:
        """Sorted step ids present in the table."""
        return sorted(int(s) for s in self.frame["step"].unique())

    @property
    def ranks(self) -> list[int]:
        """Sorted rank ids present in the table."""
        return sorted(int(r) for r in self.frame["rank"].unique())

    def measured_step_times(self):
        """Per-step wall time: last end minus first start over all ranks (seconds).

        Returns
        -------
        pandas.Series
            Indexed by step id.
        """
        f = self.frame
        end = f["start_s"] + f["duration_s"]
        g = end.groupby(f["step"]).max() - f["start_s"].groupby(f["step"]).min()
        return g.rename("step_time_s")

    def summary(self) -> str:
        """One paragraph: size, steps, ranks and what was dropped."""
        drop = ", ".join(f"{k}: {v}" for k, v in self.dropped.items()) or "nothing"
        return (
            f"{len(self.frame)} events from {self.source}: {len(self.steps)} steps, "
            f"{len(self.ranks)} ranks, {self.frame['name'].nunique()} op types; dropped {drop}"
        )


def validate_events(frame, source: str) -> None:
    """Check a canonical frame; raise :class:`TraceFormatError` naming the row and problem.

    Parameters
    ----------
    frame : pandas.DataFrame
        Frame with the canonical columns.
    source : str
        File name used in messages.
    """
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise TraceFormatError(f"{source}: canonical columns missing: {missing}")
    if len(frame) == 0:
        raise TraceFormatError(f"{source}: no events")
    for col in ("start_s", "duration_s"):
        values = frame[col].to_numpy(dtype=float)
        bad = ~np.isfinite(values)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise TraceFormatError(
                f"{source}: row {frame.index[i]}: {col} is {values[i]} (must be finite); "
                f"{int(bad.sum())} such rows"
            )
    dur = frame["duration_s"].to_numpy(dtype=float)
    if (dur < 0).any():
        i = int(np.flatnonzero(dur < 0)[0])
        raise TraceFormatError(
            f"{source}: row {frame.index[i]}: negative duration {dur[i]!r} s "
            f"({int((dur < 0).sum())} such rows); durations must be >= 0"
        )
