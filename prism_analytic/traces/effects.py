"""Effects detected in a trace: warm-up steps, slow ranks, stage imbalance, shared factors.

Everything is read from the data: a slow rank is one whose per-microbatch work is slower than
the median of the other ranks of its stage by more than 5%, and by more than 5 robust standard
deviations (1.4826 MAD) of that relative difference over all ranks; stage imbalance compares
each stage's per-microbatch work with the mean over stages; warm-up steps are a leading run of
steps whose times lie more than 4 robust standard deviations (1.4826 MAD) from the median of the
steps.
"""

from __future__ import annotations

import numpy as np

__all__ = ["warmup_steps", "rank_effects"]

_WARMUP_Z = 4.0
_SLOW_REL = 0.05
_SLOW_Z = 5.0


def warmup_steps(step_times) -> int:
    """How many leading steps are warm-up (outliers at the start of the trace).

    Parameters
    ----------
    step_times : array_like
        Step times in step order.

    Returns
    -------
    int
        Number of leading outlying steps (at most a quarter of the steps).
    """
    x = np.asarray(step_times, dtype=float)
    med = np.median(x)
    mad = 1.4826 * np.median(np.abs(x - med))
    if mad == 0:
        return 0
    k = 0
    while k < x.size // 4 and abs(x[k] - med) > _WARMUP_Z * mad:
        k += 1
    return k


def rank_effects(model) -> dict:
    """Slow ranks and stage imbalance from a fitted :class:`TraceModel`.

    Parameters
    ----------
    model : TraceModel
        Fitted model (its per-rank typical values are used).

    Returns
    -------
    dict
        ``slow_ranks`` (rank, dp_rank, stage, slowdown), ``stage_work_s`` (typical
        per-microbatch work per stage), ``stage_imbalance`` (max over mean).
    """
    s = model.structure
    cols = model.mb_col
    if cols.size == 0:
        return {"slow_ranks": [], "stage_work_s": {}, "stage_imbalance": None}
    first = np.array([s.units[u][0] for u in model.op_units[cols]])
    work = np.exp(model.log_base[cols])
    ranks, stages, dps = s.ranks[first], s.stage[first], s.dp[first]
    per_rank = {}
    for r in np.unique(ranks):
        sel = ranks == r
        n_mb = max(len(set(s.microbatch[first[sel]])), 1)
        per_rank[int(r)] = (float(work[sel].sum() / n_mb), int(stages[sel][0]), int(dps[sel][0]))
    by_stage = {}
    for w, st, _dp in per_rank.values():
        by_stage.setdefault(st, []).append(w)
    rel = {}
    for r, (w, st, _dp) in per_rank.items():
        others = [x for x in by_stage[st]]
        others.remove(w)
        if others:
            rel[r] = w / np.median(others) - 1
    slow = []
    if rel:
        values = np.array(list(rel.values()))
        centre = np.median(values)
        spread = 1.4826 * np.median(np.abs(values - centre))
        for r, x in rel.items():
            if x > _SLOW_REL and x - centre > _SLOW_Z * spread:
                w, st, dp = per_rank[r]
                slow.append({"rank": r, "dp_rank": dp, "stage": st, "slowdown": float(1 + x)})
    stage_work = {int(st): float(np.median(v)) for st, v in sorted(by_stage.items())}
    values = np.array(list(stage_work.values()))
    return {
        "slow_ranks": slow,
        "stage_work_s": stage_work,
        "stage_imbalance": float(values.max() / values.mean()),
    }
