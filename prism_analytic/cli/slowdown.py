"""``prism slowdown``: probability of slow-down at each scale."""

from __future__ import annotations

import argparse
import json

from .argtypes import int_list, positive_float
from .output import check_plot_path, jsonable, plot_result

__all__ = ["register"]


def _cmd(args: argparse.Namespace) -> int:
    from ..analyses.slowdown import slowdown

    plot = check_plot_path(args.plot)
    res = slowdown(args.preset, args.gpus, args.threshold, args.config)
    if plot is not None:
        plot_result(plot, res, f"{args.preset or 'job'}: probability of slow-down")
    if args.json:
        print(json.dumps(jsonable(res.to_dict()), indent=2))
        return 0
    print(res.summary())
    if plot is not None:
        print(f"plot written to {plot}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``prism slowdown``."""
    p = subparsers.add_parser(
        "slowdown",
        help="P(step > (1 + threshold) x deterministic step) at each scale",
        description="Probability that a step (and a job, over persistent allocations) is "
        "more than THRESHOLD slower than the deterministic step, and that the job holds a "
        "degraded GPU, at each GPU count.",
    )
    p.add_argument("--preset", metavar="NAME", help="model preset (see `prism presets`)")
    p.add_argument(
        "--gpus",
        type=int_list,
        required=True,
        metavar="LIST",
        help="strictly increasing GPU counts, e.g. 1024,4096,16384",
    )
    p.add_argument("--config", metavar="FILE", help="TOML overrides / whole job file")
    p.add_argument(
        "--threshold", type=positive_float, default=0.05, help="slow-down threshold (default 0.05)"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--plot", metavar="FILE", help="write the probabilities to FILE")
    p.set_defaults(func=_cmd)
