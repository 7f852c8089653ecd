"""Guaranteed bounds on a compact pipeline's makespan, on one lattice, without per-op objects.

* Upper bound: finish times are non-decreasing functions of independent latencies, hence
  associated, so the max of a node's inputs is stochastically smaller than the max of
  independent copies (Esary-Proschan-Walkup): propagating ``F_start = prod F_pred`` and
  ``finish = start + D`` dominates the makespan. Each latency is rounded *up* to the lattice
  (cell mass at its right edge), mass below a node's window is moved up into its first cell and
  mass above it goes to an atom at +inf: every step keeps the variable larger.
* Lower bound: the makespan is at least the length of any path, so its CDF is at most the
  pointwise minimum of the CDFs of a few dominant paths; each path is a sum of independent
  latencies rounded *down* (mass at the left edge; mass above the window moved down, below it
  to an atom at -inf).

Same guarantees as :mod:`.bounds` on the explicit graph, at a cost of a few array operations per
op (no networkx, no per-op grid objects). Shared factors are not supported (their ops are not
independent).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..distributions import GridDistribution
from ..distributions.bounded_conv import bounded_convolve, fold_up
from ..graph import GraphError

__all__ = ["pipeline_bound_grids"]


def _op_pmfs(law: Any, h: float, tail: float) -> tuple[int, np.ndarray, int, np.ndarray]:
    # returns (k_up, pmf_up, k_down, pmf_down); each pmf sums to 1 minus its infinite atom
    """(k_up, pmf_up, k_lo, pmf_lo): the law rounded up / down to the lattice ``k * h``.

    Up: cell ``((k-1)h, kh]`` at ``kh``, mass below the window joins the first cell, mass above
    is returned as the last entry (the caller puts it at +inf). Down: cell ``[kh, (k+1)h)`` at
    ``kh``, mass above the window joins the last cell, mass below is the first entry.
    """
    a = float(law.quantile(tail))
    b = float(law.isf(tail))
    k_a, k_b = int(np.floor(a / h)), int(np.ceil(b / h))
    edges = np.arange(k_a, k_b + 1) * h
    cdf = np.asarray(law.cdf(edges), dtype=float)
    sf = np.asarray(law.sf(edges), dtype=float)
    cell = np.maximum(np.diff(cdf), 0.0)  # mass of (edges[i], edges[i+1]]
    up = np.concatenate(([cdf[0]], cell))  # at edges[i+1]; below a -> first point (edges[0])
    down = np.concatenate((cell, [sf[-1]]))  # at edges[i]; above b -> last point
    # Upper side: conditioned on the op staying at or below b (the caller adds P(X > b) for
    # every op to the +inf atom: a union bound over ops, not over paths).
    return k_a, up / up.sum(), k_a, down


def _trim(k0: int, p: np.ndarray, eps: float, side: str) -> tuple[int, np.ndarray, float]:
    """Drop negligible tails conservatively; returns (k0, pmf, mass sent to the infinite atom).

    ``side="up"``: low tail moved up into the first kept cell, high tail to +inf.
    ``side="down"``: high tail moved down into the last kept cell, low tail to -inf.
    """
    c = np.cumsum(p)
    total = c[-1]
    lo = int(np.searchsorted(c, eps))
    hi = int(np.searchsorted(c, total - eps)) + 1
    q = p[lo:hi].copy()
    low_mass = c[lo - 1] if lo > 0 else 0.0
    high_mass = total - c[hi - 1]
    if side == "up":
        q[0] += low_mass
        return k0 + lo, q, float(high_mass)
    q[-1] += high_mass
    return k0 + lo, q, float(low_mass)


def pipeline_bound_grids(
    spec: Any, h: float, policy: Any, *, paths: int = 8
) -> tuple[GridDistribution, GridDistribution]:
    """(lower, upper) bounds on the makespan of a :class:`~..graph.pipeline.PipelineSpec`.

    Parameters
    ----------
    spec : PipelineSpec
        Without shared factors.
    h : float
        Lattice spacing (seconds).
    policy : GridPolicy
        Its ``tail_mass`` sets the per-op and per-node tail trimmed into the infinite atoms.
    paths : int
        Dominant paths (by mean) in the lower bound.
    """
    if spec.microbatch_factor is not None or spec.stage_factor is not None:
        raise GraphError("bounds: pipelines with shared factors are not supported")
    tail = policy.tail_mass
    arr = spec.arrays
    # Node-level trimming drops eps of a finish time's upper tail; independence at every max
    # can count a dropped piece once per path, so eps is set from the number of paths.
    log_paths = _log10_paths(arr)
    eps = max(10.0 ** (-18.0 - log_paths - np.log10(arr["law_index"].size)), 1e-300)
    keys = arr["law_keys"]
    ops = [_op_pmfs(spec.laws[k], h, tail) for k in keys]
    li, preds = arr["law_index"], arr["preds"]
    n = li.size
    # ----- upper: independence at every max, latencies rounded up ----------------------------
    k_f = np.zeros(n, dtype=np.int64)
    f_pmf: list[np.ndarray] = [np.empty(0)] * n
    for gen in arr["gens"]:
        for i in gen:
            ps = [int(j) for j in preds[i] if j >= 0]
            if not ps:
                k_s, s_pmf = 0, np.ones(1)
            elif len(ps) == 1:
                k_s, s_pmf = int(k_f[ps[0]]), f_pmf[ps[0]]
            else:
                k0 = min(int(k_f[j]) for j in ps)
                k1 = max(int(k_f[j]) + f_pmf[j].size for j in ps)
                cdf = np.ones(k1 - k0)
                for j in ps:
                    off = int(k_f[j]) - k0
                    cj = np.cumsum(f_pmf[j])
                    full = np.concatenate(
                        (np.zeros(off), cj, np.full(k1 - k0 - off - cj.size, cj[-1]))
                    )
                    cdf *= full
                k_s, s_pmf = k0, np.diff(cdf, prepend=0.0)
            k_op, up, _, _ = ops[li[i]]
            # exact arithmetic keeps mass 1; the round-off bound of each cell is folded upwards
            conv = fold_up(*bounded_convolve(np.maximum(s_pmf, 0.0), up), 1.0)
            k_f[i], f_pmf[i], _ = _trim(k_s + k_op, conv, eps, "up")
    has_succ = set(preds[preds >= 0].tolist())
    sinks = [i for i in range(n) if i not in has_succ]
    k0 = min(int(k_f[i]) for i in sinks)
    k1 = max(int(k_f[i]) + f_pmf[i].size for i in sinks)
    cdf = np.ones(k1 - k0)
    for i in sinks:
        off = int(k_f[i]) - k0
        ci = np.cumsum(f_pmf[i])
        cdf *= np.concatenate((np.zeros(off), ci, np.full(k1 - k0 - off - ci.size, ci[-1])))
    up_pmf = np.maximum(np.diff(cdf, prepend=0.0), 0.0)
    up_pmf /= up_pmf.sum()
    # +inf atom: some op beyond its window (union over ops) or a trimmed node tail (per path)
    p_out = sum(
        float(spec.laws[k].sf(float(np.ceil(float(spec.laws[k].isf(tail)) / h) * h)))
        * int(np.sum(li == j))
        for j, k in enumerate(keys)
    )
    above = min(p_out + 1e-18, 1.0)
    # P(M <= t) >= F(t) - above: take that mass from the bottom of the CDF to +inf
    up_pmf = np.diff(np.maximum(np.cumsum(up_pmf) - above, 0.0), prepend=0.0)
    upper = GridDistribution(h, k0, up_pmf, up_pmf, 0.0, above, policy)
    # ----- lower: the minimum CDF of a few dominant paths, latencies rounded down ------------
    # one mean per distinct law (scipy's mean() is slow), spread over the ops
    mean = np.array([float(spec.laws[k].mean()) for k in keys])[li]
    lower = _paths_lower(arr, mean, ops, paths, h, tail, policy)
    return lower, upper


def _log10_paths(arr: dict) -> float:
    """log10 of the number of source-to-op paths summed over ops (a bound on path counts)."""
    preds = arr["preds"]
    n = preds.shape[0]
    logc = np.zeros(n + 1)  # slot -1: no predecessor (contributes nothing)
    logc[-1] = -np.inf
    for gen in arr["gens"]:
        a, b = logc[preds[gen, 0]], logc[preds[gen, 1]]
        both = np.logaddexp(a, b)
        logc[gen] = np.where(np.isneginf(both), 0.0, both)
    return float(np.logaddexp.reduce(logc[:n]) / np.log(10))


def _paths_lower(
    arr: dict, mean: np.ndarray, ops: list, k: int, h: float, tail: float, policy: Any
) -> GridDistribution:
    preds, gens = arr["preds"], arr["gens"]
    n = mean.size
    length = np.zeros(n + 1)
    arg = np.full(n, -1)
    for gen in gens:
        a, b = preds[gen, 0], preds[gen, 1]
        pick = np.where(length[a] >= length[b], a, b)
        arg[gen] = pick
        length[gen] = mean[gen] + length[pick]
    ends = np.argsort(-length[:n])[: max(k, 1) * 4]
    chosen, seen = [], set()
    for e in ends:  # distinct paths ending at the longest finishes
        path, v = [], int(e)
        while v >= 0:
            path.append(v)
            v = int(arg[v])
        key = tuple(path)
        if key not in seen:
            seen.add(key)
            chosen.append(path)
        if len(chosen) >= k:
            break
    # Every path follows the back-pointers ``arg`` (a forest rooted at the sources), so the
    # partial sum up to an op is the same on every chosen path through it: computed once.
    # (16 x 64: 8 paths of ~155 ops share all but ~40 ops each, 1,245 -> 433 convolutions.)
    partial: dict[int, tuple[int, np.ndarray]] = {}
    sums = []
    for path in chosen:
        k_acc, acc = 0, np.ones(1)
        for v in reversed(path):
            if v in partial:
                k_acc, acc = partial[v]
                continue
            _, _, k_op, down = ops[arr["law_index"][v]]
            # sub-probability pmfs: the missing mass is the atom at -inf. Each cell keeps at
            # most its exact mass (estimate minus its round-off bound), and the deficit goes to
            # that atom too, not to the first cell as fold_down does: both are stochastically
            # smaller than the exact sum, but a deficit parked in the first cell (~1e-11, far
            # above the tail) stopped _trim from ever cutting the low end, so the partial sums
            # grew by a whole op width per op (16 x 64: 16k-32k cells instead of ~4k).
            est, err = bounded_convolve(acc, down)
            conv = np.maximum(est - err, 0.0)
            k_acc, acc, _ = _trim(k_acc + k_op, conv, tail, "down")
            partial[v] = (k_acc, acc)
        sums.append((k_acc, acc, max(1.0 - acc.sum(), 0.0)))
    k0 = min(s[0] for s in sums)
    k1 = max(s[0] + s[1].size for s in sums)
    cdf = np.ones(k1 - k0)
    for k_s, p, below in sums:
        off = k_s - k0
        c = below + np.cumsum(p)
        cdf = np.minimum(
            cdf, np.concatenate((np.full(off, below), c, np.ones(k1 - k0 - off - c.size)))
        )
    below = float(min(s[2] for s in sums))
    pmf = np.diff(cdf, prepend=below)
    pmf = np.maximum(pmf, 0.0)
    return GridDistribution(h, k0, pmf, pmf, below, 0.0, policy)
