"""Replay as the structure's proof: recovered structures reproduce the measured steps, broken
ones (missed groups, dropped or relabelled records, a wrong layout) are caught in one line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from _traces_synth import make_trace
from test_structure_groups import _PROGRAM, simulate

from prism_analytic.traces import structure as structure_mod
from prism_analytic.traces.layout import Layout, check_layout, read_layout_meta
from prism_analytic.traces.readers import read_op_table, read_trace
from prism_analytic.traces.replay_check import replay_check
from prism_analytic.traces.structure import recover_structure
from prism_analytic.traces.table import EventTable


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    frame, _ = make_trace(dp=2, pp=3, microbatches=4, steps=24, slow=((1, 1), 1.5), mb_sd=0.05)
    path = tmp_path_factory.mktemp("rp") / "synth.parquet"
    frame.to_parquet(path)
    return read_op_table(path)


def test_recovered_structure_replays_the_steps(pipeline):
    check = replay_check(recover_structure(pipeline))
    assert check.passed and check.failure_line() is None
    assert check.max_rel_err < 1e-3
    d = check.to_dict()
    assert d["passed"] and len(d["worst_steps"]) == 5 and d["failure"] is None


def test_missed_collective_fails_the_replay(monkeypatch):
    """When the recovery misses the groups, waits hide in single ops and the replay says so."""
    frame, _ = simulate(Layout(dp=4, pp=1, tp=2), _PROGRAM, steps=12)
    table = EventTable(frame, "tp2")
    assert replay_check(recover_structure(table)).passed
    monkeypatch.setattr(structure_mod, "collective_instances", lambda *a, **k: [])
    check = replay_check(recover_structure(table))
    assert not check.passed and check.max_rel_err > 0.03
    line = check.failure_line()
    assert line.startswith("REPLAY FAILED: ") and "\n" not in line
    # the largest unexplained waits are in the collectives the recovery missed
    assert check.waits[0]["optype"] in ("tp-all-reduce", "grads-reduce-scatter")
    assert "largest unexplained waits: rank" in line and "not validated" in line


def test_dropped_collective_record_is_an_orphan(pipeline):
    f = pipeline.frame
    drop = (f["rank"] == 1) & (f["name"] == "grads-reduce-scatter")
    check = replay_check(recover_structure(EventTable(f[~drop].reset_index(drop=True), "drop")))
    assert not check.passed
    assert check.orphans[0]["optype"] == "grads-reduce-scatter"
    assert "grads-reduce-scatter #0 on rank 4 has no partner" in check.failure_line()


def test_threshold_and_rows_are_checked(pipeline):
    s = recover_structure(pipeline)
    for bad in (0, 1.5, "0.03"):
        with pytest.raises(ValueError, match="replay threshold must be a number in"):
            replay_check(s, threshold=bad)
    with pytest.raises(ValueError, match="rows must be non-empty"):
        replay_check(s, rows=[len(s.steps)])


def _shared(shared_data, name):
    folder = shared_data / "straggler_traces"
    return read_trace(folder / f"trace-{name}.parquet"), read_layout_meta(
        folder / f"meta-{name}.yaml"
    )


@pytest.mark.parametrize("name", ["ST", "AR"])
def test_shared_traces_replay(shared_data, name):
    table, layout = _shared(shared_data, name)
    s = recover_structure(table)
    check = replay_check(s)
    assert check.median_rel_err <= 0.01 and check.max_rel_err <= 0.03, check.to_dict()
    assert check.passed
    assert check_layout(layout, s) == []


def test_shared_st_broken_structures_are_caught(shared_data):
    table, layout = _shared(shared_data, "ST")
    f = table.frame
    # relabelled ranks (a consistent permutation): the rank order contradicts the layout
    perm = dict(zip(range(8), [3, 6, 0, 7, 1, 5, 2, 4]))
    shuffled = f.assign(rank=f["rank"].map(perm))
    wrong = check_layout(layout, recover_structure(EventTable(shuffled, "shuffled")))
    assert wrong and "the layout puts it at" in wrong[0]
    # rank ids shuffled differently in every step: the replay no longer matches
    rng = np.random.default_rng(0)
    parts = []
    for _, g in f.groupby("step"):
        p = dict(zip(range(8), rng.permutation(8)))
        parts.append(g.assign(rank=g["rank"].map(p)))
    mixed = EventTable(pd.concat(parts, ignore_index=True), "mixed")
    check = replay_check(recover_structure(mixed))
    assert not check.passed and check.failure_line().startswith("REPLAY FAILED: ")
    # one rank's reduce-scatter records dropped
    drop = (f["rank"] == 1) & (f["name"] == "grads-reduce-scatter")
    s = recover_structure(EventTable(f[~drop].reset_index(drop=True), "dropped"))
    check = replay_check(s)
    assert not check.passed and "grads-reduce-scatter #0" in check.failure_line()
    # the world-wide clip all-reduce dropped on one rank: seven members fit no group
    drop = (f["rank"] == 1) & (f["name"] == "optimizer-clip-main-grad")
    wrong = check_layout(layout, recover_structure(EventTable(f[~drop], "clip dropped")))
    assert wrong and wrong[0].startswith("optimizer-clip-main-grad: ranks [0, 2, 3, 4, 5, 6, 7]")
    # a wrong layout of the same world size
    wrong = check_layout(Layout(dp=4, pp=2), recover_structure(table))
    assert wrong and wrong[0].startswith("rank ")


@pytest.fixture(scope="module")
def synth_files(tmp_path_factory):
    """A small synthetic trace of known layout written with its meta file."""
    from prism_analytic.traces.synth import SynthJob, simulate, write_trace

    job = SynthJob(dp=2, pp=2, tp=2, microbatches=2, name="small")
    folder = tmp_path_factory.mktemp("cli")
    files = write_trace(simulate(job, steps=16, seed=2), folder)
    return files[0]


_FAST = ["--samples", "200", "--analytic", "off", "--warmup", "0", "--no-library"]


def test_cli_validated_with_meta(synth_files, capsys):
    from prism_analytic.cli import main

    assert main(["trace-predict", str(synth_files), *_FAST]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("validated: the structure replays the fit steps within median")
    assert "layout dp=2,pp=2,tp=2 agrees" in out[1]


def test_cli_wrong_layout_is_one_line_and_not_validated(synth_files, capsys):
    from prism_analytic.cli import main

    assert main(["trace-predict", str(synth_files), *_FAST, "--layout", "dp=4,pp=2", "--json"]) == 0
    captured = capsys.readouterr()
    d = json.loads(captured.out)
    assert d["validated"] is False and d["layout"]["contradictions"]
    assert captured.err.startswith("LAYOUT CONTRADICTION: ")


def test_cli_dropped_records_fail_the_replay(synth_files, tmp_path, capsys):
    from prism_analytic.cli import main

    f = pd.read_parquet(synth_files)
    name = next(n for n in f["optype"].unique() if "reduce-scatter" in str(n))
    f = f[~((f["rank"] == 1) & (f["optype"] == name))]
    path = tmp_path / "dropped.parquet"
    f.to_parquet(path)
    assert main(["trace-predict", str(path), *_FAST]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"REPLAY FAILED: {name} #0") and "not validated" in out[0]
    assert out[2].startswith("prediction NOT VALIDATED")


def test_cli_bad_options(synth_files, capsys):
    from prism_analytic.cli import main

    with pytest.raises(SystemExit):
        main(["trace-predict", str(synth_files), "--replay-threshold", "2"])
    assert "expected a number in (0, 1)" in capsys.readouterr().err
    code = main(["trace-predict", str(synth_files), "--layout", "dp=2,qq=1"])
    assert code != 0
    assert "--layout: 'qq=1' is not KEY=N" in capsys.readouterr().err
