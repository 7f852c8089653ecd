"""``prism runtime``: the time of a whole run, its guarantee, failures and checkpoints.

``prism runtime --preset NAME --gpus N --steps M`` is
:meth:`Job.runtime <prism_analytic.job.Job.runtime>` of ``Job.from_args(NAME, N, ...)``: the
command parses its options, prints the result's ``summary()`` or ``to_dict()`` and writes its
plot.
"""

from __future__ import annotations

import argparse
import json

from .argtypes import (
    add_job_arguments,
    nonnegative_float,
    positive_float,
    positive_int,
    probability,
)
from .output import check_plot_path

__all__ = ["register"]


def _cmd(args: argparse.Namespace) -> int:
    from ..job import Job

    plot = check_plot_path(args.plot)
    if (args.steps is None) == (args.tokens is None):
        raise ValueError("give exactly one of --steps M or --tokens T")
    if args.failslow_factor < 1:
        raise ValueError(
            f"--failslow-factor must be >= 1 (a slow-down), got {args.failslow_factor}"
        )
    job = Job.from_args(args.preset, args.gpus, args.config)
    res = job.runtime(
        args.steps,
        tokens=args.tokens,
        failures=not args.no_failures,
        failure_rate=args.failure_rate,
        checkpoint_interval_s=args.checkpoint_interval,
        checkpoint_cost_s=args.checkpoint_cost,
        restart_s=args.restart,
        failslow_rate=args.failslow_rate,
        failslow_duration_s=args.failslow_duration,
        failslow_factor=args.failslow_factor,
        deadline_s=args.deadline,
        prob=args.prob,
    )
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
    """Add ``prism runtime``."""
    p = subparsers.add_parser(
        "runtime",
        help="distribution of a whole run's time, with failures and checkpoints",
        description="Run time of M steps with the job's allocation held fixed across steps "
        "(fresh per-step noise), plus failures, checkpoints, restarts and fail-slow episodes: "
        "the exact renewal law of fail / restart / redo the work since the last checkpoint, "
        "whether the job's MTBF is far above or far below the restart time. A run whose "
        "expected time no float holds is reported as inf (null in JSON) with a note.",
    )
    add_job_arguments(p)
    p.add_argument("--steps", type=positive_int, metavar="M", help="training steps in the run")
    p.add_argument("--tokens", type=positive_float, metavar="T", help="tokens to train on")
    p.add_argument("--deadline", type=positive_float, metavar="SECONDS", help="P(run <= SECONDS)")
    p.add_argument(
        "--prob", type=probability, metavar="P", help="the run time met with probability P"
    )
    p.add_argument("--no-failures", action="store_true", help="the steps alone")
    p.add_argument(
        "--failure-rate",
        type=nonnegative_float,
        metavar="PER_GPU_HOUR",
        help="job-stopping failures per GPU-hour (default: Llama 3's 466 in 54 days on 16,384"
        " GPUs = 2.19e-5)",
    )
    p.add_argument(
        "--checkpoint-interval",
        type=positive_float,
        metavar="SECONDS",
        help="work between checkpoints (default: the optimum for the mean work, at least one"
        " step; none when that is best)",
    )
    p.add_argument(
        "--checkpoint-cost",
        type=nonnegative_float,
        default=60.0,
        metavar="SECONDS",
        help="time to write a checkpoint (default 60)",
    )
    p.add_argument(
        "--restart",
        type=nonnegative_float,
        default=600.0,
        metavar="SECONDS",
        help="time from a failure to training again (default 600)",
    )
    p.add_argument(
        "--failslow-rate",
        type=nonnegative_float,
        default=0.0,
        metavar="PER_GPU_HOUR",
        help="fail-slow episodes per GPU-hour (default 0)",
    )
    p.add_argument(
        "--failslow-duration",
        type=positive_float,
        default=1800.0,
        metavar="SECONDS",
        help="mean fail-slow episode length (default 1800)",
    )
    p.add_argument(
        "--failslow-factor",
        type=positive_float,
        default=1.5,
        metavar="F",
        help="job slow-down during an episode, >= 1 (default 1.5)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--plot", metavar="FILE", help="write the run-time CDF to FILE")
    p.set_defaults(func=_cmd)
