"""The cumulant core on the skew core's driver: forked truncation, steady-state shortcut."""

from __future__ import annotations

import pytest

# the skew and kurtosis cores' test pipelines (tests/ is on the path: no package)
from test_skew_core_fork import _spec

import prism_analytic as pa
from prism_analytic.engines import skew_core
from prism_analytic.engines.cumulant_core import _CumulantEngine, cumulant_pipeline


def _spy_forked(monkeypatch) -> list:
    """Record the sizes of every forked evaluation (None where it could not fork)."""
    calls = []
    real = skew_core._forked

    def spy(*args):
        out = real(*args)
        calls.append(tuple(args[2]) if out is not None else None)
        return out

    monkeypatch.setattr(skew_core, "_forked", spy)
    return calls


@pytest.mark.parametrize(
    "schedule,p,m,vpp,family",
    [("1f1b", 4, 64, 1, pa.lognormal), ("interleaved", 4, 48, 2, pa.normal)],
)
def test_forked_truncation_is_bit_identical(monkeypatch, schedule, p, m, vpp, family):
    """The two truncated schedules' common start (and the kurtosis core's run inside the
    closure) done once gives the same bits as two separate runs."""
    spec = _spec(schedule, p, m, vpp, family)
    calls = _spy_forked(monkeypatch)
    forked, info = cumulant_pipeline(spec, cap=256)
    assert len(calls) == 1 and calls[0] is not None
    assert info["evaluated_microbatches"] == list(calls[0])
    monkeypatch.setattr(_CumulantEngine, "forkable", False)
    plain, _ = cumulant_pipeline(spec, cap=256)
    assert forked == plain  # every field, bit for bit


@pytest.mark.parametrize(
    "schedule,vpp,sizes", [("1f1b", 1, [56, 64, 72]), ("interleaved", 2, [24, 32, 40])]
)
def test_steady_state_matches_the_whole_pipeline(monkeypatch, schedule, vpp, sizes):
    """2,048-op pipelines, trial at about 512 ops: the shortcut from three short evaluations
    (two periods apart: the closure's interleaved increments alternate period by period) agrees
    with the evaluation of the whole pipeline within the shortcut's tolerance (mean in sd,
    variance, kappa3 in sd^3)."""
    spec = _spec(schedule, 4, 256 // vpp, vpp, pa.normal)
    monkeypatch.setattr(skew_core, "STEADY_CAP", 512)
    short, info = cumulant_pipeline(spec)
    assert info["evaluated_microbatches"] == sizes
    assert info["steady_state_gap"] <= skew_core.STEADY_RTOL
    monkeypatch.setattr(skew_core, "STEADY_CAP", 10**9)  # no trial: the whole pipeline
    whole, info_whole = cumulant_pipeline(spec)
    assert info_whole["evaluated_microbatches"] == [spec.microbatches]
    tol = skew_core.STEADY_RTOL
    assert abs(short.mean - whole.mean) <= tol * whole.std
    assert abs(short.std**2 - whole.std**2) <= tol * whole.std**2
    k3 = [r.skew * r.std**3 for r in (short, whole)]
    assert abs(k3[0] - k3[1]) <= tol * whole.std**3


def test_one_period_blocks_see_the_alternation(monkeypatch):
    """With blocks of one period the interleaved closure's increments alternate and the trial is
    refused; with two it is taken: why the cumulant engine extrapolates by two periods."""
    spec = _spec("interleaved", 4, 128, 2, pa.normal)
    monkeypatch.setattr(skew_core, "STEADY_CAP", 512)  # trial at 24, 32, 40 (28, 32, 36)
    k3 = {k: skew_core.third_cumulant(law) for k, law in spec.laws.items()}
    assert skew_core._steady(_CumulantEngine, spec, None, k3, spec.microbatches) is not None
    monkeypatch.setattr(_CumulantEngine, "block_periods", 1)
    assert skew_core._steady(_CumulantEngine, spec, None, k3, spec.microbatches) is None


@pytest.mark.slow  # 8 x 512 x 2 interleaved, evaluated whole twice (~9 s)
def test_transient_pipeline_keeps_the_long_evaluation(monkeypatch):
    """Still in its transient at the short sizes (interleaved 8 x 512 x 2, balanced stages,
    lognormal CV 20%: 16, 32, 48 microbatches): the trial is refused and the answer is the long
    truncation's, bit for bit."""
    spec = _spec("interleaved", 8, 512, 2, pa.lognormal, slope=0.0)
    monkeypatch.setattr(skew_core, "STEADY_CAP", 1024)
    calls = _spy_forked(monkeypatch)
    res, info = cumulant_pipeline(spec, cap=3072)
    # the long sizes 80/96, then the whole pipeline: pipeline_core.next_pair refuses 80/96
    # (their increments drift over two blocks by 0.06 sd over the blocks to come)
    assert "steady_state_gap" not in info and info["evaluated_microbatches"] == [512]
    assert calls == [(16, 32, 48), (80, 96)]
    monkeypatch.setattr(skew_core, "STEADY_CAP", 10**9)  # no trial
    assert cumulant_pipeline(spec, cap=3072)[0] == res


def test_slot_capacity_does_not_change_a_bit(monkeypatch):
    """The engine's arrays grown one slot at a time (contiguous views) or by doubling from the
    start (views of larger arrays, other slot numbers): the same values, every max being
    elementwise over the live slots."""
    import networkx as nx
    import numpy as np

    from prism_analytic.engines import cumulant_core
    from prism_analytic.schedules import pipeline_dag

    dag = pipeline_dag(6, 12)
    sink = ("sink",)
    dag.add_edges_from((v, sink) for v in list(dag) if dag.out_degree(v) == 0)  # a wide max
    dag.add_edge(next(iter(nx.topological_sort(dag))), sink)
    rng = np.random.default_rng(5)
    mean = {v: float(rng.uniform(1, 2)) for v in dag}
    std = {v: 0.1 * mean[v] for v in dag}
    k3 = {v: 0.002 * mean[v] ** 3 for v in dag}
    grown = cumulant_core.cumulant_makespan(dag, mean, std, kappa3=k3)
    monkeypatch.setattr(cumulant_core, "_EXACT_CAP", 1)
    doubled = cumulant_core.cumulant_makespan(dag, mean, std, kappa3=k3)
    assert grown == doubled
