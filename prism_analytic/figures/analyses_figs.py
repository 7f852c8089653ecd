"""Figures of the analyses: slow-down vs scale, placement, kernel ranking, cross-DC, run time."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from .common import Timer, entry, plt, save

__all__ = ["make_slowdown", "make_placement", "make_sensitivity", "make_crossdc", "make_runtime"]

MODEL = "workload model (presets; variability defaults measured on gpu_variability and MLPerf)"


def make_slowdown(out_dir: str | Path, data_root=None, tiny: bool = False) -> dict:
    """P(step > (1 + theta) x deterministic step) against theta and against scale."""
    from ..engines.predict import predict
    from ..workload.builder import build_step_graph
    from ..workload.jobs import build_job
    from ..workload.step_estimate import step_time

    t = Timer()
    name = "slowdown_vs_scale"
    preset = "llama3-8b"
    scales = (8, 64, 1024) if tiny else (8, 64, 256, 1024, 4096, 16384, 65536, 131072)
    theta = np.linspace(0, 0.4, 81)
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(9.5, 3.8))
    nums: dict = {"preset": preset, "gpus": list(scales), "threshold": 0.05}
    at = {0.05: [], 0.15: [], 0.25: []}
    deg = []
    for n in scales:
        job = build_job(preset, n)
        base = step_time(job).step_s
        law = predict(build_step_graph(job))
        sf = np.asarray(law.sf((1 + theta) * base))
        a1.plot(theta * 100, sf, label=f"{n:,} GPUs")
        for th in at:
            at[th].append(float(law.sf((1 + th) * base)))
        f = job.variability.spatial.slow_fraction
        deg.append(float(-np.expm1(n * np.log1p(-f))))
    a1.set_xlabel("slow-down threshold over the deterministic step (%)")
    a1.set_ylabel("P(step > threshold)")
    a1.set_title(f"{preset}: probability of slow-down")
    a1.grid(alpha=0.3)
    a1.legend(fontsize=6, ncol=2)
    for th, v in at.items():
        a2.semilogx(scales, v, "o-", label=f"P(step > {th:.0%} slower)")
    a2.semilogx(scales, deg, "k^--", label="P(job holds >= 1 degraded GPU)")
    a2.set_xlabel("GPUs")
    a2.set_ylabel("probability")
    a2.set_title("slow-down grows with scale")
    a2.set_ylim(-0.02, 1.02)
    a2.grid(alpha=0.3, which="both")
    a2.legend(fontsize=7)
    nums.update({f"p_step_slow_{int(th * 100)}pct": v for th, v in at.items()})
    nums["p_degraded"] = deg
    path = save(fig, out_dir, name)
    claim = (
        "PRISM: the probability of slow-down is predicted for large jobs,"
        " where variation is magnified"
    )
    return entry(name, path, claim, nums, MODEL, t())


def _placement_job(tiny: bool):
    from ..workload.config import ConfigError  # noqa: F401  (documents the error type)
    from ..workload.jobs import build_job, merge_config

    if tiny:
        job = build_job("llama3-70b", 128)
        return merge_config(job, {"parallelism": {"schedule": "1f1b", "vpp": 1, "microbatches": 4}})
    job = build_job("llama3-405b", 16384)
    return merge_config(job, {"parallelism": {"schedule": "1f1b", "vpp": 1}})


def make_placement(out_dir: str | Path, data_root=None, tiny: bool = False) -> dict:
    """Step time of named placements of K slow GPUs (1F1B Llama 3 405B on 16,384 GPUs)."""
    from ..analyses.placement import placement_analysis

    t = Timer()
    name = "placement"
    job = _placement_job(tiny)
    k, f = (8, 1.5) if tiny else (16, 1.5)
    res = placement_analysis(job, k, f, search=False)
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [1.4, 1]})
    res.plot(a1)
    a1.set_title(f"{k} GPUs {f:g}x slower: worst/best p95 {res.ratio_p95:.2f}x")
    a2.bar(range(len(res.stage_costs)), [100 * (c - 1) for c in res.stage_costs])
    a2.set_xlabel("pipeline stage holding one slow tp group")
    a2.set_ylabel("replica makespan increase (%)")
    a2.set_title("slack: early stages wait in the 1F1B bubble")
    a2.grid(axis="y", alpha=0.3)
    path = save(fig, out_dir, name)
    nums = {
        "job": res.job,
        "layout": "tp 8, pp 16, 1F1B, 16 microbatches" if not tiny else "tiny",
        "slow_gpus": k,
        "slow_factor": f,
        "best": res.best.name,
        "worst": res.worst.name,
        "ratio_mean": res.ratio_mean,
        "ratio_p95": res.ratio_p95,
        "p95_s": {r.name: r.p95_s for r in res.rows},
        "healthy_p95_s": res.healthy.p95_s,
    }
    claim = "PRISM: placement of slow nodes relative to the parallelism gives up to 1.26x"
    return entry(name, path, claim, nums, MODEL, t())


def make_sensitivity(out_dir: str | Path, data_root=None, tiny: bool = False) -> dict:
    """p95 sensitivity to each kernel class's variability, FSDP Llama 3 8B."""
    from ..analyses.sensitivity import sensitivity
    from ..workload.jobs import build_job

    t = Timer()
    name = "kernel_ranking"
    job = build_job("llama3-8b", 64 if tiny else 1024)
    res = sensitivity(job, classes=["gemm", "allgather", "reduce_scatter"] if tiny else None)
    p = plt()
    fig, ax = p.subplots(figsize=(7, 3.8))
    res.plot(ax)
    ax.set_title(f"{job.name} (FSDP): which kernel class's variability moves p95")
    path = save(fig, out_dir, name)
    nums = {
        "job": job.name,
        "ranking_by_p95_variability": res.ranking("d_p95_d_var"),
        "ranking_by_p95_drop": res.ranking("p95_drop_without_variability_s"),
        # None: below the numerical resolution (see ClassSensitivity.unresolved)
        "d_p95_d_var_ms": {
            c.key: None if c.d_p95_d_var is None else c.d_p95_d_var * 1e3 for c in res.classes
        },
        "p95_drop_ms": {
            c.key: None
            if c.p95_drop_without_variability_s is None
            else c.p95_drop_without_variability_s * 1e3
            for c in res.classes
        },
    }
    claim = (
        "PRISM: optimising AllGather and ReduceScatter does the most to reduce"
        " step-time variability"
    )
    return entry(name, path, claim, nums, MODEL, t())


