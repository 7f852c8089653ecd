"""Run time: analytic quantiles vs a Monte Carlo of whole runs (persistent allocation).

Usage: ``python validation/runtime_agreement.py [--preset llama3-405b] [--gpus 16384]
[--steps 10000] [--runs 1000]``. Prints the analytic and Monte Carlo p50/p95/p99 of the run
time (steps only) and their relative differences, with the Monte Carlo quantiles' 95%
order-statistic intervals.
"""

import argparse
import time

import numpy as np
from scipy import stats

from prism_analytic.analyses.decompose import decompose
from prism_analytic.analyses.runtime import run_time, simulate_runs
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.jobs import build_job


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="llama3-405b")
    ap.add_argument("--gpus", type=int, default=16384)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=1000)
    a = ap.parse_args()
    parts = decompose(build_step_graph(build_job(a.preset, a.gpus)))
    t = time.perf_counter()
    rt = run_time(parts, a.steps, gpus=a.gpus)
    ta = time.perf_counter() - t
    t = time.perf_counter()
    sims = np.sort(simulate_runs(parts, a.steps, a.runs, seed=7))
    tm = time.perf_counter() - t
    print(
        f"{a.preset}@{a.gpus}, {a.steps:,} steps: analytic {ta:.2f} s, Monte Carlo of"
        f" {a.runs} whole runs {tm:.1f} s"
    )
    for q in (0.5, 0.95, 0.99):
        qa, qm = float(rt.quantile(q)), float(np.quantile(sims, q))
        lo = stats.binom.ppf(0.025, a.runs, q).astype(int)
        hi = min(int(stats.binom.ppf(0.975, a.runs, q)), a.runs - 1)
        print(
            f"  p{round(q * 100)}: analytic {qa / 3600:.4f} h, MC {qm / 3600:.4f} h"
            f" [{sims[lo] / 3600:.4f}, {sims[hi] / 3600:.4f}], diff {100 * (qa / qm - 1):+.3f}%"
        )


if __name__ == "__main__":
    main()
