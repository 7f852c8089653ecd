"""Deterministic replay of measured steps through the recovered structure, as its proof.

Each step's measured values are pushed through the recovered graph: host gaps and unit
durations as :func:`~prism_analytic.traces.structure.unit_values` gives them. A communication
unit with all its members recovered is net of waits (its last member's start to its end). A
communication op left alone (no partner found: a group the recovery missed, records dropped)
cannot be split into wait and work from its own record; it enters the replay at its *lower
envelope* over the checked steps (its least recorded duration), so a wait the structure does
not explain is missing from the replay and shows as a replayed step shorter than the
measured one. A recovered structure reproduces the steps; a broken one does not, and the
ops whose recorded durations exceed their envelope most (the unexplained waits) name the
likely cause.

Records the replay cannot see are checked too: a rank recording a collective (name and
sequence number) that forms multi-member instances on other ranks but has no partner itself
means records are missing or the ranks are mislabelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from prism_analytic.traces.structure import StepStructure, replay, unit_values
from prism_analytic.traces.structure_groups import is_communication

__all__ = ["ReplayCheck", "replay_check", "DEFAULT_THRESHOLD", "is_communication"]

#: Largest relative replay error (median or max over steps) of a validated structure.
DEFAULT_THRESHOLD = 0.03

_NOOP_S = 5e-5  # seconds: a send or receive this short is a no-op record, not a hand-off


@dataclass(frozen=True)
class ReplayCheck:
    """Replay of measured steps through the recovered structure.

    Attributes
    ----------
    steps : list of int
        Step ids replayed.
    measured, replayed : numpy.ndarray
        Measured and replayed step times (seconds).
    threshold : float
        Largest relative error of a validated structure.
    waits : list of dict
        Unexplained waits, largest first: rank, op type, mean seconds per step.
    orphans : list of dict
        Collective records with no partner while the same collective has partners elsewhere.
    """

    steps: list
    measured: np.ndarray = field(repr=False)
    replayed: np.ndarray = field(repr=False)
    threshold: float
    waits: list
    orphans: list

    @property
    def rel_err(self) -> np.ndarray:
        """Per-step relative error, replayed / measured - 1."""
        return self.replayed / self.measured - 1.0

    @property
    def median_rel_err(self) -> float:
        """Median of the absolute per-step relative errors."""
        return float(np.median(np.abs(self.rel_err)))

    @property
    def max_rel_err(self) -> float:
        """Largest absolute per-step relative error."""
        return float(np.max(np.abs(self.rel_err)))

    @property
    def passed(self) -> bool:
        """Replay within the threshold and no orphan collective records."""
        return self.max_rel_err <= self.threshold and not self.orphans

    def failure_line(self) -> str | None:
        """One line starting ``REPLAY FAILED:`` with the likely cause, or None when passed."""
        if self.passed:
            return None
        parts = []
        if self.max_rel_err > self.threshold:
            parts.append(
                f"replayed steps differ from the measured ones by median "
                f"{self.median_rel_err:.1%}, max {self.max_rel_err:.1%} (threshold "
                f"{self.threshold:.1%})"
            )
        if self.orphans:
            o = self.orphans[0]
            more = f" (and {len(self.orphans) - 1} more)" if len(self.orphans) > 1 else ""
            if "uneven_sizes" in o:
                what = (
                    f"{o['optype']} #{o['seq_id']} forms instances of "
                    f"{'/'.join(map(str, o['uneven_sizes']))} members (rank {o['rank']} in an "
                    f"odd one)"
                )
            else:
                what = (
                    f"{o['optype']} #{o['seq_id']} on rank {o['rank']} has no partner while "
                    f"its instances on other ranks have {o['instance_size']} members"
                )
            parts.append(f"{what}{more}: records missing or ranks mislabelled")
        # waits below 0.1% of the step explain nothing worth naming
        big = [x for x in self.waits if x["mean_s"] >= 1e-3 * float(np.median(self.measured))]
        if big:
            w = ", ".join(
                f"rank {x['rank']} {x['optype']} {x['mean_s'] * 1e3:.3g} ms/step" for x in big[:3]
            )
            parts.append(f"largest unexplained waits: {w}")
        return "REPLAY FAILED: " + "; ".join(parts) + "; the prediction is not validated"

    def to_dict(self) -> dict:
        """JSON-ready summary (``TracePrediction.to_dict()["replay"]``)."""
        err = self.rel_err
        worst = np.argsort(-np.abs(err))[:5]
        return {
            "steps": len(self.steps),
            "median_rel_err": self.median_rel_err,
            "max_rel_err": self.max_rel_err,
            "threshold": self.threshold,
            "passed": self.passed,
            "worst_steps": [
                {
                    "step": int(self.steps[i]),
                    "measured_s": float(self.measured[i]),
                    "replayed_s": float(self.replayed[i]),
                    "rel_err": float(err[i]),
                }
                for i in worst
            ],
            "unexplained_waits": self.waits[:10],
            "orphan_collective_records": self.orphans[:10],
            "failure": self.failure_line(),
        }


def replay_check(
    structure: StepStructure, rows=None, threshold: float = DEFAULT_THRESHOLD
) -> ReplayCheck:
    """Replay measured steps through the structure and compare with the measured step times.

    Parameters
    ----------
    structure : StepStructure
        From :func:`~prism_analytic.traces.structure.recover_structure`.
    rows : array-like of int, optional
        Rows of ``structure.steps`` to replay (default: all).
    threshold : float
        Largest relative error (max over steps) of a validated structure, in (0, 1).

    Returns
    -------
    ReplayCheck
    """
    if not (isinstance(threshold, (int, float)) and 0 < threshold < 1):
        raise ValueError(f"replay threshold must be a number in (0, 1), got {threshold!r}")
    n_steps = len(structure.steps)
    rows = np.arange(n_steps) if rows is None else np.asarray(rows, dtype=int)
    if rows.size == 0 or rows.min() < 0 or rows.max() >= n_steps:
        raise ValueError(f"rows must be non-empty indices of the {n_steps} steps")
    gap, dur = unit_values(structure)
    gap, dur = gap[rows], dur[rows]
    measured = np.nanmax(structure.end[rows], axis=1)
    alone = _lone_communication(structure)
    net = dur.copy()
    waits = []
    if alone.size:
        envelope = dur[:, alone].min(axis=0)
        net[:, alone] = envelope[None, :]
        excess = (dur[:, alone] - envelope[None, :]).mean(axis=0)
        for u, x in zip(alone, excess):
            i = structure.units[u][0]
            waits.append(
                {"rank": int(structure.ranks[i]), "optype": str(structure.names[i]), "seconds": x}
            )
    waits = _by_rank_and_type(waits)
    replayed = replay(structure, gap, net)
    return ReplayCheck(
        steps=[int(structure.steps[r]) for r in rows],
        measured=measured,
        replayed=replayed,
        threshold=float(threshold),
        waits=waits,
        orphans=_orphans(structure),
    )


def _lone_communication(structure: StepStructure) -> np.ndarray:
    """Single-op units of communication: by name, or of a name grouped elsewhere."""
    grouped = {
        str(structure.names[i]) for u, m in enumerate(structure.units) if len(m) > 1 for i in m
    }
    out = [
        u
        for u, m in enumerate(structure.units)
        if len(m) == 1
        and (is_communication(structure.names[m[0]]) or str(structure.names[m[0]]) in grouped)
    ]
    return np.array(out, dtype=int)


def _by_rank_and_type(waits: list) -> list:
    agg: dict = {}
    for w in waits:
        key = (w["rank"], w["optype"])
        agg[key] = agg.get(key, 0.0) + float(w["seconds"])
    out = [{"rank": r, "optype": t, "mean_s": s} for (r, t), s in agg.items() if s > 0]
    return sorted(out, key=lambda x: -x["mean_s"])


def _orphans(structure: StepStructure) -> list:
    """Records that a recovered unit of the same kind elsewhere says should have partners.

    * a collective record (name and sequence number) alone while the same name and sequence
      number forms multi-member instances on other ranks;
    * a collective whose instances (same name and sequence number) differ in size;
    * a send or receive alone that is not a no-op record (it takes time) while the same
      name pairs elsewhere.
    """
    in_group = np.zeros(len(structure.keys), bool)
    sizes: dict = {}
    paired_dur: dict = {}
    dur = np.nanmedian(structure.end - structure.start, axis=0)
    for g in structure.groups:
        in_group[g] = True
        for i in g:
            k = (str(structure.keys[i][1]), int(structure.keys[i][2]))
            sizes.setdefault(k, []).append(len(g))
            if _is_p2p(k[0]):
                paired_dur.setdefault(k[0], []).append(dur[i])
    out = []
    for i, (rank, name, seq) in enumerate(structure.keys):
        k = (str(name), int(seq))
        if in_group[i]:
            continue
        if _is_p2p(k[0]):
            typical = np.median(paired_dur[k[0]]) if k[0] in paired_dur else np.inf
            if dur[i] > max(_NOOP_S, 0.1 * typical):
                out.append({"rank": int(rank), "optype": k[0], "seq_id": k[1], "instance_size": 2})
        elif k in sizes:
            out.append(
                {"rank": int(rank), "optype": k[0], "seq_id": k[1], "instance_size": max(sizes[k])}
            )
    for (name, seq), sz in sorted(sizes.items()):
        if not _is_p2p(name) and len(set(sz)) > 1:
            ranks = sorted(
                int(structure.keys[g[0]][0])
                for g in structure.groups
                if (str(structure.keys[g[0]][1]), int(structure.keys[g[0]][2])) == (name, seq)
                and len(g) != max(set(sz), key=sz.count)
            )
            out.append(
                {
                    "rank": ranks[0] if ranks else -1,
                    "optype": name,
                    "seq_id": seq,
                    "instance_size": max(set(sz), key=sz.count),
                    "uneven_sizes": sorted(set(sz)),
                }
            )
    return out


def _is_p2p(name) -> bool:
    return str(name).endswith(("-send", "-recv")) and not str(name).endswith("-send-recv")