def make_crossdc(out_dir: str | Path, data_root=None, tiny: bool = False) -> dict:
    """p95 degradation vs inter-DC bandwidth for three jitters."""
    from ..analyses.crossdc import crossdc
    from ..workload.jobs import build_job

    t = Timer()
    name = "crossdc_bandwidth"
    if tiny:
        job, bws, jits, steps = build_job("llama3-8b", 64), [1, 100], [0.1], 0
    else:
        job, bws, jits, steps = (
            build_job("llama3-405b", 16384),
            [1, 3, 10, 30, 100, 300, 1000],
            [0.1, 0.4, 1.0],
            4,
        )
    res = crossdc(job, 2, bws, jits, bisect_steps=steps)
    p = plt()
    fig, ax = p.subplots(figsize=(6.5, 3.8))
    res.plot(ax)
    ax.set_title(f"{job.name} over 2 datacenters")
    path = save(fig, out_dir, name)
    nums = {
        "job": job.name,
        "bandwidths_tbps": bws,
        "jitters": jits,
        "threshold_tbps_for_5pct": list(res.threshold_tbps),
        "p95_s": [list(r) for r in res.p95_s],
        "single_dc_p95_s": res.single_dc_p95_s,
    }
    claim = "PRISM: cross-DC network variability degrades performance unless bandwidth is high"
    return entry(name, path, claim, nums, MODEL, t())


def make_runtime(out_dir: str | Path, data_root=None, tiny: bool = False) -> dict:
    """Run-time CDF without and with failures, and goodput vs checkpoint interval."""
    from ..analyses.interruptions import Interruptions, expected_wall
    from ..analyses.runtime import run_time
    from ..workload.jobs import build_job

    t = Timer()
    name = "runtime_failures"
    gpus, steps = (64, 500) if tiny else (16384, 10_000)
    job = build_job("llama3-8b" if tiny else "llama3-405b", gpus)
    plain = run_time(job, steps)
    intr = Interruptions()
    full = run_time(job, steps, interruptions=intr)
    slow = run_time(job, steps, interruptions=dataclasses.replace(intr, failslow_rate=2e-5))
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(9.5, 3.8))
    for rt, lab in (
        (plain, "steps only"),
        (full, "with failures + checkpoints"),
        (slow, "... + fail-slow episodes"),
    ):
        a1.plot(rt.x / 3600, rt.cdf_values, label=f"{lab}: p95 {rt.quantile(0.95) / 3600:.1f} h")
    a1.set_xlim(plain.quantile(0.0005) / 3600 * 0.98, slow.quantile(0.9995) / 3600)
    a1.set_xlabel("run time (h)")
    a1.set_ylabel("P(run <= t)")
    a1.set_title(f"{job.name}: {steps:,} steps")
    a1.grid(alpha=0.3)
    a1.legend(fontsize=7)
    info = full.interruptions
    work = full.work["mean_s"]
    # a short run is best without checkpoints (optimal interval inf): sweep around Young's
    best = info["optimal_interval_s"]
    centre = best if math.isfinite(best) else info["young_interval_s"]
    taus = np.geomspace(centre / 8, centre * 8, 60)
    good = [work / expected_wall(work, tau, intr, gpus) for tau in taus]
    a2.semilogx(taus / 60, good)
    if math.isfinite(best):
        a2.axvline(best / 60, color="k", ls=":", label="optimal")
    else:
        a2.plot([], [], " ", label="optimal: no checkpoint")
    a2.axvline(info["young_interval_s"] / 60, color="r", ls="--", label="Young sqrt(2 C MTBF)")
    a2.set_xlabel("checkpoint interval (min of work)")
    a2.set_ylabel("goodput (work / expected wall time)")
    a2.set_title(f"job MTBF {info['job_mtbf_h']:.2f} h (Llama 3 rate)")
    a2.grid(alpha=0.3, which="both")
    a2.legend(fontsize=7)
    path = save(fig, out_dir, name)
    nums = {
        "job": job.name,
        "steps": steps,
        "p50_h": [float(r.quantile(0.5)) / 3600 for r in (plain, full, slow)],
        "p95_h": [float(r.quantile(0.95)) / 3600 for r in (plain, full, slow)],
        "optimal_interval_min": info["optimal_interval_s"] / 60,
        "young_interval_min": info["young_interval_s"] / 60,
        "goodput": info["goodput"],
        "expected_failures": info["expected_failures"],
    }
    claim = (
        "PRISM: distribution of end-to-end training time with probabilistic guarantees; "
        "Llama 3: 466 interruptions in 54 days on 16,384 GPUs"
    )
    return entry(name, path, claim, nums, MODEL + "; failure rate from the Llama 3 paper", t())
