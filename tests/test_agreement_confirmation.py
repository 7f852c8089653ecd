"""The agreement suite's confirmation rule (prism_analytic.validation.confirmation).

Rows whose verdict lies inside Monte Carlo's noise are re-measured once with a larger sample and
seed + 1, and that verdict stands; decided rows are never re-run. The unit tests replace the
Monte Carlo side of :func:`agreement.evaluate` by scripted rows (the real verdict functions
judge them); one test runs the real thing on a small scenario.
"""

from __future__ import annotations

import argparse
import math

import pytest

from prism_analytic.cli.agreement import register
from prism_analytic.validation import agreement, confirmation
from prism_analytic.validation.confirmation import Comparison


def _dkw(n: int) -> float:
    return math.sqrt(math.log(2 / 0.05) / (2 * n))


class _ScriptedMonteCarlo:
    """Stands in for ``agreement._against_monte_carlo``: the KS of each call is scripted."""

    def __init__(self, *ks: float) -> None:
        self.ks = list(ks)
        self.calls: list[tuple[int, int]] = []

    def __call__(self, name, graph, answers, samples, seed, core_shape):
        self.calls.append((samples, seed))
        row = {
            "name": name,
            "reconvergent": False,
            "ks": self.ks[len(self.calls) - 1],
            "p50_rel_err": 0.0,
            "p99_rel_err": 0.0,
            "spread_rel_err": 0.0,
            "mc_dkw_95": _dkw(samples),
            "mc_pool_ks": 0.0,
            "p50_mc_ci": 1e-5,
            "p99_mc_ci": 1e-5,
            "spread_mc_ci": 1e-4,
            "in_bounds": True,
            "samples": samples,
            "requested_samples": samples,
            "seed": seed,
        }
        row["verdict"], row["misses"] = agreement.verdict(row)
        row["noise_decided"] = confirmation.noise_decided(agreement.comparisons(row))
        return row


def _evaluate(monkeypatch, script: _ScriptedMonteCarlo, **kw):
    monkeypatch.setattr(agreement, "_against_monte_carlo", script)
    return agreement.evaluate("chain", 100_000, 12345, bounds=False, confirm=True, **kw)


def test_a_miss_inside_the_noise_is_re_measured_and_the_confirmed_verdict_replaces_it(
    monkeypatch,
):
    # 0.006 misses KS <= 0.005 by less than the DKW half-width at 1e5 (0.0043)
    script = _ScriptedMonteCarlo(0.006, 0.0012)
    row = _evaluate(monkeypatch, script)
    assert script.calls == [(100_000, 12345), (1_000_000, 12346)]  # 10x, at least 1e6; seed + 1
    assert row["first"]["misses"] == ["ks~noise"]
    assert row["verdict"] == "PASS" and row["ks"] == 0.0012 and row["samples"] == 1_000_000
    assert row["confirmation"]["status"] == "confirmed"
    assert row["confirmation"]["seed"] == 12346 and row["confirmation"]["time_s"] >= 0


def test_a_pass_inside_the_noise_is_re_measured_too_and_can_fail(monkeypatch):
    # 0.004 meets 0.005 by less than the noise: the rule must be able to take a PASS away
    script = _ScriptedMonteCarlo(0.004, 0.0065)
    row = _evaluate(monkeypatch, script)
    assert row["first"]["verdict"] == "PASS" and row["first"]["noise_decided"] == ["ks"]
    assert len(script.calls) == 2
    assert (row["verdict"], row["misses"]) == ("MISS", ["ks"])  # outside the 1e6 noise


def test_a_comparison_still_inside_the_noise_after_confirmation_is_a_miss(monkeypatch):
    # met at 1e6 (0.0045 <= 0.005) but by less than its DKW half-width (0.00136)
    row = _evaluate(monkeypatch, _ScriptedMonteCarlo(0.006, 0.0045))
    assert row["verdict"] == "MISS"
    assert row["misses"] == ["ks unresolved (within MC noise)"]


