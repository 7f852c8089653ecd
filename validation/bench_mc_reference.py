"""A large explicit Monte Carlo reference for the accuracy side of ``bench_workload.py``.

Samples ``--samples`` (16,384) steps of one preset job (llama3-405b on 65,536 GPUs) with every
replica explicit (``explicit_limit >= dp``: the same sampler and semantics that
``bench_workload.py`` times for its 1,000-sample PRISM-style run), under a *different* seed
(1; the timed run uses 0), so that the reference is independent of the 1,000 samples it is
compared with. Writes the sorted draws (``.npz``) and a JSON summary (quantiles with
distribution-free 99% order-statistic intervals, time, load, commit).

Cost: linear in the samples (~2.1 M lognormal draws a sample; 16,384 samples took 426 s on one
idle core in ``bench_sweep.py``), so this is run once and its file reused.

Usage::

    nice python validation/bench_mc_reference.py [--samples N] [--seed S] [--out PREFIX]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import stats

from prism_analytic.engines.montecarlo import MonteCarloSettings
from prism_analytic.engines.predict import predict
from prism_analytic.graph import StepGraph
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.presets import preset_job

__all__ = ["LEVELS", "fingerprint", "order_stat_interval", "reference", "main"]

#: Quantile levels summarised (the ones ``bench_workload.py`` compares).
LEVELS = (0.05, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99)
DEFAULT_OUT = Path(__file__).parent / "results" / "bench_mc_reference"


def order_stat_interval(
    sorted_draws: np.ndarray, q: float, conf: float = 0.99
) -> tuple[float | None, float | None]:
    """Distribution-free interval for the ``q`` quantile from order statistics.

    The number of draws below the true quantile is Binomial(n, q); the interval
    ``[x_(lo), x_(hi)]`` with ``lo, hi`` the binomial's ``(1 -+ conf) / 2`` quantiles covers it
    with probability >= ``conf`` for any continuous law (the usual conservative construction).
    ``None`` stands for an unbounded end (too few draws beyond the level).
    """
    n = sorted_draws.size
    lo = int(stats.binom.ppf((1 - conf) / 2, n, q))
    hi = int(stats.binom.ppf((1 + conf) / 2, n, q)) + 1
    low = float(sorted_draws[lo - 1]) if lo >= 1 else None
    high = float(sorted_draws[hi - 1]) if hi <= n else None
    return low, high


def fingerprint(graph: StepGraph) -> str:
    """A short hash of the step graph's JSON: a reference only stands for the graph it sampled.

    Model defaults change between commits (e.g. a GEMM efficiency); ``bench_workload.py``
    compares this with the graph it times and refuses a stale reference.
    """
    return hashlib.sha256(graph.to_json().encode()).hexdigest()[:16]


def commit() -> str:
    """The repository's HEAD (short), or ``"unknown"``."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def reference(preset: str, gpus: int, samples: int, seed: int) -> tuple[np.ndarray, dict]:
    """Sorted draws and a summary of an explicit-replica Monte Carlo run."""
    graph = build_step_graph(preset_job(preset, gpus))
    dp = graph.node("replicas")["n"]
    settings = MonteCarloSettings(
        explicit_limit=max(dp, MonteCarloSettings().explicit_limit),
        seed=seed,
        max_draws=10**13,  # the default guard refuses ~2,300 samples of this job
    )
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    mc = predict(graph, "montecarlo", samples=samples, mc_settings=settings)
    wall = time.perf_counter() - t0
    draws = np.sort(np.asarray(mc.distribution.samples, dtype=float))
    summary = {
        "preset": preset,
        "gpus": gpus,
        "dp": dp,
        "samples": samples,
        "seed": seed,
        "graph_sha256_16": fingerprint(graph),
        "pooled_groups": len(mc.diagnostics["pooled_groups"]),
        "wall_s": wall,
        "load_before": load0,
        "load_after": os.getloadavg()[0],
        "date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
        "commit": commit(),
        "mean_s": float(draws.mean()),
        "std_s": float(draws.std(ddof=1)),
        "quantiles": {
            f"{q:g}": {
                "value": float(np.quantile(draws, q)),
                "ci99": order_stat_interval(draws, q),
            }
            for q in LEVELS
        },
    }
    return draws, summary


def main(argv: Sequence[str] | None = None) -> int:
    """``python validation/bench_mc_reference.py``."""
    parser = argparse.ArgumentParser(prog="bench_mc_reference", description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="llama3-405b")
    parser.add_argument("--gpus", type=int, default=65536)
    parser.add_argument("--samples", type=int, default=16384)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="path prefix (.npz/.json)")
    args = parser.parse_args(argv)
    if args.samples < 2 or args.seed < 0:
        parser.error("--samples must be >= 2 and --seed >= 0")
    draws, summary = reference(args.preset, args.gpus, args.samples, args.seed)
    np.savez_compressed(args.out.with_suffix(".npz"), draws=draws)
    args.out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
