"""``prism sweep``: evaluate a grid of configurations and write one row per configuration.

``prism sweep --preset llama3-405b --gpus 16384,65536 --set parallelism.tp=4,8
--set parallelism.pp=8,16 --out sweep.parquet`` evaluates every combination (analytic by
default) on a local process pool, a dask ``LocalCluster`` (``--scheduler dask``) or an existing
dask scheduler (``--scheduler tcp://HOST:PORT``). Rerunning with the same ``--out`` skips the
rows already there. Spec errors (unknown keys, empty lists, bad values, an unreachable
scheduler) are reported before any configuration runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

from .argtypes import (
    check_text_file,
    int_list,
    nonnegative_float,
    positive_float,
    positive_int,
    probability,
    sample_count,
    seed,
)
from .output import check_out_path, jsonable, progress_printer

__all__ = ["register", "spec_from_args", "settings_from_args", "add_executor_arguments"]


def _names(text: str) -> list[str]:
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of names, got {text!r}")
    return parts


def _scheduler(text: str) -> str:
    from ..sweep.executor import check_scheduler

    try:
        return check_scheduler(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def read_base(path: str | None) -> dict[str, Any]:
    """Overrides from a ``--config`` TOML file (applied under every configuration)."""
    from ..sweep.spec import SweepError

    if path is None:
        return {}
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"--config: no such config file: {str(p)!r}")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"--config: {p} is not valid TOML: {exc}") from None
    if "job" in raw:
        raise SweepError(
            f"--config: {p} has a [job] table; give preset, gpus and hardware with --preset,"
            " --gpus and --hardware (or a sweep file's [sweep] table)"
        )
    return raw


def spec_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~prism_analytic.sweep.spec.SweepSpec` the command line describes."""
    from ..sweep.spec import SweepError, SweepSpec, load_sweep_file, parse_set

    check_text_file(args.file, "--file", "a TOML sweep file ([sweep], [grid], [[points]])")
    check_text_file(args.config, "--config", "a TOML file of config overrides")
    base_spec = load_sweep_file(args.file) if args.file else None
    grid = dict(base_spec.grid) if base_spec else {}
    for key, values in parse_set(args.set or []).items():
        if key in grid:
            raise SweepError(f"--set {key}: also a [grid] key of {args.file}; give it once")
        grid[key] = values
    presets = args.preset or (base_spec.presets if base_spec else None)
    gpus = args.gpus or (base_spec.gpus if base_spec else None)
    if not presets:
        raise SweepError("--preset: required (or a sweep file with [sweep] preset)")
    if not gpus:
        raise SweepError("--gpus: required (or a sweep file with [sweep] gpus)")
    hardware = args.hardware or (base_spec.hardware if base_spec else (None,))
    base = dict(base_spec.base) if base_spec else {}
    if args.config:
        from ..workload.config.toml_io import _deep_merge

        base = _deep_merge(base, read_base(args.config))
    return SweepSpec(
        presets=tuple(presets),
        gpus=tuple(gpus),
        hardware=tuple(hardware),
        grid=grid,
        points=base_spec.points if base_spec else ({},),
        base=base,
    )


def settings_from_args(args: argparse.Namespace, **extra: Any) -> Any:
    """The :class:`~prism_analytic.sweep.evaluate.EvalSettings` of the command line."""
    from ..sweep.evaluate import EvalSettings

    return EvalSettings(
        method=args.method,
        samples=args.samples,
        seed=args.seed,
        steps=args.steps,
        probability=args.probability,
        memory_gb=args.memory_gb,
        reserve_gb=args.reserve_gb,
        **extra,
    )


def add_executor_arguments(p: argparse.ArgumentParser, default: str | None = "local") -> None:
    """``--scheduler`` and ``--workers`` (shared with ``prism optimize`` and ``predict``)."""
    here = "this process" if default is None else "local"
    p.add_argument(
        "--scheduler",
        type=_scheduler,
        default=default,
        metavar="WHERE",
        help="local (a process pool), dask (a dask LocalCluster) or tcp://HOST:PORT (an"
        f" existing dask scheduler); default: {here}",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="processes for local/dask (default: the CPU count; 1 = this process)",
    )


