"""Deep tied lattices: a third-cumulant closure that enters every max before its moments are set.

Issue #8 follow-up to ``sibling_correlation_study.py`` (results in
``validation/results/cumulant_closure_study.md``). That study found that sibling maxima come out
under-correlated because Stein's ``Cov(X, D+)`` misses the joint cumulant ``kappa(X, D, D)``
(``D = A - B``, the input difference of a max), which Clark-Mehler carries only as its n = 2
Mehler term at a He2-chaos estimate that barely tracks the truth (correlation 0.15 / -0.04 on
ring lattices); adding the *exact* term after the core had set its residual weights helped two
cases and broke two.

Prototype tested here ("cumulant closure"): no residual model at all. Each live node carries
its mean, its covariance with every live node (``C``) and its joint third cumulant with every
pair of live nodes (``K``, an ``L x L x L`` tensor). A max ``Y = B + f(D)``, ``f = (.)+``, is
closed at second order around a Gram-Charlier law of ``D`` (skewness from ``K``, optionally an
excess kurtosis): with ``X_j = beta_j D + e_j`` (``e_j`` uncorrelated with ``D``)::

    Cov(Y, X_j)      = Cov(B, X_j) + beta_j Cov(f, D) + kappa(e_j, D, D) E[f''] / 2
    kappa(Y, X_j, X_l) = kappa(B, X_j, X_l) + beta_j beta_l kappa(f, D, D)
                       + (beta_j kappa(e_l, D, D) + beta_l kappa(e_j, D, D)) k
                       + E[f'] kappa(D, e_j, e_l),    k = (2 E[f'] - E[D] E[f'']) / 2
    kappa(f, f, X_j) = beta_j kappa(f, f, D) + kappa(e_j, D, D) (E[f'] - E[f] E[f''])

(Stein's identities to first order in the third cumulants of ``e``; the terms in ``D`` alone are
exact moments of the rectifier under the Gram-Charlier law). With Gaussian inputs every formula
is exact. So the third cumulant ``kappa(X, D, D)`` that the sibling covariances need is the one
the closure itself propagates, and the covariances, the variances and the third cumulants of
every node come from one consistent model; the makespan gets the Pearson III law of its mean,
std and ``K[sink, sink, sink]``.

Variants (``--modes``): ``k3`` (skewness of ``D`` from ``K``, no kurtosis), ``k3g2`` (+ the
kurtosis core's He2-chaos excess kurtosis of each ``D``, recorded from a kurtosis-core run of the
same DAG: a hybrid used only to see whether the kurtosis term is what is missing), ``k3sym``
(``D``'s skewness set to 0 in the marginal terms). Normal ops only.

Usage::

    nice python validation/cumulant_closure_study.py engine --case il8x8v4 [--mc-samples N]
    nice python validation/cumulant_closure_study.py diag --case il8x8v4 [--local-samples N]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special, stats

sys.path.insert(0, str(Path(__file__).parent))
from sibling_correlation_study import CASES as _SIBLING_CASES  # noqa: E402
from sibling_correlation_study import body_spec  # noqa: E402

from prism_analytic.engines import pipeline_core as pc  # noqa: E402
from prism_analytic.engines.kurtosis_core import _KurtosisEngine, kurtosis_pipeline  # noqa: E402
from prism_analytic.engines.pipeline_mc import sample_pipeline  # noqa: E402
from prism_analytic.engines.skew_core import SkewResult  # noqa: E402

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
#: (stages, microbatches, schedule, vpp); normal ops at CV 5% (``body_spec``).
CASES = {
    **_SIBLING_CASES,
    "1f1b16x64": (16, 64, "1f1b", 1),
    "1f1b32x64": (32, 64, "1f1b", 1),
    "il32x64v2": (32, 64, "interleaved", 2),
}
MAX_G1 = 1.0
MAX_G2 = 4.0


def rectifier_marginals(dm: float, th: float, g1: float, g2: float) -> dict[str, float]:
    """Moments of ``f = D+`` and its joint cumulants with ``D`` under a Gram-Charlier law of D.

    ``D = dm + th Z``, density of ``Z`` ``phi(z) (1 + g1 He3 / 6 + g2 He4 / 24)``. Partial moments
    ``int_c^inf z^n p(z) dz`` from ``J_n = int_c^inf z^n phi``; ``c = -dm / th``.
    """
    c = -dm / th
    if c < 0:
        # f = D + (-D)+: evaluate the mirror (small tail quantities, no cancellation)
        m = rectifier_marginals(-dm, th, -g1, g2)
        ef = dm + m["Ef"]
        # f = D + h, h = (-D)+: moments by multilinearity (cumulants of (D, h))
        vd, k3d = th * th, g1 * th**3
        cov_hd = -m["CfD"]  # Cov(h, D) = -Cov(h', D') with D' = -D
        k_hdd = m["kfDD"]  # kappa(h, D, D) = kappa(h', D', D') (two sign flips)
        k_hhd = -m["kffD"]
        return {
            "P": 1.0 - m["P"],
            "dens0": m["dens0"],
            "Ef": ef,
            "Vf": vd + 2 * cov_hd + m["Vf"],
            "CfD": vd + cov_hd,
            "kfDD": k3d + k_hdd,
            "kffD": k3d + 2 * k_hdd + k_hhd,
            "k3f": k3d + 3 * k_hdd + 3 * k_hhd + m["k3f"],
            "var_q": m["var_q"],
            "q_f": m["q_f"],
            "q_fz": vd * m["var_q"] - m["q_fz"],
            "q_ff": vd * m["var_q"] - 2 * m["q_fz"] + m["q_ff"],
        }
    phi = _INV_SQRT_2PI * math.exp(-0.5 * c * c)
    j = [special.ndtr(-c), phi]
    for n in range(2, 9):
        j.append(c ** (n - 1) * phi + (n - 1) * j[n - 2])
    pm = [
        j[n]
        + g1 / 6.0 * (j[n + 3] - 3 * j[n + 1])
        + g2 / 24.0 * (j[n + 4] - 6 * j[n + 2] + 3 * j[n])
        for n in range(5)
    ]

    def ey(a: int, b: int) -> float:  # E[(z - c)+^a z^b]
        return sum(math.comb(a, k) * (-c) ** (a - k) * pm[k + b] for k in range(a + 1))

    m1 = ey(1, 0)
    he3 = c**3 - 3 * c
    he4 = c**4 - 6 * c * c + 3
    dens = phi * (1 + g1 * he3 / 6 + g2 * he4 / 24) / th
    return {
        "P": pm[0],
        "dens0": dens,
        "Ef": th * m1,
        "Vf": th * th * (ey(2, 0) - m1 * m1),
        "CfD": th * th * ey(1, 1),
        "kfDD": th**3 * (ey(1, 2) - m1),
        "kffD": th**3 * (ey(2, 1) - 2 * m1 * ey(1, 1)),
        "k3f": th**3 * (ey(3, 0) - 3 * m1 * ey(2, 0) + 2 * m1**3),
        # Cov(q, .) with q = z^2 - 1 - g1 z (orthogonal to 1 and z), per unit of th^2, for the
        # quadratic regression of e on D (mode q): f, (f - Ef) z and (f - Ef)^2
        "var_q": 2.0 + g2 - g1 * g1,
        "q_f": th * (ey(1, 2) - m1 - g1 * ey(1, 1)),
        "q_fz": th * th * (ey(1, 3) - g1 * ey(1, 2) - ey(1, 1)),
        "q_ff": th
        * th
        * (ey(2, 2) - ey(2, 0) - g1 * ey(2, 1) - 2 * m1 * (ey(1, 2) - m1 - g1 * ey(1, 1))),
    }


class CumulantEngine:
    """Mean, covariance and third-cumulant tensor over live nodes (module docstring)."""

    def __init__(
        self, g2_by_node: dict[int, float] | None = None, skew: bool = True, qreg: bool = False
    ) -> None:
        self.qreg = qreg
        self.g2_mean_only = False
        self.cap = 16
        self.mu = np.zeros(self.cap)
        self.C = np.zeros((self.cap, self.cap))
        self.K = np.zeros((self.cap, self.cap, self.cap))
        self.free = list(range(self.cap - 1, -1, -1))
        self.active: set[int] = set()
        self.node_of = np.full(self.cap, -1)
        self.g2_by_node = g2_by_node or {}
        self.skew = skew
        self.record: list[tuple] = []  # (node, live nodes, kappa(X_j, D, D)) for diag

    def _grow(self) -> None:
        old, new = self.cap, 2 * self.cap
        mu = np.zeros(new)
        mu[:old] = self.mu
        C = np.zeros((new, new))
        C[:old, :old] = self.C
        K = np.zeros((new, new, new))
        K[:old, :old, :old] = self.K
        nd = np.full(new, -1)
        nd[:old] = self.node_of
        self.mu, self.C, self.K, self.node_of = mu, C, K, nd
        self.free = list(range(new - 1, old - 1, -1)) + self.free
        self.cap = new

    def alloc(self) -> int:
        """A free slot (growing the arrays when none is left)."""
        if not self.free:
            self._grow()
        s = self.free.pop()
        self.active.add(s)
        return s

    def release(self, s: int) -> None:
        """Return a slot to the free list."""
        self.active.discard(s)
        self.free.append(s)

    def zeros(self) -> int:
        """A new slot holding the constant 0."""
        s = self.alloc()
        self.mu[s] = 0.0
        self.C[s, :] = 0.0
        self.C[:, s] = 0.0
        self.K[s] = 0.0
        self.K[:, s] = 0.0
        self.K[:, :, s] = 0.0
        return s

    def copy(self, src: int) -> int:
        """A new slot holding a copy of slot ``src``."""
        s = self.alloc()
        self.mu[s] = self.mu[src]
        self.C[s, :] = self.C[src, :]
        self.C[:, s] = self.C[:, src]
        self.K[s] = self.K[src]
        self.K[:, s] = self.K[:, src]
        self.K[:, :, s] = self.K[:, :, src]
        return s

    def add(self, s: int, m: float, sd: float, k3: float = 0.0) -> None:
        """Add an independent op (mean, sd, third cumulant) to slot ``s``."""
        self.mu[s] += m
        self.C[s, s] += sd * sd
        self.K[s, s, s] += k3

    def max(self, a: int, b: int, node: int) -> int:
        """New slot holding ``max(X_a, X_b)`` (``b``: the larger-mean input)."""
        y = self.alloc()
        idx = np.array(sorted(self.active - {y}), dtype=np.intp)
        C, K = self.C, self.K
        dm = self.mu[a] - self.mu[b]
        c = C[a, idx] - C[b, idx]  # Cov(D, X_j)
        th2 = C[a, a] + C[b, b] - 2 * C[a, b]
        Ka, Kb = K[a][np.ix_(idx, idx)], K[b][np.ix_(idx, idx)]
        KD = Ka - Kb  # kappa(D, X_j, X_l)
        kdd = K[a, a, idx] - 2 * K[a, b, idx] + K[b, b, idx]  # kappa(D, D, X_j)
        k3d = K[a, a, a] - 3 * K[a, a, b] + 3 * K[a, b, b] - K[b, b, b]
        ib = int(np.searchsorted(idx, b))
        if th2 <= 1e-12 * (C[a, a] + C[b, b]):
            # tie: the larger-mean input (b)
            self.active.discard(y)
            self.free.append(y)
            return self.copy(b)
        th = math.sqrt(th2)
        self.record.append((node, self.node_of[idx].copy(), kdd.copy(), th, dm))
        g1 = float(np.clip(k3d / th**3, -MAX_G1, MAX_G1)) if self.skew else 0.0
        g2 = float(np.clip(self.g2_by_node.get(node, 0.0), 0.0, MAX_G2))
        r = rectifier_marginals(dm, th, g1, 0.0 if self.g2_mean_only else g2)
        if self.g2_mean_only and g2:
            r["Ef"] = rectifier_marginals(dm, th, g1, g2)["Ef"]
        P, dens, ef = r["P"], r["dens0"], r["Ef"]
        beta = c / th2
        k3d_used = g1 * th**3
        ke = kdd - beta * k3d_used  # kappa(e_j, D, D)
        if self.qreg:  # E[e | D] quadratic in D under D's Gram-Charlier law
            u = ke / (th2 * r["var_q"])
            s_f, s_fz, s_ff = u * r["q_f"], u * r["q_fz"], u * r["q_ff"]
        else:  # Stein's first-order terms (the same under a Gaussian D)
            s_f, s_fz, s_ff = 0.5 * ke * dens, 0.5 * ke * (2 * P - dm * dens), ke * (P - ef * dens)
        cov = C[b, idx] + beta * r["CfD"] + s_f
        var = C[b, b] + 2 * (cov[ib] - C[b, b]) + r["Vf"]
        kfde = s_fz  # kappa(f, D, e_j)
        kdee = KD - np.outer(beta, beta) * k3d_used - np.outer(beta, ke) - np.outer(ke, beta)
        kf = np.outer(beta, beta) * r["kfDD"] + np.outer(beta, kfde) + np.outer(kfde, beta)
        kf += P * kdee
        ky = Kb + kf
        kff = beta * r["kffD"] + s_ff  # kappa(f, f, X_j)
        kyy = K[b, b, idx] + 2 * kf[ib] + kff
        kyyy = K[b, b, b] + 3 * kf[ib, ib] + 3 * kff[ib] + r["k3f"]
        self.mu[y] = self.mu[b] + ef
        C[y, idx] = cov
        C[idx, y] = cov
        C[y, y] = var
        K[y][np.ix_(idx, idx)] = ky
        K[idx[:, None], y, idx[None, :]] = ky
        K[idx[:, None], idx[None, :], y] = ky
        K[y, y, idx] = kyy
        K[y, idx, y] = kyy
        K[idx, y, y] = kyy
        K[y, y, y] = kyyy
        return y

    def run(self, st: dict, m_arr: np.ndarray, s_arr: np.ndarray) -> tuple[float, float, float]:
        """(mean, variance, kappa3) of the makespan of a pipeline structure ``st``."""
        preds = st["preds"]
        n = len(preds)
        remaining = np.zeros(n, dtype=int)
        for ps in preds:
            for p in ps:
                remaining[p] += 1
        slot = np.full(n, -1)
        for gen in st["gens"]:
            for i in gen:
                ps = preds[i]
                if not ps:
                    s = self.zeros()
                elif len(ps) == 1:
                    s = self.copy(slot[ps[0]])
                else:
                    a, b = slot[ps[0]], slot[ps[1]]
                    if self.mu[b] < self.mu[a]:
                        a, b = b, a
                    s = self.max(a, b, int(i))
                self.add(s, m_arr[i], s_arr[i])
                self.node_of[s] = i
                slot[i] = s
                for p in ps:
                    remaining[p] -= 1
                    if remaining[p] == 0:
                        self.release(slot[p])
        sinks = [i for i in range(n) if remaining[i] == 0 and slot[i] in self.active]
        s = slot[sinks[0]]
        for k in sinks[1:]:
            a, b = s, slot[k]
            if self.mu[b] < self.mu[a]:
                a, b = b, a
            s = self.max(a, b, -1)
        return float(self.mu[s]), float(self.C[s, s]), float(self.K[s, s, s])


class _G2Recorder(_KurtosisEngine):
    """The kurtosis core, recording the excess kurtosis it gives each max's ``D``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.g2_seq: list[np.ndarray] = []

    def excess_kurtosis(self, ia, ib, th2):
        g2 = super().excess_kurtosis(ia, ib, th2)
        self.g2_seq.append(g2.copy())
        return g2


