"""Rule v5 of ``core_shape="auto"``: a depth split (stages x vpp / microbatches <= 2).

The split was fixed before reading E from a mechanism (``validation/results/
cumulant_drift_study.md``); the criterion (``validation/results/core_shape_choice.md``, "v5
criterion") decides per class whether shallow cores get the cumulant core. These tests check
the engine's plumbing (what ``auto`` sees of a pipeline: its sizes, the target microbatch
count, the op-by-op lattice's sizes), that the criterion's code refuses what its text says it
refuses, and that the engine's table is what the kept rows of reading E and the cost guard left.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

import prism_analytic as pa
from prism_analytic.engines import core_shape
from prism_analytic.engines.core_shape import (
    AUTO_RULE_SHALLOW,
    DEPTH_SPLIT,
    auto_shape,
    depth_part,
    depth_ratio,
)
from prism_analytic.graph.pipeline import pipeline_step_graph

ROOT = Path(__file__).resolve().parents[1]
SYM = "pipeline-interleaved, symmetric ops"
SKEWED = "pipeline-interleaved, skewed ops"
LOW = "CV <= 10%"


@pytest.fixture(scope="module")
def choice():
    spec = importlib.util.spec_from_file_location(
        "core_shape_choice_v5", ROOT / "validation" / "core_shape_choice.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def _interleaved(p: int, m: int, vpp: int, cv: float = 0.03, compact: bool = True):
    def latency(phase, stage, mb, chunk):
        mean = (1.0 if phase == "F" else 2.0) / vpp
        return pa.normal(mean, cv * mean)

    return pipeline_step_graph(
        p, m, latency, schedule="interleaved", vpp=vpp, name="p", compact=compact
    )


def test_depth_ratio_and_split():
    assert depth_ratio(8, 8, 2) == 2.0  # gpt3-175b's body from 16,384 GPUs: on the split
    assert depth_part(depth_ratio(8, 8, 2)) == "shallow"
    assert depth_part(depth_ratio(4, 8, 5)) == "deep"  # 2.5
    assert depth_part(depth_ratio(16, 16, 8)) == "deep"  # the drift study's 8
    assert depth_part(depth_ratio(32, 64, 2)) == "shallow"  # 1: sd error +0.2% there
    assert DEPTH_SPLIT == 2.0
    for bad in ((0, 8, 2), (8, 0, 2), (8, 8, 0), (8.0, 8, 2), (True, 8, 2)):
        with pytest.raises(ValueError, match="must be an integer >= 1"):
            depth_ratio(*bad)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="depth ratio"):
            depth_part(bad)


def test_auto_reads_depth_only_where_the_table_has_the_band(monkeypatch):
    monkeypatch.setitem(AUTO_RULE_SHALLOW, (SYM, LOW), "cumulant")
    assert auto_shape(SYM, 0.03, 2.0)[0] == "cumulant"
    assert "depth ratio 2 <= 2" in auto_shape(SYM, 0.03, 2.0)[1]
    v4 = auto_shape(SYM, 0.03)[0]
    assert auto_shape(SYM, 0.03, 2.5)[0] == v4  # deep: v4's pick
    assert auto_shape(SYM, 0.03, None)[0] == v4  # no depth (explicit cores): v4's pick
    assert auto_shape(SYM, 0.2, 1.0)[0] == auto_shape(SYM, 0.2)[0]  # other band: v4's pick


@pytest.mark.parametrize("compact", [True, False])
def test_the_engine_passes_the_pipeline_sizes(monkeypatch, compact):
    """Compact and op-by-op forms give auto the same depth (the lattice's sizes)."""
    monkeypatch.setitem(AUTO_RULE_SHALLOW, (SYM, LOW), "cumulant")
    shallow = pa.predict(_interleaved(4, 4, 2, compact=compact), "analytic", core_shape="auto")
    deep = pa.predict(_interleaved(4, 4, 4, compact=compact), "analytic", core_shape="auto")
    (s,) = shallow.diagnostics["cores"]
    (d,) = deep.diagnostics["cores"]
    assert s["core_class"] == d["core_class"] == SYM
    assert s["shape"] == "cumulant" and "rule v5" in s["shape_reason"]
    assert d["shape"] == auto_shape(SYM, 0.03)[0] and "rule v5" not in d["shape_reason"]


def test_a_long_pipeline_is_judged_by_its_target_microbatch_count(monkeypatch):
    """A pipeline evaluated truncated (m = 512 here) gets the depth of its target m."""
    seen = []
    real = core_shape.auto_shape

    def spy(cls, cv=None, depth=None):
        seen.append(depth)
        return real(cls, cv, depth)

    monkeypatch.setattr(core_shape, "auto_shape", spy)
    pa.predict(_interleaved(4, 512, 2), "analytic", core_shape="auto")
    assert seen == [pytest.approx(4 * 2 / 512)]


def test_v5_criterion_refuses_what_its_text_refuses(choice):
    def variant(name, ks_cur, ks_cum, sp_cur=0.0, sp_cum=0.0, dkw=0.0043):
        row = {"class": SYM, "spread_ci": 0.01, "dkw_95": dkw, "cdf_width": 1e-4, "op_cv": 0.03}
        return {
            "kurtosis": {**row, "case": name, "ks": ks_cur, "spread_err": sp_cur},
            "cumulant": {**row, "case": name, "ks": ks_cum, "spread_err": sp_cum},
        }

    good = [variant("interleaved 8x32 normal 3%", 0.09, 0.02), variant("a 4x8", 0.01, 0.01)]
    assert choice.v5_class(SYM, good) == ("cumulant", [True] * 5)
    # 1: worst case not resolvably lower
    pick, conds = choice.v5_class(SYM, [variant("x 4x8", 0.02, 0.015)])
    assert pick == "kurtosis" and not conds[0]
    # 3: resolvably worse on one variant although the worst case is far lower
    pick, conds = choice.v5_class(SYM, good + [variant("y 4x8", 0.001, 0.03)])
    assert pick == "kurtosis" and conds[0] and not conds[2]
    # 4: the spread error resolvably larger
    pick, conds = choice.v5_class(SYM, good + [variant("z 4x8", 0.01, 0.01, 0.01, 0.08)])
    assert pick == "kurtosis" and not conds[3]
    # 5: fewer variants meet both targets
    two = [variant(f"w{i} 4x8", 0.02, 0.02, 0.02, 0.035) for i in range(2)]
    pick, conds = choice.v5_class(SYM, good[:1] + two)  # met: kurtosis 2, cumulant 1
    assert pick == "kurtosis" and conds[:4] == [True] * 4 and not conds[4]


def test_the_split_of_the_criterion_is_the_engines(choice):
    assert choice.R0 == DEPTH_SPLIT
    assert choice.depth_ratio("interleaved 16x16 vpp 8 normal 2% (new)") == 8.0
    assert choice.depth_ratio("interleaved 32x64 lognormal 5%") == 1.0  # vpp 2 by default
    assert choice.depth_ratio("op-by-op 1f1b 8x32 normal 5%") == 0.25
    assert choice.V4_LOW == {
        SYM: core_shape.auto_shape(SYM, 0.05)[0],
        SKEWED: core_shape.auto_shape(SKEWED, 0.05)[0],
    }


def test_reading_e_gives_the_recorded_verdict_and_the_engine_table(choice):
    """The kept rows of reading E refuse the split in both classes (condition 3), so the table
    the engine reads is empty and ``auto`` is rule v4."""
    rows = json.loads((ROOT / "validation" / "results" / "core_shape_choice_E.json").read_text())
    assert {r["seed"] for r in rows} == {20261206}
    parts = choice.v5_read(rows)
    assert sorted(parts) == [(SKEWED, "deep"), (SKEWED, "shallow"), (SYM, "deep"), (SYM, "shallow")]
    assert [len(parts[(c, "shallow")]) for c in (SYM, SKEWED)] == [30, 16]
    for cls in (SYM, SKEWED):
        pick, conds = choice.v5_class(cls, parts[(cls, "shallow")])
        assert pick == choice.V4_LOW[cls]
        assert conds == [True, True, False, True, True]
    assert AUTO_RULE_SHALLOW == {}