def add_evaluation_arguments(p: argparse.ArgumentParser) -> None:
    """Engine, Monte Carlo, run-time and memory options (shared with ``prism optimize``)."""
    METHODS = ("analytic", "bounds", "montecarlo")  # engines.predict.METHODS, kept light

    p.add_argument("--method", choices=METHODS, default="analytic", help="engine")
    p.add_argument(
        "--samples", type=sample_count, default=20_000, help="Monte Carlo samples (20,000)"
    )
    p.add_argument("--seed", type=seed, default=0, help="Monte Carlo seed (0)")
    p.add_argument(
        "--steps",
        type=positive_int,
        metavar="M",
        help="also report the run time of M steps at --probability (prism runtime's model)",
    )
    p.add_argument(
        "--probability",
        type=probability,
        default=0.99,
        help="level of the run-time quantile (default 0.99)",
    )
    p.add_argument(
        "--memory-gb",
        type=positive_float,
        metavar="GB",
        help="HBM per GPU for the memory estimate (default: the hardware preset's)",
    )
    p.add_argument(
        "--reserve-gb",
        type=nonnegative_float,
        default=0.0,
        metavar="GB",
        help="memory per GPU set aside in the estimate (default 0)",
    )


def _cmd_sweep(args: argparse.Namespace) -> int:
    from ..sweep.executor import open_executor
    from ..sweep.runner import run_sweep
    from ..sweep.table import check_output, sweep_report

    spec = spec_from_args(args)
    settings = settings_from_args(args, keep_batch=args.keep_batch)
    out = check_out_path(check_output(args.out)) if args.out else None
    with open_executor(args.scheduler, args.workers) as executor:
        outcome = run_sweep(
            spec,
            settings,
            out,
            executor=executor,
            progress=progress_printer("sweep", "configurations"),
        )
    for msg in outcome.lost:
        print(f"prism sweep: lost {msg}", file=sys.stderr)
    text, payload = sweep_report(outcome, out, len(spec))
    if args.json:
        print(json.dumps(jsonable(payload), indent=2))
    else:
        print(text)
    if outcome.lost:
        print(
            f"prism sweep: {len(outcome.lost)} configurations were lost; rerun to retry them",
            file=sys.stderr,
        )
        return 1
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``prism sweep`` to the command's subparsers."""
    p = subparsers.add_parser(
        "sweep",
        help="evaluate a grid of configurations into a CSV/Parquet table (resumable)",
        description="Evaluate every combination of presets x GPU counts x hardware x --set"
        " values (or a TOML sweep file) and write one row per configuration. Invalid layouts"
        " are rows with status 'invalid'. Rerunning with the same --out skips finished rows.",
    )
    p.add_argument("--preset", type=_names, metavar="NAMES", help="model preset(s), a,b")
    p.add_argument("--gpus", type=int_list, metavar="N,M", help="GPU count(s)")
    p.add_argument("--hardware", type=_names, metavar="NAMES", help="hardware preset(s)")
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=V1,V2",
        help="a grid axis: a dotted config key and its values (repeatable),"
        " e.g. parallelism.tp=4,8",
    )
    p.add_argument("--file", metavar="SWEEP.toml", help="a TOML sweep file ([sweep], [grid] ...)")
    p.add_argument("--config", metavar="FILE", help="TOML overrides under every configuration")
    p.add_argument(
        "--keep-batch",
        action="store_true",
        help="keep each preset's global batch: microbatches = batch / (dp * micro_batch_size)",
    )
    p.add_argument("--out", metavar="FILE", help="table to write (.csv or .parquet); resumable")
    add_evaluation_arguments(p)
    add_executor_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON (every row)")
    p.set_defaults(func=_cmd_sweep)
