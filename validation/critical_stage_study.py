"""Conditioning a deep 1F1B lattice on its per-stage sums (issue #8, helper V: a study).

The lever named in ``../shared/notes/pipeline_makespan.md``: condition on which stage dominates
(or on the per-stage total work ``S_s``), evaluate the lattice core inside each condition, mix.
This script measures the two things that decide whether the lever can work, on the agreement
suite's lattices (1F1B, F 1 / B 2, normal ops, CV 5%):

``explain``: how much of the makespan ``M`` the stage sums explain, from Monte Carlo (the
product's :func:`~prism_analytic.engines.pipeline_mc.sample_pipeline`, its ``draw`` hook fed
columns whose stage sums are kept): ``R^2`` of ``M`` on ``max_s S_s`` and on the whole vector
``S`` (least squares on ``S``, its sorted values and ``max S``), i.e. what is left for the core
inside a condition, ``sd(M | S) / sd(M)``.

``cond``: the core inside a condition, against Monte Carlo of the same condition. Given the
stage sums ``S = M_s + delta_s`` the ops are jointly normal: ``X_i = mu_i + c_i delta_s +
r_i`` with ``c_i = sigma_i^2 / V_s`` and ``r = sigma Z - c (sigma . Z)`` (per stage), an exact
Gaussian conditional whose residuals are negatively correlated within a stage. The core
(:func:`~prism_analytic.engines.skew_core.skew_makespan`, the product's skew core, on the
lattice as a graph) gets it exactly as loadings: op ``i`` loads ``sigma_i [i = k] - c_i
sigma_k`` on the standard normal ``Z_k`` of every op ``k`` of its stage, no private sd. Monte
Carlo of the condition draws ``Z`` and applies the same map. ``K`` conditions ``delta`` are
drawn by scrambled Sobol points (``scipy.stats.qmc``) from their exact law ``N(0, V_s)``; the
mixture of the ``K`` conditional Pearson III laws is compared with unconditional Monte Carlo
(KS, mean error in sd, spread error), and the per-condition mean errors (in the unconditional
sd) say whether the core is better inside a condition than outside.

Usage::

    nice python validation/critical_stage_study.py explain --case 1f1b32x64 [--samples 200000]
    nice python validation/critical_stage_study.py cond --case 1f1b8x32 [--conditions 16]
        [--cond-samples 20000] [--samples 200000]

Results: ``validation/results/critical_stage_study.md``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import networkx as nx
import numpy as np
from scipy import stats
from scipy.stats import qmc

import prism_analytic as pa
from prism_analytic.engines.pipeline_mc import sample_pipeline
from prism_analytic.engines.skew_core import skew_law, skew_makespan, skew_pipeline
from prism_analytic.graph.pipeline import PipelineSpec, law_key

#: (stages, microbatches): the agreement rows pipe_1f1b_8x32 / 16x64 / 32x64
CASES = {"1f1b8x32": (8, 32), "1f1b16x64": (16, 64), "1f1b32x64": (32, 64)}


def spec_for(case: str, cv: float) -> PipelineSpec:
    """The agreement suite's 1F1B lattice: F 1 / B 2 per stage, normal ops, CV ``cv``."""
    p, m = CASES[case]
    laws = {
        law_key(ph, s, 0): pa.normal(mu, cv * mu)
        for ph, mu in (("F", 1.0), ("B", 2.0))
        for s in range(p)
    }
    return PipelineSpec(p, m, laws, "1f1b", 1)


