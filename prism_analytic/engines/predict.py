"""``predict(graph, method=...)``: one question, three engines."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor

from .._checks import check_count
from ..distributions import Empirical
from ..graph import GraphError, StepGraph
from ..policy import DEFAULT_POLICY, GridPolicy
from .analytic import analytic_distribution
from .blas_threads import single_blas_thread
from .bounds import _as_compact, bound_distributions
from .montecarlo import MonteCarloSettings, sample_step_report, truncation_error
from .resolution import resolve_policy
from .result import AnalyticResult, BoundsResult, MonteCarloResult, StepTimeResult

__all__ = ["predict", "METHODS", "MAX_GRID_NODES", "grid_nodes", "check_grid_size"]

METHODS = ("analytic", "bounds", "montecarlo")
CORE_METHODS = ("clark-mehler", "clark", "independent")
CORE_SHAPES = ("auto", "normal", "skew", "kurtosis", "cumulant")


#: Nodes the grid engines evaluate one by one (a pipeline node counts as one in ``analytic``;
#: see :data:`PIPELINE_OPS_PER_NODE` for ``bounds``). About 25 ms a node on a long chain;
#: beyond this the run is minutes long and is refused up front.
MAX_GRID_NODES = 5000
#: Pipeline ops that cost the bounds engine about one grid node: a compact pipeline is bounded
#: by its own path sums (:mod:`.pipeline_bounds`), ~0.4 ms an op on 2 cores (1F1B 16x64 0.75 s,
#: interleaved 16x64 1.6 s; ``validation/results/bench_bounds.md``) against ~25 ms a grid node.
PIPELINE_OPS_PER_NODE = 50


def grid_nodes(graph: StepGraph, method: str = "analytic") -> int:
    """Nodes the ``analytic`` or ``bounds`` engine evaluates (each replica body once)."""
    from ..graph import PIPELINE, REPLICA

    total, stack = 0, [graph]
    while stack:
        g = stack.pop()
        if method == "bounds":  # an op-by-op pipeline is bounded as its compact node
            g = _as_compact(g) or g
        for _, d in g.graph.nodes(data=True):
            total += 1
            if d.get("type") == REPLICA:
                stack.append(d["body"])
            elif d.get("type") == PIPELINE and method == "bounds":
                total += -(-d["spec"].n_ops // PIPELINE_OPS_PER_NODE) - 1
    return total


def check_grid_size(graph: StepGraph, method: str) -> None:
    """Raise :class:`~prism_analytic.graph.GraphError` when ``graph`` is too big for ``method``."""
    nodes = grid_nodes(graph, method)
    if nodes > MAX_GRID_NODES:
        raise GraphError(
            f"graph {graph.name!r}: {nodes:,} nodes for the {method} engine, over its limit of "
            f"{MAX_GRID_NODES:,} (about 25 ms each: minutes of work); "
            + (
                "use method='analytic' or 'montecarlo'"
                if method == "bounds"
                else "use method='montecarlo', or a compact pipeline node "
                "(StepGraph.add_pipeline) for a pipeline schedule"
            )
        )


def predict(
    graph: StepGraph,
    method: str = "analytic",
    *,
    policy: GridPolicy | None = None,
    samples: int = 100_000,
    seed: int = 0,
    executor: Executor | None = None,
    mc_settings: MonteCarloSettings | None = None,
    core_method: str = "clark-mehler",
    window: int | None = None,
    core_shape: str = "auto",
    paths: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> StepTimeResult:
    """The distribution of one training step's time.

    Parameters
    ----------
    graph : StepGraph
        The step DAG.
    method : {"analytic", "bounds", "montecarlo"}
        ``analytic``: exact on series-parallel structure and replica groups, Clark-Mehler
        canonical form on reconvergent cores; ``bounds``: guaranteed lower and upper bounds;
        ``montecarlo``: sampling with exact semantics (the cross-check).
    policy : GridPolicy, optional
        Requested grid resolution for analytic and bounds (default
        :data:`~prism_analytic.policy.DEFAULT_POLICY`). It is resolved for the graph by
        :func:`~.resolution.resolve_policy` (coarsened only where a replica speed mixture would
        overflow ``max_cells``); the policy used is recorded in ``diagnostics["policy"]``.
    samples, seed, executor, mc_settings, progress
        Monte Carlo options (see :func:`~prism_analytic.engines.montecarlo.sample_step`).
    core_method : {"clark-mehler", "clark", "independent"}
        Method for irreducible cores (analytic only).
    window : int, optional
        Residual window of the Clark-Mehler form (None: its default).
    core_shape : {"auto", "normal", "skew", "kurtosis", "cumulant"}
        Shape of a core's makespan: ``"normal"``: Gaussian; ``"skew"``: the skew-aware core
        of :mod:`~.skew_core` (Clark-Mehler on full differences, a third cumulant, a Pearson
        III law; with ``core_method="clark-mehler"`` only, on plain pipelines and explicit cores;
        factor-conditioned pipelines keep their mixture); ``"kurtosis"``: the skew core with
        a fourth-cumulant (Gram-Charlier) correction of every max (:mod:`~.kurtosis_core`,
        same scope; an estimate); ``"cumulant"``: a third-cumulant closure of every max
        (:mod:`~.cumulant_core`, same scope, about 1.5x the kurtosis core's time; an
        estimate). ``"auto"`` (default): per core, one of ``"normal"``, ``"skew"``,
        ``"kurtosis"`` or ``"cumulant"`` by the measured table of :mod:`~.core_shape`. Every
        entry of ``diagnostics["cores"]`` says the ``shape`` used, its ``core_class`` and
        ``shape_reason``.
    paths : int
        Number of dominant paths in the lower bound.

    Returns
    -------
    StepTimeResult
        :class:`~.result.AnalyticResult`, :class:`~.result.BoundsResult` (``lower`` and
        ``upper`` only) or :class:`~.result.MonteCarloResult`; ``result.exact`` says whether its
        intervals are guaranteed.
    """
    if not isinstance(graph, StepGraph):
        raise GraphError(f"graph must be a StepGraph, got {type(graph).__name__}")
    graph.check_nesting()  # before any walk over the bodies: a cycle would never end
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if mc_settings is not None and not isinstance(mc_settings, MonteCarloSettings):
        raise TypeError(
            f"mc_settings must be a MonteCarloSettings, got {type(mc_settings).__name__} "
            f"{mc_settings!r}"
        )
    if executor is not None and not callable(getattr(executor, "map", None)):
        raise TypeError(
            f"executor must be a concurrent.futures.Executor (with .map), got "
            f"{type(executor).__name__} {executor!r}"
        )
    if method != "montecarlo":
        check_grid_size(graph, method)
    policy = DEFAULT_POLICY if policy is None else policy
    if not isinstance(policy, GridPolicy):
        raise TypeError(f"policy must be a GridPolicy, got {type(policy).__name__}")
    if method != "montecarlo":
        policy = resolve_policy(graph, policy)
    if core_shape not in CORE_SHAPES:
        raise ValueError(f"core_shape must be one of {CORE_SHAPES}, got {core_shape!r}")
    if core_method not in CORE_METHODS:
        raise ValueError(f"core_method must be one of {CORE_METHODS}, got {core_method!r}")
    start = time.perf_counter()
    if method == "analytic":
        with single_blas_thread():  # lattice vector products: threads only wait on a busy box
            dist, report = analytic_distribution(
                graph, policy, core_method=core_method, window=window, shape=core_shape
            )
        return AnalyticResult(
            distribution=dist,
            method=method,
            compute_time_s=time.perf_counter() - start,
            diagnostics={
                **report.to_dict(),
                "policy": policy.to_dict(),
                "window": window,
                "core_shape": core_shape,
            },
            cores=tuple(report.approximated),
        )
    if method == "bounds":
        with single_blas_thread():
            lower, upper = bound_distributions(graph, policy, paths=check_count(paths, "paths"))
        return BoundsResult(
            lower=lower,
            upper=upper,
            method=method,
            compute_time_s=time.perf_counter() - start,
            diagnostics={"policy": policy.to_dict()},
        )
    samples = check_count(samples, "samples", minimum=2, maximum=10**9)
    settings = mc_settings or MonteCarloSettings(seed=check_count(seed, "seed", minimum=0))
    draws, pooled = sample_step_report(
        graph, samples, settings=settings, executor=executor, progress=progress
    )
    emp = Empirical(draws)
    return MonteCarloResult(
        distribution=emp,
        method=method,
        compute_time_s=time.perf_counter() - start,
        diagnostics={
            "samples": samples,
            "seed": settings.seed,
            "dkw_95": emp.dkw_epsilon(0.05),
            "pooled_groups": pooled,
            "truncation_ks_error": truncation_error(graph),
        },
    )
