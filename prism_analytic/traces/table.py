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

__all__ = ["COLUMNS", "EventTable", "validate_events", "check_time_order", "sort_events"]

#: Seconds two timestamps of different ranks may disagree by (float32 times of ~50 s resolve
#: ~4 us; the structure recovery uses the same tolerance).
TIME_TOLERANCE_S = 5e-5

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
    if not (dur > 0).any():
        raise TraceFormatError(
            f"{source}: every one of the {dur.size} ops has duration 0 s; a trace needs"
            " measured op durations (were the durations dropped or zeroed on export?)"
        )


def sort_events(frame) -> tuple[Any, bool]:
    """The frame in time order (rank, step, start), and whether its rows were scrambled.

    Nothing downstream depends on the row order, so rows stored in any order are legitimate;
    they are sorted so that messages name rows in time order. The flag is True when the file
    kept neither of the two usual orders: each rank's step stored together, or each rank's
    rows in time order (a chronological log): worth a note (rows shuffled, files merged).
    """
    rank = frame["rank"].to_numpy()
    step = frame["step"].to_numpy()
    start = frame["start_s"].to_numpy(dtype=float)
    key = rank.astype(np.int64) * (int(step.max()) + 1) + step
    grouped = int((key[1:] != key[:-1]).sum()) + 1 == len(np.unique(key))
    by_rank = np.argsort(rank, kind="stable")  # file order kept within a rank
    r, st, t = rank[by_rank], step[by_rank], start[by_rank]
    same = r[1:] == r[:-1]
    forward = (st[1:] > st[:-1]) | ((st[1:] == st[:-1]) & (t[1:] >= t[:-1]))
    chronological = bool(np.all(forward | ~same))
    order = frame.sort_values(["rank", "step", "start_s"], kind="stable")
    return order, not (grouped or chronological)


def check_time_order(frame, source: str) -> None:
    """Refuse timestamps that contradict the sequence numbers or the send/recv order.

    Two facts of any recorded schedule: on one rank, the ops of one name with sequence
    numbers run in that order within a step; a pipeline receive cannot end before the
    matching send (the same data-parallel rank and step, the peer stage, the same place in
    order among that channel's sends) started. Timestamps shuffled across rows, or clocks of
    different ranks far apart, break them and would be fitted as a different schedule. (Steps
    are not compared with each other: traces may time each step from its own start.)

    Raises
    ------
    TraceFormatError
        Naming the file, the row, the rank and the step of the first contradiction.
    """
    _check_sequence_order(frame, source)
    _check_send_before_receive(frame, source)


def _check_sequence_order(frame, source: str) -> None:
    known = frame[frame["seq_id"] >= 0]
    if known.empty:
        return
    known = known.sort_values(["rank", "step", "name", "seq_id"], kind="stable")
    keys = [known[c].to_numpy() for c in ("rank", "step", "name")]
    same = np.ones(len(known) - 1, dtype=bool)
    for k in keys:
        same &= k[1:] == k[:-1]
    start = known["start_s"].to_numpy(dtype=float)
    back = same & (np.diff(start) < -TIME_TOLERANCE_S)
    if back.any():
        i = int(np.flatnonzero(back)[0]) + 1
        r = known.iloc[i]
        raise TraceFormatError(
            f"{source}: row {known.index[i]}: rank {int(r['rank'])} step {int(r['step'])}:"
            f" {r['name']} #{int(r['seq_id'])} starts at {r['start_s']:.6g} s, before"
            f" #{int(known.iloc[i - 1]['seq_id'])}; timestamps contradict the sequence numbers"
            " (shuffled timestamps?)"
        )


def _check_send_before_receive(frame, source: str) -> None:
    names = frame["name"].astype(str)
    pp = int(frame["stage"].max()) + 1
    if pp < 2:
        return
    # pair sends with receives of the same tensor/context-parallel slot: with tp or cp > 1 a
    # (dp rank, stage) holds several ranks, each with its own hand-offs
    slot = frame.groupby(["dp_rank", "stage"])["rank"].rank(method="dense").astype(int)
    frame = frame.assign(slot=slot)
    sides = []
    for word, delta in (("forward", 1), ("backward", -1)):
        send = frame[names == f"{word}-send"]
        recv = frame[names == f"{word}-recv"]
        # both sides keyed by the receiving stage
        sides.append(
            (word, send.assign(to=(send["stage"] + delta) % pp), recv.assign(to=recv["stage"]))
        )
    for word, send, recv in sides:
        if send.empty or recv.empty:
            continue
        key = ["step", "dp_rank", "to", "slot"]
        send = send.sort_values([*key, "start_s"], kind="stable")
        recv = recv.sort_values([*key, "start_s"], kind="stable")
        send = send.assign(
            k=send.groupby(key).cumcount(), n=send.groupby(key)["step"].transform("size")
        )
        recv = recv.assign(
            k=recv.groupby(key).cumcount(), n=recv.groupby(key)["step"].transform("size")
        )
        # only channels with one record per hand-off on both sides: extra no-op records
        # (interleaved schedules) leave the k-th receive's send unknown
        both = send.reset_index().merge(
            recv.reset_index(), on=[*key, "k"], suffixes=("_send", "_recv")
        )
        both = both[both["n_send"] == both["n_recv"]]
        end = both["start_s_recv"] + both["duration_s_recv"]
        bad = end < both["start_s_send"] - TIME_TOLERANCE_S
        if bad.any():
            r = both[bad].iloc[0]
            raise TraceFormatError(
                f"{source}: row {r['index_recv']}: rank {int(r['rank_recv'])} step"
                f" {int(r['step'])}: {word}-recv #{int(r['k'])} ends at"
                f" {r['start_s_recv'] + r['duration_s_recv']:.6g} s, before the matching"
                f" {word}-send (row {r['index_send']}, rank {int(r['rank_send'])}) starts at"
                f" {r['start_s_send']:.6g} s; a receive cannot end before its send begins"
                f" ({int(bad.sum())} such receives: timestamps edited, or the ranks' clocks"
                " far apart)"
            )
