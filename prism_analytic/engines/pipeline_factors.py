"""Shared pipeline factors by conditioning: quasi-Monte-Carlo over the factors, a core inside.

A :class:`~prism_analytic.graph.pipeline_spec.PipelineSpec` may carry a per-microbatch work
factor ``W_k`` (every op of microbatch ``k`` scaled by it) and a persistent per-stage speed
factor ``S_s`` (every op of stage ``s``). Given the factors, the pipeline is a plain pipeline
whose op ``(s, k)`` has mean ``m_x W_k S_s`` and sd ``s_x W_k S_s``; the makespan's law is the
mixture of these conditional laws over the factors' joint law. Loading the factors into one
Gaussian canonical form instead (the engine's former approach) misses how strongly they break
the lattice's ties (the makespan is a max over paths, very non-linear in the factors).

The mixture is evaluated with scrambled-Sobol points of the factor vector (randomised
quasi-Monte Carlo; a fixed seed, so results are deterministic): half of them as drawn (the
bulk, below the first stratum), and a quarter in each of two tail strata of the projection of
the normal scores on the direction along which the mean path grows fastest (fitted on the
bulk), each with its exact probability, so that the far tail the replica maximum reads is
resolved. Inside each condition:

* the conditional **mean path** ``L(f)`` (the longest path by mean latency) is computed exactly
  by a max-plus recursion, vectorised over all points. It carries most of the factors'
  effect (its spread over the factors is 7-25x the noise left inside one condition on the
  agreement's 8x32 rows), so each conditional law is nearly a step and the mixture is only as
  accurate as the quadrature of ``L``'s law: it is evaluated at many points
  (:func:`path_points`, up to 2**18; 2**15 left a KS error of ~0.005, measured in
  ``validation/results/factor_conditioning.md``);
* the noise of the ops adds ``E[M | f] - L(f)`` (a positive "jitter bias": a max over
  near-critical paths) and ``Var(M | f)``, at fewer points (:func:`default_points`, a subset).
  The cheap independent-input Clark recursion (vectorised over those points) measures how tied
  each condition is; a Clark-Mehler evaluation of the canonical core at *anchor* conditions
  (at probability-weighted levels of the independent-input bias) calibrates it (piecewise-
  linear least-squares fits of the Clark-Mehler bias and sd on the independent-input ones),
  with as many anchors as the fits' own standard errors ask for (:func:`anchored_laws`). Bias and
  variance are then averaged in equal-count bins of ``L`` and interpolated at every point.

The result is a mixture of normals (merged into at most ``MERGE_BINS`` by mean). It is an
estimate (checked against op-by-op Monte Carlo in tests/engines/test_pipeline_factors.py and
``prism agreement``), not a bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special
from scipy.stats import qmc

from ..distributions import Distribution
from .canonical import _clark

__all__ = [
    "NormalMixture",
    "normal_scores",
    "factor_points",
    "conditional_moments",
    "factor_components",
    "factor_design",
    "N_POINTS",
    "default_points",
    "N_ANCHORS",
    "anchor_levels",
    "anchor_tolerance",
    "anchored_laws",
    "line_cdf_effect",
    "mean_paths",
    "path_points",
]

#: Default points of :func:`normal_scores` (a power of two for Sobol balance). The engine's
#: levels are :func:`path_points` and :func:`default_points`: with the mean path at 2**15
#: points only, the quadrature of its law left KS ~0.003-0.005 on the
#: agreement's 8x32 factor rows.
N_POINTS = 32768
#: Fewest points for a long pipeline (bulk quantiles stay within ~1% of Monte Carlo's).
MIN_POINTS = 8192
#: Ops x points evaluated by the vectorised recursions (about 2 s on one core).
CELL_BUDGET = 2**24
#: Anchors (conditions evaluated with the Clark-Mehler core) the adaptive rule starts from.
N_ANCHORS = 8
#: Ops x anchors the adaptive rule may evaluate (8x32: 64 anchors, ~1.3 s; 4x8: 512).
ANCHOR_BUDGET = 2**15
#: The anchor lines may move the mixture's CDF by ``ANCHOR_KS_RATE / sqrt(points)`` at one
#: standard error (:func:`anchor_tolerance`): the order of the quadrature's own error.
ANCHOR_KS_RATE = 0.5
#: Grid points on which :func:`line_cdf_effect` takes its supremum.
EFFECT_GRID = 1024
#: Sobol scrambling seed (fixed: the engine is deterministic).
SEED = 20261130
#: Largest (ops x conditions) block held at once by the vectorised recursions.
MAX_CELLS = 2**20
#: Ops x points of the mean-path-only level (a max-plus recursion: ~0.7 s for 8x32 x 2**18).
PATH_CELL_BUDGET = 2**27
#: Most points of the mean-path level (the factors' quantiles cost ~0.1 us per point and factor).
MAX_PATH_POINTS = 2**18
#: Equal-count bins of the mean path in which the core's bias and variance are averaged.
PATH_BINS = 64
#: Largest share of the conditional variance that the bias's scatter about its binned line
#: may have for the binning to be used (otherwise the core's points keep their own values).
#: The agreement's 8x32 rows with per-microbatch factors of CV 50% / 15% / 5%: 0.1% / 1.9% /
#: 9.8%, binned; against 1e6 Monte Carlo samples KS 0.0048 -> 0.0013 (CV 50%) and 0.0044 ->
#: 0.0037 (CV 5%). With per-stage speeds: 73% (66% with the anchor scatter in the variance,
#: ``validation/results/factor_anchors.md``), not binned (binned: KS 0.0080, not: 0.0072).
BIN_SCATTER_MAX = 0.5
#: Cuts (normal-score units) of the tail strata along the mean path's gradient direction.
STRATA = (2.0, 3.5)
#: Mean bins the conditional normals are merged into (moment-matched) before gridding.
MERGE_BINS = 256
#: Standard deviations beyond which a component's CDF is taken as exactly 0 or 1 (1e-19).
WINDOW_SD = 9.0


def default_points(spec: Any) -> int:
    """Quasi-Monte-Carlo points of the core's level for a pipeline (a power of two).

    As many as ops x points within :data:`CELL_BUDGET` allow (which bounds the vectorised
    recursions' cost; 2**15 for 8x32), at least :data:`MIN_POINTS` and at most
    :func:`path_points` (all of them on a small pipeline: 4x8 gets 2**18, no binning).
    """
    fit = CELL_BUDGET // max(spec.n_ops, 1)
    return int(min(path_points(spec), max(MIN_POINTS, 2 ** int(np.log2(max(fit, 1))))))


def normal_scores(spec: Any, n: int = N_POINTS, seed: int = SEED) -> np.ndarray:
    """``(n, dim)`` scrambled-Sobol standard-normal scores, one column per factor.

    Columns are the microbatch factors (if any), then the stage factors (if any).
    """
    m, p = spec.microbatches, spec.stages
    dim = (m if spec.microbatch_factor is not None else 0) + (
        p if spec.stage_factor is not None else 0
    )
    if dim == 0:
        raise ValueError("factor_points: the pipeline has no microbatch_factor or stage_factor")
    u = qmc.Sobol(dim, scramble=True, seed=seed).random(n)
    return special.ndtri(np.clip(u, 0.5 / n, 1 - 0.5 / n))  # Sobol may hit 0: keep it finite


def factor_points(spec: Any, z: np.ndarray) -> tuple[Any, Any]:
    """The factors at normal scores ``z``: ``(W (n, m) or None, S (n, p) or None)``.

    Each coordinate is the factor law's quantile of ``Phi(z)``, so scores drawn from the
    standard normal give draws of the exact joint law (independent factors).
    """
    n, dim = z.shape
    m, p = spec.microbatches, spec.stages
    wf, sf = spec.microbatch_factor, spec.stage_factor
    u = special.ndtr(z)
    w = s = None
    if wf is not None:
        w = np.asarray(wf.quantile(u[:, :m].ravel()), dtype=float).reshape(n, m)
    if sf is not None:
        s = np.asarray(sf.quantile(u[:, dim - p :].ravel()), dtype=float).reshape(n, p)
    return w, s


def _op_scale(spec: Any, w: Any, s: Any, n: int) -> np.ndarray:
    """``(ops, n)`` factor product of every op under each condition."""
    arr = spec.arrays
    scale = np.ones((arr["law_index"].size, n))
    if w is not None:
        scale *= w.T[arr["microbatch"]]
    if s is not None:
        scale *= s.T[arr["stage"]]
    return scale


def conditional_moments(spec: Any, w: Any, s: Any) -> dict[str, np.ndarray]:
    """Per condition: mean path ``L`` and independent-input Clark mean and variance.

    Parameters
    ----------
    spec : PipelineSpec
    w, s : numpy.ndarray or None
        Factor values, ``(n, microbatches)`` and ``(n, stages)`` (as from :func:`factor_points`).

    Returns
    -------
    dict
        ``path``, ``ind_mean``, ``ind_var``: arrays of shape ``(n,)``.
    """
    arr = spec.arrays
    n = (w if w is not None else s).shape[0]
    ops = arr["law_index"].size
    step = max(1, MAX_CELLS // ops)  # conditions per chunk, bounding memory
    out = {"path": np.empty(n), "ind_mean": np.empty(n), "ind_var": np.empty(n)}
    for a in range(0, n, step):
        b = min(n, a + step)
        part = _chunk(spec, None if w is None else w[a:b], None if s is None else s[a:b])
        for k, v in part.items():
            out[k][a:b] = v
    return out


def _chunk(spec: Any, w: Any, s: Any) -> dict[str, np.ndarray]:
    """:func:`conditional_moments` for one block of conditions."""
    arr = spec.arrays
    n = (w if w is not None else s).shape[0]
    mom = np.array([spec.moments[k] for k in arr["law_keys"]])
    scale = _op_scale(spec, w, s, n)
    mx = mom[arr["law_index"], 0][:, None] * scale
    vx = (mom[arr["law_index"], 1][:, None] * scale) ** 2
    del scale
    ops = mx.shape[0]
    # row `ops` is the finish of a missing predecessor: 0 with no variance
    path = np.zeros((ops + 1, n))
    mu = np.zeros((ops + 1, n))
    var = np.zeros((ops + 1, n))
    preds = arr["preds"]
    for gen in arr["gens"]:
        a, b = preds[gen, 0], preds[gen, 1]
        path[gen] = mx[gen] + np.maximum(path[a], path[b])
        two = b >= 0
        ma, va = mu[a], var[a]
        if two.any():
            out = _clark(mu[a[two]], mu[b[two]], var[a[two]], var[b[two]], 0.0)
            ma[two], va[two] = out[4], out[5]
        mu[gen] = ma + mx[gen]
        var[gen] = va + vx[gen]
    sink = _sink(arr)
    return {"path": path[sink], "ind_mean": mu[sink], "ind_var": var[sink]}


def mean_paths(spec: Any, w: Any, s: Any) -> np.ndarray:
    """The mean path ``L`` (longest path by mean latency) under each condition, ``(n,)``.

    The max-plus part of :func:`conditional_moments` alone (the same sums and maxima, so the
    same values), at a fraction of its cost: no Clark moments.
    """
    arr = spec.arrays
    n = (w if w is not None else s).shape[0]
    ops = arr["law_index"].size
    mean = np.array([spec.moments[k][0] for k in arr["law_keys"]])[arr["law_index"]]
    p0, p1 = arr["preds"][:, 0], arr["preds"][:, 1]
    sink = _sink(arr)
    out = np.empty(n)
    step = max(1, 2 * MAX_CELLS // ops)
    for a in range(0, n, step):
        b = min(n, a + step)
        mx = mean[:, None] * _op_scale(
            spec, None if w is None else w[a:b], None if s is None else s[a:b], b - a
        )
        path = np.zeros((ops + 1, b - a))  # row `ops`: a missing predecessor's finish, 0
        for gen in arr["gens"]:
            path[gen] = mx[gen] + np.maximum(path[p0[gen]], path[p1[gen]])
        out[a:b] = path[sink]
    return out


def _sink(arr: dict[str, Any]) -> int:
    """The schedule's unique sink (1F1B and interleaved end with the first stage's last B)."""
    n = arr["law_index"].size
    has_succ = np.zeros(n, dtype=bool)
    p = arr["preds"]
    has_succ[p[p >= 0]] = True
    sinks = np.flatnonzero(~has_succ)
    if sinks.size != 1:
        raise ValueError(f"pipeline schedule has {sinks.size} sinks; expected one")
    return int(sinks[0])


def factor_design(spec: Any, n: int, seed: int = SEED) -> dict[str, Any]:
    """The tail-stratified quasi-Monte-Carlo design over the factors.

    ``n`` scrambled-Sobol normal scores: the untilted half keeps its points below the first
    cut of :data:`STRATA` (along the direction in which the mean path grows fastest, fitted on
    that half), each further quarter is moved into one tail stratum along that direction.

    Returns
    -------
    dict
        ``z`` (normal scores), ``weight`` (probabilities, summing to 1), ``w`` and ``s`` (the
        factors, :func:`factor_points`) and ``tilt_norm`` (the fitted gradient's norm).
    """
    z = normal_scores(spec, n, seed)
    half = n // 2
    # Pilot on the untilted half: the direction along which the mean path grows fastest.
    w0, s0 = factor_points(spec, z[:half])
    path0 = mean_paths(spec, w0, s0)
    zc = z[:half] - z[:half].mean(axis=0)
    grad = np.linalg.lstsq(zc, path0 - path0.mean(), rcond=None)[0]
    norm = float(np.linalg.norm(grad))
    direction = grad / norm if norm > 0 else np.full(z.shape[1], z.shape[1] ** -0.5)
    # Stratified for the far tail (the replica maximum reads F at 1 - 1e-5): the projection
    # ``a . z`` on that direction is exactly standard normal, so it is cut at STRATA; the untilted
    # half keeps its points below the first cut (weight Phi(cut) in all), each quarter after it is
    # moved into one tail stratum along the direction (its exact probability in all).
    proj = z @ direction
    cuts = (-np.inf, *STRATA, np.inf)
    prob = np.diff(special.ndtr(np.array(cuts)))
    weight = np.zeros(n)
    keep = proj[:half] < cuts[1]
    weight[:half][keep] = prob[0] / keep.sum()
    parts = np.array_split(np.arange(half, n), len(STRATA))
    for k, idx in enumerate(parts):
        lo, hi = special.ndtr(cuts[k + 1]), special.ndtr(cuts[k + 2])
        target = special.ndtri(lo + (hi - lo) * special.ndtr(proj[idx]))
        z[idx] += (target - proj[idx])[:, None] * direction[None, :]
        weight[idx] = prob[k + 1] / idx.size
    index = np.flatnonzero(weight > 0)
    # the bulk's factors are the pilot's (the quantiles are elementwise): only the moved
    # tail points are evaluated again
    w1, s1 = factor_points(spec, z[half:])
    w = None if w0 is None else np.concatenate([w0, w1])[index]
    s = None if s0 is None else np.concatenate([s0, s1])[index]
    z, weight = z[index], weight[index]
    return {
        "z": z,
        "weight": weight / weight.sum(),
        "w": w,
        "s": s,
        "tilt_norm": norm,
        "n": n,
        "index": index,
        "strata": [(0, half), *((int(i[0]), int(i[-1]) + 1) for i in parts)],
    }


def path_points(spec: Any) -> int:
    """Points of the mean-path level (a power of two, at least :data:`MIN_POINTS`).

    As many as :data:`PATH_CELL_BUDGET` ops x points allow, at most :data:`MAX_PATH_POINTS`.
    """
    fit = PATH_CELL_BUDGET // max(spec.n_ops, 1)
    cap = min(MAX_PATH_POINTS, 2 ** int(np.log2(max(fit, 1))))
    return int(max(MIN_POINTS, cap))


def factor_components(
    spec: Any,
    core: Any,
    *,
    n: int | None = None,
    n_path: int | None = None,
    anchors: int | None = None,
    seed: int = SEED,
    anchor_seed: int = SEED,
) -> tuple[list[tuple[float, float, float]], dict[str, Any]]:
    """The makespan as a mixture ``[(weight, mean, std)]`` over quasi-random factor conditions.

    Two levels. The factors move the makespan mostly through the mean path ``L(f)``, whose
    spread over the factors is many times the op noise left inside one condition (8x32 with
    per-microbatch factors of CV 50%: 27 against 1.1), so each conditional law is nearly a
    step and the mixture's CDF is only as accurate as its quadrature of ``L``'s law: at 2**15
    points, KS ~0.005 against Monte Carlo (``validation/results/factor_conditioning.md``). So
    ``L`` is computed exactly (a max-plus recursion, cheap) at ``n_path`` points of the
    design, and the core's bias ``E[M | f] - L`` and variance (:func:`anchored_laws`, the
    costly part) at ``n`` of them (the first points of each stratum's Sobol block), then
    taken as functions of ``L`` (:func:`_binned`): probability-weighted means of the bias in
    :data:`PATH_BINS` bins of equal point counts, linearly interpolated in ``L`` between the
    bins' weighted mean ``L`` (constant beyond the end bins); as the variance, each bin's
    weighted mean of ``sd**2`` plus the squared distance of each point's bias from that
    interpolated line, interpolated the same way. So the bias that ``L`` does not explain
    moves into the conditional variance. At the core's own points this keeps the core level's
    mixture mean and variance up to the interpolation only (exactly where the line is straight
    across a bin); measured, not guaranteed: on the agreement's r90 / r99 8x32 rows the mean
    moved by -2.5e-4 / -1.8e-5 of a conditional sd and the sd by +8.1e-5 / +1.3e-6
    (relative), the conditional variance growing by the scatter it took in (+2.85% / +0.24%;
    ``validation/results/factor_anchors.md``); tested in ``tests/engines/test_factor_anchors.py``.
    At the mean path's points the mixture then follows ``L``'s finer quadrature, which is the
    purpose of the level. Where that scatter passes
    :data:`BIN_SCATTER_MAX` of the conditional variance (``L`` does not explain the bias:
    per-stage speeds), and where ``n_path == n`` (small pipelines), every core point keeps its
    own values and the mixture is over the core's points only.

    Parameters
    ----------
    spec : PipelineSpec
        A pipeline with a ``microbatch_factor`` and/or ``stage_factor``.
    core : callable
        ``core(w_row, s_row) -> (mean, var)``: the canonical core evaluated in one condition
        (used at the anchors).
    n, n_path, anchors, seed, anchor_seed
        Points of the core level (default :func:`default_points`, at most ``n_path``) and of
        the mean-path level (default :func:`path_points`, at least ``n``), Clark-Mehler anchor
        conditions (default None: the error-driven rule of :func:`anchored_laws`, with the
        tolerance :func:`anchor_tolerance` of ``n_path``; an int: that fixed count, the rule
        before 2026-12-01), Sobol seeds of the design and of the anchors' levels.

    Returns
    -------
    tuple
        The components and an ``info`` dict.
    """
    n_path = path_points(spec) if n_path is None else n_path
    n = min(n_path, default_points(spec)) if n is None else n
    n_path = max(n, n_path)
    # the anchors may add an error of the order of the finest level's quadrature error
    tol = anchor_tolerance(n_path)
    design = factor_design(spec, n_path, seed)
    w, s, weight = design["w"], design["s"], design["weight"]
    binned = False
    if n_path > n:
        # the core's level: the first n / n_path of each stratum's Sobol block (balanced),
        # each block's subset carrying the block's whole probability
        idx = design["index"]
        sub = np.zeros(idx.size, dtype=bool)
        w_sub = np.zeros(idx.size)
        for lo, hi in design["strata"]:
            block = (idx >= lo) & (idx < hi)
            part = block & (idx < lo + (hi - lo) * n // n_path)
            sub |= part
            w_sub[part] = weight[block].sum() / max(part.sum(), 1)
        w_c = None if w is None else w[sub]
        s_c = None if s is None else s[sub]
        mean_c, sd_c, a_info = anchored_laws(
            spec, w_c, s_c, w_sub[sub], core, anchors, tol=tol, seed=anchor_seed
        )
        path = mean_paths(spec, w, s)
        bias, var, scatter = _binned(path[sub], mean_c - path[sub], sd_c, path, w_sub[sub])
        binned = scatter <= BIN_SCATTER_MAX
        if binned:
            mean, sd = path + bias, np.sqrt(var)
        else:  # the bias depends on more than L: the core's points, each with its own values
            w, s, weight, mean, sd = w_c, s_c, w_sub[sub], mean_c, sd_c
    else:
        mean, sd, a_info = anchored_laws(
            spec, w, s, weight, core, anchors, tol=tol, seed=anchor_seed
        )
        scatter = None
    comps = merge_components(weight, mean, sd)
    info = {
        "conditioned_on": "shared factors (scrambled Sobol points, tail-stratified)",
        "tilt_direction_norm": design["tilt_norm"],
        "factor_points": int(weight.size),
        "core_points": int(n if n_path > n else weight.size),
        "binned_on_mean_path": binned,
        "bias_scatter_share": scatter,
        **a_info,
        "components": len(comps),
    }
    return comps, info


def _binned(
    x: np.ndarray, bias: np.ndarray, sd: np.ndarray, at: np.ndarray, weight: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Bias and variance as functions of the mean path ``x``, interpolated at ``at``.

    Probability-weighted means over :data:`PATH_BINS` bins of ``x`` of equal point counts
    (the tail strata hold many points of little weight, so the tail gets its own bins),
    interpolated linearly between the bins' mean ``x`` and constant beyond. The variance is
    the bin's mean of ``sd**2`` plus the bias's scatter about the interpolated line. The third
    value is that scatter's share of the conditional variance (probability-weighted by
    ``weight``): how much of the bias ``L`` does not explain.
    """
    bins = max(1, min(PATH_BINS, x.size))
    groups = np.array_split(np.argsort(x, kind="stable"), bins)
    # probability-weighted means: at one L, a tail stratum's points (moved along one
    # direction) need not be tied like the bulk's
    xc = np.array([np.average(x[g], weights=weight[g]) for g in groups])
    bc = np.array([np.average(bias[g], weights=weight[g]) for g in groups])
    d2 = (bias - np.interp(x, xc, bc)) ** 2
    r2 = d2 + sd**2
    vc = np.array([np.average(r2[g], weights=weight[g]) for g in groups])
    share = float(weight @ d2) / max(float(weight @ sd**2), 1e-300)
    return np.interp(at, xc, bc), np.interp(at, xc, vc), share


def anchor_levels(count: int, seed: int = SEED) -> np.ndarray:
    """Probability levels of the first ``count`` anchors: a scrambled 1-D Sobol sequence.

    Nested (a larger count keeps the smaller count's levels, so the adaptive rule re-uses every
    anchor it has evaluated) and stratified: the first ``2**j`` levels put one level in each
    interval ``[i / 2**j, (i + 1) / 2**j)``. Deterministic for a given ``seed``.
    """
    if count < 1:
        raise ValueError(f"anchor count must be >= 1, got {count}")
    pow2 = 1 << max(count - 1, 0).bit_length()
    return qmc.Sobol(1, scramble=True, seed=seed).random(pow2)[:count, 0]


def anchored_laws(
    spec: Any,
    w: Any,
    s: Any,
    weight: np.ndarray,
    core: Any,
    anchors: int | None = None,
    *,
    tol: float | None = None,
    budget: int | None = None,
    seed: int = SEED,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Conditional mean and sd of the makespan at every condition, by the anchor curves.

    The mean path ``L`` is exact; the independent-input Clark recursion's bias ``E - L`` and
    sd are mapped onto the ``core``'s by least-squares fits at anchor conditions, picked at
    probability-weighted levels of the independent-input bias (so that the tail strata do not
    crowd them). The core's bias is not a function of the independent-input one (on the
    agreement's r90 8x32 row it scatters about a line by ~0.1 s, 0.13 of a conditional sd), so
    the fit is an estimate from the anchors and its noise shrinks only as ``1/sqrt(anchors)``: a
    fixed 8 left the mixture's CDF off by ~0.003 there.

    With ``anchors=None`` (the engine's rule) the count is driven by that error:
    :data:`N_ANCHORS` to start, then doubled (nested :func:`anchor_levels`, every evaluated
    anchor kept) while the first-order change of the mixture's CDF that one standard error of
    each fit makes (:func:`line_cdf_effect`) exceeds ``tol`` (default
    :func:`anchor_tolerance` of the conditions' count), or until ops x anchors would pass
    ``budget`` (default :data:`ANCHOR_BUDGET`; ``info`` says so). The fits are continuous
    piecewise-linear (:func:`segments` pieces, more as anchors are added, since a single line
    misses the core's curvature), the bias's with ``L`` as a further linear regressor (with
    per-stage speeds the bias left over moves with ``L``; as independent scatter it doubled
    the spread error); their standard error is the least-squares one, which counts
    the anchors' noise but not a misfit of the pieces' shape. The bias fit's residual scatter
    is added to every condition's variance, so that the mixture keeps the spread of the core's
    own points about the fit. ``anchors=k`` evaluates ``k`` anchors at the levels ``(i + 1/2)
    / k`` and fits single lines (the earlier rule, no scatter added; kept for the tests).

    Returns
    -------
    tuple
        ``(mean, sd, info)``; ``info``: ``anchors``, ``anchor_cdf_effect`` (the estimate the rule
        compares with ``tol``), ``anchor_tol``, ``anchor_scatter_sd`` (the bias fit's residual
        sd) and ``anchor_budget_reached``.
    """
    bad = anchors is not None and (isinstance(anchors, bool) or int(anchors) != anchors)
    if bad or (anchors is not None and anchors < 1):
        raise ValueError(f"anchors must be an integer >= 1 or None (the rule), got {anchors!r}")
    n = weight.size
    cm = conditional_moments(spec, w, s)
    path, ind_bias = cm["path"], cm["ind_mean"] - cm["path"]
    ind_sd = np.sqrt(cm["ind_var"])
    order = np.argsort(ind_bias, kind="stable")
    cum = np.cumsum(weight[order]) / weight.sum()
    values: dict[int, tuple[float, float]] = {}

    def evaluate(levels: np.ndarray) -> np.ndarray:
        pick = order[np.minimum(np.searchsorted(cum, levels), n - 1)]
        for j in pick:
            if int(j) not in values:
                mu_j, var_j = core(None if w is None else w[j], None if s is None else s[j])
                values[int(j)] = (mu_j - path[j], np.sqrt(max(var_j, 0.0)))
        return pick

    if anchors is not None:
        pick = evaluate((np.arange(anchors) + 0.5) / anchors)
        a_bias = np.array([values[int(j)][0] for j in pick])
        a_sd = np.array([values[int(j)][1] for j in pick])
        bias, _, _ = _fit(ind_bias[pick], a_bias, ind_bias)
        sd = np.maximum(_fit(ind_sd[pick], a_sd, ind_sd)[0], 0.0)
        info = {"anchors": int(anchors), "anchor_rule": f"fixed ({anchors})"}
        return path + bias, sd, info
    tol = anchor_tolerance(n) if tol is None else float(tol)
    budget = ANCHOR_BUDGET if budget is None else int(budget)
    cap = max(N_ANCHORS, budget // max(spec.n_ops, 1))
    count = N_ANCHORS
    while True:
        evaluate(anchor_levels(count, seed))
        pick = np.fromiter(values, dtype=int)
        a_bias = np.array([values[int(j)][0] for j in pick])
        a_sd = np.array([values[int(j)][1] for j in pick])
        # L as a further regressor: the bias that the independent-input one misses moves with
        # L (one slow stage rules the lattice: fewer ties), so it is not independent scatter
        cov_l = (path[pick], path)
        bias, se_bias, scatter_bias = _spline_fit(ind_bias[pick], a_bias, ind_bias, weight, cov_l)
        sd_line, se_sd, _ = _spline_fit(ind_sd[pick], a_sd, ind_sd, weight)
        # the anchors' own scatter about the lines stays in each condition's variance
        sd = np.sqrt(np.maximum(sd_line, 0.0) ** 2 + scatter_bias**2)
        effect = line_cdf_effect(weight, path + bias, sd, se_bias, se_sd)
        if effect <= tol or 2 * count > cap:
            break
        count *= 2
    info = {
        "anchors": len(values),
        "anchor_rule": "adaptive",
        "anchor_cdf_effect": effect,
        "anchor_tol": tol,
        "anchor_scatter_sd": scatter_bias,
        "anchor_budget_reached": bool(effect > tol),
    }
    return path + bias, sd, info


def anchor_tolerance(points: int) -> float:
    """CDF error the anchor lines may add: :data:`ANCHOR_KS_RATE` ``/ sqrt(points)``.

    The quadrature over the factors has an error of that order (at 2**15 points 0.0031-0.0048
    against 1e6 Monte Carlo samples, 0.56-0.87 / sqrt(points); ``validation/results/
    factor_conditioning.md``), so lines within it add no error of a larger order.
    """
    if points < 1:
        raise ValueError(f"points must be >= 1, got {points}")
    return ANCHOR_KS_RATE / float(np.sqrt(points))


def line_cdf_effect(
    weight: np.ndarray, mean: np.ndarray, sd: np.ndarray, e_mean: np.ndarray, e_sd: np.ndarray
) -> float:
    """First-order change of a normal mixture's CDF when its means and sds move by ``e``.

    ``sup_x sum_j weight_j phi(z_j) (e_mean_j + |z_j| e_sd_j) / sd_j``, ``z_j = (x - mean_j) /
    sd_j``: every component moved in the direction that adds (an upper estimate of the first
    order). Evaluated on :data:`EFFECT_GRID` points, with the components pooled in
    :data:`MERGE_BINS` equal-width bins of their means (bin weight, weighted mean of the
    mean, the rms sd, weighted mean errors), which keeps it cheap.
    """
    bins = MERGE_BINS
    edges = np.linspace(mean.min(), mean.max(), bins + 1)
    idx = np.clip(np.searchsorted(edges, mean, side="right") - 1, 0, bins - 1)
    wb = np.bincount(idx, weight, bins)
    keep = wb > 0
    wk = wb[keep]

    def avg(v: np.ndarray) -> np.ndarray:
        return np.bincount(idx, weight * v, bins)[keep] / wk

    mu, sig = avg(mean), np.sqrt(avg(sd**2))
    em, es = avg(np.abs(e_mean)), avg(np.abs(e_sd))
    sig = np.maximum(sig, 1e-12 * max(float(np.abs(mu).max()), 1.0))
    lo, hi = float((mu - 6 * sig).min()), float((mu + 6 * sig).max())
    x = np.linspace(lo, hi, EFFECT_GRID)[:, None]
    z = (x - mu) / sig
    dens = np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi) / sig
    return float(np.max(dens * (em + np.abs(z) * es) @ (wk / wk.sum())))


def merge_components(
    w: np.ndarray, mu: np.ndarray, sd: np.ndarray, bins: int | None = None
) -> list[tuple[float, float, float]]:
    """Merge normals whose means share one of ``bins`` equal-width bins, matching moments.

    Each bin's components become one normal with the bin's weight, mean and variance (the law
    of total variance), so the mixture's mean and variance are unchanged; equal-width bins keep
    the extreme components (the tail) apart. Used to make the mixture cheap to grid.
    """
    bins = MERGE_BINS if bins is None else bins
    edges = np.linspace(mu.min(), mu.max(), bins + 1)
    idx = np.clip(np.searchsorted(edges, mu, side="right") - 1, 0, bins - 1)
    wb = np.bincount(idx, w, bins)
    keep = wb > 0
    m1 = np.bincount(idx, w * mu, bins)[keep] / wb[keep]
    m2 = np.bincount(idx, w * (sd**2 + mu**2), bins)[keep] / wb[keep]
    sdb = np.sqrt(np.maximum(m2 - m1**2, 0.0))
    return [(float(a), float(b), float(c)) for a, b, c in zip(wb[keep], m1, sdb, strict=True)]


def segments(anchors: int) -> int:
    """Linear pieces of the anchor curve for ``anchors`` anchors: ``ceil(anchors**(1/5))``.

    The rate at which a piecewise-linear least-squares fit balances its squared misfit
    (``~ width**4``) against its noise (``~ 1 / (anchors width)``): 8-32 anchors get 2
    pieces, 64-128 get 3, 256-512 get 4. A single line misses the core's curvature: on the
    agreement's r90 4x8 row its residuals by decile of the independent-input bias ran +0.019,
    -0.008 ... +0.018 s (5-10 standard errors; conditional sd 0.39 s).
    """
    return max(1, int(np.ceil(anchors**0.2 - 1e-9)))


def _spline_fit(
    x: np.ndarray,
    y: np.ndarray,
    at: np.ndarray,
    weight: np.ndarray,
    covariate: tuple[np.ndarray, np.ndarray] | None = None,
    pieces: int | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Continuous piecewise-linear least-squares fit of ``y`` on ``x``, at ``at``.

    ``pieces`` pieces (default :func:`segments` of the anchors' count), their knots at the
    probability-weighted quantiles of ``at`` (``weight``). Returns the fitted values at ``at``,
    their ordinary least-squares standard errors (``r sqrt(a (X'X)^-1 a')``, ``r`` the residual
    sd on ``anchors - parameters`` degrees of freedom) and ``r``. Fewer pieces where the anchors
    cannot carry them. ``covariate``: a further regressor, entering linearly, as ``(values at
    the anchors, values at at)``.
    """
    fit, se, r, _ = _spline_model(x, y, at, weight, covariate, pieces)
    return fit, se, r


def _spline_model(
    x: np.ndarray,
    y: np.ndarray,
    at: np.ndarray,
    weight: np.ndarray,
    covariate: tuple[np.ndarray, np.ndarray] | None,
    pieces: int | None,
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """:func:`_spline_fit` and the fit's leave-one-out prediction error sum (PRESS).

    PRESS is ``sum (e_i / (1 - h_ii))**2`` (``e`` the residuals, ``h`` the hat matrix's
    diagonal): each anchor's error when the fit is made without it, in closed form. Infinite
    where an anchor alone fixes a parameter (``h_ii = 1``) or no degree of freedom is left.
    """
    k = x.size
    pieces = segments(k) if pieces is None else max(1, int(pieces))
    while pieces > 1 and k <= pieces + 2:
        pieces -= 1
    order = np.argsort(at, kind="stable")
    cum = np.cumsum(weight[order]) / weight.sum()
    cuts = np.arange(1, pieces) / pieces
    knots = np.unique(at[order][np.minimum(np.searchsorted(cum, cuts), at.size - 1)])
    scale = max(float(np.ptp(at)), 1e-300)
    centre = float(knots[0]) if knots.size else float(np.average(at, weights=weight))

    if covariate is not None:
        c_mid = float(np.average(covariate[1], weights=weight))
        c_scale = max(float(np.ptp(covariate[1])), 1e-300)

    def basis(v: np.ndarray, c: np.ndarray | None) -> np.ndarray:
        cols = [np.ones_like(v), (v - centre) / scale]
        cols += [np.maximum(v - t, 0.0) / scale for t in knots]
        if c is not None:
            cols.append((c - c_mid) / c_scale)
        return np.stack(cols, axis=1)

    xb = basis(x, None if covariate is None else covariate[0])
    coef, *_ = np.linalg.lstsq(xb, y, rcond=None)
    resid = y - xb @ coef
    rank = int(np.linalg.matrix_rank(xb))
    dof = k - rank
    r = float(np.sqrt(resid @ resid / dof)) if dof > 0 else 0.0
    ab = basis(at, None if covariate is None else covariate[1])
    cov = np.linalg.pinv(xb.T @ xb)
    se = r * np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", ab, cov, ab), 0.0))
    lever = np.einsum("ij,jk,ik->i", xb, cov, xb)
    free = 1.0 - lever
    press = float(np.sum((resid / free) ** 2)) if dof > 0 and free.min() > 1e-9 else np.inf
    return ab @ coef, se, r, press


def _fit(x: np.ndarray, y: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Least-squares line of ``y`` on ``x`` at ``at``, its standard error there, residual sd.

    A constant (the mean) if ``x`` is flat. The standard error is the ordinary least-squares
    one of the fitted value, ``r sqrt(1/k + (at - mean x)**2 / Sxx)``, with ``r`` the residual
    sd (``k - 2`` degrees of freedom; ``k - 1`` for a constant; 0 with too few anchors).
    """
    k = x.size
    if np.ptp(x) <= 1e-12 * max(np.abs(x).max(), 1e-300):
        r = float(np.std(y, ddof=1)) if k > 1 else 0.0
        return np.full_like(at, float(np.mean(y))), np.full_like(at, r / np.sqrt(k)), r
    slope, icpt = np.polyfit(x, y, 1)
    resid = y - (slope * x + icpt)
    r = float(np.sqrt(resid @ resid / (k - 2))) if k > 2 else 0.0
    xm = float(x.mean())
    sxx = float(((x - xm) ** 2).sum())
    se = r * np.sqrt(1.0 / k + (at - xm) ** 2 / sxx)
    return slope * at + icpt, se, r


class NormalMixture(Distribution):
    """A finite mixture of many normals, with vectorised CDF and survival function.

    The engine's form of :func:`factor_components`' output (thousands of components), so that
    it is gridded once instead of component by component.

    Parameters
    ----------
    weights, means, stds : array_like
        One entry per component; weights are normalised, stds must be >= 0 (0: a point mass).
    """

    def __init__(self, weights: Any, means: Any, stds: Any) -> None:
        w = np.asarray(weights, dtype=float).ravel()
        mu = np.asarray(means, dtype=float).ravel()
        sd = np.asarray(stds, dtype=float).ravel()
        if not (w.size == mu.size == sd.size) or w.size == 0:
            raise ValueError("weights, means and stds must be non-empty and of equal length")
        if (w < 0).any() or w.sum() <= 0 or (sd < 0).any() or not np.isfinite(mu).all():
            raise ValueError("weights must be >= 0 with a positive sum, stds >= 0, means finite")
        self.w, self.mu, self.sd = w / w.sum(), mu, sd
        self.is_exact = True

    def __repr__(self) -> str:
        return f"NormalMixture({self.w.size} components, mean {self._mean():.6g})"

    @property
    def support(self) -> tuple[float, float]:  # noqa: D102 - normals: the whole line
        if (self.sd == 0).all():
            return float(self.mu.min()), float(self.mu.max())
        return -np.inf, np.inf

    def _z(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        flat = x.reshape(-1, 1)
        safe = np.where(self.sd > 0, self.sd, 1.0)
        z = (flat - self.mu) / safe
        # a point mass: -inf below its value, +inf at and above it
        return np.where(self.sd > 0, z, np.where(flat >= self.mu, np.inf, -np.inf)), x.shape

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        return self._tails(x, upper=False)

    def _sf(self, x: np.ndarray) -> np.ndarray:
        return self._tails(x, upper=True)

    def _tails(self, x: np.ndarray, upper: bool) -> np.ndarray:
        """CDF (or SF): dense for a few points, by component windows on a sorted lattice."""
        x = np.asarray(x, dtype=float)
        sign = -1.0 if upper else 1.0
        if x.size < 64 or not (np.diff(x.ravel()) >= 0).all():
            z, shape = self._z(x)
            return (special.ndtr(sign * z) @ self.w).reshape(shape)
        # A sorted lattice (gridding): a component's CDF is 0 or 1 to within 1e-19 beyond
        # WINDOW_SD of its mean, so only the points inside its window are evaluated.
        flat = x.ravel()
        step = np.zeros(flat.size + 1)  # difference array of the components' constant parts
        val = np.zeros(flat.size)  # the components' values inside their windows
        for w, mu, sd in zip(self.w, self.mu, self.sd, strict=True):
            if sd == 0:  # a point mass: cdf steps at mu (inclusive), sf just above it
                lo = hi = np.searchsorted(flat, mu, side="right" if upper else "left")
            else:
                lo = np.searchsorted(flat, mu - WINDOW_SD * sd, side="left")
                hi = np.searchsorted(flat, mu + WINDOW_SD * sd, side="right")
                val[lo:hi] += w * special.ndtr(sign * (flat[lo:hi] - mu) / sd)
            if upper:  # 1 below the window
                step[0] += w
                step[lo] -= w
            else:  # 1 above it
                step[hi] += w
        out = np.cumsum(step)[:-1] + val
        return np.clip(out, 0.0, 1.0).reshape(x.shape)

    def _mean(self) -> float:
        return float(self.w @ self.mu)

    def _var(self) -> float:
        return float(self.w @ (self.sd**2 + self.mu**2) - self._mean() ** 2)

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        k = rng.choice(self.w.size, size=size, p=self.w)
        return self.mu[k] + self.sd[k] * rng.standard_normal(size)

    def _key(self) -> Any:
        return ("NormalMixture", self.w.tobytes(), self.mu.tobytes(), self.sd.tobytes())
