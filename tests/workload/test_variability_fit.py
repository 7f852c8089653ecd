"""The default variability's fit (validation/fit_variability.py): recovery and held-out data."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from prism_analytic.workload.config import SpatialVariability, TemporalVariability
from prism_analytic.workload.config.variability import JITTER_MEAN_OVER_STD, _inter

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "validation"))
import fit_variability as fv  # noqa: E402

DATA = (ROOT / ".." / "shared" / "data").resolve()
needs_data = pytest.mark.skipif(
    not all((DATA / d).is_dir() for d in ("mlperf_training_set", "mlperf_llama405b")),
    reason=f"shared MLPerf data not found at {DATA} (expected ../shared/data)",
)


# --------------------------------------------------------------------------------------
# synthetic logs drawn from the model itself
# --------------------------------------------------------------------------------------
def _synthetic(rng, *, cv, jitter, slow_fraction=0.0, gpus=(8, 72, 256, 512), runs=12, n=300):
    """Cases whose runs are fresh allocations: the slowest of G spatial factors times a
    per-step gamma jitter of sd ``jitter`` (shifted to mean 0), as the builder draws them."""
    s = math.sqrt(math.log1p(cv * cv))
    k = JITTER_MEAN_OVER_STD**2
    cases = []
    for i, g in enumerate(gpus):
        out = []
        for _ in range(runs):
            factors = rng.lognormal(-s * s / 2, s, g)
            factors[rng.random(g) < slow_fraction] *= SpatialVariability().slow_factor
            steps = 1.0 + jitter * (rng.gamma(k, 1.0, n) - k) / math.sqrt(k)
            out.append(10.0 * factors.max() * steps)
        cases.append(fv.Case(f"synthetic_{g}", f"system{i % 2}", g, tuple(out)))
    return cases


def test_max_normal_var_matches_sampling():
    rng = np.random.default_rng(1)
    for g in (1, 8, 512):
        x = rng.standard_normal((20_000, g)).max(axis=1)
        assert fv.max_normal_var(g) == pytest.approx(x.var(), rel=0.05)


def test_fit_recovers_spatial_cv_and_jitter():
    rng = np.random.default_rng(7)
    cases = _synthetic(rng, cv=0.01, jitter=0.004)
    sp = fv.fit_spatial_cv(cases)
    assert sp["interval95"][0] <= 0.01 <= sp["interval95"][1]
    assert sp["value"] == pytest.approx(0.01, rel=0.25)
    assert fv.fit_jitter_rel(cases)["value"] == pytest.approx(0.004, rel=0.05)
    assert fv.fit_slow_fraction(cases)["value"] == 0.0
    # a different truth moves the estimates with it: the fit is not a constant
    other = _synthetic(rng, cv=0.003, jitter=0.008)
    assert fv.fit_spatial_cv(other)["value"] == pytest.approx(0.003, rel=0.35)
    assert fv.fit_jitter_rel(other)["value"] == pytest.approx(0.008, rel=0.05)


def test_fit_recovers_slow_fraction():
    rng = np.random.default_rng(3)
    gpus = (8, 16, 32, 72)
    cases = _synthetic(rng, cv=0.002, jitter=0.003, slow_fraction=0.01, gpus=gpus, runs=30)
    sl = fv.fit_slow_fraction(cases)
    assert sl["slow_runs"] > 0
    assert 0.005 <= sl["value"] <= 0.02 <= sl["upper95"] + 0.01


# --------------------------------------------------------------------------------------
# the shared data: the defaults are the fit's, and a held-out system is reproduced
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cases():
    return fv.load_cases(DATA)


@needs_data
def test_code_defaults_are_the_fit_on_every_system(cases):
    d = fv.fit(cases, DATA)
    assert SpatialVariability().cv == pytest.approx(d["variability.spatial.cv"]["value"], rel=0.02)
    assert SpatialVariability().slow_fraction == d["variability.spatial.slow_fraction"]["value"]
    jit = d["variability.temporal.step_jitter_rel"]["value"]
    assert TemporalVariability().step_jitter_rel == pytest.approx(jit, rel=0.02)
    sigma = d["variability.network.inter_node.sigma"]["value"]
    assert _inter().sigma == pytest.approx(sigma, rel=0.02)


@needs_data
def test_held_out_system_p90_over_p50_within_001(cases):
    # Carina (GB200, 512 GPUs) predicted with the defaults fitted on the three other systems
    held = [c for c in cases if c.name == "mlperf50_carina_405b_512"]
    assert held and held[0].config is not None
    defaults = fv.fit([c for c in cases if c.system != "carina"], DATA)
    row = fv.rows(held, defaults)[0]
    assert row["p90_p50"] == pytest.approx(row["measured_p90_p50"], abs=0.01)
    assert row["widening"] < 1.06  # the median stays near the deterministic core


@needs_data
def test_cases_of_mlperf_cases_module_are_read_alike(cases):
    # validation/fit_defaults.py passes validation/mlperf_cases.py's cases (logs by path)
    mc = pytest.importorskip("mlperf_cases")
    theirs = next(c for c in mc.case_specs() if c.name == "mlperf_gb200_512")
    got = fv.as_case(theirs, DATA)
    mine = next(c for c in cases if c.name == "mlperf50_carina_405b_512")
    assert got.system == mine.system and got.gpus == mine.gpus and got.config == mine.config
    assert [len(r) for r in got.runs] == [len(r) for r in mine.runs]
    assert got.p90_over_p50 == mine.p90_over_p50