@pytest.mark.parametrize("ks", [0.0005, 0.02])
def test_rows_decided_outside_the_noise_are_never_re_run(monkeypatch, ks):
    # 0.0005: passes with room (0.0005 + 0.0043 < 0.005); 0.02: misses by more than the noise
    script = _ScriptedMonteCarlo(ks, 0.0)
    row = _evaluate(monkeypatch, script)
    assert script.calls == [(100_000, 12345)]
    assert row["confirmation"] is None and "first" not in row
    assert row["ks"] == ks and row["verdict"] == ("PASS" if ks < 0.005 else "MISS")


def test_a_row_the_monte_carlo_guard_cannot_enlarge_is_unconfirmed(monkeypatch):
    monkeypatch.setattr(agreement, "affordable_samples", lambda graph, n: min(n, 100_000))
    script = _ScriptedMonteCarlo(0.004)
    row = _evaluate(monkeypatch, script)
    assert len(script.calls) == 1
    assert row["first"]["verdict"] == "PASS"
    assert row["verdict"] == "MISS" and row["confirmation"]["status"] == "unconfirmed"
    assert row["misses"][-1] == "unconfirmed (MC work guard: 100,000 samples)"


def test_confirmation_samples_and_seed():
    assert confirmation.confirmation_samples(100_000) == 1_000_000
    assert confirmation.confirmation_samples(20_000) == 1_000_000
    assert confirmation.confirmation_samples(400_000) == 4_000_000
    assert confirmation.confirmation_samples(100_000, 300_000) == 300_000
    assert confirmation.confirmation_seed(12345) == 12346
    with pytest.raises(ValueError, match="confirm_samples"):
        confirmation.confirmation_samples(100_000, 1)


def test_noise_decided_needs_no_miss_outside_the_noise():
    inside_miss = Comparison("ks<clark", met=False, within_noise=True)
    inside_met = Comparison("p99", met=True, within_noise=True)
    decided_met = Comparison("ks", met=True, within_noise=False)
    decided_miss = Comparison("spread", met=False, within_noise=False)
    assert confirmation.noise_decided([decided_met, inside_miss, inside_met]) == [
        "ks<clark",
        "p99",
    ]
    assert confirmation.noise_decided([decided_met]) == []
    assert confirmation.noise_decided([decided_miss, inside_miss]) == []


def test_a_spread_comparison_is_inside_the_noise_only_if_the_midpoint_is():
    row = {
        "reconvergent": True,
        "ks": 0.001,
        "p50_rel_err": 0.0,
        "p99_rel_err": 0.0,
        "spread_rel_err": -0.010,
        "mc_dkw_95": 0.0043,
        "mc_pool_ks": 0.0,
        "p50_mc_ci": 1e-4,
        "p99_mc_ci": 1e-4,
        "spread_mc_ci": 0.012,
        "ks_independent": 0.5,
        "spread_rel_err_independent": -0.040,  # midpoint -2.5%: outside the 1.2% interval
        "ks_clark": 0.5,
        "spread_rel_err_clark": 0.012,  # midpoint +0.1%: the sample's noise can swap them
    }
    comps = {c.name: c for c in agreement.comparisons(row)}
    assert comps["spread<independent"] == Comparison("spread<independent", True, False)
    assert comps["spread<clark"] == Comparison("spread<clark", True, True)


def test_the_rule_on_a_real_scenario():
    # 2,000 samples: DKW 0.030, so chain's KS target (0.005) is inside the noise
    row = agreement.evaluate("chain", 2_000, 7, bounds=False, confirm=True, confirm_samples=30_000)
    assert row["first"]["samples"] == 2_000 and "ks" in row["first"]["noise_decided"]
    assert row["samples"] == 30_000 and row["seed"] == 8
    assert row["confirmation"]["samples"] == 30_000
    assert row["ks"] <= 0.02  # an exact scenario against 30,000 samples (DKW 0.0078)


def test_cli_flags():
    parser = argparse.ArgumentParser(prog="prism")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["agreement", "--confirm-noise", "--confirm-samples", "2e6"])
    assert args.confirm_noise and args.confirm_samples == 2_000_000
    args = parser.parse_args(["agreement"])
    assert not args.confirm_noise and args.confirm_samples is None
