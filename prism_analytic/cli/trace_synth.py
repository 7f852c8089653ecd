"""``prism trace-synth``: write a synthetic per-op trace of known truth (any layout)."""

from __future__ import annotations

import argparse

from .argtypes import positive_int, seed

__all__ = ["register"]


def _cmd(args: argparse.Namespace) -> int:
    from ..traces.synth import SynthJob, parse_layout, simulate, write_trace

    if args.config is None and args.layout is None:
        raise ValueError("give the job: --config JOB.toml and/or --layout dp=..,pp=..,...")
    fields: dict = {}
    if args.config is not None:
        fields = vars_of(SynthJob.from_toml(args.config))
    if args.layout is not None:
        fields.update(parse_layout(args.layout))
    if args.name is not None:
        fields["name"] = args.name
    job = SynthJob.from_dict(fields)
    trace = simulate(job, steps=args.steps, seed=args.seed)
    paths = write_trace(trace, args.out, fmt=args.format, kineto=args.kineto)
    t = trace.step_times
    print(
        f"{job.name}: dp={job.dp} pp={job.pp} tp={job.tp} cp={job.cp} sp={job.sp} ep={job.ep} "
        f"vpp={job.vpp} {job.schedule}, {job.microbatches} microbatches, {job.world_size} ranks; "
        f"{len(t)} steps, {len(trace.frame)} op records; step time mean {t.mean():.6g} s, "
        f"min {t.min():.6g} s, max {t.max():.6g} s"
    )
    kineto = [p for p in paths if p.suffix == ".json" and p.parent != paths[0].parent]
    for p in paths:
        if p not in kineto:
            print(f"wrote {p}")
    if kineto:
        print(f"wrote {len(kineto)} Kineto files in {kineto[0].parent}")
    return 0


def vars_of(job) -> dict:
    """The fields of a job as a dict (for overriding some of them)."""
    from dataclasses import fields

    return {f.name: getattr(job, f.name) for f in fields(job)}


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``trace-synth`` subcommand."""
    p = sub.add_parser(
        "trace-synth",
        help="write a synthetic per-op trace of known truth (any parallel layout)",
        description=(
            "Simulate a Megatron-style training job (data, pipeline 1F1B/interleaved, tensor, "
            "context or Ulysses sequence, expert parallel) with known op laws, slow ranks, "
            "shared factors and host gaps, and write its per-op table (trace-NAME.parquet or "
            ".csv), layout (meta-NAME.yaml), step times (result-NAME.json) and optionally "
            "Kineto JSON per rank. --layout fields override those of --config."
        ),
    )
    p.add_argument("--config", metavar="JOB.toml", help="job file: a [synth] table or top level")
    p.add_argument(
        "--layout",
        metavar="SPEC",
        help="e.g. dp=4,pp=2,tp=2,vpp=2,schedule=interleaved,microbatches=8 (keys: dp, pp, tp, "
        "cp, sp, ep, vpp, microbatches, layers, schedule, sequence_parallel, name)",
    )
    p.add_argument("--steps", type=positive_int, default=20, help="steps (default 20)")
    p.add_argument("--seed", type=seed, default=0, help="random seed (default 0)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--name", help="file stem and trial name (default: the job's name)")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="table format")
    p.add_argument("--kineto", action="store_true", help="also write Kineto JSON per rank")
    p.set_defaults(func=_cmd)
