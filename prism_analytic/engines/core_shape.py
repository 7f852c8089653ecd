"""``core_shape="auto"``: which makespan shape a reconvergent core gets, decided by measurement.

A reconvergent core (a pipeline lattice, overlapped streams) is approximated either by the
Gaussian Clark-Mehler core (``"normal"``) or by the skew-aware core of :mod:`.skew_core`
(``"skew"``: Clark-Mehler on full differences, a third cumulant, a Pearson III law). Neither
is better everywhere (``validation/results/core_shape_choice.md``), so ``"auto"`` classifies
each core by what the engine can see of it and applies :data:`AUTO_RULE`:

* **structure**: a pipeline with a 1F1B or GPipe schedule (``pipeline-1f1b``), an interleaved
  pipeline (``pipeline-interleaved``), or any other irreducible core (``explicit``: overlapped
  compute/communication streams, hand-built lattices). A pipeline is a pipeline however it was
  built: a compact node says its schedule, and an op-by-op core is recognised by
  :func:`lattice_schedule` (its series-parallel core is, edge for edge, the core of
  :func:`~prism_analytic.schedules.pipeline_dag` for the sizes its op names give), so the
  compact and op-by-op forms of one pipeline get the same class;
* **op laws**: ``symmetric`` when every op law of the core has |skewness| <= :data:`SYMMETRIC_SKEW`
  (normal ops; a lattice of a normal measures ~1e-4), otherwise ``skewed`` (lognormal, gamma ops,
  or the max of replicas nested in an explicit core).

These classes were fixed before the measurement. The rule gives a class ``"skew"`` only where
the skew core's KS distance to Monte Carlo was <= the Gaussian core's, or tied with it (a
difference within the two analytic CDFs' numerical brackets, which the engine cannot resolve),
on *every* tested variant of the class (sizes 4x8 to 32x64, CV 5% and 20%, imbalanced last
stage, inside 512 replicas, compact and op-by-op; ``validation/core_shape_choice.py``, 1e5
samples) on each of two fresh seeds (20261201, 20261202), and ``"normal"`` otherwise.
``pipeline-1f1b, symmetric ops`` (15 of 15 variants on both) and ``explicit, skewed ops`` (4 of
4 on both: FSDP-like overlap with lognormal ops) qualified; every other class keeps the
Gaussian core. It is an estimate of which shape is closer, checked only on that grid; the
workload presets (interleaved pipelines, or 1F1B with lognormal ops) keep the Gaussian core.

**Rule v3** (kurtosis core, :mod:`.kurtosis_core`): a criterion written down before a third
fresh reading (seed 20261203, all three shapes, same grid) lets a class change shape when the
new shape's worst-case KS over the class is lower beyond Monte Carlo noise and the numerical
brackets, it was also the lowest on the earlier reading, it is resolvably worse on no variant,
its worst spread error is not resolvably larger and it meets the targets on as many variants,
*and* ``auto`` keeps every workload preset within the flat-time target (<= 1 s, slowest /
fastest scale <= 2x). The accuracy conditions picked ``kurtosis`` for ``pipeline-interleaved,
symmetric ops`` only (worst-case KS 0.278 -> 0.095; interleaved 16x64 CV 20% 0.278 -> 0.027),
which holds the gpt3-175b and llama3-70b presets. At first their long pipelines took the
kurtosis core 1.5-2.6 s of CPU (Gaussian <= 0.32 s; slowest / fastest 5.8x and 11.9x) and the
cost guard kept ``normal``; once the skew/kurtosis cores shared the common start of their two
truncated schedules and took long pipelines from their steady state (three ~2,048-op sizes
extrapolated only when they agree to 1e-5 sd; :mod:`.skew_core`), every preset stayed <= 1 s
and <= 2x (``validation/bench_scale.py``, numbers in ``validation/results/core_shape_choice.md``
"v3 applied"), so the pre-registered rule now gives that class ``kurtosis``.

**Rule v4** (cumulant core, :mod:`.cumulant_core`): the same five conditions, written down
before a fourth fresh reading (seed 20261204; reading C's grid plus 30 held-out variants: sizes
12x48 and 24x64, op CV 2% and 10%, a slow first stage, vpp 4 and 8, FSDP 12 layers), with four
shapes and each class split by its cores' largest op CV (:func:`op_cv`; bands
:data:`CV_BANDS`, at 10%, fixed before the reading because the cumulant core had won at CV 5%
and lost at 20% on interleaved lattices). Its picks (:data:`AUTO_RULE_BY_CV`) are all in the
band above 10%: 1F1B and interleaved pipelines with skewed ops get ``cumulant``, 1F1B with
normal ops ``kurtosis``. It also picked ``cumulant`` for interleaved pipelines with skewed ops
at CV <= 10% (worst-case KS 0.104 -> 0.028), which holds llama3-405b; with it that preset took
0.42-0.94 s CPU (slowest / fastest 2.2 > 2), so the cost guard kept the Gaussian core there.
Every workload preset's cores are in the low band, so presets are unchanged by v4.

**Rule v5** (a depth split, not adopted): the cumulant core's std drifts with a pipeline's depth
ratio (stages x vpp) / microbatches (``validation/results/cumulant_drift_study.md``), so a
criterion written before a fifth reading (seed 20261206; 53 interleaved cases, 25 held out, depth
ratios 0.25-8) offered it the *shallow* cores (ratio <= :data:`DEPTH_SPLIT` = 2, fixed from that
mechanism) of the two low-band interleaved classes, under v4's five conditions and cost guard.
Both failed condition 3: the cumulant core was resolvably worse than the v4 shape on one
held-out shallow variant each (interleaved 8x64 vpp 2 normal 6%: KS 0.011 -> 0.027; 24x72
lognormal 10%: 0.012 -> 0.024), although it lowered each worst case (0.174 -> 0.041, 0.145 ->
0.030); a dry run of the cost guard refused both too (llama3-70b slowest / fastest 2.2,
llama3-405b 1.16 s). :data:`AUTO_RULE_SHALLOW` is therefore empty: ``auto`` sees the depth
ratio and reads it nowhere yet.

**Reading F** (explicit cores with skewed ops, seed 20261213): reading D left this class on
``skew`` because kurtosis's lead was inside Monte Carlo noise at 1e5 samples. A confirmatory
reading of this class alone, v4's five conditions unchanged, on 11 held-out FSDP-overlap cores
at 1e6 samples, gave ``kurtosis`` to the band above 10% (worst-case KS 0.0168 -> 0.0062;
:data:`AUTO_RULE_READING_F`) and kept ``skew`` at CV <= 10% (0.0021 -> 0.0008, not resolved).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import networkx as nx

from ..distributions import Distribution
from ..graph.pipeline_match import match_pipeline
from ..graph.pipeline_spec import op_name
from ..schedules import pipeline_dag
from .series_parallel import SINK, SOURCE, reduce_graph

__all__ = [
    "AUTO_RULE",
    "AUTO_RULE_BY_CV",
    "AUTO_RULE_READING_F",
    "KEPT_BY_DECISION",
    "CV_SPLIT",
    "CV_BANDS",
    "SYMMETRIC_SKEW",
    "STRUCTURES",
    "op_skewness",
    "ops_kind",
    "pipeline_class",
    "explicit_class",
    "lattice_schedule",
    "auto_shape",
    "op_cv",
    "cv_band",
    "DEPTH_SPLIT",
    "DEPTH_PARTS",
    "AUTO_RULE_SHALLOW",
    "depth_ratio",
    "depth_part",
    "pipeline_depth",
    "explicit_class_depth",
]

#: Largest |skewness| of an op law still counted as symmetric.
SYMMETRIC_SKEW = 0.01
STRUCTURES = ("pipeline-1f1b", "pipeline-interleaved", "explicit")

#: Class -> shape picked by ``core_shape="auto"`` (see the module docstring for the rule and
#: ``validation/results/core_shape_choice.md`` for the table it was read from).
AUTO_RULE: dict[str, str] = {
    f"{s}, {o} ops": "normal" for s in STRUCTURES for o in ("symmetric", "skewed")
}
# the classes where skew's KS <= Gaussian's (or a numerical tie) on every variant, on both fresh
# seeds (validation/results/core_shape_choice.md, 20261202 figures): 1F1B/GPipe with normal ops,
# compact or op-by-op (16x64 CV 5% 0.067 -> 0.013, op-by-op 8x32 0.039 -> 0.019, 4x8 in 512
# replicas 0.036 -> 0.033; the imbalanced last stage is a tie), and explicit cores with skewed
# ops (FSDP overlap, lognormal CV 20% in 512 replicas 0.22 -> 0.029). Every other class has a
# variant where skew is worse: 1F1B with lognormal ops (8x32 CV 5% 0.017 -> 0.027), interleaved
# (4x8 in 512 replicas 0.022 -> 0.050), explicit cores with normal ops (FSDP 8 layers CV 20% on
# seed 20261201: 0.0030 -> 0.0032, beyond the brackets' 1.6e-4 though inside MC's noise).
# v3 (seed 20261203, validation/results/core_shape_choice.md "Reading C"): its only accuracy
# pick, kurtosis for interleaved pipelines with normal ops (worst-case KS 0.278 -> 0.095), first
# failed the cost guard and passed it once the cores took long pipelines from their steady state.
AUTO_RULE["pipeline-1f1b, symmetric ops"] = "skew"
AUTO_RULE["explicit, skewed ops"] = "skew"
AUTO_RULE["pipeline-interleaved, symmetric ops"] = "kurtosis"

#: Rule v4's op-CV split: a core's band is its largest op CV <= :data:`CV_SPLIT` or above (the
#: earlier grid had CV 5% and 20% only and the cumulant core won at 5% and lost at 20% on
#: interleaved lattices; 10% is their geometric midpoint, fixed before reading D).
CV_SPLIT = 0.10
CV_BANDS = ("CV <= 10%", "CV > 10%")

#: (class, band) -> shape where rule v4 (reading D, seed 20261204, four shapes, the v3
#: conditions) changed the v3 shape of :data:`AUTO_RULE`; every other (class, band) keeps it.
#: Worst-case KS over each (class, band)'s variants, v3 shape -> v4 shape
#: (``validation/results/core_shape_choice.md``, "Reading D"): 1F1B lognormal CV > 10%
#: 0.523 -> 0.064 (cumulant), 1F1B normal ops CV > 10% 0.033 -> 0.020 (kurtosis), interleaved
#: lognormal CV > 10% 0.997 -> 0.080 (cumulant). No workload preset is in these bands (their
#: op CVs are 0.2-0.8%). The accuracy conditions also picked cumulant for interleaved lognormal
#: CV <= 10% (0.104 -> 0.028), but that band holds llama3-405b, which it made 0.42-0.94 s CPU
#: (slowest / fastest 2.2 > 2): the cost guard refused it and the band keeps the Gaussian core.
#: Re-read after the op-skew fixes of 2026-12-01 (e1e4b34; same seeds and Monte Carlo samples,
#: ``validation/results/skew_core_k3.md`` "Review fixes"): the 1F1B lognormal CV > 10% pick now
#: fails condition 3 on one variant (32x64 CV 20% last stage x1.25: cumulant KS 0.0454 vs the
#: Gaussian core's 0.0355, beyond the noise bands by 0.0012; on three further seeds beyond them
#: on two), while its worst case stays 0.065 against the Gaussian core's 0.523. Kept by the
#: lead's decision, not by the rule: reverting would make the band's worst case 8x worse.
AUTO_RULE_BY_CV: dict[tuple[str, str], str] = {
    ("pipeline-1f1b, skewed ops", CV_BANDS[1]): "cumulant",
    ("pipeline-1f1b, symmetric ops", CV_BANDS[1]): "kurtosis",
    ("pipeline-interleaved, skewed ops", CV_BANDS[1]): "cumulant",
}


#: (class, band) -> shape where reading F (seed 20261213; ``validation/results/
#: core_shape_choice.md``, "Reading F") changed :data:`AUTO_RULE`: a confirmatory reading of
#: ``explicit, skewed ops`` alone under the v4 conditions, unchanged, on 11 held-out FSDP-overlap
#: cores (6-24 layers, lognormal / gamma / mixed laws, CV 3-25%, one in 512 replicas; 1e6 Monte
#: Carlo steps, 1e5 for the x512 case). At CV > 10% worst-case KS skew 0.0168 [0.0153, 0.0201]
#: -> kurtosis 0.0062 [0.0048, 0.0106], resolvably worse on no variant; at CV <= 10% kurtosis
#: was lower too (0.0021 -> 0.0008) but not resolvably, so that band keeps ``skew``. Reading F
#: measured the skew core as it was then: Clark's mean and variance of each max, the ops'
#: third cumulant dropped there (``validation/results/skew_core_mean_study.md``); it now
#: carries them into each max as the kurtosis core does (``skew_core._FullEngine.
#: _op_skew_max``), so this class's ``skew`` band no longer gets the core that was read. Re-read
#: on the same samples after that change and its review fixes (e1e4b34): the skew and kurtosis
#: cores agree to 3e-8 in KS on all 11 cases, so kurtosis is no longer resolvably better
#: (condition 1); kept, at the same accuracy and cost. No workload preset has a core in this
#: class.
AUTO_RULE_READING_F: dict[tuple[str, str], str] = {
    ("explicit, skewed ops", CV_BANDS[1]): "kurtosis",
}


#: (class, band) picks whose reading no longer holds on a same-sample re-read after the op-skew
#: fixes of 2026-12-01 (``validation/results/core_shape_choice.md``, "Re-read after the op-skew
#: fixes"), kept by the lead's decision; :func:`auto_shape`'s reason says so.
KEPT_BY_DECISION: dict[tuple[str, str], str] = {
    ("pipeline-1f1b, skewed ops", CV_BANDS[1]): (
        "re-read after the 2026-12-01 op-skew fixes it is resolvably worse on one variant (by"
        " 0.0012) but its worst case stays 0.065 against the Gaussian core's 0.523: kept by"
        " decision"
    ),
    ("explicit, skewed ops", CV_BANDS[1]): (
        "re-read after the 2026-12-01 op-skew fixes the skew core equals it (KS within 3e-8):"
        " kept at the same accuracy and cost"
    ),
}


#: Rule v5's depth split: a pipeline core is ``shallow`` when its depth ratio
#: (stages x vpp) / microbatches is <= :data:`DEPTH_SPLIT`, else ``deep``. Fixed before reading
#: E from a mechanism, not from agreement rows: the cumulant core's std drifts with that ratio
#: (sd error +0.2% at 1, +3.5% at 4, +8-10% at 8: ``validation/results/
#: cumulant_drift_study.md``); 2 is the geometric midpoint of 1 and 4.
DEPTH_SPLIT = 2.0
DEPTH_PARTS = ("shallow", "deep")

#: (class, op-CV band) -> the shape of its *shallow* cores where rule v5 (reading E, seed
#: 20261206) adopted the depth split; deep cores, cores without a depth (explicit cores) and
#: every other (class, band) keep :data:`AUTO_RULE_BY_CV` / :data:`AUTO_RULE`. Empty: reading E
#: refused the split in both classes it read (module docstring, "Rule v5").
AUTO_RULE_SHALLOW: dict[tuple[str, str], str] = {}


def op_skewness(law: Distribution) -> float:
    """Skewness ``kappa3 / std^3`` of an op law (0 for a point mass; inf if undefined)."""
    from .skew_core import third_cumulant

    sd = float(law.std())
    if not sd > 0:
        return 0.0
    k3 = third_cumulant(law)
    return k3 / sd**3 if math.isfinite(k3) else math.inf


def ops_kind(laws: Iterable[Distribution]) -> str:
    """``"symmetric"`` when every law's |skewness| <= :data:`SYMMETRIC_SKEW`, else ``"skewed"``."""
    seen: set[Any] = set()
    for law in laws:
        key = id(law)
        if key in seen:
            continue
        seen.add(key)
        if not abs(op_skewness(law)) <= SYMMETRIC_SKEW:
            return "skewed"
    return "symmetric"


