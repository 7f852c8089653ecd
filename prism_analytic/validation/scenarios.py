"""The agreement suite's scenarios: named step graphs, each a function returning a fresh graph.

Register a new scenario with the :func:`scenario` decorator; ``prism agreement --list`` shows them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import prism_analytic as pa
from prism_analytic.graph import StepGraph
from prism_analytic.graph.pipeline import pipeline_step_graph

__all__ = ["Scenario", "SCENARIOS", "scenario", "pipeline", "chain_group"]

MS = 1e-3  # scenario latencies are written in milliseconds


@dataclass(frozen=True)
class Scenario:
    """A named step graph of the suite.

    Attributes
    ----------
    name : str
        Identifier used by ``--only``.
    build : callable
        Returns a fresh :class:`StepGraph`.
    description : str
        One line: what the scenario exercises.
    """

    name: str
    build: Callable[[], StepGraph]
    description: str


SCENARIOS: dict[str, Scenario] = {}


def scenario(
    name: str, description: str
) -> Callable[[Callable[[], StepGraph]], Callable[[], StepGraph]]:
    """Register a scenario builder under ``name``."""

    def deco(fn: Callable[[], StepGraph]) -> Callable[[], StepGraph]:
        if name in SCENARIOS:
            raise ValueError(f"scenario {name!r} registered twice")
        SCENARIOS[name] = Scenario(name, fn, description)
        return fn

    return deco


def _rank_body(name: str = "rank") -> StepGraph:
    """One rank's local step: forward, backward, local gradient bucket copy."""
    g = StepGraph(name)
    g.add_op("fwd", pa.normal(4 * MS, 0.12 * MS))
    g.add_op("bwd", pa.gamma(8 * MS, 0.4 * MS), after=["fwd"])
    g.add_op("bucket", pa.lognormal(0.5 * MS, 0.1 * MS), after=["bwd"], kind="comm")
    return g


def chain_group(n: int, *laws: pa.Distribution, slow: tuple[int, float] | None = None) -> StepGraph:
    """A step that is one barrier over ``n`` copies of a chain of ``laws`` (``slow`` copies)."""
    body = StepGraph("body")
    for i, law in enumerate(laws):
        body.add_op(f"op{i}", law, after=[f"op{i - 1}"] if i else [])
    g = StepGraph("step")
    g.add_replica_group("ranks", body, n, slow=slow)
    return g


def _barrier(n: int, body: StepGraph, name: str, **group: Any) -> StepGraph:
    g = StepGraph(name)
    g.add_replica_group("ranks", body, n, **group)
    g.add_collective("allreduce", pa.lognormal(2 * MS, 0.2 * MS), after=["ranks"])
    g.add_op("optimizer", pa.normal(1 * MS, 0.03 * MS), after=["allreduce"])
    return g


@scenario("chain", "12 ops in series (normal, gamma, lognormal)")
def chain() -> StepGraph:
    g = StepGraph("chain")
    prev: list[str] = []
    for i in range(12):
        lat = (
            pa.normal(2 * MS, 0.1 * MS),
            pa.gamma(1.5 * MS, 0.15 * MS),
            pa.lognormal(0.8 * MS, 0.16 * MS),
        )[i % 3]
        prev = [g.add_op(f"op{i}", lat, prev, kind="comm" if i % 3 == 2 else "compute")]
    return g


@scenario("fork_join", "4 parallel branches of 3 ops between a head and a join")
def fork_join() -> StepGraph:
    g = StepGraph("fork_join")
    g.add_op("head", pa.normal(1 * MS, 0.05 * MS))
    ends = []
    for b in range(4):
        prev = ["head"]
        for j in range(3):
            mean = (2.0 + 0.1 * b) * MS
            lat = pa.gamma(mean, 0.08 * mean) if j != 1 else pa.lognormal(mean, 0.1 * mean)
            prev = [g.add_op(f"b{b}_{j}", lat, prev)]
        ends.extend(prev)
    g.add_op("join", pa.normal(1 * MS, 0.05 * MS), after=ends)
    g.add_op("tail", pa.gamma(0.5 * MS, 0.05 * MS), after=["join"])
    return g


@scenario("barrier_8", "8 ranks (3-op chain each) joined by a barrier, then all-reduce")
def barrier_8() -> StepGraph:
    return _barrier(8, _rank_body(), "barrier_8")


@scenario("barrier_1024", "1,024 ranks (3-op chain each): Monte Carlo samples every rank")
def barrier_1024() -> StepGraph:
    return _barrier(1024, _rank_body(), "barrier_1024")


@scenario("barrier_65536", "65,536 ranks of one lognormal kernel (exact symmetric MC)")
def barrier_65536() -> StepGraph:
    body = StepGraph("kernel")
    body.add_op("kernel", pa.lognormal(10 * MS, 0.5 * MS))
    return _barrier(65_536, body, "barrier_65536")


