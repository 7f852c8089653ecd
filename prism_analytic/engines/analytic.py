"""The analytic engine: exact where the structure allows, correlation-aware on the rest.

Exact on series-parallel structure and replica groups, correlation-aware on the irreducible core
(pipelines, overlapped streams).

1. Regimes are handled exactly by conditioning: F(t) = sum_r pi_r F(t | r).
2. Replica groups: the body is evaluated once; n copies joined by a barrier are F^n (persistent
   speed factors enter as a scale mixture of the body, slow copies as a separate F(t/f)^k).
   The cost does not depend on n.
3. Series-parallel reduction (:mod:`.series_parallel`) evaluates sums and maxima exactly on grids.
4. What does not reduce is a reconvergent core. Its makespan comes from the Clark-Mehler canonical
   form (:mod:`.canonical`), which carries the correlations that shared ancestors induce between
   the inputs of every max; the result is Gaussian with the core's mean and standard deviation.
5. Heavy-tailed series-parallel parts (replica bodies, their maxima, sums) are also evaluated on
   the log lattice (:mod:`.log_lattice_eval`), kept where their brackets are narrower.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from ..distributions import Distribution, GridDistribution, normal, point_mass, to_grid
from ..distributions.grid import mix_grids
from ..distributions.grid_extremes import iid_max_grid, max_grids
from ..distributions.log_lattice import LogLatticeDistribution
from ..distributions.products import scale_mixture
from ..graph import OP, PIPELINE, StepGraph
from ..graph.pipeline import explicit_pipeline
from ..policy import DEFAULT_POLICY, GridPolicy
from .grid_cache import cached_grid
from .log_lattice_eval import LogLatticeParts
from .series_parallel import deterministic_makespan, reduce_graph

__all__ = ["analytic_distribution", "AnalyticReport", "mean_critical_path", "replica_group"]


@dataclass
class AnalyticReport:
    """What the analytic engine did: exact or not, and where it used the canonical form."""

    exact: bool = True
    cores: list[dict[str, Any]] = field(default_factory=list)
    core_method: str = "clark-mehler"
    #: (where, sub-graph, its computed law, probability of its regime state) for every graph
    #: evaluation that used a canonical-form core: what :func:`~.crosscheck.verify` samples.
    approximated: list[tuple[str, StepGraph, GridDistribution, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (the approximated sub-graphs are left out)."""
        return {"exact": self.exact, "core_method": self.core_method, "cores": self.cores}


def mean_critical_path(graph: StepGraph, _means: dict | None = None) -> tuple[float, int]:
    """(longest path by mean duration, number of ops on the deepest path), for grid spacing.

    Replica groups count as their body's path plus a Gumbel-like allowance for the max.
    """
    means = {} if _means is None else _means  # ops of a schedule share a few laws
    length: dict[str, float] = {}
    depth: dict[str, int] = {}
    for v in nx.topological_sort(graph.graph):
        d = graph.graph.nodes[v]
        if d["type"] == OP:
            key = _dist_key(d["latency"])
            if key not in means:
                m = d["latency"].mean()
                means[key] = m if np.isfinite(m) else float(d["latency"].quantile(0.5))
            mean, ops = means[key], 1
        elif d["type"] == PIPELINE:
            from .pipeline_core import pipeline_mean_path

            key = ("pipeline", _spec_key(d["spec"]))
            if key not in means:
                means[key] = pipeline_mean_path(d["spec"])
            mean, ops = means[key]
        else:
            mean, ops = mean_critical_path(d["body"], means)
            mean *= 1.0 + 0.05 * np.sqrt(2 * np.log(max(d["n"], 2)))
        preds = list(graph.graph.predecessors(v))
        length[v] = mean + max((length[p] for p in preds), default=0.0)
        depth[v] = ops + max((depth[p] for p in preds), default=0)
    return max(length.values()), max(depth.values())


