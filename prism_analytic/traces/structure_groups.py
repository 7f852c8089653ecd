"""Communication units of a step found from the timing: p2p pairs and collective instances.

Nothing here assumes a layout. Two kinds of multi-member unit are recovered:

* **point-to-point pairs**: for every op name pair ``X-send`` / ``X-recv`` (pipeline
  ``forward-*`` / ``backward-*``, or any other), a send pairs with the receive on another
  rank that ends at the same time (a rendezvous) in at least 80% of steps;
* **collective instances**: for every other op name and sequence number, the ranks that
  record it are partitioned into the instances whose members *end together while starting
  apart*: per step, members are clustered by end time; two ranks belong to one instance when
  they share a cluster in at least 80% of steps. A partition that mixes instances which
  merely end close together is refined at finer time scales. Any group size and any stride
  comes out (tensor, context, sequence, expert, data parallel, sub-groups), and a trace that
  records only some ranks of a group gives the recorded members.
"""

from __future__ import annotations

import re

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.stats import mode

__all__ = [
    "p2p_pairs",
    "collective_instances",
    "p2p_prefixes",
    "is_communication",
    "AGREE",
    "EPS",
]

EPS = 5e-5  # seconds: timestamp tolerance (float32 times of ~50 s resolve ~4 us)
AGREE = 0.8  # fraction of steps that must show a pattern before it becomes structure
_FINEST = 1e-7  # seconds: below this, two end times are the same event


_COMM = re.compile(
    r"send|recv|all-?reduce|all-?gather|reduce-?scatter|all-?to-?all|broadcast|barrier|"
    r"nccl|collective|p2p|dispatch|combine",
    re.IGNORECASE,
)


def is_communication(name: str) -> bool:
    """Whether an op name denotes communication (its recorded duration may include waits)."""
    return bool(_COMM.search(str(name)))


def p2p_prefixes(names) -> set:
    """Prefixes ``X`` for which both ``X-send`` and ``X-recv`` op names occur."""
    names = {str(n) for n in names}
    return {n[: -len("-send")] for n in names if n.endswith("-send") and n[:-5] + "-recv" in names}


def p2p_pairs(ranks, names, end, diag) -> list:
    """Pair each ``X-send`` with the ``X-recv`` on another rank that ends with it.

    Parameters
    ----------
    ranks, names : numpy.ndarray
        Rank and op name of each op (columns of ``end``).
    end : numpy.ndarray
        (steps, ops) end times relative to the step start.
    diag : dict
        Receives counts of pairs (pipeline hand-offs: ``forward``/``backward``; other
        prefixes by name) and of sends/receives left without a peer.

    Returns
    -------
    list of list of int
        ``[send, recv]`` column pairs.
    """
    names = np.asarray(names, dtype=object)
    pairs, unmatched, by_prefix = [], 0, {}
    n_steps = end.shape[0]
    for prefix in sorted(p2p_prefixes(names)):
        sends = np.flatnonzero(names == f"{prefix}-send")
        recvs = np.flatnonzero(names == f"{prefix}-recv")
        es, er = end[:, sends], end[:, recvs]
        tol = _p2p_tolerance(ranks[sends], np.nanmedian(es, axis=0))
        best = np.full((n_steps, sends.size), -1)
        dist = np.full((n_steps, sends.size), np.inf)
        for k in range(n_steps):
            order = np.argsort(er[k])
            sorted_end = er[k][order]
            pos = np.searchsorted(sorted_end, es[k])
            # the nearest receive on another rank is among a few neighbours in end order
            # (a batched send+recv of the same rank ends at the very same time)
            for off in (-2, -1, 0, 1):
                j = np.clip(pos + off, 0, order.size - 1)
                cand = order[j]
                d = np.abs(er[k][cand] - es[k])
                d = np.where(ranks[recvs[cand]] == ranks[sends], np.inf, d)
                d = np.where(np.isnan(d), np.inf, d)
                better = d < dist[k]
                best[k] = np.where(better, cand, best[k])
                dist[k] = np.where(better, d, dist[k])
        best = np.where(dist <= tol[None, :], best, -1)
        # the receive each send ends with most often, kept when it does so in >= 80% of steps
        vote = mode(best, axis=0, keepdims=False).mode
        share = np.mean(best == vote[None, :], axis=0)
        med_dist = np.median(dist, axis=0)
        ok = (vote >= 0) & (share >= AGREE)
        claims = [
            (-float(share[c]), float(med_dist[c]), int(c), int(vote[c])) for c in np.flatnonzero(ok)
        ]
        taken_s, taken_r = set(), set()
        for _, _, c, v in sorted(claims):
            if c in taken_s or v in taken_r:
                continue
            taken_s.add(c)
            taken_r.add(v)
            pairs.append([int(sends[c]), int(recvs[v])])
        unmatched += sends.size + recvs.size - 2 * len(taken_s)
        by_prefix[prefix] = len(taken_s)
    if unmatched:
        diag["pipeline send/recv without a peer (kept as single ops)"] = int(unmatched)
    pipeline = by_prefix.pop("forward", 0) + by_prefix.pop("backward", 0)
    if pipeline:
        diag["pipeline hand-offs"] = pipeline
    if any(by_prefix.values()):
        diag["other p2p pairs"] = {k: v for k, v in by_prefix.items() if v}
    return pairs


