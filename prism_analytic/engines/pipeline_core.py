"""Makespan of a compact pipeline node, at a cost independent of the microbatch count.

A pipeline schedule is a max-plus linear system: after the warm-up, every block of ``p``
microbatches (a Megatron group) repeats the same pattern of ops, so the makespan grows linearly
in ``m`` with a steady-state increment per block. :func:`pipeline_makespan` evaluates the
canonical form (:func:`~.canonical.canonical_makespan`) directly when the pipeline has at most
:data:`OPS_CAP` ops. A longer one is evaluated at two truncated sizes ``m1 < m2 = m1 + p``
(the largest that fit the cap, and at least two blocks for interleaved schedules so the warm-up
is over) and extrapolated linearly from the last block's increment of the mean and of the
variance. The two truncated schedules begin alike, and their common first generations are
propagated once (:func:`_direct_forked`; narrow pipelines instead share one pass).

Extrapolation needs the schedule past its transient, which a slow first or middle stage makes
longer than two blocks (interleaved 16 x 64, vpp 2, first stage x1.25: the mean was 18 sd low).
Two checks move the sizes up (by about half, :func:`next_sizes`), or send the pipeline to a
whole evaluation: the deterministic schedule must grow at the busiest stage's rate by the
earlier size (:func:`truncation`, :func:`steady_from`), and the engine's own mean increment
must not fall short of that rate by more than :data:`STEADY_SD` sd over the blocks to come
(:func:`short_of_rate`: the stochastic transient outlasts the deterministic one near a tie).
A mean increment *above* the deterministic schedule's (:func:`above_schedule`: near-critical
paths compete, as when stages tie at the busiest rate) is extrapolated only when two blocks
more show the mean and variance increments steady (:func:`drifts`); otherwise the pipeline is
evaluated whole (:func:`next_pair` runs the checks). The presets pass at their first sizes
(increments equal to the rate to 1e-9; the drift check never runs for them). Not seen by any
check: a bend that starts only after the evaluated sizes (validation/results/
truncation_check.md).

Measured on interleaved 16 x m x 8 (normal ops, CV 5%; Clark-Mehler): the mean's increment per
block is 48.03 / 48.08 / 48.10 for m = 16-32 / 32-48 / 48-64, so extrapolating from the first
block is within 0.15% per block. The variance's increments *decrease* (0.0195, 0.0094, 0.0040;
Monte Carlo: 0.016, 0.010, 0.008): the makespan is still crossing over to its linear-variance
regime, and linear extrapolation over-states the pipeline's own variance. That variance is a
small part of a step's (replica speed factors dominate at scale), and the result is labelled
approximate; ``info`` records what was done.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import zip_longest
from typing import Any

import numpy as np

from ..graph.pipeline_spec import law_key
from ..schedules import schedule_levels
from .canonical import (
    MIN_WINDOW,
    WINDOW_PER_WIDTH,
    _Engine,
    _propagate_independent,
    shared_generations,
)

__all__ = [
    "pipeline_makespan",
    "pipeline_mean_path",
    "truncation",
    "first_size",
    "steady_from",
    "bottleneck_rate",
    "short_of_rate",
    "above_schedule",
    "drifts",
    "next_pair",
    "next_sizes",
    "OPS_CAP",
    "clear_caches",
]

#: Largest pipeline evaluated op by op; longer ones are truncated and extrapolated.
OPS_CAP = 2048
#: Largest shortfall of the extrapolated mean below the busiest stage's rate, in the truncated
#: makespan's sd (:func:`pipeline_makespan`): the true makespan grows at least at that rate.
STEADY_SD = 0.01
#: A cap no schedule reaches: the truncated sizes' own mean paths are evaluated whole.
_WHOLE = 2**62
#: Largest sum of the two truncated schedules' residual windows evaluated in one pass.
PAIR_MAX_WINDOW = 512


_COMPONENTS_CACHE: dict[tuple, tuple[float, float, dict]] = {}
_MEAN_PATH_CACHE: dict[tuple, tuple[float, int]] = {}
_TRUNCATION_CACHE: dict[tuple, int | None] = {}


def clear_caches() -> None:
    """Forget cached schedule structures and makespans (for cold-start timing)."""
    _structure.cache_clear()
    _COMPONENTS_CACHE.clear()
    _MEAN_PATH_CACHE.clear()
    _TRUNCATION_CACHE.clear()


def cached_components(key: tuple, spec: Any, method: str, window: int | None) -> tuple:
    """:func:`pipeline_components`, cached by ``key`` (the spec's identity) and the method."""
    full = (key, method, window)
    if full not in _COMPONENTS_CACHE:
        if len(_COMPONENTS_CACHE) > 64:
            _COMPONENTS_CACHE.clear()
        _COMPONENTS_CACHE[full] = pipeline_components(spec, method=method, window=window)
    return _COMPONENTS_CACHE[full]


@lru_cache(maxsize=32)
def _structure(p: int, m: int, schedule: str, vpp: int) -> dict[str, Any]:
    """The canonical engine's view of a schedule's DAG (cached: it depends on sizes only)."""
    order, preds, sizes = schedule_levels(p, m, schedule, vpp)
    bounds = np.cumsum([0, *sizes])
    gens = [np.arange(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    keys = [f"{n[0]} s{n[1]} c{n[3]}" for n in order]
    width = max(len(g) for g in gens)
    n_res = sum(max(len(q) - 1, 0) for q in preds) + len(order)
    # mean path: the ops' predecessors as two index columns (-1: none; at most two per op)
    n_pred = np.fromiter((len(q) for q in preds), dtype=np.intp, count=len(preds))
    if n_pred.size and n_pred.max() > 2:
        raise ValueError(f"schedule ops have at most two predecessors, got {n_pred.max()}")
    start = np.cumsum(n_pred) - n_pred
    flat = np.fromiter((i for q in preds for i in q), dtype=np.intp, count=int(n_pred.sum()))
    pred2 = np.full((len(order), 2), -1, dtype=np.intp)
    pred2[n_pred >= 1, 0] = flat[start[n_pred >= 1]]
    pred2[n_pred >= 2, 1] = flat[start[n_pred >= 2] + 1]
    return {
        "order": order,
        "gens": gens,
        "preds": preds,
        "pred2": pred2,
        "keys": keys,
        "window": int(min(max(MIN_WINDOW, WINDOW_PER_WIDTH * width), n_res)),
    }


def _law_moments(spec: Any, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    table = spec.moments
    mom = np.array([table[k] for k in keys])
    return mom[:, 0], mom[:, 1]


def _factor_model(
    spec: Any, st: dict[str, Any], w_moments: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """Per-op mean, private sd and loadings on the shared factors (microbatches, then stages).

    An op is ``X * W_k * S_s`` (``X`` its own law, ``W_k`` its microbatch's factor, ``S_s`` its
    stage's). Means and variances are exact; the loadings reproduce every covariance between
    two ops exactly except the second-order ``Var W Var S`` of two ops sharing both factors.
    """
    mx, sx = _law_moments(spec, st["keys"])
    w, sf = spec.microbatch_factor, spec.stage_factor
    ew, sw = (1.0, 0.0) if w is None else (float(w.mean()), float(w.std()))
    if w_moments is not None:  # conditioned: each microbatch's factor has its own moments
        mb = np.array([o[2] for o in st["order"]])
        ew, sw = w_moments[mb, 0], w_moments[mb, 1]
    es, ss = (1.0, 0.0) if sf is None else (float(sf.mean()), float(sf.std()))
    mean = mx * ew * es
    var = (sx**2 + mx**2) * (sw**2 + ew**2) * (ss**2 + es**2) - mean**2
    a_w = mx * es * sw
    a_s = mx * ew * ss
    priv = np.sqrt(np.maximum(var - a_w**2 - a_s**2, 0.0))
    n, m, p = mx.size, spec.microbatches, spec.stages
    cols = (m if w is not None else 0) + (p if sf is not None else 0)
    lmat = np.zeros((n, cols))
    rows = np.arange(n)
    order = st["order"]
    if w is not None:
        lmat[rows, [o[2] for o in order]] = a_w
    if sf is not None:
        off = m if w is not None else 0
        lmat[rows, [off + o[1] for o in order]] = a_s
    return mean, priv, lmat


def _direct(
    spec: Any, method: str, window: int | None, w_moments: np.ndarray | None = None
) -> tuple[float, float, np.ndarray]:
    """(mean, variance, loadings on the stage factors) of the canonical-form makespan."""
    st = _structure(spec.stages, spec.microbatches, spec.schedule, spec.vpp)
    m_arr, s_arr, lmat = _factor_model(spec, st, w_moments)
    n_stage = spec.stages if spec.stage_factor is not None else 0
    if method == "independent":
        mu, var, _ = _propagate_independent(st["gens"], st["preds"], m_arr, s_arr, lmat)
        return float(mu), float(var), np.zeros(n_stage)
    w = None if method == "clark" else (st["window"] if window is None else window)
    eng = _Engine(lmat.shape[1], w)
    mu, var, _ = eng.run(st["gens"], st["preds"], m_arr, s_arr, lmat)
    stage_part = eng.sink_loadings[lmat.shape[1] - n_stage :] if n_stage else np.zeros(0)
    return float(mu), float(var), stage_part


def _direct_pair(
    spec: Any, sizes: tuple[int, int], method: str, window: int | None
) -> list[tuple[float, float, np.ndarray]]:
    """:func:`_direct` at two microbatch counts, in one canonical-form pass when plain.

    The two truncated schedules are independent DAGs: propagated side by side, generation by
    generation, their maxima go through the engine in batches twice as large, which halves the
    number of numpy calls. That pays where the calls are small and Python-bound: narrow
    pipelines whose two residual windows together hold at most :data:`PAIR_MAX_WINDOW`
    (llama3-70b, 4 stages x vpp 5, at 1,024 GPUs: 0.48 s -> 0.30 s; gpt3-175b, 8 stages x
    vpp 2: 0.76 s -> 0.54 s; results equal to 1e-12 of a makespan sd). Wider ones are
    arithmetic-bound (llama3-405b, 16 stages x vpp 8: two passes 2.0 s, one pass 2.6 s) and
    keep two passes, which share their common start (:func:`_direct_forked`, exact); specs
    with shared factors (their loadings) and the independent method take two plain passes.
    The one pass keeps both default windows in one ring of residuals
    (their sum), so the longer schedule sees a larger window once the shorter one is done:
    per schedule the two agree to ~1e-4 makespan sd; extrapolated over 500 blocks (1F1B
    4 x 2,048, unequal stages) to 0.044 sd, where both are 1.3-1.4 sd below Monte Carlo (the
    truncation's own error). Checked in tests/engines/test_pipeline_pair.py.
    """
    plain = spec.microbatch_factor is None and spec.stage_factor is None
    parts = [_structure(spec.stages, m, spec.schedule, spec.vpp) for m in sizes]
    own = sum(p["window"] if window is None else window for p in parts)
    if not plain or method == "independent":
        return [_direct(spec.with_microbatches(m), method, window) for m in sizes]
    if own > PAIR_MAX_WINDOW:
        return _direct_forked(spec, sizes, parts, method, window)
    sp = [spec.with_microbatches(m) for m in sizes]
    means, sds = zip(*(_factor_model(s, st)[:2] for s, st in zip(sp, parts, strict=True)))
    offset = len(parts[0]["preds"])
    gens = [
        np.concatenate([g for g in (a, None if b is None else b + offset) if g is not None])
        for a, b in zip_longest(parts[0]["gens"], parts[1]["gens"])
    ]
    preds = list(parts[0]["preds"]) + [[q + offset for q in p] for p in parts[1]["preds"]]
    groups = np.repeat([0, 1], [offset, len(parts[1]["preds"])])
    eng = _Engine(0, None if method == "clark" else own)
    out = eng.run(
        gens, preds, np.concatenate(means), np.concatenate(sds), np.zeros((len(preds), 0)), groups
    )
    return [(float(mu), float(var), np.zeros(0)) for mu, var, _ in out]


def _direct_forked(
    spec: Any, sizes: tuple[int, int], parts: list[dict[str, Any]], method: str, window: int | None
) -> list[tuple[float, float, np.ndarray]]:
    """:func:`_direct` at two microbatch counts of a plain spec, their common start done once.

    A longer schedule begins like a shorter one (the warm-up's forwards are the same ops with
    the same predecessors until the shorter one's steady state or cool-down starts), so the
    canonical-form pass propagates those shared generations once and continues each schedule
    from a copy of the engine (:meth:`~.canonical._Engine.run_forked`). Each schedule goes
    through exactly the computation of its own pass: the results equal two :func:`_direct`
    calls. llama3-405b (16 stages x vpp 8, m = 16 and 32): 128 of 286 generations shared,
    1,928 of 12,288 ops not propagated twice.
    """
    wins = {p["window"] if window is None else window for p in parts}
    if len(wins) > 1:  # different windows: the two engines differ from the first maximum
        return [_direct(spec.with_microbatches(m), method, window) for m in sizes]
    dags = []
    for m, st in zip(sizes, parts, strict=True):
        mean, sd, lmat = _factor_model(spec.with_microbatches(m), st)
        dags.append((st["gens"], st["preds"], mean, sd, lmat))
    eng = _Engine(0, None if method == "clark" else wins.pop())
    out = eng.run_forked(dags, shared_generations(dags))
    return [(float(mu), float(var), np.zeros(0)) for mu, var, _ in out]


def _conditioned_core(spec: Any, method: str, window: int | None) -> Any:
    """``core(w, s) -> (mean, var)``: the canonical core with the factors fixed at ``w``, ``s``.

    Given the factors, op ``(s, k)`` has mean ``m_x W_k S_s`` and sd ``s_x W_k S_s``: a plain
    pipeline whose stage laws are scaled by ``S_s`` and whose microbatches have point-mass
    factors ``W_k``.
    """
    plain = spec._replace(microbatch_factor=None, stage_factor=None)
    base = spec.moments
    stage_of = {k: int(k.split()[1][1:]) for k in base}  # law_key "F s3 c0" -> 3

    def core(w: np.ndarray | None, s: np.ndarray | None) -> tuple[float, float]:
        sp = plain._replace()
        f = {k: 1.0 if s is None else float(s[stage_of[k]]) for k in base}
        sp.__dict__["moments"] = {k: (v[0] * f[k], v[1] * f[k]) for k, v in base.items()}
        w_mom = None if w is None else np.stack([w, np.zeros_like(w)], axis=1)
        mu, var, _ = _direct(sp, method, window, w_mom)
        return mu, var

    return core


def truncation(spec: Any, cap: int = OPS_CAP, periods: int = 1) -> tuple[int, int] | None:
    """The two microbatch counts ``(m1, m2)`` to extrapolate from, or None to evaluate directly.

    The sizes start as the largest that fit ``cap`` (at least two blocks) and grow about 1.5x a
    step (whole blocks) until the deterministic schedule (every op at its mean latency) is in
    its steady state by the earlier size (:func:`steady_from`); when that needs the whole
    pipeline, None.
    ``periods``: the blocks between the sizes the caller extrapolates from (``m2 - periods *
    period`` to ``m2``, as :func:`~.skew_core._block_sizes` takes them); the check covers them.
    """
    if isinstance(periods, bool) or not isinstance(periods, int) or periods < 1:
        raise ValueError(f"periods must be an integer >= 1, got {periods!r}")
    m2 = first_size(spec, cap)
    if m2 is None:
        return None
    p = spec.period
    key = (spec.stages, spec.microbatches, spec.schedule, spec.vpp, m2, periods, _means_key(spec))
    if key not in _TRUNCATION_CACHE:
        if len(_TRUNCATION_CACHE) > 64:
            _TRUNCATION_CACHE.clear()
        _TRUNCATION_CACHE[key] = steady_from(spec, m2, periods)
    m2 = _TRUNCATION_CACHE[key]
    return None if m2 is None else (m2 - p, m2)


def first_size(spec: Any, cap: int = OPS_CAP) -> int | None:
    """The larger truncated size before any steady-state check (None: evaluate whole).

    The largest multiple of the period whose schedule fits ``cap`` ops, at least two periods;
    None when the pipeline fits ``cap`` or is no longer than that size.
    """
    if spec.n_ops <= cap:
        return None
    p = spec.period
    per_mb = 2 * spec.stages * spec.vpp
    m2 = max((cap // per_mb) // p * p, 2 * p)  # two blocks: an interleaved warm-up spans one
    return None if m2 >= spec.microbatches else m2


def _means_key(spec: Any) -> tuple:
    """The ops' mean latencies, by law key (what the deterministic schedule depends on)."""
    return tuple(sorted((k, v[0]) for k, v in spec.moments.items()))


def bottleneck_rate(spec: Any) -> float:
    """The busiest stage's mean work per block: a lower bound on the makespan's growth rate.

    A stage runs its ops one at a time, so the makespan is at least each stage's total work; a
    block of ``period`` microbatches adds one F and one B per chunk to every stage.
    """
    mom = spec.moments
    return spec.period * max(
        sum(mom[law_key(ph, s, c)][0] for ph in ("F", "B") for c in range(spec.vpp))
        for s in range(spec.stages)
    )


def steady_from(spec: Any, m2: int, periods: int = 1) -> int | None:
    """A size ``>= m2`` (whole blocks) from which extrapolation is steady, or None.

    Extrapolating a truncated schedule linearly assumes it is past its transient. In the
    deterministic schedule (ops at their mean latencies: :func:`_mean_path_direct`, exact
    max-plus arithmetic) the makespan's increment per block is eventually the busiest stage's
    work per block (:func:`bottleneck_rate`) whenever that stage is never idle in the steady
    state; it cannot be smaller. A size ``m2`` is taken when the increment from
    ``m2 - j * period`` (``j`` = ``periods``, at most ``m2 / period - 1``) to ``m2`` is at least
    ``j`` times that rate; when it is larger (the schedule's own dependencies set the rate), one
    block more must repeat the increment. Otherwise the sizes grow about 1.5x a step, so the
    size found need not be the first steady one.

    Why: an interleaved pipeline whose *first* stage is the slowest has a transient longer than
    two blocks (16 x 64, vpp 2, first stage x1.25: increments 52.75, 60, 60 per block against a
    rate of 60), and extrapolating from 16 and 32 microbatches put the Gaussian core's mean
    18 sd low (validation/results/core_shape_choice.md, reading D). A near tie (first stage
    x1.02: 48, 48 against 48.96) repeats its increment and only the rate shows the transient.
    """
    p, total = spec.period, spec.microbatches
    rate = bottleneck_rate(spec)
    while m2 < total:
        j = min(periods, m2 // p - 1)
        lo, hi = _mean_path_direct(spec, m2 - j * p)[0], _mean_path_direct(spec, m2)[0]
        tol = 1e-9 * abs(hi)  # round-off of two sums of ~1e4 means
        step = (hi - lo) / j
        if step >= rate - tol:
            if step <= rate + tol or m2 + p >= total:
                return m2
            nxt = _mean_path_direct(spec, m2 + p)[0]
            if abs((nxt - hi) - step) <= tol:
                return m2
        m2 = _grown(m2, p)
    return None


def _grown(m2: int, p: int) -> int:
    """The next larger size to try: about 1.5 times ``m2``, a multiple of the period ``p``.

    Geometric, so that a long transient costs a few times its final evaluation, not its square.
    """
    return m2 + max(p, (m2 // 2) // p * p)


def short_of_rate(spec: Any, sizes: tuple[int, int], d_mean: float, var: float) -> bool:
    """Whether an extrapolation's mean increment falls short of the busiest stage's rate.

    The makespan grows at least as fast as the busiest stage's work (:func:`bottleneck_rate`);
    an engine's mean increment between ``sizes`` below it, times the blocks still to come, by
    more than :data:`STEADY_SD` of the truncated makespan's sd (``var`` its variance) means the
    evaluation is still in its stochastic transient. That outlasts the deterministic one near a
    tie: 16 x 256, vpp 2, middle stage x1.05, Gaussian core: increments 50.30 then 50.40 (the
    rate) per block; extrapolated from the first, mean -0.8 sd and std +25% of the whole.
    """
    m1, m2 = sizes
    blocks = (spec.microbatches - m2) / (m2 - m1)
    rate = _factor_scale(spec) * bottleneck_rate(spec) * (m2 - m1) / spec.period
    return blocks * max(rate - d_mean, 0.0) > STEADY_SD * math.sqrt(max(var, 0.0))


def above_schedule(spec: Any, sizes: tuple[int, int], d_mean: float, var: float) -> bool:
    """Whether an engine's mean increment exceeds the deterministic schedule's (paths compete).

    With one critical cycle the makespan's mean grows, once steady, by the deterministic
    schedule's increment (:func:`_mean_path_direct`, ops at their means): the expected excess of
    the max over its critical path is then a constant. A larger increment, times the blocks
    still to come, by more than :data:`STEADY_SD` of the truncated makespan's sd (``var`` its
    variance) means that the excess still grows: near-critical paths compete, and their excess
    need not grow linearly (stages tied at the busiest rate: ~ sqrt(m), last-passage
    percolation in a strip), so the increments must be shown steady (:func:`drifts`).
    """
    m1, m2 = sizes
    blocks = (spec.microbatches - m2) / (m2 - m1)
    scale = _factor_scale(spec)
    det = scale * (_mean_path_direct(spec, m2)[0] - _mean_path_direct(spec, m1)[0])
    return blocks * max(d_mean - det, 0.0) > STEADY_SD * math.sqrt(max(var, 0.0))


def drifts(spec: Any, sizes: Sequence[int], moments: Sequence[tuple[float, float]]) -> bool:
    """Whether the increments of the engine's mean or variance are not steady over three blocks.

    ``sizes`` are four equally spaced microbatch counts ``m1 < ... < m4``, ``moments`` the
    engine's (mean, variance) at each; the extrapolation under test runs from ``m2`` with the
    first block's increments, over the ``B`` blocks still to come. Two conditions, each to
    :data:`STEADY_SD` of the makespan's sd in the mean and, in the sd (from the variance), to
    :data:`STEADY_SD` of it relative:

    * the first and the second block, each extrapolated, give the same makespan (as the skew
      core's steady-state trial compares its two blocks; an interleaved schedule's increments
      may alternate from block to block, which this bounds);
    * the drift of the increment, measured over two blocks so that an alternation cancels
      (``(d3 - d1) / 2`` per block), accumulated as it would if it persisted over the blocks
      to come (``B (B + 1) / 2`` times): stages tied at the busiest rate make the max's excess
      grow as ~ sqrt(m) (last-passage percolation in a strip), a drift that a one-block
      comparison undercounts (GPipe 8 x 256, one stage x0.8: accepted at 184/192 microbatches,
      mean +0.07 sd of the whole evaluation).
    """
    if len(sizes) != 4 or len(set(np.diff(sizes))) != 1 or sizes[1] <= sizes[0]:
        raise ValueError(f"drifts: sizes must be four equally spaced counts, got {sizes}")
    if len(moments) != 4:
        raise ValueError(f"drifts: moments must be one (mean, variance) per size, got {moments}")
    blocks = (spec.microbatches - sizes[1]) / (sizes[1] - sizes[0])
    mu, var = (np.array(v, dtype=float) for v in zip(*moments, strict=True))
    d_mu, d_var = np.diff(mu), np.diff(var)
    weight = blocks * (blocks + 1) / 2

    def sd(v: float) -> float:
        return math.sqrt(max(v, 0.0))

    base = var[1] + blocks * max(d_var[0], 0.0)
    tol = STEADY_SD * sd(base)
    mean_gaps = (blocks * abs(d_mu[1] - d_mu[0]), weight * abs(d_mu[2] - d_mu[0]) / 2)
    sd_gaps = (
        abs(sd(var[1] + blocks * max(d_var[1], 0.0)) - sd(base)),
        abs(sd(base + weight * (d_var[2] - d_var[0]) / 2) - sd(base)),
    )
    return max(*mean_gaps, *sd_gaps) > tol


def next_pair(
    spec: Any,
    sizes: tuple[int, int],
    moments: Sequence[tuple[float, float]],
    evaluate: Callable[[int], tuple[float, float]],
) -> tuple[int, int] | None:
    """``sizes`` if extrapolating from them is steady; else larger sizes, or None (whole).

    ``moments``: the engine's (mean, variance) at ``sizes``.
    A mean increment short of the busiest stage's rate (:func:`short_of_rate`) is a transient
    still decaying: larger sizes (:func:`next_sizes`). One above the deterministic schedule's
    (:func:`above_schedule`) is accepted only if two blocks more (``evaluate(m)``: the engine's
    mean and variance at ``m`` microbatches) show both increments steady (:func:`drifts`);
    otherwise the pipeline is evaluated whole: competing paths' drift need not decay (tied
    stages: ~ sqrt(m)), and climbing to it through larger sizes cost up to 10x the whole
    evaluation (llama3-405b's 16 x 256 layout, ops at 10x their std: 21 s vs 2.2 s CPU).
    Measured without this check (normal ops, CV 5%, one stage x0.8, against the whole
    evaluation): GPipe 8 x 256 extrapolated from 120/128 microbatches, mean +0.45 sd;
    interleaved 8 x 128, vpp 2, from 56/64, mean -0.12 to -0.18 sd and std +8% to +11%.
    """
    (mu1, _), (mu2, var2) = moments
    if short_of_rate(spec, sizes, mu2 - mu1, var2):
        return next_sizes(spec, sizes)
    if not above_schedule(spec, sizes, mu2 - mu1, var2):
        return sizes
    m1, m2 = sizes
    more = (2 * m2 - m1, 3 * m2 - 2 * m1)
    if more[1] >= spec.microbatches:
        return None
    if drifts(spec, (m1, m2, *more), [*moments, *(evaluate(m) for m in more)]):
        return None
    return sizes


def _factor_scale(spec: Any) -> float:
    """The product of the shared factors' means (they scale every op's mean)."""
    scale = 1.0
    for f in (spec.microbatch_factor, spec.stage_factor):
        scale *= 1.0 if f is None else float(f.mean())
    return scale


def next_sizes(spec: Any, sizes: tuple[int, int]) -> tuple[int, int] | None:
    """The sizes to try after ``sizes`` fell short of the rate (same gap), or None."""
    m1, m2 = sizes
    nxt = _grown(m2, spec.period)
    return None if nxt >= spec.microbatches else (nxt - (m2 - m1), nxt)


def pipeline_makespan(
    spec: Any, *, method: str = "clark-mehler", window: int | None = None, cap: int = OPS_CAP
) -> tuple[float, float, dict[str, Any]]:
    """(mean, std, info) of the makespan of a :class:`~prism_analytic.graph.pipeline.PipelineSpec`.

    Parameters
    ----------
    spec : PipelineSpec
    method, window
        Canonical-form options (:func:`~.canonical.canonical_makespan`).
    cap : int
        Largest op count evaluated directly.

    Returns
    -------
    tuple
        Mean, standard deviation and ``info`` (``ops``, ``evaluated_microbatches`` and, when
        extrapolated, the per-block increments).
    """
    cut = truncation(spec, cap)
    if cut is None:
        mu, var, _ = _direct(spec, method, window)
        info = {"ops": spec.n_ops, "evaluated_microbatches": [spec.microbatches]}
        return mu, math.sqrt(max(var, 0.0)), info
    while True:
        m1, m2 = cut
        res = _direct_pair(spec, (m1, m2), method, window)
        rest = [(r[0], r[1] - r[2] @ r[2]) for r in res]  # without the stage factors' part

        def one_more(m: int) -> tuple[float, float]:
            mu, var, a = _direct(spec.with_microbatches(m), method, window)
            return mu, var - a @ a

        nxt = next_pair(spec, cut, rest, one_more)
        if nxt == cut:
            break
        cut = nxt
        if cut is None:  # still in its transient: evaluate the pipeline whole
            mu, var, _ = _direct(spec, method, window)
            info = {"ops": spec.n_ops, "evaluated_microbatches": [spec.microbatches]}
            return mu, math.sqrt(max(var, 0.0)), info
    blocks = (spec.microbatches - m2) / (m2 - m1)
    d_mean = res[1][0] - res[0][0]
    # Persistent stage factors scale the whole schedule: their loadings grow linearly with the
    # microbatches (variance quadratically); everything else adds variance block by block.
    a1, a2 = res[0][2], res[1][2]
    a = a2 + blocks * (a2 - a1)
    rest1, rest2 = res[0][1] - a1 @ a1, res[1][1] - a2 @ a2
    d_var = rest2 - rest1
    mu = res[1][0] + blocks * d_mean
    var = max(rest2 + blocks * max(d_var, 0.0), 0.0) + float(a @ a)
    info = {
        "ops": spec.n_ops,
        "evaluated_microbatches": [m1, m2],
        "extrapolated_blocks": blocks,
        "mean_increment_per_block": d_mean,
        "variance_increment_per_block": d_var,
    }
    return mu, math.sqrt(var), info


def pipeline_mean_path(spec: Any, cap: int = OPS_CAP) -> tuple[float, int]:
    """(longest path by mean latency, ops on the deepest path), extrapolated like the makespan.

    Cached by sizes and op means: one prediction asks twice (the grid policy, then the grid
    spacing), and the walk over a 12,288-op truncated schedule costs ~0.1 s.
    """
    key = (spec.stages, spec.microbatches, spec.schedule, spec.vpp, cap, _means_key(spec))
    if key not in _MEAN_PATH_CACHE:
        if len(_MEAN_PATH_CACHE) > 64:
            _MEAN_PATH_CACHE.clear()
        _MEAN_PATH_CACHE[key] = _mean_path(spec, cap)
    return _MEAN_PATH_CACHE[key]


def _mean_path_direct(spec: Any, m: int) -> tuple[float, int]:
    """:func:`pipeline_mean_path` at ``m`` microbatches, evaluated whole (cached)."""
    return pipeline_mean_path(spec.with_microbatches(m), _WHOLE)


def _mean_path(spec: Any, cap: int) -> tuple[float, int]:
    """:func:`pipeline_mean_path`, uncached."""

    def direct(sp: Any) -> tuple[float, int]:
        st = _structure(sp.stages, sp.microbatches, sp.schedule, sp.vpp)
        table = sp.moments
        # op by op on Python floats (the same IEEE sums and maxima as numpy's, at a third of
        # the cost of ~14 small numpy calls per generation); index -1: a missing predecessor
        length = [0.0] * (len(st["keys"]) + 1)
        depth = [0] * (len(st["keys"]) + 1)
        for i, (key, (a, b)) in enumerate(zip(st["keys"], st["pred2"].tolist(), strict=True)):
            length[i] = table[key][0] + max(length[a], length[b])
            depth[i] = 1 + max(depth[a], depth[b])
        return float(max(length)), int(max(depth))

    cut = truncation(spec, cap)
    if cut is None:
        return direct(spec)
    m1, m2 = cut
    (l1, d1), (l2, d2) = (_mean_path_direct(spec, m) for m in (m1, m2))
    blocks = (spec.microbatches - m2) / (m2 - m1)
    return l2 + blocks * (l2 - l1), int(round(d2 + blocks * (d2 - d1)))


#: A microbatch-factor mixture component rarer than this is a rare heavy event, conditioned on.
RARE_WEIGHT = 0.05
#: Probability of more heavy microbatches than the conditions evaluated: the count ``K`` whose
#: tail ``P(count > K)`` is below this is the last, and takes that tail's weight (a lower
#: estimate of that rarest remainder only).
RARE_TAIL = 1e-6
#: Placements of ``k >= 2`` heavy microbatches whose mean path is computed (all of them when
#: there are fewer; seeded draws otherwise).
RARE_PLACEMENTS = 4096
#: Placements per count evaluated with the canonical-form core (anchors of the noise's bias
#: and sd as functions of the mean path).
RARE_ANCHORS = 8
#: Seed of the placement draws (fixed: the engine is deterministic).
RARE_SEED = 20261207


def rare_events(spec: Any) -> tuple[Any, Any, float] | None:
    """(base law, heavy law, heavy probability) when the microbatch factor is a rare mixture."""
    from ..distributions.mixture import Mixture

    w = spec.microbatch_factor
    if not isinstance(w, Mixture) or len(w.components) != 2:
        return None
    i = int(np.argmin(w.weights))
    q = float(w.weights[i])
    if q > RARE_WEIGHT:
        return None
    return w.components[1 - i], w.components[i], q


def pipeline_components(
    spec: Any, *, method: str = "clark-mehler", window: int | None = None, cap: int = OPS_CAP
) -> tuple[list[tuple[float, float, float]], dict[str, Any]]:
    """The makespan as a mixture ``[(weight, mean, std)]`` of canonical-form normals.

    A microbatch factor that is a two-point mixture with a rare heavy component (weight at most
    :data:`RARE_WEIGHT`, e.g. "this microbatch is 3x slow with probability 1%") is handled by
    conditioning on the heavy events (:func:`rare_components`): the number ``k`` of heavy
    microbatches (binomial weights, exact), and for each ``k`` where they fall.
    Other shared factors (per-microbatch work, per-stage speed) are conditioned on by
    quasi-Monte-Carlo over the factor vector (:func:`~.pipeline_factors.factor_components`: a
    mixture of normals, one per Sobol point). Plain pipelines, and conditioned ones too long to
    evaluate directly, are one normal from :func:`pipeline_makespan`.
    """
    rare = rare_events(spec)
    has_factor = spec.microbatch_factor is not None or spec.stage_factor is not None
    if rare is None and has_factor and truncation(spec, cap) is None:
        from .pipeline_factors import factor_components

        return factor_components(spec, _conditioned_core(spec, method, window))
    if rare is None or truncation(spec, cap) is not None:
        mu, sd, info = pipeline_makespan(spec, method=method, window=window, cap=cap)
        return [(1.0, mu, sd)], info
    return rare_components(spec, rare, method, window)


def rare_counts(m: int, q: float) -> list[tuple[int, float]]:
    """``[(k, weight)]``: heavy-microbatch counts ``0..K`` with their binomial probabilities.

    ``K`` is the first count with ``P(count > K) <`` :data:`RARE_TAIL`; it also takes that
    remaining tail's probability, so the weights sum to 1.
    """
    from scipy import stats

    out = []
    for k in range(m + 1):
        tail = float(stats.binom.sf(k, m, q))
        if tail < RARE_TAIL or k == m:
            out.append((k, float(stats.binom.pmf(k, m, q)) + tail))
            return out
        out.append((k, float(stats.binom.pmf(k, m, q))))
    return out


def rare_placements(m: int, k: int) -> np.ndarray:
    """``(n, k)`` placements of ``k`` heavy microbatches among ``m``, equally likely each.

    Every placement when there are at most :data:`RARE_PLACEMENTS`; otherwise that many seeded
    uniform draws (each a uniformly random ``k``-subset).
    """
    from itertools import combinations
    from math import comb

    if comb(m, k) <= RARE_PLACEMENTS:
        return np.array(list(combinations(range(m), k)), dtype=np.int64).reshape(-1, k)
    rng = np.random.default_rng([RARE_SEED, m, k])
    return np.sort(rng.random((RARE_PLACEMENTS, m)).argsort(axis=1)[:, :k], axis=1)


def rare_components(
    spec: Any, rare: tuple[Any, Any, float], method: str, window: int | None
) -> tuple[list[tuple[float, float, float]], dict[str, Any]]:
    """:func:`pipeline_components` of a pipeline whose microbatch factor has a rare heavy part.

    Condition on the number ``k`` of heavy microbatches (:func:`rare_counts`) and on where they
    fall. ``k = 0`` and each single heavy microbatch are evaluated with the canonical-form core.
    For ``k >= 2`` the placements' makespans spread widely (1F1B 8x32, three 3x microbatches:
    mean paths from 173 to 261 s, against a noise sd of ~3 s), so the law of the mean path
    ``L`` over the placements (:func:`rare_placements`, an exact max-plus recursion each) carries
    the tail; the core runs at :data:`RARE_ANCHORS` placements at equally spaced ranks of ``L``,
    and its bias ``E[M] - L`` and sd are interpolated in ``L`` to every placement (the same
    split as :mod:`~.pipeline_factors`). An estimate, checked against Monte Carlo in
    tests/engines/test_rare_stall_pipeline.py and ``prism agreement`` (``pipe_straggler_8x32``).
    """
    from .pipeline_factors import mean_paths, merge_components

    base, heavy, q = rare
    m = spec.microbatches
    mom = np.array([[float(c.mean()), float(c.std())] for c in (base, heavy)])

    def run(heavies: Sequence[int]) -> tuple[float, float]:
        w_mom = np.repeat(mom[:1], m, axis=0)
        w_mom[list(heavies)] = mom[1]
        mu, var, _ = _direct(spec, method, window, w_mom)
        return mu, math.sqrt(max(var, 0.0))

    counts = rare_counts(m, q)
    comps: list[tuple[float, float, float]] = []
    for k, weight in counts:
        if k <= 1:
            places = [()] if k == 0 else [(i,) for i in range(m)]
            comps += [(weight / len(places), *run(p)) for p in places]
            continue
        places = rare_placements(m, k)
        w = np.full((len(places), m), mom[0, 0])
        np.put_along_axis(w, places, mom[1, 0], axis=1)
        paths = mean_paths(spec, w, None)
        order = np.argsort(paths, kind="stable")
        picks = order[np.linspace(0, len(order) - 1, min(RARE_ANCHORS, len(order))).astype(int)]
        at = np.array([run(places[i]) for i in picks])
        anchor_l = paths[picks]
        bias = np.interp(paths, anchor_l, at[:, 0] - anchor_l)
        sd = np.interp(paths, anchor_l, at[:, 1])
        comps += merge_components(np.full(len(paths), weight / len(paths)), paths + bias, sd)
    info = {
        "ops": spec.n_ops,
        "evaluated_microbatches": [m],
        "conditioned_on": (
            f"rare heavy microbatches: 0..{counts[-1][0]} of {m} (binomial weights), "
            "where they fall (0 and 1 exactly; more: mean paths of the placements, the core "
            f"at {RARE_ANCHORS} anchors per count)"
        ),
        "heavy_probability": q,
        "weight_two_or_more": float(sum(w for k, w in counts if k >= 2)),
        "components": len(comps),
    }
    return comps, info
