"""Pipeline makespan: canonical-form methods against Monte Carlo (a study script, not a test).

For each case (schedule, size, latency family) it samples the makespan by vectorised Monte Carlo
(numpy, nodes in topological order, ``numpy.random.SeedSequence`` spawned per chunk) and compares
the normal approximations of ``canonical_makespan`` ("independent", "clark", "clark-mehler"):
KS distance to the MC sample; relative errors of mean, std, p50, p99, p99.9, spread p99 - p50 and
the p99 of the max over 512 replicas (MC: empirical quantile at 0.99^(1/512)); the mean and
replica-p99 errors in units of the true pipeline sigma (the informative scale, notes §1); and the
compute time (best of 3).

Usage::

    python validation/pipeline_methods.py [--samples N] [--json] [--cases NAME ...]

Op latencies: F mean 1, B mean 2 (divided by vpp for interleaved chunks), sd = cv * mean.
Families: normal; lognormal with the same mean and cv; "straggler" = normal + Bernoulli(0.01) x
Exp(scale 0.5 * mean), given to the analytic methods by its exact mean and sd. "mb-factor r.X":
a per-microbatch work factor shared by every op of one microbatch on every stage (its
loading factor_cv * mean) on top of private noise, r = correlation of two ops of one microbatch
(factor_cv 0.02 / cv 0.05 -> r 0.14; factor_cv 0.05 / cv 0.01 -> r 0.96). Imbalanced: stage factor
1 + 0.1 * U(-1, 1) (seed 7).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
from scipy import stats

from prism_analytic.engines.canonical import METHODS, canonical_makespan
from prism_analytic.schedules import pipeline_dag

REPLICAS = 512
STRAGGLER_P, STRAGGLER_SCALE = 0.01, 0.5


@dataclass
class Case:
    """One validation case: a schedule plus a latency model."""

    name: str
    stages: int
    microbatches: int
    schedule: str = "1f1b"
    vpp: int = 1
    cv: float = 0.05
    family: str = "normal"  # normal | lognormal | straggler
    imbalance: float = 0.0
    factor_cv: float = 0.0  # per-microbatch work factor: loading factor_cv * mean on Z_mb
    graph: nx.DiGraph = field(init=False)
    base: dict = field(init=False)  # node -> mean of the underlying normal/lognormal part

    def __post_init__(self) -> None:
        self.graph = pipeline_dag(self.stages, self.microbatches, self.schedule, self.vpp)
        fac = np.ones(self.stages)
        if self.imbalance:
            fac = 1 + self.imbalance * np.random.default_rng(7).uniform(-1, 1, self.stages)
        self.base = {
            n: (1.0 if n[0] == "F" else 2.0) / self.vpp * fac[n[1]] for n in self.graph.nodes
        }

    def analytic_inputs(self) -> tuple[dict, dict, dict | None]:
        """Exact per-op mean and sd (and loadings) handed to the analytic methods."""
        mean, std, load = {}, {}, None
        for n, m in self.base.items():
            sd = self.cv * m
            if self.family == "straggler":
                scale = STRAGGLER_SCALE * m
                extra_var = STRAGGLER_P * 2 * scale**2 - (STRAGGLER_P * scale) ** 2
                mean[n], std[n] = m + STRAGGLER_P * scale, math.sqrt(sd**2 + extra_var)
            else:
                mean[n], std[n] = m, sd
        if self.factor_cv:
            load = {n: {("mb", n[2]): self.factor_cv * m} for n, m in self.base.items()}
        return mean, std, load

    def sample_ops(self, nodes: list, k: int, rng: np.random.Generator, z_mb) -> np.ndarray:
        """Latency samples, shape (len(nodes), k)."""
        m = np.array([self.base[n] for n in nodes])[:, None]
        z = rng.standard_normal((len(nodes), k))
        if self.family == "lognormal":
            s2 = math.log1p(self.cv**2)
            d = m * np.exp(-s2 / 2 + math.sqrt(s2) * z)
        else:
            d = m * (1 + self.cv * z)
        if self.family == "straggler":
            hit = rng.random((len(nodes), k)) < STRAGGLER_P
            d += hit * rng.exponential(1.0, (len(nodes), k)) * STRAGGLER_SCALE * m
        if self.factor_cv:
            d += self.factor_cv * m * z_mb[[n[2] for n in nodes]]
        return d


def monte_carlo(case: Case, n: int, seed: int = 12345, chunk: int = 100_000) -> np.ndarray:
    """Makespan samples by vectorised MC over the DAG's topological generations."""
    g = case.graph
    gens = [list(x) for x in nx.topological_generations(g)]
    preds = {v: list(g.predecessors(v)) for v in g}
    n_chunks = -(-n // chunk)
    out = []
    for c, ss in enumerate(np.random.SeedSequence(seed).spawn(n_chunks)):
        rng = np.random.default_rng(ss)
        k = min(chunk, n - c * chunk)
        z_mb = rng.standard_normal((case.microbatches, k))
        remaining = {v: g.out_degree(v) for v in g}
        finish: dict = {}
        sink = None
        for gen in gens:
            lat = case.sample_ops(gen, k, rng, z_mb)
            for v, d in zip(gen, lat, strict=True):
                ps = preds[v]
                if ps:
                    start = finish[ps[0]]
                    for p in ps[1:]:
                        start = np.maximum(start, finish[p])
                    d = d + start
                finish[v] = d
                if remaining[v] == 0:
                    sink = d if sink is None else np.maximum(sink, d)
            for v in gen:
                for p in preds[v]:
                    remaining[p] -= 1
                    if remaining[p] == 0:
                        del finish[p]
        out.append(sink)
    return np.concatenate(out)


def _timed(fn, repeats: int = 3):
    best, res = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = fn()
        best = min(best, time.perf_counter() - t0)
    return res, best


def evaluate(case: Case, samples: int) -> tuple[list[dict], dict]:
    """Rows of metrics for every method, and MC facts for the case."""
    t0 = time.perf_counter()
    x = np.sort(monte_carlo(case, samples))
    mc_s = time.perf_counter() - t0
    mu, sd = x.mean(), x.std()
    q_rep = 0.99 ** (1 / REPLICAS)
    levels = np.array([0.5, 0.99, 0.999, q_rep])
    t50, t99, t999, trep = np.quantile(x, levels)
    # MC standard error of the replica-p99 from the order-statistic binomial band (+-1 sd of rank).
    p = 1 - q_rep
    k, dk = samples * q_rep, math.sqrt(samples * p * (1 - p))
    lo, hi = int(max(k - dk, 0)), int(min(k + dk, samples - 1))
    rep_se = (x[hi] - x[lo]) / 2
    mean, std, load = case.analytic_inputs()
    rows = []
    for method in METHODS:
        res, secs = _timed(
            lambda m=method: canonical_makespan(case.graph, mean, std, method=m, loadings=load)
        )
        a50, a99, a999 = res.quantile(np.array([0.5, 0.99, 0.999]))
        arep = res.replica_quantile(0.99, REPLICAS)
        rows.append(
            {
                "case": case.name,
                "method": method,
                "ks": float(stats.kstest(x, res.cdf).statistic),
                "mean": res.mean / mu - 1,
                "std": res.std / sd - 1,
                "p50": a50 / t50 - 1,
                "p99": a99 / t99 - 1,
                "p999": a999 / t999 - 1,
                "spread": (a99 - a50) / (t99 - t50) - 1,
                "rep512_p99": arep / trep - 1,
                "mean_sigma": (res.mean - mu) / sd,
                "rep512_p99_sigma": (arep - trep) / sd,
                "time_s": secs,
                "window": res.window,
            }
        )
    facts = {
        "case": case.name,
        "ops": case.graph.number_of_nodes(),
        "mc_samples": samples,
        "mc_s": mc_s,
        "mc_mean": mu,
        "mc_std": sd,
        "rep512_p99_se_sigma": rep_se / sd,
    }
    return rows, facts


CASES = [
    Case("1f1b 4x8", 4, 8),
    Case("1f1b 8x32", 8, 32),
    Case("1f1b 16x64", 16, 64),
    Case("1f1b 16x64 cv20", 16, 64, cv=0.2),
    Case("1f1b 32x64", 32, 64),
    Case("interleaved v2 8x32", 8, 32, schedule="interleaved", vpp=2),
    Case("imbalanced 8x32", 8, 32, imbalance=0.1),
    Case("imbalanced 8x32 cv20", 8, 32, cv=0.2, imbalance=0.1),
    Case("lognormal 8x32", 8, 32, family="lognormal"),
    Case("lognormal 8x32 cv20", 8, 32, cv=0.2, family="lognormal"),
    Case("mb-factor r.14 8x32", 8, 32, factor_cv=0.02),
    Case("mb-factor r.96 4x8", 4, 8, cv=0.01, factor_cv=0.05),
    Case("mb-factor r.96 8x32", 8, 32, cv=0.01, factor_cv=0.05),
    Case("straggler 8x32", 8, 32, family="straggler"),
]

SHORT = {"independent": "indep", "clark": "clark", "clark-mehler": "CM"}


def format_table(rows: list[dict], facts: list[dict]) -> str:
    """Fixed-width text table (errors in %, except KS and the sigma columns)."""
    head = (
        f"{'case':<21}{'method':<6}{'KS':>7}{'mean%':>8}{'std%':>7}{'p50%':>8}{'p99%':>8}"
        f"{'p99.9%':>8}{'sprd%':>7}{'r512%':>8}{'mean/s':>7}{'r512/s':>7}{'ms':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['case']:<21}{SHORT[r['method']]:<6}{r['ks']:>7.3f}{100 * r['mean']:>+8.3f}"
            f"{100 * r['std']:>+7.1f}{100 * r['p50']:>+8.3f}{100 * r['p99']:>+8.3f}"
            f"{100 * r['p999']:>+8.3f}{100 * r['spread']:>+7.1f}{100 * r['rep512_p99']:>+8.3f}"
            f"{r['mean_sigma']:>+7.2f}{r['rep512_p99_sigma']:>+7.2f}{1e3 * r['time_s']:>7.1f}"
        )
    lines.append("")
    lines.append("MC: case, ops, samples, MC seconds, MC s.e. of the replica p99 (sigma units)")
    for f in facts:
        lines.append(
            f"  {f['case']:<21}{f['ops']:>6}{f['mc_samples']:>9}{f['mc_s']:>7.1f}s"
            f"  se(r512)={f['rep512_p99_se_sigma']:.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1_000_000, help="MC samples per case")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--cases", nargs="*", help="substrings selecting cases (default: all)")
    args = ap.parse_args(argv)
    if args.samples < 100_000:
        ap.error("--samples must be >= 100000 (the replica-max p99 needs the 1-2e-5 tail)")
    cases = [c for c in CASES if not args.cases or any(s in c.name for s in args.cases)]
    rows, facts = [], []
    for case in cases:
        r, f = evaluate(case, args.samples)
        rows += r
        facts.append(f)
        if not args.json:
            print(f"done {case.name} (MC {f['mc_s']:.1f}s)", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"rows": rows, "mc": facts}, indent=1))
    else:
        print(format_table(rows, facts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