def pipeline_class(spec: Any) -> str:
    """The class of a compact pipeline node (a :class:`~prism_analytic.graph.PipelineSpec`)."""
    structure = "pipeline-interleaved" if spec.schedule == "interleaved" else "pipeline-1f1b"
    return f"{structure}, {ops_kind(spec.laws.values())} ops"


def depth_ratio(stages: int, microbatches: int, vpp: int = 1) -> float:
    """A pipeline's depth ratio ``stages * vpp / microbatches`` (rule v5's split reads it).

    Parameters
    ----------
    stages, microbatches, vpp : int
        The pipeline's sizes, each >= 1 (vpp 1 for 1F1B and GPipe). For a pipeline evaluated
        truncated and extrapolated, ``microbatches`` is the target count, not the truncation.
    """
    for name, value in (("stages", stages), ("microbatches", microbatches), ("vpp", vpp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return stages * vpp / microbatches


def depth_part(ratio: float) -> str:
    """``"shallow"`` when a depth ratio is <= :data:`DEPTH_SPLIT` (inclusive), else ``"deep"``."""
    if not ratio > 0 or not math.isfinite(ratio):
        raise ValueError(f"depth ratio must be a finite number > 0, got {ratio!r}")
    # a ratio built at exactly the split (8 stages x vpp 2 / 16 microbatches) stays shallow
    return DEPTH_PARTS[0] if ratio <= DEPTH_SPLIT * (1 + 1e-12) else DEPTH_PARTS[1]


def pipeline_depth(spec: Any) -> float:
    """The depth ratio of a compact pipeline node (a :class:`~prism_analytic.graph.PipelineSpec`).

    The target microbatch count is the spec's, also where the core evaluates it truncated.
    """
    return depth_ratio(spec.stages, spec.microbatches, spec.vpp)


def explicit_class_depth(
    laws: Iterable[Distribution], core: nx.MultiDiGraph | None = None
) -> tuple[str, float | None]:
    """:func:`explicit_class` and, when the core is a pipeline lattice, its depth ratio.

    The lattice is recognised once (:func:`lattice_schedule`); an ``explicit`` core has no
    depth (None).
    """
    lattice = None if core is None else lattice_schedule(core)
    if lattice is None:
        return f"explicit, {ops_kind(laws)} ops", None
    schedule, p, m, vpp = lattice
    structure = "pipeline-interleaved" if schedule == "interleaved" else "pipeline-1f1b"
    return f"{structure}, {ops_kind(laws)} ops", depth_ratio(p, m, vpp)


def explicit_class(laws: Iterable[Distribution], core: nx.MultiDiGraph | None = None) -> str:
    """The class of an irreducible core evaluated op by op, from its edges' laws.

    Parameters
    ----------
    laws : iterable of Distribution
        The laws of the core's edges.
    core : networkx.MultiDiGraph, optional
        The reduced core (:func:`~.series_parallel.reduce_graph`); when it is a pipeline
        lattice (:func:`lattice_schedule`) the class is that pipeline's, as for a compact node.
    """
    return explicit_class_depth(laws, core)[0]


def lattice_schedule(core: nx.MultiDiGraph) -> tuple[str, int, int, int] | None:
    """``(schedule, stages, microbatches, vpp)`` when a reduced core is a pipeline lattice.

    The op names in the core (``"F s0 m3 c0"``, as :func:`~prism_analytic.graph.pipeline.
    pipeline_step_graph` writes them) only propose the sizes; the answer is the structure: the
    core's edges (with multiplicity) must be exactly those of the series-parallel core of
    :func:`~prism_analytic.schedules.pipeline_dag` at those sizes, for a 1F1B, GPipe or
    interleaved schedule (:func:`~prism_analytic.graph.pipeline_match.match_pipeline`). Ops in
    series or in parallel around the lattice (data loading, an optimizer) are absorbed into its
    edges and do not change that core; a changed dependency or any other op inside the core
    does, and the core stays ``explicit``. A lattice whose ops are named otherwise is not
    recognised (it keeps the ``explicit`` class).

    Parameters
    ----------
    core : networkx.MultiDiGraph
        A reduced core, nodes ``("in", op)`` / ``("out", op)`` and the source and sink.

    Returns
    -------
    tuple or None
        The schedule and sizes, or None when the core is not such a lattice.
    """
    names = []
    for node in core.nodes:
        if node in (SOURCE, SINK):
            continue
        if not (isinstance(node, tuple) and len(node) == 2 and isinstance(node[1], str)):
            return None
        names.append(node[1])
    return match_pipeline(names, core.edges(), reference=_lattice_core, plausible=_plausible_core)


def _plausible_core(p: int, m: int, vpp: int, names: int) -> bool:
    """Whether ``names`` in/out nodes can be the core of a ``p x m x vpp`` lattice.

    A lattice's core keeps at least a third of its ``4 p m vpp`` in/out nodes (measured: 0.7-0.98
    from 2x2 to 32x64); a few oddly named nodes must not make us reduce a huge reference.
    """
    return 4 * p * m * vpp <= 6 * names


@lru_cache(maxsize=16)
def _lattice_core(schedule: str, p: int, m: int, vpp: int) -> Counter:
    """The series-parallel core of a schedule's op DAG (edges with multiplicity; no weights).

    The reduction's steps depend on degrees only, never on the weights, so the core of the
    unweighted DAG has the same edges as any weighted op-by-op pipeline's.
    """
    dag = pipeline_dag(p, m, schedule, vpp)
    named = nx.relabel_nodes(dag, {n: op_name(*n) for n in dag})
    return Counter(reduce_graph(named, lambda _: None).graph.edges())


def op_cv(laws: Iterable[Distribution]) -> float:
    """The largest CV (sd / mean) of a core's op laws (0 for none; laws with mean <= 0 skipped).

    Rule v4 reads a core's band from it: "largest", as :func:`ops_kind` calls a core skewed
    when any op is.
    """
    seen: set[int] = set()
    largest = 0.0
    for law in laws:
        if id(law) in seen:
            continue
        seen.add(id(law))
        mean = float(law.mean())
        if mean > 0:
            largest = max(largest, float(law.std()) / mean)
    return largest


def cv_band(cv: float) -> str:
    """Rule v4's op-CV band of a core whose largest op CV is ``cv``."""
    if not cv >= 0:
        raise ValueError(f"op CV must be a number >= 0, got {cv!r}")
    # an op built at exactly 10% stays in the low band despite its moments' round-off
    return CV_BANDS[0] if cv <= CV_SPLIT * (1 + 1e-9) else CV_BANDS[1]


def auto_shape(cls: str, cv: float | None = None, depth: float | None = None) -> tuple[str, str]:
    """``(shape, reason)`` that ``core_shape="auto"`` uses for a core of class ``cls``.

    ``cv``: the core's largest op CV (:func:`op_cv`); rule v4 gives some (class, band) pairs
    another shape (:data:`AUTO_RULE_BY_CV`). Without it, the class's :data:`AUTO_RULE` shape.
    ``depth``: a pipeline core's depth ratio (:func:`depth_ratio`; None for explicit cores);
    rule v5 gives the shallow cores of some (class, band) pairs another shape
    (:data:`AUTO_RULE_SHALLOW`).
    """
    if cls not in AUTO_RULE:
        raise ValueError(f"core class must be one of {sorted(AUTO_RULE)}, got {cls!r}")
    if cv is not None and depth is not None and depth_part(depth) == DEPTH_PARTS[0]:
        shape = AUTO_RULE_SHALLOW.get((cls, cv_band(cv)))
        if shape is not None:
            return shape, (
                f"auto: {cls}, {cv_band(cv)}, depth ratio {depth:.3g} <= {DEPTH_SPLIT:g}: rule"
                f" v5: {shape} core on shallow pipelines (validation/results/core_shape_choice.md)"
            )
    # the op-CV tables, the later reading first: (table, its reading, what else it passed)
    by_cv = (
        (AUTO_RULE_READING_F, "reading F (v4 conditions)", ""),
        (AUTO_RULE_BY_CV, "rule v4", ", within the flat-time guard"),
    )
    for table, reading, guard in by_cv if cv is not None else ():
        shape = table.get((cls, cv_band(cv)))
        if shape is not None:
            kept = KEPT_BY_DECISION.get((cls, cv_band(cv)))
            return shape, (
                f"auto: {cls}, {cv_band(cv)}: {reading}: {shape} core's worst-case KS lowest"
                f" beyond Monte Carlo noise, resolvably worse on no variant{guard}"
                + (f"; {kept}" if kept else "")
                + " (validation/results/core_shape_choice.md)"
            )
    shape = AUTO_RULE[cls]
    verdict = {
        "skew": "skew core's KS <= Gaussian's (or a numerical tie) on every tested variant",
        "kurtosis": "rule v3: kurtosis core's worst-case KS lowest beyond Monte Carlo noise,"
        " resolvably worse on no variant, within the flat-time guard",
    }.get(shape, "no other shape better on every tested variant")
    return shape, f"auto: {cls}: {verdict} (validation/results/core_shape_choice.md)"
