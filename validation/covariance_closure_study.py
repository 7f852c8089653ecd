"""Deep-lattice mean bias: which of a max's mean, variance or covariance errors drives it (#8, M).

On deep 1F1B / interleaved lattices (16x64, 32x64, op CV 5%) every core's makespan mean is
0.02-0.1 sd high, and the bias grows with depth. ``cumulant_bias_study.py`` (helper B) split the
error born at each max into the closure's ``theta`` (sd of ``D = A - B``: its variances and
covariances) and the law of ``D``. This study asks which *output* of the max closure is wrong,
with two measurements against Monte Carlo that keeps every node's finish time:

``local``: each max's one-step error. At every max the closure's formulas are fed Monte Carlo's
exact moments of its inputs (means, variances, covariances of ``A``, ``B`` with every live node)
and their ``E[max]``, ``Var[max]`` and ``Cov(max, X_j)`` are compared with Monte Carlo's,
weighted by ``P(node critical)`` (back-tracked per draw, as B did). Closures: Clark's Gaussian
formulas (``Cov = Phi(a) Cov(A, C) + Phi(-a) Cov(B, C)``) and Clark with the Stein term the
cumulant core adds, ``kappa(e_j, D, D) E[f''] / 2``, at Monte Carlo's ``kappa(X_j, D, D)`` and
``D``'s own skewness (Gram-Charlier ``D``).

``oracle``: causal attribution. The closure runs forward; after each max its output's variance
(``var``), its covariances with the live nodes (``cov``) or both are overwritten with Monte
Carlo's. What is left of the sink's mean error when ``var`` / ``cov`` / both are exact says
which one drives it; with both exact, every later ``theta`` is Monte Carlo's and only the law of
``D`` (its ``E[D+]``) and the means are the closure's.

``grid``: the alternatives of step 2 against Monte Carlo on the grid (KS of the Pearson III
law of the sink's mean / std / third cumulant, mean error in sd, spread (p99 - p50) error);
see :data:`CLOSURES`.

Usage::

    nice python validation/covariance_closure_study.py local  --case 1f1b32x64 [--cv 0.05]
        [--ops normal|lognormal] [--samples 20000]
    nice python validation/covariance_closure_study.py oracle --case 1f1b32x64 [...]
    nice python validation/covariance_closure_study.py grid   --case 1f1b32x64 [...]
    nice python validation/covariance_closure_study.py laws   --case il16x64v2 [...]
    nice python validation/covariance_closure_study.py attainable --case il16x64v2 [...]

``laws``: ``E[D+]`` at Monte Carlo's own moments of every ``D`` under five laws (the law part
alone). ``attainable``: an oracle, the cumulant closure whose every max's mean comes from a
proper 4-moment law (Pearson I / Johnson SU) at Monte Carlo's skewness and kurtosis of ``D``,
with and without exact second moments. Results: ``validation/results/
covariance_closure_study.md``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import integrate, optimize, special, stats

sys.path.insert(0, str(Path(__file__).parent))
import cumulant_closure_study as ccs  # noqa: E402
from cumulant_closure_study import CumulantEngine, chaos_g2  # noqa: E402

import prism_analytic as pa  # noqa: E402
from prism_analytic.engines import pipeline_core as pc  # noqa: E402
from prism_analytic.engines.cumulant_core import rectifier_marginals  # noqa: E402
from prism_analytic.engines.kurtosis_core import kurtosis_pipeline  # noqa: E402
from prism_analytic.engines.skew_core import skew_law, skew_pipeline  # noqa: E402
from prism_analytic.graph.pipeline import PipelineSpec, law_key  # noqa: E402

#: (stages, microbatches, schedule, vpp); F 1 / B 2 per stage, divided by vpp
CASES = {
    "1f1b8x32": (8, 32, "1f1b", 1),
    "1f1b16x64": (16, 64, "1f1b", 1),
    "1f1b32x64": (32, 64, "1f1b", 1),
    "il8x32v2": (8, 32, "interleaved", 2),
    "il16x64v2": (16, 64, "interleaved", 2),
    "il32x64v2": (32, 64, "interleaved", 2),
}


def spec_for(case: str, cv: float, ops: str) -> PipelineSpec:
    """The agreement suite's lattice: F 1 / B 2 (divided by vpp), CV ``cv``, normal/lognormal."""
    p, m, sched, vpp = CASES[case]
    law = pa.normal if ops == "normal" else pa.lognormal
    laws = {
        law_key(ph, s, c): law(mu / vpp, cv * mu / vpp)
        for ph, mu in (("F", 1.0), ("B", 2.0))
        for s in range(p)
        for c in range(vpp)
    }
    return PipelineSpec(p, m, laws, sched, vpp)


