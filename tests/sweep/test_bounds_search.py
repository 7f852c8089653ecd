"""Branch and bound on guaranteed bounds: agreement with the exhaustive rule, proofs, knobs."""

from __future__ import annotations

import json
import math

import pytest

from prism_analytic.cli import main
from prism_analytic.sweep import EvalSettings, SweepError
from prism_analytic.sweep.bounds_search import branch_and_bound, exhaustive_search
from prism_analytic.sweep.layouts import LayoutSpace, layout_spec

# llama3-8b on 16 GPUs, a 32-sequence batch: tp = cp = 1 keeps every candidate cheap (~0.1 s
# a bound); recompute none and selective give the same step at pp 1, a real tie; half the
# candidates are over the 80 GB estimate
SPACE = LayoutSpace(
    tp=(1,),
    pp=(1, 2, 4),
    vpp=(1, 2),
    cp=(1,),
    recompute=("none", "selective"),
    micro_batch_size=(1, 2),
)
SETTINGS = EvalSettings(global_batch=32)


@pytest.fixture(scope="module")
def both():
    spec, counts = layout_spec("llama3-8b", 16, SPACE)
    pruned = branch_and_bound(spec, counts, "p95", settings=SETTINGS)
    full = exhaustive_search(spec, counts, "p95", settings=SETTINGS)
    return pruned, full


def test_pruned_search_returns_the_exhaustive_optimum_and_tie_set(both):
    pruned, full = both
    assert pruned.mode == "pruned" and full.mode == "exhaustive"
    assert pruned.winner.index == full.winner.index
    assert {c.index for c in pruned.tie_set} == {c.index for c in full.tie_set}
    assert pruned.threshold == full.threshold
    # the grid holds a real tie (the same step with and without selective recompute)
    assert len(pruned.tie_set) >= 1
    # the pruned search ran the full engine on the survivors only
    assert pruned.stages["full"]["tasks"] == 1 + len(pruned.tie_set)
    assert full.stages["full"]["tasks"] == len(full.candidates)


def test_every_eliminated_candidate_carries_a_sound_proof(both):
    pruned, full = both
    by_index = {c.index: c for c in full.candidates}
    assert pruned.eliminated and len(pruned.eliminated) + 1 + len(pruned.tie_set) == len(
        pruned.candidates
    )
    for c in pruned.eliminated:
        proof = c.eliminated
        assert proof["value_s"] > proof["incumbent_value_s"]
        assert proof["value_s"] == c.lower[proof["grid"]]
        holder = next(x for x in pruned.candidates if x.index == proof["incumbent"])
        assert holder.upper <= proof["incumbent_value_s"]
        # the exhaustive run's full engine agrees: the eliminated candidate is worse
        assert by_index[c.index].full["p95_s"] > full.winner.full["p95_s"]
    # the full engine's values lie within every candidate's guaranteed bracket
    assert full.outside == [] and pruned.outside == []
    for c in full.candidates:
        assert c.best_lower <= c.full["p95_hi_s"] and c.full["p95_lo_s"] <= c.upper


def test_json_states_winner_ties_proofs_and_filters(both):
    pruned, _ = both
    d = json.loads(json.dumps(pruned.to_dict()))
    assert d["winner"]["index"] == pruned.winner.index
    assert len(d["eliminated"]) == len(pruned.eliminated)
    assert all(
        e["eliminated_by"]["bound"].startswith("p95 guaranteed lower") for e in d["eliminated"]
    )
    over = [r for r in d["rejected"] if r["status"] == "infeasible"]
    assert over and all("GB per GPU >" in r["reason"] for r in over)
    assert "eliminated" in pruned.summary()


def test_objectives_without_guaranteed_bounds_are_refused():
    spec, counts = layout_spec("llama3-8b", 16, SPACE)
    with pytest.raises(SweepError, match="no guaranteed bounds"):
        branch_and_bound(spec, counts, "mean", settings=SETTINGS)
    with pytest.raises(SweepError, match="seeds"):
        branch_and_bound(spec, counts, "p95", settings=SETTINGS, seeds=0)


def test_layout_knobs_batch_hardware_ep_rank_order():
    space = LayoutSpace(
        tp=(1, 2),
        pp=(1,),
        vpp=(1,),
        cp=(1,),
        global_batch=(16, 24),
        hardware=("h100-sxm-80gb", "b200-sxm-180gb"),
        ep=(1,),
        rank_order=("tp-cp-pp-dp",),
    )
    spec, counts = layout_spec("llama3-8b", 16, space)
    # 2 tp x 2 batches x 2 hardware; 24 does not split over dp 16 (tp 1), splits over dp 8
    assert counts["candidates"] == 8 and counts["not_a_batch"] == 2
    points = spec.configurations()
    assert len(points) == 6
    assert {p.hardware for p in points} == {"h100-sxm-80gb", "b200-sxm-180gb"}
    assert sorted({p.overrides["parallelism.microbatches"] for p in points}) == [1, 2, 3]
    assert all(p.overrides["parallelism.rank_order"] == "tp-cp-pp-dp" for p in points)
    with pytest.raises(SweepError, match="not both"):
        layout_spec("llama3-8b", 16, space, hardware="b200-sxm-180gb")


def test_cli_search_json_and_resume(tmp_path, capsys):
    argv = ["optimize", "--preset", "llama3-8b", "--gpus", "16", "--tp", "1", "--pp", "1,2"]
    argv += ["--vpp", "1", "--cp", "1", "--recompute", "none,selective", "--global-batch", "32"]
    argv += ["--workers", "1", "--json", "--out", str(tmp_path / "o.csv")]
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["mode"] == "pruned" and d["objective"] == "p95"
    for e in d["eliminated"]:
        assert e["eliminated_by"]["value_s"] > e["eliminated_by"]["incumbent_value_s"]
    assert (tmp_path / "o.csv").exists() and (tmp_path / "o.csv.bounds.jsonl").exists()
    # a rerun reads every bound and full-engine row back: no task runs again
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert sum(s["tasks"] for k, s in again["stages"].items() if k != "screen") == 0
    assert again["winner"]["index"] == d["winner"]["index"]
    # mean has no guaranteed bounds: refused for bnb, with the allowed alternative
    assert main([*argv[:-3], "--objective", "mean", "--search", "bnb"]) == 2
    assert "--search sweep" in capsys.readouterr().err
    assert main([*argv[:-3], "--rank-order", "pp-first"]) == 2
    assert "allowed: tp-cp-dp-pp" in capsys.readouterr().err


def test_threshold_is_the_smallest_upper_bound(both):
    _, full = both
    assert full.threshold == min(c.upper for c in full.candidates if c.upper is not None)
    assert not math.isinf(full.threshold)


def test_job_optimize_is_the_command(capsys):
    from prism_analytic.job import Job

    space = LayoutSpace(tp=(1,), pp=(1, 2), vpp=(1,), cp=(1,), recompute=("none", "selective"))
    res = Job("llama3-8b", 16).optimize("p95", space, global_batch=32)
    assert res.to_dict()["mode"] == "pruned"
    argv = ["optimize", "--preset", "llama3-8b", "--gpus", "16", "--tp", "1", "--pp", "1,2"]
    argv += ["--vpp", "1", "--cp", "1", "--recompute", "none,selective", "--global-batch", "32"]
    assert main([*argv, "--workers", "1"]) == 0
    assert capsys.readouterr().out.strip() == res.summary().strip()
