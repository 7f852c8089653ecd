"""``core_shape="auto"``: which makespan shape a reconvergent core gets, decided by measurement.

A reconvergent core (a pipeline lattice, overlapped streams) is approximated by one of four
shapes: the Gaussian Clark-Mehler core (``"normal"``), the skew-aware core of :mod:`.skew_core`
(``"skew"``), its fourth-cumulant correction of :mod:`.kurtosis_core` (``"kurtosis"``) or the
third-cumulant closure of :mod:`.cumulant_core` (``"cumulant"``). None is closest to Monte Carlo
everywhere, so ``"auto"`` classifies each core by what the engine can see of it and looks the
class up in :data:`AUTO_RULE`:

* **structure**: a pipeline with a 1F1B or GPipe schedule (``pipeline-1f1b``), an interleaved
  pipeline (``pipeline-interleaved``), or any other irreducible core (``explicit``: overlapped
  compute/communication streams, hand-built lattices). A pipeline is a pipeline however it was
  built: a compact node says its schedule, and an op-by-op core is recognised by
  :func:`lattice_schedule` (its series-parallel core is, edge for edge, the core of
  :func:`~prism_analytic.schedules.pipeline_dag` for the sizes its op names give), so the
  compact and op-by-op forms of one pipeline get the same class;
* **op laws**: ``symmetric`` when every op law of the core has |skewness| <= :data:`SYMMETRIC_SKEW`
  (normal ops; a lattice of a normal measures ~1e-4), otherwise ``skewed`` (lognormal, gamma ops,
  or the max of replicas nested in an explicit core);
* **op-CV band**: the core's largest op CV (:func:`op_cv`) at most :data:`CV_SPLIT` or above.

A case leaves the Gaussian core only where, on Monte Carlo readings of 4x8 to 32x64 pipelines
and FSDP-like overlap cores (1e5-1e6 samples a case), the other shape's worst-case KS distance
was lower beyond Monte Carlo noise and the numerical brackets, it was resolvably worse on no
variant, and every workload preset kept its flat-time target (<= 1 s, slowest / fastest scale
<= 2x). The readings, their criteria (written before each reading) and every row are in
``validation/results/core_shape_choice.md``; the reasons below name the reading that decided.
It is an estimate of which shape is closer, checked only on that grid.
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
    "CLASSES",
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
]

#: Largest |skewness| of an op law still counted as symmetric.
SYMMETRIC_SKEW = 0.01
STRUCTURES = ("pipeline-1f1b", "pipeline-interleaved", "explicit")
#: A core's op-CV band: its largest op CV <= :data:`CV_SPLIT` or above (the geometric midpoint
#: of the CVs 5% and 20% between which the cumulant core went from winning to losing).
CV_SPLIT = 0.10
CV_BANDS = ("CV <= 10%", "CV > 10%")
LOW, HIGH = CV_BANDS

_CLARK = "no other shape better on every tested variant (readings A-D)"
_SKEW = "skew core's KS <= the Gaussian core's, or a numerical tie, on every variant (readings A-B)"
_WON = "worst-case KS lowest beyond Monte Carlo noise, resolvably worse on no variant"

#: ``(class, op-CV band) -> (shape, why)``: the shape ``core_shape="auto"`` gives a core.
AUTO_RULE: dict[tuple[str, str], tuple[str, str]] = {
    ("pipeline-1f1b, symmetric ops", LOW): ("skew", _SKEW),
    ("pipeline-1f1b, symmetric ops", HIGH): ("kurtosis", f"{_WON} (reading D)"),
    ("pipeline-1f1b, skewed ops", LOW): ("normal", _CLARK),
    ("pipeline-1f1b, skewed ops", HIGH): (
        "cumulant",
        "worst-case KS 0.065 against the Gaussian core's 0.523 (reading D); resolvably worse on"
        " one variant with the ops' third cumulants in every max (re-read): kept by decision",
    ),
    ("pipeline-interleaved, symmetric ops", LOW): (
        "kurtosis",
        f"{_WON}, within the flat-time guard (reading C)",
    ),
    ("pipeline-interleaved, symmetric ops", HIGH): (
        "kurtosis",
        f"{_WON}, within the flat-time guard (reading C)",
    ),
    ("pipeline-interleaved, skewed ops", LOW): (
        "normal",
        "the cumulant core's gain (reading D) failed the flat-time guard on llama3-405b",
    ),
    ("pipeline-interleaved, skewed ops", HIGH): ("cumulant", f"{_WON} (reading D)"),
    ("explicit, symmetric ops", LOW): ("normal", _CLARK),
    ("explicit, symmetric ops", HIGH): ("normal", _CLARK),
    ("explicit, skewed ops", LOW): (
        "skew",
        f"{_SKEW}; kurtosis's lead not resolved at 1e6 samples (reading F)",
    ),
    ("explicit, skewed ops", HIGH): (
        "kurtosis",
        f"{_WON} (reading F); the skew core equals it with the ops' third cumulants (re-read)",
    ),
}
CLASSES = tuple(dict.fromkeys(cls for cls, _ in AUTO_RULE))


def op_skewness(law: Distribution) -> float:
    """Skewness ``kappa3 / std^3`` of an op law (0 for a point mass; inf if undefined)."""
    from .skew_core import third_cumulant

    sd = float(law.std())
    if not sd**3 > 0:  # sd**3 underflows for a near-point law (kernel_cv = 0)
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
    lattice = None if core is None else lattice_schedule(core)
    if lattice is None:
        structure = "explicit"
    else:
        structure = "pipeline-interleaved" if lattice[0] == "interleaved" else "pipeline-1f1b"
    return f"{structure}, {ops_kind(laws)} ops"


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

    "Largest", as :func:`ops_kind` calls a core skewed when any op is.
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
    """The op-CV band (:data:`CV_BANDS`) of a core whose largest op CV is ``cv``."""
    if not cv >= 0:
        raise ValueError(f"op CV must be a number >= 0, got {cv!r}")
    # an op built at exactly 10% stays in the low band despite its moments' round-off
    return CV_BANDS[0] if cv <= CV_SPLIT * (1 + 1e-9) else CV_BANDS[1]


def auto_shape(cls: str, cv: float = 0.0) -> tuple[str, str]:
    """``(shape, reason)`` that ``core_shape="auto"`` gives a core: :data:`AUTO_RULE`'s entry.

    Parameters
    ----------
    cls : str
        The core's class (:func:`pipeline_class`, :func:`explicit_class`), one of
        :data:`CLASSES`.
    cv : float, default 0.0
        The core's largest op CV (:func:`op_cv`), read as its band (:func:`cv_band`).
    """
    if cls not in CLASSES:
        raise ValueError(f"core class must be one of {sorted(CLASSES)}, got {cls!r}")
    band = cv_band(cv)
    shape, why = AUTO_RULE[(cls, band)]
    return shape, f"auto: {cls}, {band}: {shape}: {why} (validation/results/core_shape_choice.md)"
