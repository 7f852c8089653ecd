"""The fitted model's own check on its fit steps (compare.model_check)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from prism_analytic.traces.compare import compare_steps, model_check
from prism_analytic.traces.model import fit_trace_model
from prism_analytic.traces.readers import read_trace
from prism_analytic.traces.structure import recover_structure
from prism_analytic.traces.synth import SynthJob, simulate, write_trace


@pytest.fixture(scope="module")
def fitted():
    job = SynthJob(dp=2, pp=2, microbatches=4, step_factor={"mean": 1.0, "cv": 0.02}, name="mc")
    trace = simulate(job, 20, 0)
    with tempfile.TemporaryDirectory() as tmp:
        table = read_trace(write_trace(trace, Path(tmp))[0])
    model = fit_trace_model(recover_structure(table), np.arange(10))
    return model, trace.step_times[:10]


def test_a_sound_model_passes(fitted):
    model, fit_times = fitted
    in_sample = compare_steps(model.sample(2000, 0), fit_times)
    assert model_check(in_sample, lone_communication_ops=model.info["lone_communication_ops"]) == []


def test_a_model_off_its_fit_steps_is_flagged(fitted):
    """The issue's symptom (mean 60% above the fit steps, spread 7x) is named, with the cause."""
    model, fit_times = fitted
    x = model.sample(2000, 0)
    wide = 1.6 * (np.mean(x) + 7 * (x - np.mean(x)))
    lines = model_check(compare_steps(wide, fit_times), lone_communication_ops=24)
    assert len(lines) == 1
    assert lines[0].startswith("MODEL CHECK FAILED")
    assert "+6" in lines[0] and "24 communication ops" in lines[0]
    # the spread alone is enough
    spread = np.mean(x) + 3 * (x - np.mean(x))
    assert model_check(compare_steps(spread, fit_times))
