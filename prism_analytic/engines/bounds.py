"""Guaranteed modelling bounds on the step time, plus the numerical bracket.

* Upper: propagate finish times as if the inputs of every max were independent. Finish times
  are non-decreasing functions of independent latencies, hence associated, and the max of
  associated variables is stochastically smaller than the max of independent copies with the
  same marginals (Esary-Proschan-Walkup). So the result dominates the true makespan.
* Lower: the makespan is at least the length of any path, so its CDF is at most
  min over paths of the path's CDF; the ``paths`` longest paths by mean are used. Each path is
  a sum of independent latencies, computed exactly by convolution.
Replica groups recurse (bounds of the body, then F^n, both monotone); regimes mix the
conditional bounds. Using each grid's lower (upper) sandwich side keeps the bounds guaranteed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import networkx as nx
import numpy as np

from ..distributions import GridDistribution, to_grid
from ..distributions.cdf_roundoff import gamma
from ..distributions.grid import (
    _fold_relative,
    _pmf_from_cdf_sf,
    align,
    convolve_grids_bounded,
    mix_grids,
)
from ..distributions.grid_extremes import _cdf_sf, max_grids
from ..distributions.roundoff import UNIT_ROUNDOFF
from ..graph import OP, PIPELINE, StepGraph
from ..graph.pipeline import pipeline_step_graph
from ..graph.pipeline_match import match_pipeline, parse_op_name
from ..policy import DEFAULT_POLICY, GridPolicy
from .analytic import _dist_key, mean_critical_path, replica_group
from .pipeline_bounds import pipeline_bound_grids

__all__ = ["bound_distributions"]


class _Bounds:
    def __init__(self, policy: GridPolicy, paths: int) -> None:
        self.policy = policy
        self.paths = paths
        self._grids: dict[tuple, GridDistribution] = {}  # ops of a schedule share a few laws
        self._bodies: dict[tuple, GridDistribution] = {}
        self._compact: dict[int, tuple[StepGraph, StepGraph | None]] = {}

    def compact(self, g: StepGraph) -> StepGraph | None:
        """``g`` as one compact pipeline node when it is an op-by-op pipeline (else None)."""
        if id(g) not in self._compact:  # the graph is kept with its answer: ids stay unique
            self._compact[id(g)] = (g, _as_compact(g))
        return self._compact[id(g)][1]

    def grid(self, latency: Any, h: float) -> GridDistribution:
        key = (_dist_key(latency), h)
        if key not in self._grids:
            self._grids[key] = to_grid(latency, h, self.policy)
        return self._grids[key]

    def spacing(self, g: StepGraph) -> float:
        mean, depth = mean_critical_path(g)
        return self.policy.rel_width * max(abs(mean), 1e-300) / max(depth, 1)

    def node(self, g: StepGraph, v: str, h: float, side: str) -> GridDistribution:
        d = g.graph.nodes[v]
        if d["type"] == OP:
            return self.grid(d["latency"], h)
        if d["type"] == PIPELINE:  # one lattice pass over the schedule, no per-op objects
            key = (id(d["spec"]), h)
            if key not in self._bodies:  # lower() and upper() of the parent both ask
                self._bodies[key] = pipeline_bound_grids(
                    d["spec"], h, self.policy, paths=self.paths
                )
            low, high = self._bodies[key]
            return high if side == "upper" else low
        body = self.upper(d["body"]) if side == "upper" else self.lower(d["body"])
        # monotone in the body: bounds stay bounds (round-off folded into the sides)
        return replica_group(body, d, bounded=True)

    def upper(self, g: StepGraph) -> GridDistribution:
        compact = self.compact(g)
        if compact is not None:
            return self.upper(compact)
        h = self.spacing(g)
        finish: dict[str, GridDistribution] = {}
        for v in nx.topological_sort(g.graph):
            preds = [finish[p] for p in g.graph.predecessors(v)]
            dur = self.node(g, v, h, "upper")
            if not preds:
                finish[v] = dur
                continue
            start = preds[0] if len(preds) == 1 else max_grids(preds)
            finish[v] = convolve_grids_bounded(start, dur)
        sinks = [finish[v] for v in g.graph if g.graph.out_degree(v) == 0]
        return sinks[0] if len(sinks) == 1 else max_grids(sinks)

    def lower(self, g: StepGraph) -> GridDistribution:
        compact = self.compact(g)
        if compact is not None:
            return self.lower(compact)
        h = self.spacing(g)
        nodes = {v: self.node(g, v, h, "lower") for v in g.graph}
        sums = []
        for path in _dominant_paths(g.graph, {v: d.mean() for v, d in nodes.items()}, self.paths):
            acc = nodes[path[0]]
            for v in path[1:]:
                acc = convolve_grids_bounded(acc, nodes[v])
            sums.append(acc)
        return _min_cdf(sums) if len(sums) > 1 else sums[0]


def _as_compact(g: StepGraph) -> StepGraph | None:
    """The compact form of an op-by-op pipeline graph, or None when ``g`` is not exactly one.

    ``g`` qualifies when it holds nothing but pipeline ops named as
    :func:`~prism_analytic.graph.pipeline.pipeline_step_graph` names them, every microbatch of
    a (phase, stage, chunk) has the same law (equal parameters), and its edges are exactly those
    of :func:`~prism_analytic.schedules.pipeline_dag` for a 1F1B, GPipe or interleaved schedule
    at the sizes the names give (:func:`~prism_analytic.graph.pipeline_match.match_pipeline`).
    It is then the same random makespan as the compact node with those laws (independent ops,
    the same DAG), whose bounds (:mod:`.pipeline_bounds`) take one lattice pass without per-op
    objects: 1F1B 16 x 64 in ~1 s instead of ~18 s of CPU, with the same guarantees.
    """
    if g.regimes:
        return None
    laws: dict[tuple[str, int, int], dict[int, Any]] = {}
    for v, d in g.graph.nodes(data=True):
        parsed = parse_op_name(v) if d.get("type") == OP else None
        if parsed is None:
            return None
        phase, stage, mb, chunk = parsed
        laws.setdefault((phase, stage, chunk), {})[mb] = d["latency"]

    def plausible(p: int, m: int, vpp: int, n: int) -> bool:
        # every op of the p x m x vpp schedule, one law per (phase, stage, chunk), checked
        # before the edges: a graph that cannot be compacted never builds a reference DAG
        if n != 2 * p * m * vpp or len(laws) != 2 * p * vpp:
            return False
        return all(
            len(per_mb) == m and len({_dist_key(law) for law in per_mb.values()}) == 1
            for per_mb in laws.values()
        )

    match = match_pipeline(g.graph.nodes, g.graph.edges(), plausible=plausible)
    if match is None:
        return None
    schedule, p, m, vpp = match
    return pipeline_step_graph(
        p,
        m,
        lambda ph, s, mb, c: laws[(ph, s, c)][0],
        schedule=schedule,
        vpp=vpp,
        name=g.name,
        compact=True,
    )


def _dominant_paths(dag: nx.DiGraph, mean: dict[str, float], k: int) -> list[list[str]]:
    """Up to ``k`` distinct source-to-sink paths with the largest mean lengths.

    The longest path through each node (forward + backward longest path) ranks the nodes; each
    chosen path is the longest path through the best node not yet on a chosen path.
    """
    order = list(nx.topological_sort(dag))
    fwd: dict[str, float] = {}
    fwd_arg: dict[str, Any] = {}
    for v in order:
        best = max(dag.predecessors(v), key=fwd.__getitem__, default=None)
        fwd[v] = mean[v] + (fwd[best] if best is not None else 0.0)
        fwd_arg[v] = best
    bwd: dict[str, float] = {}
    bwd_arg: dict[str, Any] = {}
    for v in reversed(order):
        best = max(dag.successors(v), key=bwd.__getitem__, default=None)
        bwd[v] = mean[v] + (bwd[best] if best is not None else 0.0)
        bwd_arg[v] = best
    through = sorted(order, key=lambda v: -(fwd[v] + bwd[v] - mean[v]))
    covered: set[str] = set()
    paths: list[list[str]] = []
    for v in through:
        if len(paths) >= k:
            break
        if v in covered:
            continue
        back, u = [], v
        while u is not None:
            back.append(u)
            u = fwd_arg[u]
        ahead, u = [], bwd_arg[v]
        while u is not None:
            ahead.append(u)
            u = bwd_arg[u]
        path = back[::-1] + ahead
        covered.update(path)
        paths.append(path)
    return paths


def _min_cdf(grids: list[GridDistribution]) -> GridDistribution:
    """The law whose CDF is the pointwise minimum of the grids' CDFs (side by side)."""
    h, k0, los, his = align(grids)
    f_lo = np.min([_cdf_sf(lo, g.below, 0.0)[0] for lo, g in zip(los, grids)], axis=0)
    f_hi = np.min([_cdf_sf(hi, 0.0, g.above)[0] for hi, g in zip(his, grids)], axis=0)
    below = min(g.below for g in grids)
    s_lo = np.max([_cdf_sf(lo, g.below, 0.0)[1] for lo, g in zip(los, grids)], axis=0)
    s_hi = np.max([_cdf_sf(hi, 0.0, g.above)[1] for hi, g in zip(his, grids)], axis=0)
    lo = _pmf_from_cdf_sf(f_lo, s_lo, below)
    hi = _pmf_from_cdf_sf(f_hi, s_hi, 0.0)
    above = float(s_hi[-1])
    if grids[0].policy.fold_roundoff:  # always, in this engine (bound_distributions)
        # every stored CDF and survival value is within relative ~2 gamma(n) of the exact
        # minimum (the cumulative sums; the masses' differences, u each; the switch from CDF
        # to survival differences at 1/2, where the two sums disagree by their errors): fold
        rel = 4.0 * gamma(lo.size + 2) + 4.0 * UNIT_ROUNDOFF
        lo, hi, below, above = _fold_relative(lo, hi, below, above, rel)
    return GridDistribution(h, k0, lo, hi, below, above, grids[0].policy).trimmed()


