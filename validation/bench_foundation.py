"""Benchmark: the slowest of 65,536 ranks, each running a 64-op chain of lognormal(1, 0.05) kernels.

Analytic: ``iid_max(iid_sum(op, 64), 65536)`` (FFT convolution, then F^n in log space) against a
PRISM-style Monte Carlo that samples every kernel of every rank explicitly, and against the exact
answer, known here to a bracket: the same computation under a 25x finer policy
(``GridPolicy(rel_width=1e-5)``), whose rounding sandwich provably contains the exact quantile.

Recorded output: ``validation/results/bench_foundation.md``.

Usage::

    python validation/bench_foundation.py [--ranks 65536] [--ops 64] [--mc-steps 1000] [--json]

Progress of the Monte Carlo goes to stderr. Speed is reported as a ratio measured in one process
never asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np
from scipy import stats

import prism_analytic as pa

#: The reference policy: 25x finer than the default; its bracket is the reference interval.
REFERENCE_POLICY = pa.GridPolicy(rel_width=1e-5, max_cells=2**21)
LEVELS = (0.5, 0.99)


def analytic(
    op: pa.Distribution, ops: int, ranks: int, policy: pa.GridPolicy | None = None
) -> pa.Distribution:
    """The step-time law: the max over ``ranks`` i.i.d. chains of ``ops`` i.i.d. kernels."""
    return pa.iid_max(pa.iid_sum(op, ops, policy=policy), ranks)


def time_best(fn, repeats: int) -> tuple[float, object]:
    """Best wall time of ``repeats`` calls (seconds), and the last result."""
    best, out = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def monte_carlo(
    op: pa.ScipyDistribution, ops: int, ranks: int, steps: int, seed: int
) -> np.ndarray:
    """Step times by sampling every kernel of every rank (``ops x ranks`` draws per step).

    One spawned SeedSequence per step, so the result does not depend on how steps are chunked.
    Memory: one ``ops x ranks`` float64 block (32 MiB at 64 x 65,536) at a time.
    """
    sigma = float(op.frozen.kwds["s"])
    mu = math.log(float(op.frozen.kwds["scale"]))
    out = np.empty(steps)
    t0 = time.perf_counter()
    for i, child in enumerate(np.random.SeedSequence(seed).spawn(steps)):
        z = np.random.default_rng(child).standard_normal((ops, ranks))
        z *= sigma
        z += mu
        np.exp(z, out=z)  # lognormal kernels, in place
        out[i] = z.sum(axis=0).max()  # chain per rank, then the slowest rank
        if (i + 1) % max(1, steps // 20) == 0 or i + 1 == steps:
            rate = (i + 1) / (time.perf_counter() - t0)
            print(f"  MC step {i + 1}/{steps} ({rate:.1f} steps/s)", file=sys.stderr)
    return out


def order_statistic_ci(samples: np.ndarray, q: float, confidence: float) -> tuple[float, float]:
    """Distribution-free CI [X_(l), X_(u)] for the q-quantile (``scipy.stats.quantile_test``)."""
    ci = stats.quantile_test(samples, p=q).confidence_interval(confidence)
    return float(ci.low), float(ci.high)


def run(ranks: int, ops: int, mc_steps: int, seed: int, repeats: int) -> dict:
    op = pa.lognormal(1.0, 0.05)
    t_analytic, result = time_best(lambda: analytic(op, ops, ranks), repeats)
    print(f"analytic: {t_analytic * 1e3:.1f} ms (best of {repeats})", file=sys.stderr)
    t_ref, reference = time_best(lambda: analytic(op, ops, ranks, REFERENCE_POLICY), 1)
    print(f"reference (rel_width 1e-5): {t_ref:.2f} s", file=sys.stderr)
    print(
        f"Monte Carlo: {mc_steps} steps x {ranks} ranks x {ops} ops "
        f"= {mc_steps * ranks * ops:.3g} draws",
        file=sys.stderr,
    )
    t0 = time.perf_counter()
    steps = monte_carlo(op, ops, ranks, mc_steps, seed)
    t_mc = time.perf_counter() - t0

    out = {
        "case": f"max over {ranks:,} ranks of a {ops}-op chain of lognormal(1, 0.05) kernels",
        "ranks": ranks,
        "ops": ops,
        "mc_steps": mc_steps,
        "seed": seed,
        "analytic_s": t_analytic,
        "reference_s": t_ref,
        "mc_s": t_mc,
        "ratio_mc_over_analytic": t_mc / t_analytic,
        "policy": pa.DEFAULT_POLICY.to_dict(),
        "reference_policy": REFERENCE_POLICY.to_dict(),
        "levels": {},
    }
    for q in LEVELS:
        ref_low, ref_high = (float(v) for v in reference.quantile_bracket(q))
        ref_mid = 0.5 * (ref_low + ref_high)
        a_low, a_high = (float(v) for v in result.quantile_bracket(q))
        a_point = float(result.quantile(q))
        mc_point = float(np.quantile(steps, q, method="inverted_cdf"))
        ci_low, ci_high = order_statistic_ci(steps, q, 0.95)
        out["levels"][str(q)] = {
            "reference_bracket": [ref_low, ref_high],
            "analytic": a_point,
            "analytic_bracket": [a_low, a_high],
            "analytic_bracket_contains_reference": a_low <= ref_low and ref_high <= a_high,
            "analytic_rel_error": a_point / ref_mid - 1.0,
            "analytic_bracket_rel_width": (a_high - a_low) / ref_mid,
            "mc": mc_point,
            "mc_ci95": [ci_low, ci_high],
            "mc_rel_error": mc_point / ref_mid - 1.0,
            "mc_ci95_rel": [ci_low / ref_mid - 1.0, ci_high / ref_mid - 1.0],
            "reference_rel_halfwidth": 0.5 * (ref_high - ref_low) / ref_mid,
        }
    return out


def render(res: dict) -> str:
    """The human-readable table."""
    lines = [
        f"case: {res['case']}",
        f"{'':24s}{'time':>12s}{'p50 (s)':>14s}{'err p50':>11s}{'p99 (s)':>14s}{'err p99':>11s}",
    ]
    lv = [res["levels"][str(q)] for q in LEVELS]
    lines.append(
        f"{'reference (1e-5 grid)':24s}{res['reference_s']:>11.2f}s"
        + "".join(
            f"{0.5 * sum(v['reference_bracket']):>14.5f}"
            f"{'+-' + format(v['reference_rel_halfwidth'], '.1e'):>11s}"
            for v in lv
        )
    )
    lines.append(
        f"{'analytic (default)':24s}{res['analytic_s'] * 1e3:>10.1f}ms"
        + "".join(f"{v['analytic']:>14.5f}{v['analytic_rel_error']:>+11.1e}" for v in lv)
    )
    lines.append(
        f"{'Monte Carlo':24s}{res['mc_s']:>11.1f}s"
        + "".join(f"{v['mc']:>14.5f}{v['mc_rel_error']:>+11.1e}" for v in lv)
    )
    lines.append(f"ratio MC / analytic time: {res['ratio_mc_over_analytic']:,.0f}x")
    for q, v in zip(LEVELS, lv):
        lines.append(
            f"q={q}: reference bracket [{v['reference_bracket'][0]:.5f}, "
            f"{v['reference_bracket'][1]:.5f}]; analytic bracket [{v['analytic_bracket'][0]:.5f}, "
            f"{v['analytic_bracket'][1]:.5f}] (width {v['analytic_bracket_rel_width']:.1e}, "
            f"contains reference: {v['analytic_bracket_contains_reference']}); MC 95% CI "
            f"[{v['mc_ci95'][0]:.5f}, {v['mc_ci95'][1]:.5f}] = [{v['mc_ci95_rel'][0]:+.1e}, "
            f"{v['mc_ci95_rel'][1]:+.1e}]"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=65536)
    parser.add_argument("--ops", type=int, default=64)
    parser.add_argument("--mc-steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--repeats", type=int, default=5, help="analytic timing: best of")
    parser.add_argument("--json", action="store_true", help="print a JSON object instead")
    args = parser.parse_args(argv)
    res = run(args.ranks, args.ops, args.mc_steps, args.seed, args.repeats)
    print(json.dumps(res, indent=2) if args.json else render(res))


if __name__ == "__main__":
    main()