def replica_group(
    body: GridDistribution, node: dict[str, Any], *, bounded: bool = False
) -> GridDistribution:
    """The barrier of a replica-group node over copies whose duration is ``body``.

    Persistent speed factors make each copy a scale mixture of the body; ``k`` slow copies
    are F(t / factor)^k beside the healthy F(t)^(n - k). ``bounded``: the mixture's round-off
    is folded into the sides (see :func:`~prism_analytic.distributions.products.scale_mixture`).
    """
    if node["speed"] is not None:
        body = scale_mixture(body, node["speed"], bounded=bounded)
    k, factor = node["slow"] if node["slow"] else (0, 1.0)
    parts = []
    if node["n"] > k:
        parts.append(iid_max_grid(body, node["n"] - k))
    if k:
        parts.append(iid_max_grid(body.scaled(factor), k))
    return parts[0] if len(parts) == 1 else max_grids(parts)


def _pipeline_cached(key: tuple, spec: Any, method: str, window: int | None) -> tuple:
    """Pipeline makespans by spec identity (regime states and re-evaluations share them)."""
    from .pipeline_core import cached_components

    return cached_components(key, spec, method, window)


def _spec_key(spec: Any) -> tuple:
    """A hashable identity of a pipeline spec by its sizes and its laws' moments."""
    laws = tuple(sorted(spec.moments.items()))
    # the factors' whole law (not two moments): conditioning reads their quantiles
    factors = tuple(
        None if f is None else _dist_key(f) for f in (spec.microbatch_factor, spec.stage_factor)
    )
    return (spec.stages, spec.microbatches, spec.schedule, spec.vpp, laws, factors)


def _dist_key(dist: Distribution) -> Any:
    """A hashable identity for a latency law: equal parameters give equal keys."""
    return dist._key()