def op_moments(spec: PipelineSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-op mean, sd and stage, in the order of ``spec.arrays``."""
    arr = spec.arrays
    laws = [spec.laws[k] for k in arr["law_keys"]]
    mu = np.array([laws[j].mean() for j in arr["law_index"]])
    sd = np.array([laws[j].std() for j in arr["law_index"]])
    return mu, sd, arr["stage"]


def _propagate(spec: PipelineSpec, x: np.ndarray) -> np.ndarray:
    """Makespans of op-time columns ``x`` (ops x samples) by the product's sampler."""
    arr = spec.arrays
    order = iter(np.concatenate(arr["gens"]))
    return sample_pipeline(
        spec, x.shape[1], np.random.default_rng(0), lambda law, n: x[next(order)]
    )


def _draw(spec, size, rng, delta=None, chunk=5000):
    """Makespans and stage sums; with ``delta`` (per stage) the ops conditioned on S = M + delta."""
    mu, sd, st = op_moments(spec)
    p = spec.stages
    var_s = np.bincount(st, sd**2, p)
    c = sd**2 / var_s[st]
    out, sums = [], []
    for start in range(0, size, chunk):
        n = min(chunk, size - start)
        z = rng.standard_normal((mu.size, n))
        x = mu[:, None] + sd[:, None] * z
        if delta is not None:  # exact Gaussian conditional on the stage sums
            dev = np.zeros((p, n))
            np.add.at(dev, st, sd[:, None] * z)
            x += c[:, None] * (delta[st][:, None] - dev[st])
        s = np.zeros((p, n))
        np.add.at(s, st, x)
        out.append(_propagate(spec, x))
        sums.append(s)
    return np.concatenate(out), np.concatenate(sums, axis=1)


def explain(case: str, cv: float, samples: int, seed: int) -> list[str]:
    """R^2 of the makespan on the stage sums (how much a condition on S can take away)."""
    spec = spec_for(case, cv)
    t0 = time.process_time()
    mk, s = _draw(spec, samples, np.random.default_rng(seed))
    cpu = time.process_time() - t0
    dev = s - s.mean(axis=1, keepdims=True)
    smax = dev.max(axis=0)
    srt = np.sort(dev, axis=0)
    y = mk - mk.mean()

    def r2(cols: np.ndarray) -> float:
        a = np.column_stack([np.ones(y.size), *cols])
        coef, *_ = np.linalg.lstsq(a, y, rcond=None)
        return 1.0 - np.var(y - a @ coef) / np.var(y)

    feats = {
        "max_s S_s": [smax],
        "S (linear)": list(dev),
        "S + sorted S": list(dev) + list(srt),
        "S + sorted S + S^2": list(dev) + list(srt) + list(dev**2),
    }
    lines = [
        f"# explain {case} cv {cv}: {samples} MC samples, seed {seed}, {cpu:.1f} s CPU; "
        f"M mean {mk.mean():.4f} sd {mk.std():.4f}; sd(S_s) {s.std(axis=1).mean():.4f}"
    ]
    for name, cols in feats.items():
        v = r2(cols)
        lines.append(f"{name:22s} R^2 {v:.4f}  sd(M | features)/sd(M) {math.sqrt(1 - v):.4f}")
    crit = np.bincount(np.argmax(s, axis=0), minlength=spec.stages) / samples
    lines.append("P(stage s has the largest sum): " + " ".join(f"{v:.3f}" for v in crit))
    return lines


def lattice_graph(spec: PipelineSpec) -> nx.DiGraph:
    """The lattice as a networkx DAG over op indices (``spec.arrays`` order)."""
    preds = spec.arrays["preds"]
    g = nx.DiGraph()
    g.add_nodes_from(range(len(preds)))
    g.add_edges_from((int(q), i) for i, row in enumerate(preds) for q in row if q >= 0)
    return g


def conditional_core(spec, graph, delta):
    """The skew core on the ops conditioned on the stage sums ``M_s + delta_s`` (exact loadings)."""
    mu, sd, st = op_moments(spec)
    var_s = np.bincount(st, sd**2, spec.stages)
    c = sd**2 / var_s[st]
    members = [np.flatnonzero(st == s) for s in range(spec.stages)]
    mean = {i: float(mu[i] + c[i] * delta[st[i]]) for i in range(mu.size)}
    loadings = {}
    for i in range(mu.size):
        ks = members[st[i]]
        row = -c[i] * sd[ks]
        row[ks == i] += sd[i]
        loadings[i] = dict(zip(ks.tolist(), row.tolist()))
    return skew_makespan(graph, mean, dict.fromkeys(mean, 0.0), loadings=loadings)


def control(case: str, cv: float) -> list[str]:
    """The unconditioned lattice in both representations: private sds vs one own factor each.

    The conditional core gets its ops as loadings only (no private sd); if the core read the
    same independent ops differently in that form, the conditioning would be confounded.
    """
    spec = spec_for(case, cv)
    graph = lattice_graph(spec)
    mu, sd, _ = op_moments(spec)
    mean = dict(enumerate(mu.tolist()))
    t0 = time.process_time()
    a = skew_makespan(graph, mean, dict(enumerate(sd.tolist())))
    t1 = time.process_time()
    b = skew_makespan(
        graph, mean, dict.fromkeys(mean, 0.0), loadings={i: {i: float(sd[i])} for i in mean}
    )
    t2 = time.process_time()
    return [
        f"# control {case} cv {cv}",
        f"private sds:       mean {a.mean:.5f} sd {a.std:.5f} skew {a.skew:+.4f} ({t1 - t0:.2f} s)",
        f"one factor per op: mean {b.mean:.5f} sd {b.std:.5f} skew {b.skew:+.4f} ({t2 - t1:.2f} s)",
    ]


def _ks(law, mk: np.ndarray) -> float:
    x = np.sort(mk)
    f = law(x)
    n = x.size
    return float(max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n)))


