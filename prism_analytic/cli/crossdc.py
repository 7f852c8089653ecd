"""``prism crossdc``: p95 step time against inter-datacenter bandwidth and jitter."""

from __future__ import annotations

import argparse
import json

from .argtypes import add_job_arguments, nonnegative_int, positive_float, positive_int
from .output import check_plot_path, jsonable, plot_result, progress_printer

__all__ = ["register"]


def _numbers(text: str) -> list[float]:
    """A comma-separated list of numbers (checked by the analysis, which names the argument)."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of numbers, got {text!r}"
        )
    try:
        return [float(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers, got {text!r}") from None


def _cmd(args: argparse.Namespace) -> int:
    from ..analyses.crossdc import crossdc
    from ..workload.jobs import build_job

    plot = check_plot_path(args.plot)
    job = build_job(args.preset, args.gpus, args.config)
    with progress_printer("crossdc", "evaluations") as progress:
        res = crossdc(
            job,
            args.datacenters,
            args.bandwidths,
            args.jitter,
            tolerance=args.tolerance,
            bisect_steps=args.bisect_steps,
            progress=progress,
        )
    if plot is not None:
        plot_result(plot, res, f"{job.name} over {args.datacenters} datacenters", (6, 3.8))
    if args.json:
        print(json.dumps(jsonable(res.to_dict()), indent=2))
        return 0
    print(job.summary())
    print(res.summary())
    if plot is not None:
        print(f"plot written to {plot}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``prism crossdc``."""
    p = subparsers.add_parser(
        "crossdc",
        help="p95 step time vs inter-datacenter bandwidth and jitter",
        description="Split the job over D datacenters and compute the p95 step time for each "
        "inter-datacenter bandwidth (and cross-DC jitter), relative to one datacenter, and the "
        "bandwidth above which the p95 degradation stays under the tolerance.",
    )
    add_job_arguments(p)
    p.add_argument("--datacenters", type=positive_int, default=2, metavar="D")
    p.add_argument(
        "--bandwidths",
        type=_numbers,
        required=True,
        metavar="LIST",
        help="strictly increasing aggregate inter-DC bandwidths in Tb/s, e.g. 1,10,100",
    )
    p.add_argument(
        "--jitter",
        type=_numbers,
        metavar="LIST",
        help="cross-DC noise sigma values, increasing (default: the job's)",
    )
    p.add_argument("--tolerance", type=positive_float, default=0.05, help="default 0.05")
    p.add_argument(
        "--bisect-steps",
        type=nonnegative_int,
        default=6,
        help="threshold bisection probes, 0 to 64 (default 6; 0 = the first bandwidth tested"
        " that meets it)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--plot", metavar="FILE", help="write the degradation curve to FILE")
    p.set_defaults(func=_cmd)
