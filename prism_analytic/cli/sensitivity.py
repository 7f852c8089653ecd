"""``prism sensitivity``: which kernel class's mean or variability moves the step most."""

from __future__ import annotations

import argparse
import json

from .argtypes import add_job_arguments, positive_float
from .output import check_plot_path

__all__ = ["register"]


def _cmd(args: argparse.Namespace) -> int:
    from ..job import Job

    plot = check_plot_path(args.plot)
    if args.symbolic and args.preset is None and args.config is None:
        from ..analyses.symbolic import latex_formulae

        print(latex_formulae())
        return 0
    if not 0 < args.h < 0.5:
        raise ValueError(f"--h must lie in (0, 0.5), got {args.h}")
    job = Job.from_args(args.preset, args.gpus, args.config)
    res = job.sensitivity(h=args.h, rel_width=args.rel_width, symbolic=args.symbolic)
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
    """Add ``prism sensitivity``."""
    p = subparsers.add_parser(
        "sensitivity",
        help="derivatives of the step's mean, p95, std per kernel class",
        description="For each kernel class (GEMM, attention, AllGather, ReduceScatter, "
        "AllReduce, send/recv, all-to-all, optimizer): the derivative of the step's mean, "
        "p95 and std with respect to the class's mean and variability, the p95 drop without "
        "its variability and its criticality index (values below the numerical resolution are "
        "reported unresolved); symbolic (sympy) closed forms checked "
        "against the engine and finite differences.",
    )
    add_job_arguments(p)
    p.add_argument(
        "--h", type=positive_float, default=0.05, help="relative difference step (default 0.05)"
    )
    p.add_argument(
        "--rel-width",
        type=positive_float,
        default=5e-5,
        help="grid resolution of the fine lattice (default 5e-5; the engine may coarsen it for"
        " the job); derivatives are also computed at twice the width used, and those that change"
        " between the two by more than half their size, or have a sign the model excludes, are"
        " reported unresolved (n/r)",
    )
    p.add_argument("--symbolic", action="store_true", help="print the derived formulae (LaTeX)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--plot", metavar="FILE", help="write a bar chart to FILE")
    p.set_defaults(func=_cmd)
