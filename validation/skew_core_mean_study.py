"""Does the skew core's mean ignore the ops' third cumulant? (research; no product change).

The skew core (:mod:`prism_analytic.engines.skew_core`) closes every max with Clark's mean and
variance (``_FullEngine._correct`` returns ``clark[4], clark[5]``): they read the inputs' means,
variances and covariance only. The ops' third cumulants enter the *third cumulant of the sink*
(through its linear loadings), which shapes the Pearson III law but moves neither its mean nor
its std. This script measures what that costs where ``core_shape="auto"`` uses the skew core
(``explicit, skewed ops``) and on small op-by-op 1F1B lattices, and prototypes the fix.

Prototypes (this file only; they reuse :class:`~prism_analytic.engines.kurtosis_core.
_KurtosisEngine`, whose ``_correct`` already carries the ops' skew terms, with its fourth
cumulant switched off):

* ``skew+k3`` -- every max gets the Gram-Charlier *skewness* correction of ``D = A - B``:
  ``E[max] += -theta phi(alpha) alpha g1 / 6``, ``g1`` from the recent ops' loadings
  (``sum d_r^3 kappa3_r / theta^3``), plus the variance / covariance Stein terms;
* ``skew+k3m`` -- the same mean term only (Clark's variance and covariances kept; the op
  loadings are still propagated so that later maxima see their ``g1``);
* ``skew+k3v`` -- ``skew+k3`` without its mean term (Clark's mean; the variance and
  covariance terms kept): with ``skew+k3m`` it splits the effect into mean and spread.

Two checks:

1. **One max** of two independent lognormals (CV 5% / 20%, mean gap 0 to 2 theta): the exact
   ``E[max]`` and ``sd`` by quadrature (``scipy.integrate.quad`` of ``1 - F_A F_B``) against
   the skew core, the prototypes and the kurtosis core (an independent oracle).
2. **DAGs**: each graph by ``pa.predict(..., core_shape=X)`` for the product shapes and by the
   prototypes (the skew shape with the engine swapped in, monkeypatched here only), against
   ``pa.predict(..., "montecarlo", samples=N, seed=S)``: KS (with the sample's DKW 95% band),
   mean error in Monte Carlo sd, std error, spread (p99 - p50) error.

Usage::

    nice python validation/skew_core_mean_study.py [--samples N] [--seed S] [--only SUBSTR]
        [--replica-samples N] [--no-one-max]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from scipy import integrate, stats

sys.path.insert(0, str(Path(__file__).parent))
from core_shape_choice import REPLICAS, fsdp, in_replicas, pipe  # noqa: E402

import prism_analytic as pa  # noqa: E402
from prism_analytic.engines import skew_core  # noqa: E402
from prism_analytic.engines.kurtosis_core import (  # noqa: E402
    MAX_SKEW_D,
    _KurtosisEngine,
    gram_charlier_max,
)
from prism_analytic.graph import StepGraph  # noqa: E402
from prism_analytic.validation.scenarios import SCENARIOS  # noqa: E402

SEED = 20261210  # fresh: not a seed of the suite or of core_shape_choice's readings
SAMPLES = 100_000
SHAPES = ("normal", "skew", "kurtosis", "cumulant", "auto")


class OpSkewEngine(_KurtosisEngine):
    """The kurtosis engine without its fourth cumulant: only the ops' skewness terms."""

    shape = "skew+k3"

    def excess_kurtosis(self, ia: np.ndarray, ib: np.ndarray, th2: np.ndarray) -> np.ndarray:
        """Zero: ``D`` is taken as mesokurtic (the prototype isolates the third cumulant)."""
        return np.zeros(len(ia))


class OpSkewMeanEngine(_KurtosisEngine):
    """Clark's max with only the Gram-Charlier skewness term of its mean."""

    shape = "skew+k3m"

    def _correct(self, ia, ib, clark, vb, cab, th2):  # noqa: D102 (the parent's contract)
        t, tc, thph, _, mu, var, tie = clark
        ok = ~tie & (th2 > 0)
        th = np.sqrt(np.where(ok, th2, 1.0))
        if not self.R:
            return mu, var, None
        la, lb = self.L[ia], self.L[ib]
        d = la - lb
        g1 = np.where(ok, (d**3 * self.K3[None, :]).sum(axis=1) / th**3, 0.0)
        g1 = np.clip(g1, -MAX_SKEW_D, MAX_SKEW_D)
        d_mu, _ = gram_charlier_max(
            self.mu[ia] - self.mu[ib], th, t, thph, cab, vb, np.zeros(len(ia)), g1
        )
        # no extra covariance with the ops; the new node's op loadings are still T la + Tc lb
        extra = (np.zeros_like(d), la, lb, t, tc)
        return mu + np.where(ok, d_mu, 0.0), var, extra


