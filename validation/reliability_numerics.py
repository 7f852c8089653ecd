"""The distribution-layer reproducers, before and after their fix, against exact values.

"Before" is the number reported (measured on the code before the fix); "after" is
measured now by this script; "exact" is a closed form or, where none exists, a Monte Carlo
estimate with its sample size stated. A bracket is written [low, high]; ``ok`` says whether the
after-value is right (the bracket contains the exact value, or a clear error was raised).

Run::

    python validation/reliability_numerics.py           # reproducers + acceptance (~5 min)
    python validation/reliability_numerics.py --quick   # reproducers only
    python validation/reliability_numerics.py --sums    # iid_sum widths only (~3 min)
    python validation/reliability_numerics.py --sums --max-cells 1048576  # finer lattice
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from collections.abc import Callable

import numpy as np
from scipy import special, stats

import prism_analytic as pa
from prism_analytic.distributions.grid import to_grid_like
from prism_analytic.distributions.serialize import from_spec

ROWS: list[tuple[str, str, str, str, str]] = []


def fmt(v: object) -> str:
    """Short text for a number, a pair (bracket) or an array."""
    if isinstance(v, tuple) and len(v) == 2:
        return f"[{fmt(v[0])}, {fmt(v[1])}]"
    if isinstance(v, np.ndarray | list):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    if isinstance(v, float | np.floating | int):
        return f"{float(v):.7g}"
    return str(v)


def row(name: str, before: str, after: object, exact: object, ok: bool) -> None:
    """Record one line of the table."""
    ROWS.append((name, before, fmt(after), fmt(exact), "ok" if ok else "NO"))


def inside(bracket: tuple[float, float], value: float) -> bool:
    """Whether ``value`` lies in the closed interval ``bracket``."""
    return bracket[0] <= value <= bracket[1]


def error_of(make: Callable[[], object]) -> str:
    """The error a call raises, as 'Type: message', or 'no error'."""
    try:
        make()
    except (ValueError, TypeError) as exc:
        return f"{type(exc).__name__}: {str(exc)[:70]}"
    return "no error"


def reproducers() -> None:
    """Every distribution-layer reproducer of the issue."""
    s = pa.iid_sum(pa.gamma(1.0, 0.5), 10**9)
    row("iid_sum(gamma(1,.5), 1e9).std()", "127949", s.std(), 0.5 * math.sqrt(1e9), True)
    ok = abs(s.std() / (0.5 * math.sqrt(1e9)) - 1) < 1e-9
    ROWS[-1] = ROWS[-1][:4] + ("ok" if ok else "NO",)

    kernel = pa.lognormal(mean=1e-3, std=5e-5)
    step = pa.iid_max(pa.iid_sum(kernel, 64), 65536)
    run = pa.iid_sum(step, 10_000)
    ok = abs(run.std() / (100 * step.std()) - 1) < 1e-9
    row("README run = iid_sum(step, 1e4).std()", "0.163", run.std(), 100 * step.std(), ok)

    c = pa.convolve(pa.point_mass(1.0), pa.pareto(0.5))
    row("1 + pareto(0.5): mean", "3.8e12", c.mean(), math.inf, c.mean() == math.inf)
    row("1 + pareto(0.5): std", "2.9e13", c.std(), math.inf, c.std() == math.inf)
    b = c.quantile_bracket(0.5)
    row("1 + pareto(0.5): median [bracket]", "3.8e12 [0, 7.6e12]", b, 5.0, inside(b, 5.0))
    c = pa.convolve(pa.point_mass(1.0), pa.pareto(1.5))
    row("1 + pareto(1.5): mean", "5.15", c.mean(), 4.0, abs(c.mean() - 4) < 1e-12)
    row("1 + pareto(1.5): std", "59", c.std(), math.inf, c.std() == math.inf)
    exact = 1 + 2 ** (1 / 1.5)
    b = c.quantile_bracket(0.5)
    row("1 + pareto(1.5): median [bracket]", "4.35", b, exact, inside(b, exact))

    d = pa.lognormal(1.0, math.sqrt(math.expm1(25.0)))  # mean 1, log-sigma 5
    g = to_grid_like(d)
    row("gridded lognormal(sigma 5): mean", "75.9", g.mean(), 1.0, abs(g.mean() - 1) < 1e-9)
    b = g.quantile_bracket(0.5)
    row(
        "gridded lognormal(sigma 5): median", "75.1", b, d.quantile(0.5), inside(b, d.quantile(0.5))
    )
    b99 = g.quantile_bracket(0.99)
    row(
        "gridded lognormal(sigma 5): p99 point",
        "(clipped)",
        f"{g.quantile(0.99)} {fmt(b99)}",
        d.quantile(0.99),
        math.isnan(g.quantile(0.99)) and inside(b99, d.quantile(0.99)),
    )
    m = pa.mixture([pa.normal(1, 0.1), pa.pareto(0.5)], [0.99, 0.01])
    row("mixture(normal, pareto(.5)).std()", "nan", m.std(), math.inf, m.std() == math.inf)

    x = pa.iid_max(pa.iid_sum(pa.exponential(1.0), 2), 10**11)
    exact = float(stats.gamma(2).isf(-np.expm1(np.log(0.99) / 1e11)))
    b = x.quantile_bracket(0.99)
    row(
        "iid_max(iid_sum(exp,2),1e11) p99, default",
        "(33.47075, 33.4705)",
        f"{fmt(b)} roundoff={x.roundoff:.2g}",
        exact,
        inside(b, exact),  # ordered now, but excluded: the disclosed round-off covers it
    )
    folded = pa.GridPolicy(fold_roundoff=True)
    xf = pa.iid_max(pa.iid_sum(pa.exponential(1.0), 2, policy=folded), 10**11, policy=folded)
    b = xf.quantile_bracket(0.99)
    row("  same, fold_roundoff=True", "-", b, exact, inside(b, exact))

    o = pa.order_statistic(pa.uniform(0, 1), 1, 10**12)
    exact = -math.expm1(math.log(0.01) / 1e12)
    b = o.quantile_bracket(0.99)
    row("order_statistic(U, 1, 1e12) p99", "misses by 7.6e-6 rel", b, exact, inside(b, exact))

    og = pa.order_statistic(to_grid_like(pa.exponential(1.0)), 1, 10**6)
    exact = -math.expm1(math.log(0.5) / 1e6)
    b = og.quantile_bracket(0.5)
    row(
        "gridded order_statistic(exp, 1, 1e6) p50",
        "3.1e-5",
        f"{og.quantile(0.5):.3g} {fmt(b)}",
        exact,
        inside(b, exact),  # contained, but the parent's lattice cannot resolve the value
    )

    mq = pa.mixture([pa.normal(1, 0.1), pa.exponential(1)], [0.5, 0.5]).quantile([0, 1])
    row(
        "mixture.quantile([0, 1])",
        "[-8.9e43, 744]",
        mq,
        [-math.inf, math.inf],
        list(mq) == [-math.inf, math.inf],
    )
    b = pa.normal(0, 1).quantile_bracket(1.0)
    row("normal(0,1).quantile_bracket(1.0)", "(nan, inf)", b, math.inf, b == (math.inf, math.inf))

    for label, make in [
        ("lognormal(1, 1e200)", lambda: pa.lognormal(1, 1e200)),
        ("gamma(1e200, 1)", lambda: pa.gamma(1e200, 1)),
        ("gamma(1, 1e200)", lambda: pa.gamma(1, 1e200)),
    ]:
        err = error_of(make)
        row(
            label,
            "OverflowError/ZeroDivisionError",
            err,
            "clear error",
            err.startswith("ValueError"),
        )
    ok = pa.lognormal(1, 1e-200).quantile(0.5) == 1.0
    row("lognormal(1, 1e-200)", "rejected (s=0.0)", "accepted, median 1.0", 1.0, ok)

    normal = {"type": "scipy", "family": "norm", "args": [0, 1]}
    specs = {
        "spec iid_max n=0": {"type": "iid_max", "n": 0, "parent": normal},
        "spec iid_max n=1e20": {"type": "iid_max", "n": 1e20, "parent": normal},
        "spec iid_max n=2.7": {"type": "iid_max", "n": 2.7, "parent": normal},
        "spec affine scale=0": {"type": "affine", "shift": 0, "scale": 0, "base": normal},
        "spec affine scale=-1": {"type": "affine", "shift": 0, "scale": -1, "base": normal},
        "spec order_statistic k>n": {"type": "order_statistic", "k": 5, "n": 3, "parent": normal},
        "spec order_statistic n=-5": {"type": "order_statistic", "k": 1, "n": -5, "parent": normal},
        "spec grid below=2": {
            "type": "grid",
            "h": 1,
            "k0": 0,
            "lo": [0.5, 0.5],
            "hi": [1, 0],
            "below": 2,
            "above": 0,
        },
        "spec grid masses sum 0.5": {
            "type": "grid",
            "h": 1,
            "k0": 0,
            "lo": [0.5],
            "hi": [0.5],
            "below": 0,
            "above": 0,
        },
        "spec grid negative mass": {
            "type": "grid",
            "h": 1,
            "k0": 0,
            "lo": [-0.5, 1.5],
            "hi": [0, 1],
            "below": 0,
            "above": 0,
        },
        "spec grid swapped sides": {
            "type": "grid",
            "h": 1,
            "k0": 0,
            "lo": [0, 1],
            "hi": [1, 0],
            "below": 0,
            "above": 0,
        },
    }
    for label, spec in specs.items():
        err = error_of(lambda spec=spec: from_spec(spec))
        row(label, "accepted / NaN / IndexError", err, "clear error", err != "no error")
    for label, make, before in [
        (
            "convolve(policy=3)",
            lambda: pa.convolve(pa.normal(1, 1), pa.normal(1, 1), policy=3),
            "AttributeError",
        ),
        ("GridPolicy(max_cells=2**40)", lambda: pa.GridPolicy(max_cells=2**40), "8 TiB"),
        ("normal.sample(10**11)", lambda: pa.normal(0, 1).sample(10**11), "745 GiB"),
    ]:
        err = error_of(make)
        row(label, before, err, "clear error", err != "no error")


def kummer_p(a: float, x: float, dps: int = 40) -> float:
    """P(a, x) = x^a e^-x / Gamma(a+1) sum_k x^k / ((a+1)...(a+k)) in mpmath (positive terms).

    The independent reference for Gamma CDFs at huge shapes, where scipy's ``gammainc`` is off
    beyond 4.5 standard deviations (see ``prism_analytic.distributions.gamma_large``).
    """
    import mpmath

    with mpmath.workdps(dps):
        a_, x_ = mpmath.mpf(a), mpmath.mpf(x)
        pref = mpmath.exp(a_ * mpmath.log(x_) - x_ - mpmath.loggamma(a_ + 1))
        total, term, k = mpmath.mpf(1), mpmath.mpf(1), 0
        while True:
            k += 1
            term = term * x_ / (a_ + k)
            total += term
            if x_ < a_ + k and term < mpmath.mpf(10) ** (5 - dps) * total:
                return float(pref * total)


def gamma_contains(a: float, scale: float, q: float, low: float, high: float) -> bool:
    """Whether [low, high] holds the q-quantile of Gamma(a, scale): P(low) <= q <= P(high).

    scipy's ``gammainc`` inside 4.5 standard deviations (its Temme branch), Kummer's series
    outside (about 25 s a point at a = 4e9).
    """
    x_lo, x_hi = low / scale, high / scale
    if max(abs(x_lo - a), abs(x_hi - a)) < 4.5 * math.sqrt(a):
        if q <= 0.5:
            return bool(special.gammainc(a, x_lo) <= q <= special.gammainc(a, x_hi))
        return bool(special.gammaincc(a, x_lo) >= 1 - q >= special.gammaincc(a, x_hi))
    p_lo, p_hi = kummer_p(a, x_lo, 45), kummer_p(a, x_hi, 45)
    if q <= 0.5:
        return p_lo <= q <= p_hi
    return 1 - p_lo >= 1 - q >= 1 - p_hi


def cornish_fisher(law: pa.Distribution, m: int, levels: np.ndarray) -> tuple[np.ndarray, float]:
    """Quantiles of a sum of ``m`` copies by Cornish-Fisher with the law's exact cumulants.

    An estimate, not a bracket: the expansion to order 1/m (skewness, kurtosis); its omitted
    terms are of order m^-3/2, below the size of the last included term, which is returned
    (in standard deviations of the sum) as the estimate's error scale.
    """
    mean, var, skew, kurt = (float(v) for v in law.frozen.stats(moments="mvsk"))
    g1, g2 = skew / math.sqrt(m), kurt / m  # of the sum
    z = np.where(levels <= 0.5, stats.norm.ppf(levels), stats.norm.isf(1.0 - levels))
    t1 = (z**2 - 1) * g1 / 6
    t2 = (z**3 - 3 * z) * g2 / 24 - (2 * z**3 - 5 * z) * g1**2 / 36
    return m * mean + math.sqrt(m * var) * (z + t1 + t2), float(np.abs(t2).max())


def sums(policy: pa.GridPolicy | None = None) -> None:
    """iid_sum over normal/gamma/lognormal at 1e3, 1e6, 1e9 copies: widths at three levels."""
    rng = np.random.default_rng(13)
    laws = {
        "normal(1, 0.3)": (pa.normal(1.0, 0.3), "normal"),
        "gamma(1, 0.5)": (pa.gamma(1.0, 0.5), "gamma"),
        "lognormal(1, 0.5)": (pa.lognormal(1.0, 0.5), None),
    }
    levels = np.array([1e-6, 0.01, 0.5, 0.99, 1 - 1e-9])
    shown = [0, 2, 4]  # the table's levels: 1e-6, 0.5, 1 - 1e-9
    for name, (law, family) in laws.items():
        for m in (10**3, 10**6, 10**9):
            t0 = time.perf_counter()
            s = pa.iid_sum(law, m, policy=policy)
            secs = time.perf_counter() - t0
            true_std = law.std() * math.sqrt(m)
            mean_err = abs(s.mean() / (m * law.mean()) - 1)
            std_err = abs(s.std() / true_std - 1)
            low, high = s.quantile_bracket(levels)
            widths = (high - low) / true_std
            if family == "normal":
                e = stats.norm(m, 0.3 * math.sqrt(m))
                truth = np.concatenate((e.ppf(levels[:4]), [e.isf(1.0 - levels[4])]))
                contained = bool(np.all((low <= truth) & (truth <= high)))
                ref = "closed form (scipy norm)"
            elif family == "gamma":  # Gamma(4m, scale 0.25), checked through its CDF
                contained = all(
                    gamma_contains(4.0 * m, 0.25, float(q), float(lo), float(hi))
                    for q, lo, hi in zip(levels, low, high)
                )
                ref = "incomplete gamma (scipy / Kummer series)"
            else:
                contained, ref = None, "no closed form, no reference"
                if m >= 10**6:  # the sum is close to normal: Cornish-Fisher is very accurate
                    cf, scale = cornish_fisher(law, m, levels)
                    contained = bool(np.all((low <= cf) & (cf <= high)))
                    ref = f"Cornish-Fisher estimate (last term {scale:.0e} std)"
                if m == 10**3:  # Monte Carlo: 20,000 sums of 1,000 copies
                    contained = True
                    x = law.sample((20_000, m), rng).sum(axis=1)
                    for q in (0.01, 0.5, 0.99):
                        k, sd = q * x.size, math.sqrt(x.size * q * (1 - q))
                        lo_mc, hi_mc = np.sort(x)[[int(k - 4 * sd), int(k + 4 * sd)]]
                        b = s.quantile_bracket(q)
                        contained &= b[0] <= hi_mc and lo_mc <= b[1]
                    ref = "MC 2e4 sums (meets 4-sigma CI)"
            roundoff = getattr(s, "roundoff", 0.0)
            ROWS.append(
                (
                    f"iid_sum({name}, {m:.0e}) [{type(s).__name__}]",
                    ref,
                    "width/std at 1e-6, .5, 1-1e-9: "
                    + ", ".join(f"{widths[i]:.2e}" for i in shown)
                    + f"; mean err {mean_err:.1e}, std err {std_err:.1e}"
                    f", roundoff {roundoff:.1e}, {secs:.1f}s",
                    {True: "contained", False: "MISSED", None: "n/a"}[contained],
                    # the acceptance target: moments within 0.1%, brackets within 0.1% of std
                    "ok"
                    if contained is not False and max(mean_err, std_err, *widths) <= 1e-3
                    else "NO",
                )
            )


def acceptance() -> None:
    """Heavy tails through sums and maxima, against Monte Carlo and closed forms."""
    rng = np.random.default_rng(13)
    heavy = {
        "pareto(0.5)": pa.pareto(0.5),
        "pareto(1.5)": pa.pareto(1.5),
        "pareto(2.5)": pa.pareto(2.5),
        "lognorm(s=3)": pa.from_scipy(stats.lognorm(3)),
    }
    for name, law in heavy.items():
        for m in (10, 100):
            s = pa.iid_sum(law, m)
            x = np.zeros(10**6)
            for _ in range(m):
                x += law.sample(10**6, rng)
            mc = np.quantile(x, [0.5, 0.99])
            got = np.atleast_1d(s.quantile([0.5, 0.99]))
            rel = got / mc - 1
            ok = bool(np.all(np.abs(rel) < 0.01))  # nan (unresolved) is honest, but not a pass
            ROWS.append(
                (
                    f"iid_sum({name}, {m}) p50/p99",
                    "MC 1e6 sums",
                    f"{fmt(got)} vs MC {fmt(mc)}, rel {fmt(rel)}; mean {s.mean():.4g}",
                    "nan = unresolved (bracket to inf)" if np.isnan(got).any() else "-",
                    "ok" if ok else "NO",
                )
            )
        n = 10**6
        mx = pa.iid_max(law, n)
        got = mx.quantile([0.5, 0.99])
        exact = [float(law.isf(-math.expm1(math.log(q) / n))) for q in (0.5, 0.99)]
        rel = np.asarray(got) / exact - 1
        ROWS.append(
            (
                f"iid_max({name}, 1e6) p50/p99",
                "closed form",
                f"{fmt(got)}, rel {fmt(rel)}",
                fmt(exact),
                "ok" if np.all(np.abs(rel) < 1e-6) else "NO",
            )
        )


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reproducers only")
    parser.add_argument("--sums", action="store_true", help="iid_sum bracket widths only")
    parser.add_argument(
        "--max-cells", type=int, default=None, help="GridPolicy.max_cells for --sums (default 2^18)"
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.sums:
        sums(None if args.max_cells is None else pa.GridPolicy(max_cells=args.max_cells))
    else:
        reproducers()
        if not args.quick:
            sums()
            acceptance()
    widths = [max(len(r[i]) for r in ROWS) for i in range(5)]
    head = ("case", "before (issue)", "after (measured)", "exact / reference", "")
    print(" | ".join(h.ljust(w) for h, w in zip(head, widths)))
    print("-+-".join("-" * w for w in widths))
    for r in ROWS:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
