"""Fuzz corpus: hypothesis strategies over hostile inputs, and the checks every input must pass.

Shared by ``tests/test_fuzz.py`` (a small, fast sample in CI) and ``validation/fuzz_long.py``
(the same strategies for N minutes, with counts). Each target takes one drawn input and
returns an :class:`Outcome`:

* ``ok`` / ``refused``: it ran, or raised one of the package's own error types
  (:data:`OWN_ERRORS`: ``ValueError``, ``TypeError`` and subclasses, ``FileNotFoundError``);
* ``foreign``: any other exception (``ZeroDivisionError``, ``KeyError``, ``RecursionError``...);
* ``hang``: it ran past the time limit (SIGALRM);
* ``violation``: it ran, but a stated guarantee failed (a numerical bracket that excludes the
  closed-form value, low above high, ``--json`` that is not valid JSON, an infinite mean
  reported as a finite number).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from scipy import special, stats

import prism_analytic as pa
from prism_analytic.graph import StepGraph

OWN_ERRORS = (ValueError, TypeError, FileNotFoundError)
#: Relative slack on closed-form values (scipy's own special functions are not exact).
CLOSED_FORM_RTOL = 1e-9


class Hang(BaseException):
    """Raised by the alarm when an input runs past its time limit."""


class Violation(Exception):
    """A guarantee that failed on an input that ran."""


@dataclass
class Outcome:
    """What one input did."""

    kind: str  # ok, refused, foreign, hang, violation
    detail: str = ""
    seconds: float = 0.0


def _alarm(signum: int, frame: Any) -> None:
    raise Hang()


def run_case(fn: Callable[[], None], limit_s: float) -> Outcome:
    """Run ``fn`` under a wall-clock limit and classify what happened."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            fn()
        kind, detail = "ok", ""
    except Hang:
        kind, detail = "hang", f"over {limit_s} s"
    except Violation as exc:
        kind, detail = "violation", str(exc)
    except OWN_ERRORS as exc:
        kind, detail = "refused", f"{type(exc).__name__}: {exc}"[:300]
    except Exception as exc:  # noqa: BLE001 - classifying foreign exceptions is the point
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        kind = "foreign"
        detail = f"{type(exc).__name__}: {exc} at {tb.filename}:{tb.lineno}"[:400]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return Outcome(kind, detail, time.perf_counter() - start)


# ----- hostile scalars ---------------------------------------------------------------------------
EXTREME_FLOATS = [0.0, -0.0, 1e-300, 5e-324, -1e-300, 1e300, -1e300, math.inf, -math.inf, math.nan]
hostile_scalar = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(EXTREME_FLOATS),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([None, "1", "x", True, False, [1.0], (), {}, b"1", 1j]),
)
levels = st.sampled_from(
    [0.0, 1e-300, 1e-50, 1e-12, 1e-9, 1e-6, 1e-3, 0.1, 0.5, 0.9, 0.99, 1 - 1e-6, 1 - 1e-9, 1.0]
)
counts = st.sampled_from([1, 2, 3, 10, 1000, 10**6, 10**9, 10**12])


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    """10 ** U(lo, hi)."""
    return st.floats(lo, hi).map(lambda e: 10.0**e)


# ----- distributions with closed forms -----------------------------------------------------------
@dataclass
class Law:
    """A law as the package builds it, and the same law in scipy (the closed form)."""

    name: str
    dist: pa.Distribution
    exact: Any  # a frozen scipy distribution


