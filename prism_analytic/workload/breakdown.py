"""Per-rank compute and exposed communication of a step (the two panels of PRISM's Fig. 1).

PRISM (arXiv 2510.15596, Fig. 1) shows the distributions of *compute* time and
*communication* time of two production jobs (16k and 64k+ GPUs). This module gives the same
two distributions for a :class:`~.config.JobConfig` under the step model of
:func:`~.builder.build_step_graph`, with these definitions, for one rank (GPU) in one step:

* ``compute`` ``C = S * K``: the rank's own compute kernels and nothing else. ``K`` is the sum
  of every compute kernel its pipeline stage runs in the step (all microbatches: the stage's
  layers forward and backward, including recomputation; the embedding on the first stage, the
  head on the last; the optimizer), each with fresh temporal noise of CV
  ``variability.temporal.kernel_cv`` (moments summed exactly, then a lognormal: sums of
  thousands of kernels); ``S`` is the GPU's own persistent speed factor: ``lognormal(1,
  spatial.cv)`` times ``slow_factor`` with probability ``slow_fraction``. No waiting is in
  ``C``: not for the lockstep tp/cp peers, not for pipeline neighbours, not for the barrier.
* ``comm`` ``E = T - C``: everything else in the step, i.e. exposed communication *and* every
  wait (for the slowest tp peer of a kernel segment, pipeline bubbles, the slowest of the
  ``dp`` replicas at the step barrier, the step-level collectives, hiccups). ``T`` is the step
  time, shared by all ranks of the step.
* ``step`` ``T``: the step time of :func:`~.builder.build_step_graph`'s graph.

Method (:func:`rank_breakdown`): analytic where the model allows, Monte Carlo over (rank,
step) pairs where a joint law is needed.

1. ``compute`` is analytic: a mixture over the pipeline-stage kinds (first, middle, last,
   weights by the number of stages) and the outlier state of lognormals (``S * K`` is a
   product of independent lognormals).
2. The step is split where the builder's graph is a chain: ``T = max(R_own, R_others) +
   tail``, with ``R_own`` the rank's own pipeline replica, ``R_others`` the max over the other
   ``dp - 1`` replicas (a replica group of ``dp - 1`` with the builder's speed law, whose
   degraded-GPU mixture makes each replica slow independently), ``tail`` the step-level ops
   after the barrier (fill/drain, data-parallel collectives, optimizer, overhead, hiccup, with
   the network regime). The laws of
   the replica body, of ``R_others`` and of ``tail`` come from the analytic engine.
3. ``(C, T)`` pairs are then sampled jointly: one rank's ``S`` sets both its compute and its
   replica's speed (``max(S, slowest of the other tp*pp*cp - 1 GPUs)`` under
   ``spatial="slowest-gpu"``; the replica's single factor under ``"per-copy"``), and its
   outlier state makes its replica slow; ``R_own = body * speed * slow``; the body, the
   ``R_others`` and ``tail`` draws are inverse-CDF draws of the analytic laws. So the
   correlation between a rank's compute and the step it waits for (strong at small ``dp``,
   O(1/dp) at large) is kept. What is not kept: the correlation between the temporal noise
   of the rank's own kernels (``K``) and the pipeline body's duration (the builder folds the
   kernels of the tp GPUs into per-op moments, so the rank's kernels are not in the graph);
   ``K``'s CV is a few 1e-4, so this is immaterial for ``E``.

The marginal of the sampled ``T`` agrees with the analytic step law of the full graph up to
the slow-replica rounding (``tests/workload/test_breakdown.py`` checks it). ``stats`` also carry the
independence shortcut ``std(E) ~ sqrt(var T + var C)`` next to the joint estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..distributions import Distribution, lognormal, mixture, point_mass
from ..engines.predict import predict
from ..graph import REPLICA, StepGraph
from ..operations import iid_max
from ..policy import GridPolicy
from .builder import SPATIAL_MODELS, build_step_graph, grid_policy
from .config import JobConfig
from .mean_model import OpMeans, op_means
from .scale_variability import apply_scale_variability

__all__ = [
    "Breakdown",
    "StageCompute",
    "stage_compute",
    "rank_compute_law",
    "rank_breakdown",
    "describe",
]


@dataclass(frozen=True)
class StageCompute:
    """Compute kernels of one kind of pipeline stage, one step, one GPU (no speed factor).

    Attributes
    ----------
    role : str
        ``"first"``, ``"middle"``, ``"last"`` or ``"only"`` (pp = 1).
    weight : float
        Fraction of the job's GPUs on stages of this kind.
    mean_s, std_s : float
        Mean and standard deviation of the sum of the stage's compute kernels.
    kernels : int
        Number of kernel executions summed.
    """

    role: str
    weight: float
    mean_s: float
    std_s: float
    kernels: int


def _compute_moments(ops: Any) -> tuple[float, float, int]:
    """(sum of means, sum of squared means, kernel count) over the compute ops of ``ops``."""
    m = s2 = 0.0
    n = 0
    for o in ops:
        if o.kind == "compute":
            m += o.count * o.seconds
            s2 += o.count * o.seconds**2
            n += o.count
    return m, s2, n


def stage_compute(job: JobConfig, means: OpMeans | None = None) -> list[StageCompute]:
    """The compute-kernel totals of each kind of pipeline stage (see the module notes)."""
    om = means if means is not None else op_means(job)
    p, m = job.parallelism, job.model
    cv = job.variability.temporal.kernel_cv
    lay_m, lay_s2, lay_n = (
        a + b for a, b in zip(_compute_moments(om.layer_fwd), _compute_moments(om.layer_bwd))
    )
    emb = [
        a + b
        for a, b in zip(_compute_moments(om.embedding_fwd), _compute_moments(om.embedding_bwd))
    ]
    head = [a + b for a, b in zip(_compute_moments(om.head_fwd), _compute_moments(om.head_bwd))]
    opt = om.optimizer.seconds
    mb = p.microbatches
    if p.pp == 1:
        kinds = [("only", 1.0, m.layers, True, True)]
    else:
        mid = om.layers_per_chunk * om.chunks_per_stage
        kinds = [
            ("first", 1.0 / p.pp, om.first_stage_layers, True, False),
            ("last", 1.0 / p.pp, om.last_stage_layers, False, True),
        ]
        if p.pp > 2:
            kinds.insert(1, ("middle", (p.pp - 2) / p.pp, mid, False, False))
    out = []
    for role, w, layers, has_emb, has_head in kinds:
        mean = mb * layers * lay_m + opt
        s2 = mb * layers * lay_s2 + opt**2
        n = mb * layers * lay_n + 1
        for flag, part in ((has_emb, emb), (has_head, head)):
            if flag:
                mean += mb * part[0]
                s2 += mb * part[1]
                n += mb * int(part[2])
        out.append(StageCompute(role, w, mean, cv * math.sqrt(s2), int(n)))
    return out


def _lognormal_params(mean: float, std: float) -> tuple[float, float]:
    s2 = math.log1p((std / mean) ** 2)
    return math.log(mean) - 0.5 * s2, s2


def rank_compute_law(job: JobConfig, means: OpMeans | None = None) -> Distribution:
    """Analytic law of one rank's compute time ``C = S * K`` (a mixture of lognormals)."""
    sp = job.variability.spatial
    comps: list[Distribution] = []
    weights: list[float] = []
    s_mu, s_s2 = _lognormal_params(1.0, sp.cv) if sp.cv > 0 else (0.0, 0.0)
    outlier = sp.slow_fraction if sp.slow_factor > 1 else 0.0
    for st in stage_compute(job, means):
        k_mu, k_s2 = (
            _lognormal_params(st.mean_s, st.std_s) if st.std_s > 0 else (math.log(st.mean_s), 0.0)
        )
        for factor, w in ((1.0, 1.0 - outlier), (sp.slow_factor, outlier)):
            if w <= 0:
                continue
            mu, s2 = s_mu + k_mu + math.log(factor), s_s2 + k_s2
            mean = math.exp(mu + 0.5 * s2)
            law = lognormal(mean, mean * math.sqrt(math.expm1(s2))) if s2 > 0 else point_mass(mean)
            comps.append(law)
            weights.append(st.weight * w)
    total = sum(weights)
    weights = [w / total for w in weights]
    return comps[0] if len(comps) == 1 else mixture(comps, weights)


