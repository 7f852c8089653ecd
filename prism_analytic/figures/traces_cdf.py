"""Predicted vs measured step-time CDFs on the real straggler traces (held-out steps).

The trace reader and model of :mod:`prism_analytic.traces` fit per-op latencies on the first
half of each trace's steps and predict the step-time law of the second half (Monte Carlo of the
fitted DAG); the measured step times of the held-out steps are drawn beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .common import Timer, entry, plt, save

NAME = "traces_predicted_vs_measured"
CLAIM = (
    "PRISM: validated against real-system measurement (20.8% KS distance on training time; "
    "v2: p95 error within 4.3%)"
)
CASES = ("AR", "ST")


def make(out_dir: str | Path, data_root: str | Path | None = None, tiny: bool = False) -> dict:
    """Held-out step-time CDFs, predicted vs measured, for both traces."""
    from ..datasets import data_root as root
    from ..traces.predict import predict_trace

    t = Timer()
    folder = root(data_root) / "straggler_traces"
    p = plt()
    cases = CASES[:1] if tiny else CASES
    fig, axes = p.subplots(1, len(cases), figsize=(4.8 * len(cases), 3.8))
    axes = np.atleast_1d(axes)
    nums: dict = {}
    for ax, name in zip(axes, cases):
        r = predict_trace(
            folder / f"trace-{name}.parquet",
            measured=folder / f"result-{name}.json",
            samples=500 if tiny else 4000,
            analytic="off",
            library=False,
        )
        d = r.to_dict()
        pred, meas = np.sort(r.samples), np.sort(r.measured)
        ax.plot(
            pred, np.arange(1, pred.size + 1) / pred.size, label="predicted (fit on first half)"
        )
        ax.step(
            meas,
            np.arange(1, meas.size + 1) / meas.size,
            where="post",
            label=f"measured, {meas.size} held-out steps",
        )
        ax.set_xlabel("step time (s)")
        ax.set_ylabel("CDF")
        ax.set_title(f"trace {name}: KS {d['ks']:.2f}, p95 error {d['p95_rel_err']:+.1%}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        nums[name] = {k: d[k] for k in ("ks", "mean_rel_err", "p50_rel_err", "p95_rel_err")}
    path = save(fig, out_dir, NAME)
    data = "shared/data/straggler_traces (per-op, per-rank timings of two production jobs)"
    return entry(NAME, path, CLAIM, nums, data, t())
