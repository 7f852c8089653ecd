"""Fig. 3 and Fig. 4 analogues from measured per-GPU data (Sinha et al., TACC Longhorn V100)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from .common import Timer, entry, plt, save

SPATIAL = "fig3_spatial_temporal"
CLOCK = "fig4_clock_vs_time"
CLAIM3 = (
    "PRISM Fig. 3: spatial variability (across the fleet) and temporal variability (repeated "
    "executions on one GPU) are both significant"
)
CLAIM4 = "PRISM Fig. 4: dynamically varying GPU frequency is a major source of compute variability"
DATA = "shared/data/gpu_variability/sgemm-longhorn-agg.csv (Sinha et al. SC'22; 392 V100s)"


def _rows(data_root: str | Path | None, tiny: bool) -> tuple[list[str], np.ndarray, np.ndarray]:
    from ..datasets import data_root as root

    path = root(data_root) / "gpu_variability" / "sgemm-longhorn-agg.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (the gpu_variability data set)")
    uuid, perf, freq = [], [], []
    with path.open(newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            if tiny and i >= 1500:
                break
            try:
                p, f = float(row["perf"]), float(row["freq"])
            except (KeyError, ValueError):
                continue
            if p > 0 and f > 0:
                uuid.append(row["uuid"])
                perf.append(p)
                freq.append(f)
    return uuid, np.array(perf), np.array(freq)


def make_spatial(out_dir, data_root=None, tiny: bool = False) -> dict:
    """Per-GPU medians across the fleet vs run-to-run spread within GPUs."""
    t = Timer()
    uuid, perf, _ = _rows(data_root, tiny)
    ids = np.array(uuid)
    gpus = np.unique(ids)
    med = np.array([np.median(perf[ids == g]) for g in gpus])
    fleet = float(np.median(med))
    within = []
    for g in gpus:
        x = perf[ids == g]
        if x.size >= 5:
            within.append(x / np.median(x))
    within = np.concatenate(within) if within else np.array([1.0])
    spatial_cv = float(np.std(med) / np.mean(med))
    temporal_cv = float(np.std(within))
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(9, 3.6))
    bins = np.linspace(0.9, 1.25, 60)
    a1.hist(
        med / fleet, bins=bins, alpha=0.7, label=f"spatial: per-GPU median (CV {spatial_cv:.3f})"
    )
    a1.hist(
        within, bins=bins, alpha=0.7, label=f"temporal: runs / own median (CV {temporal_cv:.4f})"
    )
    a1.set_yscale("log")
    a1.set_xlabel("SGEMM run time / median")
    a1.set_ylabel("count")
    a1.set_title(f"{gpus.size} V100 GPUs, {perf.size:,} runs")
    a1.legend(fontsize=7)
    a1.grid(alpha=0.3)
    order = np.sort(med / fleet)
    a2.plot(np.arange(order.size) / order.size * 100, order, ".")
    a2.set_xlabel("GPU rank by speed (percentile, fastest first)")
    a2.set_ylabel("per-GPU median / fleet median")
    a2.set_title("spatial: the slowest GPUs are persistent outliers")
    a2.grid(alpha=0.3)
    path = save(fig, out_dir, SPATIAL)
    nums = {
        "gpus": int(gpus.size),
        "runs": int(perf.size),
        "spatial_cv": spatial_cv,
        "temporal_cv_of_100_kernel_means": temporal_cv,
        "spatial_over_temporal": spatial_cv / temporal_cv if temporal_cv else None,
        "max_over_median": float(order.max()),
    }
    return entry(SPATIAL, path, CLAIM3, nums, DATA, t())


def make_clock(out_dir, data_root=None, tiny: bool = False) -> dict:
    """SM clock against SGEMM time, run by run."""
    t = Timer()
    _, perf, freq = _rows(data_root, tiny)
    r = float(np.corrcoef(perf, freq)[0, 1])
    slope, icpt = np.polyfit(freq, perf, 1)
    p = plt()
    fig, ax = p.subplots(figsize=(5.5, 3.8))
    ax.scatter(freq, perf, s=3, alpha=0.3)
    xs = np.linspace(freq.min(), freq.max(), 10)
    ax.plot(xs, slope * xs + icpt, "r-", label=f"linear fit, r = {r:.2f}")
    ax.set_xlabel("SM clock during the run (MHz)")
    ax.set_ylabel("mean SGEMM kernel time (ms)")
    ax.set_title("kernel time follows the GPU clock (V100, Longhorn)")
    ax.legend()
    ax.grid(alpha=0.3)
    path = save(fig, out_dir, CLOCK)
    nums = {"runs": int(perf.size), "corr_time_clock": r, "ms_per_100MHz": float(slope * 100)}
    return entry(CLOCK, path, CLAIM4, nums, DATA, t())
