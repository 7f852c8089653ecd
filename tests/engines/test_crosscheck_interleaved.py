"""The flagship job's structure in small: an interleaved pipeline body inside a replica group.

llama3-405b at 65,536 GPUs is an interleaved 16 x 16 x vpp 8 body in 512 replicas. Its
cross-check reported KS 0.57 for the body (analytic mean 1.55 body-sd above Monte Carlo's). The
cause is Clark-Mehler's mean bias on interleaved lattices with m = p and a deep vpp (the whole
schedule is warm-up and cool-down: large tied last-passage lattices): normal ops give the same
bias in sd units at any coefficient of variation (0.046 / 0.091 / 0.353 / 1.52 sd at 4x4x2 /
4x8x4 / 8x8x4 / 16x16x8), so neither the body's narrowness nor the grid nor the op laws are
involved. These tests keep the two things that must hold while the core has that bias: the
bias is the core's (scale-free), and the cross-check judges it by its measured effect on the
step quantiles (within 0.1% here: no warning), keeping the body's KS as a diagnostic.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.engines.crosscheck import verify
from prism_analytic.engines.pipeline_core import pipeline_makespan
from prism_analytic.engines.pipeline_mc import sample_pipeline
from prism_analytic.graph.pipeline import pipeline_step_graph


def _body(cv: float) -> pa.StepGraph:
    def lat(phase: str, stage: int, mb: int, chunk: int):
        mean = 1.0 if phase == "F" else 1.853
        return pa.lognormal(mean, cv * mean)

    return pipeline_step_graph(8, 8, lat, schedule="interleaved", vpp=4, compact=True)


def _spec(g: pa.StepGraph):
    return g.node("pipeline")["spec"]


def _bias_in_sd(cv: float, n: int = 8_000) -> tuple[float, float]:
    spec = _spec(_body(cv))
    mu, sd, _ = pipeline_makespan(spec)
    x = sample_pipeline(spec, n, np.random.default_rng(1))
    return (mu - x.mean()) / x.std(), stats.kstest(x, stats.norm(mu, sd).cdf).statistic


def test_interleaved_core_bias_is_scale_free() -> None:
    """Same bias in sd units at CV 0.5% and 5%: a property of the core, not of the lattice."""
    narrow, ks_narrow = _bias_in_sd(0.005)
    wide, ks_wide = _bias_in_sd(0.05)
    assert abs(narrow - wide) < 0.08, (narrow, wide)
    assert abs(ks_narrow - ks_wide) < 0.03, (ks_narrow, ks_wide)


def test_a_body_ks_miss_is_a_diagnostic_and_the_step_error_decides() -> None:
    """The body's law fails its KS band, the step quantiles move by less than the tolerance.

    KS is scale free: on a body of CV 0.5% a 0.01% quantile shift is a large KS. What a user
    reads is the step quantile: its measured error (the body replaced by its samples) is
    within 0.1%, so no warning; the KS stays in the cross-check's cores as a diagnostic.
    """
    body = _body(0.005)
    g = pa.StepGraph("flagship-small")
    g.add_replica_group("replicas", body, 512)
    res = verify(g, pa.predict(g), samples=4000, seed=2)
    ver = res.verification
    (core,) = ver["cores"]
    # independent reference: the body sampled op by op, its KS against the analytic body law
    law = res.cores[0][2]
    x = np.sort(sample_pipeline(_spec(body), 8_000, np.random.default_rng(3)))
    ks = float(np.max(np.abs(law.cdf(x) - (np.arange(1, x.size + 1) - 0.5) / x.size)))
    if ks < 3 * core["dkw_band"]:
        pytest.skip(f"the core is no longer clearly biased here (KS {ks:.3f}): nothing to show")
    assert not core["within_band"], core["summary"]
    one_sided = any(None in row["band_s"] for row in ver["step_band"].values())
    assert one_sided  # a max over 512 copies reads the body far beyond the sample
    rows = ver["quantile_errors"]
    # the errors are measured (not zero: the check sees the body's bias) and within tolerance
    assert max(abs(r["error_s"]) for r in rows) > 0
    assert all(abs(r["error_rel"]) <= ver["tolerance"] for r in rows), rows
    assert ver["warning"] is None
    assert "WARNING" not in res.summary() and "KS" not in res.summary()
    # a stricter tolerance flags exactly the levels whose band resolves a larger error
    strict = verify(g, pa.predict(g), samples=4000, seed=2, tolerance=1e-6).verification
    for r in strict["quantile_errors"]:
        assert r["within_tolerance"] == (r["outside_by_s"] <= 1e-6 * abs(r["value_s"])), r
    assert (strict["warning"] is None) == all(
        r["within_tolerance"] for r in strict["quantile_errors"]
    )
