"""``validation/node_tail_defaults.py``: its estimators recover known laws from synthetic runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ntd():
    spec = importlib.util.spec_from_file_location(
        "node_tail_defaults", ROOT / "validation" / "node_tail_defaults.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _runs(exponent: float, seed: int) -> pd.DataFrame:
    """Runs of 3 sessions whose burst starts per node-iteration grow as median^exponent."""
    rng = np.random.default_rng(seed)
    rows = []
    for s, (nodes, base) in enumerate(((4, 2e-5), (8, 1e-5), (128, 3e-5))):
        for med in np.geomspace(5e-6, 150e-6, 12):
            it = 20_000
            lam = base * (med / 50e-6) ** exponent
            k = int(rng.poisson(lam * it * nodes))
            rows.append(
                {
                    "session": f"s{s}",
                    "nodes": nodes,
                    "iterations": it,
                    "median_s": med,
                    "delayed": k,
                    "starts": k,
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("exponent", [0.0, 1.0])
def test_duration_exponent_recovers_the_law(ntd, exponent):
    e = ntd.duration_exponent(_runs(exponent, 7))
    lo, hi = e["ci95"]
    assert lo < exponent < hi
    assert hi - lo < 0.6  # informative: tells 0 from 1
    assert e["sessions"] == 3


def test_rates_per_node_second(ntd):
    df = _runs(1.0, 3)
    excess = np.random.default_rng(1).lognormal(np.log(60e-6), 0.8, 5000)
    r = ntd.rates(df, excess)
    node_s = (df["nodes"] * df["iterations"] * df["median_s"]).sum()
    assert r["delayed_per_node_s"] == pytest.approx(df["delayed"].sum() / node_s)
    lo, hi = r["delayed_per_node_s_ci95"]
    assert lo < r["delayed_per_node_s"] < hi
    true_mean = 60e-6 * np.exp(0.8**2 / 2)
    assert r["excess_mean_s_ci95"][0] < true_mean < r["excess_mean_s_ci95"][1]