@st.composite
def laws(draw: Any, heavy: bool = True) -> Law:
    """Normal, gamma, exponential, lognormal, Pareto and uniform over wide parameter ranges."""
    kind = draw(
        st.sampled_from(["normal", "gamma", "exponential", "lognormal", "pareto", "uniform"])
    )
    if kind == "normal":
        mu = draw(st.sampled_from([-1.0, 1.0])) * draw(log_uniform(-3, 6))
        sd = abs(mu) * draw(log_uniform(-6, 1))
        return Law(f"normal({mu:.3g}, {sd:.3g})", pa.normal(mu, sd), stats.norm(mu, sd))
    if kind == "gamma":
        a, scale = draw(log_uniform(-1.5, 4)), draw(log_uniform(-4, 4))
        exact = stats.gamma(a, scale=scale)
        return Law(f"gamma(a={a:.3g}, scale={scale:.3g})", pa.from_scipy(exact), exact)
    if kind == "exponential":
        mean = draw(log_uniform(-4, 4))
        return Law(f"exponential({mean:.3g})", pa.exponential(mean), stats.expon(scale=mean))
    if kind == "lognormal":
        s = draw(st.floats(0.01, 3.0 if heavy else 1.0))
        scale = draw(log_uniform(-3, 3))
        exact = stats.lognorm(s, scale=scale)
        return Law(f"lognorm(s={s:.3g}, scale={scale:.3g})", pa.from_scipy(exact), exact)
    if kind == "pareto":
        alpha = draw(st.sampled_from([0.5, 1.0, 1.5, 2.5, 5.0]) if heavy else st.just(5.0))
        return Law(f"pareto({alpha})", pa.pareto(alpha), stats.pareto(alpha))
    low = draw(st.floats(-1e3, 1e3))
    width = draw(log_uniform(-3, 3))
    return Law(
        f"uniform({low:.3g}, {low + width:.3g})",
        pa.uniform(low, low + width),
        stats.uniform(low, width),
    )


def guaranteed_bracket(obj: Any, q: float) -> tuple[float, float]:
    """The bracket that is guaranteed: the plain one widened by the stated round-off.

    A plain ``quantile_bracket`` holds the exact value only up to a CDF error of ``roundoff``
    (grids, engine results); the guarantee is the bracket at levels ``q -+ roundoff``
    (``guaranteed_bracket`` on results, the same rule applied here to grids).
    """
    if hasattr(obj, "guaranteed_bracket"):
        low, high = obj.guaranteed_bracket(q)
        return float(low), float(high)
    r = float(getattr(obj, "roundoff", 0.0))
    if r <= 0:
        low, high = obj.quantile_bracket(q)
        return float(low), float(high)
    low = float(obj.quantile_bracket(q - r)[0]) if q - r > 0 else -math.inf
    high = float(obj.quantile_bracket(q + r)[1]) if q + r < 1 else math.inf
    return low, high


def check_bracket(name: str, dist: Any, q: float, exact: float) -> None:
    """The guarantee: the guaranteed bracket holds the closed-form value (low <= high)."""
    low, high = guaranteed_bracket(dist, q)
    if math.isnan(low) or math.isnan(high):
        raise Violation(f"{name}: quantile_bracket({q}) = ({low}, {high}) has NaN")
    if low > high:
        raise Violation(f"{name}: quantile_bracket({q}) = ({low}, {high}): low above high")
    if math.isnan(exact):
        return
    slack = CLOSED_FORM_RTOL * abs(exact) if math.isfinite(exact) else 0.0
    if not (low - slack <= exact <= high + slack):
        raise Violation(f"{name}: quantile_bracket({q}) = ({low:.10g}, {high:.10g}) excludes the "
                        f"exact {exact:.10g}")  # fmt: skip


def kummer_p(a: float, x: float, dps: int = 40) -> float:
    """P(a, x) by Kummer's series in mpmath (positive terms): the reference at huge shapes."""
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
                return pref * total


def check_large_gamma(name: str, dist: Any, q: float, a: float, scale: float) -> None:
    """The bracket of a Gamma(a) quantile, a >= 1e5, holds it: P(low) <= q <= P(high).

    scipy's ``gammainc`` is reliable there only within 4.5 standard deviations (its Temme
    branch; beyond, a 2,000-term series stops early), so the check uses it inside that band,
    Kummer's series in mpmath outside it up to a = 1e7 (about a second), and skips beyond.
    """
    low, high = guaranteed_bracket(dist, q)
    if math.isnan(low) or math.isnan(high) or low > high:
        raise Violation(f"{name}: quantile_bracket({q}) = ({low}, {high})")
    if q in (0.0, 1.0) or not (math.isfinite(low) and math.isfinite(high)):
        return
    x_lo, x_hi = low / scale, high / scale
    band = 4.5 * math.sqrt(a)
    if abs(x_lo - a) < band and abs(x_hi - a) < band:
        if q <= 0.5:
            ok = special.gammainc(a, x_lo) <= q <= special.gammainc(a, x_hi)
        else:
            ok = special.gammaincc(a, x_lo) >= 1 - q >= special.gammaincc(a, x_hi)
    elif a <= 1e7:
        p_lo, p_hi = kummer_p(a, x_lo), kummer_p(a, x_hi)
        ok = p_lo <= q <= p_hi if q <= 0.5 else 1 - p_lo >= 1 - q >= 1 - p_hi
    else:
        return  # no independent reference within the time limit
    if not ok:
        raise Violation(f"{name}: quantile_bracket({q}) = ({low:.12g}, {high:.12g}) excludes "
                        "the exact quantile (incomplete gamma check)")  # fmt: skip


