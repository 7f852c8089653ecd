"""An exact-in-law reference for the max over many i.i.d. replicas, with a simultaneous band.

Monte Carlo samples a replica group of ``n`` copies copy by copy, so its work grows with ``n``
and its work guard caps the sample (512 copies of a 1F1B 8x32 body: 19,073 steps). When the
step is the barrier over one replica group and the only factors shared between copies are the
step's regimes (a discrete mixture), the copies are i.i.d. given the regime state ``r`` and

    P(step <= x) = sum_r P(r) * F_r(x)^(n - k) * F_r(x / s)^k        (exactly),

with ``F_r`` one copy's law in state ``r`` (its body times its speed factor) and ``k`` copies
``s`` times slower. This module samples ONE copy many times (the Monte Carlo engine on the copy's
own graph: the same semantics), counts at fixed points how many copies exceed them, and
returns ``F_ref`` with a band that contains every error of that estimator:

* the number of copies above a point ``y`` is binomial(N, 1 - F_r(y)); a Clopper-Pearson
  (exact) interval on ``1 - F_r(y)`` maps monotonically to an interval on each factor and
  therefore on ``F_ref``;
* one interval per (sample, scale, point) at level ``alpha / m`` makes the band simultaneous
  over all ``m`` of them (**union bound**, Bonferroni; not a DKW band: DKW's absolute
  error is far too wide in a tail read at the power ``n``);
* between two points the monotone ``F_ref`` lies between the lower end at the left point and
  the upper end at the right one, so the band covers every ``x``, and a KS distance or a
  quantile of the reference gets a guaranteed interval (at the band's confidence);
* a copy's law drawn with unresolved grid tails (:func:`~prism_analytic.engines.montecarlo.
  truncation_error` ``t``) moves ``F^n`` by at most ``n t``: the band is widened by it.

A regime state whose factors scale every op of the copy by one factor ``c`` scales the copy's
makespan by ``c`` (makespans are positively homogeneous), so that state reuses the first
state's sample at the points ``x / c`` instead of drawing its own. A graph whose copies are not
i.i.d. given its regimes (other nodes beside the group, several groups, copies sampled from a
tail pool) is refused with the reason (:class:`NotIidError`, a ``ValueError``).

The reference is an estimate with a band of stated confidence (95% by default), never a bound:
it is checked against closed forms and explicit-replica Monte Carlo in
``tests/test_power_reference.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from scipy import stats

from prism_analytic.engines.montecarlo import (
    MonteCarloSettings,
    estimated_draws,
    pooled_groups,
    sample_step,
    truncation_error,
)
from prism_analytic.graph import OP, PIPELINE, StepGraph

__all__ = [
    "NotIidError",
    "PowerReference",
    "Term",
    "iid_terms",
    "is_iid_max",
    "power_reference",
    "reference_metrics",
    "REFERENCE_DRAWS",
    "MAX_BODIES",
]

#: Random draws per copy graph by default (the work Monte Carlo's guard allows one run); a
#: regime that rescales only part of the copy makes several copy graphs, each sampled so.
REFERENCE_DRAWS = 5 * 10**9
#: At most this many copies per sample by default.
MAX_BODIES = 10**8
#: Copies drawn per chunk (memory stays at a few tens of MB whatever the sample).
CHUNK = 1 << 20
#: The grid starts where the pilot's step CDF reaches this level; below, F_ref is bounded by
#: the band's upper end at the first point.
GRID_FLOOR = 1e-6


class NotIidError(ValueError):
    """The step is not a max over copies that are i.i.d. given discrete shared factors."""


@dataclass(frozen=True)
class Term:
    """One factor of one regime state: ``F_sample(x / scale) ** power``.

    Attributes
    ----------
    sample : int
        Index of the copy graph whose sample estimates this factor.
    scale : float
        The copies' makespan scale in this state (regime factor times slow factor).
    power : int
        Copies of the group that share this law.
    """

    sample: int
    scale: float
    power: int


def _uniform_factor(body: StepGraph, factors: dict[str, float]) -> float | None:
    """The one factor the regime state ``factors`` puts on every op of ``body``, else None.

    The same matching rules as :meth:`StepGraph.conditioned` (an op's kind or tags; a compact
    pipeline's ops also carry ``"pipeline"`` and ``"stage{s}"``).
    """
    seen: set[float] = set()
    for _, d in body.graph.nodes(data=True):
        if d["type"] == OP:
            seen.add(math.prod(f for t, f in factors.items() if t == d["kind"] or t in d["tags"]))
        elif d["type"] == PIPELINE:
            for key in d["spec"].laws:
                own = {d["kind"], *d["tags"], "pipeline", key.split()[1].replace("s", "stage")}
                seen.add(math.prod(f for t, f in factors.items() if t in own))
        else:
            inner = _uniform_factor(d["body"], factors)
            if inner is None:
                return None
            seen.add(inner)
        if len(seen) > 1:
            return None
    return seen.pop() if seen else 1.0


def _copy_graph(d: dict[str, Any]) -> StepGraph:
    """One copy of the group ``d``: its body times its speed draw (the engine's semantics)."""
    g = StepGraph("copy")
    g.add_replica_group("copy", d["body"], 1, speed=d["speed"])
    return g


def iid_terms(
    graph: StepGraph, settings: MonteCarloSettings | None = None
) -> tuple[list[StepGraph], list[tuple[float, list[Term]]], int]:
    """The exact i.i.d. decomposition of ``graph``'s step, or :class:`NotIidError` with why.

    Returns
    -------
    copies : list of StepGraph
        The copy graphs to sample (one per regime state, fewer where a state only rescales).
    states : list of (probability, terms)
        ``P(step <= x) = sum_p p * prod_terms F_{t.sample}(x / t.scale) ** t.power``.
    n : int
        Copies in the group.
    """
    if not isinstance(graph, StepGraph):
        raise TypeError(f"graph must be a StepGraph, got {type(graph).__name__}")
    settings = settings or MonteCarloSettings()
    nodes = list(graph.graph.nodes)
    if len(nodes) != 1 or graph.graph.nodes[nodes[0]]["type"] in (OP, PIPELINE):
        raise NotIidError(
            f"graph {graph.name!r}: the power reference needs a step that is exactly one replica "
            f"group (the barrier over its copies); this graph has nodes {nodes[:5]}"
            f"{' ...' if len(nodes) > 5 else ''}"
        )
    copies: list[StepGraph] = []
    states: list[tuple[float, list[Term]]] = []
    base: tuple[int, float] | None = None  # (sample, its factor) of the uniformly scaled states
    seen: dict[tuple[tuple[str, float], ...], int] = {}  # one sample per distinct state
    raw = graph.graph.nodes[nodes[0]]
    n = int(raw["n"])
    for prob, factors in graph.regime_states():
        d = graph.conditioned(factors).graph.nodes[nodes[0]]
        c = _uniform_factor(raw["body"], factors)
        key = tuple(sorted(factors.items()))
        if c is not None and base is not None:
            index, scale = base[0], c / base[1]  # the same copies, makespan scaled
        elif key in seen:
            index, scale = seen[key], 1.0
        else:
            copy = _copy_graph(d)
            if pooled_groups(copy, settings):
                raise NotIidError(
                    f"graph {graph.name!r}: a copy holds a replica group above Monte Carlo's "
                    f"explicit limit ({settings.explicit_limit:,}); its tail pool's error is an "
                    "estimate, not a binomial count, so the reference would not be exact"
                )
            copies.append(copy)
            index, scale = len(copies) - 1, 1.0
            seen[key] = index
            if c is not None:
                base = (index, c)
        k, slow = d["slow"] if d["slow"] else (0, 1.0)
        terms = [Term(index, scale, n - k)] if n > k else []
        if k:
            terms.append(Term(index, scale * slow, k))
        states.append((prob, terms))
    return copies, states, n


def is_iid_max(graph: StepGraph) -> bool:
    """Whether :func:`power_reference` accepts ``graph`` (:func:`iid_terms` does not refuse)."""
    try:
        iid_terms(graph)
    except NotIidError:
        return False
    return True


@dataclass(frozen=True)
class PowerReference:
    """``P(step <= x)`` with a simultaneous band, from copy samples (see the module docstring).

    Attributes
    ----------
    grid : numpy.ndarray
        The fixed points of the band (chosen before the reference sample was drawn).
    lower, upper : numpy.ndarray
        The band at ``grid``: ``lower <= F_ref(grid) <= upper`` for every point at once, with
        probability at least ``confidence``.
    confidence : float
    bodies : tuple of int
        Copies drawn per copy graph.
    seed : int
    events : int
        Clopper-Pearson intervals in the union bound.
    draws : int
        Random draws the sample took.
    """

    grid: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    confidence: float
    bodies: tuple[int, ...]
    seed: int
    events: int
    draws: int
    n: int
    _states: tuple[tuple[float, tuple[Term, ...]], ...]
    _tails: tuple[np.ndarray, ...]  # sorted copy values above each sample's cut
    _floor: float  # F_ref is evaluated point-wise only from here up

    # ----- point estimate ---------------------------------------------------------------------
    def cdf(self, x: Any) -> np.ndarray:
        """The point estimate ``sum_r p_r prod F_hat(x / s)^k`` (a step function).

        Below the first grid point it is 0: the band bounds the reference by ``upper[0]``
        there (about :data:`GRID_FLOOR`).
        """
        x = np.asarray(x, dtype=float)
        out = np.zeros_like(x)
        for prob, terms in self._states:
            part = np.full_like(x, prob)
            for t in terms:
                tail = self._tails[t.sample]
                above = tail.size - np.searchsorted(tail, x / t.scale, side="right")
                part *= (1.0 - above / self.bodies[t.sample]) ** t.power
            out += part
        return np.where(x < self._floor, 0.0, out)

    @cached_property
    def _jumps(self) -> tuple[np.ndarray, np.ndarray]:
        x = self.jumps()
        return x, self.cdf(x)

    def jumps(self) -> np.ndarray:
        """Every point where :meth:`cdf` can jump (sorted, from the first grid point up)."""
        pts = [self._tails[t.sample] * t.scale for _, ts in self._states for t in ts]
        allp = np.unique(np.concatenate([np.asarray([self._floor]), *pts]))
        return allp[allp >= self._floor]

    def quantile(self, q: float) -> float:
        """The point estimate's q-quantile (the smallest jump where :meth:`cdf` >= q)."""
        x, f = self._jumps
        i = int(np.searchsorted(f, q, side="left"))
        return float(x[min(i, x.size - 1)])

    def moments(self) -> tuple[float, float]:
        """Mean and standard deviation of the point estimate (its mass below the grid at it)."""
        x, f = self._jumps
        w = np.diff(np.concatenate([[0.0], f]))
        w = w / w.sum()
        mean = float(np.dot(w, x))
        return mean, float(math.sqrt(max(np.dot(w, (x - mean) ** 2), 0.0)))

    # ----- guaranteed (at the band's confidence) intervals ----------------------------------
    def quantile_interval(self, q: float) -> tuple[float, float]:
        """An interval that contains the reference's q-quantile wherever the band holds."""
        below = np.nonzero(self.upper < q)[0]  # F_ref(x_i) < q  =>  Q(q) > x_i
        above = np.nonzero(self.lower >= q)[0]  # F_ref(x_j) >= q  =>  Q(q) <= x_j
        lo = float(self.grid[below[-1]]) if below.size else -math.inf
        hi = float(self.grid[above[0]]) if above.size else math.inf
        return lo, hi

    def ks(self, cdf: Callable[[np.ndarray], np.ndarray]) -> tuple[float, float, float]:
        """KS distance of a monotone CDF to the reference: (point estimate, lower, upper).

        The estimate is sup |cdf - F_hat| over the jumps of ``F_hat`` (both one-sided
        limits); [lower, upper] contains sup |cdf - F_ref| wherever the band holds: on a
        cell [x_i, x_{i+1}] both laws are monotone, so the distance is at most
        ``max(cdf(x_{i+1}) - lower_i, upper_{i+1} - cdf(x_i))``, and below the first point and
        above the last the band's ends and 0 or 1 bound it likewise.
        """
        x, fr = self._jumps
        fa = np.asarray(cdf(x), dtype=float)
        left = np.concatenate([[0.0], fr[:-1]])
        est = float(max(np.max(np.abs(fa - fr)), np.max(np.abs(fa - left)), fa[0]))
        g = np.asarray(cdf(self.grid), dtype=float)
        lo = float(max(np.max(g - self.upper), np.max(self.lower - g), 0.0))
        cells = np.maximum(g[1:] - self.lower[:-1], self.upper[1:] - g[:-1])
        hi = float(
            max(
                np.max(cells),
                max(g[0], self.upper[0]),  # (-inf, x_0]: both laws in [0, their value at x_0]
                max(1.0 - g[-1], 1.0 - self.lower[-1]),  # [x_K, inf)
            )
        )
        return est, lo, hi


def _pilot_grid(
    copies: Sequence[StepGraph],
    states: Sequence[tuple[float, Sequence[Term]]],
    pilot: int,
    seed: int,
    size: int,
) -> np.ndarray:
    """Grid points from a pilot sample with its own seed (independent of the reference's)."""
    tails = []
    for i, copy in enumerate(copies):
        ss = np.random.SeedSequence([seed, 7, i]).generate_state(1)[0]
        tails.append(np.sort(sample_step(copy, pilot, settings=MonteCarloSettings(seed=int(ss)))))
    pts = np.unique(np.concatenate([tails[t.sample] * t.scale for _, ts in states for t in ts]))

    def f(x: np.ndarray) -> np.ndarray:
        out = np.zeros_like(x)
        for prob, ts in states:
            part = np.full_like(x, prob)
            for t in ts:
                le = np.searchsorted(tails[t.sample], x / t.scale, side="right")
                part *= (le / pilot) ** t.power
            out += part
        return out

    fp = f(pts)
    lo = pts[min(int(np.searchsorted(fp, GRID_FLOOR)), pts.size - 1)]
    # half the points evenly in probability (bounds the KS cells' slack), half evenly in x
    # (resolves the quantiles in the tails)
    levels = np.linspace(GRID_FLOOR, 1.0, size // 2, endpoint=False)[1:]
    by_p = pts[np.minimum(np.searchsorted(fp, levels), pts.size - 1)]
    # beyond the pilot's largest value by half its range: the pilot's top copies are few, and
    # a band that ends below the step's p99.9 leaves that quantile's interval open above
    by_x = np.linspace(lo, pts[-1] + 0.5 * (pts[-1] - lo), size - size // 2)
    return np.unique(np.concatenate([[lo], by_p, by_x]))


def default_bodies(copy: StepGraph, draws: int = REFERENCE_DRAWS) -> int:
    """Copies per sample within ``draws`` random draws (at most :data:`MAX_BODIES`)."""
    per = max(estimated_draws(copy, 1, MonteCarloSettings()), 1)
    return int(max(1000, min(MAX_BODIES, draws // per)))


def power_reference(
    graph: StepGraph,
    bodies: int | None = None,
    *,
    seed: int = 0,
    confidence: float = 0.95,
    grid: Sequence[float] | None = None,
    grid_size: int = 1000,
    progress: Callable[[int, int], None] | None = None,
) -> PowerReference:
    """Sample one copy ``bodies`` times per copy graph; the step's law with its band.

    Parameters
    ----------
    graph : StepGraph
        One replica group, optionally with regimes (else :class:`NotIidError`).
    bodies : int, optional
        Copies drawn per copy graph (None: :func:`default_bodies`, the copies
        :data:`REFERENCE_DRAWS` random draws allow, at most :data:`MAX_BODIES`).
    seed : int
        Seed of the reference sample (the grid's pilot uses an independent stream of it).
    confidence : float
        Probability that the band holds at every grid point at once (union bound).
    grid : sequence of float, optional
        The band's points (fixed before sampling); None: from a pilot of ``bodies / 50``
        copies (at least 2,000) with its own seed, ``grid_size`` points.
    grid_size : int
        Points of the pilot grid (at least 10).
    progress : callable, optional
        ``progress(done, total)`` in copies.

    Returns
    -------
    PowerReference
    """
    if not (isinstance(confidence, float | int) and 0 < confidence < 1):
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if isinstance(grid_size, bool) or not isinstance(grid_size, int) or grid_size < 10:
        raise ValueError(f"grid_size must be an integer >= 10, got {grid_size!r}")
    settings = MonteCarloSettings()
    copies, states, n = iid_terms(graph, settings)
    if bodies is None:
        bodies = min(default_bodies(c) for c in copies)
    if isinstance(bodies, bool) or not isinstance(bodies, int) or bodies < 100:
        raise ValueError(f"bodies must be an integer >= 100, got {bodies!r}")
    if grid is None:
        pts = _pilot_grid(copies, states, max(2000, bodies // 50), seed, grid_size)
    else:
        pts = np.unique(np.asarray(grid, dtype=float))
        if pts.size < 2 or not np.all(np.isfinite(pts)):
            raise ValueError("grid must hold at least 2 distinct finite points")
    scales = sorted({(t.sample, t.scale) for _, ts in states for t in ts})
    thresholds = {key: pts / key[1] for key in scales}
    counts = {key: np.zeros(pts.size, dtype=np.int64) for key in scales}  # copies <= threshold
    cut = {i: min(thresholds[k][0] for k in scales if k[0] == i) for i in range(len(copies))}
    tails: list[list[np.ndarray]] = [[] for _ in copies]
    total = bodies * len(copies)
    done = 0
    for i, copy in enumerate(copies):
        chunks = -(-bodies // CHUNK)
        for j in range(chunks):
            size = min(CHUNK, bodies - j * CHUNK)
            ss = int(np.random.SeedSequence([seed, 11, i, j]).generate_state(1)[0])
            x = np.sort(sample_step(copy, size, settings=MonteCarloSettings(seed=ss)))
            for key in scales:
                if key[0] == i:
                    counts[key] += np.searchsorted(x, thresholds[key], side="right")
            tails[i].append(x[np.searchsorted(x, cut[i], side="left") :])
            done += size
            if progress is not None:
                progress(done, total)
    events = len(scales) * pts.size
    alpha = (1.0 - confidence) / events
    bands = {}
    for key, le in counts.items():
        above = bodies - le  # binomial(bodies, 1 - F(threshold))
        q_lo = np.where(above == 0, 0.0, stats.beta.ppf(alpha / 2, above, le + 1))
        q_hi = np.where(le == 0, 1.0, stats.beta.ppf(1 - alpha / 2, above + 1, le))
        bands[key] = (1.0 - q_hi, 1.0 - q_lo)
    lower = np.zeros(pts.size)
    upper = np.zeros(pts.size)
    for prob, ts in states:
        lo_part = np.full(pts.size, prob)
        hi_part = np.full(pts.size, prob)
        for t in ts:
            lo_f, hi_f = bands[(t.sample, t.scale)]
            lo_part *= lo_f**t.power
            hi_part *= hi_f**t.power
        lower += lo_part
        upper += hi_part
    # unresolved grid tails of the copy's laws: each copy's law within t, the power within n t
    slack = min(1.0, n * max(truncation_error(c) for c in copies))
    lower = np.clip(lower - slack, 0.0, 1.0)
    upper = np.clip(upper + slack, 0.0, 1.0)
    draws = sum(estimated_draws(c, bodies, settings) for c in copies)
    return PowerReference(
        grid=pts,
        lower=np.maximum.accumulate(lower),
        upper=np.minimum.accumulate(upper[::-1])[::-1],
        confidence=float(confidence),
        bodies=tuple(bodies for _ in copies),
        seed=seed,
        events=events,
        draws=int(draws),
        n=n,
        _states=tuple((p, tuple(ts)) for p, ts in states),
        _tails=tuple(np.sort(np.concatenate(t)) for t in tails),  # chunks: sort them together
        _floor=float(pts[0]),
    )


def _rel(a: float, b: float) -> float:
    return float(a / b - 1.0) if b != 0 else math.inf


def _law_metrics(ref: PowerReference, result: Any, q: dict[float, float]) -> dict[str, float]:
    """KS and relative errors of ``result`` (a result with cdf/quantile/mean/std) vs ``ref``."""
    ks, ks_lo, ks_hi = ref.ks(result.cdf)
    q50, q99, q999 = (float(result.quantile(p)) for p in (0.5, 0.99, 0.999))
    mean, std = ref.moments()
    return {
        "ks": ks,
        "ks_low": ks_lo,
        "ks_high": ks_hi,
        "p50_rel_err": _rel(q50, q[0.5]),
        "p99_rel_err": _rel(q99, q[0.99]),
        "p999_rel_err": _rel(q999, q[0.999]),
        "spread_rel_err": _rel(q99 - q50, q[0.99] - q[0.5]),
        "mean_rel_err": _rel(float(result.mean()), mean),
        "std_rel_err": _rel(float(result.std()), std),
    }


def reference_metrics(
    ref: PowerReference,
    analytic: Any,
    baselines: dict[str, Any],
    bounds: Any | None = None,
    bound_levels: Sequence[float] = (),
) -> dict[str, Any]:
    """The agreement suite's metrics of ``analytic`` and its baselines against ``ref``.

    The keys are those of a Monte Carlo row (``ks``, ``p50_rel_err`` ...; baselines suffixed
    ``_<method>``), with the reference's noise in Monte Carlo's noise columns: ``mc_dkw_95``
    is the largest distance between a KS estimate and its band's interval (analytic and
    baselines), ``mc_pool_ks`` 0, ``p50_mc_ci`` ... the quantile intervals' largest side
    relative to the quantile, and ``in_bounds`` whether the guaranteed bracket meets the
    reference's quantile interval at every ``bound_levels`` (the band's confidence, jointly).
    """
    q = {p: ref.quantile(p) for p in (0.5, 0.99, 0.999)}
    iv = {p: ref.quantile_interval(p) for p in q}
    hw = {p: max(q[p] - iv[p][0], iv[p][1] - q[p]) for p in q}
    row: dict[str, Any] = _law_metrics(ref, analytic, q)
    noise = max(row["ks_high"] - row["ks"], row["ks"] - row["ks_low"])
    for method, res in baselines.items():
        m = _law_metrics(ref, res, q)
        noise = max(noise, m["ks_high"] - m["ks"], m["ks"] - m["ks_low"])
        row.update({f"{k}_{method}": v for k, v in m.items()})
    row.update(
        mc_dkw_95=float(noise),
        mc_pool_ks=0.0,
        **{f"p{f'{p * 100:g}'.replace('.', '')}_mc_ci": hw[p] / abs(q[p]) for p in q},
        spread_mc_ci=(hw[0.5] + hw[0.99]) / (q[0.99] - q[0.5]),
        reference_q={str(p): [iv[p][0], q[p], iv[p][1]] for p in q},
    )
    if bounds is not None:
        ok = True
        for p in bound_levels:
            low, high = bounds.quantile_bracket(p)
            a, b = ref.quantile_interval(p)
            ok &= bool(b >= low and a <= high)
        row["in_bounds"] = ok
    return row