def _summary(x: np.ndarray) -> dict[str, float]:
    p5, p50, p95 = np.quantile(x, [0.05, 0.5, 0.95])
    mean, std = float(np.mean(x)), float(np.std(x, ddof=1))
    return {
        "mean": mean,
        "std": std,
        "cv": std / mean,
        "p5": float(p5),
        "p50": float(p50),
        "p95": float(p95),
        "spread_p95_p5": float((p95 - p5) / p50),
    }


@dataclass(frozen=True, eq=False)
class Breakdown:
    """Compute and exposed communication of one rank in one step (see the module notes).

    Attributes
    ----------
    job_name : str
    gpus, dp : int
    compute : Distribution
        Analytic law of a rank's compute time (seconds).
    step : Distribution
        Analytic law of the step time of the full graph (seconds).
    compute_samples, comm_samples, step_samples : numpy.ndarray
        Joint (rank, step) samples: ``comm_samples = step_samples - compute_samples``.
    stats : mapping
        ``compute``, ``comm``, ``step`` (each ``mean``, ``std``, ``cv``, ``p5``, ``p50``,
        ``p95``, ``spread_p95_p5`` from the samples); ``compute_analytic`` and
        ``step_analytic`` (``mean``, ``std``); ``comm_std_independent`` (``sqrt(var T +
        var C)`` from the analytic laws); ``corr_compute_step`` (sample correlation).
    stages : tuple of StageCompute
    """

    job_name: str
    gpus: int
    dp: int
    compute: Distribution
    step: Distribution
    compute_samples: np.ndarray = field(repr=False)
    comm_samples: np.ndarray = field(repr=False)
    step_samples: np.ndarray = field(repr=False)
    stats: Mapping[str, Any] = field(repr=False)
    stages: tuple[StageCompute, ...] = field(repr=False)

    def summary(self) -> str:
        """Three lines: compute, comm and step statistics in seconds."""
        lines = [f"{self.job_name} ({self.gpus:,} GPUs, dp {self.dp}); per rank and step:"]
        for key in ("compute", "comm", "step"):
            s = self.stats[key]
            lines.append(
                f"  {key:<8} mean {s['mean']:.4g} s  std {s['std']:.4g} s"
                f"  cv {s['cv']:.3%}  p5/p50/p95 {s['p5']:.4g}/{s['p50']:.4g}/"
                f"{s['p95']:.4g} s"
            )
        return "\n".join(lines)


