"""From a :class:`~.config.JobConfig` to a symmetry-reduced step DAG.

:func:`build_step_graph` turns the per-op means of :func:`~.mean_model.op_means` and the
noise model of :class:`~.config.VariabilityConfig` into a :class:`~prism_analytic.graph.StepGraph`
whose size does not depend on the data-parallel degree: one pipeline replica is built
explicitly, and the ``dp`` replicas are a single replica group (evaluated once, raised to
the n-th power by the engines). The graph has ``2 * pp * microbatches * vpp`` pipeline ops
plus a handful of step-level ops.

Model (each choice is a simplification, chosen to be cheap and explainable):

* **Pipeline ops.** One op per (phase F/B, stage, microbatch, chunk). Its mean is the
  chunk's layers times one layer's exposed time (compute plus exposed tp/cp/ep
  communication, :attr:`~.mean_model.OpMeans.layer_fwd_s`), plus the embedding on the first
  chunk of the first stage, the head (logits, loss) on the last chunk of the last stage, the
  exposed pipeline send of every chunk, and the exposed per-microbatch data-parallel traffic
  (ZeRO-2 / FSDP) split evenly over the stage's chunks. Context- and expert-parallel
  traffic and FSDP gathers are mean-time contributions already inside those means.
* **Temporal noise.** Every compute kernel gets fresh noise with coefficient of variation
  ``variability.temporal.kernel_cv``. Between two synchronising collectives (tp/cp/ep), the
  ``tp * cp`` GPUs that move in lockstep each run the segment of kernels independently, so
  the segment's duration is :func:`~prism_analytic.iid_max` over ``tp * cp`` GPUs of a
  lognormal with the segment's mean and standard deviation. Communication of one layer is
  one shared duration per collective: its exposed part times the tier's noise multiplier
  (:class:`~.config.TierNoise`: mean-one lognormal body times a rare ``tail_factor``). The
  moments are summed over the layers of a chunk and the op is a lognormal with that mean
  and standard deviation (sums of tens to hundreds of kernels: CLT territory).
* **Spatial variability.** Each replica is a copy of the pipeline body with a persistent
  speed factor. By default (``spatial="slowest-gpu"``) the factor is the slowest of the
  replica's ``tp * pp * cp`` GPUs, each ``lognormal(1, variability.spatial.cv)``: a lockstep
  tp group runs at its slowest GPU's pace and the pipeline at its slowest stage's.
  ``spatial="per-copy"`` uses a single ``lognormal(1, cv)`` per replica instead. Degraded
  GPUs (``slow_fraction`` f, ``slow_factor``): each replica independently holds at least
  one with probability ``q = 1 - (1 - f)^g`` (``g`` = GPUs per replica) and then runs
  ``slow_factor`` times slower, so its speed law is the mixture ``(1 - q) S + q
  slow_factor S`` and the number of slow replicas is Binomial(dp, q), as is every other
  part of the speed over allocations. (The rounded expected count ``round(dp q)`` would
  make 0.4 expected slow replicas none: llama3-8b@8 would lose a 7.7% chance of a 1.1x
  replica, p99 -6.1%; @64 would have one for certain, p50 +4.2%.)
* **Step-level ops,** in series after the replica barrier: the unhidden pipeline fill and
  drain hops ``2 (pp - 1)`` sends (the mean model's term), each once-per-step
  data-parallel collective as ``max(0, c * M - hidden)`` with ``c`` its mean time, ``M`` the
  noise multiplier of the tier it crosses, and ``hidden = overlap.dp * window`` the part
  the mean model hides behind the stage's backward (gradients) or forward (parameters);
  then the optimizer (compute noise), the fixed step overhead and the rare additive hiccup
  of :class:`~.config.HiccupConfig`, then ``variability.scale``'s whole-step delays (rack
  throttle, fail-slow GPU), each its own independent op
  (:func:`~.scale_variability.scale_events`; its per-node collective event is an extra,
  independent component of every inter-node collective's noise multiplier).
* **Regimes.** A :class:`~.config.RegimeConfig` with more than one state (or a non-unit
  slowdown) becomes a per-step regime on ``kind="comm"`` ops: the step-level collectives
  and the fill/drain hops. Per-layer communication folded into the pipeline ops is *not*
  rescaled by the regime (a documented under-estimate for comm-bound layouts).

What is left out: correlations between the kernel noise of different ops of one GPU,
per-stage (rather than per-replica) persistent speeds, load imbalance between MoE experts.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from ..distributions import Distribution, gamma, lognormal, mixture, point_mass, uniform
from ..distributions.exposed import ExposedComm, tail_components
from ..engines.resolution import MAX_REL_WIDTH
from ..graph import StepGraph
from ..graph.pipeline import pipeline_step_graph
from ..operations import iid_max
from ..policy import GridPolicy
from .config import JITTER_MEAN_OVER_STD, JobConfig, Layout, TierNoise
from .mean_model import OpMean, OpMeans, op_means
from .scale_variability import ScaleEvents, apply_scale_variability, scale_events
from .step_estimate import step_time

__all__ = [
    "StepModel",
    "build_step_model",
    "build_step_graph",
    "layout_dict",
    "tier_multiplier",
    "SPATIAL_MODELS",
    "ExposedComm",
    "comm_law",
    "grid_policy",
    "MAX_REL_WIDTH",
]

SPATIAL_MODELS = ("slowest-gpu", "per-copy")
#: Name of the top-level replica group (the data-parallel copies of the pipeline body).
REPLICAS = "replicas"
_SYNC_GROUPS = ("tp", "cp", "ep")


# --------------------------------------------------------------------------------------
# Noise helpers
# --------------------------------------------------------------------------------------
def _tier(job: JobConfig, tier: str | None) -> TierNoise:
    net = job.variability.network
    return {
        "intra_node": net.intra_node,
        "inter_node": net.inter_node,
        "cross_dc": net.cross_dc,
    }.get(tier or "intra_node", net.intra_node)


def _multiplier_moments(
    t: TierNoise, events: tuple[tuple[float, float], ...] = ()
) -> tuple[float, float]:
    """(mean, variance) of the tier's noise multiplier ``B * T``.

    ``B`` is lognormal with shape ``sigma`` and mean 1; ``T`` is ``tail_factor`` with
    probability ``tail_prob`` and 1 otherwise, plus the excess of each independent
    ``events`` entry (``variability.scale``; :func:`~..distributions.exposed.tail_components`).
    """
    if events:
        w, m = tail_components(t.tail_prob, t.tail_factor, events)
        mean = float(w @ m)
        return mean, max(0.0, math.exp(t.sigma**2) * float(w @ m**2) - mean * mean)
    q, f = t.tail_prob, t.tail_factor
    mean = 1.0 + q * (f - 1.0)
    second = math.exp(t.sigma**2) * (1.0 - q + q * f * f)
    return mean, max(0.0, second - mean * mean)


def comm_law(
    a: float, tier: TierNoise, hidden: float = 0.0, events: tuple[tuple[float, float], ...] = ()
) -> Distribution:
    """``max(0, a * M - hidden)`` (an :class:`ExposedComm`; a point mass for a quiet tier).

    ``events``: further independent (probability, factor) events on each instance
    (``variability.scale``'s per-node collective event), exact mixture components.
    """
    quiet_events = all(p <= 0 or g <= 1 for p, g in events)
    if tier.sigma <= 0 and (tier.tail_prob <= 0 or tier.tail_factor <= 1) and quiet_events:
        return point_mass(max(a - hidden, 0.0))
    return ExposedComm(a, tier, hidden, events)


def tier_multiplier(t: TierNoise) -> Distribution:
    """The noise multiplier of a communication tier as a distribution (mean one body)."""
    return comm_law(1.0, t)


def _law(mean: float, var: float) -> Distribution:
    """Lognormal by mean and variance; a point mass without spread."""
    if var <= 0 or mean <= 0:
        return point_mass(max(mean, 0.0))
    return lognormal(mean, math.sqrt(var))


class _Moments:
    """Running (mean, variance) of a sum of independent parts."""

    __slots__ = ("mean", "var")

    def __init__(self, mean: float = 0.0, var: float = 0.0) -> None:
        self.mean, self.var = mean, var

    def add(self, mean: float, var: float, times: float = 1.0) -> None:
        self.mean += times * mean
        self.var += times * var


@functools.lru_cache(maxsize=4096)
def _lognormal_max_moments(mean: float, var: float, n: int) -> tuple[float, float]:
    """(mean, variance) of the slowest of ``n`` lognormal segments.

    Kept across jobs: a layout search builds many jobs with the same segments, and each costs
    a quadrature.
    """
    d = iid_max(lognormal(mean, math.sqrt(var)), n)
    return float(d.mean()), float(d.var())


@dataclass
class _Ctx:
    job: JobConfig
    om: OpMeans
    width: int  # GPUs in lockstep between synchronising collectives (tp * cp)
    cv: float  # temporal kernel CV
    scale: ScaleEvents = field(default_factory=ScaleEvents)  # variability.scale's events

    def seg_max(self, mean: float, var: float) -> tuple[float, float]:
        """Moments of the slowest of ``width`` GPUs running one segment of kernels."""
        if self.width <= 1 or var <= 0 or mean <= 0:
            return mean, var
        return _lognormal_max_moments(mean, var, self.width)

    def comm(self, o: OpMean) -> tuple[float, float]:
        """(mean, variance) of one comm op's exposed part, ``count`` executions.

        Noise comes before overlap: an instance with what overlap can hide
        (``o.hidden_s``) is exposed for ``max(0, seconds * M - hidden)``, so a slow
        instance of otherwise hidden communication still delays the step.
        """
        tier, events = _tier(self.job, o.tier), self.scale.tier_events(o.tier)
        if o.hidden_s is not None and o.hidden_s > 0 and o.seconds > 0:
            law = comm_law(o.seconds, tier, o.hidden_s, events)
            return o.count * float(law.mean()), o.count * float(law.var())
        m1, v1 = _multiplier_moments(tier, events)
        e = o.exposed_s
        return o.count * e * m1, o.count * e * e * v1

    def sequence(self, ops: tuple[OpMean, ...]) -> tuple[float, float]:
        """Moments of one pass over ``ops`` (a layer, the embedding or the head)."""
        total, seg = _Moments(), _Moments()

        def close() -> None:
            m, v = self.seg_max(seg.mean, seg.var)
            total.add(m, v)
            seg.mean = seg.var = 0.0

        for o in ops:
            if o.kind == "compute":
                seg.add(o.seconds, (self.cv * o.seconds) ** 2, o.count)
                continue
            if o.group in _SYNC_GROUPS:
                close()
            total.add(*self.comm(o))
        close()
        return total.mean, total.var


# --------------------------------------------------------------------------------------
# Public helpers
# --------------------------------------------------------------------------------------
def grid_policy(graph: StepGraph, base: GridPolicy | None = None) -> GridPolicy:
    """The grid policy ``predict`` evaluates ``graph`` under (kept for callers of the builder).

    Delegates to :func:`~prism_analytic.engines.resolution.resolve_policy`, the one place that
    decides the resolution; ``predict`` applies it itself, so passing this result is optional.
    """
    from ..engines.resolution import resolve_policy

    return resolve_policy(graph, base)


def layout_dict(job: JobConfig) -> dict[str, object]:
    """The parallel layout in a few plain keys (for reports and JSON)."""
    return Layout.of(job).to_dict()


def _pipeline_vpp(job: JobConfig) -> int:
    return Layout.of(job).pipeline_vpp


def _chunk_laws(ctx: _Ctx) -> dict[tuple[str, str], Distribution]:
    """Latency laws of the pipeline ops, keyed by (phase, role).

    Roles: ``"mid"`` (an ordinary chunk), ``"first"`` (chunk 0 of stage 0: embedding),
    ``"last"`` (last chunk of the last stage: head), ``"only"`` (pp = vpp = 1: both).
    """
    job, om = ctx.job, ctx.om
    p, m = job.parallelism, job.model
    v = _pipeline_vpp(job)
    layer = {"F": ctx.sequence(om.layer_fwd), "B": ctx.sequence(om.layer_bwd)}
    emb = {"F": ctx.sequence(om.embedding_fwd), "B": ctx.sequence(om.embedding_bwd)}
    head = {"F": ctx.sequence(om.head_fwd), "B": ctx.sequence(om.head_bwd)}
    send = ctx.comm(om.pp_send) if om.pp_send is not None else (0.0, 0.0)
    dp_mb = {"F": _Moments(), "B": _Moments()}
    for o in om.dp_microbatch:
        dp_mb["F" if o.phase == "fwd" else "B"].add(*ctx.comm(o))
    e = 1 if (p.embedding_in_pipeline_split and p.pp > 1) else 0
    if p.pp == 1 and v == 1:
        per_chunk = {"only": m.layers}
    else:
        per_chunk = {
            "mid": om.layers_per_chunk,
            "first": om.layers_per_chunk - e,
            "last": om.layers_per_chunk - e,
        }
    laws: dict[tuple[str, str], Distribution] = {}
    for phase in ("F", "B"):
        for role, n in per_chunk.items():
            acc = _Moments()
            acc.add(*layer[phase], times=max(n, 0))
            if role in ("first", "only"):
                acc.add(*emb[phase])
            if role in ("last", "only"):
                acc.add(*head[phase])
            acc.add(*send)
            acc.add(dp_mb[phase].mean / v, dp_mb[phase].var / v)
            laws[(phase, role)] = _law(acc.mean, acc.var)
    return laws


def _hiccup_law(prob: float, size: float) -> Distribution:
    """0 with probability ``1 - prob``, ``size`` otherwise.

    The two atoms are narrow uniforms (width ``1e-6 * size``): the analytic engine's grid
    conversion of a mixture of point masses misplaces the atom at 0 (it shifted every
    quantile by ``size`` in tests), while narrow continuous components grid correctly.
    """
    if prob >= 1:
        return point_mass(size)
    eps = 1e-6 * size
    return mixture([uniform(0.0, eps), uniform(size, size + eps)], [1.0 - prob, prob])


def _replica_speed(job: JobConfig, spatial: str) -> Distribution | None:
    """One replica's persistent speed factor, degraded GPUs included (None: always 1).

    The lognormal part as the module notes say; then, with probability
    :func:`slow_replica_probability`, the replica is ``slow_factor`` times slower. Replicas
    draw independently, so the count of slow ones is Binomial(dp, q) exactly, not its rounded
    mean (see the module notes for what the rounding did).
    """
    sp = job.variability.spatial
    p = job.parallelism
    g = p.tp * p.pp * p.cp
    base = None
    if sp.cv > 0:
        base = lognormal(1.0, sp.cv)
        if spatial != "per-copy" and g > 1:
            base = iid_max(base, g)
    q = slow_replica_probability(job)
    if q <= 0:
        return base
    slow = point_mass(sp.slow_factor) if base is None else base.scale(sp.slow_factor)
    if q >= 1:
        return slow
    return mixture([base if base is not None else point_mass(1.0), slow], [1.0 - q, q])


def slow_replica_probability(job: JobConfig) -> float:
    """P(a replica holds at least one degraded GPU): ``1 - (1 - f)^g``, 0 if ``slow_factor`` <= 1.

    ``f`` = ``variability.spatial.slow_fraction``, ``g = tp * pp * cp`` GPUs per replica.
    """
    sp, p = job.variability.spatial, job.parallelism
    if sp.slow_fraction <= 0 or sp.slow_factor <= 1:
        return 0.0
    if sp.slow_fraction >= 1:
        return 1.0
    return -math.expm1(p.tp * p.pp * p.cp * math.log1p(-sp.slow_fraction))


def _dp_step_law(ctx: _Ctx, o: OpMean) -> Distribution | None:
    """``max(0, c * M - hidden)`` for a once-per-step data-parallel collective."""
    job, om = ctx.job, ctx.om
    p = job.parallelism
    per_stage = om.layers_per_chunk * om.chunks_per_stage if p.pp > 1 else job.model.layers
    window = per_stage * (om.layer_bwd_s if o.phase == "bwd" else om.layer_fwd_s)
    c = o.count * o.seconds
    if c <= 0:
        return None
    hidden = min(c, p.overlap.dp * window)
    return comm_law(c, _tier(job, o.tier), hidden, ctx.scale.tier_events(o.tier))


def build_step_graph(
    job: JobConfig, *, spatial: str = "slowest-gpu", means: OpMeans | None = None
) -> StepGraph:
    """The step DAG of ``job``, with cost independent of the data-parallel degree.

    Parameters
    ----------
    job : JobConfig
    spatial : {"slowest-gpu", "per-copy"}
        Persistent speed of a replica: the slowest of its ``tp * pp * cp`` GPUs' factors,
        or one ``lognormal(1, cv)`` per replica (see the module notes).
    means : OpMeans, optional
        Reuse an :func:`~.mean_model.op_means` result.

    Returns
    -------
    StepGraph
        Top level: ``replicas`` (a replica group of ``dp`` pipeline copies), then in series
        ``pp_fill_drain`` (pp > 1), each data-parallel collective, ``optimizer``,
        ``overhead`` and ``hiccup`` (when configured), ``rack_throttle`` and ``fail_slow``
        (when ``variability.scale`` switches them on); a ``network`` regime when configured.

    Examples
    --------
    >>> from prism_analytic.workload.presets import preset_job
    >>> g = build_step_graph(preset_job("llama3-8b", 1024))
    >>> g.nodes[0], g.node("replicas")["n"]
    ('replicas', 1024)
    """
    if spatial not in SPATIAL_MODELS:
        raise ValueError(f"spatial must be one of {SPATIAL_MODELS}, got {spatial!r}")
    if not isinstance(job, JobConfig):
        raise TypeError(f"job must be a JobConfig, got {type(job).__name__}")
    # variability.scale: fleet spread folded into spatial, rare events as their own parts
    events = scale_events(job)
    job = apply_scale_variability(job)
    om = means if means is not None else op_means(job)
    p, var, t = job.parallelism, job.variability, job.training
    ctx = _Ctx(job, om, p.tp * p.cp, var.temporal.kernel_cv, events)
    laws = _chunk_laws(ctx)
    v = _pipeline_vpp(job)

    def latency(phase: str, stage: int, mb: int, chunk: int) -> Distribution:
        if p.pp == 1 and v == 1:
            return laws[(phase, "only")]
        if stage == 0 and chunk == 0:
            return laws[(phase, "first")]
        if stage == p.pp - 1 and chunk == v - 1:
            return laws[(phase, "last")]
        return laws[(phase, "mid")]

    body = pipeline_step_graph(  # compact: one node, cost independent of the microbatches
        p.pp,
        p.microbatches,
        latency,
        schedule=p.schedule,
        vpp=v,
        name=f"{job.name}/pipeline",
        compact=True,
    )
    g = StepGraph(job.name)
    last = g.add_replica_group(REPLICAS, body, p.dp, speed=_replica_speed(job, spatial))
    if om.pp_send is not None:
        hops = 2 * (p.pp - 1) * om.pp_send.seconds
        law = comm_law(
            hops, _tier(job, om.pp_send.tier), events=events.tier_events(om.pp_send.tier)
        )
        last = g.add_op(
            "pp_fill_drain", law, [last], kind="comm", tags=("pp", om.pp_send.tier or "intra_node")
        )
    for o in om.dp_step:
        law = _dp_step_law(ctx, o)
        if law is None:
            continue
        last = g.add_op(
            o.name, law, [last], kind="comm", tags=("dp", o.group or "dp", o.tier or "intra_node")
        )
    opt = om.optimizer.seconds
    last = g.add_op("optimizer", _law(opt, (ctx.cv * opt) ** 2), [last], tags=("optimizer",))
    if t.step_overhead_s > 0:
        last = g.add_op("overhead", point_mass(t.step_overhead_s), [last], tags=("overhead",))
    jit = var.temporal.step_jitter_s
    if var.temporal.step_jitter_rel > 0:  # a fraction of this job's deterministic step
        jit = var.temporal.jitter_seconds(step_time(job, om).step_s)
    if jit > 0:  # per-step host-side jitter in seconds (see TemporalVariability)
        # mean 0: its level is a fixed cost held elsewhere; a mean here would shift every
        # GEMM efficiency fitted beside it by 3x the jitter's fitting error
        law = gamma(JITTER_MEAN_OVER_STD * jit, jit).shift(-JITTER_MEAN_OVER_STD * jit)
        last = g.add_op("step_jitter", law, [last], tags=("overhead",))
    hic = var.hiccups
    if hic.probability > 0 and hic.size_s > 0:
        law = _hiccup_law(hic.probability, hic.size_s)
        last = g.add_op("hiccup", law, [last], tags=("hiccup",))
    for name, prob, size in events.step_delays:  # independent of the hiccup: a convolution
        last = g.add_op(name, _hiccup_law(prob, size), [last], tags=("hiccup",))
    reg = var.regimes
    if len(reg.probabilities) > 1 or any(s != 1.0 for s in reg.slowdowns):
        names = [f"r{i}" for i in range(len(reg.probabilities))]
        g.add_regime(
            "network",
            dict(zip(names, reg.probabilities)),
            dict(zip(names, reg.slowdowns)),
            applies_to="comm",
        )
    return g


@dataclass(frozen=True)
class StepModel:
    """A built job: its step graph with named handles to its parts.

    Attributes
    ----------
    graph : StepGraph
        The whole step (what :func:`~prism_analytic.engines.predict.predict` evaluates).
    body : StepGraph
        One data-parallel replica's pipeline (the replica group's body).
    replicas : str
        Name of the replica-group node in ``graph``.
    tail : tuple of str
        The step-level ops after the replicas, in order (fill/drain, data-parallel
        collectives, optimizer, overhead, hiccup).
    layout : Layout
        The job's parallel layout.
    means : OpMeans
        The mean model's per-op costs the graph was built from.
    """

    graph: StepGraph
    body: StepGraph
    replicas: str
    tail: tuple[str, ...]
    layout: Layout
    means: OpMeans

    @property
    def graph_nodes(self) -> int:
        """Nodes held in memory: the top level plus one replica body."""
        return len(self.graph) + len(self.body)


def build_step_model(
    job: JobConfig, *, spatial: str = "slowest-gpu", means: OpMeans | None = None
) -> StepModel:
    """:func:`build_step_graph` with handles to the parts (see :class:`StepModel`)."""
    om = means if means is not None else op_means(job)
    graph = build_step_graph(job, spatial=spatial, means=om)
    tail = tuple(n for n in graph.topological_order() if n != REPLICAS)
    return StepModel(graph, graph.node(REPLICAS)["body"], REPLICAS, tail, Layout.of(job), om)