def max_quantile(exact: Any, n: int, q: float) -> float:
    """Closed-form q-quantile of the max of n i.i.d. copies: isf(1 - q^(1/n))."""
    if q <= 0:
        return float(exact.support()[0])
    u = math.exp(math.log(q) / n)  # CDF level of one copy; its complement without cancellation
    return float(exact.ppf(u) if u < 0.5 else exact.isf(-math.expm1(math.log(q) / n)))


def order_statistic_quantile(exact: Any, k: int, n: int, q: float) -> float:
    """Closed-form q-quantile of the k-th smallest of n: F^-1(I^-1_{k, n-k+1}(q))."""
    if q <= 0 or q >= 1:
        return math.nan
    p = float(special.betaincinv(k, n - k + 1, q))
    # 1 - p without cancellation: I_s(n - k + 1, k) = 1 - q, read from q itself (1 - 1e-300
    # rounds to 1 and would send s to 1)
    s = float(special.betainccinv(n - k + 1, k, q))
    return float(exact.ppf(p) if p < 0.5 else exact.isf(s))


@st.composite
def law_operations(draw: Any) -> tuple[str, Callable[[], None]]:
    """One operation on a law with a closed form, and its bracket check."""
    law = draw(laws())
    op = draw(st.sampled_from(["self", "iid_max", "order_statistic", "iid_sum"]))
    q = draw(levels)

    def run() -> None:
        if op == "self":
            check_bracket(law.name, law.dist, q, float(law.exact.ppf(q)))
            if law.name.startswith("pareto(0.5") or law.name.startswith("pareto(1.0"):
                if math.isfinite(law.dist.mean()):
                    raise Violation(f"{law.name}: infinite mean reported as {law.dist.mean()}")
        elif op == "iid_max":
            n = draw_n
            check_bracket(f"iid_max({law.name}, {n})", pa.iid_max(law.dist, n), q,
                          max_quantile(law.exact, n, q))  # fmt: skip
        elif op == "order_statistic":
            n = draw_n
            k = max(1, min(n, draw_k))
            d = pa.order_statistic(law.dist, k, n)
            check_bracket(f"order_statistic({law.name}, {k}, {n})", d, q,
                          order_statistic_quantile(law.exact, k, n, q))  # fmt: skip
        else:
            m = draw_m
            d = pa.iid_sum(law.dist, m)
            exact = _sum_closed_form(law, m)
            name = f"iid_sum({law.name}, {m})"
            if exact is not None and exact.dist.name == "gamma" and exact.args[0] >= 1e5:
                check_large_gamma(name, d, q, exact.args[0], exact.kwds["scale"])
            elif exact is not None:
                check_bracket(name, d, q, float(exact.ppf(q)))

    draw_n = draw(counts)
    draw_k = draw(st.sampled_from([1, 2, 10, 10**6, 10**12]))
    draw_m = draw(st.sampled_from([1, 2, 3, 10, 1000, 10**6, 10**9]))
    return f"{op} of {law.name} at q={q}", run


def _sum_closed_form(law: Law, m: int) -> Any:
    name = law.exact.dist.name
    args, kwds = law.exact.args, law.exact.kwds
    if name == "norm":
        mu, sd = args
        return stats.norm(m * mu, math.sqrt(m) * sd)
    if name == "gamma":
        return stats.gamma(args[0] * m, scale=kwds["scale"])
    if name == "expon":
        return stats.gamma(m, scale=kwds["scale"])
    return None


# ----- hostile calls on the public API -----------------------------------------------------------
CONSTRUCTORS: dict[str, Callable[..., Any]] = {
    "normal": pa.normal,
    "lognormal": pa.lognormal,
    "gamma": pa.gamma,
    "exponential": pa.exponential,
    "uniform": pa.uniform,
    "pareto": pa.pareto,
    "point_mass": pa.point_mass,
}


