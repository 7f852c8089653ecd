"""Analytic compute time of every preset from its smallest GPU count to 1,048,576 GPUs.

For each preset and each GPU count (the preset's unit times powers of 4, plus 1,024 and
1,048,576), builds the step graph and times :func:`~prism_analytic.engines.predict.predict`
(best of ``--repeat`` cold calls, each on a freshly built graph with the schedule and makespan
caches cleared) and,
with ``--verify``, the default CLI cross-check
(:func:`~prism_analytic.engines.crosscheck.verify` with its default budget). Wall time and this
process's CPU time are both recorded (best of the repeats each): on a shared machine the wall
time follows the load, the CPU time much less; the header gives date, commit and load.

Usage::

    python validation/bench_scale.py [--presets a,b] [--repeat R] [--verify] [--json]
                                     [--core-shape SHAPE] [--out validation/results/bench_scale.md]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from prism_analytic.engines.crosscheck import verify
from prism_analytic.engines.pipeline_core import clear_caches
from prism_analytic.engines.predict import predict
from prism_analytic.engines.skew_core import clear_cache as clear_shape_cache
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.config import ConfigError
from prism_analytic.workload.presets import MODELS, allowed_gpu_multiple, preset_job

sys.path.insert(0, str(Path(__file__).parent))
from bench_report import run_stamp, write_report  # noqa: E402

__all__ = ["gpu_counts", "bench", "main"]

TOP = 1_048_576


def gpu_counts(unit: int) -> list[int]:
    """The preset's unit, then x4 steps, plus 1,024 and 1,048,576 (when they are multiples)."""
    out = {unit, TOP}
    g = unit
    while g < TOP:
        out.add(g)
        g *= 4
    if 1024 % unit == 0:
        out.add(1024)
    return sorted(out)


def bench(
    preset: str, gpus: int, repeat: int = 2, check: bool = False, core_shape: str = "auto"
) -> dict:
    """Times of one preset at one GPU count (``None`` fields when the layout does not fit).

    ``core_shape`` is passed to :func:`~prism_analytic.engines.predict.predict` (the pipeline
    cores' shape; ``"auto"`` is what the CLI uses).
    """
    try:
        job = preset_job(preset, gpus)
    except (ConfigError, ValueError) as exc:
        return {"preset": preset, "gpus": gpus, "error": str(exc)}
    times, cpu = [], []
    for _ in range(repeat):
        # every call cold: a fresh graph (its laws memoise their numeric moments) and no
        # schedule or makespan reused from the last call (Gaussian, skew or kurtosis core)
        graph = build_step_graph(job)
        clear_caches()
        clear_shape_cache()
        t0, c0 = time.perf_counter(), time.process_time()
        res = predict(graph, core_shape=core_shape)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    row = {
        "preset": preset,
        "gpus": gpus,
        "microbatches": job.parallelism.microbatches,
        "pipeline_ops": 2 * job.parallelism.pp * job.parallelism.microbatches * job.parallelism.vpp,
        "predict_s": min(times),
        "predict_all_s": times,
        "predict_cpu_s": min(cpu),
        "exact": res.exact,
        "p50_s": float(res.quantile(0.5)),
        "p99_s": float(res.quantile(0.99)),
    }
    if check:
        t0, c0 = time.perf_counter(), time.process_time()
        v = verify(graph, res)
        row["verify_s"] = time.perf_counter() - t0
        row["verify_cpu_s"] = time.process_time() - c0
        row["warning"] = (v.verification or {}).get("warning")
    return row


def main(argv: Sequence[str] | None = None) -> int:
    """``python validation/bench_scale.py``."""
    parser = argparse.ArgumentParser(prog="bench_scale", description=__doc__.split("\n")[0])
    parser.add_argument("--presets", default=",".join(sorted(MODELS)))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--verify", action="store_true", help="also time the CLI cross-check")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--core-shape", default="auto", help="predict's core_shape (default auto)")
    parser.add_argument("--out", type=Path, help="also write the report here (markdown)")
    args = parser.parse_args(argv)
    lines = [run_stamp(), ""]
    lines.append(
        "| preset | GPUs | microbatches | pipeline ops | predict wall s (all) | predict CPU s |"
        + (" verify wall s | verify CPU s |" if args.verify else "")
    )
    lines.append("|---|---|---|---|---|---|" + ("---|---|" if args.verify else ""))
    if not args.json:
        print(lines[0], flush=True)
    rows = []
    for name in args.presets.split(","):
        for gpus in gpu_counts(allowed_gpu_multiple(name)):
            row = bench(name, gpus, args.repeat, args.verify, args.core_shape)
            rows.append(row)
            if "error" in row:
                line = f"| {name} | {gpus:,} | layout does not fit: {row['error'][:60]} |"
            else:
                extra = (
                    f" {row['verify_s']:.2f} | {row['verify_cpu_s']:.2f} |"
                    if "verify_s" in row
                    else ""
                )
                every = ", ".join(f"{t:.2f}" for t in row["predict_all_s"])
                line = (
                    f"| {name} | {gpus:,} | {row['microbatches']} | {row['pipeline_ops']:,} |"
                    f" {row['predict_s']:.3f} ({every})"
                    f" | {row['predict_cpu_s']:.3f} |{extra}"
                )
            lines.append(line)
            if not args.json:
                print(line, flush=True)
    lines.append("")
    lines.append(f"load average {os.getloadavg()[0]:.1f} at the end")
    lines.append("")
    ok = [r for r in rows if "error" not in r]
    for name in args.presets.split(","):
        t = [r["predict_s"] for r in ok if r["preset"] == name]
        c = [r["predict_cpu_s"] for r in ok if r["preset"] == name]
        if t:
            lines.append(
                f"- {name}: wall slowest {max(t):.2f} s, fastest {min(t):.2f} s, ratio"
                f" {max(t) / min(t):.1f}; CPU slowest {max(c):.2f} s, fastest {min(c):.2f} s,"
                f" ratio {max(c) / min(c):.1f}"
            )
            if not args.json:
                print(lines[-1])
    if args.json:
        print(json.dumps(rows, indent=2))
    if args.out is not None:
        write_report(
            args.out,
            "bench_scale: analytic compute time by preset and GPU count",
            "validation/bench_scale.py",
            argv or sys.argv[1:],
            lines,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
