"""Collective-noise scale model: fit at <= 128 nodes, predict 512 / 1,024 / 2,048 nodes.

Allreduce, ``rabenseifner_ompi``, host buffers, one process per node (PICO on Leonardo,
``shared/data/collective_latency``): fitted on the 4-, 8- and 16-node runs (the only
<= 128-node runs of this algorithm), per message size; predicted at 512, 1,024 and 2,048
nodes (two 2,048-node runs). A prediction passes when the measured p90/p50 and p99/p50 lie
in the 90% sampling interval of the predicted ratio for the measured number of iterations.

Run: ``python validation/calibration_collective_noise.py [--json]``.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from prism_analytic.calibration.collective_noise import (
    fit_node_noise,
    load_latencies,
    predicted_ratio_interval,
)

FIT = {4: "2025_05_10___18_33_42", 8: "2025_05_10___18_34_08", 16: "2025_05_06___19_06_52"}
PREDICT = [
    (512, "2025_03_28___18_19_43"),
    (1024, "2025_03_28___17_42_08"),
    (2048, "2025_03_28___16_48_20"),
    (2048, "2025_03_28___17_14_41"),
]
COUNTS = (4096, 32768, 262144, 2097152)
ALGO = "rabenseifner_ompi"
#: Second experiment: the 128-node run (one archive, other algorithms); message sizes it
#: shares with the 512-2,048-node runs are 8, 64 and 512 int32 elements only.
FIT_128 = {128: "2025_03_19___20_04_47"}
ALGOS_128 = ("recursive_doubling_ompi", "default_ompi")
COUNTS_128 = (8, 64, 512)


def _cases():
    for count in COUNTS:
        yield ALGO, FIT, count
    for algo in ALGOS_128:
        for count in COUNTS_128:
            yield algo, FIT_128, count


def run() -> list[dict]:
    """One row per (algorithm, message size, predicted run)."""
    rows = []
    for algo, fit_runs, count in _cases():
        fit = {n: load_latencies(a, 0, algo, count) for n, a in fit_runs.items()}
        model, rms = fit_node_noise(fit)
        for n, arch in PREDICT:
            try:
                x = load_latencies(arch, 0, algo, count)
            except ValueError:
                continue  # that run did not measure this size
            iv = predicted_ratio_interval(model, n, len(x))
            m90 = float(np.quantile(x, 0.9) / np.median(x))
            m99 = float(np.quantile(x, 0.99) / np.median(x))
            rows.append(
                {
                    "algorithm": algo,
                    "fit_nodes": sorted(fit_runs),
                    "bytes": 4 * count,
                    "nodes": n,
                    "run": arch,
                    "iterations": len(x),
                    "fit": model.to_dict(),
                    "fit_rms_log_residual": rms,
                    "measured_p90_p50": m90,
                    "pred_p90_p50_90pct": iv[0.9],
                    "measured_p99_p50": m99,
                    "pred_p99_p50_90pct": iv[0.99],
                    "p90_inside": iv[0.9][0] <= m90 <= iv[0.9][2],
                    "p99_inside": iv[0.99][0] <= m99 <= iv[0.99][2],
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print the table (or JSON)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = run()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{'algorithm':24} {'bytes':>9} {'nodes':>5} {'iters':>5}"
        f"  {'p90/p50 meas':>12} {'pred 90%':>22}"
        f"  {'p99/p50 meas':>12} {'pred 90%':>22}  fit (sigma, q, f, tail_sigma)"
    )
    for r in rows:
        a, b = r["pred_p90_p50_90pct"], r["pred_p99_p50_90pct"]
        f = r["fit"]
        print(
            f"{r['algorithm']:24} {r['bytes']:9d} {r['nodes']:5d} {r['iterations']:5d}"
            f"  {r['measured_p90_p50']:12.3f}"
            f" [{a[0]:.3f}, {a[2]:.3f}] {'in ' if r['p90_inside'] else 'OUT'}"
            f"  {r['measured_p99_p50']:12.3f} [{b[0]:.3f}, {b[2]:.3f}]"
            f" {'in ' if r['p99_inside'] else 'OUT'}  ({f['sigma']:.3g}, {f['q']:.2g},"
            f" {f['f']:.3g}, {f['tail_sigma']:.2g})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
