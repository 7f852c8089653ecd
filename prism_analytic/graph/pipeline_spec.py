"""A compact pipeline schedule: sizes and one latency law per (phase, stage, chunk).

:class:`PipelineSpec` is what a compact pipeline node of a
:class:`~prism_analytic.graph.StepGraph` holds; its size, and the cost of every engine on it,
does not grow with the microbatch count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np

from ..distributions import Distribution
from ..schedules import check_schedule, pipeline_dag, schedule_levels
from .errors import GraphError

__all__ = ["PipelineSpec", "op_name", "law_key"]


def op_name(phase: str, stage: int, microbatch: int, chunk: int = 0) -> str:
    """The node name used for a pipeline op, e.g. ``"F s0 m3 c0"``."""
    return f"{phase} s{stage} m{microbatch} c{chunk}"


def law_key(phase: str, stage: int, chunk: int = 0) -> str:
    """The key of one (phase, stage, chunk) law in a :class:`PipelineSpec`, e.g. ``"F s0 c0"``."""
    return f"{phase} s{stage} c{chunk}"


@dataclass(frozen=True, eq=False)
class PipelineSpec:
    """A pipeline schedule whose op latencies depend on (phase, stage, chunk) only.

    Parameters
    ----------
    stages, microbatches : int
        Pipeline size ``p x m``.
    laws : Mapping[str, Distribution]
        One law per :func:`law_key` ``(phase, stage, chunk)``: ``2 * p * vpp`` entries.
    schedule : {"gpipe", "1f1b", "interleaved"}
    vpp : int
        Model chunks per stage (interleaved only).
    microbatch_factor : Distribution, optional
        Shared work factor of one microbatch: every op of microbatch ``k`` (all stages, both
        phases) is multiplied by the same draw ``W_k``; independent across microbatches
        (data-dependent work such as variable sequence lengths; a two-point mixture gives rare
        heavy microbatches).
    stage_factor : Distribution, optional
        Persistent speed factor of one stage: every op of stage ``s`` is multiplied by the same
        draw ``S_s`` for the whole step; independent across stages (a slow GPU in a stage).
    """

    stages: int
    microbatches: int
    laws: Mapping[str, Distribution]
    schedule: str = "1f1b"
    vpp: int = 1
    microbatch_factor: Distribution | None = None
    stage_factor: Distribution | None = None

    def __post_init__(self) -> None:
        try:
            check_schedule(self.stages, self.microbatches, self.schedule, self.vpp)
        except ValueError as exc:
            raise GraphError(f"pipeline: {exc}") from None
        need = set(self.keys())
        missing = sorted(need - set(self.laws))
        extra = sorted(set(self.laws) - need)
        if missing or extra:
            raise GraphError(
                f"pipeline laws: missing {missing[:4]}{'...' if len(missing) > 4 else ''}, "
                f"unexpected {extra[:4]}; keys are law_key(phase, stage, chunk)"
            )
        for k, law in self.laws.items():
            if not isinstance(law, Distribution):
                raise GraphError(f"pipeline laws[{k!r}] must be a Distribution, got {law!r}")
        for name in ("microbatch_factor", "stage_factor"):
            f = getattr(self, name)
            if f is None:
                continue
            if not isinstance(f, Distribution):
                raise GraphError(f"pipeline {name} must be a Distribution or None, got {f!r}")
            if f.support[0] < 0 or f.cdf(0.0) > 0:
                raise GraphError(f"pipeline {name} must be a positive factor; support {f.support}")

    def _replace(self, **changes: Any) -> PipelineSpec:
        fields = {
            "stages": self.stages,
            "microbatches": self.microbatches,
            "laws": self.laws,
            "schedule": self.schedule,
            "vpp": self.vpp,
            "microbatch_factor": self.microbatch_factor,
            "stage_factor": self.stage_factor,
        }
        fields.update(changes)
        return PipelineSpec(**fields)

    # ----- views --------------------------------------------------------------------------
    def keys(self) -> list[str]:
        """Every law key, in (phase, stage, chunk) order."""
        return [
            law_key(ph, s, c)
            for ph in ("F", "B")
            for s in range(self.stages)
            for c in range(self.vpp)
        ]

    def law(self, phase: str, stage: int, chunk: int = 0) -> Distribution:
        """The latency law of the ops at (phase, stage, chunk)."""
        return self.laws[law_key(phase, stage, chunk)]

    @property
    def n_ops(self) -> int:
        """Number of ops: ``2 * stages * microbatches * vpp``."""
        return 2 * self.stages * self.microbatches * self.vpp

    @property
    def period(self) -> int:
        """Microbatches per repeating block of the schedule (``stages``: a Megatron group)."""
        return self.stages

    def with_microbatches(self, m: int) -> PipelineSpec:
        """The same pipeline with ``m`` microbatches (sharing the laws' cached moments)."""
        out = self._replace(microbatches=m)
        if "moments" in self.__dict__:
            out.__dict__["moments"] = self.moments
        return out

    @cached_property
    def moments(self) -> dict[str, tuple[float, float]]:
        """(mean, std) of every law, by key (computed once per spec, and once per distinct law).

        Laws of equal parameters (equal ``_key()``) share one evaluation: a schedule's keys
        repeat a few laws (llama3-405b: 256 keys, 6 laws; scipy's moments ~20 us a call).
        """
        by_law: dict = {}
        out = {}
        for k, v in self.laws.items():
            law = v._key()
            if law not in by_law:
                by_law[law] = (float(v.mean()), float(v.std()))
            out[k] = by_law[law]
        return out

    def mapped(self, fn: Callable[[str, Distribution], Distribution]) -> PipelineSpec:
        """A copy whose law at each key is ``fn(key, law)``."""
        return self._replace(laws={k: fn(k, law) for k, law in self.laws.items()})

    def dag(self) -> nx.DiGraph:
        """The explicit op DAG (:func:`~prism_analytic.schedules.pipeline_dag`)."""
        return pipeline_dag(self.stages, self.microbatches, self.schedule, self.vpp)

    @cached_property
    def arrays(self) -> dict[str, Any]:
        """Ops in topological generations, as index arrays (for vectorised sampling).

        Returns a dict with ``keys`` (law key per op), ``law_index`` (per op, into
        ``law_keys``), ``preds`` (``(n, 2)`` predecessor indices, -1 for none) and ``gens``
        (list of index arrays in topological order).
        """
        order, pred_lists, sizes = schedule_levels(
            self.stages, self.microbatches, self.schedule, self.vpp
        )
        keys = self.keys()
        kidx = {k: i for i, k in enumerate(keys)}
        law_index = np.array([kidx[law_key(n[0], n[1], n[3])] for n in order], dtype=np.intp)
        preds = np.full((len(order), 2), -1, dtype=np.intp)
        for i, ps in enumerate(pred_lists):
            preds[i, : len(ps)] = ps
        bounds = np.cumsum([0, *sizes])
        return {
            "law_keys": keys,
            "stage": np.array([n[1] for n in order], dtype=np.intp),
            "microbatch": np.array([n[2] for n in order], dtype=np.intp),
            "law_index": law_index,
            "preds": preds,
            "gens": [np.arange(a, b) for a, b in zip(bounds[:-1], bounds[1:])],
        }

    # ----- serialisation ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (laws as specs)."""
        from ..distributions.serialize import to_spec

        return {
            "stages": self.stages,
            "microbatches": self.microbatches,
            "schedule": self.schedule,
            "vpp": self.vpp,
            "laws": {k: to_spec(v) for k, v in self.laws.items()},
            "microbatch_factor": None
            if self.microbatch_factor is None
            else to_spec(self.microbatch_factor),
            "stage_factor": None if self.stage_factor is None else to_spec(self.stage_factor),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "pipeline") -> PipelineSpec:
        """Rebuild from :meth:`to_dict` output, validating every field."""
        from ..distributions.serialize import from_spec

        if not isinstance(data, Mapping):
            raise GraphError(f"{where} must be an object, got {data!r}")
        missing = [k for k in ("stages", "microbatches", "laws") if k not in data]
        if missing:
            raise GraphError(f"{where}: missing field(s) {missing}")
        laws = data["laws"]
        if not isinstance(laws, Mapping):
            raise GraphError(f"{where}.laws must be an object, got {laws!r}")
        factors = {
            name: from_spec(data[name], f"{where}.{name}") if data.get(name) else None
            for name in ("microbatch_factor", "stage_factor")
        }
        return cls(
            data["stages"],
            data["microbatches"],
            {k: from_spec(v, f"{where}.laws[{k!r}]") for k, v in laws.items()},
            data.get("schedule", "1f1b"),
            data.get("vpp", 1),
            **factors,
        )