def chaos_g2(st: dict, m_arr, s_arr, lmat) -> dict[int, float]:
    """Each max node's excess kurtosis of ``D`` as the kurtosis core estimates it."""
    eng = _G2Recorder.for_dag(lmat.shape[1], st["window"], st["gens"], None)
    eng.run(st["gens"], st["preds"], m_arr, s_arr, lmat)
    seq = np.concatenate(eng.g2_seq)
    nodes = [int(i) for g in st["gens"] for i in g if len(st["preds"][i]) >= 2]
    return dict(zip(nodes, seq[: len(nodes)].tolist(), strict=True))


def engine(case: str, mc_samples: int, seed: int, modes: list[str]) -> list[str]:
    """KS / mean / std of the closure variants and the kurtosis core against Monte Carlo."""
    spec = body_spec(*CASES[case])
    st = pc._structure(spec.stages, spec.microbatches, spec.schedule, spec.vpp)
    m_arr, s_arr, lmat = pc._factor_model(spec, st)
    x = sample_pipeline(spec, mc_samples, np.random.default_rng(seed))
    out = [f"{case}: {spec.n_ops} ops; Monte Carlo {mc_samples} (seed {seed})"]

    def line(name, mean, std, skew, secs):
        law = SkewResult(mean, std, skew, 0, spec.n_ops).law()
        ks = stats.kstest(x, law.cdf).statistic
        return (
            f"  {name:10s} KS {ks:.4f}  mean {(mean - x.mean()) / x.std():+.3f} sd  "
            f"std {std / x.std() - 1:+.2%}  skew {skew:+.3f} (MC {stats.skew(x):+.3f})  "
            f"({secs:.1f} s)"
        )

    for shape in ("skew", "kurtosis"):
        from prism_analytic.engines.skew_core import skew_pipeline

        t0 = time.perf_counter()
        r, _ = (skew_pipeline if shape == "skew" else kurtosis_pipeline)(spec)
        out.append(line(shape, r.mean, r.std, r.skew, time.perf_counter() - t0))
    g2 = chaos_g2(st, m_arr, s_arr, lmat) if any(m.startswith("k3g2") for m in modes) else None
    for mode in modes:
        t0 = time.perf_counter()
        eng = CumulantEngine(
            g2 if mode.startswith("k3g2") else None, skew=mode != "k3sym", qreg=mode.endswith("q")
        )
        eng.g2_mean_only = mode.endswith("m")
        mu, var, k3 = eng.run(st, m_arr, s_arr)
        sd = math.sqrt(var)
        sk = float(np.clip(k3 / sd**3, -2, 2))
        out.append(line(mode, mu, sd, sk, time.perf_counter() - t0))
        print(out[-1], file=sys.stderr, flush=True)
    return out


