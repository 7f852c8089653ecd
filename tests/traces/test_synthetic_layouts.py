"""The fitted trace model on synthetic traces of known truth (validation/traces_synthetic.py).

A handful of small layouts run by default; the full set of layouts is marked slow. Each layout
is simulated, its structure recovered and replayed, the model fitted on the first half of the
steps and compared with the generator's own Monte Carlo of the job.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _study():
    spec = importlib.util.spec_from_file_location(
        "traces_synthetic", ROOT / "validation" / "traces_synthetic.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


STUDY = _study()


@pytest.fixture(scope="module")
def small_rows():
    suite = STUDY.jobs()
    # each job with its own seed, as the study runs it (its place in the suite); 40 steps, so
    # 20 fit steps: with 10, the fit steps' own step factors can be far from their law (dp2-pp4
    # at seed 3: sd 1.74x the true, a 0.1% event) and the p95 target is missed by the sample,
    # not the model (validation/results/traces_synthetic.md)
    return [
        STUDY.run_layout(suite[n], steps=40, seed=list(suite).index(n), mc=2000, samples=2000)
        for n in STUDY.SMALL
    ]


def test_small_layouts_meet_every_target(small_rows):
    for row in small_rows:
        missed = [k for k, ok in STUDY.checks(row).items() if not ok]
        assert not missed, (row["layout"], missed, row)


def test_intervals_cover_the_truth(small_rows):
    """90% intervals: over ~70 parameters, fewer than 80% covered has probability < 1%."""
    covered = sum(r["coverage"]["covered"] for r in small_rows)
    total = sum(r["coverage"]["total"] for r in small_rows)
    assert total >= 50
    assert covered / total >= 0.8, [r["coverage"]["missed"] for r in small_rows]
    # the slow rank (the last, 1.3x) is found and its slowdown covered
    slow = next(r for r in small_rows if r["layout"] == "dp2-pp4")
    names = [row[0] for row in slow["coverage"]["rows"]]
    assert "slowdown rank 7" in names
    assert "slowdown rank 7" not in slow["coverage"]["missed"]


def test_lone_communication_ops_are_not_drawn_independently():
    """Sends and receives whose pairs are not recovered keep their waits; they must not add up.

    The pipeline hand-offs of a job are split into single-rank units (what a structure that
    missed the pairing gives); their recorded durations include the pipeline bubbles' waits.
    Drawn independently per op, those waits put the in-sample mean 50% above the fit steps and
    the spread 21x the generator's (the failure first seen on a public trace); resampled with
    their step, the model is within 0.1% and 0.85x. The bounds leave room for the seed.
    """
    import tempfile

    from prism_analytic.traces.model import fit_trace_model
    from prism_analytic.traces.readers import read_trace
    from prism_analytic.traces.structure import recover_structure
    from prism_analytic.traces.synth import SynthJob, simulate, step_time_samples, write_trace

    job = SynthJob(
        dp=2,
        pp=4,
        microbatches=8,
        step_factor={"mean": 1.0, "cv": 0.02},
        mb_factor={"mean": 1.0, "cv": 0.05},
        name="lone",
    )
    trace = simulate(job, 20, 0)
    with tempfile.TemporaryDirectory() as tmp:
        table = read_trace(write_trace(trace, Path(tmp))[0])
    s = recover_structure(table)
    split = copy.copy(s)
    split.units = []
    for m in s.units:
        p2p = len(m) > 1 and str(s.names[m[0]]).endswith(("-send", "-recv"))
        split.units += [[i] for i in m] if p2p else [list(m)]
    split.unit_of = np.empty(len(s.keys), dtype=int)
    for u, m in enumerate(split.units):
        split.unit_of[m] = u
    model = fit_trace_model(split, np.arange(10))
    assert model.info["lone_communication_ops"] > 0
    x = model.sample(2000, 0)
    ref = step_time_samples(job, 2000, 1)
    assert abs(x.mean() / trace.step_times[:10].mean() - 1) < 0.02
    assert abs(np.quantile(x, 0.95) / np.quantile(ref, 0.95) - 1) < 0.03
    assert 0.67 < x.std() / ref.std() < 1.5


@pytest.mark.slow
def test_every_layout_meets_every_target():
    missed = {}
    for i, (name, job) in enumerate(STUDY.jobs().items()):
        row = STUDY.run_layout(job, steps=40, seed=i)
        bad = [k for k, ok in STUDY.checks(row).items() if not ok]
        if bad:
            missed[name] = bad
    assert not missed, missed
