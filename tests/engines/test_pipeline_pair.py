"""Truncated pipelines: the two truncated schedules in one canonical pass against two passes.

The one pass keeps both residual windows in one ring, so once the shorter schedule is done the
longer one sees a larger window: the two agree to about 1e-4 of a makespan sd per schedule, and
after extrapolating over 500 blocks (1F1B 4 x 2,048) to 0.044 sd, while both are 1.34-1.38 sd
below 3,000-sample Monte Carlo there (the truncation's own error, measured while building this).
"""

from __future__ import annotations

import numpy as np
import pytest

from prism_analytic.distributions import lognormal, normal
from prism_analytic.engines import pipeline_core
from prism_analytic.engines.pipeline_core import _direct, _direct_pair, truncation
from prism_analytic.graph.pipeline import PipelineSpec


def _spec(p: int, m: int, schedule: str, vpp: int) -> PipelineSpec:
    rng = np.random.default_rng(p * 100 + vpp)
    laws = {
        f"{ph} s{s} c{c}": lognormal(float(rng.uniform(0.8, 1.2)) * (1 + (ph == "B")), 0.05)
        for ph in "FB"
        for s in range(p)
        for c in range(vpp)
    }
    return PipelineSpec(p, m, laws, schedule, vpp)


@pytest.mark.parametrize(
    ("p", "m", "schedule", "vpp"), [(4, 300, "1f1b", 1), (4, 64, "interleaved", 5)]
)
@pytest.mark.parametrize("method", ["clark-mehler", "clark"])
def test_one_pass_equals_two_passes(p: int, m: int, schedule: str, vpp: int, method: str) -> None:
    spec = _spec(p, m, schedule, vpp)
    cut = truncation(spec)
    assert cut is not None
    one = _direct_pair(spec, cut, method, None)
    two = [_direct(spec.with_microbatches(k), method, None) for k in cut]
    for (m1, v1, _), (m2, v2, _) in zip(one, two, strict=True):
        assert abs(m1 - m2) <= 1e-3 * np.sqrt(v2)
        assert abs(np.sqrt(v1) / np.sqrt(v2) - 1) <= 1e-3


def test_wide_pipelines_and_factors_take_two_passes(monkeypatch) -> None:
    calls = []
    real = pipeline_core._direct
    monkeypatch.setattr(pipeline_core, "_direct", lambda *a, **k: calls.append(1) or real(*a, **k))
    forked = []
    real_forked = pipeline_core._direct_forked
    monkeypatch.setattr(
        pipeline_core, "_direct_forked", lambda *a, **k: forked.append(1) or real_forked(*a, **k)
    )
    wide = _spec(16, 64, "1f1b", 1)  # two windows of 512 residuals: arithmetic-bound
    _direct_pair(wide, (32, 48), "clark-mehler", None)
    factored = _spec(4, 512, "1f1b", 1)._replace(microbatch_factor=lognormal(1.0, 0.05))
    _direct_pair(factored, (16, 20), "clark-mehler", None)
    # wide: two passes sharing their common start (tests/engines/test_pipeline_forked.py);
    # factored: two
    assert len(forked) == 1
    assert len(calls) == 2


def test_normal_ops_one_pass_matches_two_passes_in_the_makespan() -> None:
    """``pipeline_makespan`` on a long narrow pipeline: the extrapolation is unchanged."""
    laws = {f"{ph} s{s} c0": normal(1.0 + (ph == "B"), 0.05) for ph in "FB" for s in range(4)}
    spec = PipelineSpec(4, 300, laws)
    mu, sd, info = pipeline_core.pipeline_makespan(spec)
    m1, m2 = info["evaluated_microbatches"]
    two = [_direct(spec.with_microbatches(k), "clark-mehler", None) for k in (m1, m2)]
    blocks = (300 - m2) / (m2 - m1)
    assert mu == pytest.approx(two[1][0] + blocks * (two[1][0] - two[0][0]), rel=1e-12)
    var = two[1][1] + blocks * max(two[1][1] - two[0][1], 0.0)
    assert sd == pytest.approx(np.sqrt(var), rel=1e-9)
