"""The step DAG: ops with latency distributions, collectives, replica groups and regimes.

Semantics: an op starts when all its predecessors have finished and then takes
its latency; a collective is an op with one shared duration that starts when its last
participant is ready; a replica group is ``n`` independent copies of a sub-graph started
together and joined by a barrier; a regime is a per-step common shock that rescales the
latencies of a class of ops, handled exactly by conditioning.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from .._checks import check_count, check_positive
from ..distributions import Distribution
from ..distributions.serialize import from_spec, to_spec
from .errors import GraphError
from .pipeline_spec import PipelineSpec

__all__ = ["StepGraph", "Regime", "GraphError", "OP", "REPLICA", "PIPELINE"]

OP = "op"
REPLICA = "replica"
#: A compact pipeline schedule (:class:`~prism_analytic.graph.pipeline.PipelineSpec`): one node
#: whose duration is the schedule's makespan.
PIPELINE = "pipeline"
KINDS = ("compute", "comm")
#: Regime states are enumerated exactly; beyond this many combinations, conditioning is not cheap.
MAX_REGIME_COMBINATIONS = 4096
#: Resource guards: nodes in one graph (bodies count separately) and nesting of replica bodies.
MAX_NODES = 1_000_000
MAX_DEPTH = 64


@dataclass(frozen=True)
class Regime:
    """A per-step common shock that rescales a class of ops.

    With probability ``probs[s]`` every op tagged ``applies_to`` has its latency multiplied by
    ``factors[s]`` (all ops in the step, replica bodies included).
    """

    name: str
    probs: Mapping[str, float]
    factors: Mapping[str, float]
    applies_to: str

    def __post_init__(self) -> None:
        if set(self.probs) != set(self.factors):
            raise GraphError(
                f"regime {self.name!r}: probs and factors must name the same states, "
                f"got {sorted(self.probs)} and {sorted(self.factors)}"
            )
        if not self.probs:
            raise GraphError(f"regime {self.name!r}: needs at least one state")
        for state, p in self.probs.items():
            if not (isinstance(p, int | float) and 0 <= p <= 1 and math.isfinite(p)):
                raise GraphError(
                    f"regime {self.name!r}: probs[{state!r}] must lie in [0, 1], got {p!r}"
                )
        total = sum(self.probs.values())
        if abs(total - 1) > 1e-9:
            raise GraphError(f"regime {self.name!r}: probs must sum to 1, got {total:.12g}")
        for state, f in self.factors.items():
            try:
                check_positive(f, f"regime {self.name!r}: factors[{state!r}]")
            except (TypeError, ValueError) as exc:
                raise GraphError(str(exc)) from None


@dataclass
class StepGraph:
    """A training step as a DAG of ops (a thin, validated wrapper over ``networkx.DiGraph``).

    Examples
    --------
    >>> import prism_analytic as pa
    >>> g = StepGraph("tiny")
    >>> g.add_op("fwd", pa.normal(1.0, 0.05))
    'fwd'
    >>> g.add_op("bwd", pa.normal(2.0, 0.1), after=["fwd"])
    'bwd'
    >>> sorted(g.nodes)
    ['bwd', 'fwd']
    """

    name: str = "step"
    graph: nx.DiGraph = field(default_factory=nx.DiGraph)
    regimes: list[Regime] = field(default_factory=list)
    #: Where this graph was added as a replica body (None: not yet); it is frozen from then on.
    frozen_as: str | None = field(default=None, init=False, repr=False, compare=False)

    # ----- building ------------------------------------------------------------------------
    def _check_mutable(self, what: str) -> None:
        """Refuse to change a graph that is already some replica group's body.

        A body is evaluated where its group sits: changing it afterwards would change that
        group behind its back, and adding a group back to the outer graph would make a graph
        contain itself (an endless evaluation).
        """
        if self.frozen_as is not None:
            raise GraphError(
                f"{what}: graph {self.name!r} is frozen, it is the replica body of "
                f"{self.frozen_as}; build a body completely before adding it to a group "
                "(or build a new graph)"
            )

    def _add(self, name: str, after: Iterable[str], **attrs: Any) -> str:
        self._check_mutable(f"node {name!r}")
        if not isinstance(name, str) or not name:
            raise GraphError(f"node names must be non-empty strings, got {name!r}")
        if name in self.graph:
            raise GraphError(f"node {name!r} already exists in graph {self.name!r}")
        if len(self.graph) >= MAX_NODES:
            raise GraphError(
                f"node {name!r}: graph {self.name!r} already has {MAX_NODES:,} nodes, the limit "
                "(put repeated structure in a replica group or a pipeline node)"
            )
        after = _names(after, f"node {name!r}: after")
        missing = [a for a in after if a not in self.graph]
        if missing:
            raise GraphError(f"node {name!r}: unknown predecessor(s) {missing}; add them first")
        self.graph.add_node(name, **attrs)
        self.graph.add_edges_from((a, name) for a in after)
        return name

    def add_op(
        self,
        name: str,
        latency: Distribution,
        after: Iterable[str] = (),
        *,
        kind: str = "compute",
        tags: Iterable[str] = (),
    ) -> str:
        """Add an op that starts when every op in ``after`` has finished.

        Parameters
        ----------
        name : str
            Unique node name.
        latency : Distribution
            Its duration (seconds).
        after : iterable of str
            Predecessors (already added).
        kind : {"compute", "comm"}
            Op class; regimes and reports select ops by kind or tag.
        tags : iterable of str
            Free labels, e.g. ``("inter-node",)``, used by regimes.
        """
        if not isinstance(latency, Distribution):
            raise GraphError(
                f"op {name!r}: latency must be a Distribution, got "
                f"{type(latency).__name__} {latency!r}"
            )
        if kind not in KINDS:
            raise GraphError(f"op {name!r}: kind must be one of {KINDS}, got {kind!r}")
        tags = tuple(_names(tags, f"op {name!r}: tags"))
        return self._add(name, after, type=OP, latency=latency, kind=kind, tags=tags)

    def add_collective(
        self,
        name: str,
        latency: Distribution,
        after: Iterable[str] = (),
        *,
        tags: Iterable[str] = (),
    ) -> str:
        """Add a collective: one shared duration, starting when its last participant is ready."""
        return self.add_op(name, latency, after, kind="comm", tags=tags)

    def add_pipeline(
        self,
        name: str,
        spec: Any,
        after: Iterable[str] = (),
        *,
        kind: str = "compute",
        tags: Iterable[str] = (),
    ) -> str:
        """Add a whole pipeline schedule as one node (its duration is the makespan).

        Parameters
        ----------
        spec : PipelineSpec
            Sizes, schedule and one law per (phase, stage, chunk).
        kind, tags
            As for :meth:`add_op`; a regime matching them rescales every op of the pipeline.
            Every op also carries the tags ``"pipeline"`` and ``"stage{s}"``.
        """
        if not isinstance(spec, PipelineSpec):
            raise GraphError(
                f"pipeline {name!r}: spec must be a PipelineSpec, got {type(spec).__name__}"
            )
        if kind not in KINDS:
            raise GraphError(f"pipeline {name!r}: kind must be one of {KINDS}, got {kind!r}")
        tags = tuple(_names(tags, f"pipeline {name!r}: tags"))
        return self._add(name, after, type=PIPELINE, spec=spec, kind=kind, tags=tags)

    def add_replica_group(
        self,
        name: str,
        body: StepGraph,
        n: int,
        after: Iterable[str] = (),
        *,
        slow: tuple[int, float] | None = None,
        speed: Distribution | None = None,
    ) -> str:
        """Add ``n`` independent copies of ``body`` started together and joined by a barrier.

        Represented once: the cost of every engine is independent of ``n``.

        Parameters
        ----------
        body : StepGraph
            One copy's sub-graph (its makespan is the copy's duration).
        n : int
            Number of copies (1 <= n <= 1e12).
        slow : (k, factor), optional
            ``k`` of the copies are ``factor`` times slower (e.g. degraded GPUs).
        speed : Distribution, optional
            Persistent per-copy slowdown factor (spatial variability): each copy's
            whole duration is multiplied by an independent draw (positive support).
        """
        if body is self:
            raise GraphError(
                f"replica group {name!r}: a graph cannot be its own replica body (itself)"
            )
        if not isinstance(body, StepGraph):
            raise GraphError(
                f"replica group {name!r}: body must be a StepGraph, got {type(body).__name__}"
            )
        if body.regimes:
            raise GraphError(
                f"replica group {name!r}: regimes are per-step shocks; declare them "
                "on the top-level graph, not in a replica body"
            )
        if len(body.graph) == 0:
            raise GraphError(f"replica group {name!r}: body graph {body.name!r} is empty")
        self._check_mutable(f"replica group {name!r}")
        if any(g is self for g in body._reachable_graphs()):
            raise GraphError(
                f"replica group {name!r}: body {body.name!r} already contains graph "
                f"{self.name!r} as a nested replica body; a graph cannot contain itself"
            )
        if body.depth() >= MAX_DEPTH:
            raise GraphError(
                f"replica group {name!r}: body {body.name!r} nests replica groups "
                f"{body.depth()} deep; the limit is {MAX_DEPTH}"
            )
        try:
            n = check_count(n, f"replica group {name!r}: n", minimum=1, maximum=10**12)
        except (TypeError, ValueError) as exc:
            raise GraphError(str(exc)) from None
        if slow is not None:
            if not (isinstance(slow, tuple | list) and len(slow) == 2):
                raise GraphError(
                    f"replica group {name!r}: slow must be a pair (count, factor), got {slow!r}"
                )
            try:
                k, factor = slow
                k = check_count(k, f"replica group {name!r}: slow count", minimum=0, maximum=n)
                factor = check_positive(factor, f"replica group {name!r}: slow factor")
            except (TypeError, ValueError) as exc:
                raise GraphError(str(exc)) from None
            slow = (k, factor) if k > 0 else None
        if speed is not None:
            if not isinstance(speed, Distribution):
                raise GraphError(f"replica group {name!r}: speed must be a Distribution")
            if speed.support[0] < 0:
                raise GraphError(
                    f"replica group {name!r}: speed factors must be positive; "
                    f"support starts at {speed.support[0]}"
                )
            if speed.cdf(0.0) > 0:
                raise GraphError(
                    f"replica group {name!r}: speed factors must be positive; "
                    f"P(speed <= 0) = {speed.cdf(0.0):.3g}"
                )
        out = self._add(name, after, type=REPLICA, body=body, n=n, slow=slow, speed=speed)
        if body.frozen_as is None:  # a body shared by several groups names the first
            body.frozen_as = f"group {name!r} in graph {self.name!r}"
        return out

    def add_regime(
        self,
        name: str,
        probs: Mapping[str, float],
        factors: Mapping[str, float],
        *,
        applies_to: str = "comm",
    ) -> Regime:
        """Declare a per-step common shock on ops whose kind or tag equals ``applies_to``."""
        self._check_mutable(f"regime {name!r}")
        regime = Regime(name, dict(probs), dict(factors), applies_to)
        if any(r.name == name for r in self.regimes):
            raise GraphError(f"regime {name!r} already declared")
        combos = math.prod(len(r.probs) for r in [*self.regimes, regime])
        if combos > MAX_REGIME_COMBINATIONS:
            raise GraphError(
                f"regime {name!r}: {combos} state combinations exceed the limit of "
                f"{MAX_REGIME_COMBINATIONS}"
            )
        self.regimes.append(regime)
        return regime

    # ----- views --------------------------------------------------------------------------------
    @property
    def nodes(self) -> list[str]:
        """Node names in insertion order."""
        return list(self.graph.nodes)

    def __len__(self) -> int:
        return self.graph.number_of_nodes()

    def node(self, name: str) -> dict[str, Any]:
        """The attribute dict of node ``name``."""
        return self.graph.nodes[name]

    def depth(self) -> int:
        """Nesting depth of replica bodies (0: no replica group), counted without recursion."""
        deepest, stack, seen = 0, [(self, 0)], set()
        while stack:
            g, level = stack.pop()
            deepest = max(deepest, level)
            if id(g) in seen or level > MAX_DEPTH:
                continue  # a body shared by several groups is walked once
            seen.add(id(g))
            stack.extend(
                (d["body"], level + 1)
                for _, d in g.graph.nodes(data=True)
                if d.get("type") == REPLICA
            )
        return deepest

    def _reachable_graphs(self) -> list[StepGraph]:
        """The graph itself and every replica body nested in it, each once (cycles allowed)."""
        out, stack, seen = [], [self], set()
        while stack:
            g = stack.pop()
            if id(g) in seen:
                continue
            seen.add(id(g))
            out.append(g)
            stack.extend(d["body"] for _, d in g.graph.nodes(data=True) if d.get("type") == REPLICA)
        return out

    def body_cycle(self) -> list[str]:
        """A chain of replica bodies that leads back to a graph on it, as readable steps.

        Empty when the nesting is a tree (or a DAG of shared bodies). Found without recursion:
        a cycle makes recursive walks endless.
        """
        edges = nx.DiGraph()
        for g in self._reachable_graphs():
            edges.add_node(id(g), label=f"graph {g.name!r}")
            for v, d in g.graph.nodes(data=True):
                if d.get("type") == REPLICA:
                    edges.add_edge(id(g), id(d["body"]), group=v)
        try:
            cycle = nx.find_cycle(edges, source=id(self))
        except nx.NetworkXNoCycle:
            return []
        steps = [edges.nodes[cycle[0][0]]["label"]]
        for u, w in cycle:
            steps.append(f"group {edges.edges[u, w]['group']!r} body {edges.nodes[w]['label']}")
        return steps

    def check_nesting(self) -> None:
        """Raise :class:`GraphError` when replica bodies contain a graph that contains them.

        Cheap (each graph's nodes read once); every walk over bodies that recurses needs it
        first.
        """
        cycle = self.body_cycle()
        if cycle:
            raise GraphError(
                "replica bodies form a cycle (a graph cannot contain itself): " + " -> ".join(cycle)
            )

    def tags(self) -> set[str]:
        """Every kind and tag a regime can select in this graph and its bodies."""
        out, stack, seen = set(KINDS), [self], set()
        while stack:
            g = stack.pop()
            if id(g) in seen:  # a shared body (or a cycle validate() reports) is read once
                continue
            seen.add(id(g))
            for _, d in g.graph.nodes(data=True):
                if d.get("type") == REPLICA:
                    stack.append(d["body"])
                    continue
                out.update(d.get("tags", ()))
                if d.get("type") == PIPELINE:
                    out.add("pipeline")
                    out.update(f"stage{s}" for s in range(d["spec"].stages))
        return out

    def validate(self) -> None:
        """Raise :class:`GraphError` unless the graph (and every replica body) is evaluable."""
        if len(self.graph) == 0:
            raise GraphError(f"graph {self.name!r} is empty")
        self.check_nesting()
        if self.depth() > MAX_DEPTH:
            raise GraphError(
                f"graph {self.name!r} nests replica groups more than {MAX_DEPTH} deep (the limit)"
            )
        if self.regimes:
            known = self.tags()
            for r in self.regimes:
                if r.applies_to not in known:
                    raise GraphError(
                        f"regime {r.name!r}: applies_to {r.applies_to!r} matches no op kind or "
                        f"tag in graph {self.name!r}; known: {sorted(known)}"
                    )
        if not nx.is_directed_acyclic_graph(self.graph):
            cycle = nx.find_cycle(self.graph)
            raise GraphError(
                f"graph {self.name!r} has a cycle: "
                + " -> ".join(str(u) for u, _ in cycle)
                + f" -> {cycle[0][0]}"
            )
        for name, data in self.graph.nodes(data=True):
            if data.get("type") == REPLICA:
                if data["body"].regimes:
                    raise GraphError(
                        f"replica group {name!r}: its body declares regimes; regimes "
                        "are per-step shocks, declare them on the top-level graph"
                    )
                data["body"].validate()
            elif data.get("type") not in (OP, PIPELINE):
                raise GraphError(f"node {name!r} was not added through StepGraph (no type)")

    def topological_order(self) -> list[str]:
        """Nodes in an order where every predecessor comes first."""
        self.validate()
        return list(nx.topological_sort(self.graph))

    def total_ops(self) -> int:
        """Number of op instances in the whole step, counting every replica (may be huge)."""
        self.check_nesting()  # a cycle of bodies would make the count recurse without end
        return self._count_ops()

    def _count_ops(self) -> int:
        total = 0
        for _, d in self.graph.nodes(data=True):
            if d["type"] == REPLICA:
                total += d["n"] * d["body"]._count_ops()
            else:
                total += d["spec"].n_ops if d["type"] == PIPELINE else 1
        return total

    def regime_states(self) -> Iterator[tuple[float, dict[str, float]]]:
        """Every combination of regime states as (probability, {tag: factor})."""
        if not self.regimes:
            yield 1.0, {}
            return
        for combo in itertools.product(*(r.probs.items() for r in self.regimes)):
            prob = math.prod(p for _, p in combo)
            if prob == 0:
                continue
            factors: dict[str, float] = {}
            for regime, (state, _) in zip(self.regimes, combo):
                factors[regime.applies_to] = (
                    factors.get(regime.applies_to, 1.0) * regime.factors[state]
                )
            yield prob, factors

    def conditioned(self, factors: Mapping[str, float]) -> StepGraph:
        """A regime-free copy with latencies of ops matching a tag or kind scaled by its factor."""
        out = StepGraph(self.name)
        for name in nx.topological_sort(self.graph):
            d = self.graph.nodes[name]
            after = list(self.graph.predecessors(name))
            if d["type"] == OP:
                scale = math.prod(
                    f for tag, f in factors.items() if tag == d["kind"] or tag in d["tags"]
                )
                latency = d["latency"] if scale == 1.0 else d["latency"].scale(scale)
                out.add_op(name, latency, after, kind=d["kind"], tags=d["tags"])
            elif d["type"] == PIPELINE:
                out.add_pipeline(
                    name,
                    _scaled_pipeline(d, factors),
                    after,
                    kind=d["kind"],
                    tags=d["tags"],
                )
            else:
                out.add_replica_group(
                    name,
                    d["body"].conditioned(factors),
                    d["n"],
                    after,
                    slow=d["slow"],
                    speed=d["speed"],
                )
        return out

    # ----- serialisation ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Node-link form (networkx ``node_link_data``) with distributions as specs."""
        nodes = []
        for name in self.graph.nodes:
            d = self.graph.nodes[name]
            entry: dict[str, Any] = {"id": name, "type": d["type"]}
            if d["type"] == OP:
                try:
                    spec = to_spec(d["latency"])
                except TypeError as exc:
                    raise TypeError(f"node {name!r}: {exc}") from None
                entry.update(latency=spec, kind=d["kind"], tags=list(d["tags"]))
            elif d["type"] == PIPELINE:
                entry.update(spec=d["spec"].to_dict(), kind=d["kind"], tags=list(d["tags"]))
            else:
                entry.update(
                    body=d["body"].to_dict(),
                    n=d["n"],
                    slow=list(d["slow"]) if d["slow"] else None,
                    speed=to_spec(d["speed"]) if d["speed"] is not None else None,
                )
            nodes.append(entry)
        return {
            "name": self.name,
            "directed": True,
            "nodes": nodes,
            "edges": [{"source": u, "target": v} for u, v in self.graph.edges],
            "regimes": [
                {
                    "name": r.name,
                    "probs": dict(r.probs),
                    "factors": dict(r.factors),
                    "applies_to": r.applies_to,
                }
                for r in self.regimes
            ],
        }

    def to_json(self, **kwargs: Any) -> str:
        """JSON text of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], _depth: int = 0) -> StepGraph:
        """Rebuild a graph from :meth:`to_dict` output, validating every field."""
        if not isinstance(data, Mapping) or "nodes" not in data:
            raise GraphError("graph data must be an object with 'nodes' and 'edges'")
        if _depth > MAX_DEPTH:
            raise GraphError(f"graph data nests replica bodies more than {MAX_DEPTH} deep")
        for key in ("nodes", "edges", "regimes"):
            if key in data and not isinstance(data[key], list | tuple):
                raise GraphError(
                    f"graph data: {key!r} must be a list, got {type(data[key]).__name__} "
                    f"{data[key]!r}"[:200]
                )
        if len(data["nodes"]) > MAX_NODES:
            raise GraphError(f"graph data: {len(data['nodes']):,} nodes exceed {MAX_NODES:,}")
        g = cls(str(data.get("name", "step")))
        preds: dict[str, list[str]] = {}
        for i, e in enumerate(data.get("edges", [])):
            if not isinstance(e, Mapping) or "source" not in e or "target" not in e:
                raise GraphError(
                    f"edges[{i}] must be an object with 'source' and 'target', got {e!r}"
                )
            if not (isinstance(e["source"], str) and isinstance(e["target"], str)):
                raise GraphError(f"edges[{i}]: source and target must be node ids (strings)")
            preds.setdefault(e["target"], []).append(e["source"])
        for i, n in enumerate(data["nodes"]):
            if not isinstance(n, Mapping) or not isinstance(n.get("id"), str):
                raise GraphError(
                    f"nodes[{i}] must be an object with a string 'id', got {n!r}"[:300]
                )
        ids = [n["id"] for n in data["nodes"]]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise GraphError(f"nodes: duplicate id(s) {dupes}")
        nodes = {n["id"]: n for n in data["nodes"]}
        unknown = {p for ps in preds.values() for p in ps} - set(nodes)
        unknown |= set(preds) - set(nodes)
        if unknown:
            raise GraphError(f"edges name unknown node(s) {sorted(unknown)}")
        skeleton = nx.DiGraph()
        skeleton.add_nodes_from(nodes)
        skeleton.add_edges_from((p, t) for t, ps in preds.items() for p in ps)
        if not nx.is_directed_acyclic_graph(skeleton):
            raise GraphError("graph data has a cycle: " + str(nx.find_cycle(skeleton)))
        for name in nx.topological_sort(skeleton):
            n = nodes[name]
            after = preds.get(name, [])
            required = {OP: ("latency",), REPLICA: ("body", "n"), PIPELINE: ("spec",)}.get(
                n.get("type"), ()
            )
            missing = [k for k in required if k not in n]
            if missing:
                raise GraphError(
                    f"nodes[{name!r}]: missing field(s) {missing} for type {n.get('type')!r}"
                )
            if n.get("type") == OP:
                g.add_op(
                    name,
                    from_spec(n["latency"], f"nodes[{name!r}].latency"),
                    after,
                    kind=n.get("kind", "compute"),
                    tags=n.get("tags", ()),
                )
            elif n.get("type") == PIPELINE:
                g.add_pipeline(
                    name,
                    PipelineSpec.from_dict(n["spec"], f"nodes[{name!r}].spec"),
                    after,
                    kind=n.get("kind", "compute"),
                    tags=n.get("tags", ()),
                )
            elif n.get("type") == REPLICA:
                speed = n.get("speed")
                g.add_replica_group(
                    name,
                    cls.from_dict(n["body"], _depth + 1),
                    n["n"],
                    after,
                    slow=tuple(n["slow"]) if n.get("slow") else None,
                    speed=from_spec(speed, f"nodes[{name!r}].speed") if speed else None,
                )
            else:
                raise GraphError(
                    f"nodes[{name!r}].type must be 'op', 'pipeline' or 'replica', "
                    f"got {n.get('type')!r}"
                )
        for i, r in enumerate(data.get("regimes", [])):
            fields = ("name", "probs", "factors")
            if not isinstance(r, Mapping) or any(k not in r for k in fields):
                raise GraphError(
                    f"regimes[{i}] must be an object with {list(fields)} (and applies_to), "
                    f"got {r!r}"[:300]
                )
            for k in ("probs", "factors"):
                if not isinstance(r[k], Mapping):
                    raise GraphError(f"regimes[{i}].{k} must be an object {{state: number}}")
            g.add_regime(
                r["name"], r["probs"], r["factors"], applies_to=r.get("applies_to", "comm")
            )
        return g

    @classmethod
    def from_json(cls, text: str) -> StepGraph:
        """Rebuild a graph from :meth:`to_json` text."""
        if isinstance(text, bytes | bytearray):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise GraphError(f"graph JSON is not UTF-8 text: {exc}") from None
        if not isinstance(text, str):
            raise GraphError(f"graph JSON must be text, got {type(text).__name__}")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise GraphError(f"graph JSON is not valid JSON: {exc}") from None
        except RecursionError:
            raise GraphError(
                f"graph JSON nests too deep (limit {MAX_DEPTH} replica bodies)"
            ) from None
        return cls.from_dict(data)


def _scaled_pipeline(d: Mapping[str, Any], factors: Mapping[str, float]) -> Any:
    """The pipeline spec of node ``d`` with each op's law scaled by the matching regime factors.

    An op matches a factor's tag through the node's kind and tags or its own ``"pipeline"`` and
    ``"stage{s}"`` tags (as the explicit graph's ops do).
    """
    spec = d["spec"]
    if not factors:
        return spec

    def scale(key: str, law: Distribution) -> Distribution:
        stage = key.split()[1].replace("s", "stage")
        own = {d["kind"], *d["tags"], "pipeline", stage}
        f = math.prod(v for tag, v in factors.items() if tag in own)
        return law if f == 1.0 else law.scale(f)

    return spec.mapped(scale)


def _names(value: Any, field: str) -> list[str]:
    """``value`` as a list of strings: one string, or an iterable of strings (None: none)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise GraphError(
            f"{field} must be a string or a list of strings, got {type(value).__name__} {value!r}"
        )
    out = list(value)
    bad = [v for v in out if not isinstance(v, str)]
    if bad:
        raise GraphError(f"{field} must contain strings only, got {bad[0]!r}")
    return out
