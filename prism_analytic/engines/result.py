"""The step-time result every engine returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from ..distributions import Distribution, Empirical, GridDistribution

__all__ = ["StepTimeResult", "LEVELS"]

LEVELS = (0.5, 0.9, 0.95, 0.99, 0.999)


@dataclass(frozen=True)
class StepTimeResult:
    """A step-time distribution with its error bracket and how it was computed.

    Attributes
    ----------
    distribution : Distribution
        The estimate (analytic grid, Monte Carlo empirical law, or the upper bound).
    method : str
        "analytic", "bounds" or "montecarlo".
    compute_time_s : float
        Wall time of the computation.
    lower, upper : GridDistribution or None
        For ``method="bounds"``: guaranteed lower and upper bounds.
    diagnostics : dict
        Engine-specific facts (exactness, canonical-form cores, Monte Carlo pools, policy).
    """

    distribution: Distribution
    method: str
    compute_time_s: float
    lower: GridDistribution | None = None
    upper: GridDistribution | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)

    # ----- the distribution interface -----------------------------------------------------
    def cdf(self, x: Any) -> Any:
        return self.distribution.cdf(x)

    def sf(self, x: Any) -> Any:
        return self.distribution.sf(x)

    def quantile(self, q: Any) -> Any:
        return self.distribution.quantile(q)

    def mean(self) -> float:
        return self.distribution.mean()

    def std(self) -> float:
        return self.distribution.std()

    def quantile_bracket(self, q: float, confidence: float = 0.95) -> tuple[float, float]:
        """An interval for the q-quantile.

        analytic: the numerical bracket (contains the exact quantile of the engine's model);
        bounds: [lower bound's low side, upper bound's high side] (contains the true quantile);
        montecarlo: a distribution-free ``confidence`` interval from order statistics.
        """
        if self.method == "bounds":
            return (
                float(self.lower.quantile_bracket(q)[0]),
                float(self.upper.quantile_bracket(q)[1]),
            )
        if isinstance(self.distribution, Empirical):
            return _order_statistic_ci(self.distribution.samples, q, confidence)
        low, high = self.distribution.quantile_bracket(q)
        return float(low), float(high)

    # ----- reporting ----------------------------------------------------------------------
    def to_dict(self, levels: tuple[float, ...] = LEVELS) -> dict[str, Any]:
        """JSON-friendly summary: mean, std, quantiles, brackets, timing and diagnostics."""
        out: dict[str, Any] = {
            "method": self.method,
            "mean_s": self.mean(),
            "std_s": self.std(),
            "compute_time_s": self.compute_time_s,
        }
        for q in levels:
            out[f"p{_pct(q)}_s"] = float(self.quantile(q))
        out["bracket"] = {str(q): list(self.quantile_bracket(q)) for q in levels}
        out["diagnostics"] = self.diagnostics
        return out

    def summary(self, levels: tuple[float, ...] = LEVELS) -> str:
        """A readable multi-line summary."""
        lines = [
            f"step time ({self.method}, computed in {self.compute_time_s * 1e3:.1f} ms)",
            f"  mean {self.mean():.6g} s   std {self.std():.6g} s"
            + (f" (CV {self.std() / self.mean():.2%})" if self.mean() > 0 else ""),
        ]
        label = {
            "analytic": "numerical bracket",
            "bounds": "guaranteed bounds",
            "montecarlo": "95% CI",
        }[self.method]
        for q in levels:
            low, high = self.quantile_bracket(q)
            lines.append(
                f"  p{_pct(q):<5} {float(self.quantile(q)):.6g} s   {label} [{low:.6g}, {high:.6g}]"
            )
        return "\n".join(lines)

    def plot(self, ax: Any = None, *, ccdf: bool = False) -> Any:
        """CDF (or CCDF) with the bracket band; bounds plot both bounds."""
        ax = self.distribution.plot(ax, ccdf=ccdf, label=self.method)
        if self.method == "bounds":
            self.lower.plot(ax, ccdf=ccdf, label="lower bound")
        return ax


def _pct(q: float) -> str:
    return f"{q * 100:g}".replace(".", "")


def _order_statistic_ci(
    sorted_samples: np.ndarray, q: float, confidence: float
) -> tuple[float, float]:
    """Distribution-free CI for a quantile: order statistics at binomial quantiles."""
    n = sorted_samples.size
    alpha = 1 - confidence
    lo = int(stats.binom.ppf(alpha / 2, n, q))
    hi = int(stats.binom.isf(alpha / 2, n, q))
    return float(sorted_samples[max(lo - 1, 0)]), float(sorted_samples[min(hi, n - 1)])