class _Evaluator:
    def __init__(
        self, policy: GridPolicy, core_method: str, window: int | None, shape: str = "normal"
    ) -> None:
        self.shape = shape
        self._grids: dict[tuple, GridDistribution] = {}
        self._means: dict[Any, float] = {}
        self.policy = policy
        self.core_method = core_method
        self.window = window
        self.report = AnalyticReport(core_method=core_method)
        self.weight = 1.0  # probability of the regime state being evaluated
        self._pipelines: dict[tuple, tuple[float, float, dict]] = {}
        self.overrides: dict[tuple, GridDistribution] = {}
        # heavy-tailed series-parallel parts also on the log lattice (kept where narrower)
        self.heavy = LogLatticeParts(policy)

    def _shape(self, cls: str, skew_applies: bool, laws: Any = ()) -> dict[str, str]:
        """The shape a core of class ``cls`` gets, and why (``"auto"``: :mod:`.core_shape`).

        ``skew_applies``: the skew core can evaluate this core (Clark-Mehler, no shared factors);
        where it cannot, a requested or auto-picked ``"skew"`` falls back to ``"normal"``.
        ``laws``: the core's op laws (``auto`` reads their largest CV: the op-CV band).
        """
        if self.shape == "auto":
            from .core_shape import auto_shape, op_cv

            shape, why = auto_shape(cls, op_cv(laws))
        else:
            shape, why = self.shape, f"requested core_shape={self.shape!r}"
        if shape in ("skew", "kurtosis", "cumulant") and not skew_applies:
            shape, why = "normal", why + "; skew core not applicable here (factors or core_method)"
        return {"shape": shape, "shape_reason": why, "core_class": cls}

    def graph(self, g: StepGraph, path: str = "") -> GridDistribution:
        mean, depth = mean_critical_path(g, self._means)
        h = self.policy.rel_width * max(abs(mean), 1e-300) / max(depth, 1)
        weights: dict[str, GridDistribution] = {}
        for v in g.graph.nodes:  # pipelines and replica groups first: one grid each
            d = g.graph.nodes[v]
            if d["type"] == PIPELINE:
                weights[v] = self.pipeline(d, h, f"{path}/{v}", g, v)
            elif d["type"] != OP:
                weights[v] = self.group(d, f"{path}/{v}")
        h_ops = _op_spacing(g, h, weights, self.policy.op_refine)
        for v in g.graph.nodes:
            d = g.graph.nodes[v]
            if d["type"] == OP:
                law = d["latency"]
                key = (_dist_key(law), h_ops)
                if key not in self._grids:  # ops of a layer or schedule share a few laws
                    # and repeated evaluations share their grids (grid_cache.py: same bits)
                    build = lambda x=law: to_grid(x, h_ops, self.policy)  # noqa: E731
                    self._grids[key] = cached_grid(law, key[0], h_ops, self.policy, build)
                weights[v] = self._grids[key]
        reduction = reduce_graph(g.graph, weights.__getitem__)
        if reduction.exact:
            result = reduction.result()
            if result is None:
                return to_grid(point_mass(0.0), h, self.policy)
            return self.heavy.graph(g, result)
        constant = deterministic_makespan(reduction.graph)
        if constant is not None:  # a core of constants: its longest path, exactly
            return constant
        result = self.core(reduction.graph, h, path or g.name)
        self.report.approximated.append((path or g.name, g, result, self.weight))
        return self.overrides.get(part_key(path or g.name, result), result)

    def pipeline(
        self, d: dict[str, Any], h: float, where: str, g: StepGraph, name: str
    ) -> GridDistribution:
        """A compact pipeline's makespan: canonical form, truncated and extrapolated if long."""
        spec = d["spec"]
        plain = spec.microbatch_factor is None and spec.stage_factor is None
        if plain and spec.stages == 1 and spec.microbatches > 1:
            # one stage: a chain of m i.i.d. copies per law, summed in O(log m) convolutions on
            # the spacing the op-by-op chain would get (exact, like that chain)
            from .pipeline_chain import single_stage_makespan

            mean = sum(spec.microbatches * mu for mu, _ in spec.moments.values())
            h_chain = self.policy.rel_width * max(abs(mean), 1e-300) / spec.n_ops
            return single_stage_makespan(spec, h_chain, self.policy)
        if plain and (spec.stages == 1 or spec.microbatches == 1):
            # one microbatch: the schedule is a chain, evaluated exactly
            return self.graph(explicit_pipeline(spec, name), where)
        from .core_shape import pipeline_class

        pick = self._shape(
            pipeline_class(spec), plain and self.core_method == "clark-mehler", spec.laws.values()
        )
        if pick["shape"] in ("skew", "kurtosis", "cumulant"):
            if pick["shape"] == "skew":
                from .skew_core import cached_skew_pipeline as cached
            elif pick["shape"] == "kurtosis":  # the skew core + a fourth-cumulant correction
                from .kurtosis_core import cached_kurtosis_pipeline as cached
            else:  # a third-cumulant closure of every max (cumulant_core.py)
                from .cumulant_core import cached_cumulant_pipeline as cached

            # keyed by the whole op laws, not only their moments: these cores read the laws'
            # third cumulants (normal and lognormal ops of equal moments shared one entry)
            laws = tuple(sorted((k, _dist_key(v)) for k, v in spec.laws.items()))
            res, info = cached((_spec_key(spec), laws), spec, self.window)
            self.report.exact = False
            self.report.cores.append(
                {
                    "where": where,
                    "edges": spec.n_ops,
                    "mean_s": res.mean,
                    "std_s": res.std,
                    "skew": res.skew,
                    **pick,
                    **info,
                }
            )
            law = to_grid(res.law(), h, self.policy)
            sub = StepGraph(name)
            sub.add_pipeline(name, spec, kind=d["kind"], tags=d["tags"])
            self.report.approximated.append((where, sub, law, self.weight))
            return self.overrides.get(part_key(where, law), law)
        comps, info = _pipeline_cached(_spec_key(spec), spec, self.core_method, self.window)
        w = np.array([c[0] for c in comps])
        mean = float(np.dot(w, [c[1] for c in comps]) / w.sum())
        second = float(np.dot(w, [c[2] ** 2 + c[1] ** 2 for c in comps]) / w.sum())
        std = float(np.sqrt(max(second - mean**2, 0.0)))
        self.report.exact = False
        self.report.cores.append(
            {"where": where, "edges": spec.n_ops, "mean_s": mean, "std_s": std, **pick, **info}
        )
        if len(comps) > 64:  # a factor-conditioned mixture: gridded once, not per component
            from .pipeline_factors import NormalMixture

            mix = NormalMixture(w, [c[1] for c in comps], [c[2] for c in comps])
            law = to_grid(mix, h, self.policy)
        else:
            grids = [
                to_grid(normal(mu, sd), h, self.policy)
                if sd > 0
                else to_grid(point_mass(mu), h, self.policy)
                for _, mu, sd in comps
            ]
            law = grids[0] if len(grids) == 1 else mix_grids(grids, w / w.sum())
        sub = StepGraph(name)
        sub.add_pipeline(name, spec, kind=d["kind"], tags=d["tags"])
        self.report.approximated.append((where, sub, law, self.weight))
        return self.overrides.get(part_key(where, law), law)

    def group(self, d: dict[str, Any], path: str) -> GridDistribution:
        return self.heavy.group(d, replica_group(self.graph(d["body"], path), d))

    def core(self, m: nx.MultiDiGraph, h: float, where: str) -> GridDistribution:
        """Canonical-form makespan of an irreducible core (edges carry grids or zero)."""
        from .canonical import canonical_makespan

        self.report.exact = False
        dag, mean, std = _duration_dag(m)
        from .core_shape import explicit_class

        laws = [law for _, law in dag.nodes(data="law")]
        pick = self._shape(explicit_class(laws, m), self.core_method == "clark-mehler", laws)
        if pick["shape"] in ("skew", "kurtosis", "cumulant"):
            # Clark-Mehler on full differences, third cumulant, Pearson III (skew_core.py);
            # "kurtosis" adds a fourth-cumulant correction of every max (kurtosis_core.py);
            # "cumulant" closes every max with propagated third cumulants (cumulant_core.py)
            from .cumulant_core import cumulant_makespan
            from .kurtosis_core import kurtosis_makespan
            from .skew_core import skew_makespan, third_cumulant

            run = {
                "skew": skew_makespan,
                "kurtosis": kurtosis_makespan,
                "cumulant": cumulant_makespan,
            }[pick["shape"]]
            # once per law object (an op-by-op 1F1B 16 x 64 core: 1,936 ops, 114 laws)
            per_law = {id(law): law for _, law in dag.nodes(data="law")}
            k3_law = {key: third_cumulant(law) for key, law in per_law.items()}
            k3 = {e: k3_law[id(law)] for e, law in dag.nodes(data="law")}
            sk = run(dag, mean, std, window=self.window, kappa3=k3)
            self.report.cores.append(
                {
                    "where": where,
                    "edges": m.number_of_edges(),
                    "mean_s": sk.mean,
                    "std_s": sk.std,
                    "skew": sk.skew,
                    **pick,
                }
            )
            return to_grid(sk.law(), h, self.policy)
        res = canonical_makespan(dag, mean, std, method=self.core_method, window=self.window)
        self.report.cores.append(
            {
                "where": where,
                "edges": m.number_of_edges(),
                "mean_s": res.mean,
                "std_s": res.std,
                **pick,
            }
        )
        if res.std <= 0:
            return to_grid(point_mass(res.mean), h, self.policy)
        return to_grid(normal(res.mean, res.std), h, self.policy)


