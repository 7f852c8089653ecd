"""Sweeps and Monte Carlo on a real dask cluster: two worker processes on localhost.

One ``LocalCluster(processes=True)`` (a scheduler and two single-threaded worker processes
behind nannies) serves the module; the sweep connects to it by its ``tcp://`` address like
any remote cluster. The worker-killing test runs last: it SIGKILLs one worker process mid-sweep.
"""

from __future__ import annotations

import os
import signal

import pandas as pd
import pytest

distributed = pytest.importorskip("distributed", reason="dask.distributed is a test dependency")

from prism_analytic.sweep import EvalSettings, SweepSpec, parse_set, run_sweep  # noqa: E402
from prism_analytic.sweep.executor import open_executor  # noqa: E402

# 2 GPU counts x 5 x 5 variability settings = 50 cheap configurations (llama3-8b is tp 1 pp 1)
SPEC = SweepSpec(
    presets=("llama3-8b",),
    gpus=(64, 128),
    grid=parse_set(
        [
            "variability.spatial.cv=0.01,0.02,0.03,0.04,0.05",
            "variability.temporal.kernel_cv=0.005,0.01,0.02,0.03,0.04",
        ]
    ),
    base={"parallelism": {"microbatches": 1}},  # a small pipeline body: ~0.1 s per configuration
)
TIMING = ["compute_time_s"]


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=40,
    ) as c:
        yield c


@pytest.fixture(scope="module")
def local_table(tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "local.csv"
    run_sweep(SPEC, EvalSettings(), out)
    return pd.read_csv(out, dtype={"config_id": str})


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert len(a) == len(b) == len(SPEC) == 50
    pd.testing.assert_frame_equal(a.drop(columns=TIMING), b.drop(columns=TIMING), check_exact=True)


def test_dask_sweep_rows_identical_to_local(cluster, local_table, tmp_path):
    out = tmp_path / "dask.csv"
    with open_executor(cluster.scheduler_address) as ex:
        outcome = run_sweep(SPEC, EvalSettings(), out, executor=ex)
    assert outcome.evaluated == 50 and not outcome.lost
    _same(pd.read_csv(out, dtype={"config_id": str}), local_table)
    assert set(local_table["status"]) == {"ok"}


def test_montecarlo_on_dask_identical_to_this_process(cluster):
    from prism_analytic.workload.jobs import build_job
    from prism_analytic.workload.prediction import predict_job as run_prediction

    job = build_job("llama3-8b", 64)
    here, _, _ = run_prediction(job, method="montecarlo", samples=5000, seed=3)
    with open_executor(cluster.scheduler_address) as ex:
        there, _, _ = run_prediction(job, method="montecarlo", samples=5000, seed=3, executor=ex)
    assert (here.distribution.samples == there.distribution.samples).all()


def test_branch_and_bound_on_dask_identical_to_this_process(cluster):
    """Winner, tie set, threshold and every proof do not depend on where tasks ran."""
    from prism_analytic.sweep.bounds_search import branch_and_bound
    from prism_analytic.sweep.layouts import LayoutSpace, layout_spec

    space = LayoutSpace(tp=(1,), pp=(1, 2, 4), vpp=(1, 2), cp=(1,), recompute=("none", "selective"))
    spec, counts = layout_spec("llama3-8b", 16, space)
    settings = EvalSettings(global_batch=32)
    here = branch_and_bound(spec, counts, "p95", settings=settings)
    with open_executor(cluster.scheduler_address) as ex:
        there = branch_and_bound(spec, counts, "p95", settings=settings, executor=ex)

    def signature(r):
        return (
            r.winner.index,
            [c.index for c in r.tie_set],
            r.threshold,
            {c.index: (c.lower, c.upper, c.eliminated) for c in r.candidates},
        )

    assert signature(here) == signature(there)
    # none and selective recompute give the same step at pp 1: a tie whose holder must not
    # depend on which finished first
    assert here.tie_set and here.eliminated


def test_killed_worker_mid_sweep_still_completes(cluster, local_table, tmp_path):
    out = tmp_path / "killed.csv"
    pids = [w.process.process.pid for w in cluster.workers.values()]
    killed: list[int] = []

    def kill_after_five(done: int, total: int) -> None:
        if done >= 5 and not killed:
            os.kill(pids[0], signal.SIGKILL)  # no clean shutdown: its tasks are lost
            killed.append(pids[0])

    with open_executor(cluster.scheduler_address) as ex:
        outcome = run_sweep(SPEC, EvalSettings(), out, executor=ex, progress=kill_after_five)
    assert killed, "the worker was never killed"
    assert outcome.evaluated == 50 and not outcome.lost
    _same(pd.read_csv(out, dtype={"config_id": str}), local_table)