def bound_distributions(
    graph: StepGraph, policy: GridPolicy | None = None, *, paths: int = 8
) -> tuple[GridDistribution, GridDistribution]:
    """(lower, upper): use ``lower``'s lower sandwich side and ``upper``'s upper side."""
    graph.validate()
    policy = policy or DEFAULT_POLICY
    # Independence at every max counts each trimmed tail atom once per path, and a pipeline
    # lattice has exponentially many paths: keep far smaller tails (on a coarser lattice, since
    # modelling bounds are loose by percents anyway) so the atoms stay negligible.
    # fold_roundoff: the result reads no ``roundoff``, so every operation (F^n, maxima,
    # mixtures) must move its own round-off outwards into the sides (cdf_roundoff.py)
    policy = replace(
        policy,
        tail_mass=min(policy.tail_mass, 1e-30),
        rel_width=max(policy.rel_width, 2.5e-3),
        fold_roundoff=True,
    )
    ev = _Bounds(policy, paths)
    states = list(graph.regime_states())
    if len(states) == 1:
        only = graph.conditioned(states[0][1]) if graph.regimes else graph
        return _checked(ev.lower(only), ev.upper(only), graph)
    weights = np.array([p for p, _ in states])
    weights = weights / weights.sum()
    conditioned = [graph.conditioned(f) for _, f in states]
    return _checked(
        mix_grids([ev.lower(c) for c in conditioned], weights),
        mix_grids([ev.upper(c) for c in conditioned], weights),
        graph,
    )


