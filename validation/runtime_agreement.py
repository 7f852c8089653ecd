"""Run time with failures: ``prism runtime``'s law vs an independent Monte Carlo of whole runs.

Usage: ``python validation/runtime_agreement.py [--runs 4000] [--work-runs 300]
[--out validation/results/runtime_agreement.md]``.

For every scenario (llama3-405b at 16,384 to 1,048,576 GPUs with the default failure rate;
llama3-8b on 8 GPUs at 0.01 to 10 failures per GPU-hour, from a job MTBF far above the
restart time to far below it; frequent fail-slow episodes; the hostile inputs of the
run-time issue) it computes the law
the CLI prints (:func:`~prism_analytic.analyses.runtime.run_time`) and a Monte Carlo of whole
runs that shares nothing with it but the model:

* the work ``W`` of a run: :func:`~prism_analytic.analyses.runtime.simulate_runs` (one
  allocation per run, every step drawn), ``--work-runs`` of them, each reused for
  ``runs / work-runs`` failure histories (the mean's interval treats the work draws as
  clusters);
* the failures, restarts and checkpoints of each run:
  :func:`~prism_analytic.analyses.renewal_mc.simulate_walls` (per segment, Geometric counts
  of failed attempts and their lost times) and, where a run has few enough events,
  :func:`~prism_analytic.analyses.renewal_mc.simulate_walls_events` (every failure played).

Writes a Markdown table: the analytic mean and ``interruptions.expected_wall_s``, the Monte
Carlo mean with its 95% interval, their relative difference, and p1/p50/p99 against the
Monte Carlo quantiles with 95% order-statistic intervals.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from prism_analytic.analyses.decompose import decompose
from prism_analytic.analyses.interruptions import Interruptions
from prism_analytic.analyses.renewal_mc import simulate_walls, simulate_walls_events
from prism_analytic.analyses.runtime import run_time, simulate_runs
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.jobs import build_job

LEVELS = (0.01, 0.5, 0.99)

#: (label, preset, gpus, steps, Interruptions keyword overrides)
SCENARIOS: list[tuple[str, str, int, int, dict[str, float]]] = [
    ("405b@16k default", "llama3-405b", 16_384, 100_000, {}),
    ("405b@64k default", "llama3-405b", 65_536, 100_000, {}),
    ("405b@256k default", "llama3-405b", 262_144, 100_000, {}),
    ("405b@1M default", "llama3-405b", 1_048_576, 100_000, {}),
    *[
        (f"8b@8 rate {r:g}", "llama3-8b", 8, 10_000, {"failure_rate": r})
        for r in (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
    ],
    ("8b@8 ckpt cost 1e9", "llama3-8b", 8, 10_000, {"checkpoint_cost_s": 1e9}),
    ("8b@8 interval 1e12", "llama3-8b", 8, 10_000, {"checkpoint_interval_s": 1e12}),
    ("8b@8 rate 1 restart 0", "llama3-8b", 8, 10_000, {"failure_rate": 1.0, "restart_s": 0}),
    ("8b@8 rate 0.1 ckpt 0", "llama3-8b", 8, 10_000, {"failure_rate": 0.1, "checkpoint_cost_s": 0}),
    (
        "8b@8 rate 1 fail-slow 0.03",
        "llama3-8b",
        8,
        10_000,
        {"failure_rate": 1.0, "failslow_rate": 0.03},
    ),
    ("8b@1 default", "llama3-8b", 1, 2_000, {}),
]

#: inputs whose answer is inf (no float holds it): checked for a clean inf, no Monte Carlo
INFINITE: list[tuple[str, str, int, int, dict[str, float]]] = [
    ("8b@8 rate 1e6", "llama3-8b", 8, 10_000, {"failure_rate": 1e6}),
    ("8b@8 restart 1e12", "llama3-8b", 8, 10_000, {"restart_s": 1e12}),
]


def _quantile_interval(clustered: np.ndarray, q: float, rng: np.random.Generator) -> tuple:
    """95% interval of the ``q`` quantile: bootstrap over the work draws (clusters, rows)."""
    k = clustered.shape[0]
    boots = [np.quantile(clustered[rng.integers(0, k, k)].ravel(), q) for _ in range(400)]
    return float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def _scenario(
    preset: str, gpus: int, steps: int, over: dict[str, float], runs: int, work_runs: int
) -> dict[str, Any]:
    job = build_job(preset, gpus)
    parts = decompose(build_step_graph(job))
    intr = Interruptions(**over)
    t = time.perf_counter()
    rt = run_time(parts, steps, interruptions=intr, gpus=gpus)
    t_an = time.perf_counter() - t
    d = rt.to_dict()
    info = d["interruptions"]
    t = time.perf_counter()
    work = simulate_runs(parts, steps, work_runs, seed=11, t_cells=800)
    reps = max(runs // work_runs, 1)
    w = np.repeat(work, reps)
    tau = info["checkpoint_interval_s"]
    tau = math.inf if tau is None else tau
    walls = simulate_walls(w, tau, intr, gpus, rng=12)
    t_mc = time.perf_counter() - t
    # events per run: segments + failures (+ failed restarts); play them all when few
    lam = intr.failure_rate * gpus / 3600
    events = (0 if math.isinf(tau) else w.mean() / tau) + lam * info["expected_wall_s"] * 3
    ev = None
    if events < 3e4:
        ev = simulate_walls_events(w[: min(w.size, 2000)], tau, intr, gpus, rng=13)
    clusters = walls.reshape(work_runs, reps).mean(axis=1)
    half = 1.96 * clusters.std(ddof=1) / math.sqrt(work_runs)
    return {
        "rt": d,
        "x": rt.x,
        "cdf": rt.cdf_values,
        "walls": walls.reshape(work_runs, reps),
        "work_diff": d["work"]["mean_s"] / float(work.mean()) - 1,
        "events": None if ev is None else np.sort(ev),
        "half": half,
        "t_an": t_an,
        "t_mc": t_mc,
        "mtbf_over_restart": (3600 / (intr.failure_rate * gpus)) / max(intr.restart_s, 1e-300),
    }


def _fmt_h(x: float) -> str:
    return f"{x / 3600:.5g}"


def main() -> None:
    """Run every scenario and write the table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=4000)
    ap.add_argument("--work-runs", type=int, default=200)
    ap.add_argument("--only", default=None, help="run only scenarios whose label has this")
    ap.add_argument("--out", default="validation/results/runtime_agreement.md")
    a = ap.parse_args()
    rows, qrows, worst = [], [], 0.0
    for label, preset, gpus, steps, over in SCENARIOS:
        if a.only and a.only not in label:
            continue
        # one GPU: the 1% of runs on a degraded GPU form a separate mode at p99, which a
        # few hundred work draws cannot place (and they are cheap there)
        work_runs = a.work_runs if gpus > 1 else 4000
        r = _scenario(preset, gpus, steps, over, max(a.runs, work_runs), work_runs)
        d, clustered = r["rt"], r["walls"]
        walls = clustered.ravel()
        mc_mean = float(walls.mean())
        diff = d["mean_s"] / mc_mean - 1
        within = abs(d["mean_s"] - mc_mean) <= r["half"]
        worst = max(worst, abs(diff))
        ev = r["events"]
        ev_txt = "" if ev is None else f"{100 * (d['mean_s'] / ev.mean() - 1):+.2f}%"
        rows.append(
            f"| {label} | {r['mtbf_over_restart']:.3g} | {_fmt_h(d['mean_s'])} |"
            f" {_fmt_h(d['interruptions']['expected_wall_s'])} | {_fmt_h(mc_mean)}"
            f" ± {r['half'] / 3600:.3g} | {100 * diff:+.3f}% | {'yes' if within else 'NO'} |"
            f" {ev_txt} | {100 * r['work_diff']:+.3f}% | {r['t_an']:.1f} / {r['t_mc']:.1f} |"
        )
        cells = []
        for q in LEVELS:
            qa = d[f"p{round(q * 100)}_s"]
            lo, hi = _quantile_interval(clustered, q, np.random.default_rng(5))
            inside = lo <= qa <= hi
            # the analytic CDF at the Monte Carlo quantile: the level the law gives it
            level = float(np.interp(np.quantile(walls, q), r["x"], r["cdf"]))
            cells.append(
                f"{_fmt_h(qa)} vs {_fmt_h(float(np.quantile(walls, q)))} [{_fmt_h(lo)},"
                f" {_fmt_h(hi)}] {'ok' if inside else 'OUT'} (F = {level:.4f})"
            )
        ordered = d["p99_s"] >= d["p50_s"] >= d["p1_s"]
        qrows.append(f"| {label} | " + " | ".join(cells) + f" | {'yes' if ordered else 'NO'} |")
        print(rows[-1], flush=True)
        print(qrows[-1], flush=True)
    inf_rows = []
    for label, preset, gpus, steps, over in INFINITE:
        if a.only and a.only not in label:
            continue
        d = run_time(build_job(preset, gpus), steps, interruptions=Interruptions(**over)).to_dict()
        i = d["interruptions"]
        inf_rows.append(
            f"| {label} | {d['mean_s']} | {_fmt_h(d['p1_s'])} | {_fmt_h(d['p50_s'])} |"
            f" {_fmt_h(d['p99_s'])} | {i['p_run_beyond_floats']:.4g} | {i.get('note', '')} |"
        )
        print(inf_rows[-1], flush=True)
    text = "\n".join(
        [
            "# Run time with failures: analytic law vs whole-run Monte Carlo",
            "",
            "Written by `python validation/runtime_agreement.py"
            f" --runs {a.runs} --work-runs {a.work_runs}`. Hours. MTBF/R: the job's mean time"
            " between failures over the restart time (below 1: failures come faster than a"
            " restart completes). Monte Carlo: the work of each run from `simulate_runs` (every"
            f" step drawn; {a.work_runs} runs, each reused for {a.runs // a.work_runs} failure"
            " histories), failures/restarts/checkpoints from `renewal_mc.simulate_walls`;"
            " `events`: the analytic mean against the every-event simulation (2,000 runs),"
            " where a run has under 30,000 events. The mean's 95% interval treats the work"
            " draws as clusters; `work diff`: the analytic work mean against the mean of the"
            " simulated works (the share of `diff` the steps alone explain; the same draws"
            " serve every scenario of a job). One GPU: 4,000 work draws, one failure history"
            " each. At 95%, about one row in twenty falls outside its interval by chance.",
            "",
            "| scenario | MTBF/R | mean | expected_wall | MC mean ± 95% | diff | within |"
            " events | work diff | analytic / MC s |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"Largest |mean difference|: {100 * worst:.3f}%.",
            "",
            "Quantiles: analytic vs Monte Carlo [95% interval, bootstrap over the work draws];"
            " F: the analytic CDF at the Monte Carlo quantile (where the CDF is flat, as at"
            " p99 on one GPU, whose 1% of runs on a degraded GPU form a separate mode, a"
            " quantile moves far for a small change of level: F is the fairer comparison).",
            "",
            "| scenario | p1 | p50 | p99 | p99 >= p50 >= p1 |",
            "|---|---|---|---|---|",
            *qrows,
            "",
            "Inputs whose mean run time no float holds (JSON prints inf as null; p1/p50/p99"
            " in hours, finite where the runs without a failure reach that level):",
            "",
            "| scenario | mean_s | p1 | p50 | p99 | P(run beyond floats) | note |",
            "|---|---|---|---|---|---|---|",
            *inf_rows,
            "",
        ]
    )
    if not a.only:
        Path(a.out).write_text(text)
        print(f"written to {a.out}")


if __name__ == "__main__":
    main()
