"""The parallel layout: facts derived once from a job, and the rules (Megatron-LM's) it obeys."""

from __future__ import annotations

import numbers
import warnings
from dataclasses import asdict, dataclass

from .fields import ConfigError, LayoutWarning
from .job import JobConfig
from .sections import PRECISION_PEAK

__all__ = ["Layout", "validate_layout"]


@dataclass(frozen=True)
class Layout:
    """The parallel layout of a job and the facts derived from it, computed in one place.

    Build it with :meth:`of`; the workload modules read these fields instead of re-deriving
    them from :class:`JobConfig`.
    """

    gpus: int
    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    vpp: int
    schedule: str
    sharding: str
    microbatches: int
    micro_batch_size: int
    global_batch: int
    hardware: str
    #: Virtual stages per rank the schedule actually runs (vpp only when interleaved).
    pipeline_vpp: int
    #: Pipeline slots: the layers, plus embedding and loss when they take a slot each.
    layer_slots: int
    #: Model chunks the slots are split over (pp * vpp).
    model_chunks: int
    #: Slots per model chunk (at least 1).
    slots_per_chunk: int

    @classmethod
    def of(cls, job: JobConfig) -> Layout:
        """The layout of ``job``."""
        p = job.parallelism
        slots = job.model.layers + (2 if p.embedding_in_pipeline_split else 0)
        chunks = p.pp * p.vpp
        return cls(
            gpus=job.gpus,
            tp=p.tp,
            pp=p.pp,
            dp=p.dp,
            cp=p.cp,
            ep=p.ep,
            vpp=p.vpp,
            schedule=p.schedule,
            sharding=p.sharding,
            microbatches=p.microbatches,
            micro_batch_size=p.micro_batch_size,
            global_batch=p.global_batch,
            hardware=job.hardware.name,
            pipeline_vpp=p.vpp if p.schedule == "interleaved" else 1,
            layer_slots=slots,
            model_chunks=chunks,
            slots_per_chunk=max(1, slots // chunks),
        )

    def to_dict(self, *, derived: bool = False) -> dict[str, object]:
        """Plain keys for reports and JSON (the derived facts only with ``derived=True``)."""
        out = asdict(self)
        if not derived:
            for key in ("pipeline_vpp", "layer_slots", "model_chunks", "slots_per_chunk"):
                del out[key]
        return out


# --------------------------------------------------------------------------------------
# Cross-section rules
# --------------------------------------------------------------------------------------
def validate_layout(job: JobConfig, gpus: int | None = None) -> tuple[str, ...]:
    """Check that the parallel layout fits the model, the hardware and the GPU count.

    Rules (Megatron-LM's, errors unless noted):

    * tp * pp * dp * cp == gpus (when ``gpus`` is given);
    * tp divides model.heads, model.kv_heads (query groups), model.ffn and, for MoE,
      model.moe.expert_ffn (expert tp = tp);
    * the layer slots (layers, plus 2 with ``embedding_in_pipeline_split``) divide evenly
      over pp * vpp model chunks, at least one slot per chunk (with the split, the first
      chunk may hold only the embedding);
    * interleaved: microbatches >= pp and microbatches % pp == 0; gpipe/1f1b with
      microbatches < pp: warning (the bubble dominates);
    * cp > 1: model.seq_len divisible by 2 * cp (causal load-balanced chunks);
    * ep > 1 needs model.moe; ep divides model.moe.experts and dp * cp;
    * datacenters > 1: dp divisible by hardware.datacenters (datacenters split dp);
    * training.precision needs the peak it runs at (fp8/mxfp8: peak_flops.fp8, nvfp4: fp4);
    * training.attention_precision "fp8" needs peak_flops.fp8;
    * warnings: tp > nvlink_domain, tp * cp > nvlink_domain, sequence_parallel with tp 1,
      ZeRO/FSDP sharding with dp * cp == 1.

    Parameters
    ----------
    job : JobConfig
    gpus : int, optional
        Expected GPU count.

    Returns
    -------
    tuple of str
        The warning messages (also emitted as :class:`LayoutWarning`).

    Raises
    ------
    ConfigError
        Naming the field to change.
    """
    m, p, h, t = job.model, job.parallelism, job.hardware, job.training
    if gpus is not None:
        if isinstance(gpus, bool) or not isinstance(gpus, numbers.Integral) or gpus < 1:
            raise ConfigError("job.gpus", f"must be a positive integer, got {gpus!r}")
        if p.gpus != gpus:
            mp = p.tp * p.pp * p.cp
            hint = (
                f"set dp = {gpus // mp}" if gpus % mp == 0 else f"gpus must be a multiple of {mp}"
            )
            raise ConfigError(
                "parallelism.dp",
                f"tp*pp*dp*cp = {p.tp}*{p.pp}*{p.dp}*{p.cp} = {p.gpus} but the job has {gpus}"
                f" GPUs; {hint}",
            )
    for name, value in (("heads", m.heads), ("kv_heads", m.kv_heads), ("ffn", m.ffn)):
        if value % p.tp:
            raise ConfigError(
                "parallelism.tp", f"must divide model.{name} ({value}), got tp {p.tp}"
            )
    if m.moe is not None and m.moe.expert_ffn % p.tp:
        raise ConfigError(
            "parallelism.tp", f"must divide model.moe.expert_ffn ({m.moe.expert_ffn}), got {p.tp}"
        )
    lay = Layout.of(job)
    slots, chunks = lay.layer_slots, lay.model_chunks
    if slots % chunks or slots // chunks < 1:
        extra = " (+2 embedding/loss slots)" if p.embedding_in_pipeline_split else ""
        hint = (
            ""
            if p.embedding_in_pipeline_split or (m.layers + 2) % chunks
            else ("; parallelism.embedding_in_pipeline_split = true would make it divide")
        )
        raise ConfigError(
            "parallelism.pp",
            f"model.layers {m.layers}{extra} must split evenly over pp*vpp = {p.pp}*{p.vpp}"
            f" = {chunks} model chunks{hint}",
        )
    warns: list[str] = []
    if p.schedule == "interleaved":
        if p.microbatches < p.pp or p.microbatches % p.pp:
            raise ConfigError(
                "parallelism.microbatches",
                f"the interleaved schedule needs a positive multiple of pp ({p.pp}),"
                f" got {p.microbatches}",
            )
    elif p.pp > 1 and p.microbatches < p.pp:
        warns.append(
            f"parallelism.microbatches {p.microbatches} < pp {p.pp}: the pipeline bubble"
            " dominates the step"
        )
    if p.cp > 1 and m.seq_len % (2 * p.cp):
        raise ConfigError(
            "parallelism.cp",
            f"model.seq_len ({m.seq_len}) must be divisible by 2*cp = {2 * p.cp}",
        )
    if p.ep > 1:
        if m.moe is None:
            raise ConfigError("parallelism.ep", f"ep = {p.ep} needs an MoE model (model.moe)")
        if m.moe.experts % p.ep:
            raise ConfigError(
                "parallelism.ep", f"must divide model.moe.experts ({m.moe.experts}), got {p.ep}"
            )
        if (p.dp * p.cp) % p.ep:
            raise ConfigError("parallelism.ep", f"must divide dp*cp = {p.dp * p.cp}, got {p.ep}")
    if h.datacenters > 1 and p.dp % h.datacenters:
        raise ConfigError(
            "hardware.datacenters",
            f"datacenters split the data-parallel dimension: must divide dp ({p.dp}),"
            f" got {h.datacenters}",
        )
    peak_key = PRECISION_PEAK[t.precision]
    if getattr(h.peak_flops, peak_key) is None:
        raise ConfigError(
            "training.precision",
            f"{t.precision!r} needs hardware.peak_flops.{peak_key} (not set for {h.name})",
        )
    if t.attention_precision == "fp8" and h.peak_flops.fp8 is None:
        raise ConfigError(
            "training.attention_precision",
            f"'fp8' needs hardware.peak_flops.fp8 (not set for {h.name}); allowed here: 'bf16'",
        )
    if p.tp > h.nvlink_domain:
        warns.append(
            f"parallelism.tp {p.tp} > hardware.nvlink_domain {h.nvlink_domain}: tensor-parallel"
            " collectives cross the scale-out network"
        )
    elif p.tp * p.cp > h.nvlink_domain and p.cp > 1:
        warns.append(
            f"parallelism.tp*cp = {p.tp * p.cp} > hardware.nvlink_domain {h.nvlink_domain}:"
            " context-parallel exchanges cross the scale-out network"
        )
    if p.sequence_parallel and p.tp == 1:
        warns.append("parallelism.sequence_parallel has no effect with tp 1")
    if p.sharding != "none" and p.dp * p.cp == 1:
        warns.append(f"parallelism.sharding {p.sharding!r} has no effect with dp*cp 1")
    for w in warns:
        warnings.warn(w, LayoutWarning, stacklevel=2)
    return tuple(warns)
