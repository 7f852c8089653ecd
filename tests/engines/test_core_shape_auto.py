"""``core_shape="auto"``: the class of each core, the shape picked, and that it is better."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.distributions import to_grid
from prism_analytic.engines.core_shape import (
    AUTO_RULE,
    CLASSES,
    CV_BANDS,
    auto_shape,
    cv_band,
    explicit_class,
    lattice_schedule,
    op_cv,
    ops_kind,
    pipeline_class,
)
from prism_analytic.engines.series_parallel import reduce_graph
from prism_analytic.graph.pipeline import explicit_pipeline, pipeline_step_graph
from prism_analytic.validation.scenarios import compact_pipeline, fsdp_overlap


def _pipe(
    p: int, m: int, sched: str = "1f1b", family: str = "normal", cv: float = 0.05
) -> pa.StepGraph:
    vpp = 2 if sched == "interleaved" else 1

    def latency(phase: str, stage: int, mb: int, chunk: int) -> pa.Distribution:
        mean = (1.0 if phase == "F" else 2.0) / vpp
        return (pa.normal if family == "normal" else pa.lognormal)(mean, cv * mean)

    return pipeline_step_graph(p, m, latency, schedule=sched, vpp=vpp, compact=True)


def _spec(g: pa.StepGraph):
    return g.graph.nodes["pipeline"]["spec"]


def test_op_laws_are_classified_by_their_skewness():
    assert ops_kind([pa.normal(1.0, 0.2), pa.point_mass(2.0)]) == "symmetric"
    assert ops_kind([pa.normal(1.0, 0.2), pa.lognormal(1.0, 0.05)]) == "skewed"  # skew 0.15
    assert ops_kind([pa.gamma(1.0, 0.05)]) == "skewed"  # skew 0.1
    # a lattice of a normal stays symmetric (the explicit core sees grids)
    assert ops_kind([to_grid(pa.normal(1.0, 0.1), 1e-3)]) == "symmetric"
    assert pipeline_class(_spec(_pipe(4, 8))) == "pipeline-1f1b, symmetric ops"
    assert pipeline_class(_spec(_pipe(4, 8, family="ln"))) == "pipeline-1f1b, skewed ops"
    assert pipeline_class(_spec(_pipe(4, 8, "interleaved"))) == (
        "pipeline-interleaved, symmetric ops"
    )
    assert explicit_class([pa.normal(1.0, 0.1)]) == "explicit, symmetric ops"
    with pytest.raises(ValueError, match="core class"):
        auto_shape("pipeline-gpipe, odd ops")


def test_auto_is_the_default_and_reports_shape_class_and_reason():
    cases = {
        "pipeline-1f1b, symmetric ops": _pipe(4, 8),
        "pipeline-1f1b, skewed ops": _pipe(4, 8, family="ln"),
        "pipeline-interleaved, symmetric ops": _pipe(4, 8, "interleaved"),
        "explicit, skewed ops": fsdp_overlap(),  # lognormal collectives
    }
    for cls, g in cases.items():
        res = pa.predict(g, "analytic")
        assert res.diagnostics["core_shape"] == "auto"
        (core,) = res.diagnostics["cores"]
        assert core["core_class"] == cls
        assert core["shape"] == AUTO_RULE[(cls, CV_BANDS[0])][0]
        assert core["shape_reason"].startswith(f"auto: {cls}, {CV_BANDS[0]}")
        # the same law as asking for that shape directly
        same = pa.predict(g, "analytic", core_shape=core["shape"])
        for q in (0.01, 0.5, 0.99):
            assert res.quantile(q) == same.quantile(q)


def test_the_table_covers_every_class_and_band_with_a_one_line_reason():
    structures = ("pipeline-1f1b", "pipeline-interleaved", "explicit")
    assert set(CLASSES) == {f"{s}, {o} ops" for s in structures for o in ("symmetric", "skewed")}
    assert set(AUTO_RULE) == {(c, b) for c in CLASSES for b in CV_BANDS}
    for shape, why in AUTO_RULE.values():
        assert shape in ("normal", "skew", "kurtosis", "cumulant")
        assert why and "\n" not in why and "reading" in why


def test_the_band_is_read_from_the_ops():
    assert op_cv([pa.normal(1.0, 0.05), pa.lognormal(2.0, 0.4), pa.point_mass(0.0)]) == 0.2
    assert cv_band(0.1) == CV_BANDS[0] and cv_band(0.2) == CV_BANDS[1]
    for bad in (float("nan"), -0.1):
        with pytest.raises(ValueError, match="op CV"):
            cv_band(bad)
    # a 1F1B 4x8 with lognormal ops: CV 20% and its CV 5% twin fall in different bands
    for cv, band, shape in ((0.2, CV_BANDS[1], "cumulant"), (0.05, CV_BANDS[0], "normal")):
        g = _pipe(4, 8, family="ln", cv=cv)
        (core,) = pa.predict(g, "analytic").diagnostics["cores"]
        assert core["core_class"] == "pipeline-1f1b, skewed ops"
        assert core["shape"] == shape == AUTO_RULE[("pipeline-1f1b, skewed ops", band)][0]
        assert core["shape_reason"].startswith(f"auto: pipeline-1f1b, skewed ops, {band}")


def test_requested_shapes_stay_selectable_and_say_so():
    g = _pipe(4, 8)
    for shape in ("normal", "skew"):
        (core,) = pa.predict(g, "analytic", core_shape=shape).diagnostics["cores"]
        assert core["shape"] == shape and "requested" in core["shape_reason"]
    for shape in ("template", "gaussian-ish"):  # the experimental template shape is gone
        with pytest.raises(ValueError, match="core_shape must be one of"):
            pa.predict(g, "analytic", core_shape=shape)
    with pytest.raises(ValueError, match="core_shape must be one of"):
        pa.predict(g, "analytic", core_shape="gaussian-ish")


def test_skew_falls_back_where_it_does_not_apply():
    g = compact_pipeline(4, 8, microbatch_factor=pa.lognormal(1.0, 0.05))  # class picks skew
    (core,) = pa.predict(g, "analytic").diagnostics["cores"]
    assert core["shape"] == "normal" and "not applicable" in core["shape_reason"]
    (core,) = pa.predict(_pipe(4, 8), "analytic", core_method="clark").diagnostics["cores"]
    assert core["shape"] == "normal" and "not applicable" in core["shape_reason"]


def test_auto_beats_the_gaussian_core_against_monte_carlo_on_its_skew_class():
    # 1F1B 8x32, normal ops: an independent sample (seed 4242, not the grid's) judges both
    g = _pipe(8, 32)
    x = pa.predict(g, "montecarlo", samples=20_000, seed=4242).distribution.samples
    ks = {
        s: stats.kstest(x, pa.predict(g, "analytic", core_shape=s).cdf).statistic
        for s in ("auto", "normal")
    }
    dkw = np.sqrt(np.log(2 / 0.05) / (2 * x.size))  # 0.0096
    assert ks["auto"] <= 0.03
    assert ks["auto"] < ks["normal"] - dkw  # 0.02 vs 0.038 measured at 1e5 samples


def _op_by_op_with_extras(sched: str, extra_dep: bool = False) -> pa.StepGraph:
    """An op-by-op pipeline with a data-loading op before it and an optimizer after it."""
    import networkx as nx

    from prism_analytic.graph.pipeline_spec import op_name
    from prism_analytic.schedules import pipeline_dag

    vpp = 2 if sched == "interleaved" else 1
    dag = pipeline_dag(4, 8, sched, vpp)
    g = pa.StepGraph("hand-built")
    g.add_op("load", pa.normal(0.5, 0.01))
    for n in nx.topological_sort(dag):
        after = [op_name(*q) for q in dag.predecessors(n)] or ["load"]
        if extra_dep and n == ("B", 2, 5, 0):  # one dependency no schedule has
            after.append(op_name("F", 0, 7, 0))
        g.add_op(op_name(*n), pa.normal(1.0 / vpp, 0.05 / vpp), after)
    g.add_op("optimizer", pa.normal(0.1, 0.01), [op_name(*n) for n in dag if not dag.out_degree(n)])
    return g


@pytest.mark.parametrize("sched", ["1f1b", "gpipe", "interleaved"])
@pytest.mark.parametrize("family", ["normal", "ln"])
def test_op_by_op_and_compact_forms_of_one_pipeline_get_the_same_class(sched, family):
    compact = _pipe(4, 8, sched, family)
    explicit = explicit_pipeline(_spec(compact))
    classes = set()
    for g in (compact, explicit, pa.StepGraph.from_json(explicit.to_json())):
        (core,) = pa.predict(g, "analytic").diagnostics["cores"]
        classes.add((core["core_class"], core["shape"]))
    assert len(classes) == 1
    structure = "pipeline-interleaved" if sched == "interleaved" else "pipeline-1f1b"
    assert classes.pop()[0].startswith(structure)
    # the same shape, so the same law (to the canonical form's agreement between the forms)
    a, b = (pa.predict(g, "analytic") for g in (compact, explicit))
    assert b.mean() == pytest.approx(a.mean(), rel=1e-9)
    assert b.std() == pytest.approx(a.std(), rel=1e-6)


def test_a_lattice_is_recognised_by_its_structure_not_its_names():
    for sched, structure in (("1f1b", "1f1b"), ("gpipe", "gpipe"), ("interleaved", "interleaved")):
        g = _op_by_op_with_extras(sched)  # ops around the lattice are absorbed by the reduction
        core = reduce_graph(g.graph, lambda _: None).graph
        assert lattice_schedule(core) == (structure, 4, 8, 2 if sched == "interleaved" else 1)
        (c,) = pa.predict(g, "analytic").diagnostics["cores"]
        assert c["core_class"].startswith("pipeline-")
    # one dependency more: the names still say "pipeline", the structure does not
    g = _op_by_op_with_extras("1f1b", extra_dep=True)
    assert lattice_schedule(reduce_graph(g.graph, lambda _: None).graph) is None
    (c,) = pa.predict(g, "analytic").diagnostics["cores"]
    assert c["core_class"] == "explicit, symmetric ops" and c["shape"] == "normal"
    # an FSDP overlap (two serial streams, a lattice too) is not a pipeline schedule
    (c,) = pa.predict(fsdp_overlap(), "analytic").diagnostics["cores"]
    assert c["core_class"].startswith("explicit")
