"""One-stage pipelines: the O(log m) chain sum equals the op-by-op chain and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.distributions import lognormal, normal
from prism_analytic.engines.analytic import _Evaluator
from prism_analytic.engines.pipeline_chain import single_stage_makespan
from prism_analytic.graph import StepGraph
from prism_analytic.graph.pipeline import PipelineSpec, explicit_pipeline
from prism_analytic.policy import DEFAULT_POLICY


def _spec(m: int, schedule: str = "1f1b", vpp: int = 1, law=lognormal) -> PipelineSpec:
    laws = {
        f"{ph} s0 c{c}": law(1.0 + c + (ph == "B"), 0.1 + 0.05 * c)
        for ph in "FB"
        for c in range(vpp)
    }
    return PipelineSpec(1, m, laws, schedule, vpp)


@pytest.mark.parametrize(("m", "schedule"), [(13, "1f1b"), (8, "gpipe")])
def test_equals_the_op_by_op_chain(m: int, schedule: str, vpp: int = 1) -> None:
    spec = _spec(m, schedule, vpp, law=lambda mu, s: lognormal(mu, s))
    ev = _Evaluator(DEFAULT_POLICY, "clark-mehler", None)
    chain = ev.graph(explicit_pipeline(spec, "p"))
    mean = sum(m * mu for mu, _ in spec.moments.values())
    fast = single_stage_makespan(spec, DEFAULT_POLICY.rel_width * mean / spec.n_ops, DEFAULT_POLICY)
    assert fast.h == pytest.approx(chain.h, rel=1e-12)
    for q in (0.01, 0.5, 0.99):
        assert np.allclose(fast.quantile_bracket(q), chain.quantile_bracket(q), rtol=1e-9)


@pytest.mark.parametrize(("schedule", "vpp"), [("1f1b", 1), ("gpipe", 1), ("interleaved", 2)])
def test_normal_chain_contains_the_closed_form(schedule: str, vpp: int) -> None:
    """Sum of m normal copies per law: N(sum of means, sum of variances), inside the bracket.

    One interleaved stage is a chain too (its extra edges are transitive); its op-by-op graph
    is not series-parallel, so that form went through the approximate canonical core.
    """
    spec = _spec(64, schedule, vpp, law=normal)
    g = StepGraph("one-stage")
    g.add_pipeline("pipeline", spec)
    res = pa.predict(g)
    assert res.exact
    mean = sum(64 * mu for mu, _ in spec.moments.values())
    sd = float(np.sqrt(sum(64 * v**2 for _, v in spec.moments.values())))
    for q in (0.001, 0.5, 0.999):
        lo, hi = res.quantile_bracket(q)
        assert lo <= stats.norm(mean, sd).ppf(q) <= hi


def test_rejects_what_is_not_a_chain() -> None:
    two = PipelineSpec(2, 4, {f"{ph} s{s} c0": normal(1, 0.1) for ph in "FB" for s in (0, 1)})
    with pytest.raises(ValueError, match="stages must be 1"):
        single_stage_makespan(two, 1e-3, DEFAULT_POLICY)
    shared = PipelineSpec(
        1,
        4,
        {"F s0 c0": normal(1, 0.1), "B s0 c0": normal(2, 0.1)},
        microbatch_factor=lognormal(1, 0.01),
    )
    with pytest.raises(ValueError, match="microbatch_factor"):
        single_stage_makespan(shared, 1e-3, DEFAULT_POLICY)
