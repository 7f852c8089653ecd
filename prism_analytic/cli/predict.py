"""``prism predict``: the step-time distribution of a preset or TOML-described job.

``prism predict --preset NAME --gpus N`` is :meth:`Job.predict <prism_analytic.job.Job.predict>`
of ``Job.from_args(NAME, N, ...)``: the job of a model preset on N GPUs, optionally overridden
key by key by a TOML ``--config`` (``--config FILE`` alone reads a whole job, ``[job] preset =
..., gpus = ...``; further ``--config`` files merge on top). The command parses the options,
prints the result's ``summary()`` or ``to_dict()`` and writes its plot.
"""

from __future__ import annotations

import argparse
import json

# other commands and scripts take the job builders from here
from ..workload.jobs import apply_overlay, build_job
from .argtypes import positive_int, sample_count
from .output import check_plot_path, progress_printer
from .tolerance import DEFAULT_TOLERANCE, relative_tolerance

__all__ = ["register", "build_job", "apply_overlay", "METHODS"]

METHODS = ("analytic", "montecarlo", "bounds")


def _cmd_predict(args: argparse.Namespace) -> int:
    from ..job import Job

    plot = check_plot_path(args.plot)
    configs = args.config or [None]
    job = Job.from_args(args.preset, args.gpus, configs[0], *configs[1:])
    progress = None
    if args.method == "montecarlo":
        # loaded first, so that the progress clock times the sampling, not the imports
        from ..workload import prediction  # noqa: F401

        progress = progress_printer("Monte Carlo steps")
    result = job.predict(
        args.method,
        samples=args.samples,
        seed=args.seed,
        verify=args.verify,
        tolerance=args.tolerance,
        scheduler=args.scheduler,
        workers=args.workers,
        progress=progress,
    )
    if plot is not None:
        result.plot(plot)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(result.summary())
    if plot is not None:
        print(f"plot written to {plot}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``prism predict`` to the command's subparsers."""
    p = subparsers.add_parser(
        "predict",
        help="step-time distribution of a preset job on N GPUs",
        description="Build the symmetry-reduced step DAG of a preset job (optionally "
        "overridden by a TOML config) and predict its step-time distribution.",
    )
    p.add_argument("--preset", metavar="NAME", help="model preset (see `prism presets`)")
    p.add_argument("--gpus", type=positive_int, metavar="N", help="number of GPUs")
    p.add_argument(
        "--config",
        metavar="FILE",
        action="append",
        help="TOML overrides on top of the preset; alone: a whole job file; repeat to merge"
        " more files on top (e.g. a `prism calibrate` overlay; one that sets only another"
        " precision's GEMM efficiency is refused: it would change nothing)",
    )
    p.add_argument(
        "--method", choices=METHODS, default="analytic", help="engine (default: analytic)"
    )
    p.add_argument(
        "--samples", type=sample_count, default=20_000, help="Monte Carlo samples (default: 20,000)"
    )
    p.add_argument("--seed", type=int, default=0, help="Monte Carlo seed (default: 0)")
    p.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="skip the default cross-check of an approximate analytic answer (Monte Carlo of "
        "the approximated pipeline body against its DKW band, plus guaranteed bounds when cheap)",
    )
    p.add_argument(
        "--tolerance",
        type=relative_tolerance,
        default=DEFAULT_TOLERANCE,
        metavar="REL",
        help="largest approximation error of a printed quantile, relative to it, accepted "
        "without a WARNING (default: 0.001, i.e. 0.1%%)",
    )
    from .sweep import add_executor_arguments

    add_executor_arguments(p, default=None)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--plot", metavar="FILE", help="write a CDF plot to FILE (png, pdf, svg)")
    p.set_defaults(func=_cmd_predict)
