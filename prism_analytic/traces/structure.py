"""Recover a step's dependency structure from a per-op trace.

The structure is learnt from the data, not from a schedule template:

* **rank chains**: on each rank, an op waits for the op that ended last before it started
  (the mode over steps, so one odd step does not change the structure); ops recorded with the
  same start and duration on one rank (batched send/recv) are one op;
* **pipeline hand-offs**: a ``forward-send`` of stage s pairs with the ``forward-recv`` of
  stage s+1 that ends at the same time (a rendezvous; ``backward-*`` the other way, modulo the
  stage count so that interleaved schedules wrap), within one data-parallel rank; sends or
  receives with no such partner (no-op records) stay single ops and are counted;
* **collectives**: for each op name and sequence number, the coarsest of the candidate
  process groups (all ranks, same data-parallel rank, same stage, same data-parallel rank and
  stage: the ranks of a context- or tensor-parallel group) whose members *end together
  while starting apart* (end spread <= max(50 us, start spread / 4)) in at least 80% of steps.

A unit is one rank op, or one communication instance (all its members): it starts when the
last member is ready and takes one duration for all. :func:`replay` evaluates the structure
with measured values and must give back the measured step times (a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from prism_analytic.traces.errors import TraceFormatError, require_pandas
from prism_analytic.traces.table import EventTable

__all__ = ["StepStructure", "recover_structure", "replay", "unit_values"]

_EPS = 5e-5  # seconds: timestamp tolerance (float32 times of ~50 s resolve ~4 us)
_AGREE = 0.8  # fraction of steps that must show a pattern before it becomes structure


@dataclass
class StepStructure:
    """Dependency structure of one step, shared by all steps of a trace.

    Attributes
    ----------
    keys : list of tuple
        (rank, name, seq_id) of each rank op (batched ops: the first of them).
    ranks, names, dp, stage, microbatch : numpy.ndarray
        Per rank op.
    pred : numpy.ndarray
        Index of the in-rank predecessor rank op, -1 for the first op of a rank.
    units : list of list of int
        Rank ops of each unit, units in topological order.
    unit_of : numpy.ndarray
        Unit index of each rank op.
    steps : list of int
        Step ids the arrays below cover.
    start, end : numpy.ndarray
        (steps, rank ops) measured times relative to the step's first start.
    diagnostics : dict
        Counts of what the recovery merged, matched or could not use.
    chunk : numpy.ndarray or None
        Model chunk (virtual stage) of each rank op, -1 when unknown.
    """

    keys: list
    ranks: np.ndarray
    names: np.ndarray
    dp: np.ndarray
    stage: np.ndarray
    microbatch: np.ndarray
    pred: np.ndarray
    units: list
    unit_of: np.ndarray
    steps: list
    start: np.ndarray
    end: np.ndarray
    diagnostics: dict = field(default_factory=dict)
    chunk: np.ndarray | None = None

    @property
    def n_units(self) -> int:
        """Number of units."""
        return len(self.units)

    def unit_kind(self, u: int) -> str:
        """``'op'`` for a single rank op, ``'comm'`` for a multi-member instance."""
        return "comm" if len(self.units[u]) > 1 else "op"

    def unit_signature(self, u: int) -> tuple:
        """What a unit is, for pooling samples: (kind, names, stages)."""
        members = self.units[u]
        names = tuple(sorted({str(self.names[i]) for i in members}))
        stages = tuple(sorted({int(self.stage[i]) for i in members}))
        return (self.unit_kind(u), names, stages)


def _pivot(frame, keys, steps, col):
    pd = require_pandas()
    idx = pd.MultiIndex.from_tuples(keys, names=["rank", "name", "seq_id"])
    p = frame.pivot_table(
        index="step", columns=["rank", "name", "seq_id"], values=col, aggfunc="first"
    )
    return p.reindex(index=steps, columns=idx).to_numpy(dtype=float)


def recover_structure(table: EventTable) -> StepStructure:
    """Learn the step structure of a per-op trace.

    Parameters
    ----------
    table : EventTable
        Canonical events with ``rank``, ``step``, ``name``, ``seq_id`` (and ``dp_rank``,
        ``stage`` for pipeline hand-offs and process groups).

    Returns
    -------
    StepStructure

    Raises
    ------
    TraceFormatError
        When steps do not record the same ops, or the recovered graph has a cycle.
    """
    f = table.frame.copy()
    if (f["seq_id"] < 0).any():
        f["seq_id"] = f.sort_values("start_s").groupby(["rank", "step", "name"]).cumcount()
    f = f.sort_values(["step", "rank", "start_s"])
    steps = table.steps
    t0 = f.groupby("step")["start_s"].transform("min")
    f["rel_start"] = f["start_s"] - t0
    f["rel_end"] = f["rel_start"] + f["duration_s"]
    counts = f.groupby(["rank", "name", "seq_id"]).size()
    keys_all = list(counts.index)
    diag: dict = {}
    partial = counts[counts < len(steps)]
    if len(partial):
        diag["ops missing in some steps"] = int(len(partial))
        keep = counts[counts >= _AGREE * len(steps)].index
        if len(keep) < len(keys_all):
            diag["ops dropped (present in < 80% of steps)"] = len(keys_all) - len(keep)
        keys_all = list(keep)
    dup = f.duplicated(["step", "rank", "name", "seq_id"])
    if dup.any():
        i = f.index[dup.to_numpy()][0]
        raise TraceFormatError(
            f"{table.source}: row {i}: op ({f.loc[i, 'rank']}, {f.loc[i, 'name']}, seq "
            f"{f.loc[i, 'seq_id']}) recorded twice in step {f.loc[i, 'step']}"
        )
    start = _pivot(f, keys_all, steps, "rel_start")
    end = _pivot(f, keys_all, steps, "rel_end")
    info = f.drop_duplicates(["rank", "name", "seq_id"]).set_index(["rank", "name", "seq_id"])
    info = info.reindex(keys_all)
    ranks = np.array([k[0] for k in keys_all])
    names = np.array([k[1] for k in keys_all], dtype=object)
    dp = info["dp_rank"].to_numpy()
    stage = info["stage"].to_numpy()
    mb = info["microbatch"].to_numpy()

    bundle_of = _bundles(ranks, start, end, diag)
    keep_idx = np.flatnonzero(bundle_of == np.arange(len(keys_all)))
    remap = {int(old): new for new, old in enumerate(keep_idx)}
    members_of_bundle = {int(i): [] for i in keep_idx}
    for i, b in enumerate(bundle_of):
        members_of_bundle[int(b)].append(i)
    keys = [keys_all[i] for i in keep_idx]
    bundle_names = np.array(
        ["+".join(sorted({str(names[j]) for j in members_of_bundle[int(i)]})) for i in keep_idx],
        dtype=object,
    )
    start_all, end_all = start, end
    start, end = start[:, keep_idx], end[:, keep_idx]
    sub = dict(ranks=ranks[keep_idx], dp=dp[keep_idx], stage=stage[keep_idx], mb=mb[keep_idx])
    chunk = info["chunk"].to_numpy()[keep_idx]
    pred = _rank_predecessors(sub["ranks"], start, end)
    groups = _p2p_groups(keys_all, names, dp, stage, bundle_of, remap, start_all, end_all, diag)
    groups += _collective_groups(keys, sub, start, end, pred, diag)
    units, unit_of = _units(len(keys), groups, pred, diag, table.source, start)
    return StepStructure(
        keys=keys,
        ranks=sub["ranks"],
        names=bundle_names,
        dp=sub["dp"],
        stage=sub["stage"],
        microbatch=sub["mb"],
        pred=pred,
        units=units,
        unit_of=unit_of,
        steps=list(steps),
        start=start,
        end=end,
        diagnostics=diag,
        chunk=chunk,
    )


def _bundles(ranks, start, end, diag):
    """Ops of one rank with the same start and end in most steps are one (batched) op."""
    n = len(ranks)
    bundle_of = np.arange(n)
    for r in np.unique(ranks):
        idx = np.flatnonzero(ranks == r)
        med = np.nanmedian(start[:, idx], axis=0)
        order = idx[np.argsort(med)]
        for a, b in zip(order[:-1], order[1:]):
            same = (np.abs(start[:, a] - start[:, b]) < 1e-6) & (
                np.abs(end[:, a] - end[:, b]) < 1e-6
            )
            if np.mean(same) >= _AGREE:
                bundle_of[b] = bundle_of[a]
    merged = int(np.sum(bundle_of != np.arange(n)))
    if merged:
        diag["batched ops merged"] = merged
    return bundle_of


def _rank_predecessors(ranks, start, end):
    """In-rank predecessor: the op that ended last before this one started (mode over steps)."""
    n = len(ranks)
    pred = np.full(n, -1)
    for r in np.unique(ranks):
        idx = np.flatnonzero(ranks == r)
        s, e = start[:, idx], end[:, idx]
        # only ops that typically start earlier can be predecessors: an order that flips
        # between steps (kernels on several streams) must not make a cycle
        rank_order = np.argsort(np.argsort(np.nanmedian(s, axis=0), kind="stable"), kind="stable")
        votes = []
        for j in range(len(idx)):
            ok = (e <= s[:, [j]] + _EPS) & (rank_order < rank_order[j])[None, :]
            cand = np.where(ok, e, -np.inf)
            best = np.argmax(cand, axis=1)
            has = np.isfinite(cand.max(axis=1))
            best = np.where(has, best, -1)
            vals, cnt = np.unique(best, return_counts=True)
            votes.append(vals[np.argmax(cnt)])
        pred[idx] = [idx[v] if v >= 0 else -1 for v in votes]
    return pred


def _p2p_groups(keys_all, names, dp, stage, bundle_of, remap, start, end, diag):
    """Pair pipeline sends with receives of the peer stage by their common end time.

    A send and its receive are one rendezvous, so they end together (within
    :func:`_p2p_tolerance`); pairing by time rather
    than by count keeps the pairing right when a schedule records extra no-op sends or
    receives (interleaved schedules do), which are then left unpaired and counted.
    """
    pp = int(stage.max()) + 1 if len(stage) else 1
    directions = {"forward": 1, "backward": -1}
    med_end = np.nanmedian(end, axis=0)
    groups, paired = [], set()
    by = {}
    for i in range(len(keys_all)):
        by.setdefault((int(dp[i]), int(stage[i]), str(names[i])), []).append(i)
    for word, delta in directions.items():
        for (d, s_, name), sends in by.items():
            if name != f"{word}-send":
                continue
            recvs = by.get((d, (s_ + delta) % pp, f"{word}-recv"), [])
            sends = sorted(sends, key=lambda i: med_end[i])
            recvs = sorted(recvs, key=lambda i: med_end[i])
            tol = _p2p_tolerance(med_end[sends], med_end[recvs])
            a = b = 0
            while a < len(sends) and b < len(recvs):
                i, j = sends[a], recvs[b]
                gap = np.nanmedian(end[:, i] - end[:, j])
                if abs(gap) <= tol:
                    groups.append([remap[int(bundle_of[i])], remap[int(bundle_of[j])]])
                    paired.update((i, j))
                    a, b = a + 1, b + 1
                elif gap < 0:
                    a += 1
                else:
                    b += 1
    p2p = [i for i, n in enumerate(names) if str(n).endswith(("-send", "-recv"))]
    unmatched = sum(1 for i in p2p if i not in paired)
    if unmatched:
        diag["pipeline send/recv without a peer (kept as single ops)"] = int(unmatched)
    if groups:
        diag["pipeline hand-offs"] = len(groups)
    return groups


def _p2p_tolerance(send_ends, recv_ends) -> float:
    """How far apart a send's and its receive's ends may be (seconds).

    The two sides of one rendezvous end within tens to hundreds of microseconds of each
    other (each side's kernel finishes on its own GPU); consecutive hand-offs are a microbatch
    apart. A tenth of that spacing, between 50 us and 5 ms, separates the two.
    """
    spacing = [np.median(np.diff(x)) for x in (send_ends, recv_ends) if len(x) >= 2]
    if not spacing:
        return 1e-3
    return float(np.clip(0.1 * min(spacing), _EPS, 5e-3))


def _collective_groups(keys, sub, start, end, pred, diag):
    """Collective instances: the coarsest candidate group whose members end together."""
    pd = require_pandas()
    frame = pd.DataFrame(
        {"i": np.arange(len(keys)), "name": [k[1] for k in keys], "seq": [k[2] for k in keys]}
    )
    frame["dp"], frame["stage"] = sub["dp"], sub["stage"]
    out, found = [], {}
    skip = {"forward-send", "forward-recv", "backward-send", "backward-recv"}
    for (name, _seq), grp in frame.groupby(["name", "seq"]):
        if name in skip or len(grp) < 2:
            continue
        dur = np.nanmedian(end[:, grp["i"]] - start[:, grp["i"]])
        if not dur > 0:
            continue
        candidates = [("all ranks", [grp["i"].to_numpy()])]
        for by, label in (
            ("dp", "same data-parallel rank"),
            ("stage", "same stage"),
            (["dp", "stage"], "same data-parallel rank and stage"),  # e.g. context parallel
        ):
            parts = [g["i"].to_numpy() for _, g in grp.groupby(by) if len(g) > 1]
            if parts and len(parts) < len(grp):
                candidates.append((label, parts))
        for label, parts in candidates:
            if all(_ends_together(start[:, p], end[:, p], dur) for p in parts):
                out.extend([list(map(int, p)) for p in parts])
                found[name] = label
                break
    if found:
        diag["collective groups"] = dict(sorted(found.items()))
    return out


def _ends_together(s, e, typical):
    end_spread = np.nanmax(e, axis=1) - np.nanmin(e, axis=1)
    start_spread = np.nanmax(s, axis=1) - np.nanmin(s, axis=1)
    # members that waited for each other end within a small fraction of the op's typical
    # duration, and far closer together than they started
    ok = end_spread <= np.maximum(_EPS, np.minimum(0.25 * start_spread, 0.05 * typical))
    return np.mean(ok) >= _AGREE


def _units(n, groups, pred, diag, source, start):
    import networkx as nx

    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for g in groups:
        for a in g[1:]:
            ra, rb = find(g[0]), find(a)
            if ra != rb:
                parent[rb] = ra
    roots = sorted({find(i) for i in range(n)})
    rid = {r: u for u, r in enumerate(roots)}
    unit_of = np.array([rid[find(i)] for i in range(n)])
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(roots)))
    for i in range(n):
        if pred[i] >= 0 and unit_of[pred[i]] != unit_of[i]:
            graph.add_edge(int(unit_of[pred[i]]), int(unit_of[i]))
    try:
        # a topological order that follows time (median start), so that a unit's
        # candidate hidden anchors (earlier units) are the events that happened before it
        med = np.nanmedian(start, axis=0)
        u_start = {r: -np.inf for r in range(len(roots))}
        for i in range(n):
            u_start[unit_of[i]] = max(u_start[unit_of[i]], med[i])
        order = list(nx.lexicographical_topological_sort(graph, key=lambda u: u_start[u]))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(graph)
        raise TraceFormatError(
            f"{source}: the recovered step graph has a cycle through units {cycle[:4]}; "
            "the ops of one step are not consistently ordered"
        ) from None
    new = {u: k for k, u in enumerate(order)}
    unit_of = np.array([new[u] for u in unit_of])
    units = [[] for _ in order]
    for i in range(n):
        units[unit_of[i]].append(i)
    diag["units"] = len(units)
    return units, unit_of


def unit_values(structure: StepStructure):
    """Measured gaps and unit durations per step.

    Returns
    -------
    gap : numpy.ndarray
        (steps, rank ops): start minus the predecessor's unit end (minus the step start for a
        rank's first op); host-side time the graph does not otherwise explain. Negative values
        (clock jitter) are clipped to 0 and counted in ``structure.diagnostics``.
    duration : numpy.ndarray
        (steps, units): last member end minus last member start.
    """
    s, e = structure.start, structure.end
    k = s.shape[0]
    u_end = np.empty((k, structure.n_units))
    u_start = np.empty((k, structure.n_units))
    for u, members in enumerate(structure.units):
        u_end[:, u] = np.nanmax(e[:, members], axis=1)
        u_start[:, u] = np.nanmax(s[:, members], axis=1)
    pred_end = np.zeros_like(s)
    has = structure.pred >= 0
    pred_end[:, has] = u_end[:, structure.unit_of[structure.pred[has]]]
    gap = s - pred_end
    neg = gap < -_EPS
    if neg.any():
        structure.diagnostics["negative host gaps clipped to 0"] = int(neg.sum())
    gap = np.clip(np.nan_to_num(gap, nan=0.0), 0.0, None)
    dur = np.clip(np.nan_to_num(u_end - u_start, nan=0.0), 0.0, None)
    return gap, dur


def replay(
    structure: StepStructure,
    gap: np.ndarray,
    duration: np.ndarray,
    hidden=(),
    lags: np.ndarray | None = None,
) -> np.ndarray:
    """Step times of the structure for given gaps and unit durations.

    Parameters
    ----------
    structure : StepStructure
        The recovered structure.
    gap : numpy.ndarray
        (samples, rank ops) host gaps (seconds).
    duration : numpy.ndarray
        (samples, units) unit durations (seconds).
    hidden : sequence of HiddenDependency, optional
        Extra predecessors learnt from the timing: unit ``h.unit`` cannot start (``at ==
        "start"``) or end (``"end"``) before ``h.anchor`` ends plus the lag.
    lags : numpy.ndarray, optional
        (samples, len(hidden)) lags of the hidden dependencies.

    Returns
    -------
    numpy.ndarray
        (samples,) step times: last unit end, with the step starting at 0.
    """
    n = gap.shape[0]
    u_end = np.zeros((n, structure.n_units))
    pred, unit_of = structure.pred, structure.unit_of
    extra = {h.unit: (j, h) for j, h in enumerate(hidden)}
    zero = np.zeros(n)
    for u, members in enumerate(structure.units):
        ready = None
        for i in members:
            r = gap[:, i] if pred[i] < 0 else u_end[:, unit_of[pred[i]]] + gap[:, i]
            ready = r if ready is None else np.maximum(ready, r)
        if u in extra:
            j, h = extra[u]
            release = (zero if h.anchor < 0 else u_end[:, h.anchor]) + lags[:, j]
            if h.at == "start":
                u_end[:, u] = np.maximum(ready, release) + duration[:, u]
            else:
                u_end[:, u] = np.maximum(ready + duration[:, u], release)
        else:
            u_end[:, u] = ready + duration[:, u]
    return u_end.max(axis=1)
