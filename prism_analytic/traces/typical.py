"""Deterministic step times with every op at a typical value (the structure checks).

Two recipes:

* **by op type** (the straggler-analysis artifact's own "no straggler" simulation): every
  single-rank op takes the mean duration of its op type over all ranks, stages and steps,
  every communication instance the median duration of its kind; host gaps are zero. This
  removes slow workers and stage imbalance, and must reproduce the artifact's ``step_t_noblk``.
* **per rank**: every single-rank op takes the median of its own (rank, op type), every
  communication instance its own median, every host gap its own median; this keeps the
  persistent per-rank effects and lands near the measured median step.
"""

from __future__ import annotations

import numpy as np

from prism_analytic.traces.structure import StepStructure, replay, unit_values

__all__ = ["typical_step_by_type", "typical_step_per_rank"]


def _kind_name(structure: StepStructure, u: int) -> tuple:
    kind, names, _stages = structure.unit_signature(u)
    return kind, names


def typical_step_by_type(structure: StepStructure, rows=None) -> float:
    """Step time with every op at its op type's typical value over all ranks (no gaps).

    Parameters
    ----------
    structure : StepStructure
        Recovered structure.
    rows : array_like of int, optional
        Steps to take the typical values from (default all).

    Returns
    -------
    float
        Seconds.
    """
    _gap, dur = unit_values(structure)
    if rows is not None:
        dur = dur[np.asarray(rows)]
    keys = [_kind_name(structure, u) for u in range(structure.n_units)]
    typical = np.empty(structure.n_units)
    for key in set(keys):
        cols = [u for u, k in enumerate(keys) if k == key]
        values = dur[:, cols]
        typical[cols] = np.median(values) if key[0] == "comm" else values.mean()
    zero = np.zeros((1, structure.start.shape[1]))
    return float(replay(structure, zero, typical[None])[0])


def typical_step_per_rank(structure: StepStructure, rows=None, *, gaps: bool = True) -> float:
    """Step time with every op at its own rank's typical (median) value.

    Parameters
    ----------
    structure : StepStructure
        Recovered structure.
    rows : array_like of int, optional
        Steps to take the typical values from (default all).
    gaps : bool
        Include each host gap at its median (default) or set them to zero.

    Returns
    -------
    float
        Seconds.
    """
    gap, dur = unit_values(structure)
    if rows is not None:
        gap, dur = gap[np.asarray(rows)], dur[np.asarray(rows)]
    typical = np.median(dur, axis=0)
    groups: dict = {}
    for u, members in enumerate(structure.units):
        if len(members) == 1:
            i = members[0]
            groups.setdefault((structure.ranks[i], structure.names[i]), []).append(u)
    for cols in groups.values():
        typical[cols] = np.median(dur[:, cols])
    g = np.median(gap, axis=0)[None] if gaps else np.zeros((1, gap.shape[1]))
    return float(replay(structure, g, typical[None])[0])