@st.composite
def hostile_calls(draw: Any) -> tuple[str, Callable[[], None]]:
    """A constructor, operation or method called with hostile arguments."""
    what = draw(st.sampled_from(["construct", "method", "operation", "policy"]))
    a, b, c = draw(hostile_scalar), draw(hostile_scalar), draw(hostile_scalar)
    base = pa.normal(1.0, 0.1)
    if what == "construct":
        name = draw(st.sampled_from(sorted(CONSTRUCTORS)))
        nargs = draw(st.integers(1, 2))

        def run() -> None:
            d = CONSTRUCTORS[name](*[a, b][:nargs])
            d.quantile([1e-6, 0.5, 1 - 1e-6])
            d.mean()
            d.std()

        return f"{name}{(a, b)[:nargs]!r}", run
    if what == "method":
        method = draw(st.sampled_from(["quantile", "cdf", "sf", "isf", "quantile_bracket",
                                       "sample", "plot"]))  # fmt: skip

        def run() -> None:
            if method == "sample":
                base.sample(a, rng=b)
            elif method == "plot":
                base.plot(ax=a)
            else:
                getattr(base, method)(a)

        return f"normal.{method}({a!r})", run
    if what == "operation":
        op = draw(st.sampled_from(["iid_sum", "iid_max", "order_statistic", "convolve",
                                   "mixture", "empirical"]))  # fmt: skip

        def run() -> None:
            if op == "iid_sum":
                pa.iid_sum(base, a)
            elif op == "iid_max":
                pa.iid_max(base, a)
            elif op == "order_statistic":
                pa.order_statistic(base, a, b)
            elif op == "convolve":
                pa.convolve(base, base, policy=a)
            elif op == "mixture":
                pa.mixture([base, pa.exponential(1.0)], [a, b])
            else:
                pa.empirical(a)

        return f"{op}({a!r}, {b!r})", run

    def run_policy() -> None:
        pa.GridPolicy(rel_width=a, max_cells=b, tail_mass=c)

    return f"GridPolicy({a!r}, {b!r}, {c!r})", run_policy


# ----- graphs ------------------------------------------------------------------------------------
safe_laws = st.sampled_from(
    [
        pa.normal(1.0, 0.1),
        pa.lognormal(1.0, 0.5),
        pa.gamma(0.5, 0.2),
        pa.exponential(1.0),
        pa.pareto(2.5),
        pa.point_mass(0.3),
        pa.uniform(0.5, 1.5),
    ]
)


@st.composite
def graphs(draw: Any, depth: int = 0) -> StepGraph:
    """Random step DAGs: ops, collectives, replica groups (nested, slow, speed), regimes."""
    g = StepGraph(f"g{depth}")
    names: list[str] = []
    for i in range(draw(st.integers(1, 5))):
        after = draw(st.lists(st.sampled_from(names), max_size=3, unique=True)) if names else []
        kind = draw(st.sampled_from(["op", "comm", "group"] if depth < 2 else ["op", "comm"]))
        name = f"n{depth}_{i}"
        if kind == "group":
            n = draw(st.sampled_from([1, 2, 5, 2000, 10**6, 10**9, 10**12]))
            slow = draw(st.sampled_from([None, (1, 1.5), (min(n, 3), 2.0)]))
            speed = draw(st.sampled_from([None, pa.lognormal(1.0, 0.02)]))
            g.add_replica_group(name, draw(graphs(depth + 1)), n, after, slow=slow, speed=speed)
        else:
            tags = draw(st.sampled_from([(), ("inter-node",)]))
            g.add_op(name, draw(safe_laws), after, kind="comm" if kind == "comm" else "compute",
                     tags=tags)  # fmt: skip
        names.append(name)
    if depth == 0 and draw(st.booleans()):
        g.add_regime("net", {"ok": 0.9, "slow": 0.1}, {"ok": 1.0, "slow": 2.0},
                     applies_to=draw(st.sampled_from(
                         ["comm", "compute", "inter-node", "typo"])))  # fmt: skip
    return g


