"""The whole-job section that ties the others together."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from .fields import _f, _Section, section_to_dict
from .sections import HardwareConfig, ModelConfig, ParallelConfig, TrainingConfig
from .variability import VariabilityConfig


# --------------------------------------------------------------------------------------
# Job
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobConfig(_Section):
    """A whole training job: what is trained, how it is split, where, and how noisy."""

    _SECTION: ClassVar[str] = "job"
    model: ModelConfig = _f(kind="section", section=ModelConfig)
    parallelism: ParallelConfig = _f(kind="section", section=ParallelConfig)
    hardware: HardwareConfig = _f(kind="section", section=HardwareConfig)
    training: TrainingConfig = _f(
        kind="section", section=TrainingConfig, default_factory=TrainingConfig
    )
    variability: VariabilityConfig = _f(
        kind="section", section=VariabilityConfig, default_factory=VariabilityConfig
    )
    name: str = _f("job", kind="str")

    @property
    def gpus(self) -> int:
        """GPUs of the job (tp * pp * dp * cp)."""
        return self.parallelism.gpus

    def to_dict(self) -> dict[str, Any]:
        """The TOML shape ``{"job": {"name", "gpus"}, "model": {...}, ...}``."""
        out: dict[str, Any] = {"job": {"name": self.name, "gpus": self.gpus}}
        for sec in ("model", "parallelism", "hardware", "training", "variability"):
            out[sec] = section_to_dict(getattr(self, sec))
        return out

    def replace(self, **changes: Any) -> JobConfig:
        """Copy with whole sections replaced (``job.replace(parallelism=...)``)."""
        return dataclasses.replace(self, **changes)

    def summary(self) -> str:
        """One paragraph describing the job."""
        m, p, h = self.model, self.parallelism, self.hardware
        moe = f", MoE {m.moe.experts}x top-{m.moe.top_k}" if m.moe else ""
        return (
            f"{self.name}: {m.name} ({m.layers} layers, hidden {m.hidden}{moe}, seq {m.seq_len})"
            f" on {self.gpus} x {h.name}; tp {p.tp} pp {p.pp} (vpp {p.vpp}, {p.schedule})"
            f" dp {p.dp} cp {p.cp} ep {p.ep}, {p.microbatches} microbatches x"
            f" {p.micro_batch_size} seq, global batch {p.global_batch} seq,"
            f" sharding {p.sharding}, {self.training.precision}"
        )
