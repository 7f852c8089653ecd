"""``prism slowdown``: probability of slow-down at each scale.

``prism slowdown --preset NAME --gpus A,B,...`` is
:meth:`Job.slowdown <prism_analytic.job.Job.slowdown>` of ``Job.from_args(NAME, A, ...)`` at
the GPU counts A, B, ...: the command parses its options, prints the result's ``summary()`` or
``to_dict()`` and writes its plot.
"""

from __future__ import annotations

import argparse
import json

from .argtypes import int_list, positive_float
from .output import check_plot_path

__all__ = ["register"]


def _cmd(args: argparse.Namespace) -> int:
    from ..analyses.slowdown import check_scales
    from ..job import Job

    plot = check_plot_path(args.plot)
    scales = check_scales(args.gpus, "--gpus")
    job = Job.from_args(args.preset, scales[0], args.config)
    res = job.slowdown(scales, threshold=args.threshold)
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