@st.composite
def graph_runs(draw: Any) -> tuple[str, Callable[[], None]]:
    """Evaluate a random graph with a random engine, or a mutated JSON form of it."""
    g = draw(graphs())
    method = draw(st.sampled_from(["analytic", "bounds", "montecarlo", "json", "json-mutated"]))
    mutation = (draw(st.integers(0, 10**6)), draw(hostile_scalar))

    def run() -> None:
        if method in ("analytic", "bounds"):
            r = pa.predict(g, method)
            for q in (0.5, 0.99):
                low, high = r.quantile_bracket(q)
                if not low <= high:
                    raise Violation(
                        f"{method}: bracket({q}) = ({low}, {high}); graph: {g.to_json()}"
                    )
        elif method == "montecarlo":
            settings = pa.MonteCarloSettings(pool_size=2**14, explicit_limit=8)
            r = pa.predict(g, "montecarlo", samples=500, mc_settings=settings)
            low, high = r.quantile_bracket(0.5)
            if not low <= r.quantile(0.5) <= high:
                raise Violation(f"montecarlo: estimate outside its own interval ({low}, {high})")
        else:
            data = json.loads(g.to_json())
            if method == "json-mutated":
                _mutate(data, *mutation)
            h = StepGraph.from_dict(data)
            if method == "json":
                ra, rb = pa.predict(g), pa.predict(h)
                # node order may change the canonical form's approximation; where both are
                # exact, their guaranteed brackets (round-off folded in) must overlap: both
                # hold the same answer. Plain brackets may legitimately miss by the round-off.
                if ra.exact and rb.exact:
                    (a0, a1) = guaranteed_bracket(ra, 0.5)
                    (b0, b1) = guaranteed_bracket(rb, 0.5)
                    if a1 < b0 or b1 < a0:
                        raise Violation(
                            f"JSON round trip: disjoint exact brackets ({a0}, {a1}), ({b0}, {b1})"
                        )

    return f"{method} on {len(g)}-node graph", run


def _mutate(data: Any, pick: int, value: Any) -> None:
    """Replace one value somewhere in a JSON-like tree (chosen by ``pick``) with ``value``."""
    slots: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k in list(node):
                slots.append((node, k))
                walk(node[k])
        elif isinstance(node, list):
            for i in range(len(node)):
                slots.append((node, i))
                walk(node[i])

    walk(data)
    if slots:
        parent, key = slots[pick % len(slots)]
        parent[key] = value


@st.composite
def group_closed_forms(draw: Any) -> tuple[str, Callable[[], None]]:
    """A replica group of a closed-form body through ``predict``: its bracket holds the truth.

    Bodies: one op of any law (max of n: isf(1 - q^(1/n))) or a chain of two normals (a normal
    body); then a step-level op may follow (a point mass shifts the quantile exactly).
    """
    law = draw(laws(heavy=draw(st.booleans())))
    n = draw(counts)
    q = draw(st.sampled_from([1e-6, 0.01, 0.5, 0.99, 1 - 1e-6]))
    two_normals = draw(st.booleans())
    shift = draw(st.sampled_from([0.0, 0.5]))
    method = draw(st.sampled_from(["analytic", "bounds"]))

    def run() -> None:
        body = StepGraph("body")
        if two_normals:
            body.add_op("a", pa.normal(1.0, 0.1))
            body.add_op("b", pa.normal(2.0, 0.2), ["a"])
            exact = stats.norm(3.0, math.sqrt(0.05))
            name = "normal(1, .1) -> normal(2, .2)"
        else:
            body.add_op("a", law.dist)
            exact, name = law.exact, law.name
        g = StepGraph()
        g.add_replica_group("dp", body, n)
        if shift:
            g.add_op("tail", pa.point_mass(shift), ["dp"])
        r = pa.predict(g, method)
        check_bracket(f"{method}: {n} x [{name}] + {shift}", r, q,
                      max_quantile(exact, n, q) + shift)  # fmt: skip

    return f"group of {n} x {law.name if not two_normals else 'normal chain'} at q={q}", run


