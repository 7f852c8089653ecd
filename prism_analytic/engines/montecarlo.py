"""Monte Carlo ground truth: exact semantics by sampling, vectorised and reproducible.

* Every sample is a whole step: op latencies drawn fresh, collectives one draw per instance,
  regimes one state per step, replica copies independent.
* Replica groups up to ``explicit_limit`` copies are sampled copy by copy. Larger groups whose
  copy is a single op are sampled exactly as F^{-1}(U^(1/n)). Other large groups are sampled
  from a *tail pool* (:mod:`.mc_tail`): ``pool_size`` copies drawn by importance sampling
  over the copy's random inputs, so that the weighted pool resolves one copy's survival
  function down to ~1e-13, and the max of ``n`` copies is drawn by inversion at the single-copy
  level 1 - U^(1/n). The pool's estimated KS error on the max (and, times the copies of the
  group in the step, on the step) is reported in ``diagnostics["pooled_groups"]`` and widens
  the result's intervals; above :data:`LOUD_KS_ERROR` a :class:`PoolAccuracyWarning` is issued.
  (A plain pool of P copies, the former method, returns its own maximum for every sample once
  n >> P: 17.2 instead of 24.3 for 1e9 copies of exponential(1) -> exponential(1).)
* Seeds: samples come in fixed blocks of :data:`BLOCK` with seeds spawned from one
  ``SeedSequence``; pools have seeds keyed by their position in the graph. Results therefore
  do not depend on how blocks are grouped into chunks or which executor runs them.
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from .._checks import check_count
from ..graph import OP, PIPELINE, StepGraph
from .mc_tail import ColumnSource, TailPool, build_tail_pool, is_rows
from .pipeline_mc import sample_pipeline

__all__ = [
    "sample_step",
    "sample_step_report",
    "BLOCK",
    "MAX_SAMPLES",
    "MonteCarloSettings",
    "PoolAccuracyWarning",
    "default_blocks_per_task",
    "pool_ks_error",
    "pooled_groups",
    "estimated_draws",
    "truncation_error",
]

BLOCK = 8192
#: Most samples one call draws (8 GB of float64 results).
MAX_SAMPLES = 10**9
#: Above this estimated KS error (summed over pools), sampling warns loudly.
LOUD_KS_ERROR = 0.05


class PoolAccuracyWarning(UserWarning):
    """Replica pools leave an error on the sampled law that dominates the sampling noise."""


@dataclass(frozen=True)
class MonteCarloSettings:
    """How replica groups are sampled (see the module docstring).

    Attributes
    ----------
    explicit_limit : int
        Largest copy count sampled copy by copy (at most 1e7).
    pool_size : int
        Copies in a tail pool (2 to 1e8).
    seed : int
        Seed of every block and pool.
    max_draws : int
        Refuse, before drawing anything, a run that would take more random draws than this
        (:func:`estimated_draws`; default 5e9, a few minutes).
    """

    explicit_limit: int = 1024
    pool_size: int = 1_000_000
    seed: int = 0
    max_draws: int = 5 * 10**9

    def __post_init__(self) -> None:
        check_count(self.explicit_limit, "explicit_limit", minimum=1, maximum=10**7)
        check_count(self.pool_size, "pool_size", minimum=2, maximum=10**8)
        check_count(self.seed, "seed", minimum=0)
        check_count(self.max_draws, "max_draws", minimum=1)


def _single_op(body: StepGraph) -> bool:
    return len(body) == 1 and next(iter(body.graph.nodes(data="type")))[1] == OP


def pool_ks_error(n: int, pool_size: int) -> float:
    """KS error (95th percentile) that a *plain* pool of ``pool_size`` copies puts on the max of n.

    The pool's tail probability near 1/n has relative error about sqrt(n / pool_size); through
    F^n the sup distance of the pooled law has median ~0.66 and 95th percentile ~1.05 times
    sqrt(n / pool_size). Tail pools (:mod:`.mc_tail`) do far better; this is the reference
    they are compared with.
    """
    return float(1.05 * np.sqrt(n / pool_size))


def _pooled(d: dict[str, Any], settings: MonteCarloSettings) -> list[int]:
    """Copy counts of the group ``d`` that are sampled from a tail pool."""
    if _single_op(d["body"]) and d["speed"] is None:
        return []
    k = d["slow"][0] if d["slow"] else 0
    return [c for c in (d["n"] - k, k) if c > settings.explicit_limit]


def pooled_groups(graph: StepGraph, settings: MonteCarloSettings, path: str = "") -> list[dict]:
    """The replica groups that Monte Carlo samples from a tail pool (before sampling).

    ``ks_error`` here is the plain-pool reference :func:`pool_ks_error`; the error of the
    pools actually drawn is in ``predict(..., "montecarlo").diagnostics["pooled_groups"]``.
    """
    out = []
    for name, d in graph.graph.nodes(data=True):
        if d["type"] in (OP, PIPELINE):
            continue
        if _pooled(d, settings):
            out.append(
                {
                    "group": f"{path}/{name}",
                    "n": d["n"],
                    "pool_size": settings.pool_size,
                    "ks_error": pool_ks_error(d["n"], settings.pool_size),
                }
            )
        out.extend(pooled_groups(d["body"], settings, f"{path}/{name}"))
    return out


def _graph_draws(g: StepGraph, settings: MonteCarloSettings) -> int:
    """Random draws one sample of ``g`` takes (a pooled group: one index per sample)."""
    total = 0
    for _, d in g.graph.nodes(data=True):
        if d["type"] == OP:
            total += 1
        elif d["type"] == PIPELINE:
            total += d["spec"].n_ops
        else:
            k = d["slow"][0] if d["slow"] else 0
            for count in (d["n"] - k, k):
                if 0 < count <= settings.explicit_limit:
                    total += count * _copy_draws(d, settings)
                elif count:
                    total += 1
    return total


def _copy_draws(d: dict[str, Any], settings: MonteCarloSettings) -> int:
    """Random draws one copy of the group ``d`` takes (its body and its speed factor)."""
    return _graph_draws(d["body"], settings) + (d["speed"] is not None)


def _pool_draws(g: StepGraph, settings: MonteCarloSettings) -> int:
    """Random draws that building every tail pool of ``g`` (once) takes."""
    total = 0
    for _, d in g.graph.nodes(data=True):
        if d["type"] in (OP, PIPELINE):
            continue
        per_copy = _copy_draws(d, settings)
        if _pooled(d, settings):
            total += is_rows(settings.pool_size, per_copy) * per_copy
        total += _pool_draws(d["body"], settings)
    return total


def estimated_draws(graph: StepGraph, samples: int, settings: MonteCarloSettings) -> int:
    """Random draws (op latencies, speed factors, pool entries) ``samples`` steps take.

    Pools are built once per regime state; this is the cost :func:`sample_step` checks
    against ``settings.max_draws`` before drawing anything.
    """
    states = sum(1 for _ in graph.regime_states())
    return samples * _graph_draws(graph, settings) + states * _pool_draws(graph, settings)


def _finite(values: np.ndarray) -> np.ndarray:
    """Draws with a law's unresolved tail atoms (a grid's +-inf) moved to the finite extremes.

    Where such a draw lands is unknown; the probability that any draw of a step does is
    :func:`truncation_error`, which widens the result's intervals.
    """
    values = np.asarray(values, dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        good = values[~bad]
        hi = float(good.max()) if good.size else 0.0
        lo = float(good.min()) if good.size else 0.0
        values = np.nan_to_num(values, nan=hi, posinf=hi, neginf=lo)
    return values


def _unresolved(law: Any) -> float:
    """Probability a draw of ``law`` falls in a tail it does not resolve (a grid's atoms)."""
    return float(getattr(law, "above", 0.0) or 0.0) + float(getattr(law, "below", 0.0) or 0.0)


def truncation_error(graph: StepGraph, mult: int = 1) -> float:
    """Bound on the KS error from unresolved tails: the chance any draw of a step lands there.

    Every op whose law has tail atoms (a :class:`~prism_analytic.distributions.GridDistribution`
    trims ``tail_mass`` into +-inf) is drawn once per copy of it in the step; by the union
    bound the sampled step law is within the sum of those masses of the model's (capped at 1).
    """
    total = 0.0
    for _, d in graph.graph.nodes(data=True):
        if d["type"] == OP:
            total += mult * _unresolved(d["latency"])
        elif d["type"] == PIPELINE:
            spec = d["spec"]
            worst = max((_unresolved(law) for law in spec.laws.values()), default=0.0)
            total += mult * spec.n_ops * worst
        else:
            if d["speed"] is not None:
                total += mult * d["n"] * _unresolved(d["speed"])
            total += truncation_error(d["body"], mult * d["n"])
        if total >= 1.0:
            return 1.0
    return float(min(total, 1.0))


def _multiplicities(graph: StepGraph, path: str = "", mult: int = 1) -> dict[str, int]:
    """For every group path: how many copies of it the step holds (product of enclosing n)."""
    out: dict[str, int] = {}
    for name, d in graph.graph.nodes(data=True):
        if d["type"] not in (OP, PIPELINE):
            out[f"{path}/{name}"] = mult
            out.update(_multiplicities(d["body"], f"{path}/{name}", mult * d["n"]))
    return out


class _Sampler:
    """Samples whole steps; with a column source it evaluates given survival probabilities.

    ``source is None``: plain sampling from ``rng``. Otherwise every random input (an op's
    latency, a speed factor, a large group's maximum) takes the next column of survival
    probabilities from the source, in a fixed order, so that a :class:`TailPool` can
    importance-sample whole copies.
    """

    def __init__(self, settings: MonteCarloSettings, pools: dict | None = None) -> None:
        self.settings = settings
        self.source: ColumnSource | None = None
        self.state = ""
        self.mult = 1  # copies of the sampled graph the whole step holds
        # shared between a sampler and the samplers that build its nested pools
        self._pools: dict[str, TailPool] = {} if pools is None else pools
        self.report: dict[str, dict[str, Any]] = {}

    def _draw(self, dist: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        if self.source is None:
            return _finite(dist._sample(size, rng))
        return _finite(dist._isf(self.source.take()))

    def _max_level(self, count: int, size: int, rng: np.random.Generator) -> np.ndarray:
        """One copy's survival level at which the max of ``count`` copies is drawn."""
        with np.errstate(divide="ignore"):
            if self.source is None:
                return -np.expm1(np.log(rng.random(size)) / count)
            return -np.expm1(np.log1p(-self.source.take()) / count)

    def graph(self, g: StepGraph, size: int, rng: np.random.Generator, path: str) -> np.ndarray:
        finish: dict[str, np.ndarray] = {}
        order = list(nx.topological_sort(g.graph))
        for name in order:
            preds = list(g.graph.predecessors(name))
            start = (
                finish[preds[0]]
                if len(preds) == 1
                else np.max([finish[p] for p in preds], axis=0)
                if preds
                else 0.0
            )
            d = g.graph.nodes[name]
            if d["type"] == OP:
                dur = self._draw(d["latency"], size, rng)
            elif d["type"] == PIPELINE:  # compact schedule: engines/pipeline_mc.py
                own = None if self.source is None else (lambda law, k: self._draw(law, k, rng))
                dur = sample_pipeline(d["spec"], size, rng, own)
            else:
                dur = self.group(d, size, rng, f"{path}/{name}")
            finish[name] = start + dur
        sinks = [n for n in order if g.graph.out_degree(n) == 0]
        return np.max([finish[s] for s in sinks], axis=0)

    def one_copy(self, d: dict[str, Any], size: int, rng: np.random.Generator, path: str):
        """One copy's duration: its body's makespan times its speed draw."""
        v = self.graph(d["body"], size, rng, path)
        if d["speed"] is not None:
            v = v * self._draw(d["speed"], size, rng)
        return v

    def copies(
        self,
        d: dict[str, Any],
        count: int,
        factor: float,
        size: int,
        rng: np.random.Generator,
        path: str,
    ) -> np.ndarray:
        """Max over ``count`` independent copies (each scaled by ``factor`` and its speed draw)."""
        if count <= self.settings.explicit_limit:
            best = np.full(size, -np.inf)
            # copy by copy keeps memory at O(size) whatever the count
            for _ in range(count):
                np.maximum(best, self.one_copy(d, size, rng, path) * factor, out=best)
            return best
        body = d["body"]
        level = self._max_level(count, size, rng)
        if _single_op(body) and d["speed"] is None:
            # One op per copy: its exact quantile function gives the max of n draws exactly.
            (only,) = body.graph.nodes
            return _finite(body.graph.nodes[only]["latency"]._isf(level)) * factor
        pool = self.pool(d, path)
        idx = np.searchsorted(-pool.surv, -level, side="left")
        self._record(path, count, pool)
        return pool.values[np.minimum(idx, pool.size - 1)] * factor

    def _record(self, path: str, count: int, pool: TailPool) -> None:
        key = f"{path}#{count}"
        if key not in self.report:
            self.report[key] = {
                "group": path,
                "n": count,
                "pool_size": pool.size,
                "random_inputs": pool.dim,
                "ks_error": pool.ks_error(count),
            }

    def pool(self, d: dict[str, Any], path: str) -> TailPool:
        key = f"{self.state}|{path}"
        if key not in self._pools:
            seed = np.random.SeedSequence([self.settings.seed, zlib.crc32(key.encode())])
            rng = np.random.default_rng(seed)
            inner = _Sampler(self.settings, self._pools)
            inner.state = self.state

            def evaluate(source: ColumnSource) -> np.ndarray:
                inner.source = source
                return inner.one_copy(d, source.size, rng, path)

            def plain(m: int) -> np.ndarray:
                inner.source = None
                return inner.one_copy(d, m, rng, path)

            # resolve one copy's tail to 1e-3 / (copies in the whole step): p99.9 of the max
            target = max(1e-14, 1e-3 / (self.mult * d["n"]))
            inner.mult = self.mult * d["n"]
            self._pools[key] = build_tail_pool(
                evaluate,
                self.settings.pool_size,
                rng,
                dim=max(1, _copy_draws(d, self.settings)),
                plain=plain,
                target=target,
            )
            for k, info in inner.report.items():
                self.report.setdefault(k, info)
        return self._pools[key]

    def group(
        self, d: dict[str, Any], size: int, rng: np.random.Generator, path: str
    ) -> np.ndarray:
        k, factor = d["slow"] if d["slow"] else (0, 1.0)
        out = self.copies(d, d["n"] - k, 1.0, size, rng, path) if d["n"] > k else None
        if k:
            slow = self.copies(d, k, factor, size, rng, path)
            out = slow if out is None else np.maximum(out, slow)
        return out


def default_blocks_per_task(samples: int) -> int:
    """Blocks per executor task: 4, or fewer so that there are at least 8 tasks when possible.

    With a fixed 4, a run of up to 4 blocks (32,768 samples) was one task that no cluster
    could spread; a 405B step at 65k GPUs takes minutes per block. Grouping never changes
    the samples (blocks have their own seeds).
    """
    n_blocks = -(-samples // BLOCK)
    return max(1, min(4, n_blocks // 8))


def _run_block(
    graph: StepGraph, sampler: _Sampler, seed: np.random.SeedSequence, size: int
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    states = list(graph.regime_states())
    if len(states) == 1:
        sampler.state = ""
        return sampler.graph(
            graph.conditioned(states[0][1]) if graph.regimes else graph, size, rng, ""
        )
    probs = np.array([p for p, _ in states])
    which = rng.choice(len(states), size=size, p=probs / probs.sum())
    out = np.empty(size)
    for i, (_, factors) in enumerate(states):
        mask = which == i
        if mask.any():
            sampler.state = f"r{i}"
            out[mask] = sampler.graph(graph.conditioned(factors), int(mask.sum()), rng, "")
    return out


def _run_blocks(
    args: tuple[StepGraph, MonteCarloSettings, list[tuple[Any, int]]],
) -> tuple[np.ndarray, dict[str, dict[str, Any]]]:
    graph, settings, blocks = args
    sampler = _Sampler(settings)  # pools are keyed by position, so every task rebuilds the same
    draws = np.concatenate([_run_block(graph, sampler, seed, size) for seed, size in blocks])
    return draws, sampler.report


def _summarise(graph: StepGraph, report: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per pooled group, with its KS error on the step.

    The group's pools' KS errors (summed over the slow and normal copies, worst regime state),
    times the number of copies of the group the step holds, capped at 1.
    """
    mult = _multiplicities(graph)
    groups: dict[str, dict[str, Any]] = {}
    for info in report.values():
        g = groups.setdefault(
            info["group"],
            {
                "group": info["group"],
                "n": 0,
                "pool_size": info["pool_size"],
                "random_inputs": info["random_inputs"],
                "pool_ks_error": 0.0,
            },
        )
        g["n"] = max(g["n"], info["n"])
        g["pool_ks_error"] = max(g["pool_ks_error"], info["ks_error"])
    out = []
    for path, g in groups.items():
        counts = {i["n"] for i in report.values() if i["group"] == path}
        pool_err = sum(
            max(i["ks_error"] for i in report.values() if i["group"] == path and i["n"] == c)
            for c in counts
        )
        g["pool_ks_error"] = float(min(1.0, pool_err))
        g["ks_error"] = float(min(1.0, pool_err * mult.get(path, 1)))
        out.append(g)
    return sorted(out, key=lambda g: g["group"])


def sample_step(
    graph: StepGraph,
    samples: int,
    *,
    settings: MonteCarloSettings | None = None,
    executor: Executor | None = None,
    blocks_per_task: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Draw ``samples`` step times of ``graph`` (seconds), reproducibly.

    Parameters
    ----------
    graph : StepGraph
    samples : int
        Number of sampled steps (at most :data:`MAX_SAMPLES`).
    settings : MonteCarloSettings, optional
        Seed and replica-group sampling options.
    executor : concurrent.futures.Executor, optional
        Runs groups of blocks (e.g. a ProcessPoolExecutor or a dask ``Client.get_executor()``);
        by default everything runs in this process. The result does not depend on it.
    blocks_per_task : int, optional
        Blocks of :data:`BLOCK` samples handed to one task; default 4 when the graph has
        tail pools (each task rebuilds them), else :func:`default_blocks_per_task` (up to 4,
        fewer so that a run of a few blocks still makes several tasks).
    progress : callable, optional
        Called as ``progress(done, total)`` (in samples) as blocks or tasks finish.

    Returns
    -------
    numpy.ndarray
        The sampled step times (see :func:`sample_step_report` for the pools' errors).
    """
    return sample_step_report(
        graph,
        samples,
        settings=settings,
        executor=executor,
        blocks_per_task=blocks_per_task,
        progress=progress,
    )[0]


def sample_step_report(
    graph: StepGraph,
    samples: int,
    *,
    settings: MonteCarloSettings | None = None,
    executor: Executor | None = None,
    blocks_per_task: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """:func:`sample_step`, and the tail pools it drew with their estimated KS errors.

    Returns
    -------
    draws : numpy.ndarray
    pooled : list of dict
        One entry per pooled replica group: ``group``, ``n``, ``pool_size``, ``random_inputs``,
        ``pool_ks_error`` (of the group's maximum) and ``ks_error`` (its bound on the whole
        step's law: times the copies of the group the step holds, capped at 1).
    """
    if settings is None:
        settings = MonteCarloSettings()
    if not isinstance(settings, MonteCarloSettings):
        raise TypeError(
            f"settings must be a MonteCarloSettings, got {type(settings).__name__} {settings!r}"
        )
    samples = check_count(samples, "samples", minimum=1, maximum=MAX_SAMPLES)
    if not isinstance(graph, StepGraph):
        raise TypeError(f"graph must be a StepGraph, got {type(graph).__name__}")
    if executor is not None and not callable(getattr(executor, "map", None)):
        raise TypeError(
            f"executor must be a concurrent.futures.Executor (with .map), got "
            f"{type(executor).__name__} {executor!r}"
        )
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable, got {type(progress).__name__}")
    graph.validate()
    if blocks_per_task is None:
        # every task rebuilds the tail pools: keep tasks coarse when there are pools
        pooled_graph = bool(pooled_groups(graph, settings))
        blocks_per_task = 4 if pooled_graph else default_blocks_per_task(samples)
    blocks_per_task = check_count(blocks_per_task, "blocks_per_task", minimum=1)
    draws = estimated_draws(graph, samples, settings)
    if draws > settings.max_draws:
        per_sample = _graph_draws(graph, settings)
        most = max(0, settings.max_draws - draws + samples * per_sample) // max(per_sample, 1)
        raise ValueError(
            f"samples: Monte Carlo of this graph would take {draws:.3g} random draws "
            f"({samples:,} samples x {per_sample:,} per step, plus replica pools), over the "
            f"limit of {settings.max_draws:.3g} (MonteCarloSettings.max_draws, minutes of "
            f"work); use at most {most:,} samples, a smaller explicit_limit or pool_size, "
            "or raise max_draws"
        )
    n_blocks = -(-samples // BLOCK)
    seeds = np.random.SeedSequence(settings.seed).spawn(n_blocks)
    sizes = [min(BLOCK, samples - i * BLOCK) for i in range(n_blocks)]
    blocks = list(zip(seeds, sizes))
    tasks = [
        (graph, settings, blocks[i : i + blocks_per_task])
        for i in range(0, n_blocks, blocks_per_task)
    ]
    parts: list[np.ndarray] = []
    report: dict[str, dict[str, Any]] = {}
    if executor is None:
        sampler = _Sampler(settings)  # one sampler: pools are built once in this process
        for seed, size in blocks:
            parts.append(_run_block(graph, sampler, seed, size))
            if progress is not None:
                progress(sum(p.size for p in parts), samples)
        report = sampler.report
    else:
        for part, rep in executor.map(_run_blocks, tasks):
            parts.append(part)
            for k, info in rep.items():
                report.setdefault(k, info)
            if progress is not None:
                progress(sum(p.size for p in parts), samples)
    pooled = _summarise(graph, report)
    worst = sum(p["ks_error"] for p in pooled) + truncation_error(graph)
    if worst > LOUD_KS_ERROR:
        warnings.warn(
            f"Monte Carlo: replica pools and unresolved grid tails put an estimated KS error "
            f"of {worst:.3g} on the step time (pools: "
            f"{', '.join(p['group'] for p in pooled) or 'none'}); its intervals are widened by it. "
            "Raise MonteCarloSettings.pool_size or explicit_limit for a sharper answer.",
            PoolAccuracyWarning,
            stacklevel=2,
        )
    return np.concatenate(parts), pooled
