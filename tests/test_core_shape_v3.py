"""The v3 ``core_shape="auto"`` criterion (``validation/core_shape_choice.py``) and its record.

The criterion was written before reading C (``validation/results/core_shape_choice.md``); these
tests check that its code does what the text says on hand-made rows (each condition can fail a
candidate), that the kept rows of reading C give the recorded verdict, and that the engine's
table is what the verdict plus the cost guard left.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from prism_analytic.engines.core_shape import AUTO_RULE

ROOT = Path(__file__).resolve().parents[1]
ROWS_C = ROOT / "validation" / "results" / "core_shape_choice_C.json"


@pytest.fixture(scope="module")
def choice():
    spec = importlib.util.spec_from_file_location(
        "core_shape_choice", ROOT / "validation" / "core_shape_choice.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


CLS = "pipeline-interleaved, symmetric ops"  # v2: normal; kurtosis eligible by earlier readings


def _variant(ks: dict[str, float], spread: dict[str, float] | None = None, dkw=0.0043) -> dict:
    spread = spread or {}
    return {
        s: {
            "class": CLS,
            "ks": ks[s],
            "spread_err": spread.get(s, 0.0),
            "spread_ci": 0.01,
            "dkw_95": dkw,
            "cdf_width": 1e-4,
        }
        for s in ("normal", "skew", "kurtosis")
    }


def test_a_resolved_worst_case_gain_worse_nowhere_is_picked(choice):
    variants = [
        _variant({"normal": 0.20, "skew": 0.15, "kurtosis": 0.05}),
        _variant({"normal": 0.01, "skew": 0.01, "kurtosis": 0.012}),  # inside the tie band
    ]
    pick, conds = choice.v3_class(CLS, variants)
    assert pick == "kurtosis" and all(conds["kurtosis"])
    assert not conds["skew"][1]  # skew was not the lowest on the earlier readings


def test_each_condition_can_refuse_the_candidate(choice):
    base = _variant({"normal": 0.20, "skew": 0.15, "kurtosis": 0.05})
    # 1: the worst-case gain is inside the Monte Carlo bands
    pick, conds = choice.v3_class(
        CLS, [_variant({"normal": 0.05, "skew": 0.05, "kurtosis": 0.045}, dkw=0.0136)]
    )
    assert pick == "normal" and conds["kurtosis"][0] is False
    # 3: resolvably worse on one variant (beyond 2 DKW half-widths and both brackets)
    worse = _variant({"normal": 0.01, "skew": 0.01, "kurtosis": 0.03})
    pick, conds = choice.v3_class(CLS, [base, worse])
    assert pick == "normal" and conds["kurtosis"][2] is False
    # 4: a resolvably larger worst spread error
    spread = _variant(
        {"normal": 0.01, "skew": 0.01, "kurtosis": 0.01},
        {"normal": 0.01, "skew": 0.01, "kurtosis": 0.10},
    )
    pick, conds = choice.v3_class(CLS, [base, spread])
    assert pick == "normal" and conds["kurtosis"][3] is False
    # 5: fewer variants meeting both targets (KS <= 0.03 and |spread| <= 3%)
    fewer = _variant(
        {"normal": 0.01, "skew": 0.01, "kurtosis": 0.01},
        {"normal": 0.02, "skew": 0.02, "kurtosis": 0.04},
    )
    pick, conds = choice.v3_class(CLS, [base, fewer])
    assert pick == "normal" and conds["kurtosis"][4] is False
    # 2: a class where kurtosis was never measured before cannot switch to it on one reading
    explicit = [
        {s: dict(r, **{"class": "explicit, skewed ops"}) for s, r in base.items()},
    ]
    pick, conds = choice.v3_class("explicit, skewed ops", explicit)
    assert pick == "skew" and conds["kurtosis"][1] is False


def test_reading_c_gives_the_recorded_verdict(choice):
    rows = json.loads(ROWS_C.read_text())
    assert {r["seed"] for r in rows} == {20261203}
    by_case: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["core_shape"]] = r
    picks = {cls: choice.v3_class(cls, v)[0] for cls, v in choice._by_class(by_case).items()}
    # the accuracy conditions changed one class only ...
    assert {c: s for c, s in picks.items() if s != choice.V2_RULE[c]} == {CLS: "kurtosis"}
    # ... and once the kurtosis core passed the cost guard (every preset <= 1 s, slowest /
    # fastest <= 2x) the table took that pick and nothing else
    assert AUTO_RULE == {**choice.V2_RULE, **picks}
