"""Placement of slow GPUs: named placements, the pipeline-slack mechanism, bad input."""

import json

import pytest

from prism_analytic.analyses.placement import named_placements, placement_analysis, stage_costs
from prism_analytic.cli import main
from prism_analytic.workload.jobs import build_job


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    cfg = tmp_path_factory.mktemp("p") / "tiny.toml"
    cfg.write_text('[parallelism]\nschedule = "1f1b"\nvpp = 1\nmicrobatches = 4\n')
    return build_job("llama3-70b", 128, cfg), cfg


def test_one_slow_stage_costs_less_than_a_slow_replica(job):
    j, _ = job
    costs = stage_costs(j, 2.0)
    # 1F1B with m = p: the last stage is on the critical path for every microbatch
    assert costs[-1] == max(costs) and costs[0] < costs[-1]
    assert all(1.0 <= c <= 2.0 + 1e-9 for c in costs)
    r = placement_analysis(j, 8, 2.0, search=False)
    by = {row.name: row for row in r.rows}
    assert by["packed-replica"].mean_s > by["most-slack"].mean_s
    assert by["least-slack"].mean_s >= by["most-slack"].mean_s
    assert r.ratio_p95 >= 1.0 and r.healthy.mean_s < r.best.mean_s


def test_named_placements_hold_k_gpus():
    for pl in named_placements(20, 8, 4, 16, [0, 1, 2, 3]):
        assert len(pl.cells()) * 8 >= 20
        assert len(set(pl.cells())) == len(pl.cells())


def test_bad_arguments(job):
    j, _ = job
    with pytest.raises(ValueError, match="--slow-gpus"):
        placement_analysis(j, 10**6, 1.5)
    with pytest.raises(ValueError, match="--slow-factor"):
        placement_analysis(j, 8, -1.0)


def test_cli(job, capsys, tmp_path):
    _, cfg = job
    argv = ["placement", "--preset", "llama3-70b", "--gpus", "128", "--config", str(cfg)]
    png = tmp_path / "p.png"
    assert (
        main(
            argv
            + [
                "--slow-gpus",
                "8",
                "--slow-factor",
                "1.5",
                "--no-search",
                "--json",
                "--plot",
                str(png),
            ]
        )
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert d["ratio_p95"] >= 1 and png.stat().st_size > 0
    assert main(argv + ["--slow-gpus", "999", "--slow-factor", "1.5"]) == 2
    assert "--slow-gpus" in capsys.readouterr().err
