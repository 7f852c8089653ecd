"""Trace readers: canonical table, and clear errors for bad files (naming file, row, problem)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest
from _traces_synth import make_trace

from prism_analytic.traces import (
    TraceFormatError,
    read_kineto,
    read_op_table,
    read_step_times,
    read_trace,
)
from prism_analytic.traces.readers import read_step_series


@pytest.fixture(scope="module")
def synth():
    frame, _ = make_trace(steps=6, seed=3)
    return frame


def test_op_table_round_trip(tmp_path, synth):
    path = tmp_path / "t.parquet"
    synth.to_parquet(path)
    table = read_op_table(path)
    assert len(table.frame) == len(synth)
    assert table.steps == list(range(6))
    assert table.dropped == {}
    # the same table as CSV reads the same
    synth.to_csv(tmp_path / "t.csv", index=False)
    other = read_trace(tmp_path / "t.csv")
    np.testing.assert_allclose(other.frame["duration_s"], table.frame["duration_s"])


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda f: f.drop(columns=["duration"]), r"columns \['duration'\] missing"),
        (lambda f: f.iloc[:0], "no rows"),
        (lambda f: f.assign(duration=f["duration"].where(f.index != 7, np.nan)), r"row 7: .*nan"),
        (lambda f: f.assign(duration=f["duration"].where(f.index != 5, -1.0)), r"row 5: negative"),
        (
            lambda f: f.assign(rank=f["rank"].astype(object).where(f.index != 3, "x")),
            r"row 3.*'rank'",
        ),
        (lambda f: f[~((f["step"] == 2) & (f["rank"] == 1))], r"step 2: ranks \[1\] recorded no"),
    ],
)
def test_op_table_errors(tmp_path, synth, mutate, match):
    path = tmp_path / "bad.csv"
    mutate(synth).to_csv(path, index=False)
    with pytest.raises(TraceFormatError, match=match) as info:
        read_op_table(path)
    assert "bad.csv" in str(info.value)


def test_incomplete_steps_dropped_and_counted(tmp_path, synth):
    path = tmp_path / "gap.csv"
    synth[~((synth["step"] == 2) & (synth["rank"] == 1))].to_csv(path, index=False)
    table = read_op_table(path, incomplete_steps="drop")
    assert table.dropped == {"steps with missing ranks": 1}
    assert 2 not in table.steps


def test_truncated_and_empty_files(tmp_path, synth):
    path = tmp_path / "t.parquet"
    synth.to_parquet(path)
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(path.read_bytes()[:200])
    with pytest.raises(TraceFormatError, match="cut.parquet.*truncated"):
        read_op_table(cut)
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    with pytest.raises(TraceFormatError, match="empty"):
        read_op_table(empty)
    with pytest.raises(FileNotFoundError):
        read_op_table(tmp_path / "nope.parquet")


def test_step_times(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"step_t_base": {"3": 1.5, "1": 1.0}}))
    s = read_step_series(tmp_path / "a.json")
    assert list(s.index) == [1, 3] and list(s) == [1.0, 1.5]
    (tmp_path / "b.json").write_text("[1.0, 2.0, 3.0]")
    assert list(read_step_times(tmp_path / "b.json")) == [1.0, 2.0, 3.0]
    (tmp_path / "c.csv").write_text("step,step_time_s\n1,1.0\n2,1.2\n")
    assert list(read_step_series(tmp_path / "c.csv").index) == [1, 2]
    for text, match in [
        ("[1.0, NaN]", "item 1: step time nan"),
        ("[1.0, -2]", "item 1: step time -2"),
        ('[1.0, "x"]', "item 1: 'x' is not a number"),
        ("[]", "no step times"),
        ("[1.0, 2", "not valid JSON"),
    ]:
        (tmp_path / "bad.json").write_text(text)
        with pytest.raises(TraceFormatError, match=match):
            read_step_times(tmp_path / "bad.json")


def _kineto_doc(rank=0, dur=5.0, with_steps=True):
    events = []
    if with_steps:
        events += [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "ts": 1000.0 * i,
                "dur": 900.0,
            }
            for i in (1, 2)
        ]
    for i, ts in enumerate((1100.0, 2100.0)):
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "ts": ts,
                "dur": 2.0,
                "args": {"correlation": i},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "ncclKernel_AllReduce",
                "ts": ts + 950,
                "dur": dur,
                "args": {
                    "correlation": i,
                    "Collective name": "allreduce",
                    "In msg nelems": 10,
                    "Process Group Ranks": "[0, 1]",
                },
            }
        )
    return {"traceEvents": events, "distributedInfo": {"rank": rank, "world_size": 2}}


def test_kineto_minimal(tmp_path):
    for r in (0, 1):
        (tmp_path / f"r{r}.json").write_text(json.dumps(_kineto_doc(rank=r)))
    table = read_kineto(tmp_path)
    assert table.ranks == [0, 1] and table.steps == [1, 2]
    # a kernel that runs after its CPU step window closed still belongs to that step
    assert set(table.frame["name"]) == {"nccl:allreduce"}
    assert np.allclose(table.frame["duration_s"], 5e-6)


def test_kineto_errors(tmp_path):
    bad = tmp_path / "neg.json"
    bad.write_text(json.dumps(_kineto_doc(dur=-1.0)))
    with pytest.raises(TraceFormatError, match="neg.json: event .*negative dur"):
        read_kineto(bad)
    nos = tmp_path / "nos.json"
    nos.write_text(json.dumps(_kineto_doc(with_steps=False)))
    with pytest.raises(TraceFormatError, match="no ProfilerStep"):
        read_kineto(nos)
    gz = tmp_path / "cut.json.gz"
    gz.write_bytes(gzip.compress(json.dumps(_kineto_doc()).encode())[:40])
    with pytest.raises(TraceFormatError, match="truncated"):
        read_kineto(gz)
    (tmp_path / "e.json").write_text("")
    with pytest.raises(TraceFormatError, match="empty"):
        read_kineto(tmp_path / "e.json")
    (tmp_path / "w.json").write_text(json.dumps({"foo": 1}))
    with pytest.raises(TraceFormatError, match="no 'traceEvents'"):
        read_kineto(tmp_path / "w.json")
    d = tmp_path / "dup"
    d.mkdir()
    for name in ("a.json", "b.json"):
        (d / name).write_text(json.dumps(_kineto_doc(rank=0)))
    with pytest.raises(TraceFormatError, match="rank 0 already read"):
        read_kineto(d)


def test_kineto_fixture(shared_data):
    table = read_trace(shared_data / "kineto" / "nccl_data.json.gz")
    assert table.steps == [4, 5, 6]
    names = set(table.frame["name"])
    assert {"nccl:allreduce", "nccl:broadcast"} <= names
    steps = table.measured_step_times()
    assert ((steps > 0.1) & (steps < 0.5)).all()
    assert isinstance(table.frame, pd.DataFrame)
    # kernels on several streams: the recovered rank order replays the measured steps
    from prism_analytic.traces import recover_structure, replay, unit_values

    s = recover_structure(table)
    gap, dur = unit_values(s)
    np.testing.assert_allclose(replay(s, gap, dur), steps.to_numpy(), rtol=0, atol=1e-6)
