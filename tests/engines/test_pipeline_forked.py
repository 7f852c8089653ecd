"""Two truncated schedules whose common start is propagated once equal two separate passes.

:func:`~prism_analytic.engines.pipeline_core._direct_forked` runs the generations that both
schedules begin with once and continues each from a copy of the engine; the claim is that this
is the same computation as two :func:`~prism_analytic.engines.pipeline_core._direct` passes, so
the results must agree to rounding (they are in fact bit-identical).
"""

from __future__ import annotations

import numpy as np
import pytest

from prism_analytic.distributions import lognormal
from prism_analytic.engines.canonical import shared_generations
from prism_analytic.engines.pipeline_core import (
    _direct,
    _direct_forked,
    _factor_model,
    _structure,
)
from prism_analytic.graph.pipeline import PipelineSpec


def _spec(p: int, m: int, schedule: str, vpp: int) -> PipelineSpec:
    rng = np.random.default_rng(p * 100 + vpp)
    laws = {
        f"{ph} s{s} c{c}": lognormal(float(rng.uniform(0.8, 1.2)) * (1 + (ph == "B")), 0.05)
        for ph in "FB"
        for s in range(p)
        for c in range(vpp)
    }
    return PipelineSpec(p, m, laws, schedule, vpp)


def _dags(spec: PipelineSpec, sizes: tuple[int, int]) -> list[tuple]:
    out = []
    for m in sizes:
        st = _structure(spec.stages, m, spec.schedule, spec.vpp)
        mean, sd, lmat = _factor_model(spec.with_microbatches(m), st)
        out.append((st["gens"], st["preds"], mean, sd, lmat))
    return out


@pytest.mark.parametrize(
    ("p", "sizes", "schedule", "vpp"),
    [(16, (32, 48), "1f1b", 1), (16, (16, 32), "interleaved", 2)],
)
@pytest.mark.parametrize("method", ["clark-mehler", "clark"])
def test_forked_pass_equals_two_passes(p, sizes, schedule, vpp, method) -> None:
    spec = _spec(p, sizes[1], schedule, vpp)
    assert shared_generations(_dags(spec, sizes)) > 0  # something is actually shared
    parts = [_structure(p, m, schedule, vpp) for m in sizes]
    forked = _direct_forked(spec, sizes, parts, method, None)
    two = [_direct(spec.with_microbatches(m), method, None) for m in sizes]
    for (m1, v1, _), (m2, v2, _) in zip(forked, two, strict=True):
        assert m1 == pytest.approx(m2, rel=1e-13, abs=0)
        assert v1 == pytest.approx(v2, rel=1e-12, abs=0)


def test_shared_generations_stop_at_the_first_difference() -> None:
    spec = _spec(16, 32, "interleaved", 2)
    dags = _dags(spec, (16, 32))
    k = shared_generations(dags)
    assert 0 < k < len(dags[0][0])
    # the longer schedule's copy of the shorter's structure is shared to its end
    assert shared_generations([dags[0], dags[0]]) == len(dags[0][0])
    # a different latency at one op of generation 3 stops the shared start there
    gens, preds, mean, sd, lmat = dags[1]
    mean = mean.copy()
    mean[gens[3][0]] *= 1.001
    assert shared_generations([dags[0], (gens, preds, mean, sd, lmat)]) == 3
    # so does a different successor count (an extra edge out of a generation-1 op)
    preds = [list(q) for q in dags[1][1]]
    preds[int(gens[k][0])] = [*preds[int(gens[k][0])], int(gens[1][0])]
    assert shared_generations([dags[0], (gens, preds, *dags[1][2:])]) == 1
