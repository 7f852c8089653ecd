"""How often the paired KS bootstrap (prism_analytic.validation.paired_ks) claims a direction.

Samples from G = N(0, 1); two candidate CDFs per case whose true KS distances to G are computed
on a fine grid, so that the true difference ``KS_a - KS_b`` is known. For each case, ``reps``
independent samples of size ``n``: how often the rule says "beats", "loses", "tie", how often
its percentile interval covers the true difference, and how often the "basic" bootstrap interval
(``2 d - q_hi, 2 d - q_lo``, not used) would have claimed each direction. A wrong claim is
"beats" when the true difference is >= 0 or "loses" when it is <= 0.

Usage::

    nice python validation/paired_ks_check.py [--n 10000] [--reps 100]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from prism_analytic.validation.paired_ks import paired_ks

#: name -> (method a, baseline b): a beats b when the true difference is < 0
CASES = {
    "a_loses_slightly": (stats.norm(0.02, 1).cdf, stats.norm(0, 1.03).cdf),
    "symmetric_tie": (stats.norm(0.01, 1).cdf, stats.norm(-0.01, 1).cdf),
    "a_is_the_truth": (stats.norm(0, 1).cdf, stats.norm(0.01, 1).cdf),
    "same_argmax": (stats.norm(0.02, 1).cdf, stats.norm(0.025, 1).cdf),
    "b_is_the_truth": (stats.norm(0.0375, 1).cdf, stats.norm(0, 1).cdf),
    "b_is_the_truth_small": (stats.norm(0.02, 1).cdf, stats.norm(0, 1).cdf),
    "clear_loss": (stats.norm(0.095, 1).cdf, stats.norm(0, 1.044).cdf),
    "clear_win": (stats.norm(0, 1.044).cdf, stats.norm(0.095, 1).cdf),
    "both_small": (stats.norm(0.03, 1).cdf, stats.norm(0, 1.04).cdf),
}


def _true_ks(cdf, grid: np.ndarray) -> float:
    return float(np.abs(cdf(grid) - stats.norm.cdf(grid)).max())


def main() -> None:
    """Print one line per case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="sample size")
    parser.add_argument("--reps", type=int, default=100, help="samples per case")
    args = parser.parse_args()
    grid = np.linspace(-8, 8, 2_000_001)
    print(f"n = {args.n:,}, {args.reps} samples per case, 400 resamples, 95% percentile rule")
    print(
        f"{'case':<22} {'true diff':>9}  beats  loses  tie  wrong  coverage  "
        "basic beats/loses  CPU s"
    )
    for name, (a, b) in CASES.items():
        truth = _true_ks(a, grid) - _true_ks(b, grid)
        counts = {"beats": 0, "loses": 0, "tie": 0}
        basic = {"beats": 0, "loses": 0}
        covered = 0
        cpu = time.process_time()
        for r in range(args.reps):
            x = np.random.default_rng(1000 + r).standard_normal(args.n)
            res = paired_ks(x, a, {"b": b}, seed=r)["b"]
            counts[res.outcome] += 1
            covered += res.low <= truth <= res.high
            lo, hi = 2 * res.diff - res.high, 2 * res.diff - res.low
            basic["beats"] += hi < 0
            basic["loses"] += lo > 0
        zero = abs(truth) < 1e-12  # the symmetric case: any claimed direction is wrong
        wrong = (counts["beats"] if truth > 0 or zero else 0) + (
            counts["loses"] if truth < 0 or zero else 0
        )
        print(
            f"{name:<22} {truth:>+9.5f}  {counts['beats']:>5}  {counts['loses']:>5}  "
            f"{counts['tie']:>3}  {wrong:>5}  {covered / args.reps:>8.2f}  "
            f"{basic['beats']:>5}/{basic['loses']:<5}        {time.process_time() - cpu:.1f}"
        )


if __name__ == "__main__":
    main()
