"""The step-time results of the three engines: one class each, each saying what it guarantees.

* :class:`AnalyticResult`: a distribution. ``exact`` is True when no part of the graph was
  approximated; its numerical bracket then provably contains the exact quantile. When a
  reconvergent core was approximated (Clark-Mehler), the bracket only covers grid rounding of the
  *approximate* model: it is labelled so, and :func:`~.crosscheck.verify` adds guaranteed bounds
  and a Monte Carlo measurement of the approximation error.
* :class:`BoundsResult`: guaranteed lower and upper bounds. It has no mean or point quantile.
* :class:`MonteCarloResult`: an empirical law. Its intervals are confidence intervals that
  include every error the sampler makes (order statistics and, where replica groups are sampled
  from a pool, the pool's KS error).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._checks import check_probabilities
from ..distributions import Empirical, GridDistribution
from .order_stat_interval import order_statistic_interval

__all__ = ["StepTimeResult", "AnalyticResult", "BoundsResult", "MonteCarloResult", "LEVELS"]

LEVELS = (0.5, 0.9, 0.95, 0.99, 0.999)


@dataclass(frozen=True, kw_only=True)
class StepTimeResult:
    """What every engine returns: a method, its timing, its diagnostics and its guarantee.

    Attributes
    ----------
    method : str
        "analytic", "bounds" or "montecarlo".
    compute_time_s : float
        Wall time of the computation.
    diagnostics : dict
        Engine-specific facts (canonical-form cores, Monte Carlo pools, grid policy).
    """

    method: str
    compute_time_s: float
    diagnostics: dict[str, Any] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        """True when the reported intervals provably contain the exact answer of the graph."""
        raise NotImplementedError

    @property
    def guarantee(self) -> str:
        """One sentence: what the intervals of this result are."""
        raise NotImplementedError

    def quantile_bracket(self, q: Any, confidence: float = 0.95) -> tuple[Any, Any]:
        """The interval this result reports for the q-quantile (see :attr:`guarantee`).

        ``q`` is one level (two floats back) or an array of levels (two arrays of its shape).
        """
        levels = check_probabilities(q)
        if levels.ndim == 0:
            return self._bracket_at(float(levels), confidence)
        pairs = np.array([self._bracket_at(float(x), confidence) for x in levels.ravel()])
        return pairs[:, 0].reshape(levels.shape), pairs[:, 1].reshape(levels.shape)

    def _bracket_at(self, q: float, confidence: float) -> tuple[float, float]:
        raise NotImplementedError

    def _quantile_rows(self, levels: tuple[float, ...]) -> dict[str, dict[str, Any]]:
        raise NotImplementedError

    # ----- reporting ----------------------------------------------------------------------
    def to_dict(self, levels: tuple[float, ...] = LEVELS) -> dict[str, Any]:
        """JSON-friendly summary: ``exact`` and ``guarantee`` first, then per-quantile rows."""
        return {
            "method": self.method,
            "exact": self.exact,
            "guarantee": self.guarantee,
            "compute_time_s": self.compute_time_s,
            **self._point_fields(levels),
            "quantiles": self._quantile_rows(levels),
            "diagnostics": self.diagnostics,
        }

    def _point_fields(self, levels: tuple[float, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {"mean_s": self.mean(), "std_s": self.std()}  # type: ignore[attr-defined]
        for q in levels:
            out[f"p{_pct(q)}_s"] = float(self.quantile(q))  # type: ignore[attr-defined]
        out["bracket"] = {str(q): list(self.quantile_bracket(q)) for q in levels}
        return out

    def _label(self) -> str:
        raise NotImplementedError

    def summary(self, levels: tuple[float, ...] = LEVELS) -> str:
        """A readable multi-line summary (its first line says what is guaranteed)."""
        lines = [
            f"step time ({self.method}, computed in {self.compute_time_s * 1e3:.1f} ms;"
            f" {'exact' if self.exact else 'not exact'})",
            f"  {self.guarantee}",
        ]
        lines += self._summary_lines(levels)
        return "\n".join(lines)

    def _summary_lines(self, levels: tuple[float, ...]) -> list[str]:
        mean, std = self.mean(), self.std()  # type: ignore[attr-defined]
        lines = [
            f"  mean {mean:.6g} s   std {std:.6g} s"
            + (f" (CV {std / mean:.2%})" if mean > 0 else "")
        ]
        label = self._label()
        for q in levels:
            low, high = self.quantile_bracket(q)
            lines.append(
                f"  p{_pct(q):<5} {float(self.quantile(q)):.6g} s"  # type: ignore[attr-defined]
                f"   {label} [{low:.6g}, {high:.6g}]"
            )
        return lines


class _LawView:
    """What a result with a whole law (``self.distribution``) answers by delegating to it.

    Analytic results hold the computed law, Monte Carlo results the empirical one.
    """

    def cdf(self, x: Any) -> Any:
        """P(step <= x) under the result's law."""
        return self.distribution.cdf(x)

    def sf(self, x: Any) -> Any:
        """P(step > x) under the result's law, computed directly."""
        return self.distribution.sf(x)

    def quantile(self, q: Any) -> Any:
        """The q-quantile of the result's law."""
        return self.distribution.quantile(q)

    def mean(self) -> float:
        """Mean of the result's law."""
        return self.distribution.mean()

    def std(self) -> float:
        """Standard deviation of the result's law."""
        return self.distribution.std()

    def plot(self, ax: Any = None, *, ccdf: bool = False) -> Any:
        """CDF (or CCDF) of the result's law."""
        return self.distribution.plot(ax, ccdf=ccdf, label=self.method)


