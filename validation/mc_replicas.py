"""Monte Carlo on large replica groups of multi-op bodies against closed forms.

Usage: ``python validation/mc_replicas.py`` (about a minute). For n = 1e3, 1e6, 1e9 copies of
``exponential(1) -> exponential(1)`` (a Gamma(2) body) and of a chain of three normals (a
normal body), ``predict(..., "montecarlo", samples=20_000)`` with default settings: the p50
and p99 estimates, their intervals (order statistics widened by the tail pool's estimated KS
error) and whether the closed-form quantile of the maximum, ``isf(1 - q^(1/n))``, lies inside.
"""

from __future__ import annotations

import math
import time
import warnings

from scipy import stats

import prism_analytic as pa
from prism_analytic.graph import StepGraph


def chain(*ops: pa.Distribution) -> StepGraph:
    """A body that runs ``ops`` one after another."""
    body = StepGraph("body")
    prev: list[str] = []
    for i, op in enumerate(ops):
        prev = [body.add_op(f"o{i}", op, prev)]
    return body


def row(label: str, g: StepGraph, exact: dict[float, float]) -> str:
    """One line: estimates, intervals, closed forms, inside or not, pool error, time."""
    start = time.perf_counter()
    r = pa.predict(g, "montecarlo", samples=20_000)
    seconds = time.perf_counter() - start
    cells = []
    for q in (0.5, 0.99):
        low, high = r.quantile_bracket(q)
        inside = "IN" if low <= exact[q] <= high else "OUT"
        cells.append(
            f"p{q * 100:g} {r.quantile(q):.4g} [{low:.4g}, {high:.4g}] "
            f"exact {exact[q]:.4g} {inside}"
        )
    ks = sum(p["ks_error"] for p in r.diagnostics["pooled_groups"])
    return f"{label:<22} " + "; ".join(cells) + f"; pool KS {ks:.3g}; {seconds:.1f} s"


def main() -> None:
    """Print one row per body and copy count."""
    warnings.simplefilter("ignore")
    sd = math.sqrt(0.01 + 0.04 + 0.0025)
    for n in (10**3, 10**6, 10**9):
        g = StepGraph()
        g.add_replica_group("dp", chain(pa.exponential(1.0), pa.exponential(1.0)), n)
        exact = {q: stats.gamma(2).isf(-math.expm1(math.log(q) / n)) for q in (0.5, 0.99)}
        print(row(f"exp->exp x {n:.0e}", g, exact))
        g = StepGraph()
        body = chain(pa.normal(1, 0.1), pa.normal(2, 0.2), pa.normal(0.5, 0.05))
        g.add_replica_group("dp", body, n)
        exact = {q: stats.norm(3.5, sd).isf(-math.expm1(math.log(q) / n)) for q in (0.5, 0.99)}
        print(row(f"3 normals x {n:.0e}", g, exact))


if __name__ == "__main__":
    main()
