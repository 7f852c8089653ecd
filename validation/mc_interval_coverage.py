"""Coverage of Monte Carlo's 95% quantile intervals, and the exact std of low-CV steps.

Usage::

    nice python validation/mc_interval_coverage.py [--seeds 400]

Prints, for one exponential op, how often ``predict(g, "montecarlo", samples=n, seed=s)
.quantile_bracket(q)`` holds the true quantile ``-log(1 - q)`` over ``--seeds`` seeds
(n = 2, 20, 100, 1,000 through ``predict``; 10,000 on the interval construction directly),
then the std of the issue's low-CV examples against their closed-form or quadrature
references (recorded in ``validation/results/mc_interval_coverage.md``).
``tests/engines/test_mc_interval_coverage.py`` and ``tests/distributions/test_exact_moments.py``
assert the same numbers in CI.
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
from scipy import integrate, stats

import prism_analytic as pa
from prism_analytic.engines.order_stat_interval import order_statistic_interval

LEVELS = (0.5, 0.99, 0.999)


def coverage_through_predict(n: int, seeds: int) -> list[float]:
    """Share of seeds whose interval holds the true quantile, per level of :data:`LEVELS`."""
    g = pa.StepGraph("one-exp")
    g.add_op("a", pa.exponential(1.0))
    truth = np.array([-math.log1p(-q) for q in LEVELS])
    hits = np.zeros(len(LEVELS))
    for seed in range(seeds):
        low, high = pa.predict(g, "montecarlo", samples=n, seed=seed).quantile_bracket(
            np.array(LEVELS)
        )
        hits += (low <= truth) & (truth <= high)
    return list(hits / seeds)


def coverage_direct(n: int, seeds: int) -> list[float]:
    """The same share, sorting exponential draws and building the interval directly."""
    draws = np.sort(np.random.default_rng(n).exponential(size=(seeds, n)), axis=1)
    out = []
    for q in LEVELS:
        truth = -math.log1p(-q)
        ends = np.array([order_statistic_interval(row, q) for row in draws])
        out.append(float(np.mean((ends[:, 0] <= truth) & (truth <= ends[:, 1]))))
    return out


def normal_max_sd(n: int) -> float:
    """Standard deviation of the max of n N(0, 1), from its density (quadrature)."""

    def density(x: float) -> float:
        return n * stats.norm.pdf(x) * math.exp((n - 1) * stats.norm.logcdf(x))

    kw = {"epsabs": 0.0, "epsrel": 1e-13, "limit": 500, "points": [stats.norm.isf(1.0 / n)]}
    mean = integrate.quad(lambda x: x * density(x), -12, 12, **kw)[0]
    return math.sqrt(integrate.quad(lambda x: (x - mean) ** 2 * density(x), -12, 12, **kw)[0])


def std_rows() -> list[tuple[str, float, float]]:
    """(case, analytic std, reference) for the low-CV examples."""
    rows = []
    body = pa.StepGraph("b")
    body.add_op("a", pa.normal(1.0, 7.07e-5))
    body.add_op("c", pa.normal(1.0, 7.07e-5), after=["a"])
    g = pa.StepGraph("g")
    g.add_replica_group("r", body, 1)
    exact = math.sqrt(2) * 7.07e-5  # independent: variances add
    rows.append(("2 x normal(1, 7.07e-5) in series, n=1", pa.predict(g).std(), exact))
    body = pa.StepGraph("b")
    body.add_op("a", pa.normal(1.0, 1e-3))
    g = pa.StepGraph("g")
    g.add_replica_group("r", body, 1000)
    rows.append(("max of 1000 normal(1, 1e-3)", pa.predict(g).std(), 1e-3 * normal_max_sd(1000)))
    body = pa.StepGraph("b")
    body.add_op("fwd", pa.point_mass(0.0123))
    body.add_op("bwd", pa.point_mass(0.0311), after=["fwd"])
    g = pa.StepGraph("g")
    g.add_replica_group("r", body, 4096)
    rows.append(("no variability (constants), n=4096", pa.predict(g).std(), 0.0))
    return rows


def main() -> None:
    """Print the coverage table and the std rows."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=400)
    args = p.parse_args()
    warnings.simplefilter("ignore")
    print(f"95% interval coverage over {args.seeds} seeds (levels {LEVELS})")
    for n in (2, 20, 100, 1000):
        cov = coverage_through_predict(n, args.seeds)
        print(f"  predict n={n:<6} " + "  ".join(f"{c:.4f}" for c in cov))
    for n in (1000, 10_000):
        cov = coverage_direct(n, args.seeds)
        print(f"  direct  n={n:<6} " + "  ".join(f"{c:.4f}" for c in cov))
    print("std of exact results")
    for name, got, ref in std_rows():
        err = f"rel {abs(got - ref) / ref:.1e}" if ref else f"abs {abs(got):.1e}"
        print(f"  {name:<40} {got:.10g}  reference {ref:.10g}  ({err})")


if __name__ == "__main__":
    main()
