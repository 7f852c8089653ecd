"""Bounds engine on deep pipelines: time and distance of the bounds from Monte Carlo.

For each pipeline (the agreement suite's laws: F 1, B 2 per chunk, normal, CV 5%), compact and
op by op, times :func:`~prism_analytic.engines.predict.predict` with ``method="bounds"``
(wall and CPU time of this process) and compares the guaranteed lower and upper quantiles with
a Monte Carlo reference (``--samples``, 99.9% order-statistic interval): both must contain it,
and the acceptance asks the upper p99 to be within 10% of it and the whole run within 2 s.

Usage::

    python validation/bench_bounds.py [--samples N] [--out validation/results/bench_bounds.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from prism_analytic.engines.predict import predict
from prism_analytic.graph import GraphError
from prism_analytic.validation.scenarios import compact_pipeline, pipeline

sys.path.insert(0, str(Path(__file__).parent))
from bench_report import run_stamp, write_report  # noqa: E402

__all__ = ["CASES", "main"]

#: (stages, microbatches, schedule, vpp) of the pipelines measured.
CASES = (
    (16, 64, "1f1b", 1),
    (16, 64, "interleaved", 2),
    (32, 64, "1f1b", 1),
    (32, 64, "interleaved", 2),
)
LEVELS = (0.5, 0.99)


def main(argv: Sequence[str] | None = None) -> int:
    """``python validation/bench_bounds.py``."""
    parser = argparse.ArgumentParser(prog="bench_bounds", description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--out", type=Path, help="also write the report here (markdown)")
    args = parser.parse_args(argv)
    if args.samples < 1000:
        parser.error("--samples must be >= 1000")
    lines = [
        f"{run_stamp()}; Monte Carlo {args.samples:,} samples",
        "",
        "| pipeline | form | bounds wall s | bounds CPU s | level | lower | MC (99.9% CI) | upper"
        " | lower vs MC | upper vs MC |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    print(lines[0], flush=True)
    for p, m, schedule, vpp in CASES:
        mc = predict(compact_pipeline(p, m, schedule, vpp), "montecarlo", samples=args.samples)
        for form, build in (("compact", compact_pipeline), ("op by op", pipeline)):
            graph = build(p, m, schedule, vpp)
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                res = predict(graph, "bounds")
            except GraphError as exc:  # predict's size guard (MAX_GRID_NODES)
                lines.append(f"| {schedule} {p}x{m} | {form} | refused: {exc} |")
                print(lines[-1], flush=True)
                continue
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            for q in LEVELS:
                low, high = res.quantile_bracket(q)
                ref = float(mc.quantile(q))
                a, b = mc.quantile_bracket(q, 0.999)
                ok = "" if low <= a and b <= high else " **NOT CONTAINED**"
                lines.append(
                    f"| {schedule} {p}x{m}{f' vpp {vpp}' if vpp > 1 else ''} | {form} |"
                    f" {wall:.2f} | {cpu:.2f} | p{100 * q:g} | {low:.3f} | {ref:.3f}"
                    f" ({a:.3f}, {b:.3f}) | {high:.3f} | {100 * (low / ref - 1):+.2f}% |"
                    f" {100 * (high / ref - 1):+.2f}%{ok} |"
                )
                print(lines[-1], flush=True)
    lines += ["", f"load average {os.getloadavg()[0]:.1f} at the end"]
    if args.out is not None:
        write_report(
            args.out,
            "bench_bounds: the bounds engine on deep pipelines",
            "validation/bench_bounds.py",
            argv or sys.argv[1:],
            lines,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
