"""Where to put K slow GPUs: the step-time law of named placements and a search for the best.

A GPU that is ``F`` times slower slows every pipeline op of its (replica, stage) *cell*: the
``tp * cp`` GPUs of a cell run in lockstep (each tp collective waits for the slowest member), so
one slow GPU in a cell costs as much as ``tp * cp`` of them. The op's whole law is scaled by
``F`` (its exposed communication too: a simplification that overstates the cost of a slow GPU
on a communication-bound op). A placement is therefore a set of slowed cells; replicas with
the same set of slowed stages form one replica group, so every placement is evaluated exactly
by the engines at any ``dp``.

The job's random degraded GPUs (``variability.spatial.slow_fraction``) are switched off here:
the K placed GPUs are the only degraded ones. Spatial (``cv``) and temporal noise stay.

Why placement matters (the mechanism, measured on Llama 3 405B, tp 8 x pp 16, 1F1B, 16
microbatches, 16,384 GPUs: ``prism placement --preset llama3-405b --gpus 16384 --config F
--slow-gpus 16 --slow-factor 1.5`` with F setting ``[parallelism] schedule = "1f1b"``,
``vpp = 1``): in 1F1B with as many microbatches as stages there is no steady state; the
critical path runs along the *last* stages, while the early stages finish their forwards and
wait in the bubble. One slow tp group costs a replica 1.4% on stage 0 and 22-24% on the last
stages (:func:`stage_costs`). The step waits for the slowest replica, so 16 slow GPUs spread
over the 16 stages of one replica (the whole replica 1.5x slower, p95 18.2 s) give 1.46x the
p95 of the same GPUs packed as two tp groups on stage 0 of two replicas (12.46 s; no slow GPU:
12.44 s). With the interleaved schedule (vpp 8) the bubble is small and the best/worst ratio
falls to about 1.1x.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import networkx as nx

from ..distributions import Distribution
from ..engines.predict import predict
from ..graph import REPLICA, StepGraph
from ..graph.pipeline import op_name, pipeline_step_graph

__all__ = [
    "PLACEMENTS",
    "Placement",
    "PlacementResult",
    "placement_analysis",
    "stage_costs",
]

PLACEMENTS = (
    "packed-tp-group",
    "packed-stage",
    "packed-replica",
    "spread-stages",
    "spread-replicas",
    "most-slack",
    "least-slack",
)


@dataclass(frozen=True)
class Placement:
    """Slowed cells, as replica patterns: ``{frozenset(stages): number of replicas}``."""

    name: str
    patterns: tuple[tuple[frozenset[int], int], ...]
    description: str

    @property
    def replicas(self) -> int:
        """Replicas holding at least one slow GPU."""
        return sum(c for _, c in self.patterns)

    def cells(self) -> list[tuple[int, int]]:
        """(replica, stage) cells, replicas numbered in pattern order."""
        out, r = [], 0
        for stages, count in self.patterns:
            for _ in range(count):
                out += [(r, s) for s in sorted(stages)]
                r += 1
        return out


@dataclass(frozen=True)
class PlacementRow:
    """One placement's step-time numbers (seconds)."""

    name: str
    description: str
    replicas: int
    cells: int
    mean_s: float
    p95_s: float
    p99_s: float


