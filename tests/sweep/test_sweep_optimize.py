"""prism optimize: candidate layouts, memory feasibility, the two winners and their losses."""

from __future__ import annotations

import json

import pytest

from prism_analytic.cli import main
from prism_analytic.sweep import EvalSettings, SweepError
from prism_analytic.sweep.layouts import LayoutSpace, layout_spec
from prism_analytic.sweep.optimize import optimize

# llama3-8b on 64 GPUs: cheap layouts (pp 1), some invalid, one over a 40 GB memory budget
SPACE = LayoutSpace(
    tp=(1, 2, 3),
    pp=(1,),
    vpp=(1, 2),
    cp=(1,),
    recompute=("selective", "full"),
    micro_batch_size=(1, 3),
)


@pytest.fixture(scope="module")
def result():
    return optimize("llama3-8b", 64, "p95", SPACE, settings=EvalSettings(memory_gb=40))


def test_candidates_are_counted_and_classified(result):
    # 3 tp x 2 vpp x 2 recompute x 2 mbs = 24; tp 3 never divides 64; vpp 2 needs pp >= 2
    c = result.counts
    assert c["candidates"] == 24
    assert c["not_a_factorisation"] == 8 and c["not_a_schedule"] == 8
    assert c["rows"] == 8 == c["ok"] + c["invalid"] + c["infeasible"] + c["error"]
    # micro-batch size 3 cannot split the preset's 512-sequence batch over dp 64 or 32
    assert c["invalid"] == 4 and c["error"] == 0
    df = result.table
    assert df[df["status"] == "invalid"]["error"].str.contains("does not split").all()
    # a 40 GB budget rules out tp 1 pp 1 without full recomputation (~45 GB estimated)
    over = df[df["status"] == "infeasible"]
    assert len(over) >= 1 and over["error"].str.contains("GB per GPU > 40 GB").all()
    assert over["mean_s"].isna().all()  # infeasible layouts are not evaluated
    ok = df[df["status"] == "ok"]
    assert (ok["memory_gb"] <= 40).all()
    # the global batch is the preset's at every layout
    assert ok["global_batch"].nunique() == 1


def test_winners_are_the_minima_of_the_table(result):
    ok = result.table[result.table["status"] == "ok"]
    assert result.best["p95_s"] == ok["p95_s"].min()
    assert result.best_partner["mean_s"] == ok["mean_s"].min()
    loss = result.losses()
    assert loss["best_by_mean_on_p95"] == pytest.approx(
        result.best_partner["p95_s"] / result.best["p95_s"] - 1
    )
    assert all(v >= 0 for v in loss.values())
    assert "best by p95" in result.summary()


def test_runner_up_and_brackets_are_reported(result):
    ok = result.table[result.table["status"] == "ok"].sort_values(["p95_s", "index"])
    second = result.runner_up()
    assert second is not None and second["config_id"] != result.best["config_id"]
    assert second["p95_s"] == ok["p95_s"].iloc[1]
    text = result.summary()
    assert f"bracket {result.best['p95_lo_s']:.5g}-{result.best['p95_hi_s']:.5g}" in text
    if not result.differs:
        assert "runner-up by p95" in text
    assert result.to_dict()["runner_up_by_p95"]["p95_s"] == second["p95_s"]


def test_nothing_fits_is_a_clear_error():
    with pytest.raises(SweepError, match="no valid layout .* fits the memory estimate"):
        optimize(
            "llama3-8b",
            64,
            "mean",
            LayoutSpace(tp=(1,), pp=(1,), vpp=(1,), cp=(1,)),
            settings=EvalSettings(memory_gb=1),
        )


def test_layout_spec_errors():
    with pytest.raises(SweepError, match="unknown"):
        layout_spec("llama9", 64)
    with pytest.raises(SweepError, match="no candidate layout"):
        layout_spec("llama3-8b", 64, LayoutSpace(tp=(3,), pp=(1,), vpp=(1,), cp=(1,)))
    with pytest.raises(SweepError, match="runtime needs --steps"):
        optimize("llama3-8b", 64, "runtime", SPACE)
    with pytest.raises(SweepError, match="--objective"):
        optimize("llama3-8b", 64, "p42", SPACE)


def test_cli_optimize_json(tmp_path, capsys):
    argv = ["optimize", "--preset", "llama3-8b", "--gpus", "64", "--tp", "1,2", "--pp", "1"]
    argv += [
        "--vpp",
        "1",
        "--cp",
        "1",
        "--workers",
        "1",
        "--search",
        "sweep",
        "--json",
        "--out",
        str(tmp_path / "o.csv"),
    ]
    assert main(argv) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["objective"] == "p95" and payload["counts"]["ok"] == 2
    assert (tmp_path / "o.csv").exists()
    # a narrower search on the same table: its rows are reused, the others do not compete
    narrow = [a if a != "1,2" else "2" for a in argv]
    assert main(narrow) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["counts"]["ok"] == 1 and again["best_by_p95"]["tp"] == 2
    with pytest.raises(SystemExit):
        main(["optimize", "--preset", "llama3-8b", "--gpus", "64", "--recompute", "most"])
    assert main(["optimize", "--preset", "llama3-8b", "--gpus", "64", "--plot", "/nope/x.png"]) == 2
    assert "does not exist" in capsys.readouterr().err
