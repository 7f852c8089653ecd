"""validation/fit_defaults.py: the fitting procedure recovers efficiencies it did not see."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from prism_analytic.workload.jobs import load_config

ROOT = Path(__file__).parents[2]
CONFIGS = ROOT / "validation" / "configs"


def _load(name: str):
    full = f"validation.{name}"
    if full in sys.modules:
        return sys.modules[full]
    spec = importlib.util.spec_from_file_location(full, ROOT / "validation" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[full] = mod
    spec.loader.exec_module(mod)
    return mod


# FP8 and FP4 405B jobs, FP8 8B jobs whose data-parallel traffic is large against the step
SYNTH = (
    "mlperf_gb200_1024",
    "mlperf51_hipergator_b200_405b_256",
    "mlperf51_tyche_gb200_405b_512",
    "mlperf51_theia_gb300_405b_512",
    "mlperf51_tyche_gb200_8b_72",
    "mlperf51_theia_gb300_8b_512",
)


def test_fit_recovers_known_efficiencies_from_measurements_the_model_generated():
    _load("mlperf_cases")
    fd = _load("fit_defaults")
    jobs = [load_config(CONFIGS / f"{n}.toml") for n in SYNTH]
    truth = {"gemm_fp8": 0.55, "gemm_fp4": 0.28, "overlap_dp": 0.6}
    measured = [fd.core_s(j, truth) for j in jobs]
    # the start (shipped defaults) is away from the truth: the fit has something to find
    start = fd._shipped()
    assert all(abs(start[k] - v) > 0.02 for k, v in truth.items())
    got = fd.fit(jobs, measured, [1.0] * len(jobs), [1.0] * len(jobs), tuple(truth))
    for k, v in truth.items():
        assert got[k] == pytest.approx(v, abs=2e-3), k


def test_a_variability_factor_scales_the_target_not_the_efficiency():
    fd = _load("fit_defaults")
    jobs = [load_config(CONFIGS / f"{n}.toml") for n in SYNTH[:2]]
    truth = {"gemm_fp8": 0.52}
    factors = [1.1, 1.2]  # medians above the core by a known variability factor
    measured = [fd.core_s(j, truth) * f for j, f in zip(jobs, factors, strict=True)]
    got = fd.fit(jobs, measured, factors, [1.0, 1.0], ("gemm_fp8",))
    assert got["gemm_fp8"] == pytest.approx(0.52, abs=2e-3)


def test_a_parameter_no_training_case_uses_keeps_its_start_value():
    fd = _load("fit_defaults")
    jobs = [load_config(CONFIGS / "mlperf_gb200_1024.toml")]  # FP8 only: no FP4 GEMM
    got = fd.fit(jobs, [8.0], [1.0], [1.0], ("gemm_fp8", "gemm_fp4"))
    assert got["gemm_fp4"] == fd._shipped()["gemm_fp4"]
    assert got["gemm_fp8"] != fd._shipped()["gemm_fp8"]


def test_bf16_follows_fp8_by_the_benchmarks_ratio():
    fd = _load("fit_defaults")
    out = fd.with_bf16({"gemm_fp8": 0.40})
    assert out["gemm"] == pytest.approx(0.40 * 0.697 / 0.501)


def test_unknown_parameter_is_refused_by_name(capsys):
    fd = _load("fit_defaults")
    with pytest.raises(SystemExit):
        fd.main(["--params", "gemm_fp8,bogus"])
    assert "bogus" in capsys.readouterr().err


@pytest.mark.slow
def test_the_shipped_defaults_are_the_fit_on_all_systems(shared_data):
    """Refitting on the public set gives the shipped values (a model change needs a refit)."""
    cases = _load("mlperf_cases").cases(shared_data)
    fd = _load("fit_defaults")
    jobs = [load_config(c.config) for c in cases]
    factors = [fd.variability_factor(j) for j in jobs]
    got = fd.fit(jobs, [c.median_s for c in cases], factors, fd._weights(cases), fd.DEFAULT_FIT)
    shipped = fd._shipped()
    for k in fd.DEFAULT_FIT:
        assert got[k] == pytest.approx(shipped[k], abs=2e-3), k


def test_variants_change_only_their_mechanism_and_restore_the_model():
    """``--variant sfu`` slows GB200's FP8 attention (exp-bound) but not GB300's (doubled SFU);
    ``same_logits`` (the previous model) runs the logits at the FP8/FP4 rate."""
    fd = _load("fit_defaults")
    from prism_analytic.workload.step_estimate import step_time

    ty = load_config(CONFIGS / "mlperf51_tyche_gb200_8b_8.toml")
    th = load_config(CONFIGS / "mlperf51_theia_gb300_8b_8.toml")
    big = load_config(CONFIGS / "mlperf51_tyche_gb200_405b_512.toml")
    before = [step_time(j).step_s for j in (ty, th, big)]
    with fd.VARIANTS["sfu"]():
        sfu = [step_time(j).step_s for j in (ty, th, big)]
    with fd.VARIANTS["chunk_dp"]():
        chunk = [step_time(j).step_s for j in (ty, th, big)]
    after = [step_time(j).step_s for j in (ty, th, big)]
    assert after == before
    assert sfu[0] > before[0] * 1.01  # FP8 attention at 2x the exp rate's pace on GB200
    assert sfu[1] == pytest.approx(before[1], rel=1e-9)  # GB300: tensor and exp bounds equal
    assert chunk[:2] == before[:2]  # pp 1: untouched
    assert chunk[2] < before[2]  # interleaved pp 8: dp exposure capped at 1/vpp
    with fd.VARIANTS["same_logits"]():
        same = [step_time(j).step_s for j in (ty, th, big)]
    assert all(a < b for a, b in zip(same, before, strict=True))  # FP8/FP4 logits: faster
    assert step_time(ty).step_s == before[0]
