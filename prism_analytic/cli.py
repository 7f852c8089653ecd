"""The ``prism`` command line: argparse subcommands over the library."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

__all__ = ["main", "build_parser", "positive_int", "positive_float", "sample_count"]

LEVELS = (0.5, 0.9, 0.99, 0.999)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def sample_count(text: str) -> int:
    """A Monte Carlo sample count (>= 2); accepts scientific notation such as ``1e5``."""
    try:
        value = float(text) if "e" in text.lower() else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value != int(value) or value < 2:
        raise argparse.ArgumentTypeError(f"expected an integer >= 2, got {text}")
    return int(value)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {text}")
    return value


def _cmd_demo(args: argparse.Namespace) -> int:
    """The slowest of N GPUs, each running a chain of lognormal kernels."""
    import prism_analytic as pa

    start = time.perf_counter()
    kernel = pa.lognormal(args.kernel_ms * 1e-3, args.kernel_ms * 1e-3 * args.cv)
    chain = pa.iid_sum(kernel, args.ops)
    step = pa.iid_max(chain, args.gpus)
    levels = {q: step.quantile(q) for q in LEVELS}
    brackets = {q: step.quantile_bracket(q) for q in LEVELS}
    elapsed = time.perf_counter() - start
    if args.json:
        print(
            json.dumps(
                {
                    "gpus": args.gpus,
                    "ops": args.ops,
                    "kernel_mean_s": args.kernel_ms * 1e-3,
                    "kernel_cv": args.cv,
                    "mean_s": step.mean(),
                    "std_s": step.std(),
                    **{f"p{_pct(q)}_s": v for q, v in levels.items()},
                    "bracket": {str(q): list(b) for q, b in brackets.items()},
                    "one_gpu_p50_s": chain.quantile(0.5),
                    "compute_time_s": elapsed,
                },
                indent=2,
            )
        )
        return 0
    print(
        f"Slowest of {args.gpus:,} GPUs, each running {args.ops} kernels "
        f"(lognormal, mean {args.kernel_ms:g} ms, CV {args.cv:.1%})."
    )
    print(f"  one GPU's chain: median {chain.quantile(0.5) * 1e3:.4f} ms")
    print(
        f"  the step (max over GPUs): mean {step.mean() * 1e3:.4f} ms, "
        f"std {step.std() * 1e3:.4f} ms"
    )
    for q in LEVELS:
        low, high = brackets[q]
        print(
            f"  p{_pct(q):<5} {levels[q] * 1e3:10.4f} ms   numerical bracket "
            f"[{low * 1e3:.4f}, {high * 1e3:.4f}] ms"
        )
    print(f"  computed in {elapsed * 1e3:.1f} ms")
    return 0


def _pct(q: float) -> str:
    return f"{q * 100:g}".replace(".", "")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``prism`` command."""
    parser = argparse.ArgumentParser(
        prog="prism",
        description="Analytic distributions of distributed-training step time at any scale.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    demo = sub.add_parser("demo", help="the slowest of 65,536 GPUs each running a kernel chain")
    demo.add_argument("--gpus", type=positive_int, default=65536, help="number of GPUs")
    demo.add_argument("--ops", type=positive_int, default=64, help="kernels per GPU")
    demo.add_argument("--kernel-ms", type=positive_float, default=1.0, help="mean kernel time (ms)")
    demo.add_argument(
        "--cv", type=positive_float, default=0.05, help="kernel coefficient of variation"
    )
    demo.add_argument("--json", action="store_true", help="print JSON")
    demo.set_defaults(func=_cmd_demo)

    from . import agreement_cli, predict_cli

    agreement_cli.register(sub)
    predict_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``prism`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"prism {args.command}: error: {exc}", file=sys.stderr)
        return 2
