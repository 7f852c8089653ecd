"""The grid engines run with one BLAS thread and give the caller's setting back."""

from __future__ import annotations

import pytest

import prism_analytic as pa
from prism_analytic.distributions import normal
from prism_analytic.engines import blas_threads
from prism_analytic.engines.blas_threads import single_blas_thread
from prism_analytic.graph import StepGraph

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]


def test_limits_inside_and_restores_after() -> None:
    before = _blas_threads()
    if not before:
        pytest.skip("no BLAS library is loaded")
    with threadpoolctl.threadpool_limits(2, "blas"):
        outer = _blas_threads()
        with single_blas_thread():
            assert all(n == 1 for n in _blas_threads())
        assert _blas_threads() == outer
    assert _blas_threads() == before


def test_predict_is_unchanged_without_threadpoolctl(monkeypatch) -> None:
    g = StepGraph("two")
    g.add_op("a", normal(1.0, 0.1))
    g.add_op("b", normal(2.0, 0.1), after=["a"])
    ref = pa.predict(g)
    monkeypatch.setattr(blas_threads, "_CONTROLLER", [None])  # as if it were not installed
    again = pa.predict(g)
    assert again.quantile_bracket(0.99) == ref.quantile_bracket(0.99)
