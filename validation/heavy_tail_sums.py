"""Heavy-tailed sums, maxima and replica groups on the log lattice against references.

For Pareto alpha = 0.5, 1.5, 2.5 (scale 1) and a lognormal with sigma = 3 (median 1), and
m = 10, 1e3, 1e6 copies:

* **sums** ``iid_sum(law, m)``: p50 and p99 with their guaranteed brackets and the time of the
  call, against Monte Carlo sums (exact sampling by inverse transform, in blocks of 1e7
  values; sample sizes in the table) with a distribution-free 99% interval (order statistics
  at rank ``q N +- 2.576 sqrt(N q (1 - q))``); ``meets`` says whether the bracket and that
  interval overlap. For alpha = 0.5 the stable (Levy) limit ``m^2 pi / (4 erfcinv(q)^2)`` is
  printed as a sanity check only (it is a limit, not a bound);
* **maxima** ``iid_max`` of the law put on the log lattice, against the closed form
  ``F^-1(q^(1/n))``;
* **replica groups** ``iid_max(iid_sum(law, 10), n)`` (a group of ``n`` bodies that each sum
  10 copies) against Monte Carlo for n = 100, and the bracket width at n = 1e6.

Run::

    nice python validation/heavy_tail_sums.py            # about 10 minutes on 2 busy cores
    nice python validation/heavy_tail_sums.py --quick    # 10x fewer Monte Carlo samples
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import special, stats

import prism_analytic as pa
from prism_analytic.distributions.log_lattice import to_log_lattice

LAWS = {
    "pareto 0.5": (pa.pareto(0.5), lambda rng, shape: rng.random(shape) ** -2.0),
    "pareto 1.5": (pa.pareto(1.5), lambda rng, shape: rng.random(shape) ** (-1 / 1.5)),
    "pareto 2.5": (pa.pareto(2.5), lambda rng, shape: rng.random(shape) ** (-1 / 2.5)),
    "lognormal s=3": (
        pa.from_scipy(stats.lognorm(3.0)),
        lambda rng, shape: rng.lognormal(0.0, 3.0, shape),
    ),
}
LEVELS = (0.5, 0.99)
Z99 = 2.5758


def mc_sums(draw, m: int, samples: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted sums of ``m`` draws, ``samples`` times, in blocks of at most 1e7 values."""
    out = np.empty(samples)
    per_block = max(1, 10**7 // m)
    for start in range(0, samples, per_block):
        k = min(per_block, samples - start)
        out[start : start + k] = draw(rng, (k, m)).sum(axis=1)
    return np.sort(out)


def interval(x: np.ndarray, q: float) -> tuple[float, float, float]:
    """(estimate, low, high): the sample quantile and its distribution-free 99% interval."""
    n = x.size
    sd = math.sqrt(n * q * (1 - q))
    lo = max(int(math.floor(q * n - Z99 * sd)) - 1, 0)
    hi = min(int(math.ceil(q * n + Z99 * sd)), n - 1)
    return float(np.quantile(x, q)), float(x[lo]), float(x[hi])


def fmt(v: float) -> str:
    """Seven significant digits."""
    return f"{v:.7g}"


def sums_table(samples: dict[int, int], rng: np.random.Generator) -> list[str]:
    """Rows of the sums table (one per law, m and level)."""
    rows = [
        "| law | m | q | analytic | bracket | width | MC (99% CI) [N] | rel err | meets "
        "| wall (cpu) s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, (law, draw) in LAWS.items():
        for m, n_mc in samples.items():
            start, cpu = time.perf_counter(), time.process_time()
            s = pa.iid_sum(law, m)
            seconds = f"{time.perf_counter() - start:.2f} ({time.process_time() - cpu:.2f})"
            x = mc_sums(draw, m, n_mc, rng)
            for q in LEVELS:
                value = float(s.quantile(q))
                low, high = s.quantile_bracket(q)
                est, mc_lo, mc_hi = interval(x, q)
                meets = "yes" if low <= mc_hi and mc_lo <= high else "NO"
                rows.append(
                    f"| {name} | {m:.0e} | {q} | {fmt(value)} | [{fmt(low)}, {fmt(high)}] | "
                    f"{(high - low) / value:.2%} | {fmt(est)} ({fmt(mc_lo)}, {fmt(mc_hi)}) "
                    f"[{n_mc:.0e}] | {abs(value - est) / est:.2%} | {meets} | {seconds} |"
                )
            if name == "pareto 0.5":
                levy = [m * m * math.pi / (4 * special.erfcinv(q) ** 2) for q in LEVELS]
                rows.append(
                    f"| (Levy limit, sanity only) | {m:.0e} | 0.5 / 0.99 | "
                    f"{fmt(levy[0])} / {fmt(levy[1])} | | | | | | |"
                )
    return rows


def maxima_table() -> list[str]:
    """Maxima of the law on the log lattice against the closed form."""
    rows = [
        "| law | n | q | closed form | lattice bracket | inside | width |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, (law, _) in LAWS.items():
        lattice = to_log_lattice(law, 1024)
        for n in (10, 1000, 10**6):
            mx = pa.iid_max(lattice, n)
            for q in LEVELS:
                exact = float(law.isf(-math.expm1(math.log(q) / n)))
                low, high = mx.quantile_bracket(q)
                inside = "yes" if low <= exact <= high else "NO"
                rows.append(
                    f"| {name} | {n:.0e} | {q} | {fmt(exact)} | [{fmt(low)}, {fmt(high)}] | "
                    f"{inside} | {(high - low) / exact:.2%} |"
                )
    return rows


def groups_table(samples: int, rng: np.random.Generator) -> list[str]:
    """Replica groups of n bodies, each the sum of 10 copies."""
    rows = [
        "| law | n | q | analytic | bracket | width | MC (99% CI) [N] | rel err | meets | time |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, (law, draw) in LAWS.items():
        for n in (100, 10**6):
            start = time.perf_counter()
            g = pa.iid_max(pa.iid_sum(law, 10), n)
            seconds = time.perf_counter() - start
            x = None
            if n == 100:
                x = np.sort(
                    np.concatenate(
                        [
                            draw(rng, (samples // 10, n, 10)).sum(axis=2).max(axis=1)
                            for _ in range(10)
                        ]
                    )
                )
            for q in LEVELS:
                value = float(g.quantile(q))
                low, high = g.quantile_bracket(q)
                mc, meets, err = "not run (1e7 draws a sample)", "", ""
                if x is not None:
                    est, mc_lo, mc_hi = interval(x, q)
                    mc = f"{fmt(est)} ({fmt(mc_lo)}, {fmt(mc_hi)}) [{x.size:.0e}]"
                    meets = "yes" if low <= mc_hi and mc_lo <= high else "NO"
                    err = f"{abs(value - est) / est:.2%}"
                rows.append(
                    f"| {name} | {n:.0e} | {q} | {fmt(value)} | [{fmt(low)}, {fmt(high)}] | "
                    f"{(high - low) / value:.2%} | {mc} | {err} | {meets} | {seconds:.2f} s |"
                )
    return rows


def main() -> None:
    """Print the three tables (markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x fewer Monte Carlo samples")
    args = parser.parse_args()
    div = 10 if args.quick else 1
    rng = np.random.default_rng(20261130)
    samples = {10: 10**7 // div, 1000: 10**6 // div, 10**6: 1000 // div}
    print("## Sums\n")
    print("\n".join(sums_table(samples, rng)))
    print("\n## Maxima (law on the log lattice, 1024 cells an octave)\n")
    print("\n".join(maxima_table()))
    print("\n## Replica groups of n bodies, each a sum of 10 copies\n")
    print("\n".join(groups_table(20_000 // div, rng)))


if __name__ == "__main__":
    main()
