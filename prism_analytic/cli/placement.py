"""``prism placement``: where to put K slow GPUs."""

from __future__ import annotations

import argparse
import json

from .argtypes import add_job_arguments, positive_float, positive_int
from .output import check_plot_path

__all__ = ["register"]


def _cmd(args: argparse.Namespace) -> int:
    from ..job import Job

    plot = check_plot_path(args.plot)
    job = Job.from_args(args.preset, args.gpus, args.config)
    res = job.placement(args.slow_gpus, args.slow_factor, search=not args.no_search)
    if plot is not None:
        res.plot(plot)
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
        return 0
    print(res.summary())
    if plot is not None:
        print(f"plot written to {plot}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``prism placement``."""
    p = subparsers.add_parser(
        "placement",
        help="step time for placements of K slow GPUs, and the best one",
        description="Step-time law (mean, p95, p99) of named placements of K GPUs that are "
        "F times slower (packed in a tp group, a stage, a replica; spread over stages or "
        "replicas; on the stage with most or least slack) and a structured search.",
    )
    add_job_arguments(p)
    p.add_argument(
        "--slow-gpus", type=positive_int, required=True, metavar="K", help="how many GPUs are slow"
    )
    p.add_argument(
        "--slow-factor",
        type=positive_float,
        required=True,
        metavar="F",
        help="their time multiplier (1.5 = 50%% slower; below 1 = faster)",
    )
    p.add_argument("--no-search", action="store_true", help="named placements only")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--plot", metavar="FILE", help="write a bar chart to FILE")
    p.set_defaults(func=_cmd)
