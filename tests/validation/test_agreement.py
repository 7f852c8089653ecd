"""The agreement suite on a few cheap scenarios: analytic against Monte Carlo (fast subset).

The full suite (100,000 samples, every scenario) is ``prism agreement``.
"""

from __future__ import annotations

import argparse
import json

import pytest

from prism_analytic.cli.agreement import register
from prism_analytic.validation import agreement, report

SAMPLES = 20_000


def test_registry_covers_the_required_structures():
    names = set(agreement.SCENARIOS)
    assert len(names) >= 12
    assert {
        "chain",
        "fork_join",
        "barrier_8",
        "barrier_1024",
        "barrier_65536",
        "slow_copies",
        "speed_factors",
        "regime_mixture",
        "heavy_tail_comm",
        "fsdp_overlap",
        "pipe_1f1b_4x8",
        "pipe_1f1b_8x32",
        "pipe_1f1b_16x64",
        "pipe_interleaved_8x32",
        "pipe_4x8_x512",
    } <= names
    for scn in agreement.SCENARIOS.values():
        scn.build().validate()


@pytest.mark.parametrize("name", ["chain", "fork_join", "barrier_8"])
def test_exact_scenarios_agree_with_monte_carlo(name):
    row = agreement.evaluate(name, SAMPLES)
    assert not row["reconvergent"]
    assert row["verdict"] == "PASS", row["misses"]
    assert row["in_bounds"], row
    for q, r in row["quantiles"].items():
        low, high = r["interval_s"]
        # an exact answer lies inside Monte Carlo's interval (0.1% widening not needed)
        assert low <= r["analytic_s"] <= high, (q, r)
        assert r["error_s"] == pytest.approx(r["analytic_s"] - r["montecarlo_s"])
    assert row["ks"] <= 0.02  # diagnostic: about twice the 95% DKW half-width at 20,000


def test_the_verdict_fails_a_shifted_answer(monkeypatch):
    """An answer 1% high misses every level Monte Carlo resolves; it passes a 2% tolerance.

    (At 20,000 samples p99.9's interval is about as wide as the shift: the verdict may leave it.)
    """
    real = agreement.pa.predict

    def shifted(graph, method="analytic", **kw):
        res = real(graph, method, **kw)
        if method != "analytic":
            return res
        import dataclasses

        return dataclasses.replace(res, distribution=res.distribution.scaled(1.01))

    monkeypatch.setattr(agreement.pa, "predict", shifted)
    row = agreement.evaluate("chain", SAMPLES, bounds=False)
    assert row["verdict"] == "MISS"
    assert [m.split()[0] for m in row["misses"]][:3] == ["p50", "p90", "p99"]
    # the true error (the 1% shift of an exact answer) lies in each level's error band
    for r in row["quantiles"].values():
        low, high = r["error_band_s"]
        assert low <= r["analytic_s"] * (1 - 1 / 1.01) <= high, r
    assert agreement.evaluate("chain", SAMPLES, bounds=False, tolerance=0.02)["verdict"] == "PASS"


def test_verdict_reads_the_quantile_rows_and_the_bounds():
    ok = {"within_tolerance": True, "error_rel": 0.0}
    row = {"quantiles": {str(q): dict(ok) for q in agreement.LEVELS}, "in_bounds": True}
    assert agreement.verdict(row) == ("PASS", [])
    row["quantiles"]["0.999"] = {"within_tolerance": False, "error_rel": -0.1295}
    row["in_bounds"] = False
    assert agreement.verdict(row) == ("MISS", ["p99.9 -12.95%", "bounds"])


def test_pipe_straggler_tail_is_inside_monte_carlo():
    """The rare-stall pipeline's p99.9 (13% low before conditioning on the stall count)."""
    row = agreement.evaluate("pipe_straggler_8x32", SAMPLES, bounds=False)
    r = row["quantiles"]["0.999"]
    assert r["within_tolerance"], r


def _agreement_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prism")
    register(parser.add_subparsers(dest="command"))
    return parser


def test_cli_subcommand_prints_json_rows(capsys):
    args = _agreement_parser().parse_args(
        ["agreement", "--only", "chain", "--samples", str(SAMPLES), "--json"]
    )
    assert args.func(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == ["chain"]
    for key in (
        "name",
        "quantiles",
        "p50_err_s",
        "p50_rel_err",
        "p999_rel_err",
        "ks",
        "in_bounds",
        "analytic_s",
        "montecarlo_s",
        "verdict",
    ):
        assert key in rows[0]


def test_cli_lists_scenarios(capsys):
    args = _agreement_parser().parse_args(["agreement", "--list"])
    assert args.func(args) == 0
    assert "pipe_1f1b_16x64" in capsys.readouterr().out


def test_unknown_scenario_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown scenario"):
        report.run(SAMPLES, ["no_such_scenario"])


def test_footer_states_the_tolerance_the_verdict_applies():
    assert "widened by 0.1% of the quantile" in report.targets_line()
    assert "widened by 2% of the quantile" in report.targets_line([{"tolerance": 0.02}])
    assert "KS is a diagnostic only" in report.targets_line()


def test_samples_are_capped_where_the_monte_carlo_guard_would_refuse_them():
    from prism_analytic.engines.montecarlo import MonteCarloSettings, estimated_draws

    limit = MonteCarloSettings().max_draws
    graph = agreement.SCENARIOS["pipe_regime_8x32_x512"].build()
    n = agreement.affordable_samples(graph, 100_000)
    assert 1_000 < n < 100_000  # 512 explicit replicas of 512 ops: ~19,000
    assert estimated_draws(graph, n, MonteCarloSettings()) <= limit
    assert estimated_draws(graph, n + 1, MonteCarloSettings()) > limit
    small = agreement.SCENARIOS["chain"].build()
    assert agreement.affordable_samples(small, 100_000) == 100_000


def test_cli_tolerance_is_checked_and_passed(capsys, monkeypatch):
    parser = _agreement_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["agreement", "--tolerance", "1.5"])
    assert "--tolerance" in capsys.readouterr().err
    seen = {}
    monkeypatch.setattr(report, "run_suite", lambda *a, **kw: seen.update(kw) or [])
    args = parser.parse_args(["agreement", "--only", "chain", "--tolerance", "0.02", "--json"])
    assert args.func(args) == 0
    assert seen["tolerance"] == 0.02