def cond(case, cv, samples, seed, conditions, cond_samples) -> list[str]:
    """Per-condition core errors and the mixture against unconditional Monte Carlo."""
    spec = spec_for(case, cv)
    graph = lattice_graph(spec)
    _, sd, st = op_moments(spec)
    vs = np.sqrt(np.bincount(st, sd**2, spec.stages))
    t0 = time.process_time()
    mk, _ = _draw(spec, samples, np.random.default_rng(seed))
    mc_cpu = time.process_time() - t0
    m_mean, m_sd = mk.mean(), mk.std()
    dkw = math.sqrt(math.log(2 / 0.05) / (2 * samples))
    t0 = time.process_time()
    base, _ = skew_pipeline(spec)
    base_cpu = time.process_time() - t0
    q50, q99 = np.quantile(mk, [0.5, 0.99])
    spread = q99 - q50

    def summary(law_cdf, law_ppf, mean):
        s = law_ppf(0.99) - law_ppf(0.5)
        return _ks(law_cdf, mk), (mean - m_mean) / m_sd, s / spread - 1

    bl = base.law()
    ks0, me0, sp0 = summary(bl.cdf, bl.quantile, base.mean)
    lines = [
        f"# cond {case} cv {cv}: MC {samples} samples seed {seed} ({mc_cpu:.1f} s CPU) mean "
        f"{m_mean:.4f} sd {m_sd:.4f} DKW95 {dkw:.4f}",
        f"skew_pipeline (unconditioned): KS {ks0:.4f} mean {me0:+.3f} sd spread {sp0:+.2%} "
        f"({base_cpu:.2f} s CPU)",
    ]
    sob = qmc.Sobol(spec.stages, scramble=True, seed=seed)
    # antithetic pairs: E[M | S] is nearly linear in S (``explain``), so +-delta cancel most of
    # the mixture's sampling error in the mean
    half = stats.norm.ppf(sob.random(max(1, conditions // 2))) * vs
    deltas = np.concatenate([half, -half])
    conditions = len(deltas)
    t0 = time.process_time()
    plain = skew_makespan(graph, *(dict(enumerate(v.tolist())) for v in op_moments(spec)[:2]))
    plain_cpu = time.process_time() - t0
    lines.append(
        f"skew_makespan on the lattice graph, unconditioned: mean "
        f"{(plain.mean - m_mean) / m_sd:+.3f}"
        f" sd, sd err {plain.std / m_sd - 1:+.2%} ({plain_cpu:.2f} s CPU)"
    )
    res, errs, pooled, cpu = [], [], [], 0.0
    rng = np.random.default_rng(seed + 1)
    for k, delta in enumerate(deltas):
        t0 = time.process_time()
        r = conditional_core(spec, graph, delta)
        cpu += time.process_time() - t0
        cm, _ = _draw(spec, cond_samples, rng, delta)
        res.append(r)
        pooled.append(cm)
        e = (r.mean - cm.mean()) / m_sd
        errs.append(
            (
                e,
                cm.std() / m_sd,
                r.std / cm.std() - 1,
                cm.mean(),
                cm.std() / math.sqrt(cm.size) / m_sd,
            )
        )
        lines.append(
            f"  condition {k}: sd(M|S)/sd(M) {cm.std() / m_sd:.3f}  core mean err {e:+.3f} sd "
            f"(MC se {errs[-1][4]:.3f})  core sd err {errs[-1][2]:+.2%}"
        )
    e = np.array(errs)
    laws = [skew_law(r.mean, r.std, r.skew) for r in res]

    def mix_cdf(x):
        return np.mean([lw.cdf(x) for lw in laws], axis=0)

    lo, hi = mk.min() - 5 * m_sd, mk.max() + 5 * m_sd
    grid = np.linspace(lo, hi, 4001)
    gc = mix_cdf(grid)

    def mix_ppf(q):
        return float(np.interp(q, gc, grid))

    mix_mean = float(np.mean([r.mean for r in res]))
    ks1, me1, sp1 = summary(mix_cdf, mix_ppf, mix_mean)
    mc_mix = float(np.mean(e[:, 3]))
    # the same conditions' Monte Carlo pooled: what the mixture would read with an exact core
    pool = np.concatenate(pooled)
    p50, p99 = np.quantile(pool, [0.5, 0.99])
    ks2 = float(stats.ks_2samp(pool, mk).statistic)
    sp2 = (p99 - p50) / spread - 1
    lines += [
        f"mean over conditions: core mean err {e[:, 0].mean():+.3f} sd (sd over conditions "
        f"{e[:, 0].std():.3f}, MC se {math.sqrt(np.mean(e[:, 4] ** 2) / len(e)):.3f}); "
        f"sd(M|S)/sd(M) {e[:, 1].mean():.3f}; core sd err {e[:, 2].mean():+.2%}",
        f"mixture of {conditions} conditional laws: KS {ks1:.4f} mean {me1:+.3f} sd spread "
        f"{sp1:+.2%}; core CPU {cpu:.1f} s ({cpu / conditions:.2f} s per condition)",
        f"  (the {conditions} conditions' own MC mixture mean is {(mc_mix - m_mean) / m_sd:+.3f} "
        "sd off the unconditional MC: the Sobol draw of S, the mixture's sampling error)",
        f"the same conditions' MC pooled (an exact core's mixture): KS {ks2:.4f} spread {sp2:+.2%}",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run one part and print its lines."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("explain", "cond", "control"))
    ap.add_argument("--case", choices=tuple(CASES), default="1f1b8x32")
    ap.add_argument("--cv", type=float, default=0.05)
    ap.add_argument("--samples", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--conditions", type=int, default=16)
    ap.add_argument("--cond-samples", type=int, default=20_000)
    a = ap.parse_args(argv)
    if a.part == "control":
        lines = control(a.case, a.cv)
    elif a.part == "explain":
        lines = explain(a.case, a.cv, a.samples, a.seed)
    else:
        lines = cond(a.case, a.cv, a.samples, a.seed, a.conditions, a.cond_samples)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
