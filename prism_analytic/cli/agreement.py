"""``prism agreement``: the analytic engine against Monte Carlo on the suite's named scenarios."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .argtypes import sample_count
from .tolerance import DEFAULT_TOLERANCE, relative_tolerance

__all__ = ["register", "add_arguments", "main"]


def _cmd_agreement(args: argparse.Namespace) -> int:
    from ..validation.agreement import DEFAULT_SAMPLES, DEFAULT_SEED
    from ..validation.report import run

    samples = DEFAULT_SAMPLES if args.samples is None else args.samples
    seed = DEFAULT_SEED if args.seed is None else args.seed
    return run(
        samples,
        args.only,
        args.json,
        seed=seed,
        do_timing=args.timing,
        list_only=args.list,
        strict=args.strict,
        core_shape=args.core_shape,
        tolerance=args.tolerance,
    )


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The suite's options, shared by ``prism agreement`` and ``python validation/agreement.py``.

    ``--samples`` and ``--seed`` default to None: the suite's own defaults then apply.
    """
    p.add_argument(
        "--samples",
        type=sample_count,
        default=None,
        help="Monte Carlo samples per scenario (default: the suite's, 100,000)",
    )
    p.add_argument(
        "--seed", type=int, default=None, help="Monte Carlo seed (default: the suite's, 12345)"
    )
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these scenarios")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.add_argument(
        "--timing",
        action="store_true",
        help="instead of the scenarios, time analytic predict on a 16x64 1F1B "
        "pipeline inside 1, 512, 1e3 and 1e6 replicas",
    )
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit with status 1 when any scenario misses its targets",
    )
    p.add_argument(
        "--core-shape",
        default=None,
        metavar="SHAPE",
        help="core_shape of the analytic engine: auto, normal, skew, kurtosis or cumulant "
        "(default: the engine's, auto)",
    )
    p.add_argument(
        "--tolerance",
        type=relative_tolerance,
        default=DEFAULT_TOLERANCE,
        metavar="REL",
        help="relative error of a quantile accepted by the verdict (default: 0.001, i.e. "
        "0.1%% of the quantile)",
    )
    return p


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``agreement`` subcommand to the ``prism`` parser's ``subparsers``.

    The suite (:mod:`prism_analytic.validation`) is imported only when the command runs, so
    building the parser stays cheap.
    """
    p = subparsers.add_parser(
        "agreement",
        help="analytic engine against Monte Carlo on the validation scenarios",
        description="Run the agreement suite (prism_analytic.validation): the analytic "
        "engine's p50, p90, p99 and p99.9 errors against Monte Carlo's order-statistic "
        "intervals (seconds and percent), bounds check, KS as a diagnostic, and timings, "
        "on named scenarios.",
    )
    add_arguments(p)
    p.set_defaults(func=_cmd_agreement)


def main(argv: Sequence[str] | None = None) -> int:
    """``python validation/agreement.py``: the same options as ``prism agreement``."""
    parser = add_arguments(
        argparse.ArgumentParser(
            prog="agreement", description="Analytic engine against Monte Carlo on named scenarios."
        )
    )
    args = parser.parse_args(argv)
    try:
        return _cmd_agreement(args)
    except ValueError as exc:
        print(f"agreement: error: {exc}", file=sys.stderr)
        return 2
