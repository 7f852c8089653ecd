"""``prism sensitivity``: which kernel class's mean or variability moves the step most."""

from __future__ import annotations

import argparse
import json

from .argtypes import add_job_arguments, positive_float
from .output import check_plot_path, jsonable, plot_result

__all__ = ["register"]


def _cmd(args: argparse.Namespace) -> int:
    from ..analyses.perturb import class_moments_per_rank
    from ..analyses.sensitivity import sensitivity
    from ..analyses.symbolic import closed_form_check, latex_formulae
    from ..workload.jobs import build_job
    from ..workload.mean_model import op_means

    plot = check_plot_path(args.plot)
    if args.symbolic and args.preset is None and args.config is None:
        print(latex_formulae())
        return 0
    if not 0 < args.h < 0.5:
        raise ValueError(f"--h must lie in (0, 0.5), got {args.h}")
    job = build_job(args.preset, args.gpus, args.config)
    res = sensitivity(job, h=args.h, rel_width=args.rel_width)
    moments = class_moments_per_rank(job, op_means(job))
    checks = closed_form_check(moments, job.parallelism.dp)
    if plot is not None:
        title = f"{job.name}: p95 sensitivity to kernel-class variability"
        plot_result(plot, res, title, (6.5, 4))
    out = res.to_dict()
    out["closed_form_check"] = [{**c.__dict__, "rel_error": c.rel_error} for c in checks]
    if args.json:
        if args.symbolic:
            out["latex"] = latex_formulae()
        print(json.dumps(jsonable(out), indent=2))
        return 0
    print(job.summary())
    print(res.summary())
    print(
        f"closed form (slowest of {job.parallelism.dp} i.i.d. normal ranks, sympy) vs engine"
        " (implicit) vs finite differences, largest relative disagreement per quantity:"
    )
    for c in checks:
        print(
            f"  {c.cls:<15} {c.quantity:<28} symbolic {c.symbolic:.5g}  engine {c.engine:.5g}"
            f"  FD {c.finite_difference:.5g}  ({c.rel_error:.2%})"
        )
    if args.symbolic:
        print(latex_formulae())
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
