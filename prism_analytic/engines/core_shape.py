"""``core_shape="auto"``: which makespan shape a reconvergent core gets, decided by measurement.

A reconvergent core (a pipeline lattice, overlapped streams) is approximated either by the
Gaussian Clark-Mehler core (``"normal"``) or by the skew-aware core of :mod:`.skew_core`
(``"skew"``: Clark-Mehler on full differences, a third cumulant, a Pearson III law). Neither
is better everywhere (``validation/results/core_shape_choice.md``), so ``"auto"`` classifies
each core by what the engine can see of it and applies :data:`AUTO_RULE`:

* **structure**: a compact pipeline node with a 1F1B or GPipe schedule (``pipeline-1f1b``), a
  compact interleaved pipeline (``pipeline-interleaved``), or any other irreducible core
  evaluated op by op (``explicit``: overlapped compute/communication streams, op-by-op
  pipelines);
* **op laws**: ``symmetric`` when every op law of the core has |skewness| <= :data:`SYMMETRIC_SKEW`
  (normal ops; a lattice of a normal measures ~1e-4), otherwise ``skewed`` (lognormal, gamma ops,
  or the max of replicas nested in an explicit core).

These classes were fixed before the measurement. The rule gives a class ``"skew"`` only where
the skew core's KS distance to Monte Carlo was <= the Gaussian core's on *every* tested variant
of the class (sizes 4x8 to 16x64, CV 5% and 20%, imbalanced last stage, inside 512 replicas;
``validation/core_shape_choice.py``, 1e5 samples, seed 20261130), and ``"normal"`` otherwise.
Only ``pipeline-1f1b, symmetric ops`` qualified; every other class keeps the Gaussian core.
It is an estimate of which shape is closer, checked only on that grid; the workload presets'
lognormal ops and interleaved schedules keep the Gaussian core.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..distributions import Distribution

__all__ = [
    "AUTO_RULE",
    "SYMMETRIC_SKEW",
    "STRUCTURES",
    "op_skewness",
    "ops_kind",
    "pipeline_class",
    "explicit_class",
    "auto_shape",
]

#: Largest |skewness| of an op law still counted as symmetric.
SYMMETRIC_SKEW = 0.01
STRUCTURES = ("pipeline-1f1b", "pipeline-interleaved", "explicit")

#: Class -> shape picked by ``core_shape="auto"`` (see the module docstring for the rule and
#: ``validation/results/core_shape_choice.md`` for the table it was read from).
AUTO_RULE: dict[str, str] = {
    f"{s}, {o} ops": "normal" for s in STRUCTURES for o in ("symmetric", "skewed")
}
# the one class where skew's KS <= Gaussian's on every variant (13 of 13, 32x64 included: e.g.
# 16x64 CV 5% 0.069 -> 0.013, 4x8 in 512 replicas 0.052 -> 0.021; the three imbalanced ones are
# near ties). Every other class has a variant where skew is worse: 1F1B with lognormal ops (8x32
# CV 5% 0.015 -> 0.026), interleaved (4x8 in 512 replicas 0.020 -> 0.045), explicit cores (FSDP
# overlap in 512 replicas 0.0089 -> 0.0096; op-by-op 1F1B 8x32 lognormal CV 20% 0.106 -> 0.123).
AUTO_RULE["pipeline-1f1b, symmetric ops"] = "skew"


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


def explicit_class(laws: Iterable[Distribution]) -> str:
    """The class of an irreducible core evaluated op by op, from its edges' laws."""
    return f"explicit, {ops_kind(laws)} ops"


def auto_shape(cls: str) -> tuple[str, str]:
    """``(shape, reason)`` that ``core_shape="auto"`` uses for a core of class ``cls``."""
    if cls not in AUTO_RULE:
        raise ValueError(f"core class must be one of {sorted(AUTO_RULE)}, got {cls!r}")
    shape = AUTO_RULE[cls]
    verdict = (
        "skew core's KS <= Gaussian's on every tested variant"
        if shape == "skew"
        else "skew core not better on every tested variant"
    )
    return shape, f"auto: {cls}: {verdict} (validation/results/core_shape_choice.md)"
