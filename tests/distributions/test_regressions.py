"""Regression tests for bugs found while building on the engines (each names its bug)."""

import math

import pytest

import prism_analytic as pa
from prism_analytic.distributions import to_grid
from prism_analytic.distributions.products import scale_mixture


def test_point_mass_at_the_bottom_of_a_mixture_stays_on_the_grid():
    # The mass at 0 used to fall into the lower variable's -inf atom, shifting every quantile.
    hiccup = pa.mixture([pa.point_mass(0.0), pa.normal(1.0, 0.05)], [0.5, 0.5])
    total = pa.convolve(hiccup, pa.normal(1.0, 0.05))
    exact = pa.mixture([pa.normal(1.0, 0.05), pa.normal(2.0, 0.05 * 2**0.5)], [0.5, 0.5])
    for q in (0.1, 0.25, 0.75, 0.9):  # not the median: the CDF is flat between the modes
        low, high = total.quantile_bracket(q)
        assert low <= float(exact.quantile(q)) <= high


def test_scale_mixture_of_a_long_body_keeps_its_location():
    # The re-binned mixtures used to be recombined on the pre-re-binning lattice (a 95 s body
    # came back as a 14 s law).
    body = to_grid(pa.normal(95.0, 0.0066), 6.4e-6)
    speed = pa.iid_max(pa.lognormal(1.0, 0.017), 128)
    mixed = scale_mixture(body, speed)
    assert mixed.mean() == pytest.approx(95.0 * speed.mean(), rel=1e-4)


def test_scale_mixture_matches_monte_carlo_and_brackets_a_closed_form():
    # lognormal x lognormal is lognormal: the bracket must contain the exact quantiles
    x, s = pa.lognormal(2.0, 0.1), pa.lognormal(1.0, 0.02)
    sig2 = sum(math.log1p(d.std() ** 2 / d.mean() ** 2) for d in (x, s))
    exact = pa.lognormal(2.0, 2.0 * math.expm1(sig2) ** 0.5)
    mixed = scale_mixture(to_grid(x, 1e-4), s)
    for q in (0.01, 0.5, 0.99, 0.999):
        low, high = mixed.quantile_bracket(q)
        assert low <= float(exact.quantile(q)) <= high
        assert (high - low) / float(exact.quantile(q)) < 1e-3


def test_two_cluster_law_that_just_fills_the_grid_keeps_its_far_cluster():
    # A rare 1.2 s hiccup on a 4.6 us lattice needed max_cells + 2 cells; the far cluster used
    # to be cut into the +inf atom, making p99.9 of the step infinite.
    policy = pa.GridPolicy()
    hiccup = pa.mixture([pa.uniform(0, 1.2e-6), pa.uniform(1.2, 1.2 + 1.2e-6)], [0.9961, 0.0039])
    g = to_grid(hiccup, 1.2 / policy.max_cells, policy)
    assert g.above < 1e-12
    assert g.quantile_bracket(0.999)[1] < 1.21


def test_workload_graphs_round_trip_through_json():
    # Built graphs used to fail to_json (IIDMax speed factors, the builder's ExposedComm).
    from prism_analytic.cli.predict import build_job
    from prism_analytic.workload.builder import build_step_graph

    g = build_step_graph(build_job("llama3-8b", 1024))
    again = pa.StepGraph.from_json(g.to_json())
    assert again.to_dict() == g.to_dict()
    assert pa.predict(again).quantile(0.99) == pa.predict(g).quantile(0.99)


def test_custom_spec_cannot_import_code_outside_the_package():
    data = {
        "nodes": [
            {
                "id": "a",
                "type": "op",
                "latency": {"type": "custom", "class": "os:system", "fields": {}},
            }
        ],
        "edges": [],
    }
    with pytest.raises(
        ValueError, match=r"nodes\['a'\]\.latency\.class must be one of \['ExposedComm'"
    ):
        pa.StepGraph.from_dict(data)
