"""Reading F: a confirmatory reading of ``core_shape="auto"`` for explicit cores with skewed ops.

The criterion (v4's five conditions, unchanged, on 11 held-out FSDP-overlap cores) was written
in ``validation/results/core_shape_choice.md`` ("Reading F criterion") before any row. These
tests check that the kept rows give the recorded verdict, that the code's condition 2 is the
table written before the rows, that a hand-made reading where kurtosis's lead is inside the
noise keeps ``skew`` (the criterion can refuse), and that the engine applies the pick to the
band above 10% only.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

import prism_analytic as pa
from prism_analytic.engines.core_shape import (
    AUTO_RULE,
    AUTO_RULE_READING_F,
    CV_BANDS,
    auto_shape,
)

ROOT = Path(__file__).resolve().parents[1]
ROWS_F = ROOT / "validation" / "results" / "core_shape_choice_F.json"
CLS = "explicit, skewed ops"
LOW, HIGH = CV_BANDS
SHAPES = ("normal", "skew", "kurtosis", "cumulant")


@pytest.fixture(scope="module")
def choice():
    spec = importlib.util.spec_from_file_location(
        "core_shape_choice_f", ROOT / "validation" / "core_shape_choice.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def _variant(ks: dict[str, float], cv: float, dkw: float = 0.0014) -> dict:
    return {
        s: {
            "case": f"fsdp 10 layers lognormal {cv:.0%}",
            "class": CLS,
            "core_shape": s,
            "ks": ks[s],
            "spread_err": 0.0,
            "spread_ci": 0.004,
            "dkw_95": dkw,
            "cdf_width": 1e-5,
            "op_cv": cv,
        }
        for s in SHAPES
    }


def test_condition_two_is_the_table_written_before_the_rows(choice):
    assert choice.EARLIER_LOWEST_F == {
        (CLS, LOW): frozenset({"kurtosis", "cumulant"}),
        (CLS, HIGH): frozenset({"kurtosis"}),
    }


def test_a_lead_inside_the_noise_keeps_skew(choice):
    # kurtosis lower on every variant but within 2 DKW: condition 1 refuses, skew stays
    noisy = [_variant({"normal": 0.01, "skew": 0.003, "kurtosis": 0.001, "cumulant": 0.001}, 0.2)]
    pick, conds = choice.v4_class(CLS, HIGH, noisy, choice.EARLIER_LOWEST_F)
    assert pick == "skew" and not conds["kurtosis"][0]
    # the same lead resolved (smaller noise) is taken; cumulant, lowest here, fails condition 2
    resolved = [
        _variant({"normal": 0.01, "skew": 0.008, "kurtosis": 0.002, "cumulant": 0.001}, 0.2, 1e-3)
    ]
    pick, conds = choice.v4_class(CLS, HIGH, resolved, choice.EARLIER_LOWEST_F)
    assert pick == "kurtosis" and conds["kurtosis"] == [True] * 5 and not conds["cumulant"][1]


def test_reading_f_gives_the_recorded_verdict_and_the_engine_table(choice):
    rows = json.loads(ROWS_F.read_text())
    assert {r["seed"] for r in rows} == {20261213}
    cases = {r["case"] for r in rows}
    assert len(cases) == 11 and len(rows) == 11 * 5 and all(c.endswith("(F)") for c in cases)
    assert {r["class"] for r in rows} == {CLS}
    assert {r["samples"] for r in rows if not r["replicas"]} == {1_000_000}
    assert {r["samples"] for r in rows if r["replicas"]} == {100_000}
    by_case = choice._cases(rows)
    verdict = {
        key: choice.v4_class(*key, variants, choice.EARLIER_LOWEST_F)
        for key, variants in choice._by_class_band(by_case).items()
    }
    assert {k: v[0] for k, v in verdict.items()} == {(CLS, LOW): "skew", (CLS, HIGH): "kurtosis"}
    # low band: kurtosis lower but not resolved (condition 1 only); high band: all five hold
    assert verdict[(CLS, LOW)][1]["kurtosis"] == [False, True, True, True, True]
    assert verdict[(CLS, HIGH)][1]["kurtosis"] == [True] * 5
    changed = {k: v[0] for k, v in verdict.items() if v[0] != AUTO_RULE[CLS]}
    assert AUTO_RULE_READING_F == changed and AUTO_RULE[CLS] == "skew"


def test_the_suite_fsdp_case_is_not_in_reading_f(choice):
    # the agreement row (lognormal comm 10%, normal compute 3%, 8 layers) motivated the reading
    names = {c.name for c in choice.reading_f_grid()}
    assert not any("8 layers" in n or "10%" in n for n in names)


def test_the_engine_applies_reading_f_to_the_high_band_only(choice):
    shape, why = auto_shape(CLS, 0.2)
    assert shape == "kurtosis" and "reading F" in why
    assert auto_shape(CLS, 0.1)[0] == "skew" and auto_shape(CLS)[0] == "skew"
    for cv, want in ((0.2, "kurtosis"), (0.05, "skew")):
        res = pa.predict(choice.fsdp(4, "lognormal", cv), "analytic")
        (core,) = res.diagnostics["cores"]
        assert core["core_class"] == CLS and core["shape"] == want