# ----- numerical reliability: intervals, moments, frozen bodies ----------------------------------
@st.composite
def reliability_cases(draw: Any) -> tuple[str, Callable[[], None]]:
    """Small-sample Monte Carlo intervals, exact moments, edits to a frozen replica body.

    * ``interval``: with ``n`` draws, no order statistic bounds the q-quantile from above when
      ``q^n > alpha / 2`` (all draws fall below it that often), nor from below when
      ``(1 - q)^n > alpha / 2``: the interval's end must then be infinite, not a sample value.
    * ``moments``: a chain of low-CV normals (one replica) has std ``sqrt(sum sd^2)`` and a
      graph of constants has std 0, to 1e-6 relative (closed forms).
    * ``freeze``: every edit to a graph already added as a replica body is refused, and
      evaluating the outer graph afterwards terminates.
    """
    what = draw(st.sampled_from(["interval", "moments", "freeze", "scale"]))
    if what == "scale":
        sd = draw(log_uniform(-300, 300))
        mu = draw(st.sampled_from([0.0, 1.0, -1e300, 1e300]))

        def run_scale() -> None:
            d = pa.normal(mu, sd)
            if not abs(d.std() - sd) <= 1e-15 * sd:
                raise Violation(f"normal({mu}, {sd}).std() = {d.std()!r}")
            if not math.isnan(pa.from_scipy(stats.cauchy(mu, sd)).mean()):
                raise Violation(f"cauchy({mu}, {sd}).mean() is not NaN (undefined)")

        return f"std of normal({mu:.3g}, {sd:.3g})", run_scale
    if what == "interval":
        n = draw(st.sampled_from([2, 3, 5, 20, 37, 100]))
        q = draw(st.sampled_from([1e-3, 0.01, 0.5, 0.9, 0.99, 0.999]))
        seed = draw(st.integers(0, 2**31))

        def run_interval() -> None:
            g = StepGraph("one")
            g.add_op("a", pa.exponential(1.0))
            low, high = pa.predict(g, "montecarlo", samples=n, seed=seed).quantile_bracket(q)
            if q**n > 0.025 and math.isfinite(high):
                raise Violation(f"n={n}, q={q}: upper end {high} cannot bound the quantile")
            if (1 - q) ** n > 0.025 and math.isfinite(low):
                raise Violation(f"n={n}, q={q}: lower end {low} cannot bound the quantile")

        return f"Monte Carlo interval, n={n}, q={q}", run_interval
    if what == "moments":
        sds = draw(st.lists(log_uniform(-9, -1), min_size=1, max_size=4))
        constant = draw(st.booleans())
        n = draw(counts) if constant else 1

        def run_moments() -> None:
            body = StepGraph("chain")
            prev: list[str] = []
            for i, sd in enumerate(sds):
                law = pa.point_mass(1.0 + i) if constant else pa.normal(1.0 + i, sd)
                prev = [body.add_op(f"o{i}", law, prev)]
            g = StepGraph("step")
            g.add_replica_group("r", body, n)
            std = pa.predict(g).std()
            exact = 0.0 if constant else math.sqrt(sum(sd * sd for sd in sds))
            if abs(std - exact) > 1e-6 * exact:
                raise Violation(f"std {std!r}, exact {exact!r} (sds {sds}, n {n})")

        return f"moments of {len(sds)} {'constants' if constant else 'normals'}", run_moments
    body = draw(graphs(1))
    edit = draw(st.sampled_from(["op", "group", "back", "regime"]))

    def run_freeze() -> None:
        g = StepGraph("outer")
        g.add_replica_group("r", body, 3)
        try:
            if edit == "op":
                body.add_op("late", pa.normal(1.0, 0.1))
            elif edit == "group":
                body.add_replica_group("late", StepGraph.from_dict(body.to_dict()), 2)
            elif edit == "back":
                body.add_replica_group("back", g, 2)
            else:
                body.add_regime("late", {"a": 1.0}, {"a": 2.0})
        except pa.GraphError:
            pa.predict(g, "analytic")
            return
        raise Violation(f"edit {edit!r} of a frozen body was accepted")

    return f"frozen body, edit {edit}", run_freeze


# ----- TOML configs and CLI argument lists -------------------------------------------------------
def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return (
            "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
        )
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))


def to_toml(sections: dict[str, dict[str, Any]]) -> str:
    """A minimal TOML writer for flat ``{section: {key: value}}`` maps."""
    return "".join(
        f"[{sec}]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in keys.items())
        for sec, keys in sections.items()
    )


def _config_keys() -> list[tuple[str, str, Any]]:
    from prism_analytic.workload.presets import preset_job

    out: list[tuple[str, str, Any]] = []

    def walk(prefix: str, node: dict[str, Any]) -> None:
        for k, v in node.items():
            if isinstance(v, dict):
                walk(f"{prefix}.{k}" if prefix else k, v)
            elif prefix:
                out.append((prefix, k, v))

    walk("", preset_job("llama3-8b", 8).to_dict())
    return out


CONFIG_KEYS = _config_keys()
config_values = st.one_of(
    hostile_scalar.filter(lambda v: not isinstance(v, complex | bytes | dict) and v is not None),
    st.integers(0, 70_000),
    st.floats(0, 2),
    st.sampled_from(["1f1b", "interleaved", "fsdp", "zero1", "bf16", "fp8", "h100-sxm-80gb"]),
)


