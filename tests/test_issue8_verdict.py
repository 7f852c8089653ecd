"""Issue #8's verdict (prism_analytic.validation.issue8) beside the suite's, and its report.

Each condition the issue names is shown to be able to fail on its own, inside and outside Monte
Carlo's noise; the conditions the issue does not name (p50, p99 without 512 replicas, spread
against the baselines) are shown not to move it. One test runs a real scenario end to end.
"""

from __future__ import annotations

from typing import Any

import pytest

from prism_analytic.graph import StepGraph
from prism_analytic.validation import agreement, report
from prism_analytic.validation.issue8 import issue8_verdict, largest_replica_group


def _paired(outcome: str) -> dict[str, Any]:
    low, high = {"beats": (-0.02, -0.01), "tie": (-0.01, 0.01), "loses": (0.01, 0.02)}[outcome]
    return {"diff": (low + high) / 2, "low": low, "high": high, "outcome": outcome}


def _row(**kw: Any) -> dict[str, Any]:
    """A reconvergent row that meets every condition of both verdicts far outside the noise."""
    row = {
        "reconvergent": True,
        "replicas": 1,
        "ks": 0.010,
        "p50_rel_err": 0.0,
        "p99_rel_err": 0.0,
        "spread_rel_err": 0.01,
        "mc_dkw_95": 0.001,
        "mc_pool_ks": 0.0,
        "p50_mc_ci": 1e-4,
        "p99_mc_ci": 1e-4,
        "spread_mc_ci": 1e-3,
        "ks_independent": 0.2,
        "spread_rel_err_independent": 0.2,
        "ks_clark": 0.05,
        "spread_rel_err_clark": 0.05,
        "ks_paired": {"independent": _paired("beats"), "clark": _paired("beats")},
    }
    row.update(kw)
    return row


def test_a_row_meeting_everything_passes_both():
    assert issue8_verdict(_row()) == ("PASS", [])
    assert agreement.verdict(_row()) == ("PASS", [])


@pytest.mark.parametrize(
    ("change", "misses"),
    [
        ({"ks": 0.040}, ["ks"]),  # "KS <= 0.03 ... on every one"
        ({"ks": 0.0305, "mc_dkw_95": 0.0043}, ["ks~noise"]),
        ({"ks": 0.0295, "mc_dkw_95": 0.0043}, ["ks unresolved (within MC noise)"]),
        ({"spread_rel_err": -0.035}, ["spread"]),  # "spread error <= 3%"
        (
            {"spread_rel_err": 0.0299, "spread_mc_ci": 0.004},
            ["spread unresolved (within MC noise)"],
        ),
        ({"replicas": 512, "p99_rel_err": 0.004}, ["p99"]),  # "p99 of the max over 512 ..."
        (
            {"replicas": 512, "p99_rel_err": 0.0029, "p99_mc_ci": 3e-4},
            ["p99 unresolved (within MC noise)"],
        ),
        # "Each beats independence and plain Clark on KS"
        (
            {"ks_paired": {"independent": _paired("beats"), "clark": _paired("tie")}},
            ["ks tie clark (paired bootstrap)"],
        ),
        (
            {"ks_paired": {"independent": _paired("loses"), "clark": _paired("beats")}},
            ["ks>independent (paired bootstrap)"],
        ),
        ({"ks_paired": {"clark": _paired("beats")}}, []),  # falls back: 0.01 vs 0.2 unpaired
        ({"ks_paired": None, "ks_clark": 0.011}, ["ks tie clark (unpaired, 2x noise)"]),
    ],
)
def test_each_condition_of_the_issue_can_fail(change, misses):
    assert issue8_verdict(_row(**change)) == ("PASS" if not misses else "MISS", misses)


def test_a_reconvergent_row_without_baselines_cannot_pass():
    row = _row(ks_paired=None)
    for m in ("independent", "clark"):
        del row[f"ks_{m}"]
    assert issue8_verdict(row) == (
        "MISS",
        ["ks<independent not measured", "ks<clark not measured"],
    )


def test_conditions_the_issue_does_not_name_move_only_the_suite():
    # p50, p99 of a step that is not a max over 512 replicas, and the spread against Clark
    row = _row(p50_rel_err=0.01, p99_rel_err=0.01, spread_rel_err=0.02, spread_rel_err_clark=0.001)
    assert issue8_verdict(row) == ("PASS", [])
    assert agreement.verdict(row) == ("MISS", ["p50", "p99", "spread>clark"])
    # the suite's unpaired KS rule leaves 0.010 vs 0.0105 to the noise (its confirmation
    # re-measures it); the paired test can decide it on this sample
    row = _row(ks_clark=0.0105, mc_dkw_95=0.0043)
    assert "ks<clark" in agreement.noise_decided(agreement.comparisons(row))
    assert issue8_verdict(row)[0] == "PASS"


def test_non_reconvergent_rows_need_only_ks_005():
    exact = {
        "reconvergent": False,
        "ks": 0.002,
        "p99_rel_err": 0.01,  # misses the suite's 0.1%, not asked by the issue
        "mc_dkw_95": 0.0014,
        "mc_pool_ks": 0.0,
        "p50_mc_ci": 1e-4,
        "p99_mc_ci": 1e-4,
        "spread_mc_ci": 1e-3,
        "in_bounds": False,
    }
    assert issue8_verdict(exact) == ("PASS", [])
    assert agreement.verdict(exact)[0] == "MISS"
    assert issue8_verdict({**exact, "ks": 0.007})[1] == ["ks"]
    assert issue8_verdict({**exact, "ks": 0.006})[1] == ["ks~noise"]
    assert issue8_verdict({**exact, "ks": 0.004, "mc_dkw_95": 0.0043})[1] == [
        "ks unresolved (within MC noise)"
    ]
    # the pooled groups' KS error counts as noise too
    assert issue8_verdict({**exact, "ks": 0.004, "mc_pool_ks": 0.0011})[1] == [
        "ks unresolved (within MC noise)"
    ]


def test_largest_replica_group_reads_nested_groups():
    body = StepGraph("body")
    body.add_op("a", agreement.pa.normal(1.0, 0.1))
    inner = StepGraph("inner")
    inner.add_replica_group("g", body, 8)
    outer = StepGraph("outer")
    outer.add_replica_group("h", inner, 4)
    assert largest_replica_group(body) == 1
    assert largest_replica_group(outer) == 32  # 4 copies of a max over 8: a max over 32
    assert largest_replica_group(agreement.SCENARIOS["pipe_4x8_x512"].build()) == 512


def test_a_real_row_reports_both_verdicts_and_the_paired_test():
    row = agreement.evaluate("pipe_1f1b_4x8", 20_000, 7, bounds=False)
    assert row["replicas"] == 1 and set(row["ks_paired"]) == {"independent", "clark"}
    for p in row["ks_paired"].values():
        assert p["low"] <= p["high"] and p["resamples"] >= 200
    # KS 0.0069 vs plain Clark's 0.0496 at 1e5 (agreement_auto.md v3): clearly ahead
    assert row["ks_paired"]["clark"]["outcome"] == "beats"
    assert row["issue8_verdict"] in ("PASS", "MISS")
    text = report.format_table([row])
    assert "issue #8" in text and "paired 95% interval" in text
    assert f"issue #8 wording {int(row['issue8_verdict'] == 'PASS')} of 1" in text
    assert "Issue #8 wording" in report.targets_line()