def _p2p_tolerance(send_ranks, send_med_end) -> np.ndarray:
    """How far apart a send's and its receive's ends may be, per send (seconds).

    The two sides of one rendezvous end within tens to hundreds of microseconds of each
    other (each side's kernel finishes on its own GPU); consecutive hand-offs of one rank are a
    microbatch apart. A tenth of that spacing, between 50 us and 5 ms, separates the two.
    """
    tol = np.full(send_ranks.size, 1e-3)
    for r in np.unique(send_ranks):
        idx = np.flatnonzero(send_ranks == r)
        if idx.size >= 2:
            spacing = np.median(np.diff(np.sort(send_med_end[idx])))
            tol[idx] = np.clip(0.1 * spacing, EPS, 5e-3)
    return tol


def collective_instances(members, start, end):
    """Partition the ranks recording one collective (name and sequence number) into instances.

    Parameters
    ----------
    members : numpy.ndarray
        Column indices of the ops (one per rank) of this name and sequence number.
    start, end : numpy.ndarray
        (steps, ops) times relative to the step start.

    Returns
    -------
    list of (numpy.ndarray, bool)
        Column indices of each set of at least two members that ended together, and
        whether they also started apart (waited for each other) in most steps; ranks that
        fit no set are left out. The caller accepts sets that did not wait as instances of
        a name seen waiting elsewhere (members that happened to arrive together).
    """
    s, e = start[:, members], end[:, members]
    dur = np.nanmedian(e - s)
    if not dur > 0 or members.size < 2:
        return []
    coarse = max(EPS, 0.05 * float(dur))
    parts = _refine(np.arange(members.size), s, e, coarse)
    return [(members[p], _waited(s[:, p], e[:, p])) for p in parts if p.size >= 2]


def _refine(idx, s, e, tol):
    """Consensus partition of ``idx`` at ``tol``, split further while finer scales agree."""
    parts = [p for p in _consensus(idx, e, tol) if p.size >= 2]
    out = []
    for p in parts:
        # no scale above the members' largest end spread can split them
        spread = float(np.nanmax(np.nanmax(e[:, p], axis=1) - np.nanmin(e[:, p], axis=1)))
        finer = min(tol / 10.0, spread)
        split = None
        while finer >= _FINEST:
            sub = _consensus(p, e, finer)
            if len(sub) == 1:
                finer /= 10.0
                continue
            # a real instance whose members end a little apart breaks into ragged pieces at a
            # finer scale; distinct instances that only end close break into whole groups,
            # and one of them is seen ending before the other's last member started
            if all(q.size >= 2 for q in sub) and _separate(sub, s, e):
                split = sub
            break
        if split is None:
            out.append(p)
        else:
            for q in split:
                out.extend(_refine(q, s, e, finer))
    return out