@dataclass(frozen=True)
class PlacementResult:
    """Named placements, the searched ones, and the best/worst ratios."""

    job: str
    slow_gpus: int
    slow_factor: float
    healthy: PlacementRow
    rows: tuple[PlacementRow, ...]
    searched: tuple[PlacementRow, ...]
    stage_costs: tuple[float, ...]

    def _all(self) -> list[PlacementRow]:
        return list(self.rows) + list(self.searched)

    @property
    def best(self) -> PlacementRow:
        """Lowest p95."""
        return min(self._all(), key=lambda r: r.p95_s)

    @property
    def worst(self) -> PlacementRow:
        """Highest p95."""
        return max(self._all(), key=lambda r: r.p95_s)

    @property
    def ratio_mean(self) -> float:
        """Worst mean / best mean over all evaluated placements."""
        rows = self._all()
        return max(r.mean_s for r in rows) / min(r.mean_s for r in rows)

    @property
    def ratio_p95(self) -> float:
        """Worst p95 / best p95."""
        return self.worst.p95_s / self.best.p95_s

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return {
            "job": self.job,
            "slow_gpus": self.slow_gpus,
            "slow_factor": self.slow_factor,
            "healthy": dataclasses.asdict(self.healthy),
            "placements": [dataclasses.asdict(r) for r in self.rows],
            "searched": [dataclasses.asdict(r) for r in self.searched],
            "best": self.best.name,
            "worst": self.worst.name,
            "ratio_mean": self.ratio_mean,
            "ratio_p95": self.ratio_p95,
            "stage_costs": list(self.stage_costs),
        }

    def summary(self) -> str:
        """A table."""
        h = self.healthy
        lines = [
            f"{self.slow_gpus} GPUs {self.slow_factor:g}x slower in {self.job}"
            f" (no slow GPU: mean {h.mean_s:.4g} s, p95 {h.p95_s:.4g} s)",
            f"{'placement':<26} {'replicas':>8} {'cells':>6} {'mean s':>9} {'p95 s':>9}"
            f" {'p99 s':>9}",
        ]
        for r in self._all():
            lines.append(
                f"{r.name:<26} {r.replicas:>8} {r.cells:>6} {r.mean_s:>9.4g} {r.p95_s:>9.4g}"
                f" {r.p99_s:>9.4g}"
            )
        lines.append(
            f"best {self.best.name}, worst {self.worst.name}: worst/best mean"
            f" {self.ratio_mean:.3f}x, p95 {self.ratio_p95:.3f}x"
        )
        return "\n".join(lines)

    def plot(self, ax: Any = None) -> Any:
        """Mean and p95 per placement (horizontal bars)."""
        import matplotlib.pyplot as plt

        ax = ax or plt.gca()
        rows = sorted(self._all(), key=lambda r: r.p95_s)
        y = range(len(rows))
        ax.barh([i + 0.2 for i in y], [r.p95_s for r in rows], 0.4, label="p95")
        ax.barh([i - 0.2 for i in y], [r.mean_s for r in rows], 0.4, label="mean")
        ax.axvline(self.healthy.p95_s, color="k", ls=":", lw=1, label="no slow GPU (p95)")
        ax.set_yticks(list(y), [r.name for r in rows], fontsize=7)
        ax.set_xlabel("step time (s)")
        lo = min(r.mean_s for r in rows + [self.healthy])
        ax.set_xlim(lo * 0.97, max(r.p95_s for r in rows) * 1.02)
        ax.legend(fontsize=7, loc="lower right")
        return ax


# --------------------------------------------------------------------------------------
# The job's body, per stage
# --------------------------------------------------------------------------------------
def _law_getter(body: StepGraph):
    """``law(phase, stage, chunk)`` of a builder pipeline body (compact or explicit)."""
    nodes = body.nodes
    if len(nodes) == 1 and "spec" in body.node(nodes[0]):
        spec = body.node(nodes[0])["spec"]
        return spec.law
    return lambda ph, s, c: body.node(op_name(ph, s, 0, c))["latency"]


def stage_costs(job: Any, factor: float) -> list[float]:
    """Mean-time makespan of one replica's pipeline with stage ``s`` slowed by ``factor``.

    Relative to the healthy makespan, every op at its mean time (longest path through the
    schedule's DAG). A stage with a small cost has *slack*: its ops wait in the pipeline
    bubble, so slowing them costs little.
    """
    from ..schedules import pipeline_dag
    from ..workload.builder import build_step_graph

    body = build_step_graph(job).node("replicas")["body"]
    law = _law_getter(body)
    p = job.parallelism
    v = p.vpp if p.schedule == "interleaved" else 1
    dag = pipeline_dag(p.pp, p.microbatches, p.schedule, v)
    order = list(nx.topological_sort(dag))
    preds = {n: list(dag.predecessors(n)) for n in order}
    means = {
        (ph, s, c): float(law(ph, s, c).mean())
        for ph in "FB"
        for s in range(p.pp)
        for c in range(v)
    }

    def makespan(slow: int | None) -> float:
        finish: dict[Any, float] = {}
        for node in order:
            ph, s, _, c = node
            w = means[(ph, s, c)] * (factor if s == slow else 1.0)
            finish[node] = w + max((finish[u] for u in preds[node]), default=0.0)
        return max(finish.values())

    base = makespan(None)
    return [makespan(s) / base for s in range(p.pp)]


