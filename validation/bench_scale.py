"""Analytic compute time of every preset from its smallest GPU count to 1,048,576 GPUs.

For each preset and each GPU count (the preset's unit times powers of 4, plus 1,024 and
1,048,576), builds the step graph and times :func:`~prism_analytic.engines.predict.predict`
(best of ``--repeat`` cold calls: the schedule and makespan caches are cleared before each) and,
with ``--verify``, the default CLI cross-check
(:func:`~prism_analytic.engines.crosscheck.verify` with its default budget).

Usage::

    python validation/bench_scale.py [--presets a,b] [--repeat R] [--verify] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from prism_analytic.engines.crosscheck import verify
from prism_analytic.engines.pipeline_core import clear_caches
from prism_analytic.engines.predict import predict
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.config import ConfigError
from prism_analytic.workload.presets import MODELS, allowed_gpu_multiple, preset_job

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


def bench(preset: str, gpus: int, repeat: int = 2, check: bool = False) -> dict:
    """Times of one preset at one GPU count (``None`` fields when the layout does not fit)."""
    try:
        job = preset_job(preset, gpus)
    except (ConfigError, ValueError) as exc:
        return {"preset": preset, "gpus": gpus, "error": str(exc)}
    graph = build_step_graph(job)
    times = []
    for _ in range(repeat):
        clear_caches()  # every call cold: no schedule or makespan reused from the last one
        t0 = time.perf_counter()
        res = predict(graph)
        times.append(time.perf_counter() - t0)
    row = {
        "preset": preset,
        "gpus": gpus,
        "microbatches": job.parallelism.microbatches,
        "pipeline_ops": 2 * job.parallelism.pp * job.parallelism.microbatches * job.parallelism.vpp,
        "predict_s": min(times),
        "predict_all_s": times,
        "exact": res.exact,
        "p50_s": float(res.quantile(0.5)),
        "p99_s": float(res.quantile(0.99)),
    }
    if check:
        t0 = time.perf_counter()
        v = verify(graph, res)
        row["verify_s"] = time.perf_counter() - t0
        row["warning"] = (v.verification or {}).get("warning")
    return row


def main(argv: Sequence[str] | None = None) -> int:
    """``python validation/bench_scale.py``."""
    parser = argparse.ArgumentParser(prog="bench_scale", description=__doc__.split("\n")[0])
    parser.add_argument("--presets", default=",".join(sorted(MODELS)))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--verify", action="store_true", help="also time the CLI cross-check")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for name in args.presets.split(","):
        for gpus in gpu_counts(allowed_gpu_multiple(name)):
            row = bench(name, gpus, args.repeat, args.verify)
            rows.append(row)
            if not args.json:
                if "error" in row:
                    print(f"{name:14s} {gpus:>9,d}  (layout does not fit: {row['error'][:60]})")
                    continue
                extra = f"  verify {row['verify_s']:.2f} s" if "verify_s" in row else ""
                print(
                    f"{name:14s} {gpus:>9,d}  mb {row['microbatches']:>4d}  ops "
                    f"{row['pipeline_ops']:>6,d}  predict {row['predict_s']:.2f} s"
                    f"  [{', '.join(f'{t:.2f}' for t in row['predict_all_s'])}]{extra}",
                    flush=True,
                )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        ok = [r for r in rows if "error" not in r]
        for name in args.presets.split(","):
            t = [r["predict_s"] for r in ok if r["preset"] == name]
            if t:
                print(
                    f"{name}: slowest {max(t):.2f} s, fastest {min(t):.2f} s, "
                    f"ratio {max(t) / min(t):.1f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
