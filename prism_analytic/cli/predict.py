"""``prism predict``: the step-time distribution of a preset or TOML-described job.

``prism predict --preset NAME --gpus N`` builds the job of a model preset on N GPUs
(optionally overridden key by key by a TOML ``--config``), turns it into a step DAG with
:func:`~prism_analytic.workload.builder.build_step_graph` and evaluates it with
:func:`~prism_analytic.engines.predict.predict`. ``--config FILE`` alone reads a whole
job (``[job] preset = ..., gpus = ...``) from the file.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..workload.config.job import JobConfig
from ..workload.jobs import apply_overlay, build_job
from .argtypes import positive_int, sample_count
from .output import check_plot_path, jsonable, plot_result, progress_printer
from .tolerance import DEFAULT_TOLERANCE, relative_tolerance

__all__ = [
    "register",
    "build_job",
    "apply_overlay",
    "run_prediction",
    "rare_stall_note",
    "METHODS",
]

METHODS = ("analytic", "montecarlo", "bounds")


def run_prediction(job, **options: Any) -> tuple[Any, Any, dict[str, Any]]:
    """:func:`~prism_analytic.workload.prediction.predict_job`, with progress on a terminal."""
    from ..workload.prediction import predict_job

    if options.get("method", "analytic") == "montecarlo":
        options.setdefault("progress", progress_printer("Monte Carlo steps"))
    return predict_job(job, **options)


def _cmd_predict(args: argparse.Namespace) -> int:
    from ..workload.builder import layout_dict

    plot = check_plot_path(args.plot)
    configs = args.config or [None]
    job = build_job(args.preset, args.gpus, configs[0])
    for extra in configs[1:]:  # later files (e.g. a `prism calibrate` overlay) merge on top
        job = apply_overlay(job, extra)
    from ..calibration.overlay_job import check_overlay_gemm

    # an overlay's GEMM efficiency for another precision would change nothing, silently; the
    # first file is an overlay only on top of --preset (else it is the whole job)
    overlays = [c for c in configs[0 if args.preset else 1 :] if c is not None]
    check_overlay_gemm(job, overlays)
    if args.scheduler is not None and args.method != "montecarlo":
        raise ValueError(
            "--scheduler distributes Monte Carlo blocks: use it with --method montecarlo"
        )
    from contextlib import nullcontext

    from ..sweep.executor import open_executor

    where = nullcontext() if args.scheduler is None else open_executor(args.scheduler, args.workers)
    try:
        with where as executor:
            result, _, info = run_prediction(
                job,
                method=args.method,
                samples=args.samples,
                seed=args.seed,
                verify=args.verify,
                executor=executor,
                tolerance=args.tolerance,
            )
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"cannot evaluate {job.name}: {exc}") from exc
    if plot is not None:
        plot_result(plot, result, f"{job.name}: step time ({args.method})")
    layout = layout_dict(job)
    if args.json:
        out = {
            "preset": args.preset,
            "gpus": job.gpus,
            "layout": layout,
            **result.to_dict(),
            **info,
        }
        print(json.dumps(jsonable(out), indent=2))
        return 0
    print(job.summary())
    print("layout: " + ", ".join(f"{k} {v}" for k, v in layout.items()))
    print(
        f"step graph: {info['graph_nodes']:,} nodes representing {info['represented_ops']:,}"
        f" ops (built in {info['build_time_s'] * 1e3:.0f} ms); mean-model step"
        f" {info['mean_model_step_s']:.4g} s"
    )
    print(result.summary())
    note = rare_stall_note(job)
    if note:
        print(note)
    if plot is not None:
        print(f"plot written to {plot}")
    return 0


def rare_stall_note(job: JobConfig) -> str | None:
    """Say which high quantiles the configured rare whole-step stall sets, if any.

    The default stall (``variability.hiccups``, measured on the MLPerf logs) strikes well under
    1% of steps, so it leaves p99 alone and lifts the quantiles above ``1 - probability`` by about
    its size: without a sentence the jump from p99 to p999 reads like a numerical artefact.
    """
    hic = job.variability.hiccups
    if not (0.0 < hic.probability < 0.5 and hic.size_s > 0.0):
        return None
    level = 100.0 * (1.0 - hic.probability)
    return (
        f"note: quantiles above ~p{level:.4g} include the rare whole-step stall"
        f" (variability.hiccups: {100.0 * hic.probability:.3g}% of steps, +{hic.size_s:.3g} s);"
        " set variability.hiccups.probability = 0 to leave it out"
    )


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
