"""Benchmark: sweeps and Monte Carlo on dask, 1 worker vs 2 workers vs one process.

1. Sweep throughput: ``--configs`` configurations of llama3-70b and llama3-405b at 16,384 to
   65,536 GPUs (variability settings varied to make up the count), run on a dask
   ``LocalCluster`` with 1 and with 2 single-threaded worker processes. Reports the wall time
   of each, the speed-up, the mean per-configuration compute time, and checks that both runs
   wrote identical rows (every column but the timing).
2. Monte Carlo: ``--samples`` samples of llama3-405b at 65,536 GPUs in one process vs on a
   2-worker cluster (the engine's fixed seeded blocks of 8,192 samples, one block per task
   for short runs); checks the samples are identical. The sampling is exact (512 replicas x
   4,096 pipeline ops, each drawn every sample: about 2.1 million lognormal draws per step),
   so its cost is linear in the samples: the script also prints the time 1e6 samples would
   take at the measured rate when ``--samples`` is smaller (an extrapolation, labelled so).
   ``MonteCarloSettings.max_draws`` is raised for the run (it refuses more than 5e9 draws,
   about 2,300 samples of this job, by default).

The speed-up is only meaningful on a machine whose cores are free: the script prints the
load average before each run so a contended measurement is visible as such.

Usage::

    python validation/bench_sweep.py --configs 1000 --samples 1e6     # the full benchmark
    python validation/bench_sweep.py --skip-sweep --samples 16384     # MC: 2 blocks, 2 tasks
    python validation/bench_sweep.py --configs 40 --skip-mc           # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from prism_analytic.cli.argtypes import positive_int, sample_count
from prism_analytic.sweep import EvalSettings, SweepSpec, parse_set, run_sweep
from prism_analytic.sweep.executor import open_executor


def bench_spec(n: int) -> SweepSpec:
    """``n`` configurations (rounded up to a multiple of 4): 2 presets x 2 GPU counts x cvs."""
    per = -(-n // 4)
    cvs = np.round(np.linspace(0.005, 0.08, per), 6)
    return SweepSpec(
        presets=("llama3-70b", "llama3-405b"),
        gpus=(16384, 65536),
        grid=parse_set(["variability.spatial.cv=" + ",".join(f"{c:g}" for c in cvs)]),
    )


def load() -> str:
    """The 1-minute load average and the CPU count, for the record."""
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def sweep_run(spec: SweepSpec, workers: int, out: Path) -> tuple[float, pd.DataFrame]:
    out.unlink(missing_ok=True)
    with open_executor("dask", workers) as ex:
        # warm the workers (imports) so that the timing is of the sweep, not of start-up
        list(ex.map(abs, range(workers * 4)))
        start = time.perf_counter()
        outcome = run_sweep(spec, EvalSettings(), out, executor=ex)
        wall = time.perf_counter() - start
    assert not outcome.lost, outcome.lost
    return wall, pd.read_csv(out, dtype={"config_id": str})


def mc_run(samples: int, workers: int | None) -> tuple[float, np.ndarray]:
    """Wall time and samples of the Monte Carlo of llama3-405b at 65,536 GPUs (seed 0)."""
    from prism_analytic.engines.montecarlo import MonteCarloSettings, estimated_draws
    from prism_analytic.engines.predict import predict
    from prism_analytic.workload.builder import build_step_model
    from prism_analytic.workload.jobs import build_job

    graph = build_step_model(build_job("llama3-405b", 65536)).graph
    # the default work guard (5e9 draws) refuses this benchmark on purpose; lift it here
    draws = estimated_draws(graph, samples, MonteCarloSettings())
    settings = MonteCarloSettings(seed=0, max_draws=max(draws, MonteCarloSettings().max_draws))
    if workers is None:
        start = time.perf_counter()
        res = predict(graph, "montecarlo", samples=samples, mc_settings=settings)
        return time.perf_counter() - start, res.distribution.samples
    with open_executor("dask", workers) as ex:
        list(ex.map(abs, range(workers * 4)))
        start = time.perf_counter()
        res = predict(graph, "montecarlo", samples=samples, mc_settings=settings, executor=ex)
        return time.perf_counter() - start, res.distribution.samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", type=positive_int, default=1000)
    ap.add_argument("--samples", type=sample_count, default=10**6)
    ap.add_argument("--skip-sweep", action="store_true")
    ap.add_argument("--skip-mc", action="store_true")
    ap.add_argument("--out", default="bench_sweep_tables", help="folder for the sweep tables")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args()
    results: dict[str, object] = {}
    folder = Path(args.out)
    folder.mkdir(exist_ok=True)
    if not args.skip_sweep:
        spec = bench_spec(args.configs)
        print(f"sweep of {len(spec)} configurations (llama3-70b/405b at 16,384 and 65,536 GPUs)")
        walls, tables = {}, {}
        for w in (1, 2):
            print(f"  {w} worker(s), {load()} ...", flush=True)
            walls[w], tables[w] = sweep_run(spec, w, folder / f"sweep_{w}w.csv")
            print(f"  {w} worker(s): {walls[w]:.1f} s, {len(spec) / walls[w]:.2f} configs/s")
        a, b = (t.drop(columns=["compute_time_s"]) for t in (tables[1], tables[2]))
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        per = tables[1]["compute_time_s"]
        results["sweep"] = {
            "configurations": len(spec),
            "wall_1_worker_s": walls[1],
            "wall_2_workers_s": walls[2],
            "speedup": walls[1] / walls[2],
            "per_config_s_mean": float(per.mean()),
            "per_config_s_median": float(per.median()),
            "rows_identical": True,
            "statuses": tables[1]["status"].value_counts().to_dict(),
        }
        print(
            f"  speed-up 2 vs 1 worker: {walls[1] / walls[2]:.2f}x; per configuration"
            f" {per.mean():.2f} s mean, {per.median():.2f} s median; rows identical"
        )
    if not args.skip_mc:
        print(f"Monte Carlo, {args.samples:,} samples of llama3-405b at 65,536 GPUs")
        print(f"  one process, {load()} ...", flush=True)
        t1, s1 = mc_run(args.samples, None)
        print(f"  one process: {t1:.1f} s")
        print(f"  2-worker cluster, {load()} ...", flush=True)
        t2, s2 = mc_run(args.samples, 2)
        print(f"  2-worker cluster: {t2:.1f} s; speed-up {t1 / t2:.2f}x")
        same = bool(np.array_equal(s1, s2))
        print(f"  samples identical: {same}")
        full = 10**6
        results["montecarlo"] = {
            "samples": args.samples,
            "one_process_s": t1,
            "two_workers_s": t2,
            "speedup": t1 / t2,
            "identical": same,
            "samples_per_s_one_process": args.samples / t1,
            "samples_per_s_two_workers": args.samples / t2,
            "p95_s": float(np.quantile(s1, 0.95)),
        }
        if args.samples < full:
            # linear in the samples (fixed blocks, no pools): an extrapolation, not a measurement
            e1, e2 = t1 * full / args.samples, t2 * full / args.samples
            results["montecarlo"]["extrapolated_1e6"] = {"one_process_s": e1, "two_workers_s": e2}
            print(
                f"  extrapolated to 1e6 samples at these rates: one process {e1 / 3600:.1f} h,"
                f" 2 workers {e2 / 3600:.1f} h (not measured)"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
