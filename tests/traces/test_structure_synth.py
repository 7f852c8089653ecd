"""Recovered edges equal the synthetic generator's truth; replay and layout check pass.

The generator (:mod:`prism_analytic.traces.synth`) knows every dependency of its traces. A few
small layouts of its acceptance suite run by default (interleaved pipeline, tensor, ring
context, Ulysses sequence, expert parallel); all 32 (2-512 ranks) are marked slow.
"""

from __future__ import annotations

import pytest

from prism_analytic.traces.layout import check_layout, read_layout_meta
from prism_analytic.traces.replay_check import replay_check
from prism_analytic.traces.structure import recover_structure, structure_edges
from prism_analytic.traces.synth import simulate, write_trace
from prism_analytic.traces.synth_suite import acceptance_jobs
from prism_analytic.traces.table import EventTable

_JOBS = {j.name: j for j in acceptance_jobs()}
_DEFAULT = ["dp2-pp4-vpp2", "dp2-pp2-tp2", "dp2-pp2-cp2", "dp4-pp2-sp4", "dp4-pp2-ep4"]


def _table(trace) -> EventTable:
    """The canonical table of a synthetic trace (what the op-table reader makes of it)."""
    f = trace.frame.rename(
        columns={
            "optype": "name",
            "start_ts": "start_s",
            "duration": "duration_s",
            "mb_id": "microbatch",
            "mc": "chunk",
        }
    )
    f["name"] = f["name"].astype(str)
    return EventTable(f, trace.job.name)


def _check(name, tmp_path):
    job = _JOBS[name]
    trace = simulate(job, steps=20, seed=1)
    meta = write_trace(trace, tmp_path, name=name)[1]
    s = recover_structure(_table(trace))
    edges, truth = structure_edges(s), trace.edges()
    assert edges["groups"] == truth["groups"], name
    assert edges["chain"] == truth["chain"], name
    check = replay_check(s)
    assert check.passed and check.median_rel_err <= 0.005 and check.max_rel_err <= 0.02
    assert check_layout(read_layout_meta(meta), s) == []


@pytest.mark.parametrize("name", _DEFAULT)
def test_small_layouts(name, tmp_path):
    _check(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(_JOBS) - set(_DEFAULT)))
def test_every_acceptance_layout(name, tmp_path):
    _check(name, tmp_path)


@pytest.mark.parametrize("name", ["dp2-pp2-tp2", "dp4-pp2-sp4"])
def test_clock_offsets_never_pass_silently(name):
    """Per-rank clock offsets (20 us sd) can hide which concurrent transfers pair up; when the
    recovery then misses units, the replay check says so instead of passing."""
    import numpy as np

    trace = simulate(_JOBS[name], steps=20, seed=1)
    table = _table(trace)
    offset = np.random.default_rng(0).normal(0, 2e-5, table.frame["rank"].max() + 1)
    table.frame["start_s"] += offset[table.frame["rank"].to_numpy()]
    s = recover_structure(table)
    check = replay_check(s)
    assert structure_edges(s) == trace.edges() or not check.passed
    if not check.passed:
        assert check.failure_line().startswith("REPLAY FAILED: ")
