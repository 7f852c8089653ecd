"""Analytic vs Monte Carlo: agreement of quantiles and time to answer, on preset jobs."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .common import Timer, entry, plt, save

NAME = "analytic_vs_montecarlo"
CLAIM = (
    "PRISM samples the DAG by Monte Carlo (N = 1000 per scenario); this project computes the "
    "same law analytically: agreement and speed"
)
LEVELS = (0.5, 0.95, 0.99)


def make(out_dir: str | Path, data_root: str | Path | None = None, tiny: bool = False) -> dict:
    """Relative quantile differences (with Monte Carlo's 95% interval) and wall times."""
    from ..engines.predict import predict
    from ..workload.builder import build_step_graph
    from ..workload.jobs import build_job

    t = Timer()
    cases = (
        [("llama3-8b", 64)]
        if tiny
        else [("llama3-8b", 1024), ("llama3-8b", 65536), ("llama3-70b", 1024)]
    )
    samples = 1000 if tiny else 5000
    rows = []
    for preset, n in cases:
        g = build_step_graph(build_job(preset, n))
        s = time.perf_counter()
        a = predict(g)
        ta = time.perf_counter() - s
        s = time.perf_counter()
        m = predict(g, "montecarlo", samples=samples, seed=1)
        tm = time.perf_counter() - s
        err, lo, hi = [], [], []
        for q in LEVELS:
            qa, qm = float(a.quantile(q)), float(m.quantile(q))
            b = m.quantile_bracket(q)
            err.append(qa / qm - 1)
            lo.append(float(b[0]) / qm - 1)
            hi.append(float(b[1]) / qm - 1)
        x = np.sort(np.asarray(m.distribution.samples))
        ks = float(np.max(np.abs(a.cdf(x) - np.arange(1, x.size + 1) / x.size)))
        rows.append(
            {
                "job": f"{preset}@{n}",
                "rel_err": err,
                "mc_ci_lo": lo,
                "mc_ci_hi": hi,
                "analytic_s": ta,
                "montecarlo_s": tm,
                "ks": ks,
            }
        )
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(10, 3.8))
    w = 0.8 / len(rows)
    for i, r in enumerate(rows):
        xs = np.arange(len(LEVELS)) + (i - (len(rows) - 1) / 2) * w
        e = 100 * np.array(r["rel_err"])
        yerr = 100 * np.array(
            [np.array(r["rel_err"]) - r["mc_ci_lo"], np.array(r["mc_ci_hi"]) - r["rel_err"]]
        )
        a1.bar(xs, e, w, label=r["job"])
        a1.errorbar(xs, e, yerr=np.abs(yerr), fmt="none", ecolor="k", capsize=2, lw=0.8)
    a1.axhline(0, color="k", lw=0.6)
    a1.set_ylim(-0.8, 0.8)  # an interval crossing the rare-hiccup jump runs off the axis
    a1.set_xticks(range(len(LEVELS)), [f"p{round(q * 100)}" for q in LEVELS])
    a1.set_ylabel("analytic / Monte Carlo - 1 (%)")
    a1.set_title(f"vs Monte Carlo ({samples:,} steps); whiskers: MC 95% interval")
    a1.grid(axis="y", alpha=0.3)
    a1.legend(fontsize=7)
    names = [r["job"] for r in rows]
    a2.barh(
        np.arange(len(rows)) + 0.2,
        [r["montecarlo_s"] for r in rows],
        0.4,
        label=f"Monte Carlo, {samples:,} samples",
    )
    a2.barh(np.arange(len(rows)) - 0.2, [r["analytic_s"] for r in rows], 0.4, label="analytic")
    a2.set_yticks(range(len(rows)), names, fontsize=8)
    a2.set_xscale("log")
    a2.set_xlabel("wall time (s, log)")
    a2.set_title("time to the step-time law")
    a2.grid(axis="x", alpha=0.3, which="both")
    a2.legend(fontsize=7)
    path = save(fig, out_dir, NAME)
    return entry(
        NAME, path, CLAIM, {"samples": samples, "cases": rows}, "workload model (no data)", t()
    )
