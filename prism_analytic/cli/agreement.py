"""``prism agreement``: the analytic engine against Monte Carlo on the suite's named scenarios."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .argtypes import sample_count

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
        confirm=args.confirm_noise,
        confirm_samples=args.confirm_samples,
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
        help="core_shape of the analytic engine: auto, normal, template, skew, kurtosis or "
        "cumulant (default: the engine's, auto)",
    )
    p.add_argument(
        "--confirm-noise",
        action="store_true",
        help="re-measure once every row whose verdict lies inside Monte Carlo's own noise "
        "(a comparison whose two sides differ by less than that noise, met or not, and no "
        "miss outside it) against a larger sample with seed + 1; that verdict stands, pass "
        "or fail, and a comparison still inside the noise is a miss "
        "(prism_analytic.validation.confirmation)",
    )
    p.add_argument(
        "--confirm-samples",
        type=sample_count,
        default=None,
        metavar="N",
        help="samples of each confirmation (default: 10x --samples, at least 1,000,000; "
        "capped by Monte Carlo's work guard: a row that cannot get more samples than its "
        "first run is a MISS 'unconfirmed')",
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
        description="Run the agreement suite (prism_analytic.validation): KS distance, quantile "
        "and spread errors, bounds check and timings of the analytic engine against "
        "Monte Carlo on named scenarios.",
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
