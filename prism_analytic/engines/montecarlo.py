"""Monte Carlo ground truth: exact semantics by sampling, vectorised and reproducible.

* Every sample is a whole step: op latencies drawn fresh, collectives one draw per instance,
  regimes one state per step, replica copies independent.
* Replica groups up to ``explicit_limit`` copies are sampled copy by copy. Larger groups whose
  copy is a single op are sampled exactly as F^{-1}(U^(1/n)). Other large groups use
  symmetric sampling from a pool: ``pool_size`` draws of one copy's duration are sorted
  and the maximum of ``n`` draws *from that pool* is sampled directly as the pool's order
  statistic at U^(1/n). That is exact for the pool's empirical law and converges to the true
  law as the pool grows; the pool's own sampling error then dominates, a KS error of about
  sqrt(n / pool_size) / e (:func:`pool_ks_error`), which results report.
* Seeds: samples come in fixed blocks of :data:`BLOCK` with seeds spawned from one
  ``SeedSequence``; pools have seeds keyed by their position in the graph. Results therefore
  do not depend on how blocks are grouped into chunks or which executor runs them.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from .._checks import check_count
from ..graph import OP, StepGraph

__all__ = ["sample_step", "BLOCK", "MonteCarloSettings", "pool_ks_error", "pooled_groups"]

BLOCK = 8192


@dataclass(frozen=True)
class MonteCarloSettings:
    """How replica groups are sampled (see the module docstring)."""

    explicit_limit: int = 1024
    pool_size: int = 1_000_000
    seed: int = 0

    def __post_init__(self) -> None:
        check_count(self.explicit_limit, "explicit_limit", minimum=1)
        check_count(self.pool_size, "pool_size", minimum=2)
        check_count(self.seed, "seed", minimum=0)


def _single_op(body: StepGraph) -> bool:
    return len(body) == 1 and next(iter(body.graph.nodes(data="type")))[1] == OP


def pool_ks_error(n: int, pool_size: int) -> float:
    """KS error (95th percentile) that a pool of ``pool_size`` copies puts on the max of ``n``.

    The pool's tail probability near 1/n has relative error about sqrt(n / pool_size); through
    F^n the sup distance of the pooled law has median ~0.66 and 95th percentile ~1.05 times
    sqrt(n / pool_size) (measured by simulation in tests/test_montecarlo.py).
    """
    return float(1.05 * np.sqrt(n / pool_size))


def pooled_groups(graph: StepGraph, settings: MonteCarloSettings, path: str = "") -> list[dict]:
    """The replica groups that Monte Carlo samples from a pool, with their KS error."""
    out = []
    for name, d in graph.graph.nodes(data=True):
        if d["type"] == OP:
            continue
        single = _single_op(d["body"]) and d["speed"] is None
        if d["n"] > settings.explicit_limit and not single:
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


class _Sampler:
    def __init__(self, settings: MonteCarloSettings) -> None:
        self.settings = settings
        self._pools: dict[str, np.ndarray] = {}

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
                dur = d["latency"]._sample(size, rng)
            else:
                dur = self.group(d, size, rng, f"{path}/{name}")
            finish[name] = start + dur
        sinks = [n for n in order if g.graph.out_degree(n) == 0]
        return np.max([finish[s] for s in sinks], axis=0)

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
                v = self.graph(d["body"], size, rng, path) * factor
                if d["speed"] is not None:
                    v = v * d["speed"]._sample(size, rng)
                np.maximum(best, v, out=best)
            return best
        body = d["body"]
        if _single_op(body) and d["speed"] is None:
            # One op per copy: its exact quantile function gives the max of n draws exactly.
            (only,) = body.graph.nodes
            latency = body.graph.nodes[only]["latency"]
            with np.errstate(divide="ignore"):
                p_up = -np.expm1(np.log(rng.random(size)) / count)
            return latency._isf(p_up) * factor
        pool = self.pool(d, factor, path)
        p = pool.size
        # index of the max of `count` draws from the sorted pool: P - 1 - floor(P (1 - U^(1/n)))
        t = -np.expm1(np.log(rng.random(size)) / count)
        idx = p - 1 - np.minimum(np.floor(p * t).astype(np.int64), p - 1)
        return pool[idx]

    def pool(self, d: dict[str, Any], factor: float, path: str) -> np.ndarray:
        key = f"{path}|{factor!r}"
        if key not in self._pools:
            seed = np.random.SeedSequence([self.settings.seed, zlib.crc32(key.encode())])
            rng = np.random.default_rng(seed)
            n = self.settings.pool_size
            v = self.graph(d["body"], n, rng, path) * factor
            if d["speed"] is not None:
                v = v * d["speed"]._sample(n, rng)
            self._pools[key] = np.sort(v)
        return self._pools[key]

    def group(
        self, d: dict[str, Any], size: int, rng: np.random.Generator, path: str
    ) -> np.ndarray:
        k, factor = d["slow"] if d["slow"] else (0, 1.0)
        out = self.copies(d, d["n"] - k, 1.0, size, rng, path) if d["n"] > k else None
        if k:
            slow = self.copies(d, k, factor, size, rng, path + "#slow")
            out = slow if out is None else np.maximum(out, slow)
        return out


def _run_block(
    graph: StepGraph, sampler: _Sampler, seed: np.random.SeedSequence, size: int
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    states = list(graph.regime_states())
    if len(states) == 1:
        return sampler.graph(
            graph.conditioned(states[0][1]) if graph.regimes else graph, size, rng, ""
        )
    probs = np.array([p for p, _ in states])
    which = rng.choice(len(states), size=size, p=probs / probs.sum())
    out = np.empty(size)
    for i, (_, factors) in enumerate(states):
        mask = which == i
        if mask.any():
            out[mask] = sampler.graph(graph.conditioned(factors), int(mask.sum()), rng, f"r{i}")
    return out


def _run_blocks(args: tuple[StepGraph, MonteCarloSettings, list[tuple[Any, int]]]) -> np.ndarray:
    graph, settings, blocks = args
    sampler = _Sampler(settings)  # pools are keyed by position, so every task rebuilds the same
    return np.concatenate([_run_block(graph, sampler, seed, size) for seed, size in blocks])


def sample_step(
    graph: StepGraph,
    samples: int,
    *,
    settings: MonteCarloSettings | None = None,
    executor: Executor | None = None,
    blocks_per_task: int = 4,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Draw ``samples`` step times of ``graph`` (seconds), reproducibly.

    Parameters
    ----------
    graph : StepGraph
    samples : int
        Number of sampled steps.
    settings : MonteCarloSettings, optional
        Seed and replica-group sampling options.
    executor : concurrent.futures.Executor, optional
        Runs groups of blocks (e.g. a ProcessPoolExecutor or a dask ``Client.get_executor()``);
        by default everything runs in this process. The result does not depend on it.
    blocks_per_task : int
        Blocks of :data:`BLOCK` samples handed to one task.
    progress : callable, optional
        Called as ``progress(done, total)`` (in samples) as blocks or tasks finish.
    """
    settings = settings or MonteCarloSettings()
    samples = check_count(samples, "samples", minimum=1, maximum=10**9)
    blocks_per_task = check_count(blocks_per_task, "blocks_per_task", minimum=1)
    if not isinstance(graph, StepGraph):
        raise TypeError(f"graph must be a StepGraph, got {type(graph).__name__}")
    graph.validate()
    n_blocks = -(-samples // BLOCK)
    seeds = np.random.SeedSequence(settings.seed).spawn(n_blocks)
    sizes = [min(BLOCK, samples - i * BLOCK) for i in range(n_blocks)]
    blocks = list(zip(seeds, sizes))
    tasks = [
        (graph, settings, blocks[i : i + blocks_per_task])
        for i in range(0, n_blocks, blocks_per_task)
    ]
    parts: list[np.ndarray] = []
    if executor is None:
        sampler = _Sampler(settings)  # one sampler: pools are built once in this process
        for seed, size in blocks:
            parts.append(_run_block(graph, sampler, seed, size))
            if progress is not None:
                progress(sum(p.size for p in parts), samples)
    else:
        for part in executor.map(_run_blocks, tasks):
            parts.append(part)
            if progress is not None:
                progress(sum(p.size for p in parts), samples)
    return np.concatenate(parts)