def sample_nodes(st: dict, m_arr, s_arr, ops: str, samples: int, seed: int, crit: bool = True):
    """Finish times of every node (float32, one row per node) and P(node on the critical path)."""
    preds, pred2 = st["preds"], st["pred2"]
    n = len(preds)
    rng = np.random.default_rng(seed)
    fin = np.zeros((n + 1, samples), dtype=np.float32)  # row n: a missing predecessor (0)
    first = np.zeros((n, samples), dtype=bool)
    for g in st["gens"]:
        a, b = fin[pred2[g, 0]], fin[pred2[g, 1]]
        first[g] = a >= b
        z = rng.standard_normal((len(g), samples))
        if ops == "normal":
            x = m_arr[g, None] + s_arr[g, None] * z
        else:  # lognormal with the op's mean and sd
            sig2 = np.log1p((s_arr[g] / m_arr[g]) ** 2)
            x = np.exp((np.log(m_arr[g]) - 0.5 * sig2)[:, None] + np.sqrt(sig2)[:, None] * z)
        fin[g] = x
        fin[g] += np.maximum(a, b)
    has_succ = np.zeros(n, dtype=bool)
    for ps in preds:
        has_succ[list(ps)] = True
    sinks = np.flatnonzero(~has_succ)
    mk = fin[sinks].max(axis=0).astype(np.float64)
    if not crit:
        return fin[:n], None, mk
    crit = np.zeros((n + 1, samples), dtype=bool)
    top = sinks[np.argmax(fin[sinks], axis=0)]
    crit[top, np.arange(samples)] = True
    for g in reversed(st["gens"]):
        c = crit[g]
        f = first[g]
        for col, sel in ((0, f), (1, ~f)):
            rows, cols = np.nonzero(c & sel)
            crit[pred2[g[rows], col], cols] = True
    return fin[:n], crit[:n].mean(axis=1), mk


def skewnormal_pdf(z: np.ndarray, g1: float) -> np.ndarray:
    """Density of the standardised (mean 0, sd 1) skew-normal law of skewness ``g1``."""
    g1 = float(np.clip(g1, -0.99, 0.99))
    t = abs(g1) ** (2.0 / 3.0)
    delta = math.copysign(math.sqrt(0.5 * math.pi * t / (t + ((4 - math.pi) / 2) ** (2 / 3))), g1)
    alpha = delta / math.sqrt(1.0 - delta * delta)
    omega = 1.0 / math.sqrt(1.0 - 2.0 * delta * delta / math.pi)
    xi = -omega * delta * math.sqrt(2.0 / math.pi)
    u = (z - xi) / omega
    return 2.0 / omega * np.exp(-0.5 * u * u) / math.sqrt(2 * math.pi) * special.ndtr(alpha * u)


