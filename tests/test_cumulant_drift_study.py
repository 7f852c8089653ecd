"""The drift study's closure is the product's (validation/cumulant_drift_study.py).

The study reads the cumulant core node by node and swaps its rectifier moments; its figures
are only about the product if stepping generation by generation, the per-max recorder and the
"product" variant leave the result bit for bit as the engine's own run, and if a variant is
undone afterwards.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from prism_analytic.engines import cumulant_core as cc

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def study():
    spec = importlib.util.spec_from_file_location(
        "cumulant_drift_study", ROOT / "validation" / "cumulant_drift_study.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _engine_run(st, mean, sd):
    eng = cc._CumulantEngine.for_dag(0, st["window"], st["gens"], np.zeros(len(mean)))
    mu, var, _ = eng.run(st["gens"], st["preds"], mean, sd, np.zeros((len(mean), 0)))
    return mu, var, eng.kappa3(eng.last)


def test_study_run_is_the_engine_run(study):
    st, mean, sd = study.schedule(4, 8, 2, 0.05)
    want = _engine_run(st, mean, sd)
    for record in (False, True):
        with study.variant("product"):
            mu, var, k3, eng, nodes = study.run(st, mean, sd, record=record)
        assert (mu, var, k3) == want
    assert len(eng.records) == eng.n_max  # every max recorded
    assert len(nodes) == len(mean)


def test_variants_change_the_result_and_are_undone(study):
    st, mean, sd = study.schedule(4, 8, 2, 0.05)
    want = _engine_run(st, mean, sd)
    orig = cc._rectifier
    for name in ("g2-all", "clark"):
        with study.variant(name):
            got = study.run(st, mean, sd)[:3]
        assert got != want
        assert cc._rectifier is orig
    with study.variant("clark"):
        assert study.run(st, mean, sd)[2] == 0.0  # normal ops, no third cumulant created
    with pytest.raises(ValueError, match="variant must be one of"):
        with study.variant("nope"):
            pass
    assert cc._rectifier is orig


def test_per_max_reads_monte_carlo(study):
    st, mean, sd = study.schedule(4, 8, 2, 0.05)
    t = study.sample(st, mean, sd, 4000, 3)
    # a sink mean within 4 standard errors of the engine's (a small lattice: close to exact)
    mu, var, *_ = study.run(st, mean, sd)
    assert abs(t[-1].mean() - mu) < 0.05 * np.sqrt(var) + 4 * t[-1].std() / np.sqrt(4000)
    rows = study.per_max(st, t, study.run(st, mean, sd, record=True)[3].records)
    assert rows.shape[1] == 10 and len(rows) > 0
    assert np.all(np.abs(rows[:, 1]) < 0.2)  # theta^2 of the inputs close on a 4x8 lattice