def diag(case: str, samples: int, seed: int) -> str:
    """The closure's ``kappa(X_j, D, D)`` against the Monte Carlo oracle at every max."""
    from lattice_closure_study import sample_nodes

    fin, st, (m_arr, s_arr, _) = sample_nodes(case, samples, seed)
    eng = CumulantEngine()
    eng.run(st, m_arr, s_arr)
    pred2 = st["pred2"]
    est, true = [], []
    for node, live, kdd, _, _ in eng.record:
        if node < 0:
            continue
        a, b = fin[pred2[node, 0]], fin[pred2[node, 1]]
        d = a - b
        dc = d - d.mean()
        xs = fin[live]
        xc = xs - xs.mean(axis=1, keepdims=True)
        true.append(xc @ (dc * dc) / samples)
        est.append(kdd)
    e, t = np.concatenate(est), np.concatenate(true)
    return (
        f"{case}: {len(e)} (max, live node) pairs; "
        f"corr(closure, MC) {np.corrcoef(e, t)[0, 1]:.3f}; "
        f"sums closure {e.sum():.4g} / MC {t.sum():.4g}; slope MC on closure "
        f"{np.dot(e, t) / np.dot(e, e):.3f}"
    )


GRID_SHAPES = ("normal", "skew", "kurtosis", "cumulant")