def law_marginals(dm: float, th: float, g1: float, g2: float = 0.0) -> dict[str, float]:
    """:func:`rectifier_marginals`'s moments of ``f = D+`` under a skew-normal law of ``D``.

    Same keys (bar the quadratic-regression ones), by Simpson quadrature on a grid starting at
    the kink ``c = -dm / th`` (no first-order error from it); ``g2`` is ignored: the skew-normal
    law's kurtosis follows from its skewness, and its density is never negative (Gram-Charlier's
    is, at ``|g1|`` near 1).
    """
    c = -dm / th
    hi = 9.0
    z = np.linspace(c, max(hi, c + 1.0), 2001) if c < hi else np.linspace(c, c + 1.0, 3)
    p = skewnormal_pdf(z, g1)
    zc = z - c

    def ey(a: int, b: int) -> float:  # E[(z - c)+^a z^b]
        return float(integrate.simpson(zc**a * z**b * p, x=z))

    m1 = ey(1, 0)
    p0 = float(skewnormal_pdf(np.array([c]), g1)[0])
    return {
        "P": ey(0, 0),
        "dens0": p0 / th,
        "Ef": th * m1,
        "Vf": th * th * (ey(2, 0) - m1 * m1),
        "CfD": th * th * ey(1, 1),
        "kfDD": th**3 * (ey(1, 2) - m1),
        "kffD": th**3 * (ey(2, 1) - 2 * m1 * ey(1, 1)),
        "k3f": th**3 * (ey(3, 0) - 3 * m1 * ey(2, 0) + 2 * m1**3),
    }


