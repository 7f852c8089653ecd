"""Compute and communication std at 16k vs 64k GPUs under each scale mechanism.

PRISM (arXiv 2510.15596, Fig. 1) reports 2.03x (compute) and 2.91x (communication) higher
standard deviation at 64k+ than at 16k GPUs. This table gives, for Llama 3 405B (preset
layout) at 16,384 and 65,536 GPUs, the per-rank, per-step std of compute and of
communication+waiting (``workload.breakdown.rank_breakdown``: compute = the rank's own
kernels; comm = step - compute) for the baseline model and for each mechanism of
``variability.scale`` (``workload.scale_variability``) switched on alone at a few values, and
the value at which the 64k/16k ratio reaches PRISM's figure (log-linear interpolation on the
scan; "not reached" when the scan does not bracket it). Nothing here is a default: every
mechanism is off by default. The data-support column is computed from ``shared/data``.

Run: ``python validation/calibration_scale_std.py [--json] [--samples N]`` (a few minutes).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

from prism_analytic.datasets import data_root
from prism_analytic.workload.breakdown import rank_breakdown
from prism_analytic.workload.jobs import merge_config
from prism_analytic.workload.presets import preset_job

SIZES = (16384, 65536)
PRISM = {"compute": 2.03, "comm": 2.91}
SCANS = {
    "fleet heterogeneity (population_cv, 16k-GPU populations)": (
        "population_cv",
        [0.01, 0.02, 0.04, 0.08],
        {},
    ),
    "per-node collective tail (node_tail_prob, 2x)": ("node_tail_prob", [1e-5, 1e-4, 1e-3], {}),
    "rack throttle (rack_throttle_prob, 10% slower, 72-GPU racks)": (
        "rack_throttle_prob",
        [1e-5, 1e-4, 1e-3],
        {},
    ),
    "fail-slow GPUs (fail_slow_prob, 1.5x)": ("fail_slow_prob", [1e-7, 1e-6, 1e-5], {}),
    # the per-node collective event with a size that grows with the fat-tree tiers the
    # data-parallel group needs (radix 40: 128 nodes at 16k GPUs -> 2 tiers, 512 nodes at
    # 64k -> 3 tiers); rate 1e-4 per node and instance (the 128-node Leonardo session's),
    # 3x at one tier
    "per-node collective event growing with tiers (node_tail_tier_growth; 1e-4, 3x, radix 40)": (
        "node_tail_tier_growth",
        [1.0, 1.5, 2.0, 3.0, 4.0],
        {"node_tail_prob": 1e-4, "node_tail_factor": 3.0, "fat_tree_radix": 40},
    ),
}


def _stds(scale: dict, samples: int) -> dict:
    out = {}
    for g in SIZES:
        job = preset_job("llama3-405b", g)
        if scale:
            job = merge_config(job, {"variability": {"scale": scale}})
        b = rank_breakdown(job, samples=samples, seed=1)
        out[g] = {"compute": b.stats["compute"]["std"], "comm": b.stats["comm"]["std"]}
    return {
        **{f"{k}_std_{g}": out[g][k] for g in SIZES for k in ("compute", "comm")},
        "compute_ratio": out[SIZES[1]]["compute"] / out[SIZES[0]]["compute"],
        "comm_ratio": out[SIZES[1]]["comm"] / out[SIZES[0]]["comm"],
    }


def _crossing(xs: list[float], ys: list[float], target: float) -> float | None:
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if (y0 - target) * (y1 - target) <= 0 and y0 != y1:
            t = (target - y0) / (y1 - y0)
            return math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0)))
    return None


def _collective_event_support() -> dict:
    """Per-node event rate and size in ``collective_latency`` (default_ompi, 256 B).

    Events: iterations above 1.5x their run's median; rate ``-ln(1 - k/iters) / nodes``.
    """
    from prism_analytic.calibration.collective_noise import load_latencies

    out = {}
    for n, arch in (
        (128, "2025_03_19___20_04_47"),
        (512, "2025_03_28___18_19_43"),
        (2048, "2025_03_28___16_48_20"),
    ):
        x = load_latencies(arch, 0, "default_ompi", 64)
        med = np.median(x)
        ev = x[x > 1.5 * med]
        out[f"collective_event_rate_per_node_{n}_nodes"] = -math.log1p(-len(ev) / len(x)) / n
        out[f"collective_event_excess_us_{n}_nodes"] = float(np.median(ev - med) * 1e6)
    return out


def data_support() -> dict:
    """What ``shared/data`` says about each mechanism's parameter."""
    import pandas as pd

    root = data_root()
    d = pd.read_csv(root / "gpu_variability" / "sgemm-longhorn-agg.csv")
    d = d[d.cabinet.astype(str) != "-1"]  # -1: cabinet unknown
    g = d.groupby("uuid").agg(perf=("perf", "median"), cab=("cabinet", "first"))
    ratio = g.perf / g.perf.median()
    cab = ratio.groupby(g.cab).mean()
    runs = d.join(g.perf.rename("gmed"), on="uuid")
    r = runs.perf / runs.gmed
    return {
        **_collective_event_support(),
        "between_cabinet_cv_longhorn": float(cab.std() / cab.mean()),
        "cabinets": int(len(cab)),
        "runs_over_1.02x_own_gpu_median": float((r > 1.02).mean()),
        "runs_over_1.05x_own_gpu_median": int((r > 1.05).sum()),
        "runs": int(len(r)),
    }


def run(samples: int) -> dict:
    """The table as a dict."""
    support = data_support()  # first: cheap, and fails fast without the data
    rows = [{"mechanism": "baseline (defaults)", "value": None, **_stds({}, samples)}]
    reach = {}
    for name, (key, values, extra) in SCANS.items():
        res = []
        for v in values:
            row = {"mechanism": name, "value": v, **_stds({key: v, **extra}, samples)}
            rows.append(row)
            res.append(row)
        reach[name] = {
            k: _crossing(values, [x[f"{k}_ratio"] for x in res], PRISM[k]) for k in PRISM
        }
    return {"rows": rows, "value_reaching_prism": reach, "data_support": support}


def main(argv: list[str] | None = None) -> int:
    """Print the table (or JSON)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--samples", type=int, default=20_000)
    args = ap.parse_args(argv)
    out = run(args.samples)
    if args.json:
        print(json.dumps(out, indent=1, default=float))
        return 0
    print(
        f"{'mechanism':90} {'value':>8} {'cmp std 16k':>11} {'64k':>9} {'ratio':>6}"
        f" {'comm std 16k':>12} {'64k':>9} {'ratio':>6}"
    )
    for r in out["rows"]:
        v = "" if r["value"] is None else f"{r['value']:.2g}"
        print(
            f"{r['mechanism']:90} {v:>8} {r['compute_std_16384']:11.4f}"
            f" {r['compute_std_65536']:9.4f} {r['compute_ratio']:6.2f}"
            f" {r['comm_std_16384']:12.4f} {r['comm_std_65536']:9.4f} {r['comm_ratio']:6.2f}"
        )
    print("\nvalue at which the 64k/16k std ratio reaches PRISM's (compute 2.03, comm 2.91):")
    for k, v in out["value_reaching_prism"].items():
        txt = ", ".join(f"{m} {'not reached' if x is None else f'{x:.2g}'}" for m, x in v.items())
        print(f"  {k}: {txt}")
    print("\ndata support:", json.dumps(out["data_support"]))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
