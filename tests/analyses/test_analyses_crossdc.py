"""Cross-datacenter: p95 vs bandwidth, the threshold, bad lists."""

import json

import pytest

from prism_analytic.analyses.crossdc import crossdc
from prism_analytic.cli import main
from prism_analytic.workload.jobs import build_job


@pytest.fixture(scope="module")
def result():
    job = build_job("llama3-8b", 64)
    return crossdc(job, 2, [0.1, 1, 10, 100], [0.1, 0.5], bisect_steps=3)


def test_degradation_falls_with_bandwidth_and_rises_with_jitter(result):
    for j in range(2):
        deg = [result.degradation(j, b) for b in range(4)]
        assert all(a >= b - 1e-3 for a, b in zip(deg, deg[1:]))
    assert result.p95_s[1][-1] >= result.p95_s[0][-1] - 1e-9


def test_threshold_meets_tolerance(result):
    for j, thr in enumerate(result.threshold_tbps):
        if thr is None:
            continue
        # every tested bandwidth above the threshold meets the tolerance
        for b, bw in enumerate(result.bandwidths_tbps):
            if bw >= thr * 1.0001:
                assert result.degradation(j, b) <= result.tolerance + 1e-9


@pytest.mark.parametrize(
    "bws, jit, match",
    [
        ([], None, "--bandwidths"),
        ([10, 1], None, "increasing"),
        ([-1, 1], None, "> 0"),
        ([1, 10], [0.5, 0.1], "--jitter"),
    ],
)
def test_bad_lists(bws, jit, match):
    with pytest.raises(ValueError, match=match):
        crossdc(build_job("llama3-8b", 8), 2, bws, jit)


def test_cli(capsys, tmp_path):
    png = tmp_path / "c.png"
    argv = [
        "crossdc",
        "--preset",
        "llama3-8b",
        "--gpus",
        "64",
        "--bandwidths",
        "1,100",
        "--bisect-steps",
        "0",
        "--json",
        "--plot",
        str(png),
    ]
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert len(d["p95_s"][0]) == 2 and png.stat().st_size > 0
    assert main(["crossdc", "--preset", "llama3-8b", "--gpus", "64", "--bandwidths", "5,1"]) == 2
    assert "--bandwidths" in capsys.readouterr().err
    assert (
        main(
            [
                "crossdc",
                "--preset",
                "llama3-8b",
                "--gpus",
                "64",
                "--bandwidths",
                "1",
                "--datacenters",
                "1",
            ]
        )
        == 2
    )