class MCMoments:
    """Monte Carlo moments of nodes and of the max of two nodes (centred float32 rows)."""

    def __init__(self, fin: np.ndarray) -> None:
        self.mean = fin.mean(axis=1, dtype=np.float64)
        fin -= self.mean[:, None].astype(np.float32)  # centred in place (memory)
        self.xc = fin
        self.n = fin.shape[1]

    def max_row(self, na: int, nb: int) -> np.ndarray:
        """Draws of ``max(X_na, X_nb)`` (float64)."""
        a = self.xc[na].astype(np.float64) + self.mean[na]
        b = self.xc[nb].astype(np.float64) + self.mean[nb]
        return np.maximum(a, b)

    def cov_with(self, y: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Covariances of the draws ``y`` with the given nodes."""
        yc = (y - y.mean()).astype(np.float32)
        return (self.xc[nodes] @ yc).astype(np.float64) / self.n


class ClosureEngine(CumulantEngine):
    """B's prototype closure with op third cumulants, a Clark mode and Monte Carlo oracles.

    ``mode``: ``"clark"`` (Gaussian ``D``, no Stein term: Clark's formulas with a full
    covariance matrix), ``"cumulant"`` (the prototype of ``core_shape="cumulant"``: skewness of
    ``D`` from ``K``, Stein terms, the chaos kurtosis in each max's mean only). ``oracle``: a
    set of ``{"var", "cov"}``: after each max the output's variance / covariances with the live
    nodes are overwritten with Monte Carlo's (``mc``).
    """

    def __init__(self, mode: str, g2=None, mc: MCMoments | None = None, oracle=()) -> None:
        super().__init__(g2 if mode == "cumulant" else None, skew=mode != "clark")
        # "pearson": the cumulant closure, each max's mean re-set by pearson_edplus (oracle)
        self.g2_mean_only = True
        self.mode = mode
        self.mc = mc
        self.oracle = set(oracle)
        self.lognormal_ops = False

    def max(self, a: int, b: int, node: int) -> int:
        """New slot holding ``max(X_a, X_b)`` (``b``: the larger-mean input), then the oracles."""
        if self.mode == "clark":
            y = self._clark_max(a, b, node)
        elif self.mode == "sn":
            # the prototype's max reads its module's rectifier_marginals: swap the law of D
            saved = ccs.rectifier_marginals
            ccs.rectifier_marginals = law_marginals
            try:
                y = super().max(a, b, node)
            finally:
                ccs.rectifier_marginals = saved
        else:
            y = super().max(a, b, node)
        if self.mode == "pearson" and node >= 0 and self.mc is not None:
            # the mean from a proper 4-moment law at Monte Carlo's skewness and kurtosis of D
            na, nb = int(self.node_of[a]), int(self.node_of[b])
            d = self.mc.xc[na].astype(np.float64) - self.mc.xc[nb]
            sd = float(d.std())
            th2 = self.C[a, a] + self.C[b, b] - 2 * self.C[a, b]
            if sd > 0 and th2 > 0:
                g1 = float(np.mean(d**3)) / sd**3
                g2 = float(np.mean(d**4)) / sd**4 - 3.0
                dm = self.mu[a] - self.mu[b]
                ef = pearson_edplus(dm, math.sqrt(th2), g1, g2)
                if math.isfinite(ef):
                    self.mu[y] = self.mu[b] + ef
        if self.oracle and node >= 0 and self.mc is not None:
            na, nb = int(self.node_of[a]), int(self.node_of[b])
            idx = np.array(sorted(self.active - {y}), dtype=np.intp)
            mrow = self.mc.max_row(na, nb)
            if "cov" in self.oracle:
                cov = self.mc.cov_with(mrow, self.node_of[idx])
                self.C[y, idx] = cov
                self.C[idx, y] = cov
            if "var" in self.oracle:
                self.C[y, y] = float(mrow.var())
        return y

    def _clark_max(self, a: int, b: int, node: int) -> int:
        """Clark's Gaussian closure with a full covariance matrix (no third cumulants)."""
        y = self.alloc()
        idx = np.array(sorted(self.active - {y}), dtype=np.intp)
        C = self.C
        th2 = C[a, a] + C[b, b] - 2 * C[a, b]
        if th2 <= 1e-12 * (C[a, a] + C[b, b]):
            self.release(y)
            return self.copy(b)
        th = math.sqrt(th2)
        dm = self.mu[a] - self.mu[b]
        self.record.append((node, self.node_of[idx].copy(), None, th, dm))
        r = rectifier_marginals(dm, th, 0.0, 0.0)
        beta = (C[a, idx] - C[b, idx]) / th2
        cov = C[b, idx] + beta * r["CfD"]  # = Phi(a) Cov(A, X) + Phi(-a) Cov(B, X)
        ib = int(np.searchsorted(idx, b))
        var = C[b, b] + 2 * (cov[ib] - C[b, b]) + r["Vf"]
        self.mu[y] = self.mu[b] + r["Ef"]
        C[y, idx] = cov
        C[idx, y] = cov
        C[y, y] = var
        return y

    def add(self, s: int, m: float, sd: float, k3: float = 0.0) -> None:
        """Add an op (with a lognormal's third cumulant when ``lognormal_ops``)."""
        if self.lognormal_ops and self.mode != "clark" and sd > 0.0:
            w = 1.0 + (sd / m) ** 2
            k3 = (w + 2.0) * math.sqrt(w - 1.0) * sd**3
        super().add(s, m, sd, k3)


def _sink_line(name: str, mu: float, var: float, k3: float, mk: np.ndarray) -> str:
    sd = math.sqrt(var)
    law = skew_law(mu, sd, float(np.clip(k3 / sd**3, -2, 2)))
    ks = float(stats.kstest(mk, law.cdf).statistic)
    q50, q99 = np.quantile(mk, [0.5, 0.99])
    spread = (law.quantile(0.99) - law.quantile(0.5)) / (q99 - q50) - 1.0
    return (
        f"  {name:28s} mean {(mu - mk.mean()) / mk.std():+.4f} sd  std {sd / mk.std() - 1:+.2%}  "
        f"KS {ks:.4f}  spread {spread:+.2%}"
    )


def _setup(case: str, cv: float, ops: str, samples: int, seed: int, crit: bool = True):
    spec = spec_for(case, cv, ops)
    st = pc._structure(spec.stages, spec.microbatches, spec.schedule, spec.vpp)
    m_arr, s_arr, lmat = pc._factor_model(spec, st)
    fin, pcrit, mk = sample_nodes(st, m_arr, s_arr, ops, samples, seed, crit)
    return spec, st, (m_arr, s_arr, lmat), fin, pcrit, mk


def _header(case, cv, ops, samples, seed, mk) -> str:
    se = 1.0 / math.sqrt(samples)
    return (
        f"{case} CV {cv:.0%} {ops} ops; MC {samples} draws (seed {seed}): sink mean "
        f"{mk.mean():.4f} sd {mk.std():.4f}; mean se {se:.4f} sd, DKW 95% "
        f"{1.358 * se:.4f}"
    )


def oracle(case: str, cv: float, ops: str, samples: int, seed: int) -> list[str]:
    """Sink errors of the closures with Monte Carlo's variances / covariances (docstring)."""
    _, st, (m_arr, s_arr, lmat), fin, _, mk = _setup(case, cv, ops, samples, seed)
    g2 = chaos_g2(st, m_arr, s_arr, lmat)
    mc = MCMoments(fin)
    out = [_header(case, cv, ops, samples, seed, mk)]
    for mode in ("clark", "cumulant"):
        for orc in ((), ("var",), ("cov",), ("var", "cov")):
            t0 = time.process_time()
            eng = ClosureEngine(mode, g2, mc, orc)
            eng.lognormal_ops = ops == "lognormal"
            mu, var, k = eng.run(st, m_arr, s_arr)
            name = f"{mode} oracle {'+'.join(orc) or 'none'}"
            out.append(_sink_line(name, mu, var, k, mk) + f"  ({time.process_time() - t0:.1f} s)")
    return out


def _clark_local(mu_a, mu_b, vaa, vbb, vab, ca, cb, kdd=None, g1=0.0):
    """One max's ``E``, ``Var``, ``Cov`` row from its inputs' moments (Clark; + Stein term)."""
    th2 = vaa + vbb - 2 * vab
    th = math.sqrt(max(th2, 1e-300))
    dm = mu_a - mu_b
    r = rectifier_marginals(dm, th, g1, 0.0)
    beta = (ca - cb) / th2
    cov = cb + beta * r["CfD"]
    if kdd is not None:  # Stein's first-order term in kappa(e_j, D, D)
        cov = cov + 0.5 * (kdd - beta * g1 * th**3) * r["dens0"]
    cov_b = vbb + (vab - vbb) / th2 * r["CfD"]
    var = vbb + 2 * (cov_b - vbb) + r["Vf"]
    return mu_b + r["Ef"], var, cov


#: how many live nodes nearest a max (smallest Var(max - X_j)) the pair-distance error reads
NEAREST = 4


def _corr_err(c: np.ndarray, c_t: np.ndarray, sv: float, sj: np.ndarray) -> float:
    """Mean error of a covariance row in correlation units (0 for no live node)."""
    return float(np.mean((c - c_t) / (sv * sj))) if c.size else 0.0


def local(case: str, cv: float, ops: str, samples: int, seed: int) -> list[str]:
    """Each max's one-step errors given Monte Carlo's input moments (module docstring)."""
    _, st, (m_arr, s_arr, lmat), fin, pcrit, mk = _setup(case, cv, ops, samples, seed)
    sd_mk = float(mk.std())
    mc = MCMoments(fin)
    eng = ClosureEngine("clark")
    eng.record = []
    eng.run(st, m_arr, s_arr)  # only to list each max's live nodes
    pred2 = st["pred2"]
    gen_of = np.zeros(len(st["preds"]), dtype=int)
    for k, g in enumerate(st["gens"]):
        gen_of[g] = k
    acc = {k: np.zeros((5, 2)) for k in ("E", "V", "C", "CS", "E_gc", "D2", "D2S")}
    for node, live, _, _, _ in eng.record:
        if node < 0:
            continue
        na, nb = int(pred2[node, 0]), int(pred2[node, 1])
        live = np.array([j for j in live if j >= 0 and j not in (na, nb)], dtype=np.intp)
        y = mc.max_row(na, nb)
        a = mc.xc[na].astype(np.float64)
        b = mc.xc[nb].astype(np.float64)
        vaa, vbb, vab = a.var(), b.var(), float(np.mean(a * b))
        ca = mc.xc[live] @ mc.xc[na] / mc.n if live.size else np.zeros(0)
        cb = mc.xc[live] @ mc.xc[nb] / mc.n if live.size else np.zeros(0)
        d = a - b
        dm = mc.mean[na] - mc.mean[nb]
        th = math.sqrt(d.var())
        g1 = float(np.clip(np.mean(d**3) / th**3, -1, 1))
        kdd = mc.xc[live] @ (d * d).astype(np.float32) / mc.n if live.size else np.zeros(0)
        e_t, v_t = float(y.mean()), float(y.var())
        c_t = mc.cov_with(y, live) if live.size else np.zeros(0)
        e_c, v_c, c_c = _clark_local(mc.mean[na], mc.mean[nb], vaa, vbb, vab, ca, cb)
        _, _, c_s = _clark_local(mc.mean[na], mc.mean[nb], vaa, vbb, vab, ca, cb, kdd, g1)
        g2 = float(np.mean((d - d.mean()) ** 4) / th**4 - 3.0)
        e_gc = mc.mean[nb] + rectifier_marginals(dm, th, g1, float(np.clip(g2, -2, 4)))["Ef"]
        p = pcrit[node]
        q = min(4, int(5 * gen_of[node] / len(st["gens"])))
        sv = math.sqrt(v_t)
        sj = np.sqrt(np.maximum(np.einsum("ij,ij->i", mc.xc[live], mc.xc[live]) / mc.n, 1e-30))
        acc["E"][q] += [p * (e_c - e_t), p]
        acc["E_gc"][q] += [p * (e_gc - e_t), p]
        acc["V"][q] += [p * (math.sqrt(v_c) / sv - 1.0), p]
        acc["C"][q] += [p * _corr_err(c_c, c_t, sv, sj), p]
        if live.size:  # Var(max - X_j) of the nearest live nodes: the later maxima's theta^2
            d2_t = v_t + sj**2 - 2 * c_t
            near = np.argsort(d2_t)[:NEAREST]
            for key, vv, cc in (("D2", v_c, c_c), ("D2S", v_c, c_s)):
                d2 = vv + sj[near] ** 2 - 2 * cc[near]
                acc[key][q] += [p * float(np.mean(d2 / d2_t[near] - 1.0)), p]
        acc["CS"][q] += [p * _corr_err(c_s, c_t, sv, sj), p]
    out = [_header(case, cv, ops, samples, seed, mk), "  by fifth of the generations:"]
    names = {
        "E": "E[max] err (Clark), sum P*err in sink sd",
        "E_gc": "E[max] err (Gram-Charlier at MC's 4 moments), sum P*err, sink sd",
        "V": "sd[max] rel err (Clark), P-weighted mean",
        "C": "corr(max, X_j) err (Clark), P-weighted mean over maxima of mean over j",
        "CS": "corr(max, X_j) err (Clark + Stein at MC kappa(X_j, D, D)), same",
        "D2": f"Var(max - X_j) rel err, {NEAREST} nearest live X_j (Clark), P-weighted",
        "D2S": f"Var(max - X_j) rel err, {NEAREST} nearest (Clark + Stein), P-weighted",
    }
    for k, lab in names.items():
        a = acc[k]
        if k.startswith("E"):
            vals = [f"{s / sd_mk:+.4f}" for s, _ in a]
            tot = f"{a[:, 0].sum() / sd_mk:+.4f}"
        else:
            vals = [f"{s / max(w, 1e-30):+.4f}" for s, w in a]
            tot = f"{a[:, 0].sum() / max(a[:, 1].sum(), 1e-30):+.4f}"
        out.append(f"    {lab}: {', '.join(vals)}; all {tot}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cmd", choices=("local", "oracle", "grid", "laws", "attainable"))
    ap.add_argument("--case", choices=tuple(CASES), default="1f1b16x64")
    ap.add_argument("--cv", type=float, default=0.05)
    ap.add_argument("--ops", choices=("normal", "lognormal"), default="normal")
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args(argv)
    fn = {"local": local, "oracle": oracle, "grid": grid, "laws": laws, "attainable": attainable}
    fn = fn[args.cmd]
    print("\n".join(fn(args.case, args.cv, args.ops, args.samples, args.seed)), flush=True)
    return 0


def _edplus_from_sf(sf, lo: float, hi: float) -> float:
    """``E[D+] = int_0^inf P(D > x) dx`` for a law supported on ``[lo, hi]``."""
    a = max(lo, 0.0)
    if hi <= a:
        return 0.0
    x = np.linspace(a, hi, 4001)
    return float(np.trapezoid(sf(x), x)) + a  # below lo > 0 the survival function is 1


def pearson_edplus(dm: float, th: float, g1: float, g2: float) -> float:
    """``E[D+]`` under a proper 4-moment law: Pearson I (4-parameter beta) or Johnson SU.

    Pearson I (closed-form method of moments) where ``g1^2 - 2 < g2 < 1.5 g1^2`` (between the
    impossible region and the Pearson III line: platykurtic or mildly leptokurtic skewed laws);
    Johnson SU (matched numerically) above it. Below the impossible line: NaN.
    """
    if g2 <= g1 * g1 - 2.0 + 1e-9:
        return float("nan")
    if g2 < 1.5 * g1 * g1 - 1e-9:
        nu = 3.0 * (g2 - g1 * g1 + 2.0) / (1.5 * g1 * g1 - g2)
        r = 1.0 / math.sqrt(1.0 + 16.0 * (nu + 1.0) / ((nu + 2.0) ** 2 * g1 * g1))
        al, be = 0.5 * nu * (1 - r), 0.5 * nu * (1 + r)  # right skew: alpha < beta
        if g1 < 0:
            al, be = be, al
        width = 0.5 * th * math.sqrt((2.0 + nu) ** 2 * g1 * g1 + 16.0 * (1.0 + nu))
        lo = dm - al / nu * width
        law = stats.beta(al, be, loc=lo, scale=width)
        return _edplus_from_sf(law.sf, lo, lo + width)
    if abs(g1) < 1e-9 and abs(g2) < 1e-9:
        return th * rectifier_marginals(dm / th, 1.0, 0.0, 0.0)["Ef"]

    def miss(v):
        a, b = v[0], math.exp(v[1])
        sk, ku = stats.johnsonsu.stats(a, b, moments="sk")
        return [float(sk) - g1, float(ku) - g2]

    sol = optimize.fsolve(miss, [-g1, 1.0], full_output=True)
    if sol[2] != 1:
        return float("nan")
    a, b = sol[0][0], math.exp(sol[0][1])
    m0, v0 = stats.johnsonsu.stats(a, b, moments="mv")
    law = stats.johnsonsu(a, b, loc=dm - float(m0) * th / math.sqrt(v0), scale=th / math.sqrt(v0))
    lo_q, hi_q = law.ppf(1e-12), law.isf(1e-12)
    return _edplus_from_sf(law.sf, lo_q, hi_q)


def laws(case: str, cv: float, ops: str, samples: int, seed: int) -> list[str]:
    """``E[D+]`` at Monte Carlo's exact moments of each ``D`` under several laws (P(crit) sums).

    The law part alone: what each law would leave in the sink's mean if the closure had every
    moment of ``D`` right (normal; Gram-Charlier at 3 and 4 moments, kurtosis clipped to
    [-2, 4]; skew-normal at 3; Pearson I / Johnson SU at 4, proper densities).
    """
    _, st, _, fin, pcrit, mk = _setup(case, cv, ops, samples, seed)
    sd_mk = float(mk.std())
    pred2 = st["pred2"]
    names = ("normal", "Gram-Charlier 3", "skew-normal 3", "Gram-Charlier 4", "Pearson I/SU 4")
    err = np.zeros(len(names))
    wsum, nan_w = 0.0, 0.0
    for i in np.flatnonzero(pred2[:, 1] >= 0):
        if pcrit[i] < 1e-3:  # maxima off every critical path add nothing to the sum
            continue
        d = fin[pred2[i, 0]].astype(np.float64) - fin[pred2[i, 1]]
        dm, th = float(d.mean()), float(d.std())
        if th <= 0:
            continue
        z = (d - dm) / th
        g1, g2 = float(np.mean(z**3)), float(np.mean(z**4) - 3.0)
        true = float(np.maximum(d, 0.0).mean())
        g1c, g2c = float(np.clip(g1, -1, 1)), float(np.clip(g2, -2, 4))
        est = [
            rectifier_marginals(dm, th, 0.0, 0.0)["Ef"],
            rectifier_marginals(dm, th, g1c, 0.0)["Ef"],
            law_marginals(dm, th, g1)["Ef"],
            rectifier_marginals(dm, th, g1c, g2c)["Ef"],
            pearson_edplus(dm, th, g1, g2),
        ]
        if not math.isfinite(est[-1]):
            nan_w += pcrit[i]
            est[-1] = est[-2]
        err += pcrit[i] * (np.array(est) - true)
        wsum += pcrit[i]
    out = [_header(case, cv, ops, samples, seed, mk)]
    out += [f"  {n:16s} law error {e / sd_mk:+.4f} sd" for n, e in zip(names, err, strict=True)]
    out.append(
        f"  (Pearson I/SU unmatched on P-weight {nan_w:.2f} of {wsum:.1f}: Gram-Charlier used)"
    )
    return out


#: the closures the grid compares (``ClosureEngine`` modes)
CLOSURES = ("clark", "cumulant", "sn")


def attainable(case: str, cv: float, ops: str, samples: int, seed: int) -> list[str]:
    """The closure with each max's mean from Pearson I / SU at Monte Carlo's moments of ``D``.

    With exact second moments too: what a closure with the right first four moments of every
    ``D`` and a proper 4-moment law would reach (an oracle, not a method).
    """
    _, st, (m_arr, s_arr, lmat), fin, _, mk = _setup(case, cv, ops, samples, seed, False)
    mc = MCMoments(fin)
    out = [_header(case, cv, ops, samples, seed, mk)]
    for orc in ((), ("var", "cov")):
        t0 = time.process_time()
        eng = ClosureEngine("pearson", None, mc, orc)
        eng.lognormal_ops = ops == "lognormal"
        mu, var, k = eng.run(st, m_arr, s_arr)
        name = f"pearson-MC-g1g2{' (exact 2nd moments)' if orc else ''}"
        out.append(_sink_line(name, mu, var, k, mk) + f"  ({time.process_time() - t0:.1f} s)")
    return out


def grid(case: str, cv: float, ops: str, samples: int, seed: int) -> list[str]:
    """The closures against Monte Carlo, each plain and with exact second moments (docstring)."""
    spec, st, (m_arr, s_arr, lmat), fin, _, mk = _setup(case, cv, ops, samples, seed, False)
    g2 = chaos_g2(st, m_arr, s_arr, lmat)
    mc = MCMoments(fin)
    out = [_header(case, cv, ops, samples, seed, mk)]
    shape = "skew" if spec.schedule == "1f1b" else "kurtosis"
    t0 = time.process_time()
    r, _ = (skew_pipeline if shape == "skew" else kurtosis_pipeline)(spec)
    out.append(
        _sink_line(f"product {shape} core", r.mean, r.std**2, r.skew * r.std**3, mk)
        + f"  ({time.process_time() - t0:.1f} s)"
    )
    for mode in CLOSURES:
        for orc in ((), ("var", "cov")):
            t0 = time.process_time()
            eng = ClosureEngine(mode, g2, mc, orc)
            eng.lognormal_ops = ops == "lognormal"
            mu, var, k = eng.run(st, m_arr, s_arr)
            name = f"{mode}{' (exact 2nd moments)' if orc else ''}"
            out.append(_sink_line(name, mu, var, k, mk) + f"  ({time.process_time() - t0:.1f} s)")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