def _split(graph: StepGraph, others: int) -> tuple[StepGraph | None, StepGraph]:
    """(graph of the other replicas' barrier or None, graph of the step-level tail)."""
    order = graph.topological_order()
    rep = graph.node(order[0])
    if rep["type"] != REPLICA or any(graph.node(n)["type"] == REPLICA for n in order[1:]):
        raise ValueError("expected build_step_graph's shape: one replica group, then a chain")
    g_others = None
    if others > 0:
        g_others = StepGraph(f"{graph.name}/others")
        g_others.add_replica_group(
            "replicas", rep["body"], others, slow=rep["slow"], speed=rep["speed"]
        )
    tail = StepGraph(f"{graph.name}/tail")
    last: list[str] = []
    for name in order[1:]:
        d = graph.node(name)
        last = [tail.add_op(name, d["latency"], last, kind=d["kind"], tags=d["tags"])]
    for r in graph.regimes:
        tail.add_regime(r.name, r.probs, r.factors, applies_to=r.applies_to)
    body = rep["body"]
    for r in graph.regimes:
        for _, d in body.graph.nodes(data=True):
            if d.get("kind") == r.applies_to or r.applies_to in d.get("tags", ()):
                raise ValueError(
                    f"regime {r.name!r} reaches the replica body; the split "
                    "T = max(replicas) + tail needs it on the tail only"
                )
    return g_others, tail


def _draw(dist: Distribution, size: int, rng: np.random.Generator) -> np.ndarray:
    u = np.clip(rng.random(size), 1e-12, 1 - 1e-12)
    return np.asarray(dist.quantile(u), dtype=float)


