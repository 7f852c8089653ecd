"""``prism demo``: the slowest of N GPUs, each running a chain of lognormal kernels."""

from __future__ import annotations

import argparse
import json
import time

from .argtypes import positive_float, positive_int
from .output import LEVELS, pct

__all__ = ["register"]


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
                    **{f"p{pct(q)}_s": v for q, v in levels.items()},
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
            f"  p{pct(q):<5} {levels[q] * 1e3:10.4f} ms   numerical bracket "
            f"[{low * 1e3:.4f}, {high * 1e3:.4f}] ms"
        )
    print(f"  computed in {elapsed * 1e3:.1f} ms")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``prism demo`` to the command's subparsers."""
    demo = subparsers.add_parser(
        "demo", help="the slowest of 65,536 GPUs each running a kernel chain"
    )
    demo.add_argument("--gpus", type=positive_int, default=65536, help="number of GPUs")
    demo.add_argument("--ops", type=positive_int, default=64, help="kernels per GPU")
    demo.add_argument("--kernel-ms", type=positive_float, default=1.0, help="mean kernel time (ms)")
    demo.add_argument(
        "--cv", type=positive_float, default=0.05, help="kernel coefficient of variation"
    )
    demo.add_argument("--json", action="store_true", help="print JSON")
    demo.set_defaults(func=_cmd_demo)
