"""Recover a step's dependency structure from a per-op trace.

The structure is learnt from the data, not from a schedule template:

* **rank chains**: on each rank, an op waits for the op that ended last before it started
  (the mode over steps, so one odd step does not change the structure); ops recorded with the
  same start and duration on one rank (batched send/recv) are one op;
* **communication units** (:mod:`~prism_analytic.traces.structure_groups`): p2p pairs
  (a ``X-send`` and the ``X-recv`` on another rank that end together: pipeline hand-offs,
  context-parallel rings) and collective instances (the ranks that end together while
  starting apart, any group size and stride), both found from the timing alone; sends or
  receives with no partner (no-op records) stay single ops and are counted.

A unit is one rank op, or one communication instance (all its members): it starts when the
last member is ready and takes one duration for all. :func:`replay` evaluates the structure
with measured values and must give back the measured step times (a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from prism_analytic.traces.errors import TraceFormatError, require_pandas
from prism_analytic.traces.structure_groups import (
    AGREE,
    EPS,
    collective_instances,
    is_communication,
    p2p_pairs,
    p2p_prefixes,
)
from prism_analytic.traces.table import EventTable

__all__ = ["StepStructure", "recover_structure", "replay", "structure_edges", "unit_values"]

_EPS = EPS
_AGREE = AGREE


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
    groups : list of list of int
        Rank ops of each recovered communication unit (a p2p pair or a collective
        instance) before units that share ops are merged.
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
    groups: list = field(default_factory=list)

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
    """(steps, keys) matrix of ``col``; NaN where a step did not record a key."""
    pd = require_pandas()
    idx = pd.MultiIndex.from_tuples(keys, names=["rank", "name", "seq_id"])
    col_of = idx.get_indexer(pd.MultiIndex.from_frame(frame[["rank", "name", "seq_id"]]))
    row_of = pd.Index(steps).get_indexer(frame["step"])
    ok = (col_of >= 0) & (row_of >= 0)
    out = np.full((len(steps), len(keys)), np.nan)
    out[row_of[ok], col_of[ok]] = frame[col].to_numpy(dtype=float)[ok]
    return out


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
    groups = _p2p_and_collectives(
        keys_all, names, dp, stage, bundle_of, remap, start_all, end_all, diag
    )
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
        groups=groups,
    )


def _bundles(ranks, start, end, diag):
    """Ops of one rank with the same start and end in most steps are one (batched) op."""
    n = len(ranks)
    bundle_of = np.arange(n)
    med = np.nanmedian(start, axis=0)
    order = np.lexsort((med, ranks))
    a, b = order[:-1], order[1:]
    same = (np.abs(start[:, a] - start[:, b]) < 1e-6) & (np.abs(end[:, a] - end[:, b]) < 1e-6)
    merge = (ranks[a] == ranks[b]) & (np.mean(same, axis=0) >= _AGREE)
    for k in np.flatnonzero(merge):  # runs of merged neighbours take their first op
        bundle_of[b[k]] = bundle_of[a[k]]
    merged = int(np.sum(bundle_of != np.arange(n)))
    if merged:
        diag["batched ops merged"] = merged
    return bundle_of


#: How many ops back (in the rank's typical order) a predecessor is looked for: an op that
#: ended after this many later ops started would be a long asynchronous op.
_PRED_WINDOW = 64


def _rank_predecessors(ranks, start, end):
    """In-rank predecessor: the op that ended last before this one started (mode over steps)."""
    from scipy.stats import mode

    n = len(ranks)
    # only ops that typically start earlier can be predecessors: an order that flips
    # between steps (kernels on several streams) must not make a cycle
    idx = np.lexsort((np.arange(n), np.nanmedian(start, axis=0), ranks))
    r = np.asarray(ranks)[idx]
    s, e = start[:, idx], end[:, idx]
    best = np.full(s.shape, -1)
    best_end = np.full(s.shape, -np.inf)
    pos = np.arange(n)
    for d in range(1, min(_PRED_WINDOW, n - 1) + 1):
        cand = np.full(s.shape, np.nan)
        cand[:, d:] = e[:, :-d]
        same_rank = np.zeros(n, bool)
        same_rank[d:] = r[d:] == r[:-d]
        if not same_rank.any():
            break
        ok = same_rank[None, :] & (cand <= s + _EPS) & (cand > best_end)
        best = np.where(ok, pos[None, :] - d, best)
        best_end = np.where(ok, cand, best_end)
    votes = mode(best, axis=0, keepdims=False).mode
    pred = np.full(n, -1)
    pred[idx] = np.where(votes >= 0, idx[np.clip(votes, 0, None)], -1)
    return pred


def _p2p_and_collectives(keys_all, names, dp, stage, bundle_of, remap, start, end, diag):
    """Communication units (column indices after bundling) and their per-name description."""
    ranks = np.array([k[0] for k in keys_all])
    seqs = np.array([k[2] for k in keys_all])
    raw = p2p_pairs(ranks, names, end, diag)
    prefixes = p2p_prefixes(names)
    p2p_names = {f"{x}-send" for x in prefixes} | {f"{x}-recv" for x in prefixes}
    found: dict = {}
    pd = require_pandas()
    frame = pd.DataFrame({"name": names, "seq": seqs})
    candidates = []
    for (name, _seq), grp in frame.groupby(["name", "seq"], sort=True):
        if name in p2p_names or len(grp) < 2:
            continue
        parts = collective_instances(grp.index.to_numpy(), start, end)
        candidates.extend((name, p, w) for p, w in parts)
    # a name is a collective once its members are seen waiting for each other somewhere, or
    # when it names communication; its instances then only need to end together (members
    # that arrived together show no wait)
    collective = {name for name, _, waited in candidates if waited or is_communication(name)}
    for name, p, _ in candidates:
        if name in collective:
            raw.append(list(map(int, p)))
            found.setdefault(name, []).append(p)
    if found:
        diag["collective groups"] = {
            n: _describe_groups(p, ranks, dp, stage) for n, p in sorted(found.items())
        }
    groups = []
    for g in raw:
        mapped = sorted({remap[int(bundle_of[i])] for i in g})
        if len(mapped) > 1:
            groups.append(mapped)
    return groups


def _describe_groups(parts, ranks, dp, stage) -> str:
    """How a collective's instances relate to the ``dp_rank`` / ``stage`` columns."""
    all_ranks = set(np.unique(ranks).tolist())
    if len(parts) == 1 and set(ranks[parts[0]].tolist()) == all_ranks:
        return "all ranks"
    dp_var = any(len(set(dp[p].tolist())) > 1 for p in parts)
    st_var = any(len(set(stage[p].tolist())) > 1 for p in parts)
    sizes = sorted({len(p) for p in parts})
    if dp_var and not st_var:
        return "same stage"
    if st_var and not dp_var:
        return "same data-parallel rank"
    if not dp_var and not st_var:
        return "same data-parallel rank and stage"
    return "groups of " + "/".join(map(str, sizes)) + " ranks"