class OpSkewSpreadEngine(OpSkewEngine):
    """``skew+k3`` without its mean term: only the variance and covariance corrections."""

    shape = "skew+k3v"

    def _correct(self, ia, ib, clark, vb, cab, th2):  # noqa: D102 (the parent's contract)
        _, var, extra = super()._correct(ia, ib, clark, vb, cab, th2)
        return clark[4], var, extra  # Clark's mean


ENGINES = {"skew+k3": OpSkewEngine, "skew+k3m": OpSkewMeanEngine, "skew+k3v": OpSkewSpreadEngine}


@contextlib.contextmanager
def skew_engine(engine: type) -> Iterator[None]:
    """``core_shape="skew"`` evaluated by ``engine`` (restored on exit).

    The skew core's entry points (:func:`~.skew_core.skew_makespan` for explicit cores,
    :func:`~.skew_core.cached_skew_pipeline` for compact pipelines) look its engine class up
    by name when called; the cache keys on ``engine.shape``, so results do not mix.
    """
    orig = skew_core._FullEngine
    skew_core._FullEngine = engine
    try:
        yield
    finally:
        skew_core._FullEngine = orig


def exact_max(a: pa.Distribution, b: pa.Distribution) -> tuple[float, float]:
    """Mean and sd of ``max(A, B)``, A and B independent, by quadrature of its CDF."""
    lo = min(float(a.quantile(1e-12)), float(b.quantile(1e-12)))
    hi = max(float(a.quantile(1 - 1e-15)), float(b.quantile(1 - 1e-15)))

    def sf(x: float) -> float:
        return 1.0 - float(a.cdf(x)) * float(b.cdf(x))

    m1 = lo + integrate.quad(sf, lo, hi, limit=400, epsabs=1e-14)[0]
    m2 = lo * lo + integrate.quad(lambda x: 2 * x * sf(x), lo, hi, limit=400, epsabs=1e-14)[0]
    return m1, math.sqrt(max(m2 - m1 * m1, 0.0))


