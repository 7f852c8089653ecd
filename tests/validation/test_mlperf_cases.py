"""validation/mlperf_cases.py: every public MLPerf case, its config and its logs agree."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from prism_analytic.calibration import read_step_log
from prism_analytic.workload.jobs import load_config

ROOT = Path(__file__).parents[2]


def _mod():
    name = "validation.mlperf_cases"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "validation" / "mlperf_cases.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_every_case_has_a_config_that_loads_with_its_gpu_count_and_hardware():
    specs = _mod().case_specs()
    # both folders: 12 cases of the training set (SOURCE.md table) + 5 Carina sizes
    assert len(specs) == 17
    assert len({c.name for c in specs}) == 17
    hardware = {"GB200": "gb200-nvl72", "GB300": "gb300-nvl72", "B200": "b200-sxm-180gb"}
    for c in specs:
        job = load_config(c.config)
        assert job.gpus == c.gpus, c.name
        assert job.hardware.name == hardware[c.gpu], c.name
        assert job.model.name == ("llama3-405b" if c.benchmark == "llama31_405b" else "llama3-8b")
        text = c.config.read_text()
        # provenance: the header names the launch config (or says there is none) and the log
        # (the Carina files cite mlperf_llama405b/SOURCE.md, which tabulates its configs)
        assert re.search(r"config_\w+\.sh|no config file|SOURCE\.md", text), c.name
        assert re.search(r"result_|SOURCE\.md", text), c.name


def test_the_fp4_cases_are_the_v51_405b_ones():
    for c in _mod().case_specs():
        precision = load_config(c.config).training.precision
        v51_405b = c.mlperf_round == "v5.1" and c.benchmark == "llama31_405b"
        expected = "nvfp4" if v51_405b and c.system != "HiPerGator" else "fp8"
        assert precision == expected, c.name


def test_each_layout_reproduces_its_logs_batch_and_accumulation(shared_data):
    for c in _mod().case_specs():
        job = load_config(c.config)
        meta = read_step_log(shared_data / c.logs[0]).meta
        par = job.parallelism
        assert par.global_batch == meta["global_batch_size"], c.name
        assert par.microbatches == meta["gradient_accumulation_steps"], c.name
        assert job.model.seq_len == meta["max_sequence_length"], c.name


def test_measured_numbers_match_the_source_tables(shared_data):
    got = {c.name: c for c in _mod().cases(shared_data)}
    # medians printed in mlperf_training_set/SOURCE.md and mlperf_llama405b/SOURCE.md
    published = {
        "mlperf50_tyche_gb200_405b_256": 19.144,
        "mlperf51_theia_gb300_405b_512": 13.147,
        "mlperf51_hipergator_b200_405b_448": 27.956,
        "mlperf51_theia_gb300_8b_72": 0.1472,
        "mlperf_gb200_2496": 5.83,
    }
    for name, median in published.items():
        assert got[name].median_s == pytest.approx(median, rel=2e-3), name
    assert got["mlperf_gb200_2496"].p90_over_p50 == pytest.approx(1.023, abs=1e-3)
    assert all(c.steps > 300 for c in got.values())


def test_8b_records_are_one_in_32_steps(shared_data):
    import json
    from collections import Counter

    for c in _mod().case_specs():
        steps = []
        for line in (shared_data / c.logs[0]).read_text().splitlines():
            if ":::MLLOG" in line and "train_step_time" in line:
                steps.append(json.loads(line.split(":::MLLOG ", 1)[1])["metadata"].get("step"))
        steps = [x for x in steps if x is not None]
        if c.benchmark == "llama31_8b":
            assert len(steps) > 100, c.name  # the 8B logs do carry the step count
        if len(steps) < 2:
            continue
        # the usual gap (a Carina log restarts its count once)
        gaps = {Counter(b - a for a, b in zip(steps, steps[1:], strict=False)).most_common(1)[0][0]}
        # metadata.step counts steps (v5.1) or samples (v5.0: one step = the global batch)
        per_step = 1 if c.mlperf_round == "v5.1" else load_config(c.config).parallelism.global_batch
        assert gaps == {c.log_every * per_step}, c.name