def readme_job(samples: int, seed: int) -> list[str]:
    """The README main job's own body (llama3-405b at 65,536 GPUs): the four shapes vs MC.

    As ``lattice_closure_study.py readme-job`` (same body, samples and seed), plus this core.
    """
    from prism_analytic.engines.cumulant_core import cumulant_pipeline
    from prism_analytic.engines.skew_core import skew_pipeline
    from prism_analytic.graph import PIPELINE, REPLICA
    from prism_analytic.workload.builder import build_step_graph
    from prism_analytic.workload.jobs import build_job

    def body(sg):
        for _, d in sg.graph.nodes(data=True):
            if d["type"] == PIPELINE:
                return d["spec"]
            if d["type"] == REPLICA and (found := body(d["body"])) is not None:
                return found
        return None

    spec = body(build_step_graph(build_job("llama3-405b", 65536)))
    x = sample_pipeline(spec, samples, np.random.default_rng(seed))
    mu, sd, _ = pc.pipeline_makespan(spec)
    laws = {"normal": (stats.norm(mu, sd), mu, sd, 0.0)}
    runs = (("skew", skew_pipeline), ("kurtosis", kurtosis_pipeline))
    for name, run in (*runs, ("cumulant", cumulant_pipeline)):
        t0 = time.perf_counter()
        r, _ = run(spec)
        laws[name] = (r.law(), r.mean, r.std, time.perf_counter() - t0)
    out = [
        f"body {spec.stages} x {spec.microbatches} {spec.schedule} vpp {spec.vpp}, "
        f"{spec.n_ops} ops; {samples} samples, seed {seed}"
    ]
    for name, (law, mean, std, secs) in laws.items():
        ks = stats.kstest(x, law.cdf).statistic
        out.append(
            f"{name}: KS {ks:.4f}, mean {(mean - x.mean()) / x.std():+.3f} sd, "
            f"std {std / x.std() - 1:+.2%} ({secs:.1f} s)"
        )
    return out


