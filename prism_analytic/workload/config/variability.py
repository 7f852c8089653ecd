"""Variability sections and their documented (measured or assumed) defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from .fields import _f, _Section


# --------------------------------------------------------------------------------------
# Variability
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpatialVariability(_Section):
    """Persistent per-GPU speed factor, drawn once per allocation.

    A GPU's time multiplier is ``body * outlier`` where ``body`` has mean 1 and
    coefficient of variation ``cv``, and ``outlier`` is ``slow_factor`` with probability
    ``slow_fraction`` (else 1).

    Defaults fitted on the MLPerf Training step logs of four clusters (Tyche GB200, Theia
    GB300, HiPerGator B200, Carina GB200; 17 jobs of 8 to 2,496 GPUs, 3 runs each;
    ``shared/data/mlperf_training_set``, ``shared/data/mlperf_llama405b``) by
    ``validation/fit_variability.py`` (``validation/results/fit_variability.md``):

    * ``cv`` 0.0081 (95% [0.0065, 0.0106]): maximum likelihood on the spread of the 51 run
      medians, each run's median gated by the slowest of its G GPUs (the variance of the
      largest of G lognormal factors, plus the median's sampling variance). Every other
      run-to-run difference is counted as spatial, so this is an upper estimate; it assumes
      each run is a fresh allocation.
    * ``slow_fraction`` 0: no run of the 51 stands 5% (half of ``slow_factor - 1``) above
      its job's fastest run, where 1% slow GPUs would have put one in about half the runs
      at 72 GPUs; maximum likelihood 0, 95% upper bound 1e-4.

    The TACC Longhorn SGEMM data (392 V100s, Sinha et al., "Not All GPUs Are Created
    Equal", SC'22; ``shared/data/gpu_variability``,
    :func:`prism_analytic.workload.variability.spatial_stats`) show more on that older,
    air-cooled cluster: robust body CV 0.017, 1.0% of GPUs beyond 3 robust sd at 1.10x the
    median (the slowest 1.20x); with those (``cv = 0.017``, ``slow_fraction = 0.01``) every
    job of 512 GPUs or more holds a slow GPU and its median step widens by ~16%, which the
    MLPerf logs do not show. Sinha et al. report outliers up to 1.5x across clusters: use
    ``slow_factor = 1.5`` with a non-zero ``slow_fraction`` for a pessimistic what-if.
    """

    _SECTION: ClassVar[str] = "variability.spatial"
    cv: float = _f(0.0081, kind="float", ge=0.0, lt=1.0)
    slow_fraction: float = _f(0.0, kind="float", ge=0.0, le=1.0)
    slow_factor: float = _f(1.10, kind="float", ge=1.0, le=100.0)


#: Shape of the per-step jitter: a gamma with mean 3 sd, shifted to mean 0 (skewness 2/3;
#: an assumption about its shape, not its level).
JITTER_MEAN_OVER_STD = 3.0


@dataclass(frozen=True)
class TemporalVariability(_Section):
    """Fresh per-execution noise of one kernel on one GPU.

    ``kernel_cv`` default 0.012: the Longhorn SGEMM data's within-GPU run-to-run CV of
    100-kernel means is 0.0012, i.e. about 0.012 per kernel if kernels in a run were
    independent. PRISM (arXiv 2510.15596 v2) reports temporal variation of 0.98-6.46%
    on one GPU; the default sits at the low end.

    ``step_jitter_s``: standard deviation (seconds) of a per-step delay common to the whole
    job and independent of its size (host-side work: data loading, logging, launch and
    synchronisation gaps). Kernel noise averages out over thousands of kernels, so without
    it a step barely varies within one run; measured within-run spreads need it. Its law is
    a gamma with mean ``JITTER_MEAN_OVER_STD`` (3) times the std, shifted by that mean to
    mean 0: it is the step's *fluctuation* only. Its level (the delay's mean) is a fixed
    per-step cost, which one job size cannot tell from the GEMM efficiency; it belongs to
    ``training.step_overhead_s`` (or the fitted efficiency), not to an assumed mean-to-std
    ratio. (Before, the mean of 3 sd was added too, and every error in a fitted jitter moved
    the fitted GEMM efficiency by 3x that error.) Default 0; when > 0 it replaces
    ``step_jitter_rel`` (a jitter given in seconds is the job's own measurement).

    ``step_jitter_rel``: the same jitter with its sd given as a fraction of the job's own
    deterministic (mean-model) step time, so that it scales with the step when carried to
    another size. Measured within-run step sd over the median (1.4826 MAD, steps after
    evaluation pauses left out) stays near 0.5% while the step and its seconds change 20x:
    0.57% at 8 GPUs / 2.2 s and 0.49% at 64 GPUs / 46.7 s (``shared/data/straggler_traces``),
    0.46-0.58% at 512 GPUs / 19.3 s to 2,496 GPUs / 5.8 s (MLPerf Carina GB200; its seconds
    fall 3.3x), so ``prism calibrate`` writes this form. Default 0.0043: fitted by
    ``validation/fit_variability.py`` on the MLPerf logs of four clusters (17 jobs, 8 to
    2,496 GPUs; ``shared/data/mlperf_training_set``, ``shared/data/mlperf_llama405b``): per
    job the within-run robust sd of ``ln(step / run median)`` over the jitter law's robust
    sd per sd (0.970), the median per cluster (Carina 0.0054, HiPerGator 0.0037, Theia
    0.0031, Tyche 0.0049), then over clusters. It does not grow with the GPU count in those
    logs (Carina 512 to 2,496 GPUs; Llama 3.1 8B at 8, 72 and 512 GPUs).
    """

    _SECTION: ClassVar[str] = "variability.temporal"
    kernel_cv: float = _f(0.012, kind="float", ge=0.0, lt=1.0)
    step_jitter_s: float = _f(0.0, kind="float", ge=0.0)
    step_jitter_rel: float = _f(0.0043, kind="float", ge=0.0, lt=1.0)

    def jitter_seconds(self, core_step_s: float) -> float:
        """The jitter's sd in seconds for a job whose deterministic step is ``core_step_s``.

        ``step_jitter_s`` when it is set (> 0), else ``step_jitter_rel`` of the step.
        """
        if self.step_jitter_s > 0:
            return self.step_jitter_s
        return self.step_jitter_rel * core_step_s


@dataclass(frozen=True)
class TierNoise(_Section):
    """Latency noise of one communication tier, as a multiplier with mean near 1.

    ``body``: lognormal with shape ``sigma`` (normalised to mean 1); ``tail``: with
    probability ``tail_prob`` the duration is multiplied by ``tail_factor``.
    """

    _SECTION: ClassVar[str] = "variability.network.<tier>"
    sigma: float = _f(0.05, kind="float", ge=0.0, le=5.0)
    tail_prob: float = _f(0.0, kind="float", ge=0.0, lt=1.0)
    tail_factor: float = _f(1.0, kind="float", ge=1.0, le=1000.0)


def _intra() -> TierNoise:
    # PRISM Fig. 5 (1 node of 8x H200, NVLink): nearly deterministic at large messages,
    # rare stragglers at small ones. Values shaped to that caption; PRISM's data are not
    # public.
    return TierNoise(sigma=0.02, tail_prob=0.001, tail_factor=2.0)


def _inter() -> TierNoise:
    # Measured (shared/data/collective_latency, Leonardo, MPI Allreduce, SOURCE.md), body:
    # messages of training's size (>= 64 MB; data-parallel buckets and pipeline activations
    # are tens to hundreds of MB) at 512-2,048 nodes: median ln(p90/p50) / 1.2816 over 79
    # files = 0.017 (IQR 0.007-0.034; validation/fit_variability.py). It grows with the nodes
    # spanned (0.002 at 4-16 nodes) and falls with the message size (8 MB at 512-2,048
    # nodes: p90/p50 1.23-1.26, sigma 0.17, the default before; it made the step of
    # Llama 3.1 8B at 512 GPUs p90/p50 1.19 where MLPerf measures 1.014). The value at scale
    # is kept for every job: an upper value for small ones. Tail: 128 KB messages carry a
    # rarer, larger tail (p99/p50 1.8-4.1) -> 0.5% of instances at 2x.
    return TierNoise(sigma=0.017, tail_prob=0.005, tail_factor=2.0)


def _cross_dc() -> TierNoise:
    # Wide-area links: no public per-collective measurement at this scale; assumed at
    # least as noisy as the inter-node tier (PRISM: cross-DC variability degrades
    # performance unless bandwidth is high).
    return TierNoise(sigma=0.4, tail_prob=0.02, tail_factor=10.0)


@dataclass(frozen=True)
class NetworkVariability(_Section):
    """Collective-latency noise per tier: intra-node (NVLink), inter-node, cross-DC."""

    _SECTION: ClassVar[str] = "variability.network"
    intra_node: TierNoise = _f(kind="section", section=TierNoise, default_factory=_intra)
    inter_node: TierNoise = _f(kind="section", section=TierNoise, default_factory=_inter)
    cross_dc: TierNoise = _f(kind="section", section=TierNoise, default_factory=_cross_dc)


@dataclass(frozen=True)
class RegimeConfig(_Section):
    """Per-step network regime: a common shock on every communication of one step.

    With probability ``probabilities[r]`` all communication in a step is slowed by
    ``slowdowns[r]`` (PRISM v2: "all communication in a sampled step drawn under one
    shared regime"). No fitted values are public, so the default is a single neutral
    regime; e.g. ``probabilities = [0.95, 0.05]``, ``slowdowns = [1.0, 1.5]`` models 5%
    congested steps.
    """

    _SECTION: ClassVar[str] = "variability.regimes"
    probabilities: tuple[float, ...] = _f((1.0,), kind="floats", ge=0.0, le=1.0)
    slowdowns: tuple[float, ...] = _f((1.0,), kind="floats", gt=0.0, le=1000.0)

    def _check(self) -> None:
        if len(self.probabilities) != len(self.slowdowns):
            raise self._err(
                "slowdowns",
                f"needs one entry per probability ({len(self.probabilities)}),"
                f" got {len(self.slowdowns)}",
            )
        total = math.fsum(self.probabilities)
        if abs(total - 1.0) > 1e-9:
            raise self._err("probabilities", f"must sum to 1, got {total!r}")


@dataclass(frozen=True)
class HiccupConfig(_Section):
    """Rare whole-step stalls (GC, checkpoint I/O, network flaps), additive.

    Defaults measured on the MLPerf Training v5.0 Llama 3.1 405B logs (GB200, 512-2,496
    GPUs, 4,376 steps; ``shared/data/mlperf_llama405b``): 0.39% of steps (17) exceed 1.1x
    their size's median step time, by a median 1.2 s (see
    :func:`prism_analytic.workload.variability.step_outlier_stats`).

    ``size_rel``: the stall's size as a fraction of the job's deterministic (mean-model)
    step instead of seconds (0 = off; set ``size_s = 0`` to use it), so that a size fitted
    at one job size carries to another: the same MLPerf logs put stalls at 0.14-0.16 of the
    step on Llama 3.1 8B (0.06 s) and 0.17-0.42 on 405B (3.7-8 s), seconds 60-140x apart
    (``validation/results/calibration_transfer.md``); ``prism calibrate`` writes this form.
    The step builder turns it into seconds for the job
    (:func:`prism_analytic.workload.scale_variability.apply_scale_variability`).
    """

    _SECTION: ClassVar[str] = "variability.hiccups"
    probability: float = _f(0.0039, kind="float", ge=0.0, le=1.0)
    size_s: float = _f(1.2, kind="float", ge=0.0)
    size_rel: float = _f(0.0, kind="float", ge=0.0, le=1000.0)

    def _check(self) -> None:
        if self.size_s > 0 and self.size_rel > 0:
            raise self._err(
                "size_rel",
                "set size_s (seconds, default 1.2) or size_rel (fraction of the step), not"
                f" both (got {self.size_s!r} and {self.size_rel!r}); set size_s = 0 to use"
                " size_rel",
            )

    def seconds(self, core_step_s: float) -> float:
        """The stall's size in seconds for a job whose deterministic step is ``core_step_s``."""
        return self.size_s if self.size_s > 0 else self.size_rel * core_step_s


@dataclass(frozen=True)
class ScaleVariability(_Section):
    """Mechanisms that make variability grow with the job's size; every one is off by default.

    Applied by the step builder for the job's GPU, node and rack counts
    (:mod:`prism_analytic.workload.scale_variability`): fleet heterogeneity is folded into
    ``spatial.cv``; the rare events (per-node collective event, rack throttle, fail-slow
    GPU) are independent parts of the step (``scale_events``), never merged with the
    configured hiccup or the inter-node tier's own tail.

    * ``population_gpus`` / ``population_cv``: fleet heterogeneity. The fleet is made of
      populations (hardware batches, power domains, halls) of ``population_gpus`` GPUs whose
      mean speeds differ with CV ``population_cv``; a job of G GPUs spans
      ``m = ceil(G / population_gpus)`` of them, which adds ``(1 - 1/m) population_cv^2``
      to the across-GPU variance (the expected spread of m draws). 0 = off.
    * ``node_tail_prob``: per node, per collective instance, probability of a hiccup of the
      inter-node tier's ``tail_factor`` (independent of the tier's own tail; when both
      strike, their excesses add); a collective spanning n nodes is hit with
      probability ``1 - (1 - p)^n`` (slowest of n nodes). 0 = off. ``node_tail_factor``
      (0 = the inter-node tier's ``tail_factor``) is a hit instance's multiplier when the
      group fits under one leaf switch; its excess ``factor - 1`` is multiplied by
      ``node_tail_tier_growth`` per extra fat-tree tier the group needs (switches of
      ``fat_tree_radix`` ports; default 64: NVIDIA Quantum-2 QM9700 NDR InfiniBand, 64
      ports). Off by default, and not derivable from ``collective_latency``
      (``validation/node_tail_defaults.py``, ``validation/results/node_tail_defaults.md``):
      there the delayed iterations come per node-*second* of collective time (their rate
      per node-iteration grows as the iteration's length^0.82, 95% [0.61, 1.03]; a constant
      per-instance probability, what this key means, is exponent 0), 1.43 per node-second
      pooled (sessions 0-2.44), each an *absolute* delay of mean 167 us: per instance of
      length T the hit probability grows with T and the factor ``1 + 167 us / T`` shrinks
      with it, so no constant pair fits instances of different lengths. For Llama 3 405B's
      data-parallel collectives (0.14-0.29 s over 128 nodes at 16k GPUs) that mechanism
      adds at most 0.24% of the step's mean and 0.05% sd (every delay added, none hidden).
    * ``rack_throttle_prob`` / ``rack_throttle``: per rack (``rack_gpus`` GPUs) and step,
      a correlated thermal/power throttle slowing the step by the fraction ``rack_throttle``;
      a job over r racks is hit with probability ``1 - (1 - p)^r``. 0 = off.
    * ``fail_slow_prob`` / ``fail_slow_factor``: fraction of GPU-time a GPU spends in a
      fail-slow episode (minutes to hours) at ``fail_slow_factor``; a job of G GPUs runs a
      step with one with probability ``1 - (1 - p)^G``. 0 = off.

    No default is on: none of these has a public per-unit rate in ``shared/data`` (see
    ``validation/calibration_scale_std.py`` for what the data do and do not support).
    """

    _SECTION: ClassVar[str] = "variability.scale"
    population_gpus: int = _f(16384, kind="int", ge=1)
    population_cv: float = _f(0.0, kind="float", ge=0.0, lt=1.0)
    node_tail_prob: float = _f(0.0, kind="float", ge=0.0, lt=1.0)
    node_tail_factor: float = _f(0.0, kind="float", ge=0.0, le=1000.0)
    node_tail_tier_growth: float = _f(1.0, kind="float", gt=0.0, le=100.0)
    fat_tree_radix: int = _f(64, kind="int", ge=4)
    rack_gpus: int = _f(72, kind="int", ge=1)
    rack_throttle_prob: float = _f(0.0, kind="float", ge=0.0, lt=1.0)
    rack_throttle: float = _f(0.1, kind="float", ge=0.0, le=10.0)
    fail_slow_prob: float = _f(0.0, kind="float", ge=0.0, lt=1.0)
    fail_slow_factor: float = _f(1.5, kind="float", ge=1.0, le=100.0)

    def _check(self) -> None:
        if self.fat_tree_radix % 2:
            raise self._err("fat_tree_radix", f"must be even, got {self.fat_tree_radix}")
        if 0 < self.node_tail_factor < 1:
            raise self._err(
                "node_tail_factor", f"must be 0 (inherit) or >= 1, got {self.node_tail_factor}"
            )

    @property
    def active(self) -> bool:
        """True when any mechanism is switched on."""
        return (
            self.population_cv > 0
            or self.node_tail_prob > 0
            or self.rack_throttle_prob > 0
            or self.fail_slow_prob > 0
        )


@dataclass(frozen=True)
class VariabilityConfig(_Section):
    """All sources of randomness the step-DAG builder draws from."""

    _SECTION: ClassVar[str] = "variability"
    spatial: SpatialVariability = _f(
        kind="section", section=SpatialVariability, default_factory=SpatialVariability
    )
    temporal: TemporalVariability = _f(
        kind="section", section=TemporalVariability, default_factory=TemporalVariability
    )
    network: NetworkVariability = _f(
        kind="section", section=NetworkVariability, default_factory=NetworkVariability
    )
    regimes: RegimeConfig = _f(kind="section", section=RegimeConfig, default_factory=RegimeConfig)
    hiccups: HiccupConfig = _f(kind="section", section=HiccupConfig, default_factory=HiccupConfig)
    scale: ScaleVariability = _f(
        kind="section", section=ScaleVariability, default_factory=ScaleVariability
    )
