"""The vectorised pipeline sampler draws exactly what law-by-law sampling draws, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.engines import montecarlo
from prism_analytic.engines import pipeline_mc as pmc
from prism_analytic.graph.pipeline_spec import PipelineSpec, law_key


def _reference(spec: PipelineSpec, size: int, rng: np.random.Generator) -> np.ndarray:
    """The former sampler: one ``law._sample`` call per law, fancy-indexed generations."""
    arr = spec.arrays
    n = arr["law_index"].size
    laws = [spec.laws[k] for k in arr["law_keys"]]
    members = [np.flatnonzero(arr["law_index"] == j) for j in range(len(laws))]
    preds, mb, st = arr["preds"], arr["microbatch"], arr["stage"]
    out = np.empty(size)
    step = max(1, pmc.MAX_CELLS // n)
    for start in range(0, size, step):
        sub = min(step, size - start)
        fin = np.zeros((n + 1, sub))
        for j, idx in enumerate(members):
            if idx.size:
                fin[idx] = laws[j]._sample(idx.size * sub, rng).reshape(idx.size, sub)
        if spec.microbatch_factor is not None:
            w = spec.microbatch_factor._sample(spec.microbatches * sub, rng).reshape(-1, sub)
            fin[:n] *= w[mb]
        if spec.stage_factor is not None:
            s = spec.stage_factor._sample(spec.stages * sub, rng).reshape(-1, sub)
            fin[:n] *= s[st]
        for gen in arr["gens"]:
            fin[gen] += np.maximum(fin[preds[gen, 0]], fin[preds[gen, 1]])
        out[start : start + sub] = fin[:n].max(axis=0)
    return out


def _mixed_spec(p: int, m: int, vpp: int = 1, **factors: pa.Distribution) -> PipelineSpec:
    """Lognormal laws with a gamma and a normal law in between (runs of both kinds)."""
    laws = {}
    for ph in ("F", "B"):
        for s in range(p):
            for c in range(vpp):
                mean = (1.0 if ph == "F" else 2.0) * (1 + 0.1 * s + 0.01 * c)
                if s == 1 and ph == "F":
                    laws[law_key(ph, s, c)] = pa.gamma(mean, 0.05 * mean)
                elif s == 2 and ph == "B":
                    laws[law_key(ph, s, c)] = pa.normal(mean, 0.03 * mean)
                else:
                    laws[law_key(ph, s, c)] = pa.lognormal(mean, 0.02 * mean)
    schedule = "interleaved" if vpp > 1 else "1f1b"
    return PipelineSpec(p, m, laws, schedule=schedule, vpp=vpp, **factors)


@pytest.mark.parametrize(
    ("spec", "size"),
    [
        (_mixed_spec(4, 8), 1000),
        (_mixed_spec(4, 8, vpp=2), 333),
        (_mixed_spec(4, 8, microbatch_factor=pa.lognormal(1.0, 0.1)), 500),
        (_mixed_spec(3, 6, stage_factor=pa.gamma(1.0, 0.05)), 257),
    ],
)
def test_bit_identical_to_law_by_law_sampling(spec, size, monkeypatch):
    # a small chunk so that several chunks (and a ragged last one) are drawn
    monkeypatch.setattr(pmc, "MAX_CELLS", 64 * spec.n_ops)
    a = pmc.sample_pipeline(spec, size, np.random.default_rng(5))
    b = _reference(spec, size, np.random.default_rng(5))
    assert np.array_equal(a, b)


def test_lognormal_fast_path_follows_the_law():
    # one op: its makespan is its law (independent check of the scale * exp(s z) path)
    law = pa.lognormal(3.0, 0.6)
    spec = PipelineSpec(1, 1, {law_key("F", 0): law, law_key("B", 0): pa.point_mass(0.0)})
    x = pmc.sample_pipeline(spec, 20_000, np.random.default_rng(1))
    ks = stats.kstest(x, law.cdf)
    assert ks.pvalue > 1e-3


def _lognormal_spec(p: int, m: int, vpp: int = 1) -> PipelineSpec:
    laws = {
        law_key(ph, s, c): pa.lognormal((1.0 if ph == "F" else 2.0) * (1 + 0.1 * s), 0.1)
        for ph in ("F", "B")
        for s in range(p)
        for c in range(vpp)
    }
    return PipelineSpec(p, m, laws, schedule="interleaved" if vpp > 1 else "1f1b", vpp=vpp)


@pytest.mark.parametrize("vpp", [1, 2])
def test_all_lognormal_block_draw_has_the_law_of_law_by_law_sampling(vpp, monkeypatch):
    # every law lognormal: normals in op order (not law order), so compare laws, not bits
    spec = _lognormal_spec(4, 8, vpp)
    monkeypatch.setattr(pmc, "MAX_CELLS", 64 * spec.n_ops)
    a = pmc.sample_pipeline(spec, 20_000, np.random.default_rng(1))
    b = _reference(spec, 20_000, np.random.default_rng(2))
    assert stats.ks_2samp(a, b).pvalue > 1e-3
    again = pmc.sample_pipeline(spec, 20_000, np.random.default_rng(1))
    assert np.array_equal(a, again)


def test_all_lognormal_single_op_follows_the_law():
    law = pa.lognormal(3.0, 0.6)
    spec = PipelineSpec(1, 1, {law_key("F", 0): law, law_key("B", 0): pa.lognormal(1e-12, 1e-13)})
    x = pmc.sample_pipeline(spec, 20_000, np.random.default_rng(3))
    assert stats.kstest(x, law.cdf).pvalue > 1e-3


def test_only_plain_lognormals_take_the_fast_path():
    assert pmc._lognormal(pa.lognormal(1.0, 0.1)) is not None
    assert pmc._lognormal(pa.from_scipy(stats.lognorm(0.1, loc=1.0))) is None
    assert pmc._lognormal(pa.gamma(1.0, 0.1)) is None
    assert pmc._lognormal(pa.point_mass(1.0)) is None


def test_default_blocks_per_task_spreads_short_runs():
    b = montecarlo.BLOCK
    assert montecarlo.default_blocks_per_task(2 * b) == 1  # two tasks for two workers
    assert montecarlo.default_blocks_per_task(10**6) == 4
    assert montecarlo.default_blocks_per_task(1) == 1