def rank_breakdown(
    job: JobConfig,
    *,
    samples: int = 20_000,
    seed: int = 0,
    spatial: str = "slowest-gpu",
    policy: GridPolicy | None = None,
) -> Breakdown:
    """Compute / exposed-communication breakdown of one rank's step (module notes).

    Parameters
    ----------
    job : JobConfig
    samples : int
        Joint (rank, step) samples.
    seed : int
    spatial : {"slowest-gpu", "per-copy"}
        As in :func:`~.builder.build_step_graph`.
    policy : GridPolicy, optional
        Analytic grid (default: :func:`~.builder.grid_policy` of the step graph).

    Returns
    -------
    Breakdown
    """
    if spatial not in SPATIAL_MODELS:
        raise ValueError(f"spatial must be one of {SPATIAL_MODELS}, got {spatial!r}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 2:
        raise ValueError(f"samples must be an integer >= 2, got {samples!r}")
    job = apply_scale_variability(job)  # variability.scale folded in (no-op when off)
    om = op_means(job)
    graph = build_step_graph(job, spatial=spatial, means=om)
    policy = policy or grid_policy(graph)
    p, sp = job.parallelism, job.variability.spatial
    dp, g = p.dp, p.tp * p.pp * p.cp
    f = sp.slow_fraction if sp.slow_factor > 1 else 0.0
    # the other replicas' speed law carries their degraded GPUs (each replica independently)
    g_others, g_tail = _split(graph, dp - 1)
    step_law = predict(graph, "analytic", policy=policy).distribution
    rep = graph.node(graph.topological_order()[0])
    body_law = predict(rep["body"], "analytic", policy=policy).distribution
    others_law = (
        predict(g_others, "analytic", policy=policy).distribution if g_others is not None else None
    )
    tail_law = predict(g_tail, "analytic", policy=policy).distribution

    rng = np.random.default_rng(seed)
    stages = stage_compute(job, om)
    which = rng.choice(len(stages), size=samples, p=[s.weight for s in stages])
    k = np.empty(samples)
    for i, st in enumerate(stages):
        mask = which == i
        if st.std_s > 0:
            mu, s2 = _lognormal_params(st.mean_s, st.std_s)
            k[mask] = np.exp(mu + math.sqrt(s2) * rng.standard_normal(int(mask.sum())))
        else:
            k[mask] = st.mean_s
    if sp.cv > 0:
        base = lognormal(1.0, sp.cv)
        s_body = _draw(base, samples, rng)
    else:
        base, s_body = None, np.ones(samples)
    outlier = rng.random(samples) < f
    compute = s_body * np.where(outlier, sp.slow_factor, 1.0) * k

    if base is None:
        speed = np.ones(samples)
    elif spatial == "per-copy" or g == 1:
        speed = s_body
    else:
        speed = np.maximum(s_body, _draw(iid_max(base, g - 1), samples, rng))
    own_slow = outlier
    if f > 0 and g > 1:
        own_slow = outlier | (rng.random(samples) < -math.expm1((g - 1) * math.log1p(-f)))
    r_own = _draw(body_law, samples, rng) * speed * np.where(own_slow, sp.slow_factor, 1.0)
    barrier = r_own if others_law is None else np.maximum(r_own, _draw(others_law, samples, rng))
    step = barrier + _draw(tail_law, samples, rng)
    comm = step - compute

    comp_law = rank_compute_law(job, om)
    stats: dict[str, Any] = {
        "compute": _summary(compute),
        "comm": _summary(comm),
        "step": _summary(step),
        "compute_analytic": {"mean": comp_law.mean(), "std": comp_law.std()},
        "step_analytic": {"mean": step_law.mean(), "std": step_law.std()},
        "comm_std_independent": math.sqrt(step_law.var() + comp_law.var()),
        "corr_compute_step": float(np.corrcoef(compute, step)[0, 1]),
    }
    return Breakdown(
        job.name, job.gpus, dp, comp_law, step_law, compute, comm, step, stats, tuple(stages)
    )


def describe(b: Breakdown) -> dict[str, Any]:
    """JSON-friendly summary of a :class:`Breakdown` (no samples)."""
    return {
        "job": b.job_name,
        "gpus": b.gpus,
        "dp": b.dp,
        **b.stats,
        "stages": [vars(s) for s in b.stages],
    }