@st.composite
def toml_configs(draw: Any) -> str:
    """A job TOML: a preset and GPU count, then random keys set to random values."""
    preset = draw(st.sampled_from(["llama3-8b", "llama3-70b", "mixtral-8x22b", "nope"]))
    gpus = draw(st.sampled_from([8, 64, 1024, 16384, 10**9, 0, -8, 7]))
    sections: dict[str, dict[str, Any]] = {"job": {"preset": preset, "gpus": gpus}}
    for _ in range(draw(st.integers(0, 4))):
        sec, key, default = draw(st.sampled_from(CONFIG_KEYS))
        if sec == "job":
            continue
        value = draw(st.one_of(config_values, st.just(default)))
        if draw(st.integers(0, 9)) == 0:
            key = key + "_typo"
        sections.setdefault(sec, {})[key] = value
    return to_toml(sections)


@st.composite
def config_runs(draw: Any) -> tuple[str, Callable[[], None]]:
    """Load a random TOML job and predict it analytically."""
    text = draw(toml_configs())

    def run() -> None:
        from prism_analytic.engines.predict import predict
        from prism_analytic.workload.builder import build_step_graph
        from prism_analytic.workload.jobs import load_config

        job = load_config(text)
        r = predict(build_step_graph(job), "analytic")
        low, high = r.quantile_bracket(0.5)
        if not low <= high:
            raise Violation(f"config: bracket ({low}, {high})")

    return text.replace("\n", "; "), run


@st.composite
def cli_runs(draw: Any, tmp: str = "/tmp") -> tuple[str, Callable[[], None]]:
    """``prism`` with a random argument list; ``--json`` output must be valid JSON."""
    cmd = draw(st.sampled_from(["predict", "presets", "demo", "bogus", "slowdown"]))
    argv = [cmd]
    if cmd == "slowdown":  # one GPU included: it once failed there while predict ran
        argv += ["--preset", "llama3-8b", "--gpus", draw(st.sampled_from(["1", "1,2", "2,8"]))]
    if cmd == "predict":
        if draw(st.booleans()):
            argv += ["--preset", draw(st.sampled_from(["llama3-8b", "llama3-70b", "x", ""]))]
        if draw(st.booleans()):
            argv += ["--gpus", draw(st.sampled_from(["8", "1024", "1e9", "1e30", "0", "-1",
                                                     "2.5", "nan", "inf", "x"]))]  # fmt: skip
        if draw(st.booleans()):
            argv += ["--method", draw(st.sampled_from(["analytic", "bounds", "montecarlo", "x"]))]
        if draw(st.booleans()):
            argv += ["--samples", draw(st.sampled_from(["1e3", "500", "1", "0", "1e20", "x"]))]
        if draw(st.booleans()):
            argv += ["--seed", draw(st.sampled_from(["0", "-1", "x", "1e3"]))]
        if draw(st.booleans()):
            argv += ["--plot", draw(st.sampled_from([f"{tmp}/fuzz_plot.png", "/proc/x.png",
                                                     "/nonexistent/x.png", tmp]))]  # fmt: skip
        if draw(st.booleans()):
            argv += ["--config", draw(st.sampled_from(["/nonexistent.toml", "/dev/null", tmp]))]
    if draw(st.booleans()):
        argv.append("--json")

    def run() -> None:
        from prism_analytic.cli import main

        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                rc = main(argv)
        except SystemExit as exc:  # argparse's own usage errors
            rc = exc.code
        if rc not in (0, 1, 2):
            raise Violation(f"exit status {rc!r}")
        if rc == 0 and "--json" in argv and cmd != "bogus":
            text = out.getvalue()
            try:
                json.loads(text, parse_constant=_no_constants)
            except ValueError as exc:
                raise Violation(f"--json output is not valid JSON: {exc}") from None

    return " ".join(argv), run


def _no_constants(name: str) -> Any:
    raise ValueError(f"non-standard JSON token {name}")


#: Every target: name -> strategy of (description, thunk).
TARGETS: dict[str, st.SearchStrategy[tuple[str, Callable[[], None]]]] = {
    "closed_forms": law_operations(),
    "hostile_api": hostile_calls(),
    "graphs": graph_runs(),
    "group_closed_forms": group_closed_forms(),
    "toml_configs": config_runs(),
    "cli": cli_runs(),
    "reliability": reliability_cases(),
}
