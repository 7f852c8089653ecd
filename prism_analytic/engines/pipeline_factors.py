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
  ``validation/factor_conditioning_study.py``);
* the noise of the ops adds ``E[M | f] - L(f)`` (a positive "jitter bias": a max over
  near-critical paths) and ``Var(M | f)``, at fewer points (:func:`default_points`, a subset).
  The cheap independent-input Clark recursion (vectorised over those points) measures how tied
  each condition is; a Clark-Mehler evaluation of the canonical core at a few *anchor*
  conditions (at probability-weighted quantiles of the independent-input bias) calibrates it
  (a least-squares line of the Clark-Mehler bias and sd on the independent-input ones). Bias
  and variance are then averaged in equal-count bins of ``L`` and interpolated at every point.

The result is a mixture of normals (merged into at most ``MERGE_BINS`` by mean). It is an
estimate (checked against op-by-op Monte Carlo in tests/test_pipeline_factors.py and
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
    "default_anchors",
    "mean_paths",
    "path_points",
]

#: Default points of :func:`normal_scores` (a power of two for Sobol balance). The engine's
#: levels are :func:`path_points` and :func:`default_points`: with the mean path at 2**15
#: points only (before 2026-12-01), the quadrature of its law left KS ~0.003-0.005 on the
#: agreement's 8x32 factor rows.
N_POINTS = 32768
#: Fewest points for a long pipeline (bulk quantiles stay within ~1% of Monte Carlo's).
MIN_POINTS = 8192
#: Ops x points evaluated by the vectorised recursions (about 2 s on one core).
CELL_BUDGET = 2**24
#: Fewest conditions evaluated with the Clark-Mehler core to calibrate the cheap recursion.
N_ANCHORS = 8
#: Most of them (:func:`default_anchors`).
MAX_ANCHORS = 64
#: Ops x anchors evaluated with the Clark-Mehler core (~0.2 s for 8x32 x 8 anchors).
ANCHOR_CELLS = 2**12
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
#: Largest share of the conditional variance that the bias's scatter about its binned mean
#: may have for the binning to be used (otherwise the core's points keep their own values).
#: The agreement's 8x32 rows with per-microbatch factors of CV 50% / 15% / 5%: 0.1% / 1.9% /
#: 9.8%, binned; against 1e6 Monte Carlo samples KS 0.0048 -> 0.0013 (CV 50%) and 0.0044 ->
#: 0.0037 (CV 5%). With per-stage speeds: 73%, not binned (binned: KS 0.0080, not: 0.0072).
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


