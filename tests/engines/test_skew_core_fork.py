"""Skew and kurtosis cores: the speed-ups (shared start of truncated pipelines) change no bit."""

from __future__ import annotations

import pytest

import prism_analytic as pa
from prism_analytic.engines import skew_core
from prism_analytic.engines.kurtosis_core import _KurtosisEngine, kurtosis_pipeline
from prism_analytic.engines.skew_core import _FullEngine, skew_pipeline
from prism_analytic.graph.pipeline import PipelineSpec, law_key


def _spec(schedule: str, p: int, m: int, vpp: int, family, slope: float = 0.1) -> PipelineSpec:
    laws = {
        law_key(ph, s, c): family(mu / vpp * (1 + slope * s), 0.2 * mu / vpp)
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
    # one pair, extrapolated; or the whole pipeline where pipeline_core.next_pair refuses it
    # (GPipe 3 x 90, CV 20%: its increments drift, so whole since next_pair)
    assert calls == [True] and len(info["evaluated_microbatches"]) in (1, 2)
    monkeypatch.setattr(engine, "forkable", False)
    plain, _ = fn(spec, cap=cap)
    assert forked == plain  # every field, bit for bit


def _long_only(monkeypatch) -> None:
    monkeypatch.setattr(skew_core, "STEADY_CAP", 10**9)  # no short trial: the SKEW_OPS_CAP sizes


@pytest.mark.parametrize("fn", [skew_pipeline, kurtosis_pipeline])
@pytest.mark.parametrize("m,long_sizes", [(1024, [1024]), (2048, [1020, 1024])])
def test_steady_state_from_short_evaluations(monkeypatch, fn, m, long_sizes):
    """A pipeline settled after a block: three short evaluations give the answer of the whole
    pipeline (8,192 ops) or of its long truncation."""
    spec = _spec("1f1b", 4, m, 1, pa.normal)
    short, info = fn(spec)
    assert info["evaluated_microbatches"] == [252, 256, 260]
    assert info["steady_state_gap"] <= skew_core.STEADY_RTOL
    _long_only(monkeypatch)
    long, info_long = fn(spec)
    assert info_long["evaluated_microbatches"] == long_sizes
    assert abs(short.mean - long.mean) < 1e-8 * long.std  # measured 4e-11 sd
    assert short.std == pytest.approx(long.std, rel=1e-10)
    assert short.skew == pytest.approx(long.skew, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("fn", [skew_pipeline, kurtosis_pipeline])
def test_transient_pipeline_keeps_the_long_evaluation(monkeypatch, fn):
    """Still in its transient at the short sizes (interleaved 8 x 512 x 2, balanced stages,
    lognormal CV 20%: 56, 64, 72 microbatches): the trial is refused, the long answer stands."""
    spec = _spec("interleaved", 8, 512, 2, pa.lognormal, slope=0.0)
    evaluated = []
    real = skew_core._forked

    def spy(*args):
        evaluated.append(tuple(args[2]))
        return real(*args)

    monkeypatch.setattr(skew_core, "_forked", spy)
    res, info = fn(spec, cap=5120)  # long sizes 152, 160: the trial (up to 72) is tried
    assert "steady_state_gap" not in info and info["evaluated_microbatches"] == [152, 160]
    assert evaluated == [(56, 64, 72), (152, 160)]
    _long_only(monkeypatch)
    assert fn(spec, cap=5120)[0] == res  # bit for bit
