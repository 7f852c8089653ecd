"""One job, one prediction: build the step model of a job and evaluate it with an engine."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from ..engines.crosscheck import DEFAULT_TOLERANCE, check_tolerance
from ..engines.crosscheck import verify as cross_check
from ..engines.predict import predict
from ..policy import GridPolicy
from .builder import build_step_model
from .config import JobConfig
from .step_estimate import step_time

__all__ = ["predict_job"]


def predict_job(
    job: JobConfig,
    *,
    method: str = "analytic",
    samples: int = 20_000,
    seed: int = 0,
    verify: bool = False,
    verify_budget_s: float = 1.0,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
    policy: GridPolicy | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> tuple[Any, Any, dict[str, Any]]:
    """Build the step graph of ``job`` and predict its step time.

    Parameters
    ----------
    job : JobConfig
        The job (see :func:`~prism_analytic.workload.jobs.build_job`).
    method : {"analytic", "montecarlo", "bounds"}
        The engine.
    samples, seed : int
        Monte Carlo options (also the seed of the cross-check).
    verify : bool
        Cross-check an approximate analytic result
        (:func:`~prism_analytic.engines.crosscheck.verify`) within ``verify_budget_s`` s.
    verify_budget_s : float
        Time budget of the cross-check.
    executor : concurrent.futures.Executor, optional
        Runs Monte Carlo sample blocks (e.g. a dask client's executor); the result is the
        same for the same seed.
    progress : callable, optional
        ``progress(done, total)`` for Monte Carlo.
    policy : GridPolicy, optional
        Grid resolution of the analytic and bounds engines (default
        :data:`~prism_analytic.policy.DEFAULT_POLICY`), e.g. ``GridPolicy(op_refine=1)``: the
        opt-in coarser op grids (``validation/results/bench_resolution.md``).
    tolerance : float
        Largest approximation error of a step quantile, relative to the quantile, that the
        cross-check accepts without a warning (default 0.001, 0.1%; see
        :func:`~prism_analytic.engines.crosscheck.judge_quantile`). The measured errors are
        ``result.quantile_errors()``.

    Returns
    -------
    tuple
        ``(result, graph, info)``; ``info`` holds the graph size, the build time and the
        deterministic mean-model step time. The grid resolution is decided inside
        :func:`~prism_analytic.engines.predict.predict` (the same as a library call).
    """
    tolerance = check_tolerance(tolerance)
    start = time.perf_counter()
    model = build_step_model(job)
    graph = model.graph
    built = time.perf_counter() - start
    result = predict(
        graph,
        method,
        samples=samples,
        seed=seed,
        executor=executor,
        progress=progress if method == "montecarlo" else None,
        policy=policy,
    )
    if verify and method == "analytic":
        result = cross_check(
            graph, result, budget_s=verify_budget_s, seed=seed, tolerance=tolerance
        )
    info = {
        "graph_nodes": model.graph_nodes,
        "represented_ops": graph.total_ops(),
        "build_time_s": built,
        "mean_model_step_s": step_time(job, model.means).step_s,
    }
    return result, graph, info