def grid(deep: bool, only: list[str] | None, samples: int, json_path: str | None) -> str:
    """``lattice_closure_study.py grid`` (same cases, seed, Monte Carlo) with ``cumulant`` too."""
    import lattice_closure_study as lcs

    mod = lcs._choice_module()
    cases = [c for c in mod.grid(deep) if not c.name.startswith(("fsdp", "op-by-op"))]
    cases.append(
        mod.Case(
            "README body interleaved 16x16 v8 normal 5%",
            "pipeline-interleaved, symmetric ops",
            lcs.readme_body,
        )
    )
    if only:
        cases = [c for c in cases if any(s in c.name for s in only)]
    lcs.SHAPES = GRID_SHAPES  # grid_rows reads the module's shape list
    rows = lcs.grid_rows(mod, cases, samples, mod.SEED, json_path)
    return grid_markdown(rows)


def grid_markdown(rows: list[dict]) -> str:
    """Per case: KS / spread error / mean error / std error of each shape, and the time."""
    by_case: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["core_shape"]] = r
    out = [
        "| case | KS normal / skew / kurtosis / cumulant | spread error | mean error (sd) "
        "| std error | cumulant s | DKW 95% |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, sh in by_case.items():
        rs = [sh[x] for x in GRID_SHAPES]

        def col(key: str, fmt: str, rs: list[dict] = rs) -> str:
            return " / ".join(format(r[key], fmt) for r in rs)

        out.append(
            f"| {name} | {col('ks', '.4f')} | {col('spread_err', '+.1%')} | "
            f"{col('mean_err_sd', '+.3f')} | {col('std_err', '+.1%')} | "
            f"{rs[-1]['analytic_s']:.2f} | {rs[0]['dkw_95']:.4f} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    en = sub.add_parser("engine")
    en.add_argument("--case", choices=tuple(CASES), default="il8x8v4")
    en.add_argument("--mc-samples", type=int, default=100_000)
    en.add_argument("--seed", type=int, default=8)
    en.add_argument("--modes", nargs="+", default=["k3", "k3q", "k3g2", "k3g2q"])
    dg = sub.add_parser("diag")
    dg.add_argument("--case", choices=("il8x8v4", "1f1b8x32"), default="il8x8v4")
    dg.add_argument("--local-samples", type=int, default=40_000)
    dg.add_argument("--seed", type=int, default=2)
    gr = sub.add_parser("grid")
    gr.add_argument("--samples", type=int, default=100_000)
    gr.add_argument("--deep", action="store_true")
    gr.add_argument("--only", nargs="+", metavar="SUBSTRING")
    gr.add_argument("--json", metavar="FILE")
    rj = sub.add_parser("readme-job")
    rj.add_argument("--samples", type=int, default=20_000)
    rj.add_argument("--seed", type=int, default=5)
    rd = sub.add_parser("render")
    rd.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    if args.cmd == "readme-job":
        print("\n".join(readme_job(args.samples, args.seed)))
    elif args.cmd == "grid":
        print(grid(args.deep, args.only, args.samples, args.json))
    elif args.cmd == "render":
        import json

        print(grid_markdown([r for f in args.files for r in json.load(open(f))]))
    elif args.cmd == "engine":
        print("\n".join(engine(args.case, args.mc_samples, args.seed, args.modes)))
    else:
        print(diag(args.case, args.local_samples, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
