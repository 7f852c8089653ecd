"""Verification of an approximate analytic result: its error on the step quantiles it prints.

The analytic engine is exact except on irreducible reconvergent cores (pipeline lattices), where
it uses the Clark-Mehler canonical form. :func:`verify` attaches to such a result:

* **guaranteed bounds** on every reported quantile from the bounds engine (when the graph is
  small enough for the time budget; otherwise it says so);
* the **measured error of every reported step quantile**: each approximated part (the replica
  body, not the replica group, so it is small) is sampled with the exact semantics, the step is
  re-evaluated with that part replaced by its samples (the rest of the step is exact), and the
  error is the analytic quantile minus that Monte Carlo one, in seconds and relative to the
  quantile, with the band the part's DKW band propagates to (an end the samples cannot resolve
  is infinite). :func:`judge_quantile` says whether that band resolves an error beyond a
  tolerance (default :data:`DEFAULT_TOLERANCE`, 0.1% of the quantile); a warning is raised only
  when it does, or when an analytic quantile lies outside the guaranteed bounds. A noisy point
  error never raises one on its own, so the verdict does not depend on the sample count.

The body's KS distance against its samples is kept as a diagnostic (``cores``): it is scale
free, so on a narrow body law it flags quantile shifts far below anything a user reads.
The check measures the approximation error; it does not turn the estimate into a guarantee.
Only the bounds are guaranteed.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

from ..graph import StepGraph
from .analytic import part_key
from .montecarlo import MonteCarloSettings, sample_step
from .result import LEVELS, AnalyticResult, _order_statistic_ci

__all__ = [
    "verify",
    "body_crosscheck",
    "judge_quantile",
    "quantile_error_rows",
    "BOUNDS_MAX_OPS",
    "DEFAULT_TOLERANCE",
]

#: Largest bounds-engine cost (:func:`~.predict.grid_nodes` with ``"bounds"``: grid nodes, a
#: compact pipeline counting ~1 per 50 ops) for which :func:`verify` runs the bounds engine by
#: default (about 1-2 s on one core for a 1F1B 8 x 32 body of explicit ops).
BOUNDS_MAX_OPS = 600
#: Body levels compared with Monte Carlo order statistics.
BODY_LEVELS = (0.1, 0.5, 0.9, 0.99)
#: Pilot block (timed to size the rest), smallest and largest sample counts of one cross-check.
PILOT_SAMPLES, MIN_SAMPLES, MAX_SAMPLES = 200, 500, 200_000
#: Largest approximated part (explicit ops per sample) the default cross-check samples.
MAX_CHECK_OPS = 100_000
#: Op draws in the pilot block at most (about 0.1 s).
PILOT_DRAWS = 2_000_000
#: Default tolerance on a step quantile's approximation error, relative to the quantile.
DEFAULT_TOLERANCE = 1e-3


def _explicit_ops(graph: StepGraph) -> int:
    total = 0
    for _, d in graph.graph.nodes(data=True):
        if "body" in d:
            total += _explicit_ops(d["body"])
        else:
            total += d["spec"].n_ops if "spec" in d else 1
    return total


def body_crosscheck(
    where: str,
    graph: StepGraph,
    law: Any,
    *,
    budget_s: float,
    alpha: float = 1e-3,
    seed: int = 0,
    max_samples: int = MAX_SAMPLES,
    samples: int | None = None,
) -> dict[str, Any]:
    """KS distance between ``law`` (analytic) and Monte Carlo samples of ``graph``.

    Parameters
    ----------
    where : str
        Where the sub-graph sits in the step (for messages).
    graph : StepGraph
        The sub-graph whose analytic law used an approximated core.
    law : Distribution
        Its analytic law.
    budget_s : float
        Wall-time budget for sampling (at least :data:`MIN_SAMPLES` samples are always drawn).
    alpha : float
        The DKW band and the quantile intervals hold with probability ``1 - alpha``.
    seed : int
        Monte Carlo seed.
    max_samples : int
        Cap on the number of samples.
    samples : int, optional
        Draw exactly this many samples instead of filling ``budget_s`` (a reproducible check,
        independent of the machine's load).

    Returns
    -------
    dict
        ``samples``, ``ks``, ``dkw_band``, ``within_band`` and per-level ``quantiles``
        (analytic value, Monte Carlo interval, relative error), plus a one-line ``summary``.
    """
    start = time.perf_counter()
    settings = MonteCarloSettings(seed=seed)
    # a pilot block measures the cost per sample; the rest of the budget sets the count (huge
    # bodies get a smaller pilot and may end with fewer than MIN_SAMPLES: a wider band)
    ops = max(_explicit_ops(graph), 1)
    pilot = int(min(PILOT_SAMPLES, max(20, PILOT_DRAWS // ops)))
    if samples is not None:
        pilot = min(pilot, samples)
    draws = sample_step(graph, pilot, settings=settings)
    spent = time.perf_counter() - start
    if samples is not None:
        more = samples - pilot
    else:
        more = int(pilot * max(budget_s - spent, 0.0) / max(spent, 1e-9))
        if ops * MIN_SAMPLES <= PILOT_DRAWS * 10:
            more = max(more, MIN_SAMPLES - pilot)
        more = min(more, max_samples - pilot)
    if more > 0:
        extra = sample_step(graph, more, settings=dataclasses.replace(settings, seed=seed + 1))
        draws = np.concatenate([draws, extra])
    x = np.sort(draws)
    n = x.size
    f = np.asarray(law.cdf(x), dtype=float)
    i = np.arange(1, n + 1)
    ks = float(max(np.max(i / n - f), np.max(f - (i - 1) / n)))
    band = math.sqrt(math.log(2.0 / alpha) / (2.0 * n))
    rows = {}
    for q in BODY_LEVELS:
        est = float(law.quantile(q))
        low, high = _order_statistic_ci(x, q, 1 - alpha)
        rows[str(q)] = {
            "analytic_s": est,
            "montecarlo_s": float(np.quantile(x, q)),
            "montecarlo_interval_s": [low, high],
            "inside": bool(low <= est <= high),
        }
    ok = ks <= band
    summary = (
        f"approximated part {where!r} ({n:,} Monte Carlo samples): body KS {ks:.4f} "
        f"{'<=' if ok else '>'} DKW band {band:.4f} ({1 - alpha:.1%}; a diagnostic of the "
        "body's law, not of the step's quantiles)"
    )
    return {
        "where": where,
        "_draws": x,
        "samples": n,
        "ks": ks,
        "dkw_band": band,
        "confidence": 1 - alpha,
        "within_band": ok,
        "quantiles": rows,
        "time_s": time.perf_counter() - start,
        "summary": summary,
    }


def band_grid(sorted_draws: np.ndarray, eps: float, h: float, policy: Any) -> Any:
    """The DKW band of a sample as one rounding sandwich on the lattice ``k * h``.

    The lower variable has CDF ``min(F_n + eps, 1)`` (mass ``eps`` at -inf, each draw moved down
    to the lattice), the upper one ``max(F_n - eps, 0)`` (mass ``eps`` at +inf, draws moved up).
    With probability ``1 - alpha`` (DKW) the true law lies between them; ``eps = 0`` gives the
    empirical law itself. Every later operation of the analytic engine is monotone, so the
    step computed with this in place of an approximated part brackets the step's true law.
    """
    from ..distributions import GridDistribution
    from ..distributions.grid import move_mass_down, move_mass_up

    x = sorted_draws
    k_lo = np.floor(x / h).astype(np.int64)
    k_hi = np.ceil(x / h).astype(np.int64)
    k0 = int(k_lo[0])
    size = int(k_hi[-1]) - k0 + 1
    lo = np.bincount(k_lo - k0, minlength=size) / x.size
    hi = np.bincount(k_hi - k0, minlength=size) / x.size
    if eps > 0:
        lo, hi = move_mass_down(lo, eps), move_mass_up(hi, eps)
    return GridDistribution(h, k0, lo, hi, below=eps, above=eps, policy=policy)


def _propagated(
    graph: StepGraph, result: AnalyticResult, checks: list[dict[str, Any]], scales: list[float]
) -> list[Any]:
    """Step laws with every checked part replaced by its samples widened by ``scale`` bands."""
    from ..policy import GridPolicy
    from .analytic import analytic_variants

    sets = [
        {
            c["_key"]: band_grid(c["_draws"], k * c["dkw_band"], c["_law"].h, c["_law"].policy)
            for c in checks
        }
        for k in scales
    ]
    diag = result.diagnostics
    return analytic_variants(
        graph,
        GridPolicy(**diag["policy"]),
        sets,
        core_method=diag.get("core_method", "clark-mehler"),
        window=diag.get("window"),
        shape=diag.get("core_shape", "normal"),
    )


def verify(
    graph: StepGraph,
    result: AnalyticResult,
    *,
    budget_s: float = 1.0,
    alpha: float = 1e-3,
    seed: int = 0,
    bounds: bool | None = None,
    levels: tuple[float, ...] = LEVELS,
    tolerance: float = DEFAULT_TOLERANCE,
    samples: int | None = None,
) -> AnalyticResult:
    """``result`` with a ``verification`` attached (guaranteed bounds, measured quantile errors).

    Parameters
    ----------
    graph : StepGraph
        The graph ``result`` was computed from.
    result : AnalyticResult
        An analytic result of ``graph`` (from :func:`~.predict.predict`).
    budget_s : float
        Wall-time budget of the Monte Carlo cross-checks, shared by the approximated parts in
        order of their regime probability.
    alpha : float
        Confidence of the DKW bands is ``1 - alpha``.
    seed : int
        Monte Carlo seed.
    bounds : bool, optional
        Run the bounds engine for guaranteed bounds (default: when its cost is at most
        :data:`BOUNDS_MAX_OPS` grid nodes).
    levels : tuple of float
        Quantile levels that get guaranteed bounds and a measured error.
    tolerance : float
        Largest approximation error of a step quantile, relative to it, that needs no warning
        (default 0.001: 0.1% of the quantile); see :func:`judge_quantile`.
    samples : int, optional
        Monte Carlo samples per approximated part, instead of filling ``budget_s``: the check
        is then the same on every machine and at every load.

    Returns
    -------
    AnalyticResult
        A copy with ``verification`` set; unchanged (but marked) when the result is exact.
        ``verification["quantile_errors"]`` holds one row per level
        (:func:`quantile_error_rows`; also :meth:`~.result.AnalyticResult.quantile_errors`).
    """
    from .predict import grid_nodes, predict

    if not isinstance(result, AnalyticResult):
        raise TypeError(f"result must be an AnalyticResult, got {type(result).__name__}")
    if not isinstance(budget_s, int | float) or not budget_s > 0:
        raise ValueError(f"budget_s must be a positive number of seconds, got {budget_s!r}")
    if not isinstance(alpha, float) or not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    tolerance = check_tolerance(tolerance)
    if samples is not None and (
        isinstance(samples, bool) or not isinstance(samples, int) or samples < 20
    ):
        raise ValueError(f"samples must be an integer >= {20}, got {samples!r}")
    start = time.perf_counter()
    if result.exact:
        ver: dict[str, Any] = {
            "needed": False,
            "cores": [],
            "bounds": None,
            "warning": None,
            "tolerance": tolerance,
        }
        return dataclasses.replace(result, verification=ver)
    cores: list[dict[str, Any]] = []
    skipped: list[str] = []
    seen: dict[tuple, dict[str, Any]] = {}
    parts = sorted(result.cores, key=lambda c: -c[3])
    for k, (where, sub, law, weight) in enumerate(parts):
        # regimes that do not touch the approximated part give the same law: check it once
        key = (where, round(float(law.mean()), 15), round(float(law.std()), 15))
        if key in seen:
            seen[key]["regime_probability"] += weight
            continue
        left = budget_s - (time.perf_counter() - start)
        if cores and left <= 0 and samples is None:
            break
        if _explicit_ops(sub) > MAX_CHECK_OPS:
            skipped.append(
                f"{where!r}: {_explicit_ops(sub):,} ops per sample exceed the cross-check's "
                f"limit of {MAX_CHECK_OPS:,} (sample it with --method montecarlo)"
            )
            continue
        check = body_crosscheck(
            where,
            sub,
            law,
            budget_s=max(left, 0.0) / (len(parts) - k),
            alpha=alpha,
            seed=seed,
            samples=samples,
        )
        check["regime_probability"] = weight
        check["_key"] = part_key(where, law)
        check["_law"] = law
        seen[key] = check
        cores.append(check)
    checked = sum(c["regime_probability"] for c in cores)
    # Step-level view: the approximated parts replaced by their samples (an estimate) and by
    # their DKW bands (a 1 - alpha * parts confidence band for the step, the rest being exact).
    step_band = None
    if cores and len(cores) == len({part_key(w, g) for w, _, g, _ in parts}):
        mc_law, band_law = _propagated(graph, result, cores, [0.0, 1.0])
        step_band = {}
        for q in levels:
            est = float(result.quantile(q))
            low, high = (float(v) for v in band_law.quantile_bracket(q))
            step_band[str(q)] = {
                "estimate_s": est,
                "montecarlo_propagated_s": float(mc_law.quantile(q)),
                "band_s": [_finite(low), _finite(high)],
                "inside": bool(low <= est <= high),
                "outside_by_s": float(max(low - est, est - high, 0.0)),
            }
    cost = grid_nodes(graph, "bounds")
    do_bounds = cost <= BOUNDS_MAX_OPS if bounds is None else bool(bounds)
    table = None
    if do_bounds:
        b = predict(graph, "bounds")
        table = {str(q): [_finite(v) for v in b.quantile_bracket(q)] for q in levels}
        bounds_note = f"computed in {b.compute_time_s:.2f} s"
    else:
        bounds_note = (
            f"not computed: {cost:,} grid nodes for the bounds engine exceed the default limit "
            f"of {BOUNDS_MAX_OPS} "
            "(pass bounds=True, or use --method bounds)"
        )
    rows = quantile_error_rows(result, levels, step_band, table, tolerance)
    if step_band is None:
        error_note = (
            "approximation error not measured: "
            + ("; ".join(skipped) if skipped else "not every approximated part was sampled")
            + ("; the guaranteed bounds hold" if table else "; use --method montecarlo")
        )
    else:
        error_note = None
    for c in cores:
        for k in ("_draws", "_key", "_law"):
            c.pop(k)
    ver = {
        "needed": True,
        "tolerance": tolerance,
        "quantile_errors": rows,
        "error_note": error_note,
        "step_band": step_band,
        "step_band_confidence": 1 - alpha * len(cores),
        "bounds": table,
        "bounds_note": bounds_note,
        "cores": cores,
        "checked_probability": checked,
        "not_checked": skipped,
        "warning": _warning(rows, tolerance),
        "time_s": time.perf_counter() - start,
    }
    return dataclasses.replace(result, verification=ver)


def check_tolerance(tolerance: Any) -> float:
    """``tolerance`` as a float in [0, 1), or a ValueError naming it."""
    if (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, int | float | np.floating)
        or not 0 <= tolerance < 1
    ):
        raise ValueError(
            "tolerance must be a relative error in [0, 1) (e.g. 0.001 for 0.1% of the "
            f"quantile), got {tolerance!r}"
        )
    return float(tolerance)


def judge_quantile(
    estimate: float, reference: float, low: float, high: float, tolerance: float
) -> dict[str, Any]:
    """The error of ``estimate`` against a reference quantile with interval ``[low, high]``.

    ``reference`` is the reference's point value (Monte Carlo), ``[low, high]`` its interval
    for the true quantile (``-inf``/``+inf`` where the sample cannot resolve that end). The
    error is ``estimate - reference`` (seconds, and relative to ``|estimate|``); its band is
    ``[estimate - high, estimate - low]``. The estimate is **within tolerance** unless the
    interval *resolves* an error beyond the tolerance: the estimate lies outside ``[low, high]``
    widened by ``tolerance * |estimate|`` on each side. An infinite end resolves nothing
    towards it, and the point error alone is sampling noise there (at the far tail of a max of
    many replicas it is the sample's extreme), so it never decides; ``resolved`` says whether
    both ends were finite, i.e. whether "within tolerance" is a confirmation or only the
    absence of evidence against it.

    Returns
    -------
    dict
        ``error_s``, ``error_rel``, ``error_band_s`` (None for an unresolved end),
        ``resolved`` (both ends finite), ``outside_by_s`` (how far the estimate lies outside
        the widened-by-nothing interval) and ``within_tolerance``.
    """
    tol_s = tolerance * abs(estimate)
    error = estimate - reference
    outside = max(low - estimate, estimate - high, 0.0)
    resolved = bool(np.isfinite(low) and np.isfinite(high))
    within = outside <= tol_s
    return {
        "error_s": float(error),
        "error_rel": float(error / abs(estimate)) if estimate else math.inf,
        "error_band_s": [_finite(estimate - high), _finite(estimate - low)],
        "resolved": resolved,
        "outside_by_s": float(outside),
        "within_tolerance": bool(within),
    }


def quantile_error_rows(
    result: AnalyticResult,
    levels: tuple[float, ...],
    step_band: dict[str, Any] | None,
    bounds: dict[str, Any] | None,
    tolerance: float,
) -> list[dict[str, Any]]:
    """One row per level: value, measured error (s, relative, band), guaranteed bounds.

    A level without a measured error (``step_band`` None) has ``error_s`` None and is not
    judged; a value outside its guaranteed bounds is flagged ``in_bounds`` False.
    """
    rows = []
    for q in levels:
        est = float(result.quantile(q))
        row: dict[str, Any] = {"q": q, "value_s": est}
        band = (step_band or {}).get(str(q))
        if band is None:
            row.update(error_s=None, error_rel=None, error_band_s=None, within_tolerance=None)
        else:
            low, high = (
                (-math.inf if band["band_s"][0] is None else band["band_s"][0]),
                (math.inf if band["band_s"][1] is None else band["band_s"][1]),
            )
            row["montecarlo_s"] = band["montecarlo_propagated_s"]
            row["band_s"] = band["band_s"]
            row.update(judge_quantile(est, band["montecarlo_propagated_s"], low, high, tolerance))
        b = (bounds or {}).get(str(q))
        row["bounds_s"] = b
        if b is not None:
            lo = -math.inf if b[0] is None else b[0]
            hi = math.inf if b[1] is None else b[1]
            row["in_bounds"] = bool(lo <= est <= hi)
        else:
            row["in_bounds"] = None
        rows.append(row)
    return rows


def _warning(rows: list[dict[str, Any]], tolerance: float) -> str | None:
    """The material problems of ``rows``: errors above tolerance, values outside the bounds."""
    parts = []
    out = [r for r in rows if r["in_bounds"] is False]
    if out:
        parts.append(
            "analytic "
            + ", ".join(f"{_name(r['q'])} {r['value_s']:.6g} s" for r in out)
            + " outside the guaranteed bounds"
        )
    over = [r for r in rows if r["within_tolerance"] is False]
    if over:
        worst = max(over, key=lambda r: r["outside_by_s"] / abs(r["value_s"]))
        parts.append(
            f"approximation error above the tolerance ({tolerance * 100:g}% of the quantile) at "
            + ", ".join(_name(r["q"]) for r in over)
            + f"; largest {_name(worst['q'])}: {worst['error_s']:+.3g} s "
            f"({worst['error_rel']:+.3%}), {worst['outside_by_s']:.3g} s outside the band of "
            "Monte Carlo of the approximated part"
        )
    if not parts:
        return None
    return "; ".join(parts) + (
        "; the guaranteed bounds hold" if not out and any(r["bounds_s"] for r in rows) else ""
    )


def _name(q: float) -> str:
    return "p" + f"{q * 100:g}"


def _finite(v: float) -> float | None:
    """JSON-safe: an infinite band side (the sample cannot resolve it) becomes None."""
    return float(v) if math.isfinite(v) else None
