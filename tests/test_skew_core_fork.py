"""Skew and kurtosis cores: the speed-ups (shared start of truncated pipelines) change no bit."""

from __future__ import annotations

import pytest

import prism_analytic as pa
from prism_analytic.engines import skew_core
from prism_analytic.engines.kurtosis_core import _KurtosisEngine, kurtosis_pipeline
from prism_analytic.engines.skew_core import _FullEngine, skew_pipeline
from prism_analytic.graph.pipeline import PipelineSpec, law_key


def _spec(schedule: str, p: int, m: int, vpp: int, family) -> PipelineSpec:
    laws = {
        law_key(ph, s, c): family(mu / vpp * (1 + 0.1 * s), 0.2 * mu / vpp)
        for ph, mu in (("F", 1.0), ("B", 2.0))
        for s in range(p)
        for c in range(vpp)
    }
    return PipelineSpec(p, m, laws, schedule, vpp)


@pytest.mark.parametrize(
    "schedule,p,m,vpp,family",
    [
        ("1f1b", 4, 64, 1, pa.lognormal),
        ("interleaved", 4, 48, 2, pa.lognormal),
        ("interleaved", 4, 48, 2, pa.normal),
        ("gpipe", 3, 90, 1, pa.normal),
    ],
)
@pytest.mark.parametrize(
    "fn,engine", [(skew_pipeline, _FullEngine), (kurtosis_pipeline, _KurtosisEngine)]
)
def test_forked_truncation_is_bit_identical(monkeypatch, schedule, p, m, vpp, family, fn, engine):
    """The two truncated schedules' common start done once gives the same bits as two runs."""
    spec = _spec(schedule, p, m, vpp, family)
    cap = 256  # truncated (residual windows at their default, not capped by the DAG size)
    calls = []
    real = skew_core._forked

    def spy(*args):
        out = real(*args)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(skew_core, "_forked", spy)
    forked, info = fn(spec, cap=cap)
    assert calls == [True] and len(info["evaluated_microbatches"]) == 2
    monkeypatch.setattr(engine, "forkable", False)
    plain, _ = fn(spec, cap=cap)
    assert forked == plain  # every field, bit for bit