def one_max_table() -> str:
    """Check 1: one max of two lognormals, engines against quadrature."""
    import networkx as nx

    from prism_analytic.engines.kurtosis_core import kurtosis_makespan
    from prism_analytic.engines.skew_core import third_cumulant

    g = nx.DiGraph([("a", "c"), ("b", "c")])
    lines = [
        "| CV | gap / theta | exact mean | mean err (in sd of max): skew | skew+k3 | skew+k3m "
        "| kurtosis | sd err: skew | skew+k3 | skew+k3m |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cv in (0.05, 0.2):
        for gap in (0.0, 0.5, 1.0, 2.0):
            sd = cv  # op mean 1
            theta = sd * math.sqrt(2.0)
            la, lb = (
                pa.lognormal(1.0 + gap * theta, sd * (1.0 + gap * theta)),
                pa.lognormal(1.0, sd),
            )
            em, es = exact_max(la, lb)
            mean = {"a": la.mean(), "b": lb.mean(), "c": 0.0}
            std = {"a": la.std(), "b": lb.std(), "c": 0.0}
            k3 = {"a": third_cumulant(la), "b": third_cumulant(lb), "c": 0.0}
            res = {"skew": skew_core.skew_makespan(g, mean, std, kappa3=k3)}
            for name, eng in ENGINES.items():
                res[name] = skew_core._makespan(eng, g, mean, std, None, None, k3)
            res["kurtosis"] = kurtosis_makespan(g, mean, std, kappa3=k3)
            me = {k: (r.mean - em) / es for k, r in res.items()}
            se = {k: r.std / es - 1 for k, r in res.items()}
            lines.append(
                f"| {cv:.0%} | {gap:g} | {em:.6f} | {me['skew']:+.4f} | {me['skew+k3']:+.4f} | "
                f"{me['skew+k3m']:+.4f} | {me['kurtosis']:+.4f} | {se['skew']:+.2%} | "
                f"{se['skew+k3']:+.2%} | {se['skew+k3m']:+.2%} |"
            )
    return "\n".join(lines)


def cases() -> list[tuple[str, Callable[[], StepGraph]]]:
    """The DAGs: the suite's fsdp_overlap, FSDP bodies and op-by-op 1F1B lattices, lognormal."""
    out: list[tuple[str, Callable[[], StepGraph]]] = [
        ("fsdp_overlap (suite: AG/RS lognormal 10%)", SCENARIOS["fsdp_overlap"].build)
    ]
    for layers, cv in ((8, 0.05), (8, 0.2), (16, 0.2)):
        out.append(
            (
                f"fsdp {layers} layers lognormal {cv:.0%}",
                lambda a=(layers, cv): fsdp(a[0], "lognormal", a[1]),
            )
        )
    for p, m in ((4, 8), (6, 16)):
        for cv in (0.05, 0.2):
            out.append(
                (
                    f"op-by-op 1f1b {p}x{m} lognormal {cv:.0%}",
                    lambda a=(p, m, cv): pipe(a[0], a[1], "1f1b", "lognormal", a[2], compact=False),
                )
            )
    # reading D's worst case of the class: the FSDP body in 512 replicas (--replica-samples)
    out.append(
        (
            f"fsdp 8 layers lognormal 20% x{REPLICAS}",
            lambda: in_replicas(fsdp(8, "lognormal", 0.2)),
        )
    )
    # helper M's case (compact: the pipeline class, where auto does not use the skew core)
    for p, m in ((8, 32), (16, 64)):
        out.append(
            (
                f"compact 1f1b {p}x{m} lognormal 5%",
                lambda a=(p, m): pipe(a[0], a[1], "1f1b", "lognormal", 0.05),
            )
        )
    return out


def measure(name: str, build: Callable[[], StepGraph], samples: int, seed: int) -> list[str]:
    """Rows (markdown) of every shape and prototype for one DAG against Monte Carlo."""
    graph = build()
    t0 = time.process_time()
    mc = pa.predict(graph, "montecarlo", samples=samples, seed=seed)
    mc_cpu = time.process_time() - t0
    x = mc.distribution.samples
    mean, sd = float(np.mean(x)), float(np.std(x))
    q50, q99 = np.quantile(x, [0.5, 0.99])
    dkw = float(mc.diagnostics["dkw_95"])
    rows = []
    runs: list[tuple[str, Callable[[], object]]] = [
        (s, lambda s=s: pa.predict(graph, "analytic", core_shape=s)) for s in SHAPES
    ]
    for proto, eng in ENGINES.items():

        def run(eng=eng):
            with skew_engine(eng):
                return pa.predict(graph, "analytic", core_shape="skew")

        runs.append((proto, run))
    for label, fn in runs:
        t0 = time.process_time()
        res = fn()
        cpu = time.process_time() - t0
        cores = res.diagnostics["cores"]
        used = cores[0].get("shape") if cores else "-"
        cls = cores[0].get("core_class") if cores else "-"
        a50, a99 = (float(res.quantile(q)) for q in (0.5, 0.99))
        ks = float(stats.kstest(x, res.cdf).statistic)
        rows.append(
            f"| {name} | {label} ({used}) | {ks:.4f} | {(res.mean() - mean) / sd:+.3f} | "
            f"{res.std() / sd - 1:+.2%} | {(a99 - a50) / (q99 - q50) - 1:+.2%} | {cpu:.2f} |"
        )
    rows.append(
        f"| {name} | Monte Carlo: {samples:,} samples, seed {seed}, DKW 95% {dkw:.4f}, "
        f"class {cls} | | | | | {mc_cpu:.1f} |"
    )
    return rows


def kurtosis_vs_proto(names: list[str]) -> str:
    """Check 3: the kurtosis core against ``skew+k3`` (differences of the cores' moments)."""
    lines = [
        "| case | mean diff (sd) | std ratio - 1 | skewness diff |",
        "|---|---|---|---|",
    ]
    for name, build in cases():
        if names and not any(s in name for s in names):
            continue
        graph = build()
        (k,) = pa.predict(graph, "analytic", core_shape="kurtosis").diagnostics["cores"]
        with skew_engine(OpSkewEngine):
            (s,) = pa.predict(graph, "analytic", core_shape="skew").diagnostics["cores"]
        lines.append(
            f"| {name} | {(k['mean_s'] - s['mean_s']) / k['std_s']:.1e} | "
            f"{k['std_s'] / s['std_s'] - 1:.1e} | {k['skew'] - s['skew']:.1e} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print both tables (markdown)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=SAMPLES)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--only", action="append", default=[], help="case name substring")
    ap.add_argument("--no-one-max", action="store_true", help="skip check 1")
    ap.add_argument(
        "--replica-samples", type=int, default=10_000, help="Monte Carlo steps of x512 cases"
    )
    args = ap.parse_args(argv)
    if not args.no_one_max:
        print("## Check 1: one max of two independent lognormals vs quadrature\n")
        print(one_max_table(), "\n", flush=True)
    print("## Check 2: DAGs vs Monte Carlo\n")
    print("| case | shape (engine used) | KS | mean err (sd) | std err | spread err | CPU s |")
    print("|---|---|---|---|---|---|---|", flush=True)
    for name, build in cases():
        if args.only and not any(s in name for s in args.only):
            continue
        n = args.replica_samples if name.endswith(f"x{REPLICAS}") else args.samples
        for row in measure(name, build, n, args.seed):
            print(row, flush=True)
    print("\n## Check 3: kurtosis core vs skew+k3 (same cases)\n")
    print(kurtosis_vs_proto(args.only))
    return 0


if __name__ == "__main__":
    sys.exit(main())
