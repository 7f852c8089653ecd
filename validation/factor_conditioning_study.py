"""Which approximation of the factor-conditioned pipeline core carries its error.

On shared-factor pipelines (``pipe_mbf_*``) the analytic core and plain Clark missed Monte
Carlo by the same KS (0.003-0.005 at 1e6 samples against a DKW noise of 0.0014), so the error
sat in what they share (:mod:`prism_analytic.engines.pipeline_factors`): the quasi-Monte-Carlo
quadrature over the factors, the anchor line that calibrates the cheap recursion, the merge of
the conditional normals into bins, and the normal shape of each conditional law. This script
removes each in turn and measures the result against op-by-op Monte Carlo (the agreement's
path, ``pa.predict(graph, "montecarlo")``, 1e6 samples, seed 12346 as in its confirmation):

* ``engine (...)``: ``pa.predict(graph)`` as the agreement runs it (gridded), both cores;
* ``one level (old)``: the mixture with the mean path at the core's 2**15 points only (the
  design before 2026-12-01); ``points x8``: the same with 8x more points; ``64 anchors``: 64
  Clark-Mehler anchors instead of 8; ``no merge``: every conditional normal kept;
* ``two levels (new)``: the mean path at :func:`~pipeline_factors.path_points` points, the core
  at 2**15 of them (the engine's default now); with 64 anchors; with 8192 merge bins;
* ``design: ...``: on a smaller design (``--design`` points), whose own quadrature error is
  large, so these rows are compared with the design's **nested Monte Carlo** (``--inner`` draws
  of the op noise at each point: the exact conditional laws), column ``vs nested``: the anchor
  ``line``; the ``exact core`` (Clark-Mehler at every point); the ``skew core`` (a Pearson III
  with the skew-aware core's mean, std and skewness at every point); ``MC moments, normal``
  (normals with each point's Monte Carlo mean and std: the normal shape alone).

Run::

    nice python validation/factor_conditioning_study.py [--only NAME ...] [--samples N]

It writes ``validation/results/factor_conditioning.md`` (``--out``; a table, with a header
written by hand). ``--part anchors``: the engine and the anchor rule's rows
(``results/factor_anchors.md``); ``--part fits``: the engine's anchor fit against the fit chosen
by leave-one-out error (:func:`press_fit`), anchor seeds 0-2. Monte Carlo samples are cached
in ``--cache`` (default ``/tmp/factor_conditioning_cache``).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special

import prism_analytic as pa
from prism_analytic.engines import pipeline_core as pc
from prism_analytic.engines import pipeline_factors as pf
from prism_analytic.engines import skew_core as sc
from prism_analytic.validation.scenarios import SCENARIOS

NAMES = ("pipe_mbf_r99_8x32", "pipe_mbf_r90_8x32")
#: x-grid points on which a mixture's CDF is evaluated (then interpolated at every sample).
GRID = 16384


def reference(name: str, samples: int, seed: int, cache: Path) -> np.ndarray:
    """Sorted op-by-op Monte Carlo makespans (the agreement's path), cached on disk."""
    path = cache / f"{name}_{samples}_{seed}.npy"
    if path.exists():
        return np.load(path)
    mc = pa.predict(SCENARIOS[name].build(), "montecarlo", samples=samples, seed=seed)
    x = np.sort(np.asarray(mc.distribution.samples, dtype=float))
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, x)
    return x


def spec_of(name: str) -> Any:
    """The scenario's compact pipeline spec."""
    g = SCENARIOS[name].build()
    return g.node(g.nodes[0])["spec"]


