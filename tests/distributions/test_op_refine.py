"""``GridPolicy.op_refine``: coarser op grids beside a replica group, still guaranteed."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy import integrate, optimize, stats

import prism_analytic as pa
from prism_analytic.policy import GridPolicy

N_COPIES = 64
LEVELS = (0.05, 0.5, 0.95, 0.99)
SLOW = (0.1, 1.2)  # a tenth of the replicas run 1.2x slower
CHAIN = 50  # body ops: the replica grid is much coarser than the step's own spacing
SD_BODY = 0.01 * np.sqrt(CHAIN)
SD_OPS = float(np.hypot(0.03, 0.01))


def _step() -> pa.StepGraph:
    replica = pa.StepGraph("r")
    after: list[str] = []
    for i in range(CHAIN):
        replica.add_op(f"w{i}", pa.normal(0.2, 0.01), after=after)
        after = [f"w{i}"]
    speed = pa.mixture([pa.point_mass(1.0), pa.point_mass(SLOW[1])], [1 - SLOW[0], SLOW[0]])
    step = pa.StepGraph("s")
    step.add_replica_group("dp", replica, n=N_COPIES, speed=speed)
    step.add_op("sync", pa.normal(0.3, 0.03), after=["dp"])
    step.add_op("opt", pa.normal(0.1, 0.01), after=["sync"])
    return step


@functools.cache
def _exact_quantile(q: float) -> float:
    """A copy is S B, B ~ N(10, 0.01 sqrt(50)); the step is the max of 64 plus N(0.4, sd)."""

    def copy_cdf(u: float) -> float:
        fast = stats.norm.cdf(u, 10.0, SD_BODY)
        slow = stats.norm.cdf(u / SLOW[1], 10.0, SD_BODY)
        return (1 - SLOW[0]) * fast + SLOW[0] * slow

    def cdf(t: float) -> float:
        f = lambda y: copy_cdf(t - y) ** N_COPIES * stats.norm.pdf(y, 0.4, SD_OPS)  # noqa: E731
        return integrate.quad(f, 0.4 - 12 * SD_OPS, 0.4 + 12 * SD_OPS, epsabs=1e-13, limit=200)[0]

    return optimize.brentq(lambda t: cdf(t) - q, 10.0, 14.0, xtol=1e-12)


@pytest.mark.parametrize("refine", [1, 2, 4])
def test_bracket_holds_the_exact_quantile(refine: int) -> None:
    d = pa.predict(_step(), policy=GridPolicy(op_refine=refine)).distribution
    lo, hi = d.quantile_bracket(np.array(LEVELS))
    for q, a, b in zip(LEVELS, lo, hi):
        exact = _exact_quantile(q)
        assert a <= exact <= b, (refine, q, a, exact, b)


def test_coarser_ops_and_default_unchanged() -> None:
    fine = pa.predict(_step()).distribution
    same = pa.predict(_step(), policy=GridPolicy(op_refine=4)).distribution
    coarse = pa.predict(_step(), policy=GridPolicy(op_refine=1)).distribution
    assert fine.quantile(0.5) == same.quantile(0.5)  # 4 is the default
    lo_f, hi_f = fine.quantile_bracket(0.5)
    lo_c, hi_c = coarse.quantile_bracket(0.5)
    assert hi_c - lo_c >= hi_f - lo_f  # never tighter than the finer ops
    lo_f, hi_f = fine.quantile_bracket(0.05)
    lo_c, hi_c = coarse.quantile_bracket(0.05)
    assert hi_c - lo_c > hi_f - lo_f  # the ops' grid is coarser: here one cell wider


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_bad_op_refine_is_named(bad: float) -> None:
    with pytest.raises((ValueError, TypeError), match="op_refine"):
        GridPolicy(op_refine=bad)


def test_predict_job_passes_the_policy() -> None:
    from prism_analytic.workload.jobs import build_job
    from prism_analytic.workload.prediction import predict_job

    job = build_job("llama3-8b", 64)
    fast = GridPolicy(op_refine=1)
    res, _, _ = predict_job(job, policy=fast)
    assert res.diagnostics["policy"]["op_refine"] == 1
    ref, _, _ = predict_job(job)
    assert ref.diagnostics["policy"]["op_refine"] == 4
    lo, hi = ref.quantile_bracket(0.5)
    assert lo <= res.quantile(0.5) <= hi  # the coarser answer inside the default's bracket