def _slowed_body(job: Any, body: StepGraph, stages: frozenset[int], factor: float) -> StepGraph:
    law = _law_getter(body)
    p = job.parallelism
    v = p.vpp if p.schedule == "interleaved" else 1
    cache: dict[tuple[str, int, int], Distribution] = {}

    def latency(ph: str, s: int, mb: int, c: int) -> Distribution:
        key = (ph, s, c)
        if key not in cache:
            d = law(ph, s, c)
            cache[key] = d.scale(factor) if s in stages else d
        return cache[key]

    kw: dict[str, Any] = {"schedule": p.schedule, "vpp": v, "name": f"{body.name}/slow"}
    if "compact" in inspect.signature(pipeline_step_graph).parameters:
        kw["compact"] = len(body) == 1
    return pipeline_step_graph(p.pp, p.microbatches, latency, **kw)


def _placement_graph(job: Any, graph: StepGraph, pl: Placement, factor: float) -> StepGraph:
    node = graph.node("replicas")
    body, n, speed = node["body"], int(node["n"]), node["speed"]
    out = StepGraph(f"{graph.name}/{pl.name}")
    groups = []
    healthy = n - pl.replicas
    if healthy > 0:
        groups.append(out.add_replica_group("replicas", body, healthy, speed=speed))
    for i, (stages, count) in enumerate(pl.patterns):
        sb = _slowed_body(job, body, stages, factor)
        groups.append(out.add_replica_group(f"slow{i}", sb, count, speed=speed))
    for name in nx.topological_sort(graph.graph):
        d = graph.graph.nodes[name]
        if d["type"] == REPLICA:
            continue
        after = []
        for a in graph.graph.predecessors(name):
            after += groups if a == "replicas" else [a]
        out.add_op(name, d["latency"], after, kind=d["kind"], tags=d["tags"])
    for r in graph.regimes:
        out.add_regime(r.name, dict(r.probs), dict(r.factors), applies_to=r.applies_to)
    return out


# --------------------------------------------------------------------------------------
# Placements
# --------------------------------------------------------------------------------------
def _patterns(cells: list[tuple[int, int]]) -> tuple[tuple[frozenset[int], int], ...]:
    per: dict[int, set[int]] = {}
    for r, s in cells:
        per.setdefault(r, set()).add(s)
    counts = Counter(frozenset(v) for v in per.values())
    return tuple(sorted(counts.items(), key=lambda kv: (sorted(kv[0]), kv[1])))


def named_placements(k: int, cell_gpus: int, pp: int, dp: int, slack_order: list[int]):
    """The named placements of ``k`` slow GPUs (cells of ``cell_gpus`` GPUs, pp x dp cells)."""
    c = math.ceil(k / cell_gpus)  # fewest cells that hold them

    def fill(order: list[tuple[int, int]], count: int) -> list[tuple[int, int]]:
        return order[:count]

    by_stage = [(r, s) for r in range(dp) for s in range(pp)]  # replica 0's stages first
    by_replica = [(r, s) for s in range(pp) for r in range(dp)]  # stage 0 of every replica
    diag = [(i, i % pp) for i in range(dp)]  # one per replica, stages rotating
    most = [(r, s) for s in slack_order for r in range(dp)]  # most-slack stage first
    least = [(r, s) for s in slack_order[::-1] for r in range(dp)]
    spread_n = min(k, pp * dp)
    out = [
        ("packed-tp-group", fill(by_stage, c), "fewest tp groups, consecutive stages of replica 0"),
        ("packed-stage", fill(by_replica, c), "fewest tp groups, stage 0 of successive replicas"),
        (
            "packed-replica",
            fill(by_stage, min(k, pp)) if k <= pp * cell_gpus else fill(by_stage, c),
            "all in replica 0, one per stage",
        ),
        (
            "spread-stages",
            fill(diag, min(k, dp)) if k <= dp else fill(by_replica, spread_n),
            "one per replica, on rotating stages",
        ),
        ("spread-replicas", fill(by_replica, spread_n), "one per replica, all on stage 0"),
        ("most-slack", fill(most, c), "fewest tp groups, on the stage with most slack"),
        ("least-slack", fill(least, c), "fewest tp groups, on the stage with least slack"),
    ]
    return [Placement(n, _patterns(cells), d) for n, cells, d in out]


