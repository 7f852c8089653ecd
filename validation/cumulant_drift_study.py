"""Why the cumulant core over-states the std of deep, narrow interleaved pipelines (issue #8).

Reading D (``validation/results/core_shape_choice.md``) kept ``core_shape="cumulant"`` from
``pipeline-interleaved, symmetric ops`` (op CV <= 10%) because of one held-out case:
interleaved 16 x 16 x vpp 8 with normal ops at CV 2% (spread +8.3%). This script measures,
against Monte Carlo draws of *every node* of the schedule DAG, where that error is made:

* the sink's mean, std and skewness, by the product's closure and by two variants obtained by
  substituting the closure's rectifier moments (no copy of the engine): ``g2-all`` (the
  kurtosis core's excess kurtosis of ``D`` in every rectifier term, not only the mean) and
  ``clark`` (the third cumulants the maxima create set to 0: with normal ops this is Clark's
  max with full covariances, plus the same mean correction);
* per max (inputs within 2 sd of a tie in Monte Carlo), the closure's own inputs against Monte
  Carlo's: ``theta^2 = Var(A - B)``, ``Cov(D, B)``, the joint third cumulant
  ``kappa(B, D, D)`` that the closure's Stein term ``kappa(e_B, D, D) E[f''] / 2`` of
  ``Cov(Y, B)`` uses, ``kappa3(D)``, and the variance increment ``Var Y - Var B`` (all scaled by
  the Monte Carlo ``theta``), by sixths of the maxima in topological order;
* per node, the closure's sd error by generation (the drift).

Ops are as in ``core_shape_choice.pipe`` (F 1, B 2 per stage, divided by vpp; normal laws),
or, with ``--preset NAME --gpus N``, the first compact pipeline of that workload's step graph
with its own op laws (drawn from each law; the closure gets their third cumulants). An
estimate of where the error is made, not a fix; Monte Carlo noise: the sink sd's relative
standard error is about ``1 / sqrt(2 n)`` (0.7% at 10,000 draws). Usage::

    nice python validation/cumulant_drift_study.py [--stages 16] [--microbatches 16]
        [--vpp 8] [--cv 0.02] [--samples 10000] [--seed 17] [--preset NAME --gpus N]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from scipy import stats

from prism_analytic.engines import cumulant_core as cc
from prism_analytic.engines import pipeline_core as pc
from prism_analytic.engines.blas_threads import single_blas_thread
from prism_analytic.engines.skew_core import third_cumulant
from prism_analytic.graph import StepGraph
from prism_analytic.graph.step_graph import PIPELINE, REPLICA

__all__ = ["schedule", "sample", "run", "variant", "main"]


def schedule(p: int, m: int, vpp: int, cv: float) -> tuple[dict, np.ndarray, np.ndarray]:
    """The schedule DAG (``pipeline_core._structure``), op means and sds (normal ops)."""
    sched = "interleaved" if vpp > 1 else "1f1b"
    st = pc._structure(p, m, sched, vpp)
    mean = np.array([(1.0 if k.startswith("F") else 2.0) / vpp for k in st["keys"]])
    return st, mean, cv * mean


def preset_pipeline(preset: str, gpus: int) -> tuple[dict, np.ndarray, np.ndarray, Any]:
    """The first compact pipeline of a workload preset's step graph: structure, moments, spec."""
    from prism_analytic.workload.builder import build_step_graph
    from prism_analytic.workload.presets import preset_job

    def find(g: StepGraph) -> Any:
        for _, d in g.graph.nodes(data=True):
            if d["type"] == PIPELINE:
                return d["spec"]
            if d["type"] == REPLICA and (spec := find(d["body"])) is not None:
                return spec
        return None

    spec = find(build_step_graph(preset_job(preset, gpus)))
    if spec is None:
        raise SystemExit(f"{preset} at {gpus} GPUs has no compact pipeline")
    if spec.microbatch_factor is not None or spec.stage_factor is not None:
        raise SystemExit(f"{preset} at {gpus} GPUs: its pipeline has shared factors")
    st = pc._structure(spec.stages, spec.microbatches, spec.schedule, spec.vpp)
    mean, sd, _ = pc._factor_model(spec, st)
    return st, mean, sd, spec


