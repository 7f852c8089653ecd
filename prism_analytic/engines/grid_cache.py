"""Op laws' grids kept across evaluations: one discretisation per (law, spacing, policy).

The analytic engine discretises every op law of a graph on the spacing its graph asks for
(:func:`~prism_analytic.distributions.to_grid`), which on a large job is a third of a warm
prediction. This cache shares them between evaluations (the cross-check, sweeps, a warm call).
A grid is a pure function of its law and spacing, and no code changes a grid in place, so a
cached grid is the one a fresh call would build, bit for bit.

Keys are the law's own ``_key()`` (equal parameters give equal keys) with the spacing and the
policy. A law without parameter keys is keyed by its ``id``; the cache holds the law itself
beside its grid, so that ``id`` cannot be reused by another object while the entry lives. The
cache is bounded by the cells it holds (:data:`MAX_CELLS`, least recently used out first).
Small per-law results (a speed law's tail quantiles: :func:`cached_value`, used by
:func:`~.resolution.resolve_policy`) are kept the same way, at most :data:`MAX_VALUES`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from ..distributions import Distribution, GridDistribution
from ..policy import GridPolicy

__all__ = [
    "MAX_CELLS",
    "MAX_VALUES",
    "cached_grid",
    "cached_value",
    "clear_grid_cache",
    "grid_cache_info",
]

#: Cells held at most, summed over the cached grids (two float64 sides: 64 MiB).
MAX_CELLS = 2**22

#: Other per-law results held at most (:func:`cached_value`).
MAX_VALUES = 256

_VALUES: OrderedDict[Hashable, tuple[Any, Any]] = OrderedDict()
_GRIDS: OrderedDict[Hashable, tuple[Distribution, GridDistribution]] = OrderedDict()
_LOCK = threading.Lock()
_STATE = {"cells": 0, "hits": 0, "misses": 0}


def cached_grid(
    law: Distribution,
    key: Hashable,
    h: float,
    policy: GridPolicy,
    build: Callable[[], GridDistribution],
) -> GridDistribution:
    """The grid of ``law`` on spacing ``h`` under ``policy``: cached, else ``build()``.

    Parameters
    ----------
    law : Distribution
        The op law (held with its grid: an ``id``-based key stays unique while cached).
    key : hashable
        The law's identity (``law._key()``).
    h : float
        The requested spacing.
    policy : GridPolicy
        The grid policy (part of the key: tail mass and cell cap shape the grid).
    build : callable
        Builds the grid on a miss.

    Returns
    -------
    GridDistribution
        The same object for the same key while it is cached.
    """
    full = (key, float(h), policy)
    with _LOCK:
        hit = _GRIDS.get(full)
        if hit is not None:
            _GRIDS.move_to_end(full)
            _STATE["hits"] += 1
            return hit[1]
    grid = build()
    cells = int(grid.lo.size)
    with _LOCK:
        _STATE["misses"] += 1
        if cells > MAX_CELLS or full in _GRIDS:
            return grid
        _GRIDS[full] = (law, grid)
        _STATE["cells"] += cells
        while _STATE["cells"] > MAX_CELLS:
            _, (_, old) = _GRIDS.popitem(last=False)
            _STATE["cells"] -= int(old.lo.size)
    return grid


def cached_value(law: Any, key: Hashable, build: Callable[[], Any]) -> Any:
    """A small result about ``law`` (e.g. its tail quantiles), cached under ``key``, else built.

    ``key`` must identify the law (its ``_key()``) and what is computed; the law is held with
    the value, as in :func:`cached_grid`. At most :data:`MAX_VALUES` entries (least recently
    used out first).
    """
    with _LOCK:
        hit = _VALUES.get(key)
        if hit is not None:
            _VALUES.move_to_end(key)
            return hit[1]
    value = build()
    with _LOCK:
        _VALUES[key] = (law, value)
        while len(_VALUES) > MAX_VALUES:
            _VALUES.popitem(last=False)
    return value


def clear_grid_cache() -> None:
    """Forget every cached grid and value (a cold evaluation: ``validation/bench_workload.py``)."""
    with _LOCK:
        _GRIDS.clear()
        _VALUES.clear()
        _STATE.update(cells=0, hits=0, misses=0)


def grid_cache_info() -> dict[str, int]:
    """Grid entries, other values, cells held, grid hits and misses since the last clear."""
    with _LOCK:
        return {"entries": len(_GRIDS), "values": len(_VALUES), **_STATE}