def _units(n, groups, pred, diag, source, start):
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    rows = [a for g in groups for a in g[1:]]
    cols = [g[0] for g in groups for _ in g[1:]]
    link = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    _, unit_of = connected_components(link, directed=False)
    # a topological order that follows time (median start), so that a unit's candidate
    # hidden anchors (earlier units) are the events that happened before it
    med = np.nan_to_num(np.nanmedian(start, axis=0), nan=-np.inf)
    n_units = int(unit_of.max()) + 1 if n else 0
    u_start = np.full(n_units, -np.inf)
    np.maximum.at(u_start, unit_of, med)
    has = pred >= 0
    src_u, dst_u = unit_of[pred[has]], unit_of[has]
    cross = src_u != dst_u
    src_u, dst_u = src_u[cross], dst_u[cross]
    order = np.lexsort((np.arange(n_units), u_start))
    pos = np.empty(n_units, dtype=int)
    pos[order] = np.arange(n_units)
    if (pos[src_u] >= pos[dst_u]).any():
        # time order is not a topological order here: the smallest-start ready unit first
        order = _time_topological_order(n_units, src_u, dst_u, u_start, source)
        pos[order] = np.arange(n_units)
    unit_of = pos[unit_of]
    units = [[] for _ in range(n_units)]
    for i in range(n):
        units[unit_of[i]].append(i)
    diag["units"] = len(units)
    return units, unit_of


def _time_topological_order(n_units, src_u, dst_u, u_start, source):
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(range(n_units))
    graph.add_edges_from(zip(src_u.tolist(), dst_u.tolist()))
    try:
        return np.array(
            list(nx.lexicographical_topological_sort(graph, key=lambda u: (u_start[u], u)))
        )
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(graph)
        raise TraceFormatError(
            f"{source}: the recovered step graph has a cycle through units {cycle[:4]}; "
            "the ops of one step are not consistently ordered"
        ) from None


def structure_edges(structure: StepStructure) -> dict:
    """The recovered dependency edges, in the shape of a synthetic trace's ground truth.

    Parameters
    ----------
    structure : StepStructure
        From :func:`recover_structure`.

    Returns
    -------
    dict
        ``"chain"``: set of ``(key_before, key_after)`` in-rank predecessor pairs;
        ``"groups"``: set of frozensets of keys, one per communication unit (a collective
        instance's members, a p2p send and receive). A key is ``(rank, optype, seq_id)``.
    """
    keys = [(int(r), str(n), int(q)) for r, n, q in structure.keys]
    chain = {(keys[p], keys[i]) for i, p in enumerate(structure.pred) if p >= 0}
    groups = {frozenset(keys[i] for i in g) for g in structure.groups if len(g) > 1}
    return {"chain": chain, "groups": groups}


def _flat_units(structure: StepStructure):
    """Members of all units in unit order, and where each unit's members begin."""
    sizes = np.fromiter((len(m) for m in structure.units), dtype=np.int64, count=structure.n_units)
    flat = np.fromiter(
        (i for m in structure.units for i in m), dtype=np.int64, count=int(sizes.sum())
    )
    return flat, np.concatenate([[0], np.cumsum(sizes)[:-1]])


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
    flat, first = _flat_units(structure)
    # fmax ignores NaN (an op a step did not record); a unit with none recorded stays NaN
    u_end = np.fmax.reduceat(e[:, flat], first, axis=1)
    u_start = np.fmax.reduceat(s[:, flat], first, axis=1)
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
    # unit ends stored unit-major: each unit's samples are contiguous to write and to read
    u_end = np.zeros((structure.n_units, n))
    pred, unit_of = structure.pred, structure.unit_of
    extra = {h.unit: (j, h) for j, h in enumerate(hidden)}  # one per unit: the last given
    zero = np.zeros(n)
    for u, members in enumerate(structure.units):
        ready = None
        for i in members:
            r = gap[:, i] if pred[i] < 0 else u_end[unit_of[pred[i]]] + gap[:, i]
            ready = r if ready is None else np.maximum(ready, r)
        if u in extra:
            j, h = extra[u]
            release = (zero if h.anchor < 0 else u_end[h.anchor]) + lags[:, j]
            if h.at == "start":
                u_end[u] = np.maximum(ready, release) + duration[:, u]
            else:
                u_end[u] = np.maximum(ready + duration[:, u], release)
        else:
            u_end[u] = ready + duration[:, u]
    return u_end.max(axis=0)