def sample(
    st: dict, mean: np.ndarray, sd: np.ndarray, n: int, seed: int, spec: Any = None
) -> np.ndarray:
    """Finish times of every node, ``(nodes, n)``, by max-plus propagation of the op draws.

    Normal draws of ``mean``, ``sd``, or with ``spec`` draws of each op's own law.
    """
    rng = np.random.default_rng(seed)
    preds = st["preds"]
    t = np.empty((len(preds), n))
    for gen in st["gens"]:
        for i in gen:
            ps = preds[i]
            if not ps:
                base = 0.0
            elif len(ps) == 1:
                base = t[ps[0]]
            else:
                base = np.maximum(t[ps[0]], t[ps[1]])
            if spec is None:
                t[i] = base + mean[i] + sd[i] * rng.standard_normal(n)
            else:
                t[i] = base + np.asarray(spec.laws[st["keys"][i]].quantile(rng.random(n)))
    return t


class _Recorder(cc._CumulantEngine):
    """The product's closure, recording each two-input max's inputs and output."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.records: list[tuple] = []
        self._node, self._swap = -1, False

    def _max_of(self, slots: list[int], node: int) -> int:
        self._node = node
        self._swap = len(slots) == 2 and bool(self.mu[slots[1]] < self.mu[slots[0]])
        return super()._max_of(slots, node)

    def _max(self, a: int, b: int, g2: float) -> int:
        c, k = self.C, self.K
        th2 = float(c[a, a] + c[b, b] - 2 * c[a, b])
        cdb = float(c[a, b] - c[b, b])
        kbdd = float(k[b, a, a] - 2 * k[b, a, b] + k[b, b, b])
        k3d = float(k[a, a, a] - 3 * k[a, a, b] + 3 * k[a, b, b] - k[b, b, b])
        vb = float(c[b, b])
        y = super()._max(a, b, g2)
        self.records.append((self._node, self._swap, th2, cdb, kbdd, k3d, vb, float(self.C[y, y])))
        return y


def run(
    st: dict, mean: np.ndarray, sd: np.ndarray, k3: np.ndarray | None = None, record: bool = False
) -> tuple:
    """``(mean, var, kappa3, engine, {node: (mean, var)})`` of the closure on the whole schedule.

    ``k3``: the ops' third cumulants (default 0: normal ops).
    """
    gens, preds = st["gens"], st["preds"]
    cls = _Recorder if record else cc._CumulantEngine
    k3 = np.zeros(len(preds)) if k3 is None else k3
    eng = cls.for_dag(0, st["window"], gens, k3)
    nodes: dict[int, tuple[float, float]] = {}
    lmat = np.zeros((len(preds), 0))
    with single_blas_thread():
        state = eng._begin(preds)
        for gen in gens:
            eng._advance(state, [gen], preds, mean, sd, lmat)
            for i in gen:
                s = int(state[1][i])
                if s >= 0:
                    nodes[int(i)] = (float(eng.mu[s]), float(eng.C[s, s]))
        mu, var, _ = eng._end(state, None)
    return mu, var, eng.kappa3(eng.last), eng, nodes


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """Substitute the closure's rectifier moments (module docstring) for the block's duration."""
    orig = cc._rectifier

    def g2_all(dm: float, th: float, g1: float, g2: float, g2_mean: float | None) -> tuple:
        if g2_mean is None:
            return orig(dm, th, g1, g2, None)
        out, _ = orig(dm, th, g1, g2_mean, None)
        return out, out["Ef"]

    def clark(dm: float, th: float, g1: float, g2: float, g2_mean: float | None) -> tuple:
        out, ef = orig(dm, th, g1, g2, g2_mean)
        return {**out, "kfDD": 0.0, "kffD": 0.0, "k3f": 0.0}, ef

    subs = {"product": orig, "g2-all": g2_all, "clark": clark}
    if name not in subs:
        raise ValueError(f"variant must be one of {sorted(subs)}, got {name!r}")
    cc._rectifier = subs[name]
    try:
        yield
    finally:
        cc._rectifier = orig


def _k3(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    return float(np.mean((x - x.mean()) * (y - y.mean()) * (z - z.mean())))


def per_max(st: dict, t: np.ndarray, records: list[tuple]) -> np.ndarray:
    """Rows ``(node, theta2 rel err, Cov(D,B), kappa(B,D,D), kappa3(D), dVar)``, eng then MC."""
    preds = st["preds"]
    rows = []
    for node, swap, th2, cdb, kbdd, k3d, vb, vy in records:
        if node < 0 or len(preds[node]) != 2:
            continue
        q0, q1 = preds[node]
        a, b = (q1, q0) if swap else (q0, q1)
        big, small = t[b], t[a]
        d = small - big
        if abs(d.mean()) > 2 * d.std():
            continue
        v = float(d.var())
        s3 = v**1.5
        dvar = float(np.maximum(small, big).var() - big.var())
        mcdb = float(np.mean((d - d.mean()) * (big - big.mean())))
        rows.append(
            (
                node,
                th2 / v - 1,
                cdb / v,
                mcdb / v,
                kbdd / s3,
                _k3(big, d, d) / s3,
                k3d / s3,
                _k3(d, d, d) / s3,
                (vy - vb) / v,
                dvar / v,
            )
        )
    return np.array(rows)


def cost(spec: Any) -> int:
    """Print the closure's CPU time on ``spec`` whole and on the pair ``(m, 2m)`` forked.

    The pair is what :func:`~prism_analytic.engines.skew_core._pipeline` evaluates for a longer
    pipeline of the same layout whose truncation is one period (``m = p``) apart; the ops it
    propagates are the shared start once plus each schedule's own rest.
    """
    from prism_analytic.engines.canonical import shared_generations
    from prism_analytic.engines.skew_core import _forked

    k3_law = {k: third_cumulant(law) for k, law in spec.laws.items()}
    m = spec.microbatches
    dags, n = [], []
    for mm in (m, 2 * m):
        st = pc._structure(spec.stages, mm, spec.schedule, spec.vpp)
        mean, sd, lmat = pc._factor_model(spec.with_microbatches(mm), st)
        dags.append((st["gens"], st["preds"], mean, sd, lmat))
        n.append(len(mean))
        k3 = np.array([k3_law[k] for k in st["keys"]])
        c0 = time.process_time()  # the product's own propagation (run() records every node)
        eng = cc._CumulantEngine.for_dag(0, st["window"], st["gens"], k3)
        eng.run(st["gens"], st["preds"], mean, sd, lmat)
        print(f"m = {mm}: {n[-1]} ops, closure whole {time.process_time() - c0:.3f} s CPU")
    shared = sum(len(g) for g in dags[0][0][: shared_generations(dags)])
    c0 = time.process_time()
    _forked(cc._CumulantEngine, spec, (m, 2 * m), None, k3_law)
    print(
        f"pair ({m}, {2 * m}) forked: {shared} shared + {n[1] - shared} + {n[0] - shared}"
        f" = {n[0] + n[1] - shared} ops, {time.process_time() - c0:.3f} s CPU"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", type=int, default=16)
    ap.add_argument("--microbatches", type=int, default=16)
    ap.add_argument("--vpp", type=int, default=8)
    ap.add_argument("--cv", type=float, default=0.02)
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--preset", help="a workload preset (its pipeline replaces the schedule)")
    ap.add_argument("--gpus", type=int, help="the preset's GPU count")
    ap.add_argument(
        "--cost",
        action="store_true",
        help="with --preset: CPU time of the closure whole and of the forked pair (m, 2m) only",
    )
    a = ap.parse_args(argv)
    if (a.preset is None) != (a.gpus is None):
        raise SystemExit("--preset and --gpus go together")
    for name, val in (("stages", a.stages), ("microbatches", a.microbatches), ("vpp", a.vpp)):
        if val < 1:
            raise SystemExit(f"--{name} must be >= 1, got {val}")
    if not (0 < a.cv < 1) or a.samples < 100:
        raise SystemExit("--cv must be in (0, 1) and --samples >= 100")
    if a.cost:
        if a.preset is None:
            raise SystemExit("--cost needs --preset and --gpus")
        return cost(*preset_pipeline(a.preset, a.gpus)[3:])
    spec, k3 = None, None
    if a.preset is not None:
        st, mean, sd, spec = preset_pipeline(a.preset, a.gpus)
        k3_law = {k: third_cumulant(law) for k, law in spec.laws.items()}
        k3 = np.array([k3_law[k] for k in st["keys"]])
        title = (
            f"{a.preset} at {a.gpus} GPUs: {spec.schedule} {spec.stages}x{spec.microbatches}"
            f" vpp {spec.vpp}, largest op CV {float(np.max(sd / mean)):.2%}"
        )
    else:
        st, mean, sd = schedule(a.stages, a.microbatches, a.vpp, a.cv)
        title = f"{a.stages}x{a.microbatches} vpp {a.vpp} normal {a.cv:.0%}"
    t = sample(st, mean, sd, a.samples, a.seed, spec)
    has_succ = np.zeros(len(mean), dtype=bool)
    has_succ[[q for ps in st["preds"] for q in ps]] = True
    sink = t[~has_succ].max(axis=0)  # the makespan: the max over the DAG's sinks
    ms, ss = float(sink.mean()), float(sink.std())
    print(
        f"{title}: {len(mean)} ops; Monte Carlo"
        f" {a.samples} draws (seed {a.seed}): sink mean {ms:.6f} sd {ss:.6g}"
        f" skew {stats.skew(sink):.3f} (sd rel. s.e. {1 / math.sqrt(2 * a.samples):.1%})"
    )
    print("\n| closure | mean err (MC sd) | sd err | skew |\n|---|---|---|---|")
    for name in ("product", "g2-all", "clark"):
        with variant(name):
            mu, var, k3s, *_ = run(st, mean, sd, k3)
        print(
            f"| {name} | {(mu - ms) / ss:+.3f} | {math.sqrt(var) / ss - 1:+.2%} "
            f"| {k3s / var**1.5:.3f} |"
        )
    _, _, _, eng, nodes = run(st, mean, sd, k3, record=True)
    r = per_max(st, t, eng.records)
    print(
        f"\nPer max, {len(r)} maxima within 2 sd of a tie, by sixths in topological order "
        "(closure / Monte Carlo; scaled by Monte Carlo's theta):\n"
    )
    print(
        "| nodes | theta^2 err | Cov(D,B)/th^2 | kappa(B,D,D)/th^3 | kappa3(D)/th^3 "
        "| (Var Y - Var B)/th^2 |\n|---|---|---|---|---|---|"
    )
    for part in [*np.array_split(np.arange(len(r)), 6), np.arange(len(r))]:
        c = r[part].mean(axis=0)
        span = "all" if len(part) == len(r) else f"{int(r[part[0], 0])}-{int(r[part[-1], 0])}"
        print(
            f"| {span} | {c[1]:+.3f} | {c[2]:+.3f} / {c[3]:+.3f} | {c[4]:+.3f} / {c[5]:+.3f} "
            f"| {c[6]:+.3f} / {c[7]:+.3f} | {c[8]:+.3f} / {c[9]:+.3f} |"
        )
    mc_sd = t.std(axis=1)
    print("\nNode sd error by generation (closure / Monte Carlo - 1, mean over the generation):")
    gens = st["gens"]
    step = max(1, len(gens) // 12)
    for k in [*range(0, len(gens), step), len(gens) - 1]:
        e = [math.sqrt(nodes[i][1]) / mc_sd[i] - 1 for i in gens[k] if int(i) in nodes]
        print(f"  generation {k:4d} ({len(gens[k]):2d} nodes): {np.mean(e):+.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