@scenario("slow_copies", "256 ranks of which 4 are 1.3x slower")
def slow_copies() -> StepGraph:
    return _barrier(256, _rank_body(), "slow_copies", slow=(4, 1.3))


@scenario("speed_factors", "512 ranks with persistent speed factors lognormal(1, 0.02)")
def speed_factors() -> StepGraph:
    return _barrier(512, _rank_body(), "speed_factors", speed=pa.lognormal(1.0, 0.02))


@scenario("regime_mixture", "64 ranks; every comm op x3 in a congested step (p = 0.05)")
def regime_mixture() -> StepGraph:
    body = StepGraph("rank")
    prev: list[str] = []
    for layer in range(4):
        c = body.add_op(f"compute{layer}", pa.normal(3 * MS, 0.1 * MS), prev)
        prev = [body.add_op(f"comm{layer}", pa.lognormal(1 * MS, 0.1 * MS), [c], kind="comm")]
    g = _barrier(64, body, "regime_mixture")
    g.add_regime(
        "congestion",
        {"calm": 0.95, "congested": 0.05},
        {"calm": 1.0, "congested": 3.0},
        applies_to="comm",
    )
    return g


@scenario("heavy_tail_comm", "compute/comm chain; comm lognormal sd = 3 x mean and Pareto(2.5)")
def heavy_tail_comm() -> StepGraph:
    g = StepGraph("heavy_tail_comm")
    g.add_op("fwd", pa.normal(3 * MS, 0.1 * MS))
    g.add_op("send", pa.lognormal(1 * MS, 3 * MS), after=["fwd"], kind="comm")  # sigma = 1.52
    g.add_op("bwd", pa.normal(6 * MS, 0.2 * MS), after=["send"])
    g.add_collective("allreduce", pa.pareto(2.5, 0.6 * MS), after=["bwd"])
    g.add_op("optimizer", pa.normal(1 * MS, 0.03 * MS), after=["allreduce"])
    return g


@scenario(
    "fsdp_overlap",
    "FSDP, 8 layers: all-gather/reduce-scatter on a comm stream "
    "overlapping compute (not series-parallel)",
)
def fsdp_overlap(layers: int = 8) -> StepGraph:
    g = StepGraph("fsdp_overlap")
    ag = lambda: pa.lognormal(2.5 * MS, 0.25 * MS)  # noqa: E731
    stream: list[str] = []  # the comm stream is serial: each comm op follows the previous one
    fwd: list[str] = []
    for i in range(layers):
        # prefetch at most one layer ahead: the gather of layer i waits for compute of i - 2
        deps = stream + ([fwd[i - 2]] if i >= 2 else [])
        stream = [g.add_collective(f"AG_f{i}", ag(), deps)]
        fwd.append(g.add_op(f"F{i}", pa.normal(3 * MS, 0.09 * MS), stream + fwd[-1:]))
    bwd: dict[int, str] = {}
    for i in reversed(range(layers)):
        deps = [bwd[i + 1]] if i + 1 < layers else [fwd[-1]]
        if i < layers - 1:  # the last layer's parameters stay gathered after forward
            gather_deps = stream + ([bwd[i + 2]] if i + 2 < layers else [fwd[-1]])
            stream = [g.add_collective(f"AG_b{i}", ag(), gather_deps)]
            deps = deps + stream
        bwd[i] = g.add_op(f"B{i}", pa.normal(6 * MS, 0.18 * MS), deps)
        stream = [g.add_collective(f"RS{i}", pa.lognormal(2.5 * MS, 0.25 * MS), stream + [bwd[i]])]
    g.add_op("optimizer", pa.normal(1 * MS, 0.03 * MS), stream + [bwd[0]])
    return g


def _pipeline_latency(
    vpp: int = 1, cv: float = 0.05
) -> Callable[[str, int, int, int], pa.Distribution]:
    def latency(phase: str, stage: int, microbatch: int, chunk: int) -> pa.Distribution:
        mean = (1.0 if phase == "F" else 2.0) / vpp
        return pa.normal(mean, cv * mean)

    return latency


def pipeline(stages: int, microbatches: int, schedule: str = "1f1b", vpp: int = 1) -> StepGraph:
    """Pipeline step graph of the given schedule, F 1 and B 2 (divided by ``vpp``), CV 5%."""
    return pipeline_step_graph(
        stages,
        microbatches,
        _pipeline_latency(vpp),
        schedule=schedule,
        vpp=vpp,
        name=f"{schedule} {stages}x{microbatches}",
    )


@scenario("pipe_1f1b_4x8", "1F1B pipeline, 4 stages x 8 microbatches (F 1, B 2, CV 5%)")
def pipe_1f1b_4x8() -> StepGraph:
    return pipeline(4, 8)


@scenario("pipe_1f1b_8x32", "1F1B pipeline, 8 stages x 32 microbatches")
def pipe_1f1b_8x32() -> StepGraph:
    return pipeline(8, 32)


