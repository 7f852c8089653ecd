"""Approximation errors stated on the step quantiles (engines/crosscheck.py, `prism predict`).

Every approximated answer carries, per printed quantile, the measured shift when its
approximated part is replaced by Monte Carlo samples, the band of that shift and the guaranteed
bounds; a WARNING only when an error is above the tolerance or a quantile leaves its bounds.
A deliberately degraded core must trigger it; the main job must not.
"""

from __future__ import annotations

import json
import math

import pytest

import prism_analytic as pa
from prism_analytic.cli import main
from prism_analytic.engines import pipeline_core
from prism_analytic.engines.crosscheck import judge_quantile, verify
from prism_analytic.graph.pipeline import pipeline_step_graph

INF = math.inf


def test_judge_two_sided_interval_widened_by_the_tolerance():
    # inside the interval: within, whatever the point estimate says
    assert judge_quantile(100.0, 100.05, 99.9, 100.2, 1e-3)["within_tolerance"]
    # outside by 0.05 s = 0.05% of the quantile: within a 0.1% tolerance, not within 0.01%
    assert judge_quantile(100.25, 100.1, 99.9, 100.2, 1e-3)["within_tolerance"]
    assert not judge_quantile(100.25, 100.1, 99.9, 100.2, 1e-4)["within_tolerance"]
    row = judge_quantile(100.5, 100.1, 99.9, 100.2, 1e-3)
    assert not row["within_tolerance"] and row["outside_by_s"] == pytest.approx(0.3)
    assert row["error_s"] == pytest.approx(0.4) and row["error_rel"] == pytest.approx(0.4 / 100.5)
    assert row["error_band_s"] == pytest.approx([0.3, 0.6])


def test_judge_infinite_ends_resolve_nothing_towards_them():
    # above the finite lower end: the sample cannot show an error upwards, whatever the noisy
    # point estimate says; within, but not resolved (not confirmed either)
    row = judge_quantile(101.0, 100.0, 99.9, INF, 1e-3)
    assert row["within_tolerance"] and not row["resolved"]
    assert row["error_s"] == pytest.approx(1.0)
    row = judge_quantile(100.05, 100.0, 99.9, INF, 1e-3)
    assert row["within_tolerance"] and not row["resolved"]
    assert row["error_band_s"][0] is None and row["error_band_s"][1] == pytest.approx(0.15)
    # below the finite end by more than the tolerance: resolved as an error, not within
    assert not judge_quantile(99.0, 99.05, 99.9, INF, 1e-3)["within_tolerance"]
    assert judge_quantile(99.85, 99.05, 99.9, INF, 1e-3)["within_tolerance"]
    # both ends unresolved: nothing is resolved, no verdict against the estimate
    row = judge_quantile(100.0, 100.2, -INF, INF, 1e-3)
    assert row["within_tolerance"] and not row["resolved"]


def _flagship_small() -> pa.StepGraph:
    """An interleaved pipeline body in 512 replicas: the main job's structure, small."""

    def lat(phase: str, stage: int, mb: int, chunk: int):
        mean = 1.0 if phase == "F" else 1.853
        return pa.lognormal(mean, 0.02 * mean)

    g = pa.StepGraph("flagship-small")
    g.add_replica_group(
        "replicas", pipeline_step_graph(4, 8, lat, schedule="interleaved", vpp=2, compact=True), 512
    )
    return g


def _degrade(monkeypatch, *, shift: float = 1.0, widen: float = 1.0) -> None:
    """Make the approximated core's law ``shift`` x its mean and ``widen`` x its sd."""
    real = pipeline_core.cached_components

    def degraded(key, spec, method, window):
        comps, info = real(key, spec, method, window)
        return [(w, mu * shift, sd * widen) for w, mu, sd in comps], info

    monkeypatch.setattr(pipeline_core, "cached_components", degraded)


def test_the_undegraded_core_gets_no_warning():
    g = _flagship_small()
    ver = verify(g, pa.predict(g), samples=4000, seed=1).verification
    assert ver["warning"] is None, ver["quantile_errors"]


@pytest.mark.parametrize(
    ("shift", "widen", "reason"),
    [
        # a max over 512 replicas reads the body beyond the samples upwards (one-sided band):
        # a low core is resolved by the band, a high or wide one by the guaranteed bounds
        (0.99, 1.0, "above the tolerance"),
        (1.01, 1.0, "outside the guaranteed bounds"),
        (1.0, 5.0, "outside the guaranteed bounds"),
    ],
)
def test_a_degraded_core_triggers_the_warning(monkeypatch, shift, widen, reason):
    _degrade(monkeypatch, shift=shift, widen=widen)
    g = _flagship_small()
    res = verify(g, pa.predict(g), samples=4000, seed=1)
    ver = res.verification
    assert ver["warning"] is not None and reason in ver["warning"]
    assert "WARNING" in res.summary()
    if shift < 1:
        # the measured error is the shift's size: ~1% of the step at every level
        for row in ver["quantile_errors"]:
            assert -0.015 < row["error_rel"] < -0.005, row


def test_the_error_rows_are_on_the_result():
    g = _flagship_small()
    res = verify(g, pa.predict(g), samples=2000, seed=1)
    rows = res.quantile_errors()
    assert [r["q"] for r in rows] == [0.5, 0.9, 0.95, 0.99, 0.999]
    for r in rows:
        assert {"value_s", "error_s", "error_rel", "error_band_s", "bounds_s"} <= set(r)
        assert r["value_s"] == pytest.approx(float(res.quantile(r["q"])))
    assert pa.predict(g).quantile_errors() == []


def test_tolerance_is_checked():
    g = _flagship_small()
    for bad in (-0.1, 1.0, "0.1", True, math.nan):
        with pytest.raises(ValueError, match="tolerance"):
            verify(g, pa.predict(g), tolerance=bad)


def test_main_job_prints_its_errors_and_no_warning(capsys):
    assert main(["predict", "--preset", "llama3-405b", "--gpus", "65536"]) == 0
    out = capsys.readouterr().out
    assert "WARNING" not in out and "KS" not in out
    assert "error (s)" in out and "guaranteed bounds (s)" in out
    assert "tolerance 0.1% of the quantile: all within it" in out


def test_cli_tolerance_is_wired_and_checked(capsys):
    assert (
        main(
            ["predict", "--preset", "llama3-405b", "--gpus", "65536", "--tolerance", "1e-5"]
            + ["--json"]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["cross_check"]["tolerance"] == 1e-5
    with pytest.raises(SystemExit) as exc:
        main(["predict", "--preset", "llama3-8b", "--gpus", "8", "--tolerance", "2"])
    assert exc.value.code == 2
    assert "--tolerance" in capsys.readouterr().err
