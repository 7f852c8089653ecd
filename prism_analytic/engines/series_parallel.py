"""Exact evaluation of series-parallel structure by graph reduction.

The node-weighted step DAG becomes a two-terminal edge-weighted multigraph (each op an edge
``in -> out``; each dependency a zero edge). Two rules then preserve the makespan law exactly
for independent latencies:

* series: a vertex with one edge in and one edge out -> one edge carrying the sum (convolution);
* parallel: two edges between the same vertices -> one edge carrying the max (CDF product).

A series-parallel graph reduces to a single edge: its distribution is exact (up to the grid's
bracket). What remains otherwise is the irreducible *core* (e.g. a pipeline lattice, or two
overlapped streams), handed back for a correlation-aware method.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import networkx as nx
import numpy as np

from ..distributions import GridDistribution, point_mass
from ..distributions.grid import convolve_grids
from ..distributions.grid_extremes import max_grids

__all__ = ["Reduction", "reduce_graph", "deterministic_makespan", "SOURCE", "SINK"]

SOURCE = "__source__"
SINK = "__sink__"

Weight = GridDistribution | None  # None is a zero duration


def _add(a: Weight, b: Weight) -> Weight:
    if a is None:
        return b
    if b is None:
        return a
    return convolve_grids(a, b)


def _max(a: Weight, b: Weight) -> Weight:
    if a is None and b is None:
        return None
    if a is None or b is None:
        w = a if b is None else b
        if w.support[0] >= 0:  # max(0, X) = X for non-negative X
            return w
        return max_grids([w, _zero_like(w)])
    return max_grids([a, b])


def _zero_like(w: GridDistribution) -> GridDistribution:
    from ..distributions import to_grid

    return to_grid(point_mass(0.0), w.h, w.policy)


@dataclass
class Reduction:
    """The reduced multigraph; ``exact`` when it collapsed to a single source-sink edge."""

    graph: nx.MultiDiGraph

    @property
    def exact(self) -> bool:
        """True when the graph reduced to a single source-to-sink edge."""
        return self.graph.number_of_edges() == 1 and self.graph.has_edge(SOURCE, SINK)

    def result(self) -> Weight:
        """The makespan distribution (only when :attr:`exact`)."""
        if not self.exact:
            raise ValueError("graph is not series-parallel; evaluate the core instead")
        return next(iter(self.graph.edges(data="w")))[2]


def reduce_graph(
    dag: nx.DiGraph,
    weight: Callable[[str], Weight],
    add: Callable[[Weight, Weight], Weight] = _add,
    maximum: Callable[[Weight, Weight], Weight] = _max,
) -> Reduction:
    """Series-parallel reduction of a node-weighted DAG whose node ``v`` has duration weight(v).

    ``add`` and ``maximum`` combine two weights (``None`` is a zero duration); the defaults
    work on linear grids, the log lattice's are in :mod:`.log_lattice_eval`.
    """
    m = nx.MultiDiGraph()
    for v in dag.nodes:
        m.add_edge(("in", v), ("out", v), w=weight(v))
        if dag.in_degree(v) == 0:
            m.add_edge(SOURCE, ("in", v), w=None)
        if dag.out_degree(v) == 0:
            m.add_edge(("out", v), SINK, w=None)
    for u, v in dag.edges:
        m.add_edge(("out", u), ("in", v), w=None)

    work = list(m.nodes)
    while work:
        x = work.pop()
        if x not in m:
            continue
        # parallel edges out of x (and into x) first, so that series steps see single edges
        for y in list(m.successors(x)):
            if m.number_of_edges(x, y) > 1:
                ws = [d["w"] for d in m[x][y].values()]
                m.remove_edges_from([(x, y)] * len(ws))
                acc = ws[0]
                for w in ws[1:]:
                    acc = maximum(acc, w)
                m.add_edge(x, y, w=acc)
                work.append(y)
        for y in list(m.predecessors(x)):
            if m.number_of_edges(y, x) > 1:
                work.append(y)
        if x in (SOURCE, SINK) or m.in_degree(x) != 1 or m.out_degree(x) != 1:
            continue
        ((a, _, w1),) = m.in_edges(x, data="w")
        ((_, b, w2),) = m.out_edges(x, data="w")
        m.remove_node(x)
        m.add_edge(a, b, w=add(w1, w2))
        work.extend((a, b))
    return Reduction(m)


def _atom(side: np.ndarray) -> int | None:
    nz = np.flatnonzero(side)
    return int(nz[0]) if nz.size == 1 else None


def deterministic_makespan(m: nx.MultiDiGraph) -> GridDistribution | None:
    """The exact makespan of an irreducible core whose every duration is a single atom.

    A core of constants needs no approximation: its makespan is the longest source-to-sink
    path, and taking it separately over the lower sides' atoms and the upper sides' atoms
    (lattice indices, integer arithmetic on one common lattice) keeps the rounding sandwich
    exactly. ``None`` when some edge has spread or tail atoms.
    """
    grids = [w for _, _, w in m.edges(data="w") if w is not None]
    if not grids or any(g.below > 0 or g.above > 0 for g in grids):
        return None
    h = max(g.h for g in grids)
    idx: dict[int, tuple[int, int]] = {}
    for g in grids:
        r = g.rebin(h)  # floor / ceil: the lower atom stays lower, the upper one upper
        lo, hi = _atom(r.lo), _atom(r.hi)
        if lo is None or hi is None:
            return None
        idx[id(g)] = (r.k0 + lo, r.k0 + hi)
    longest: dict = {}
    for x in nx.topological_sort(m):
        arrivals = [
            (la + (0 if w is None else idx[id(w)][0]), ha + (0 if w is None else idx[id(w)][1]))
            for a, _, w in m.in_edges(x, data="w")
            for la, ha in [longest[a]]
        ]
        longest[x] = (
            (max(a[0] for a in arrivals), max(a[1] for a in arrivals)) if arrivals else (0, 0)
        )
    k_lo, k_hi = longest[SINK]
    lo = np.zeros(k_hi - k_lo + 1)
    hi = np.zeros_like(lo)
    lo[0], hi[-1] = 1.0, 1.0
    return GridDistribution(h, k_lo, lo, hi, policy=grids[0].policy, moments=None)