@dataclass(frozen=True, kw_only=True)
class AnalyticResult(_LawView, StepTimeResult):
    """The analytic engine's step-time distribution.

    Attributes
    ----------
    distribution : GridDistribution
        The computed law (exact up to its numerical bracket when :attr:`exact`).
    verification : dict or None
        Set by :func:`~.crosscheck.verify`: guaranteed bounds per quantile and the Monte Carlo
        cross-check of every approximated part (KS distance against its DKW band).
    """

    distribution: GridDistribution
    verification: dict[str, Any] | None = None
    cores: tuple[Any, ...] = field(default=(), repr=False, compare=False)

    @property
    def exact(self) -> bool:
        """True when the graph was evaluated without approximation (no canonical-form core)."""
        return bool(self.diagnostics.get("exact", False))

    @property
    def roundoff(self) -> float:
        """Rigorous bound on the CDF error left by floating-point round-off (not in brackets).

        The numerical brackets contain the quantiles of a law whose CDF is within this of the
        computed one's exact counterpart (``GridDistribution.roundoff``; 0 when the policy
        folds round-off into the brackets). :meth:`guaranteed_bracket` folds it in.
        """
        return float(self.distribution.roundoff)

    def guaranteed_bracket(self, q: float) -> tuple[float, float]:
        """The numerical bracket widened by :attr:`roundoff`: levels ``q -+ roundoff``.

        A law whose CDF is within ``r`` of the exact one has its ``(q - r)``-quantile below
        the exact ``q``-quantile and its ``(q + r)``-quantile above it; a level pushed to 0 or
        1 gives an infinite end. Guaranteed for the graph only when :attr:`exact`.
        """
        r = self.roundoff
        if r <= 0:
            return self.quantile_bracket(q)
        low = self.distribution.quantile_bracket(q - r)[0] if q - r > 0 else -np.inf
        high = self.distribution.quantile_bracket(q + r)[1] if q + r < 1 else np.inf
        return float(low), float(high)

    @property
    def guarantee(self) -> str:
        """What the numerical bracket means for this result."""
        if self.exact:
            r = self.roundoff
            if r > 0:
                return (
                    "exact evaluation: every numerical bracket contains the exact quantile "
                    f"up to a CDF error of {r:.2g} from floating-point round-off (a rigorous "
                    "bound); brackets with that error folded in are guaranteed (shown where "
                    "they differ; GridPolicy(fold_roundoff=True) folds it per cell, tighter)"
                )
            return (
                "exact evaluation: every numerical bracket contains the exact quantile (guaranteed)"
            )
        text = (
            "approximate: a reconvergent core was approximated (canonical form); numerical "
            "brackets cover grid rounding of that approximation only, NOT its error"
        )
        if self.verification is not None:
            text += (
                "; each quantile's approximation error, measured by Monte Carlo, and its "
                "guaranteed bounds are attached"
            )
        else:
            text += "; run verify() (the CLI does by default) for guaranteed bounds"
        return text

    def _bracket_at(self, q: float, confidence: float) -> tuple[float, float]:
        """The numerical bracket at ``q`` (guaranteed for the graph only when :attr:`exact`)."""
        low, high = self.distribution.quantile_bracket(q)
        return float(low), float(high)

    def _label(self) -> str:
        return "guaranteed bracket" if self.exact else "numerical bracket (of the approximation)"

    def _quantile_rows(self, levels: tuple[float, ...]) -> dict[str, dict[str, Any]]:
        bounds = (self.verification or {}).get("bounds") or {}
        errors = {r["q"]: r for r in self.quantile_errors()}
        rows = {}
        for q in levels:
            row: dict[str, Any] = {
                "estimate_s": float(self.quantile(q)),
                "numerical_bracket_s": list(self.quantile_bracket(q)),
                "numerical_bracket_guaranteed": self.exact
                and self.guaranteed_bracket(q) == self.quantile_bracket(q),
                "roundoff_cdf_error": self.roundoff,
                "bracket_with_roundoff_s": list(self.guaranteed_bracket(q)),
                "bracket_with_roundoff_guaranteed": self.exact,
            }
            if not self.exact:
                row["guaranteed_bounds_s"] = bounds.get(str(q))
                measured = errors.get(q)
                if measured is not None:
                    for key in ("error_s", "error_rel", "error_band_s", "within_tolerance"):
                        row[key] = measured.get(key)
            rows[str(q)] = row
        return rows

    def to_dict(self, levels: tuple[float, ...] = LEVELS) -> dict[str, Any]:
        """As :meth:`StepTimeResult.to_dict`, plus ``roundoff_cdf_error`` and ``cross_check``."""
        out = super().to_dict(levels)
        out["roundoff_cdf_error"] = self.roundoff
        out["std_exact"] = self.std_exact
        if self.verification is not None:
            out["cross_check"] = self.verification
        return out

    @property
    def std_exact(self) -> bool:
        """True when mean and std are the graph's exact moments, not the grid's estimate.

        Exact moments travel with the grid where the operations allow (sums add them, a
        constant has none, a maximum of i.i.d. copies of a closed-form law takes them by
        quadrature: ``GridDistribution.moments``); otherwise they are estimated from cell
        centres, which overstates the spread of a law one or two cells wide.
        """
        return self.exact and self.distribution.moments is not None

    def _summary_lines(self, levels: tuple[float, ...]) -> list[str]:
        lines = super()._summary_lines(levels)
        h = getattr(self.distribution, "h", None)  # a log lattice has relative cells
        cells = f", cells {h:.3g} s wide" if h is not None else ""
        note = "exact moments" if self.std_exact else f"moments estimated from the grid{cells}"
        lines[0] += f"   ({note})"
        if self.roundoff > 0:
            for i, q in enumerate(levels, start=1):  # rows follow the mean line
                if self.guaranteed_bracket(q) != self.quantile_bracket(q):
                    low, high = self.guaranteed_bracket(q)
                    kind = "guaranteed" if self.exact else "numerical"
                    plain = (
                        "bracket (without round-off)"
                        if self.exact
                        else "numerical bracket (of the approximation, without round-off)"
                    )
                    lines[i] = lines[i].replace(self._label(), plain) + (
                        f"   {kind} with round-off [{low:.6g}, {high:.6g}]"
                    )
        ver = self.verification
        if self.exact or ver is None:
            return lines
        # an approximate answer: its quantiles with their measured errors replace the
        # numerical brackets of the approximation (those stay in to_dict)
        return lines[: len(lines) - len(levels)] + _error_table(ver, levels)

    def quantile_errors(self) -> list[dict[str, Any]]:
        """Rows ``q, value_s, error_s, error_rel, error_band_s, bounds_s, within_tolerance``.

        The approximation error of each reported quantile as :func:`~.crosscheck.verify`
        measured it (analytic minus the step with the approximated parts replaced by their
        Monte Carlo samples; ``error_band_s`` from their DKW band, None for an end the samples
        cannot resolve) beside the guaranteed bounds. Empty for an exact result or one not
        verified.
        """
        return list((self.verification or {}).get("quantile_errors") or [])


