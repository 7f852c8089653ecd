"""Write validation/results/traces_floors.md: the noise floors of the two unmet trace targets.

1. ST straggler trace, out of sample (std ratio, p95 in the measured p95's 90% bootstrap
   interval). It gives the proven bound on the p95 target (``step_floors``), then Monte Carlo
   pass rates of every target for three perfect-model references. Last, two modelling changes
   are checked on the fit half only: a between-recording-window level, and the uncertainty of
   a spread estimated from a dozen steps.
2. GPU variability, slowest of n GPUs. It gives the definitions of "subsampling the other
   half" with their proven bounds and the true law's own KS (``gpu_floors``). Then come the
   model's KS on the seed-0 split and over 50 splits, and a fixed set of per-GPU laws chosen
   by a criterion computed on the fit half only.

Run from the repository root beside ``../shared`` (or set PRISM_DATA):
``python validation/traces_floors.py`` (about 5 minutes of CPU time).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from prism_analytic.datasets import data_root
from prism_analytic.traces.compare import compare_steps, out_of_sample_checks
from prism_analytic.traces.gpu_floors import (
    disjoint_groups_floor,
    ks_lower_bound,
    max_ks,
    perfect_max_ks,
)
from prism_analytic.traces.gpu_variability import (
    _split,
    fit_per_gpu_law,
    gpu_max_splits,
    per_gpu_speeds,
)
from prism_analytic.traces.step_floors import quantile_ci_coverage_bound, target_pass_rates
from prism_analytic.traces.tail_fit import fit_spliced

OUT = Path(__file__).parent / "results" / "traces_floors.md"
REPS = 1000  # Monte Carlo held-out sets per ST reference (binomial s.e. <= 0.016)
SPLITS = 50
NS = (4, 16, 64, 256)
LIMIT = 0.1
TARGETS = (
    "|mean err| <= 2%",
    "|p50 err| <= 2%",
    "|p90 err| <= 3%",
    "KS shape p >= 0.05",
    "std ratio in [0.67, 1.5]",
    "p95 in measured 90% CI",
    "all",
)
#: Summary figures collected while the sections are computed (written at the top).
FACTS: dict = {}


# ----------------------------------------------------------------------------------- ST
def _windows(ids) -> np.ndarray:
    """Recording window of each step.

    A new window starts after a gap in step ids of more than 10 times the median gap (a stated
    rule: the trace records runs of nearby steps).
    """
    gaps = np.diff(ids)
    return np.concatenate([[0], np.cumsum(gaps > 10 * np.median(gaps))])


def _window_variance(x, win) -> tuple:
    """One-way random-effects ANOVA: moment estimate of the between-window variance, F, p."""
    groups = [x[win == w] for w in np.unique(win)]
    if len(groups) < 2:
        return 0.0, float("nan"), float("nan")
    res = stats.f_oneway(*groups)
    k, n = len(groups), x.size
    sizes = np.array([g.size for g in groups])
    msw = sum(((g - g.mean()) ** 2).sum() for g in groups) / (n - k)
    msb = sum(g.size * (g.mean() - x.mean()) ** 2 for g in groups) / (k - 1)
    n0 = (n - (sizes**2).sum() / n) / (k - 1)
    return max((msb - msw) / n0, 0.0), float(res.statistic), float(res.pvalue)


def _spread(p, c):
    """The prediction's draws scaled around their median by c."""
    med = np.median(p)
    return med + c * (p - med)


def _rate_row(label, res) -> str:
    r = res["rates"]
    return f"| {label} | " + " | ".join(f"{r[t]:.3f}" for t in TARGETS) + " |"