@scenario("pipe_1f1b_16x64", "1F1B pipeline, 16 stages x 64 microbatches")
def pipe_1f1b_16x64() -> StepGraph:
    return pipeline(16, 64)


@scenario("pipe_interleaved_8x32", "interleaved 1F1B, vpp 2, 8 stages x 32 microbatches")
def pipe_interleaved_8x32() -> StepGraph:
    return pipeline(8, 32, "interleaved", vpp=2)


@scenario("pipe_4x8_x512", "1F1B 4x8 pipeline in each of 512 data-parallel replicas")
def pipe_4x8_x512() -> StepGraph:
    g = StepGraph("pipe_4x8_x512")
    g.add_replica_group("replicas", pipeline(4, 8), 512)
    return g


# ----- deeper lattices and shared factors (compact pipeline nodes) -----------------
def compact_pipeline(
    stages: int,
    microbatches: int,
    schedule: str = "1f1b",
    vpp: int = 1,
    **factors: pa.Distribution,
) -> StepGraph:
    """A compact pipeline node (F 1, B 2 per chunk, CV 5%), optionally with shared factors."""
    return pipeline_step_graph(
        stages,
        microbatches,
        _pipeline_latency(vpp),
        schedule=schedule,
        vpp=vpp,
        name=f"{schedule} {stages}x{microbatches}",
        compact=True,
        **factors,
    )


#: Per-microbatch factor CV giving a within-microbatch correlation of about 0.5, 0.9 and 0.99
#: between ops with CV 5% (r = c^2 / (c^2 + 0.05^2 (1 + c^2))).
MICROBATCH_CV = {"r50": 0.05, "r90": 0.15, "r99": 0.5}


def _register_factor_scenarios() -> None:
    for tag, cv in MICROBATCH_CV.items():
        for p, m in ((4, 8), (8, 32)):

            def build(p: int = p, m: int = m, cv: float = cv) -> StepGraph:
                return compact_pipeline(p, m, microbatch_factor=pa.lognormal(1.0, cv))

            scenario(
                f"pipe_mbf_{tag}_{p}x{m}",
                f"1F1B {p}x{m}, per-microbatch work factor lognormal(1, {cv}) on every op "
                f"of a microbatch (within-microbatch correlation ~0.{tag[1:]})",
            )(build)


_register_factor_scenarios()


@scenario("pipe_stage_speed_8x32", "1F1B 8x32, persistent per-stage speed lognormal(1, 0.05)")
def pipe_stage_speed_8x32() -> StepGraph:
    return compact_pipeline(8, 32, stage_factor=pa.lognormal(1.0, 0.05))


@scenario(
    "pipe_straggler_8x32",
    "1F1B 8x32, a microbatch is 3x slow (all its ops) with probability 1% (rare heavy events)",
)
def pipe_straggler_8x32() -> StepGraph:
    heavy = pa.mixture([pa.uniform(1.0, 1.0 + 1e-6), pa.uniform(3.0, 3.0 + 1e-6)], [0.99, 0.01])
    return compact_pipeline(8, 32, microbatch_factor=heavy)


@scenario(
    "pipe_regime_8x32_x512",
    "512 replicas of 1F1B 8x32; a per-step regime slows every pipeline op 1.1x (p = 0.05), "
    "standing for congested per-layer communication folded into the ops",
)
def pipe_regime_8x32_x512() -> StepGraph:
    g = StepGraph("pipe_regime_8x32_x512")
    g.add_replica_group("replicas", compact_pipeline(8, 32), 512)
    g.add_regime(
        "net",
        {"calm": 0.95, "congested": 0.05},
        {"calm": 1.0, "congested": 1.1},
        applies_to="pipeline",
    )
    return g


@scenario("pipe_mbf_r90_8x32_x512", "512 replicas of 1F1B 8x32 with per-microbatch factors r 0.9")
def pipe_mbf_r90_8x32_x512() -> StepGraph:
    g = StepGraph("pipe_mbf_r90_8x32_x512")
    body = compact_pipeline(8, 32, microbatch_factor=pa.lognormal(1.0, MICROBATCH_CV["r90"]))
    g.add_replica_group("replicas", body, 512)
    return g


for _p, _m, _sched, _v in (
    (32, 64, "1f1b", 1),
    (16, 64, "interleaved", 2),
    (32, 64, "interleaved", 2),
):

    def _build(p: int = _p, m: int = _m, sched: str = _sched, v: int = _v) -> StepGraph:
        return compact_pipeline(p, m, sched, v)

    scenario(
        f"pipe_{_sched}_{_p}x{_m}",
        f"{'1F1B' if _sched == '1f1b' else 'interleaved 1F1B, vpp 2,'} {_p} stages x {_m} "
        "microbatches (compact node)",
    )(_build)
