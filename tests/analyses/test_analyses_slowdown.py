"""Slow-down probability vs scale."""

import json

import pytest

from prism_analytic.analyses.slowdown import check_scales, slowdown
from prism_analytic.cli import main


def test_slowdown_grows_with_scale_and_matches_degraded_formula(tmp_path):
    # the shipped defaults have no slow GPUs (none seen in the public logs): give it 1%
    cfg = tmp_path / "slow.toml"
    cfg.write_text("[variability.spatial]\nslow_fraction = 0.01\n")
    r = slowdown("llama3-8b", [64, 1024], threshold=0.2, config=str(cfg))
    small, large = r.rows
    assert small.p_degraded == pytest.approx(1 - 0.99**64)
    assert large.p_degraded == pytest.approx(1 - 0.99**1024)
    assert large.p_step_slow >= small.p_step_slow - 1e-9
    assert 0 <= small.p_job_slow <= 1


@pytest.mark.parametrize(
    "bad, match",
    [([], "empty"), ([1024, 64], "increasing"), ([64, 64], "increasing"), ([0], "positive")],
)
def test_bad_scales(bad, match):
    with pytest.raises(ValueError, match=match):
        check_scales(bad)


def test_cli(capsys, tmp_path):
    out = tmp_path / "s.png"
    argv = ["slowdown", "--preset", "llama3-8b", "--gpus", "64,128", "--json", "--plot", str(out)]
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert [r["gpus"] for r in d["rows"]] == [64, 128] and out.stat().st_size > 0
    assert main(["slowdown", "--preset", "llama3-8b", "--gpus", "128,64"]) == 2
    assert "--gpus" in capsys.readouterr().err
