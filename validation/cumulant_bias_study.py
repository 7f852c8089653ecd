"""Where the cumulant core's mean bias on deep lattices is born (issue #8, helper B).

``core_shape="cumulant"`` closes each max ``Y = B + (A - B)+`` around a Gram-Charlier law of
``D = A - B``; its mean uses ``D``'s excess kurtosis from the kurtosis core's He2 chaos. On
1F1B 16x64 / 32x64 (normal ops, CV 5%) its mean is ~+0.1 sd high; at CV 20% on interleaved
lattices it is ~-0.15 sd low. This study attributes the sink's mean error to the maxima.

``diag``: Monte Carlo keeps every node's finish time and, by back-tracking the argmax of every
max, each node's probability ``P_i`` of being on the critical path. A small shift of node
``i``'s mean moves the makespan's mean by ``P_i`` times it, so the sink's mean error is, to first
order, ``sum_i P_i b_i`` where ``b_i`` is the error *born* at max ``i``: the closure's
``E[D+]`` at the Monte Carlo mean difference (mean errors of the inputs are propagated, not
born) minus Monte Carlo's ``E[D+]``. ``b_i`` is split, by swapping one input of the
Gram-Charlier ``E[D+]`` at a time from the closure's value to Monte Carlo's, into:

* ``theta``: the closure's sd of ``D`` (its covariances) against Monte Carlo's;
* ``skew``: ``D``'s skewness from the closure's ``K`` against Monte Carlo's;
* ``kurt``: ``D``'s excess kurtosis (the estimate under test) against Monte Carlo's;
* ``law``: the Gram-Charlier ``E[D+]`` at Monte Carlo's own four moments against the true
  ``E[D+]`` (the law's error).

``--g2`` picks the estimate of ``D``'s excess kurtosis the closure runs with (``chaos``: the
product's, ``zero``, or ``mc``: Monte Carlo's own at every max, an oracle: what a perfect
estimator would give).

Usage::

    nice python validation/cumulant_bias_study.py diag --case 1f1b16x64 [--cv 0.05]
        [--samples 20000] [--g2 chaos|zero|mc] [--all-terms]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).parent))
from cumulant_closure_study import CumulantEngine, chaos_g2  # noqa: E402

import prism_analytic as pa  # noqa: E402
from prism_analytic.engines import pipeline_core as pc  # noqa: E402
from prism_analytic.engines.cumulant_core import rectifier_marginals  # noqa: E402
from prism_analytic.engines.kurtosis_core import MAX_KURTOSIS  # noqa: E402
from prism_analytic.engines.skew_core import skew_law  # noqa: E402
from prism_analytic.graph.pipeline import PipelineSpec, law_key  # noqa: E402

#: (stages, microbatches, schedule, vpp)
CASES = {
    "1f1b8x32": (8, 32, "1f1b", 1),
    "1f1b16x64": (16, 64, "1f1b", 1),
    "1f1b32x64": (32, 64, "1f1b", 1),
    "il8x32v2": (8, 32, "interleaved", 2),
    "il16x64v2": (16, 64, "interleaved", 2),
    "il32x64v2": (32, 64, "interleaved", 2),
}


def spec_for(case: str, cv: float) -> PipelineSpec:
    """Normal ops, F 1 / B 2 per stage divided by vpp, CV ``cv`` (the agreement suite's laws)."""
    p, m, sched, vpp = CASES[case]
    laws = {
        law_key(ph, s, c): pa.normal(mu / vpp, cv * mu / vpp)
        for ph, mu in (("F", 1.0), ("B", 2.0))
        for s in range(p)
        for c in range(vpp)
    }
    return PipelineSpec(p, m, laws, sched, vpp)


def sample_critical(st: dict, m_arr, s_arr, samples: int, seed: int):
    """Finish times of every node (float32) and each node's P(on the critical path)."""
    preds, pred2 = st["preds"], st["pred2"]
    n = len(preds)
    rng = np.random.default_rng(seed)
    fin = np.zeros((n + 1, samples), dtype=np.float32)  # row n: a missing predecessor
    first = np.zeros((n, samples), dtype=bool)  # the first predecessor was the later one
    for g in st["gens"]:
        a, b = fin[pred2[g, 0]], fin[pred2[g, 1]]
        first[g] = a >= b
        fin[g] = m_arr[g, None] + s_arr[g, None] * rng.standard_normal((len(g), samples))
        fin[g] += np.maximum(a, b)
    has_succ = np.zeros(n, dtype=bool)
    for ps in preds:
        has_succ[list(ps)] = True
    sinks = np.flatnonzero(~has_succ)
    crit = np.zeros((n + 1, samples), dtype=bool)
    top = sinks[np.argmax(fin[sinks], axis=0)]
    crit[top, np.arange(samples)] = True
    for g in reversed(st["gens"]):
        c = crit[g]
        f = first[g]
        for col, sel in ((0, f), (1, ~f)):
            rows, cols = np.nonzero(c & sel)
            crit[pred2[g[rows], col], cols] = True
    crit[n] = False
    return fin, crit[:n].mean(axis=1), sinks


class _Recording(CumulantEngine):
    """The prototype closure, recording each max's inputs (slots -> nodes) and ``D``'s law."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.g2_mean_only = not kwargs.get("qreg", False)  # the product's split
        self.rows: list[tuple] = []

    def max(self, a: int, b: int, node: int) -> int:
        C, K = self.C, self.K
        th2 = C[a, a] + C[b, b] - 2 * C[a, b]
        k3d = K[a, a, a] - 3 * K[a, a, b] + 3 * K[a, b, b] - K[b, b, b]
        if node >= 0 and th2 > 0:
            th = math.sqrt(th2)
            g1 = float(np.clip(k3d / th**3, -1.0, 1.0))
            g2 = float(np.clip(self.g2_by_node.get(node, 0.0), 0.0, MAX_KURTOSIS))
            na, nb = int(self.node_of[a]), int(self.node_of[b])
            cov = (C[a, a], C[b, b], C[a, b])
            self.rows.append((node, na, nb, self.mu[a] - self.mu[b], th, g1, g2, cov))
        return super().max(a, b, node)


def _ef(dm: float, th: float, g1: float, g2: float, lo: float = 0.0) -> float:
    """Gram-Charlier ``E[D+]`` (skewness clipped to [-1, 1], kurtosis to [lo, 4])."""
    return rectifier_marginals(dm, th, float(np.clip(g1, -1, 1)), float(np.clip(g2, lo, 4)))["Ef"]


def mc_g2(st: dict, fin: np.ndarray) -> dict[int, float]:
    """Monte Carlo's excess kurtosis of ``D`` at every two-input node (the oracle)."""
    pred2 = st["pred2"]
    out = {}
    for i in np.flatnonzero(pred2[:, 1] >= 0):
        d = fin[pred2[i, 0]].astype(np.float64) - fin[pred2[i, 1]]
        z = (d - d.mean()) / max(d.std(), 1e-300)
        out[int(i)] = float(np.mean(z**4) - 3.0)
    return out


def diag(
    case: str, cv: float, samples: int, seed: int, g2_mode: str, all_terms: bool = False
) -> list[str]:
    """The attribution of the sink's mean error (module docstring)."""
    spec = spec_for(case, cv)
    st = pc._structure(spec.stages, spec.microbatches, spec.schedule, spec.vpp)
    m_arr, s_arr, lmat = pc._factor_model(spec, st)
    fin, pcrit, sinks = sample_critical(st, m_arr, s_arr, samples, seed)
    if g2_mode == "chaos":
        g2 = chaos_g2(st, m_arr, s_arr, lmat)
    elif g2_mode == "mc":
        g2 = mc_g2(st, fin)
    else:
        g2 = {}
    # all_terms: D's kurtosis in every term, with the kurtosis-aware regression of e on D
    eng = _Recording(g2, qreg=all_terms)
    mu, var, k3 = eng.run(st, m_arr, s_arr)
    mk = fin[sinks].max(axis=0).astype(np.float64)
    sd_mc = float(mk.std())
    law = skew_law(mu, math.sqrt(var), float(np.clip(k3 / var**1.5, -2, 2)))
    ks = float(stats.kstest(mk, law.cdf).statistic)
    q50, q99 = np.quantile(mk, [0.5, 0.99])
    spread = (law.quantile(0.99) - law.quantile(0.5)) / (q99 - q50) - 1.0
    total = (mu - mk.mean()) / sd_mc
    parts = {k: 0.0 for k in ("theta", "skew", "kurt", "law")}
    g2e, g2t, w, top = [], [], [], []
    law_neg = 0.0
    gen_of = np.zeros(len(st["preds"]), dtype=int)
    for k, g in enumerate(st["gens"]):
        gen_of[g] = k
    by_fifth = np.zeros((5, 4))  # per fifth of the generations: theta, law, theta rel err, count
    vparts = np.zeros(3)  # theta's error: Var A, Var B, -2 Cov(A, B) (P(crit)-weighted)
    for node, na, nb, _, th_e, g1_e, g2_e, (va, vb, cab) in eng.rows:
        a = fin[na].astype(np.float64)
        b = fin[nb].astype(np.float64)
        d = a - b
        dm_t, th_t = float(d.mean()), float(d.std())
        if th_t <= 0:
            continue
        z = (d - dm_t) / th_t
        g1_t, g2_t = float(np.mean(z**3)), float(np.mean(z**4) - 3.0)
        true = float(np.maximum(d, 0.0).mean())
        e0 = _ef(dm_t, th_e, g1_e, g2_e)
        e1 = _ef(dm_t, th_t, g1_e, g2_e)
        e2 = _ef(dm_t, th_t, g1_t, g2_e)
        e3 = _ef(dm_t, th_t, g1_t, g2_t)
        p = pcrit[node]
        h = 1e-4 * th_t  # dE[D+] / d(theta^2), linearised at Monte Carlo's theta
        d_th = (_ef(dm_t, th_t + h, g1_e, g2_e) - _ef(dm_t, th_t - h, g1_e, g2_e)) / (2 * h)
        sens = p * d_th / (2.0 * th_t)
        vparts += sens * np.array(
            [va - a.var(), vb - b.var(), -2.0 * (cab - np.mean((a - a.mean()) * (b - b.mean())))]
        )
        quint = min(4, int(5 * gen_of[node] / len(st["gens"])))
        by_fifth[quint] += np.array([p * (e0 - e1), p * (e3 - true), th_e / th_t - 1.0, 1.0])
        parts["theta"] += p * (e0 - e1)
        parts["skew"] += p * (e1 - e2)
        parts["kurt"] += p * (e2 - e3)
        parts["law"] += p * (e3 - true)
        law_neg += p * (_ef(dm_t, th_t, g1_t, g2_t, lo=-2.0) - true)
        top.append((p * (e3 - true), node, dm_t / th_t, g1_t, g2_t, p, th_e / th_t - 1))
        g2e.append(g2_e)
        g2t.append(g2_t)
        w.append(p * abs(_ef(dm_t, th_t, g1_t, 1.0) - _ef(dm_t, th_t, g1_t, 0.0)))
    g2e, g2t, w = np.array(g2e), np.array(g2t), np.array(w)
    born = sum(parts.values())
    out = [
        f"{case} CV {cv:.0%} g2={g2_mode}{' (all terms)' if all_terms else ''}: "
        f"{len(eng.rows)} maxima; MC {samples} (seed {seed})",
        f"  sink mean error {total:+.4f} sd (MC se {1 / math.sqrt(samples):.4f}); "
        f"std {math.sqrt(var) / sd_mc - 1:+.2%}; first-order sum of born errors "
        f"{born / sd_mc:+.4f} sd; KS {ks:.4f} (DKW 95% {1.358 / math.sqrt(samples):.4f}), "
        f"spread p99-p50 {spread:+.2%}",
        "  born (sd of sink): " + ", ".join(f"{k} {v / sd_mc:+.4f}" for k, v in parts.items()),
        f"  D excess kurtosis, weighted by its E[D+] sensitivity x P(crit): estimate "
        f"{np.average(g2e, weights=w):.3f}, MC {np.average(g2t, weights=w):.3f}; "
        f"corr {np.corrcoef(g2e, g2t)[0, 1]:.3f}",
        "  theta's part split by its source (sd of sink): Var A "
        + ", Var B ".join(f"{v / sd_mc:+.4f}" for v in vparts[:2])
        + f", -2 Cov(A, B) {vparts[2] / sd_mc:+.4f}",
        f"  law error with D's kurtosis allowed below 0 (to -2): {law_neg / sd_mc:+.4f} sd",
    ]
    out.append(
        "  by fifth of the generations (theta / law born, sd of sink; mean theta error): "
        + "; ".join(
            f"{t / sd_mc:+.3f} / {lw / sd_mc:+.3f} ({e / max(n, 1):+.1%})"
            for t, lw, e, n in by_fifth
        )
    )
    top.sort(key=lambda r: -abs(r[0]))
    for lw, node, c, g1, g2, p, dth in top[:8]:
        out.append(
            f"    node {node}: law {lw / sd_mc:+.4f} sd, dm/th {c:+.2f}, skew {g1:+.2f}, "
            f"ex.kurt {g2:+.2f}, P(crit) {p:.2f}, theta err {dth:+.1%}"
        )
    return out


def laws(case: str, cv: float, samples: int, seed: int) -> list[str]:
    """The law term alone: ``E[D+]`` from Monte Carlo's moments of ``D`` under several laws.

    Each max's error against Monte Carlo's ``E[D+]``, weighted by ``P(crit)`` and summed, in
    sink sd: what a law of ``D`` given exact moments would contribute to the sink's mean error.
    """
    spec = spec_for(case, cv)
    st = pc._structure(spec.stages, spec.microbatches, spec.schedule, spec.vpp)
    m_arr, s_arr, _ = pc._factor_model(spec, st)
    fin, pcrit, sinks = sample_critical(st, m_arr, s_arr, samples, seed)
    sd_mc = float(fin[sinks].max(axis=0).astype(np.float64).std())
    pred2 = st["pred2"]
    names = ("normal (2 moments)", "Pearson III (3)", "Gram-Charlier (4, kurtosis >= 0)")
    names += ("Gram-Charlier (4, kurtosis >= -2)",)
    err = np.zeros(len(names))
    for i in np.flatnonzero(pred2[:, 1] >= 0):
        d = fin[pred2[i, 0]].astype(np.float64) - fin[pred2[i, 1]]
        dm, th = float(d.mean()), float(d.std())
        if th <= 0:
            continue
        z = (d - dm) / th
        g1, g2 = float(np.mean(z**3)), float(np.mean(z**4) - 3.0)
        true = float(np.maximum(d, 0.0).mean())
        p3 = skew_law(0.0, 1.0, float(np.clip(g1, -2, 2)))
        c = -dm / th  # E[(dm + th Z)+] = th E[(Z - c)+]; Pearson III by quadrature
        if c >= 0:
            zz = np.linspace(c, c + 12.0, 4001)
            e_p3 = th * float(np.trapezoid(p3.sf(zz), zz))
        else:  # E[(Z - c)+] = -c + E[(c - Z)+]
            zz = np.linspace(c - 12.0, c, 4001)
            e_p3 = th * (-c + float(np.trapezoid(p3.cdf(zz), zz)))
        est = (_ef(dm, th, 0.0, 0.0), e_p3, _ef(dm, th, g1, g2), _ef(dm, th, g1, g2, lo=-2.0))
        err += pcrit[i] * (np.array(est) - true)
    out = [
        f"{case} CV {cv:.0%}: law error of E[D+] at Monte Carlo's moments ({samples}, seed {seed})"
    ]
    out += [f"  {n}: {e / sd_mc:+.4f} sd" for n, e in zip(names, err, strict=True)]
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    dg = sub.add_parser("diag")
    dg.add_argument("--case", choices=tuple(CASES), default="1f1b16x64")
    dg.add_argument("--cv", type=float, default=0.05)
    dg.add_argument("--samples", type=int, default=20_000)
    dg.add_argument("--seed", type=int, default=3)
    dg.add_argument("--g2", choices=("chaos", "zero", "mc"), default="chaos")
    dg.add_argument("--all-terms", action="store_true")
    lw = sub.add_parser("laws")
    lw.add_argument("--case", choices=tuple(CASES), default="1f1b16x64")
    lw.add_argument("--cv", type=float, default=0.05)
    lw.add_argument("--samples", type=int, default=20_000)
    lw.add_argument("--seed", type=int, default=3)
    args = ap.parse_args(argv)
    if args.cmd == "laws":
        print("\n".join(laws(args.case, args.cv, args.samples, args.seed)), flush=True)
        return 0
    lines = diag(args.case, args.cv, args.samples, args.seed, args.g2, args.all_terms)
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