def _st(root: Path) -> list:
    from prism_analytic.traces.predict import predict_trace

    folder = root / "straggler_traces"
    base = json.loads((folder / "result-ST.json").read_text())["step_t_base"]
    runs = {}
    for fs in ("first-half", "second-half"):
        r = predict_trace(
            folder / "trace-ST.parquet",
            measured=folder / "result-ST.json",
            fit_steps=fs,
            analytic="off",
            library=False,
        )
        fit = np.array([base[str(i)] for i in r.fit_steps])
        runs[fs] = (r, fit)
    lines = [
        "## 1. ST trace, out of sample: std ratio and p95 in the measured 90% bootstrap CI",
        "",
        "Prediction: `predict_trace(trace-ST, fit_steps=...)` (4000 draws, seed 0, analytic "
        "engine off: the",
        "draws are the model's exact replay). m = held-out steps.",
        "",
        "| fit on | m | pred std | meas std | std ratio | pred p95 | meas p95 90% CI "
        "| held-out max | fit half's own p95 | p95 in CI |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for fs, (r, fit) in runs.items():
        m = r.metrics
        lo, hi = m["measured_p95_ci90"]
        lines.append(
            f"| {fs} | {r.measured.size} | {m['predicted']['std_s']:.4f} | "
            f"{m['measured']['std_s']:.4f} | {m['std_ratio']:.3f} | {m['predicted']['p95_s']:.4f} "
            f"| [{lo:.4f}, {hi:.4f}] | {r.measured.max():.4f} | {np.quantile(fit, 0.95):.4f} | "
            f"{m['p95_in_measured_ci']} |"
        )
    b14, b13 = quantile_ci_coverage_bound(14), quantile_ci_coverage_bound(13)
    lines += [
        "",
        "### Proven: the p95 target is a coin flip for the true law",
        "",
        "A percentile bootstrap resamples the held-out steps, so its interval never reaches "
        "above their",
        "maximum. For any continuous law the true p95 is above all m independent steps with "
        "probability",
        f"0.95^m. So the true p95 is inside the interval with probability at most 1 - 0.95^m: "
        f"**{b14:.3f}** for m = 14",
        f"(fit on the first half), **{b13:.3f}** for m = 13 (fit on the second half). The "
        "halves are independent,",
        f"so a perfect model meets the p95 target in both directions with probability at most "
        f"**{b14 * b13:.3f}**.",
        "This assumes independent steps (Ljung-Box p >= 0.49, `traces_noise_floor.md`).",
        "",
    ]
    r1, fit1 = runs["first-half"]
    lines += [
        f"On this split, fitting on the first half: the held-out maximum is "
        f"{r1.measured.max():.4f} s, and the fit half's own",
        f"p95 is {np.quantile(fit1, 0.95):.4f} s, above that maximum. So a prediction that "
        "reproduces the fit half's p95 fails",
        "the p95 target whatever its shape.",
        "",
        "### Monte Carlo: how often a perfect model meets each target",
        "",
        f"Share of {REPS} held-out sets of m steps drawn from the truth that meet each target "
        f"(binomial s.e. <= {np.sqrt(0.25 / REPS):.3f}).",
        "References:",
        "- *empirical*: truth = the fit half's own steps (their empirical law); prediction = "
        "the same law.",
        "- *model*: truth = the fitted model's law (its 4000 draws, a parametric bootstrap); "
        "prediction = that law.",
        "- *model, fit noise*: truth = the fitted model's law; the prediction is the empirical "
        "law of a fresh fit half",
        "  of the same size drawn from it. This is a model that reproduces its fit steps "
        "exactly, with the fit half's",
        "  sampling noise included.",
        "",
        # a literal | inside a cell breaks a markdown table
        "| fit on, reference | " + " | ".join(t.replace("|", "\\|") for t in TARGETS) + " |",
        "|---|" + "---|" * len(TARGETS),
    ]
    both = {}
    for fs, (r, fit) in runs.items():
        m = r.measured.size
        refs = {
            "empirical": target_pass_rates(fit, m, reps=REPS, seed=1),
            "model": target_pass_rates(r.samples, m, reps=REPS, seed=2),
            "model, fit noise": target_pass_rates(r.samples, m, fit_size=fit.size, reps=REPS),
        }
        for name, res in refs.items():
            lines.append(_rate_row(f"{fs}, {name}", res))
            both.setdefault(name, []).append(res["rates"]["all"])
    FACTS["st_both_all"] = {k: v[0] * v[1] for k, v in both.items()}
    FACTS["st_p95_bound"] = (b14, b13, b14 * b13)
    lines += [
        "",
        "Both directions meeting every target (product of the two `all` rates; independent "
        "halves): " + ", ".join(f"{k} {v:.3f}" for k, v in FACTS["st_both_all"].items()) + ".",
        "The *empirical* truth has only a dozen atoms. A held-out set then often contains the "
        "largest one, so the",
        "bootstrap interval can reach the truth's p95, and the continuous-law bound above does "
        "not apply to that row.",
        "The *model* rows estimate the bound's own probability, so they can exceed it by Monte "
        "Carlo error. The bound",
        "is for a prediction whose p95 is the true p95. The p95 of a dozen fit steps is lower "
        "on average, and the interval",
        "cannot reach above the held-out maximum, so the *fit noise* rows score more often: "
        "this target favours a",
        "prediction whose p95 is below the true one.",
        "",
    ]
    lines += _st_changes(runs)
    return lines


def _st_changes(runs) -> list:
    """Two modelling changes, each decided on the fit half only; their effect on the targets."""
    lines = [
        "### Modelling changes checked (each decided on the fit half only)",
        "",
    ]
    for fs, (r, fit) in runs.items():
        ids = np.array(r.fit_steps)
        win = _windows(ids)
        var_w, f_stat, p = _window_variance(fit, win)
        sizes = np.bincount(win)
        verdict = (
            "It is zero, so a window term adds nothing and the prediction is unchanged."
            if var_w == 0
            else "Added as a per-window offset, it would widen the prediction."
        )
        FACTS.setdefault("st_window_var", []).append(var_w)
        lines.append(
            f"- Recording-window level, fit on the {fs}: the fit steps form {sizes.size} "
            f"windows of {'/'.join(map(str, sizes))} steps (a new window after a step-id gap "
            f"> 10x the median gap). Between-window F = {f_stat:.2f}, p = {p:.2f}; the moment "
            f"estimate of the between-window variance is {var_w:.2g} s^2. {verdict}"
        )
    lines += [
        "- Uncertainty of a spread estimated from k fit steps. The normal-theory predictive "
        "law of a new step,",
        "  when mean and variance come from k steps, is wider by "
        "c = sqrt((1 + 1/k)(k - 1)/(k - 3)). Here the draws are scaled",
        "  around their median by c. It is kept only if it raises the expected pass rate "
        "(reference *model, fit noise*).",
        "",
        "| fit on | c | std ratio as is -> scaled | p95 in CI as is -> scaled "
        "| expected std-target rate as is -> scaled | expected all-target rate as is -> scaled |",
        "|---|---|---|---|---|---|",
    ]
    for fs, (r, fit) in runs.items():
        k = fit.size
        c = float(np.sqrt((1 + 1 / k) * (k - 1) / (k - 3)))
        now = r.metrics
        scaled = compare_steps(_spread(r.samples, c), r.measured, rng=0)
        rng = np.random.default_rng(5)
        hits = {1.0: [], c: []}
        for i in range(REPS):
            held, fit_draw = rng.choice(r.samples, r.measured.size), rng.choice(r.samples, k)
            for cc in hits:
                hits[cc].append(
                    out_of_sample_checks(compare_steps(_spread(fit_draw, cc), held, rng=i))
                )
        rate = {
            cc: (
                np.mean([h["std ratio in [0.67, 1.5]"] for h in v]),
                np.mean([all(h.values()) for h in v]),
            )
            for cc, v in hits.items()
        }
        FACTS.setdefault("st_inflation", []).append((fs, c, rate[1.0][1], rate[c][1]))
        lines.append(
            f"| {fs} | {c:.3f} | {now['std_ratio']:.3f} -> {scaled['std_ratio']:.3f} | "
            f"{now['p95_in_measured_ci']} -> {scaled['p95_in_measured_ci']} | "
            f"{rate[1.0][0]:.3f} -> {rate[c][0]:.3f} | {rate[1.0][1]:.3f} -> {rate[c][1]:.3f} |"
        )
    second = runs["first-half"][0].measured
    lo = np.argmin(second)
    rest = np.delete(second, lo)
    pred_std = runs["first-half"][0].metrics["predicted"]["std_s"]
    lines += [
        "",
        f"- Sensitivity: the second half's std {second.std(ddof=1):.4f} s drops to "
        f"{rest.std(ddof=1):.4f} s without its single fastest step",
        f"  ({second[lo]:.4f} s). The first-half fit's std ratio is then "
        f"{pred_std / rest.std(ddof=1):.3f} instead of "
        f"{pred_std / second.std(ddof=1):.3f}: a single held-out step moves this target across "
        "its limit.",
        "",
    ]
    return lines


# ---------------------------------------------------------------------------------- GPU
def _kde_cdf(x):
    """Gaussian kernel CDF, Scott's bandwidth (scipy's default rule)."""
    h = stats.gaussian_kde(x).factor * x.std(ddof=1)
    return lambda t: stats.norm.cdf((np.asarray(t, dtype=float)[..., None] - x) / h).mean(-1)


def _spliced_cdf(tail_fraction):
    return lambda x: fit_spliced(x, tail_fraction=tail_fraction).cdf


def _bagged_cdf(tail_fraction, boots=20):
    """Average CDF of normal + GPD fits to bootstrap resamples of the fit half (bagging)."""

    def make(x):
        rng = np.random.default_rng(0)
        fits = []
        for _ in range(boots):
            try:
                fits.append(fit_spliced(rng.choice(x, x.size), tail_fraction=tail_fraction))
            except ValueError:
                pass  # a resample with too few distinct values above the threshold
        if not fits:
            raise ValueError("no bootstrap resample of the fit half could be fitted")
        return lambda t: np.mean([f.cdf(t) for f in fits], axis=0)

    return make


#: Fixed candidate per-GPU laws (x -> CDF), stated before looking at any test half.
CANDIDATES = {
    "AIC choice (current)": lambda x: fit_per_gpu_law(x).cdf,
    "normal + GPD, top 5%": _spliced_cdf(0.05),
    "normal + GPD, top 10%": _spliced_cdf(0.1),
    "normal + GPD, top 20%": _spliced_cdf(0.2),
    "Gaussian KDE": _kde_cdf,
    "normal + GPD, top 10%, bagged (20 resamples)": _bagged_cdf(0.1),
}
INNER_NS = (4, 16)  # group sizes a 98-GPU inner fold still resolves (bound < 0.1)
INNER_REPEATS = 3


def _inner_score(make, x, rng) -> float:
    """Mean max-of-n KS over repeated 2-fold splits of the fit half (fit half only)."""
    scores = []
    for _ in range(INNER_REPEATS):
        a, b = _split(x, rng)
        for u, v in ((a, b), (b, a)):
            try:
                cdf = make(u)
            except ValueError:
                return float("inf")
            scores += [max_ks(lambda t, n=n, f=cdf: f(t) ** n, v, n) for n in INNER_NS]
    return float(np.mean(scores))


def _gpu(root: Path) -> list:
    path = root / "gpu_variability" / "sgemm-longhorn-agg.csv"
    values = per_gpu_speeds(path)
    m = values.size - values.size // 2
    lines = [
        "## 2. GPU variability: slowest of n GPUs against the held-out half",
        "",
        f"{values.size} GPUs (per-GPU median SGEMM time), random halves of "
        f"{values.size // 2} / {m}. Prediction: a continuous",
        "law H = F^n of the slowest of n, with F fitted on the fit half. It is compared with "
        "the held-out half's law of",
        "the slowest of n. That law depends on what *subsampling the other half* means:",
        "- **with replacement** (used by `prism validate`): n GPUs drawn with replacement from "
        "the m held-out GPUs; the max has",
        "  the plug-in law G_m^n, defined for every n.",
        "- **without replacement** (n <= m): n distinct held-out GPUs; P(max <= b_(k)) = "
        "C(k,n)/C(m,n).",
        "- **disjoint groups**: the m GPUs cut into k = m // n groups of n; k independent "
        "maxima and a one-sample KS.",
        "",
        "The first two are computed exactly, with no subsampling noise. Drawing S random "
        "subsets instead adds a",
        f"sampling error of up to sqrt(log(2/0.05)/(2S)) = "
        f"{np.sqrt(np.log(40) / 2000):.3f} at S = 1000 (DKW, 95%). Those subset maxima share "
        "GPUs, so they are dependent and",
        f"take at most {m} distinct values. A KS-test p-value on them would be meaningless; "
        "only the distance is scored.",
        "",
        "### Proven: the smallest KS any continuous prediction can reach",
        "",
        "Half the plug-in law's largest jump, which sits at the largest held-out value: "
        "(1 - (1 - 1/m)^n)/2 with",
        "replacement, n/(2m) without, and 1/(2k) for k disjoint maxima. The bound is tight "
        "(tested). It holds for",
        "every held-out half, whatever the data.",
        "",
        "| n | with replacement | without replacement | disjoint groups (k) |",
        "|---|---|---|---|",
    ]
    dis = {n: disjoint_groups_floor(m, n, LIMIT) for n in NS}
    for n in NS:
        wo = f"{ks_lower_bound(m, n, replace=False):.3f}" if n <= m else "undefined (n > m)"
        d = dis[n]
        dg = f"{d['lower_bound']:.3f} ({d['groups']})" if d["groups"] else "undefined (k = 0)"
        lines.append(f"| {n} | {ks_lower_bound(m, n):.3f} | {wo} | {dg} |")
    perfect = {n: perfect_max_ks(m, n, reps=20000, seed=1) for n in NS}
    perfect_wo = {n: perfect_max_ks(m, n, replace=False, reps=20000, seed=1) for n in NS if n <= m}
    lines += [
        "",
        "### The true law's own KS against a random held-out half (the floor of a perfect model)",
        "",
        "With u = F(x), the KS of the true law against m GPUs drawn from it does not depend on "
        "F (any continuous F).",
        "Its distribution comes from 20000 sets of m uniforms; the disjoint-groups column is "
        "exact (`scipy.stats.kstwo`).",
        "P(<= 0.1) is the chance that a perfect model meets the target on one random split.",
        "",
        "| n | with repl.: median | mean | P(<= 0.1) | without repl.: median | P(<= 0.1) "
        "| disjoint: median | P(<= 0.1) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in NS:
        p = perfect[n]
        wo = (
            f"{np.median(perfect_wo[n]):.3f} | {np.mean(perfect_wo[n] <= LIMIT):.3f}"
            if n in perfect_wo
            else "- | -"
        )
        d = dis[n]
        dg = (
            f"{d['perfect_median']:.3f} | {d['perfect_p_le_limit']:.4f}" if d["groups"] else "- | -"
        )
        lines.append(
            f"| {n} | {np.median(p):.3f} | {p.mean():.3f} | {np.mean(p <= LIMIT):.3f} | {wo} "
            f"| {dg} |"
        )
    FACTS["gpu_perfect_le"] = {n: float(np.mean(perfect[n] <= LIMIT)) for n in NS}
    FACTS["gpu_bound"] = {n: ks_lower_bound(m, n) for n in NS}
    FACTS["gpu_bound_wo"] = {n: ks_lower_bound(m, n, replace=False) for n in NS if n <= m}
    lines += _location(path, values.size)
    lines += _gpu_models(path, values, perfect)
    return lines


def _location(path, size) -> list:
    """Cabinet and node effects on the seed-0 fit half (the split of ``prism validate``)."""
    import pandas as pd

    frame = pd.read_csv(path)
    frame["cab"] = frame["cabinet"].astype(str)
    frame["node_id"] = frame["cab"] + "/" + frame["node"].astype(str)
    perf = frame.groupby("uuid")["perf"].median()  # the order of per_gpu_speeds
    fit_ids = perf.index[np.random.default_rng(0).permutation(size)[: size // 2]]
    known = frame[(frame["cab"] != "-1") & frame["uuid"].isin(fit_ids)]
    where = known.groupby("uuid")[["cab", "node_id"]].agg(lambda v: v.mode()[0])
    where["perf"] = perf.loc[where.index]
    lines = ["", "### Cabinet and node structure (seed-0 fit half)", ""]
    for col, label in (("cab", "cabinets"), ("node_id", "nodes")):
        groups = [g["perf"].to_numpy() for _, g in where.groupby(col) if len(g) >= 2]
        res = stats.f_oneway(*groups)
        kw = stats.kruskal(*groups)
        lines.append(
            f"- {label}: {len(groups)} with >= 2 located fit-half GPUs; one-way ANOVA p = "
            f"{res.pvalue:.2f}, Kruskal-Wallis p = {kw.pvalue:.2f}."
        )
        FACTS[f"gpu_{label}_p"] = float(res.pvalue)
    lines += [
        f"- {len(where)} of the {size // 2} fit-half GPUs have a recorded cabinet and node. "
        + (
            "Neither test finds a cabinet or node effect (p >= 0.05)."
            if min(FACTS["gpu_cabinets_p"], FACTS["gpu_nodes_p"]) >= 0.05
            else "A test finds a location effect (p < 0.05)."
        ),
        "  Even if there were one, the target draws GPUs at random, not by node, so only the "
        "marginal per-GPU law",
        "  enters F^n, and the candidates below fit that law directly.",
    ]
    return lines


def _gpu_models(path, values, perfect) -> list:
    rng = np.random.default_rng(1)
    ks = {k: {n: [] for n in NS} for k in [*CANDIDATES, "selected by inner CV"]}
    ks_wo = {n: [] for n in NS if n <= values.size // 2}
    chosen = {}
    for s in range(SPLITS):
        # split s = 0 is the seed-0 split of `prism validate` (gpu_max_case(seed=0))
        fit_half, test_half = _split(values, np.random.default_rng(0) if s == 0 else rng)
        cdfs, score = {}, {}
        for name, make in CANDIDATES.items():
            cdfs[name] = make(fit_half)
            score[name] = _inner_score(make, fit_half, np.random.default_rng(100 + s))
        best = min(score, key=score.get)
        chosen[best] = chosen.get(best, 0) + 1
        cdfs["selected by inner CV"] = cdfs[best]
        for name, cdf in cdfs.items():
            for n in NS:
                ks[name][n].append(max_ks(lambda t, n=n, f=cdf: f(t) ** n, test_half, n))
        base = cdfs["AIC choice (current)"]
        for n in ks_wo:
            ks_wo[n].append(max_ks(lambda t, n=n, f=base: f(t) ** n, test_half, n, replace=False))
    splits = gpu_max_splits(path, splits=SPLITS, seed=0)
    lines = [
        "",
        "### The model: seed-0 split and the mean over 50 random splits",
        "",
        "The per-GPU law is one of a fixed set of candidates, stated before any test half was "
        "scored.",
        "The choice criterion uses the fit half only: the mean KS of the slowest of n = 4 and "
        f"16, over {INNER_REPEATS} random",
        "2-fold splits of the fit half, both ways (98 vs 98 GPUs; n >= 64 is left out because "
        "a 98-GPU fold cannot",
        "resolve it: bound 0.24). Cells: seed-0 split KS / mean over 50 splits (split 0 = "
        "seed 0). `share` = share of the",
        "50 splits with KS <= 0.1 at n = 16. Plug-in law with replacement.",
        "",
        "| per-GPU law | " + " | ".join(f"n = {n}" for n in NS) + " | share n=16 <= 0.1 |",
        "|---|" + "---|" * (len(NS) + 1),
    ]
    for name, d in ks.items():
        lines.append(
            f"| {name} | "
            + " | ".join(f"{d[n][0]:.3f} / {np.mean(d[n]):.3f}" for n in NS)
            + f" | {np.mean(np.array(d[16]) <= LIMIT):.2f} |"
        )
    lines.append(
        "| true law (perfect model), mean | "
        + " | ".join(f"- / {perfect[n].mean():.3f}" for n in NS)
        + f" | {np.mean(perfect[16] <= LIMIT):.2f} |"
    )
    base = ks["AIC choice (current)"]
    wo = ", ".join(f"n = {n}: {ks_wo[n][0]:.3f} / {np.mean(ks_wo[n]):.3f}" for n in ks_wo)
    rank = ", ".join(f"n = {n}: {np.mean(perfect[n] <= base[n][0]):.3f}" for n in NS)
    FACTS["gpu_model"] = {
        name: {n: (d[n][0], float(np.mean(d[n]))) for n in NS} for name, d in ks.items()
    }
    FACTS["gpu_perfect_mean"] = {n: float(perfect[n].mean()) for n in NS}
    summ = splits.summary()
    lines += [
        "",
        "Inner-CV choice over the 50 splits: "
        + ", ".join(f"{k} {v}" for k, v in sorted(chosen.items(), key=lambda t: -t[1]))
        + ".",
        "",
        f"- Current law, plug-in law without replacement (seed 0 / mean over 50): {wo}.",
        "- Share of the true law's own KS draws at or below the current law's seed-0 KS "
        f"(its percentile in the perfect-model distribution): {rank}.",
        "- Refitting this method on a fit half drawn from a known truth (the AIC choice fitted "
        "on all 392 GPUs) and scoring it on",
        "  a test half drawn from that truth gives median KS "
        + ", ".join(f"n = {n}: {summ[str(n)]['refit_on_truth']['median']:.3f}" for n in NS)
        + " (`gpu_max_splits`). Two halves' own",
        "  plug-in laws differ by median "
        + ", ".join(f"{summ[str(n)]['halves']['median']:.3f}" for n in NS)
        + ".",
        "",
    ]
    return lines


def _summary() -> list:
    """The figures the acceptance decision needs, from the sections below."""
    f = FACTS
    b14, b13, both = f["st_p95_bound"]
    cur = f["gpu_model"]["AIC choice (current)"]
    sel = f["gpu_model"]["selected by inner CV"]
    return [
        "## Summary",
        "",
        "- ST, p95 target (proven, any continuous law, independent steps): the true law's p95 "
        f"is inside the held-out p95's 90% bootstrap interval with probability <= {b14:.3f} "
        f"(m = 14) and <= {b13:.3f} (m = 13), so <= {both:.3f} in both directions.",
        "- ST, all out-of-sample targets in both directions (Monte Carlo, perfect model): "
        + ", ".join(f"{k} {v:.3f}" for k, v in f["st_both_all"].items())
        + ".",
        "- ST, modelling changes: between-window variance estimated on the fit half = "
        + " / ".join(f"{v:.2g}" for v in f["st_window_var"])
        + " s^2 (no term to add). Widening for an estimated spread lowers the expected "
        "all-target rate ("
        + "; ".join(f"{fs} {a:.3f} -> {b:.3f}" for fs, _c, a, b in f["st_inflation"])
        + "), so it is not adopted.",
        "- GPU, proven: no continuous prediction can have KS <= 0.1 at n = 64 or 256 (bound "
        f"{f['gpu_bound'][64]:.3f} / {f['gpu_bound'][256]:.3f} with replacement; "
        f"{f['gpu_bound_wo'][64]:.3f} / undefined without).",
        "- GPU, n = 16 (Monte Carlo, exact up to 20000 draws): the true law itself meets KS "
        f"<= 0.1 on a random held-out half with probability {f['gpu_perfect_le'][16]:.3f} "
        f"(n = 4: {f['gpu_perfect_le'][4]:.3f}). Its mean KS is "
        + " / ".join(f"{f['gpu_perfect_mean'][n]:.3f}" for n in NS)
        + " for n = 4 / 16 / 64 / 256.",
        "- GPU model (current AIC choice), seed 0 / mean over 50 splits: "
        + ", ".join(f"n = {n}: {cur[n][0]:.3f} / {cur[n][1]:.3f}" for n in NS)
        + ". Chosen by inner CV on the fit half: "
        + ", ".join(f"n = {n}: {sel[n][0]:.3f} / {sel[n][1]:.3f}" for n in NS)
        + ".",
        "",
    ]


def main() -> int:
    """Compute both sections and write the file."""
    try:
        root = data_root()
    except FileNotFoundError as exc:
        print(f"skipped: {exc}", file=sys.stderr)
        return 0
    lines = [
        "# Noise floors of the unmet trace targets (generated by validation/traces_floors.py)",
        "",
        "Command: `python validation/traces_floors.py` (from the repository root, data in "
        "`../shared/data`).",
        "*Proven* marks bounds that hold for every data set of the stated size. *Monte Carlo* "
        "marks estimates, with their error.",
        "",
    ]
    body = _st(root) + _gpu(root)
    lines += _summary() + body
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print(OUT.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