def _separate(parts, s, e) -> bool:
    """Whether the parts are distinct instances rather than one with a systematic offset.

    One instance ends when its last member has arrived: each part's end follows the last
    start of all parts. Distinct instances end after their own last start. Distinct: some part
    ends before another part's last member started in at least 20% of steps, or the parts'
    ends follow their own last starts more closely (smaller spread over steps) than the
    union's.
    """
    first_end = np.stack([np.nanmin(e[:, q], axis=1) for q in parts], axis=1)
    last_start = np.stack([np.nanmax(s[:, q], axis=1) for q in parts], axis=1)
    early = first_end[:, :, None] < last_start[:, None, :] - EPS  # [step, a, b]
    if np.mean(early.any(axis=(1, 2))) >= 1 - AGREE:
        return True
    mean_end = np.stack([np.nanmean(e[:, q], axis=1) for q in parts], axis=1)
    own = np.nanstd(mean_end - last_start, axis=0).sum()
    joint = np.nanstd(mean_end - last_start.max(axis=1, keepdims=True), axis=0).sum()
    return bool(own <= 1.5 * joint)


def _consensus(idx, e, tol):
    """Connected components of 'same end-time cluster in >= 80% of steps' among ``idx``."""
    x = e[:, idx]
    n_steps, m = x.shape
    order = np.argsort(np.where(np.isnan(x), np.inf, x), axis=1)
    xs = np.take_along_axis(x, order, axis=1)
    brk = np.concatenate([np.ones((n_steps, 1), bool), ~(np.diff(xs, axis=1) <= tol)], axis=1)
    labels_sorted = np.cumsum(brk, axis=1)
    labels = np.empty_like(labels_sorted)
    np.put_along_axis(labels, order, labels_sorted, axis=1)
    labels = np.where(np.isnan(x), -1 - np.arange(m)[None, :], labels)
    same_partition = _same_partition(labels)
    if same_partition is not None:  # every step clusters alike: that is the consensus
        return [idx[same_partition == c] for c in np.unique(same_partition)]
    # co-membership counts over steps: (keys x clusters of all steps) indicator, times itself
    cluster = (labels - labels.min(axis=1, keepdims=True)) + (
        np.arange(n_steps)[:, None] * (2 * m + 2)
    )
    ind = coo_matrix(
        (np.ones(n_steps * m), (np.tile(np.arange(m), n_steps), cluster.ravel())),
        shape=(m, n_steps * (2 * m + 2)),
    ).tocsr()
    same = (ind @ ind.T).tocoo()
    keep = (same.data >= AGREE * n_steps) & (same.row != same.col)
    graph = coo_matrix((np.ones(keep.sum()), (same.row[keep], same.col[keep])), shape=(m, m))
    n_comp, comp = connected_components(graph, directed=False)
    return [idx[comp == c] for c in range(n_comp)]


def _same_partition(labels):
    """The common partition (labels of the first step) when every step's is the same."""
    first = labels[0]
    _, inv0 = np.unique(first, return_inverse=True)
    n0 = inv0.max() + 1
    for lab in labels[1:]:
        _, inv = np.unique(lab, return_inverse=True)
        if inv.max() + 1 != n0 or np.unique(inv0 * n0 + inv).size != n0:
            return None
    return inv0


def _waited(s, e) -> bool:
    """Members end together while starting apart (they waited for each other) in most steps."""
    end_spread = np.nanmax(e, axis=1) - np.nanmin(e, axis=1)
    start_spread = np.nanmax(s, axis=1) - np.nanmin(s, axis=1)
    ok = (end_spread <= 0.5 * start_spread) & (start_spread > 0)
    return bool(np.mean(ok) >= AGREE)