def default_anchors(spec: Any) -> int:
    """Clark-Mehler anchors for a pipeline: ops x anchors within :data:`ANCHOR_CELLS`.

    At least :data:`N_ANCHORS` (8x32 gets 8), at most :data:`MAX_ANCHORS` (4x8 gets 64). The
    line through 8 anchors is noisy where the op noise matters inside a condition: on 4x8 with
    per-microbatch factors of CV 15% (5%) it moved p50 by 0.08% (0.05%) between two anchor
    sets; 64 anchors brought KS from 0.0041 (0.0078 for Clark's core) to 0.0011 (0.0086)
    against 1e6 op-by-op Monte Carlo samples.
    """
    fit = ANCHOR_CELLS // max(spec.n_ops, 1)
    return int(min(MAX_ANCHORS, max(N_ANCHORS, fit)))


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
) -> tuple[list[tuple[float, float, float]], dict[str, Any]]:
    """The makespan as a mixture ``[(weight, mean, std)]`` over quasi-random factor conditions.

    Two levels. The factors move the makespan mostly through the mean path ``L(f)``, whose
    spread over the factors is many times the op noise left inside one condition (8x32 with
    per-microbatch factors of CV 50%: 27 against 1.1), so each conditional law is nearly a
    step and the mixture's CDF is only as accurate as its quadrature of ``L``'s law: at 2**15
    points, KS ~0.005 against Monte Carlo (``validation/results/factor_conditioning.md``). So
    ``L`` is computed exactly (a max-plus recursion, cheap) at ``n_path`` points of the
    design, and the core's bias ``E[M | f] - L`` and variance (:func:`anchored_laws`, the
    costly part) at ``n`` of them (the first points of each stratum's Sobol block), averaged
    in :data:`PATH_BINS` equal-count bins of ``L`` and interpolated at every point; the
    bias's scatter inside a bin is added to the variance, so that the mixture keeps the
    core's mean and variance up to the interpolation between bins (against the core run at
    all 2**18 points on 8x32: mean within 0.5% of an sd, sd within 0.4%). Where that scatter
    passes :data:`BIN_SCATTER_MAX` of the conditional variance (``L`` does not explain the
    bias: per-stage speeds), and where ``n_path == n`` (small pipelines), every core point
    keeps its own values and the mixture is over the core's points only.

    Parameters
    ----------
    spec : PipelineSpec
        A pipeline with a ``microbatch_factor`` and/or ``stage_factor``.
    core : callable
        ``core(w_row, s_row) -> (mean, var)``: the canonical core evaluated in one condition
        (used at the anchors).
    n, n_path, anchors, seed
        Points of the core level (default :func:`default_points`, at most ``n_path``) and of
        the mean-path level (default :func:`path_points`, at least ``n``), Clark-Mehler anchor
        conditions (default :func:`default_anchors`), Sobol seed.

    Returns
    -------
    tuple
        The components and an ``info`` dict.
    """
    n_path = path_points(spec) if n_path is None else n_path
    n = min(n_path, default_points(spec)) if n is None else n
    n_path = max(n, n_path)
    anchors = default_anchors(spec) if anchors is None else anchors
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
        mean_c, sd_c = anchored_laws(spec, w_c, s_c, w_sub[sub], core, anchors)
        path = mean_paths(spec, w, s)
        bias, var, scatter = _binned(path[sub], mean_c - path[sub], sd_c, path, w_sub[sub])
        binned = scatter <= BIN_SCATTER_MAX
        if binned:
            mean, sd = path + bias, np.sqrt(var)
        else:  # the bias depends on more than L: the core's points, each with its own values
            w, s, weight, mean, sd = w_c, s_c, w_sub[sub], mean_c, sd_c
    else:
        mean, sd = anchored_laws(spec, w, s, weight, core, anchors)
        scatter = None
    comps = merge_components(weight, mean, sd)
    info = {
        "conditioned_on": "shared factors (scrambled Sobol points, tail-stratified)",
        "tilt_direction_norm": design["tilt_norm"],
        "factor_points": int(weight.size),
        "core_points": int(n if n_path > n else weight.size),
        "binned_on_mean_path": binned,
        "bias_scatter_share": scatter,
        "anchors": int(anchors),
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


def anchored_laws(
    spec: Any, w: Any, s: Any, weight: np.ndarray, core: Any, anchors: int = N_ANCHORS
) -> tuple[np.ndarray, np.ndarray]:
    """Conditional mean and sd of the makespan at every condition, by the anchor line.

    The mean path ``L`` is exact; the independent-input Clark recursion's bias ``E - L`` and
    sd are mapped onto the ``core``'s by least-squares lines fitted at ``anchors`` conditions
    (at the probability-weighted quantiles of the independent-input bias, so that the tail
    strata do not crowd them).
    """
    n = weight.size
    cm = conditional_moments(spec, w, s)
    path, ind_bias = cm["path"], cm["ind_mean"] - cm["path"]
    ind_sd = np.sqrt(cm["ind_var"])
    order = np.argsort(ind_bias)
    cum = np.cumsum(weight[order]) / weight.sum()
    levels = (np.arange(anchors) + 0.5) / anchors
    pick = order[np.minimum(np.searchsorted(cum, levels), n - 1)]
    a_bias, a_sd = [], []
    for j in pick:
        mu_j, var_j = core(w[j] if w is not None else None, s[j] if s is not None else None)
        a_bias.append(mu_j - path[j])
        a_sd.append(np.sqrt(max(var_j, 0.0)))
    bias = _fit(ind_bias[pick], np.array(a_bias), ind_bias)
    sd = np.maximum(_fit(ind_sd[pick], np.array(a_sd), ind_sd), 0.0)
    return path + bias, sd


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


def _fit(x: np.ndarray, y: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Least-squares line of ``y`` on ``x`` evaluated at ``at`` (a constant if ``x`` is flat)."""
    if np.ptp(x) <= 1e-12 * max(np.abs(x).max(), 1e-300):
        return np.full_like(at, float(np.mean(y)))
    slope, icpt = np.polyfit(x, y, 1)
    return slope * at + icpt


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