# CDFs built by different sums of the same masses may differ by a few units of round-off where
# the two bounds coincide (a deterministic graph); only a gap beyond that is an inversion.
_INVERSION_SLACK = 1e-12


def _checked(
    lower: GridDistribution, upper: GridDistribution, graph: StepGraph
) -> tuple[GridDistribution, GridDistribution]:
    """``(lower, upper)`` after checking that lower's low side is below upper's high side.

    Both bounds contain the truth, so P(upper <= x) <= P(lower <= x) at every x; a pair that
    breaks this (beyond round-off) has a wrong side and must never be returned silently.
    """
    x = np.concatenate((lower.points, upper.points))
    upper_cdf = upper.cdf_bounds(x)[0]  # the upper variable's (high side's) CDF
    lower_cdf = lower.cdf_bounds(x)[1]  # the lower variable's (low side's) CDF
    # the same inversion read from the survival sums: a cumulative sum over ~1e5 cells can put
    # a CDF ~1e-12 above 1 in the far tail, where the survival sums are accurate (and vice
    # versa in the low tail); a real inversion shows in both
    sf_gap = lower.sf_bounds(x)[0] - upper.sf_bounds(x)[1]
    gap = np.minimum(upper_cdf - lower_cdf, sf_gap)
    if np.any(gap > _INVERSION_SLACK):
        i = int(np.argmax(gap))
        raise RuntimeError(
            f"bounds on graph {graph.name!r} are inverted (an engine bug, please report it): "
            f"P(upper <= {x[i]:.6g}) = {upper_cdf[i]:.6g} > P(lower <= {x[i]:.6g}) = "
            f"{lower_cdf[i]:.6g}"
        )
    return lower, upper