def mixture_cdf(
    x: np.ndarray, weight: np.ndarray, mu: np.ndarray, sd: np.ndarray, skew: Any = None
) -> np.ndarray:
    """CDF at ``x`` of a mixture of normals (or of Pearson III laws when ``skew`` is given)."""
    out = np.zeros(x.size)
    step = max(1, 2**22 // x.size)
    for a in range(0, mu.size, step):
        b = min(mu.size, a + step)
        m, s, w = mu[a:b], np.maximum(sd[a:b], 1e-300), weight[a:b]
        z = (x[:, None] - m) / s
        if skew is None:
            out += special.ndtr(z) @ w
            continue
        g = np.clip(skew[a:b], -sc.MAX_SKEW, sc.MAX_SKEW)
        g = np.where(np.abs(g) < 1e-6, 1e-6, g)  # ~normal: gamma of a huge shape
        alpha = 4.0 / g**2
        # Pearson III: (x - mu)/sd = (G - alpha) / sqrt(alpha) * sign(g), G ~ gamma(alpha)
        t = alpha + np.sign(g) * z * np.sqrt(alpha)
        cdf = np.where(g > 0, special.gammainc(alpha, np.maximum(t, 0.0)), 0.0)
        cdf = np.where(g < 0, special.gammaincc(alpha, np.maximum(t, 0.0)), cdf)
        out += cdf @ w
    return out


def score(x: np.ndarray, cdf_at: Any) -> dict[str, float]:
    """KS and p50 / p99 / p99.9 / spread errors of a CDF against sorted samples ``x``.

    The CDF is evaluated on :data:`GRID` points spanning the samples and interpolated at each
    sample (the mixtures are smooth on that scale).
    """
    grid = np.linspace(x[0], x[-1], GRID)
    fg = np.maximum.accumulate(np.clip(cdf_at(grid), 0.0, 1.0))
    f = np.interp(x, grid, fg)
    n = x.size
    i = np.arange(1, n + 1)
    ks = float(max(np.max(i / n - f), np.max(f - (i - 1) / n)))
    q = {lv: float(np.interp(lv, fg, grid)) for lv in (0.5, 0.99, 0.999)}
    e = {lv: float(x[min(n - 1, int(math.ceil(lv * n)) - 1)]) for lv in q}
    return {
        "ks": ks,
        "p50": q[0.5] / e[0.5] - 1,
        "p99": q[0.99] / e[0.99] - 1,
        "p999": q[0.999] / e[0.999] - 1,
        "spread": (q[0.99] - q[0.5]) / (e[0.99] - e[0.5]) - 1,
    }


def conditional_mc(spec: Any, w: Any, s: Any, inner: int, seed: int) -> np.ndarray:
    """``(points, inner)`` makespans: op noise drawn ``inner`` times at each factor condition."""
    arr = spec.arrays
    n_ops = arr["law_index"].size
    n = (w if w is not None else s).shape[0]
    laws = [spec.laws[k] for k in arr["law_keys"]]
    rng = np.random.default_rng(seed)
    out = np.empty((n, inner))
    block = max(1, 2**21 // (n_ops * inner))
    p0, p1 = arr["preds"][:, 0], arr["preds"][:, 1]
    for a in range(0, n, block):
        b = min(n, a + block)
        cells = (b - a) * inner
        fin = np.zeros((n_ops + 1, cells))
        for i, li in enumerate(arr["law_index"]):
            fin[i] = laws[li].sample(cells, rng)
        scale = np.ones((n_ops, b - a))
        if w is not None:
            scale *= w[a:b].T[arr["microbatch"]]
        if s is not None:
            scale *= s[a:b].T[arr["stage"]]
        fin[:n_ops] *= np.repeat(scale, inner, axis=1)
        for gen in arr["gens"]:
            fin[gen] += np.maximum(fin[p0[gen]], fin[p1[gen]])
        out[a:b] = fin[:n_ops].max(axis=0).reshape(b - a, inner)
    return out


def skew_conditional(spec: Any, w: Any, s: Any) -> tuple[float, float, float]:
    """(mean, std, skewness) of the makespan by the skew-aware core, factors fixed at w, s."""
    plain = spec._replace(microbatch_factor=None, stage_factor=None)
    st = pc._structure(spec.stages, spec.microbatches, spec.schedule, spec.vpp)
    stage_of = {k: int(k.split()[1][1:]) for k in spec.moments}
    f = {k: 1.0 if s is None else float(s[stage_of[k]]) for k in spec.moments}
    plain.__dict__["moments"] = {k: (v[0] * f[k], v[1] * f[k]) for k, v in spec.moments.items()}
    w_mom = None if w is None else np.stack([w, np.zeros_like(w)], axis=1)
    m_arr, s_arr, lmat = pc._factor_model(plain, st, w_mom)
    k3_law = {k: sc.third_cumulant(law) * f[k] ** 3 for k, law in spec.laws.items()}
    mb = np.array([o[2] for o in st["order"]])
    k3 = np.array([k3_law[k] for k in st["keys"]]) * (1.0 if w is None else w[mb] ** 3)
    mu, var, kappa3 = sc._run(st["gens"], st["preds"], m_arr, s_arr, lmat, st["window"], k3)
    return mu, math.sqrt(var), sc._skewness(var, kappa3)


def binning_check(spec: Any, core: Any) -> str:
    """What the binning on ``L`` keeps, at the core's own points (factor_components' claim).

    The core level as the engine runs it (the anchor rule), then :func:`pf._binned` evaluated
    at those same points: the mixture's mean and sd against the core level's own, and the
    conditional variance that took in the bias scatter. Empty where the engine does not bin.
    """
    n_path = pf.path_points(spec)
    n = min(n_path, pf.default_points(spec))
    if n_path <= n:
        return ""
    d = pf.factor_design(spec, n_path)
    idx, weight = d["index"], d["weight"]
    sub, w_sub = np.zeros(idx.size, dtype=bool), np.zeros(idx.size)
    for lo, hi in d["strata"]:  # the core level's subset, as factor_components takes it
        block = (idx >= lo) & (idx < hi)
        part = block & (idx < lo + (hi - lo) * n // n_path)
        sub |= part
        w_sub[part] = weight[block].sum() / max(part.sum(), 1)
    wt = w_sub[sub]
    w_c = None if d["w"] is None else d["w"][sub]
    s_c = None if d["s"] is None else d["s"][sub]
    mean, sd, _ = pf.anchored_laws(spec, w_c, s_c, wt, core, tol=pf.anchor_tolerance(n_path))
    path = pf.mean_paths(spec, w_c, s_c)
    bias, var, share = pf._binned(path, mean - path, sd, path, wt)
    m0, m1 = wt @ mean, wt @ (path + bias)
    v0, v1 = wt @ (sd**2 + mean**2) - m0**2, wt @ (var + (path + bias) ** 2) - m1**2
    cond = float(np.sqrt(wt @ sd**2))
    used = (
        "" if share <= pf.BIN_SCATTER_MAX else " (share > BIN_SCATTER_MAX: the engine does not bin)"
    )
    return (
        f"binned at the core's {wt.size} points{used}: mixture mean {(m1 - m0) / cond:+.1e} "
        f"conditional sd, sd {np.sqrt(v1 / v0) - 1:+.1e} (relative), conditional variance "
        f"{(wt @ var) / (wt @ sd**2) - 1:+.2%} (bias scatter share {share:.4f})"
    )


def old_anchor_count(spec: Any) -> int:
    """The fixed anchor count of the rule before 2026-12-01 (ops x anchors <= 4096, 8 to 64)."""
    return int(min(64, max(8, 4096 // max(spec.n_ops, 1))))


def anchor_rows(spec: Any, core: Any, add: Any, mix: Any) -> list[dict[str, Any]]:
    """The anchor rule: the fixed count before 2026-12-01 and fixed counts against the rule.

    The rule is run with three seeds of its anchors' levels (the engine's and two others): a
    rule driven by the line's own error should give the same KS whichever anchors it draws.
    """
    variants: list[tuple[str, dict[str, Any]]] = [
        (f"fixed {old_anchor_count(spec)} anchors (old rule)", {"anchors": old_anchor_count(spec)})
    ]
    variants += [(f"fixed {k} anchors", {"anchors": k}) for k in (16, 64)]
    variants += [
        (f"adaptive (new), anchor seed {k}", {"anchor_seed": pf.SEED + k}) for k in (0, 1, 2)
    ]
    for label, kw in variants:
        t = time.process_time()
        comps, info = pf.factor_components(spec, core, **kw)
        note = f"{info['anchors']} anchors"
        if "anchor_cdf_effect" in info:
            capped = ", budget reached" if info["anchor_budget_reached"] else ""
            note += (
                f", estimated CDF effect {info['anchor_cdf_effect']:.4f} (tol "
                f"{info['anchor_tol']:.4f}{capped})"
            )
        add(label, mix(comps), time.process_time() - t, note)
    return []


#: The fits :func:`press_fit` chose in the current run (bias, sd, bias, sd, ...), for the notes.
CHOSEN: list[str] = []


def press_fit(
    x: np.ndarray, y: np.ndarray, at: np.ndarray, weight: np.ndarray, covariate: Any = None
) -> tuple[np.ndarray, np.ndarray, float]:
    """The anchor fit of least leave-one-out prediction error (PRESS) among the candidates.

    A stand-in for :func:`pf._spline_fit` (the engine's fit: always :func:`pf.segments` pieces,
    with ``L`` for the bias): a single line and those pieces, each without and (where
    ``covariate`` is given) with ``L``; the one of least PRESS (closed form from the hat matrix,
    ``pf._spline_model``) is used, with its own standard error and residual sd. Ties go to the
    simpler fit. Measured here, not adopted by the engine (``results/factor_anchors.md``).
    """
    candidates = [(1, None), (pf.segments(x.size), None)]
    if covariate is not None:
        candidates += [(1, covariate), (pf.segments(x.size), covariate)]
    best: tuple[float, Any, str] | None = None
    for pieces, cov in candidates:
        fit, se, r, press = pf._spline_model(x, y, at, weight, cov, pieces)
        label = f"{pieces} piece{'s' * (pieces > 1)}{' + L' if cov is not None else ''}"
        if best is None or press < best[0]:
            best = (press, (fit, se, r), label)
    assert best is not None
    CHOSEN.append(best[2])
    return best[1]


def fit_rows(spec: Any, core: Any, add: Any, mix: Any) -> None:
    """The rule's fit: the engine's (pieces, + ``L`` for the bias) against :func:`press_fit`.

    Three seeds of the anchors' levels each; the note names the fits PRESS chose at the
    rule's last doubling.
    """
    engine_fit = pf._spline_fit
    for k in (0, 1, 2):
        for label, fit in (("engine fit (pieces + L)", engine_fit), ("PRESS choice", press_fit)):
            pf._spline_fit = fit
            CHOSEN.clear()
            try:
                t = time.process_time()
                comps, info = pf.factor_components(spec, core, anchor_seed=pf.SEED + k)
            finally:
                pf._spline_fit = engine_fit
            capped = ", budget reached" if info["anchor_budget_reached"] else ""
            chose = f", PRESS chose: bias {CHOSEN[-2]}, sd {CHOSEN[-1]}" if CHOSEN else ""
            note = (
                f"{info['anchors']} anchors{chose}; estimated CDF effect "
                f"{info['anchor_cdf_effect']:.4f} (tol {info['anchor_tol']:.4f}{capped})"
            )
            add(f"{label}, anchor seed {k}", mix(comps), time.process_time() - t, note)


def study(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every variant of one scenario, scored against its Monte Carlo reference."""
    rows: list[dict[str, Any]] = []
    x = reference(name, args.samples, args.seed, Path(args.cache))
    spec = spec_of(name)
    graph = SCENARIOS[name].build()

    def add(variant: str, cdf_at: Any, cpu: float, note: str = "", ref: Any = None) -> None:
        r = {"scenario": name, "variant": variant, **score(x, cdf_at), "cpu_s": cpu}
        r["vs_nested"] = math.nan
        if ref is not None:  # sup distance to the design's nested Monte Carlo
            g = np.linspace(x[0], x[-1], GRID)
            r["vs_nested"] = float(np.max(np.abs(cdf_at(g) - ref(g))))
        rows.append({**r, "note": note})
        print(
            f"{name:20s} {variant:28s} KS {r['ks']:.4f} p99 {r['p99']:+.3%} "
            f"spread {r['spread']:+.2%} vs nested {r['vs_nested']:.4f} cpu {cpu:.1f} s",
            flush=True,
        )

    for method in ("clark-mehler", "clark") if args.part != "fits" else ():
        t = time.process_time()
        res = pa.predict(graph, "analytic", core_method=method)
        add(f"engine ({method})", res.cdf, time.process_time() - t)
    core = pc._conditioned_core(spec, "clark-mehler", None)

    def mix(comps: list) -> Any:
        c = np.array(comps)
        return lambda g: mixture_cdf(g, c[:, 0] / c[:, 0].sum(), c[:, 1], c[:, 2])

    if args.part == "fits":
        fit_rows(spec, core, add, mix)
        return rows
    if args.part == "anchors":
        rows += anchor_rows(spec, core, add, mix)
        NOTES.append(f"{name}: {binning_check(spec, core) or 'not binned (one level)'}")
        print(NOTES[-1], flush=True)
        return rows
    n0 = pf.default_points(spec)
    for label, kw in (
        ("one level (old)", {"n_path": n0}),
        ("one level, points x8", {"n": 8 * n0, "n_path": 8 * n0}),
        ("one level, 64 anchors", {"n_path": n0, "anchors": 64}),
        ("two levels (new)", {}),
        ("two levels, 16 anchors", {"anchors": 16}),
        ("two levels, 32 anchors", {"anchors": 32}),
    ):
        t = time.process_time()
        comps, info = pf.factor_components(spec, core, **kw)
        add(
            label,
            mix(comps),
            time.process_time() - t,
            f"{info['factor_points']} points, core at {info.get('core_points', '-')}",
        )
    t = time.process_time()
    d = pf.factor_design(spec, n0)
    mean, sd, _ = pf.anchored_laws(spec, d["w"], d["s"], d["weight"], core, pf.N_ANCHORS)
    add(
        "one level, no merge",
        lambda g: mixture_cdf(g, d["weight"], mean, sd),
        time.process_time() - t,
        f"{mean.size} components",
    )
    t = time.process_time()
    bins, pf.MERGE_BINS = pf.MERGE_BINS, 8192
    try:
        comps, _ = pf.factor_components(spec, core)
    finally:
        pf.MERGE_BINS = bins
    add("two levels, 8192 bins", mix(comps), time.process_time() - t, f"{len(comps)} components")
    # the binning on L alone: per-point core values at every path point, then binned
    t = time.process_time()
    d2 = pf.factor_design(spec, pf.path_points(spec))
    mean3, sd3, _ = pf.anchored_laws(spec, d2["w"], d2["s"], d2["weight"], core, pf.N_ANCHORS)
    path3 = pf.mean_paths(spec, d2["w"], d2["s"])
    b3, v3, share = pf._binned(path3, mean3 - path3, sd3, path3, d2["weight"])
    comps = pf.merge_components(d2["weight"], path3 + b3, np.sqrt(v3))
    add(
        "one level x8, binned on L",
        mix(comps),
        time.process_time() - t,
        f"bias scatter share {share:.3f}",
    )

    # ---- a smaller design: exact per-point cores and conditional Monte Carlo. Its own
    # quadrature error is large; the column "vs nested" compares each variant with the
    # design's nested Monte Carlo (the exact conditional laws on the same points).
    d = pf.factor_design(spec, args.design)
    w, s, wt = d["w"], d["s"], d["weight"]
    n = wt.size

    def row(j: int) -> tuple[Any, Any]:
        return (None if w is None else w[j], None if s is None else s[j])

    t = time.process_time()
    cmc = conditional_mc(spec, w, s, args.inner, args.seed + 1)
    cmc_s = time.process_time() - t
    pooled = cmc.ravel()
    order = np.argsort(pooled)
    cw = np.cumsum(np.repeat(wt / args.inner, args.inner)[order])

    def nested(g: np.ndarray) -> np.ndarray:
        return np.interp(g, pooled[order], cw, left=0.0, right=1.0)

    add("design: nested MC", nested, cmc_s, f"{n} points x {args.inner} conditional draws")
    t = time.process_time()
    mean, sd, _ = pf.anchored_laws(spec, w, s, wt, core, pf.N_ANCHORS)
    add("design: line", lambda g: mixture_cdf(g, wt, mean, sd), time.process_time() - t, ref=nested)
    t = time.process_time()
    ex = np.array([core(*row(j)) for j in range(n)])
    ex_mu, ex_sd = ex[:, 0], np.sqrt(np.maximum(ex[:, 1], 0.0))
    add(
        "design: exact core",
        lambda g: mixture_cdf(g, wt, ex_mu, ex_sd),
        time.process_time() - t,
        f"Clark-Mehler at all {n} points",
        ref=nested,
    )
    t = time.process_time()
    sk = np.array([skew_conditional(spec, *row(j)) for j in range(n)])
    add(
        "design: skew core",
        lambda g: mixture_cdf(g, wt, sk[:, 0], sk[:, 1], sk[:, 2]),
        time.process_time() - t,
        f"mean skew {float(wt @ sk[:, 2]):.3f}",
        ref=nested,
    )
    cm_mu, cm_sd = cmc.mean(axis=1), cmc.std(axis=1, ddof=1)
    cm_sk = ((cmc - cm_mu[:, None]) ** 3).mean(axis=1) / np.maximum(cm_sd, 1e-300) ** 3
    add(
        "design: MC moments, normal",
        lambda g: mixture_cdf(g, wt, cm_mu, cm_sd),
        0.0,
        f"mean skew {float(wt @ cm_sk):.3f}",
        ref=nested,
    )
    for label, mu_, sd_ in (
        ("exact core", ex_mu, ex_sd),
        ("line", mean, sd),
        ("skew core", sk[:, 0], sk[:, 1]),
    ):
        print(
            f"  {label}: mean - MC mean {float(wt @ (mu_ - cm_mu)):+.4f} s, sd / MC sd "
            f"{float(wt @ (sd_ / cm_sd)):.4f} (MC: mean conditional sd "
            f"{float(wt @ cm_sd):.4f} s)"
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table of the rows."""
    out = [
        "| scenario | variant | KS | p50 | p99 | p99.9 | spread | vs nested | CPU s | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        vn = "-" if math.isnan(r["vs_nested"]) else f"{r['vs_nested']:.4f}"
        out.append(
            f"| {r['scenario']} | {r['variant']} | {r['ks']:.4f} | {r['p50']:+.3%} | "
            f"{r['p99']:+.3%} | {r['p999']:+.3%} | {r['spread']:+.2%} | {vn} | "
            f"{r['cpu_s']:.1f} | {r['note']} |"
        )
    return "\n".join(out)


FINDINGS = "## Findings"
#: Lines written below the table (the anchor part's binning check).
NOTES: list[str] = []
OUT = {"all": "factor_conditioning.md", "anchors": "factor_anchors.md", "fits": "fits.md"}
TITLE = {
    "all": "Factor conditioning study",
    "anchors": "Factor conditioning: the anchor rule",
    "fits": "Factor conditioning: the anchor fit's choice",
}


def dkw(samples: int, level: float = 0.95) -> float:
    """The DKW band's half-width: ``sqrt(ln(2 / (1 - level)) / (2 samples))``."""
    return math.sqrt(math.log(2 / (1 - level)) / (2 * samples))


def _commit() -> str:
    """The checkout's short commit (and '+' if it has uncommitted changes)."""
    import subprocess

    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown commit"
    return sha


def main() -> None:
    """Command line: run the study, print and write the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="+", default=list(NAMES), choices=sorted(SCENARIOS))
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=12346)
    ap.add_argument("--design", type=int, default=4096, help="points of the per-point design")
    ap.add_argument("--inner", type=int, default=256, help="conditional MC draws per point")
    ap.add_argument("--cache", default="/tmp/factor_conditioning_cache")
    ap.add_argument(
        "--part",
        choices=("all", "anchors", "fits"),
        default="all",
        help="all variants, the engine and the anchor rule's rows, or the rule's fit "
        "(the engine's pieces + L against the least-PRESS fit, anchor seeds 0-2; each its "
        "own --out file)",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="default: results/factor_conditioning.md "
        "(--part all) or results/factor_anchors.md (--part anchors)",
    )
    args = ap.parse_args()
    if args.out is None:
        args.out = f"validation/results/{OUT[args.part]}"
    rows = [r for name in args.only for r in study(name, args)]
    print(table(rows))
    if args.out:
        out = Path(args.out)
        # the findings written by hand below the table survive a re-run
        keep = out.read_text().partition(FINDINGS)[2] if out.exists() else "\n"
        head = (
            f"# {TITLE[args.part]}\n\n"
            f"`nice python validation/factor_conditioning_study.py --part {args.part} --only "
            f"{' '.join(args.only)} --samples {args.samples} "
            f"--seed {args.seed} --design {args.design} --inner {args.inner}` at "
            f"{_commit()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. KS, p50, p99, "
            "p99.9 and spread (p99 - p50) errors against op-by-op Monte Carlo; CPU s of the "
            "variant's own computation. Monte Carlo's own noise: DKW 95% band "
            f"{dkw(args.samples):.4f} on the KS.\n\n"
        )
        notes = "".join(f"* {line}\n" for line in NOTES)
        out.write_text(head + table(rows) + "\n\n" + notes + "\n" * bool(notes) + FINDINGS + keep)


if __name__ == "__main__":
    main()