def _search_space(k: int, cell_gpus: int, pp: int, dp: int, slack_order: list[int]):
    """Structured candidates: j replicas, each packed on the most-slack stages or spread."""
    out = []
    j = 1
    while j <= min(k, dp):
        per = math.ceil(k / j)
        packed = math.ceil(per / cell_gpus)
        if packed <= pp:
            stages = frozenset(slack_order[:packed])
            out.append(Placement(f"search:{j}x{packed}slack", ((stages, j),), ""))
        spread = min(per, pp)
        if spread != packed and spread * cell_gpus >= per:
            stages = frozenset(slack_order[:spread])
            out.append(Placement(f"search:{j}x{spread}spread", ((stages, j),), ""))
        j *= 2
    return out


def placement_analysis(
    job: Any,
    slow_gpus: int,
    slow_factor: float,
    *,
    search: bool = True,
) -> PlacementResult:
    """Step-time law of every named placement of ``slow_gpus`` GPUs ``slow_factor`` x slower.

    Parameters
    ----------
    job : JobConfig
    slow_gpus : int
        K, 1 <= K <= the job's GPU count.
    slow_factor : float
        F > 0 (F > 1 is a slow-down; F < 1 a faster GPU).
    search : bool
        Also evaluate the structured search space (j replicas x packed/spread patterns).

    Raises
    ------
    ValueError
        ``--slow-gpus`` outside ``[1, gpus]``, ``--slow-factor`` not a positive number.
    """
    from ..workload.builder import build_step_graph

    if isinstance(slow_gpus, bool) or not isinstance(slow_gpus, int) or slow_gpus < 1:
        raise ValueError(f"--slow-gpus must be a positive integer, got {slow_gpus!r}")
    if slow_gpus > job.gpus:
        raise ValueError(f"--slow-gpus {slow_gpus} exceeds the job's {job.gpus} GPUs")
    if not (
        isinstance(slow_factor, int | float) and math.isfinite(slow_factor) and slow_factor > 0
    ):
        raise ValueError(f"--slow-factor must be a positive number, got {slow_factor!r}")
    v = job.variability
    spatial = dataclasses.replace(v.spatial, slow_fraction=0.0)
    job = dataclasses.replace(job, variability=dataclasses.replace(v, spatial=spatial))
    graph = build_step_graph(job)
    p = job.parallelism
    cell_gpus = p.tp * p.cp
    costs = stage_costs(job, slow_factor)
    slack = tuple(costs)
    order = sorted(range(p.pp), key=lambda s: (costs[s], s))

    def law_row(name: str, description: str, replicas: int, cells: int, law) -> PlacementRow:
        q95, q99 = float(law.quantile(0.95)), float(law.quantile(0.99))
        return PlacementRow(name, description, replicas, cells, float(law.mean()), q95, q99)

    hrow = law_row("no slow GPU", "", 0, 0, predict(graph))

    def row(pl: Placement) -> PlacementRow:
        res = predict(_placement_graph(job, graph, pl, slow_factor))
        return law_row(pl.name, pl.description, pl.replicas, len(pl.cells()), res)

    named = named_placements(slow_gpus, cell_gpus, p.pp, p.dp, order)
    seen: dict[tuple, PlacementRow] = {}
    rows = []
    for pl in named:
        key = pl.patterns
        r = seen.get(key) or row(pl)
        seen[key] = r
        rows.append(dataclasses.replace(r, name=pl.name, description=pl.description))
    searched = []
    if search:
        for pl in _search_space(slow_gpus, cell_gpus, p.pp, p.dp, order):
            if pl.patterns in seen:
                continue
            seen[pl.patterns] = r = row(pl)
            searched.append(r)
    return PlacementResult(
        job.name, slow_gpus, float(slow_factor), hrow, tuple(rows), tuple(searched), slack
    )
