"""Candidate parallel layouts of a model on N GPUs, as sweep points.

Every combination of the candidate tp, pp, vpp, cp, ep, recompute, sharding, micro-batch
size, rank order, global batch and hardware values whose tp * pp * cp divides N is a point
(dp = N / (tp pp cp)); ``vpp > 1`` means the interleaved schedule, ``vpp = 1`` 1F1B.
Combinations that are not even a factorisation of N, ``vpp > 1`` with ``pp = 1``, and (with
candidate global batches) a batch that dp * micro-batch size does not divide are not layouts
and are only counted. Everything else is evaluated as a sweep row with the global batch held
fixed (microbatches = batch / (dp * mbs)), so the model's own rules (tp dividing the heads,
layers splitting over pp * vpp, interleaving needing microbatches a multiple of pp, ep
dividing the experts, a batch that splits over dp) mark a layout ``invalid`` with the reason,
and the memory estimate marks it ``infeasible``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from .spec import SweepError, SweepSpec

__all__ = ["LayoutSpace", "layout_spec"]


def _powers_of_two(limit: int) -> tuple[int, ...]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return tuple(out)


@dataclass(frozen=True)
class LayoutSpace:
    """Candidate values per layout axis (None: a default from the model and hardware).

    Parameters
    ----------
    tp : tuple of int, optional
        Default: powers of two up to the hardware's NVLink domain.
    pp : tuple of int, optional
        Default: powers of two up to 32.
    vpp : tuple of int
        Model chunks per pipeline rank (1 = 1F1B, > 1 = interleaved).
    cp : tuple of int
    recompute : tuple of str
        ``training.recompute`` values.
    sharding : tuple of str, optional
        Default: the preset's.
    micro_batch_size : tuple of int
    ep : tuple of int, optional
        Expert-parallel sizes (default: the preset's; a dense model accepts only 1).
    rank_order : tuple of str, optional
        ``parallelism.rank_order`` values (default: the preset's).
    global_batch : tuple of int, optional
        Global batches in sequences (default: the one of the evaluation settings, or the
        preset's); each sets microbatches = batch / (dp * micro-batch size).
    hardware : tuple of str, optional
        Hardware presets (default: the one passed to :func:`layout_spec`, or the model's).
    """

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    vpp: tuple[int, ...] = (1, 2, 4, 8)
    cp: tuple[int, ...] = (1, 2)
    recompute: tuple[str, ...] = ("selective",)
    sharding: tuple[str, ...] | None = None
    micro_batch_size: tuple[int, ...] = (1,)
    ep: tuple[int, ...] | None = None
    rank_order: tuple[str, ...] | None = None
    global_batch: tuple[int, ...] | None = None
    hardware: tuple[str, ...] | None = None

    def axes(self, job: Any) -> dict[str, tuple[Any, ...]]:
        """Every axis with its defaults filled in from ``job`` (the preset's default job)."""
        return {
            "tp": self.tp or _powers_of_two(job.hardware.nvlink_domain),
            "pp": self.pp or _powers_of_two(32),
            "vpp": self.vpp,
            "cp": self.cp,
            "recompute": self.recompute,
            "sharding": self.sharding or (job.parallelism.sharding,),
            "micro_batch_size": self.micro_batch_size,
            "ep": self.ep or (None,),
            "rank_order": self.rank_order or (None,),
            "global_batch": self.global_batch or (None,),
        }


def layout_spec(
    preset: str,
    gpus: int,
    space: LayoutSpace | None = None,
    *,
    hardware: str | None = None,
    base: dict[str, Any] | None = None,
) -> tuple[SweepSpec, dict[str, int]]:
    """The sweep over the candidate layouts of ``preset`` on ``gpus`` GPUs.

    Returns
    -------
    spec : SweepSpec
        One point per candidate layout (run it with ``EvalSettings(keep_batch=True)``).
    counts : dict
        ``candidates`` (all combinations, hardware included), ``not_a_factorisation``
        (tp*pp*cp does not divide the GPU count), ``not_a_schedule`` (vpp > 1 with pp = 1)
        and ``not_a_batch`` (a candidate global batch that dp * micro-batch size does not
        divide): combinations dropped.

    Raises
    ------
    SweepError
        For an unknown preset, a bad GPU count or candidate values out of range.
    """
    from ..workload.config import ConfigError
    from ..workload.presets import MODELS, preset_job

    if preset not in MODELS:
        raise SweepError(f"preset: unknown {preset!r}; available: {', '.join(sorted(MODELS))}")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise SweepError(f"gpus: must be a positive integer, got {gpus!r}")
    space = space or LayoutSpace()
    if space.hardware is not None and hardware is not None:
        raise SweepError("hardware: give one hardware preset or a list of candidates, not both")
    hardwares = space.hardware or (hardware,)
    if not hardwares:
        raise SweepError("--hardware: empty list of candidates")
    try:
        jobs = [preset_job(preset, gpus, hardware=hw) for hw in hardwares]
    except ConfigError as exc:
        raise SweepError(f"{preset} on {gpus} GPUs: {exc}") from None
    # defaults (tp up to the NVLink domain) from the widest domain among the candidates
    job = max(jobs, key=lambda j: j.hardware.nvlink_domain)
    axes = space.axes(job)
    for name, values in axes.items():
        if not values:
            raise SweepError(f"--{name.replace('_', '-')}: empty list of candidates")
    counts = {"candidates": 0, "not_a_factorisation": 0, "not_a_schedule": 0, "not_a_batch": 0}
    points = []
    for tp, pp, vpp, cp, rc, sh, mbs, ep, order, gb in itertools.product(*axes.values()):
        counts["candidates"] += len(hardwares)
        if gpus % (tp * pp * cp):
            counts["not_a_factorisation"] += len(hardwares)
            continue
        if vpp > 1 and pp == 1:
            counts["not_a_schedule"] += len(hardwares)
            continue
        # axes left at the preset's value add no key (a table's config ids stay the same)
        extra: dict[str, Any] = {}
        if ep is not None:
            extra["parallelism.ep"] = ep
        if order is not None:
            extra["parallelism.rank_order"] = order
        if gb is not None:
            per = gpus // (tp * pp * cp) * mbs  # sequences per microbatch over dp
            if gb % per:
                counts["not_a_batch"] += len(hardwares)
                continue
            extra["parallelism.microbatches"] = gb // per
        points.append(
            {
                "parallelism.tp": tp,
                "parallelism.pp": pp,
                "parallelism.vpp": vpp,
                "parallelism.schedule": "interleaved" if vpp > 1 else "1f1b",
                "parallelism.cp": cp,
                "parallelism.sharding": sh,
                "parallelism.micro_batch_size": mbs,
                "parallelism.sequence_parallel": tp > 1,
                "training.recompute": rc,
                **extra,
            }
        )
    if not points:
        raise SweepError(
            f"no candidate layout of {preset} factorises {gpus} GPUs (tp*pp*cp must divide it)"
        )
    spec = SweepSpec(
        presets=(preset,),
        gpus=(gpus,),
        hardware=tuple(hardwares),
        points=tuple(points),
        base=dict(base or {}),
    )
    return spec, counts