def _error_table(ver: dict[str, Any], levels: tuple[float, ...]) -> list[str]:
    """The quantile table of a verified approximate result, then its notes and warning."""

    def num(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    rows = [r for r in ver.get("quantile_errors") or [] if r["q"] in levels]
    table = [["", "value (s)", "error (s)", "error", "error band (s)", "guaranteed bounds (s)"]]
    for r in rows:
        band = r.get("error_band_s")
        bounds = r.get("bounds_s")
        flag = ""
        if r.get("within_tolerance") is False:
            flag = "  > tolerance"
        if r.get("in_bounds") is False:
            flag += "  OUTSIDE bounds"
        table.append(
            [
                f"p{_pct(r['q'])}",
                f"{r['value_s']:.6g}",
                num(r.get("error_s"), "+.3g"),
                num(r.get("error_rel"), "+.3%"),
                "-" if band is None else f"[{num(band[0], '+.3g')}, {num(band[1], '+.3g')}]",
                "-" if bounds is None else f"[{num(bounds[0], '.6g')}, {num(bounds[1], '.6g')}]",
                flag,
            ]
        )
    widths = [max(len(row[i]) for row in table) for i in range(6)]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    lines = [(ln + row[6]) if len(row) > 6 else ln for ln, row in zip(lines, table)]
    tol = ver.get("tolerance", 0.0)
    cores = ver.get("cores", [])
    if ver.get("error_note"):
        lines.append("  " + ver["error_note"])
    elif cores:
        parts = ", ".join(f"{c['where']!r} ({c['samples']:,} samples)" for c in cores)
        judged = [r for r in rows if r.get("within_tolerance") is not None]
        open_ends = [f"p{_pct(r['q'])}" for r in judged if not r.get("resolved", True)]
        verdict = (
            "all within it" if all(r["within_tolerance"] for r in judged) else "NOT all within it"
        )
        if open_ends and all(r["within_tolerance"] for r in judged):
            verdict += f" (one-sided at {', '.join(open_ends)}: not contradicted, not confirmed)"
        lines.append(
            "  error: analytic minus the step with the approximated part(s) replaced by Monte "
            f"Carlo samples ({parts}; an estimate); band {ver.get('step_band_confidence', 0):.1%}"
            f", '-' = not resolved by the samples; tolerance {tol * 100:g}% of the quantile: "
            + verdict
        )
    if not ver.get("bounds"):
        lines.append(f"  guaranteed bounds: {ver.get('bounds_note', 'not computed')}")
    for reason in ver.get("not_checked", []):
        lines.append("  not cross-checked: " + reason)
    if ver.get("warning"):
        lines.append("  WARNING: " + ver["warning"])
    return lines


@dataclass(frozen=True, kw_only=True)
class BoundsResult(StepTimeResult):
    """Guaranteed lower and upper bounds on the step time (no point estimate).

    Attributes
    ----------
    lower, upper : GridDistribution
        Stochastic bounds: the true law lies between them (use ``lower``'s lower sandwich side
        and ``upper``'s upper side).
    """

    lower: GridDistribution
    upper: GridDistribution

    @property
    def exact(self) -> bool:
        """False: bounds are an interval, not an evaluation."""
        return False

    @property
    def guarantee(self) -> str:
        """What the bounds mean."""
        return "guaranteed bounds: the exact quantile lies in [lower, upper] (no point estimate)"

    def _bracket_at(self, q: float, confidence: float) -> tuple[float, float]:
        """[lower bound's low side, upper bound's high side] at ``q`` (contains the truth)."""
        return (
            float(self.lower.quantile_bracket(q)[0]),
            float(self.upper.quantile_bracket(q)[1]),
        )

    def cdf_bracket(self, x: Any) -> tuple[Any, Any]:
        """(low, high) bounds on P(step <= x)."""
        return self.upper.cdf_bounds(x)[0], self.lower.cdf_bounds(x)[1]

    def _mean_note(self) -> str:
        # E[lower] <= E[step] <= E[upper] holds for the bounding laws, but their masses at -inf
        # (lower) and +inf (upper) have no finite mean bound; the means leave those atoms out.
        below, above = float(self.lower.below), float(self.upper.above)
        if below == 0 and above == 0:
            return "guaranteed"
        return (
            "means of the bounding laws without their tail atoms (P <= "
            f"{below:.2g} at -inf, {above:.2g} at +inf): guaranteed only up to those atoms"
        )

    def _mean_bounds(self) -> tuple[float, float]:
        # the lower law's low side and the upper law's high side where they are finite (then a
        # guarantee); otherwise the laws' point means (see _mean_note)
        low, high = self.lower.mean_bracket()[0], self.upper.mean_bracket()[1]
        return (
            float(low) if np.isfinite(low) else float(self.lower.mean()),
            float(high) if np.isfinite(high) else float(self.upper.mean()),
        )

    def _point_fields(self, levels: tuple[float, ...]) -> dict[str, Any]:
        return {
            "mean_bounds_s": list(self._mean_bounds()),
            "mean_bounds_note": self._mean_note(),
            "bracket": {str(q): list(self.quantile_bracket(q)) for q in levels},
        }

    def _quantile_rows(self, levels: tuple[float, ...]) -> dict[str, dict[str, Any]]:
        return {str(q): {"guaranteed_bounds_s": list(self.quantile_bracket(q))} for q in levels}

    def _summary_lines(self, levels: tuple[float, ...]) -> list[str]:
        low, high = self._mean_bounds()
        lines = [f"  mean in [{low:.6g}, {high:.6g}] s ({self._mean_note()})"]
        for q in levels:
            low, high = self.quantile_bracket(q)
            lines.append(f"  p{_pct(q):<5} in [{low:.6g}, {high:.6g}] s")
        return lines

    def plot(self, ax: Any = None, *, ccdf: bool = False) -> Any:
        """Both bounds' CDFs (or CCDFs)."""
        ax = self.upper.plot(ax, ccdf=ccdf, label="upper bound")
        self.lower.plot(ax, ccdf=ccdf, label="lower bound")
        return ax


@dataclass(frozen=True, kw_only=True)
class MonteCarloResult(_LawView, StepTimeResult):
    """The Monte Carlo engine's empirical step-time law.

    Attributes
    ----------
    distribution : Empirical
        The samples.
    """

    distribution: Empirical

    @property
    def exact(self) -> bool:
        """False: a sampled estimate."""
        return False

    @property
    def guarantee(self) -> str:
        """What the intervals are."""
        text = (
            "estimate by sampling; intervals are confidence intervals from order statistics "
            "(an end is infinite where the sample is too small to bound the quantile)"
        )
        if self.pool_error > 0:
            text += (
                f", widened by the replica pools' KS error {self.pool_error:.3g} (95%); "
                "stated confidence by Bonferroni"
            )
        return text

    @property
    def pool_error(self) -> float:
        """KS error of the sampled law: pools' errors (95th percentile) plus truncation.

        The sum of the pooled replica groups' KS errors (0 when none) and the bound on draws
        landing in laws' unresolved tails (``diagnostics["truncation_ks_error"]``).
        """
        pools = sum(p["ks_error"] for p in self.diagnostics.get("pooled_groups", []))
        return float(pools + self.diagnostics.get("truncation_ks_error", 0.0))

    def interval_confidence(self, confidence: float = 0.95) -> float:
        """Confidence of :meth:`quantile_bracket` (Bonferroni with the pools' 95% error)."""
        n_pooled = len(self.diagnostics.get("pooled_groups", []))
        return max(confidence - 0.05 * n_pooled, 0.0)

    def _bracket_at(self, q: float, confidence: float) -> tuple[float, float]:
        """A ``confidence`` interval for the true q-quantile from order statistics.

        Where replica groups were sampled from a pool, the pooled law is within
        :attr:`pool_error` (KS, 95th percentile) of the true one, so the interval is taken at
        levels ``q -+ pool_error``; its joint confidence is :meth:`interval_confidence`.
        """
        d = self.pool_error
        samples = self.distribution.samples
        # a level pushed to 0 or 1 by the pool error says nothing about the support's ends
        low = _order_statistic_ci(samples, q - d, confidence)[0] if q - d > 0 else -np.inf
        high = _order_statistic_ci(samples, q + d, confidence)[1] if q + d < 1 else np.inf
        return float(low), float(high)

    def _label(self) -> str:
        return f"{self.interval_confidence():.0%} CI"

    def _quantile_rows(self, levels: tuple[float, ...]) -> dict[str, dict[str, Any]]:
        conf = self.interval_confidence()
        return {
            str(q): {
                "estimate_s": float(self.quantile(q)),
                "confidence_interval_s": list(self.quantile_bracket(q)),
                "confidence": conf,
            }
            for q in levels
        }


def _pct(q: float) -> str:
    return f"{q * 100:g}".replace(".", "")


def _order_statistic_ci(
    sorted_samples: np.ndarray, q: float, confidence: float
) -> tuple[float, float]:
    """Distribution-free CI for a quantile (:mod:`.order_stat_interval`; infinite ends)."""
    return order_statistic_interval(sorted_samples, q, confidence)