def _op_spacing(
    g: StepGraph, h: float, children: dict[str, GridDistribution], refine: int = 4
) -> float:
    """Lattice spacing for the ops of ``g``, given the grids of its pipelines and groups.

    ``h`` divides the bracket budget by the deepest path's op count, a pipeline counting its
    own ops; but a pipeline or a replica group enters the sum as one grid, and every sum or
    max of grids lands on the coarsest spacing among them. Once such a grid of spacing ``H``
    is in the graph, ops discretised much below ``H / k`` (``k`` ops on the deepest path) only
    make larger FFTs. They get ``H / (refine k)`` (``GridPolicy.op_refine``, default 4): their
    ``k`` roundings together stay within ``1 / refine`` of a cell of ``H`` (faster, brackets
    unchanged on the presets; ``H / k`` widens them). ``h`` itself (the policy's spacing) is
    never coarsened; refine 1 is the opt-in trade (``validation/results/bench_workload.md``).
    """
    if not children:
        return h
    coarse = min(w.h for w in children.values())
    ops: dict[str, int] = {}
    for v in nx.topological_sort(g.graph):
        own = 1 if g.graph.nodes[v]["type"] == OP else 0
        ops[v] = own + max((ops[p] for p in g.graph.predecessors(v)), default=0)
    return max(h, coarse / (refine * max(max(ops.values()), 1)))


