"""Heavy-tailed parts of a step evaluated on the log lattice (replica bodies, maxima, sums).

The analytic engine's linear grids cannot hold the bulk and the far tail of a heavy-tailed law
at once (a Pareto index below 3, a lognormal sigma above ~1.5): a replica group of ``n`` copies
reads its body at level ``1 - q / n``, beyond the window a linear grid can span, and its
quantiles come back unresolved (``nan``, an infinite bracket side). Where a graph is
series-parallel and its laws need the log lattice by the test :mod:`~prism_analytic.operations`
uses (:func:`~prism_analytic.distributions.log_lattice.sum_needs_log_lattice` over its op laws,
replica bodies included), it is evaluated a second time on the log lattice
(:mod:`~prism_analytic.distributions.log_lattice`): sums octave by octave, maxima as products
of CDFs, a replica group as ``F^n`` (slow copies re-rounded), constants as shifts; the result
is put back on the engine's linear grid with its sandwich kept
(``LogLatticeDistribution._to_grid``). Both answers bracket the exact law; the engine keeps
the one whose widest relative bracket at p50, p90, p95, p99 and p99.9 is narrower (an
unresolved level is infinitely wide), so a graph the linear grid resolves as well is unchanged,
bit for bit.

Not covered (the linear answer stays): irreducible cores, pipeline nodes, replica groups with a
per-copy speed factor, graphs of more than :data:`MAX_OPS` ops (time), and graphs whose linear
answer is already within :data:`GOOD_ENOUGH` times ``rel_width`` at every level.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..distributions import Distribution, GridDistribution, PointMass, point_mass
from ..distributions.log_lattice import (
    MAX_POINTS,
    LogLatticeDistribution,
    log_lattice_iid_max,
    needs_log_lattice,
    points_per_octave,
    to_log_lattice,
)
from ..distributions.log_lattice_build import short_lower_tail
from ..distributions.log_lattice_ops import log_lattice_add, log_lattice_max, log_lattice_scaled
from ..graph import OP, REPLICA, StepGraph
from ..policy import GridPolicy
from .series_parallel import reduce_graph

__all__ = ["LEVELS", "LogLatticeParts", "narrower"]

#: Levels at which the linear and the log-lattice answers are compared.
LEVELS = (0.5, 0.9, 0.95, 0.99, 0.999)

#: Most ops (replica bodies counted once) a graph may have to be evaluated on the log lattice
#: (an addition costs ~65 ms at 4,096 cells per octave). Larger graphs keep the linear answer.
MAX_OPS = 64

#: A linear answer whose widest relative bracket at :data:`LEVELS` is within this many times
#: the policy's ``rel_width`` is kept without trying the log lattice (one of its cells is about
#: ``rel_width`` wide, and every addition costs up to one cell).
GOOD_ENOUGH = 4.0

Law = LogLatticeDistribution | PointMass | None  # None: a zero duration


def _worst_width(d: GridDistribution | LogLatticeDistribution) -> float:
    """The widest bracket at :data:`LEVELS`, relative to the quantile (inf if unresolved)."""
    low, high = d.quantile_bracket(np.array(LEVELS))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = (high - low) / np.maximum(np.maximum(np.abs(low), np.abs(high)), 1e-300)
    return float(np.max(np.where(np.isfinite(rel), rel, np.inf)))


def narrower(linear: GridDistribution, other: GridDistribution) -> GridDistribution:
    """``other`` where its widest relative bracket at :data:`LEVELS` is narrower, else ``linear``.

    Both bracket the same exact law, so either choice keeps the guarantee.
    """
    return other if _worst_width(other) < _worst_width(linear) else linear


def _add(a: Law, b: Law) -> Law:
    if a is None or b is None:
        return a if b is None else b
    if isinstance(a, PointMass) and isinstance(b, PointMass):
        return point_mass(a.value + b.value)
    if isinstance(b, PointMass):  # a constant only shifts the lattice
        return a.shift(b.value)
    if isinstance(a, PointMass):
        return b.shift(a.value)
    return log_lattice_add(a, b)


def _max(a: Law, b: Law) -> Law:
    if a is None and b is None:
        return None
    a, b = (point_mass(0.0) if w is None else w for w in (a, b))
    if isinstance(a, PointMass) and isinstance(b, PointMass):
        return point_mass(max(a.value, b.value))
    if isinstance(a, PointMass):
        a, b = b, a
    if isinstance(b, PointMass):
        if a.support[0] >= b.value:  # max(X, c) = X for X >= c
            return a
        return log_lattice_max([a], floor=b.value)
    return log_lattice_max([a, b])


class LogLatticeParts:
    """The log-lattice evaluation of one analytic run's heavy-tailed graphs (see module doc).

    Parameters
    ----------
    policy : GridPolicy
        The run's grid policy (cells per octave follow from its ``rel_width``).
    """

    def __init__(self, policy: GridPolicy) -> None:
        self.policy = policy
        self._laws: dict[tuple, bool] = {}
        self._scans: dict[int, tuple[StepGraph, bool, int]] = {}
        self._lattices: dict[tuple, LogLatticeDistribution] = {}
        self._results: dict[tuple, tuple[Any, Law | str]] = {}

    def _needs(self, law: Distribution) -> bool:
        """Whether an op law needs the log lattice (cached by its parameters)."""
        key = ("needs", law._key())
        if key not in self._laws:
            self._laws[key] = not isinstance(law, PointMass) and needs_log_lattice(law, self.policy)
        return self._laws[key]

    def _fits(self, law: Distribution) -> bool:
        """Whether the log lattice can hold an op law's lower tail (cached)."""
        key = ("fits", law._key())
        if key not in self._laws:
            self._laws[key] = isinstance(law, PointMass) or short_lower_tail(law, self.policy)
        return self._laws[key]

    def _scan(self, g: StepGraph) -> tuple[bool, int]:
        """(the log lattice can evaluate every node of ``g``, ops in ``g``), structure only."""
        hit = self._scans.get(id(g))
        if hit is None or hit[0] is not g:
            ok, ops = True, 0
            for _, d in g.graph.nodes(data=True):
                if d["type"] == OP:
                    ops += 1
                elif d["type"] == REPLICA and d["speed"] is None:
                    b_ok, b_ops = self._scan(d["body"])
                    ok, ops = ok and b_ok, ops + b_ops + 1
                else:  # a pipeline or a speed mixture: not on the log lattice
                    ok = False
            hit = (g, ok, ops)
            self._scans[id(g)] = hit
        return hit[1], hit[2]

    def _op_laws(self, g: StepGraph) -> list[Distribution]:
        """The op laws of ``g`` and of its replica bodies."""
        out = []
        for _, d in g.graph.nodes(data=True):
            if d["type"] == OP:
                out.append(d["latency"])
            elif d["type"] == REPLICA:
                out.extend(self._op_laws(d["body"]))
        return out

    def _points(self, g: StepGraph, linear: GridDistribution) -> int | None:
        """Cells per octave for ``g`` when it goes on the log lattice, else None.

        ``linear`` is the engine's answer for ``g`` (or for the replica group of ``g``).
        """
        ok, ops = self._scan(g)  # the structure first: it is cheap, quantiles of laws are not
        if not ok or ops > MAX_OPS or self._good(linear):
            return None
        laws = self._op_laws(g)
        # the test operations.convolve uses: one law needs the log lattice and all fit on it
        if not (any(self._needs(law) for law in laws) and all(self._fits(law) for law in laws)):
            return None
        # one cell (1/n of its value) within the policy's rel_width, as the linear grids aim
        # for (4,096 at the default; measured 0.1-0.3 s a prediction, heavy_tail_engine.md)
        fine = 1 << max(math.ceil(math.log2(1.0 / self.policy.rel_width)), 1)
        return min(max(points_per_octave(ops, self.policy), fine), MAX_POINTS)

    def law(self, g: StepGraph, n: int) -> Law | str:
        """``g``'s makespan on the log lattice with ``n`` cells per octave ("core" if not SP)."""
        key = (id(g), n)
        hit = self._results.get(key)
        if hit is not None and hit[0] is g:
            return hit[1]
        out: Law | str = "core"
        if reduce_graph(g.graph, lambda v: None).exact:  # structure only: no arithmetic
            weights: dict[str, Law] = {}
            for v, d in g.graph.nodes(data=True):
                w = self._op(d["latency"], n) if d["type"] == OP else self._group_law(d, n)
                if isinstance(w, str):
                    break
                weights[v] = w
            else:
                out = reduce_graph(g.graph, weights.__getitem__, add=_add, maximum=_max).result()
        self._results[key] = (g, out)
        return out

    def _op(self, law: Distribution, n: int) -> Law:
        if isinstance(law, PointMass):
            return law
        key = (law._key(), n)
        if key not in self._lattices:
            self._lattices[key] = to_log_lattice(law, n, self.policy)
        return self._lattices[key]

    def _group_law(self, d: dict[str, Any], n: int) -> Law | str:
        """A replica group's barrier on the log lattice: F^(copies - k), slow copies beside."""
        body = self.law(d["body"], n)
        if isinstance(body, str) or body is None:
            return body
        k, factor = d["slow"] if d["slow"] else (0, 1.0)
        if isinstance(body, PointMass):  # constant copies: the slowest one
            values = ([body.value] if d["n"] > k else []) + ([body.value * factor] if k else [])
            return point_mass(max(values))
        parts = []
        if d["n"] > k:
            parts.append(log_lattice_iid_max(body, d["n"] - k))
        if k:
            parts.append(log_lattice_iid_max(log_lattice_scaled(body, factor), k))
        return parts[0] if len(parts) == 1 else log_lattice_max(parts)

    def _good(self, linear: GridDistribution) -> bool:
        """Whether ``linear`` is already about as narrow as the log lattice could make it."""
        return _worst_width(linear) <= GOOD_ENOUGH * self.policy.rel_width

    def _linear(self, law: Law | str, linear: GridDistribution) -> GridDistribution:
        if not isinstance(law, LogLatticeDistribution):
            return linear
        return narrower(linear, law._to_grid(linear.h, self.policy))

    def graph(self, g: StepGraph, linear: GridDistribution) -> GridDistribution:
        """``linear`` (the engine's law of ``g``), or the log lattice's where it is narrower."""
        n = self._points(g, linear)
        return linear if n is None else self._linear(self.law(g, n), linear)

    def step(
        self, g: StepGraph, linear: GridDistribution
    ) -> GridDistribution | LogLatticeDistribution:
        """The step law of ``g`` (no regimes): ``linear``, or the log lattice itself if narrower.

        Only the step's own law may stay on the log lattice (it has the same sandwich and
        brackets); inside the graph every part goes back to the linear grid.
        """
        n = None if g.regimes else self._points(g, linear)
        law = None if n is None else self.law(g, n)
        if not isinstance(law, LogLatticeDistribution):
            return linear
        return law if _worst_width(law) < _worst_width(linear) else linear

    def group(self, d: dict[str, Any], linear: GridDistribution) -> GridDistribution:
        """``linear`` (the engine's replica barrier ``d``), or the log lattice's if narrower."""
        n = None if d["speed"] is not None else self._points(d["body"], linear)
        return linear if n is None else self._linear(self._group_law(d, n), linear)