def _duration_dag(m: nx.MultiDiGraph) -> tuple[nx.DiGraph, dict[int, float], dict[int, float]]:
    """The node-weighted DAG of a core's non-zero edges (zero edges are only precedence).

    An edge ``e = (a, b)`` starts after every non-zero edge that reaches ``a`` through zero
    edges alone; dropping the zero-duration junctions keeps the canonical form's graph as
    small as the step's own ops.
    """
    feeds: dict[Any, list[int]] = {}
    dag = nx.DiGraph()
    mean: dict[int, float] = {}
    std: dict[int, float] = {}
    edge_id: dict[tuple, int] = {}
    for x in nx.topological_sort(m):
        arriving: dict[int, None] = {}
        for a, _, key, w in m.in_edges(x, keys=True, data="w"):
            if w is None:
                arriving.update(dict.fromkeys(feeds[a]))
            else:
                arriving[edge_id[(a, x, key)]] = None
        feeds[x] = list(arriving)
        for _, b, key, w in m.out_edges(x, keys=True, data="w"):
            if w is None:
                continue
            e = len(edge_id)
            edge_id[(x, b, key)] = e
            dag.add_node(e, law=w)
            dag.add_edges_from((p, e) for p in feeds[x])
            mean[e], std[e] = w.mean(), w.std()
    return dag, mean, std


def part_key(where: str, law: GridDistribution) -> tuple:
    """Identity of an approximated part: where it sits and its analytic law's moments."""
    return (where, round(float(law.mean()), 15), round(float(law.std()), 15))


def analytic_distribution(
    graph: StepGraph,
    policy: GridPolicy | None = None,
    *,
    core_method: str = "clark-mehler",
    window: int | None = None,
    shape: str = "normal",
    overrides: dict[tuple, GridDistribution] | None = None,
) -> tuple[GridDistribution | LogLatticeDistribution, AnalyticReport]:
    """The step-time distribution of ``graph`` and a report of how it was obtained.

    A series-parallel step with heavy-tailed laws may come back on the log lattice
    (:mod:`.log_lattice_eval`): the same rounding sandwich, on log-spaced cells.

    ``overrides`` replaces the law of approximated parts, keyed by :func:`part_key` (used by
    :func:`~.crosscheck.verify` to propagate a Monte Carlo band through the exact rest).
    """
    graph.validate()
    ev = _Evaluator(policy or DEFAULT_POLICY, core_method, window, shape)
    ev.overrides = overrides or {}
    # a heavy-tailed series-parallel step may keep its log-lattice law (log_lattice_eval.py)
    return ev.heavy.step(graph, _evaluate(ev, graph)), ev.report


def analytic_variants(
    graph: StepGraph,
    policy: GridPolicy,
    override_sets: list[dict[tuple, GridDistribution]],
    *,
    core_method: str = "clark-mehler",
    window: int | None = None,
    shape: str = "normal",
) -> list[GridDistribution]:
    """The step law once per set of overrides, sharing one evaluator's cached op grids."""
    graph.validate()
    ev = _Evaluator(policy, core_method, window, shape)
    out = []
    for overrides in override_sets:
        ev.overrides = overrides
        out.append(_evaluate(ev, graph))
    return out


def _evaluate(ev: _Evaluator, graph: StepGraph) -> GridDistribution:
    states = list(graph.regime_states())
    if len(states) == 1:
        return ev.graph(graph.conditioned(states[0][1]) if graph.regimes else graph)
    weights = np.array([p for p, _ in states])
    grids = []
    for p, factors in states:
        ev.weight = p / weights.sum()
        grids.append(ev.graph(graph.conditioned(factors)))
    return mix_grids(grids, weights / weights.sum())
