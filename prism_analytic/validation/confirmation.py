"""The agreement suite's confirmation rule: a verdict inside Monte Carlo's noise is re-measured.

Every verdict of :func:`~prism_analytic.validation.agreement.verdict` is a set of comparisons
(:class:`Comparison`): a metric against its target (``ks <= 0.03``...) or the analytic core
against a baseline (``ks < ks_clark``...). A comparison is *inside Monte Carlo's noise* when
the two sides differ by no more than that noise (95% DKW half-width plus the pooled groups' KS
error for KS, the 95% order-statistic intervals for quantiles and the spread): the same analytic
answer could pass or fail it on another Monte Carlo sample. The rule, written down before it
was run on the suite (``prism agreement --confirm-noise``):

1. A row is *noise-decided* when at least one comparison is inside the noise, in either
   direction (a ``~noise`` miss, a ``tie ... (within MC noise)``, or a met comparison that the
   noise could have turned), and no comparison is missed outside the noise. A row with a miss
   outside the noise is a MISS whatever the noise does, and a row with no comparison inside the
   noise is decided: neither is ever re-run. Passing rows are re-run like missing ones, so the
   rule can take a PASS away as well as give one.
2. A noise-decided row is re-measured ONCE: the same analytic answers against a new Monte Carlo
   sample of :func:`confirmation_samples` (10x the requested samples, at least 1,000,000;
   capped by Monte Carlo's work guard like the first run) with the independent seed
   :func:`confirmation_seed` (the suite's seed + 1). That row, metrics and verdict, replaces
   the first, whether it passes or fails; the first is kept under ``first``.
3. The confirmed verdict is strict (:func:`confirmed_misses`): a comparison still inside the
   (smaller) noise is a miss labelled ``unresolved (within MC noise)``, even where it is met.
4. Where Monte Carlo's work guard (``affordable_samples``) does not allow a larger sample than
   the first, the row cannot be confirmed: it is a MISS labelled ``unconfirmed (MC work guard:
   N samples)``, even where it passed.
5. Before rule 4: where the guard caps the confirmation below its size and the step is the
   barrier over one replica group whose copies are i.i.d. given the step's regimes, the row is
   confirmed against :func:`~prism_analytic.validation.power_reference.power_reference`
   (``sum_r P(r) F_r^n`` from one copy sampled many times, a 95% simultaneous band) with the
   same seed, its band in place of Monte Carlo's noise, strictly as in rule 3.

This module holds the rule itself (what is noise-decided, how large and with which seed the
confirmation is drawn, the confirmed verdict); :func:`~prism_analytic.validation.agreement.
evaluate` applies it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONFIRM_FACTOR",
    "CONFIRM_MIN_SAMPLES",
    "Comparison",
    "confirmation_samples",
    "confirmation_seed",
    "confirmed_misses",
    "mc_noise",
    "noise_decided",
    "target_comparison",
    "unconfirmable_miss",
]

#: The confirmation sample is this many times the requested sample ...
CONFIRM_FACTOR = 10
#: ... and at least this many samples (its DKW half-width is 0.00136).
CONFIRM_MIN_SAMPLES = 1_000_000


@dataclass(frozen=True)
class Comparison:
    """One comparison a verdict is made of.

    Attributes
    ----------
    name : str
        What is compared: a metric against its target (``"ks"``, ``"p99"``...) or against a
        baseline (``"ks<clark"``, ``"spread<independent"``).
    met : bool
        The comparison holds on this Monte Carlo sample.
    within_noise : bool
        The two sides differ by no more than Monte Carlo's own noise.
    """

    name: str
    met: bool
    within_noise: bool


def mc_noise(row: Mapping[str, Any]) -> dict[str, float]:
    """Monte Carlo's own noise per metric of an agreement row.

    KS: the DKW 95% half-width plus any pooled-group error; quantiles and the spread: their 95%
    interval half-widths (relative), as the row reports them.
    """
    return {
        "ks": row["mc_dkw_95"] + row["mc_pool_ks"],
        "p50": row["p50_mc_ci"],
        "p99": row["p99_mc_ci"],
        "spread": row["spread_mc_ci"],
    }


def target_comparison(metric: str, value: float, goal: float, noise: float) -> Comparison:
    """``|value| <= goal``, inside the noise when ``| |value| - goal | <= noise``."""
    size = abs(value)
    return Comparison(metric, bool(size <= goal), bool(abs(size - goal) <= noise))


def noise_decided(comparisons: Sequence[Comparison]) -> list[str]:
    """Names of the comparisons that leave the verdict to Monte Carlo's noise (rule 1).

    Empty when the verdict is decided: some comparison is missed outside the noise, or none is
    inside it.
    """
    if any(not c.met and not c.within_noise for c in comparisons):
        return []
    return [c.name for c in comparisons if c.within_noise]


def confirmation_samples(requested: int, samples: int | None = None) -> int:
    """Samples of the confirmation run (rule 2).

    Parameters
    ----------
    requested : int
        Samples the suite was asked for (the first run's request).
    samples : int, optional
        An explicit confirmation size (``--confirm-samples``); None: ``CONFIRM_FACTOR`` times
        ``requested``, at least ``CONFIRM_MIN_SAMPLES``.

    Returns
    -------
    int
        The confirmation's sample size (before Monte Carlo's work guard).
    """
    if samples is not None:
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 2:
            raise ValueError(f"confirm_samples must be an integer >= 2, got {samples!r}")
        return samples
    return max(CONFIRM_FACTOR * int(requested), CONFIRM_MIN_SAMPLES)


def confirmation_seed(seed: int) -> int:
    """The confirmation's seed: a fixed function of the suite's seed, not chosen per row."""
    return int(seed) + 1


def confirmed_misses(misses: Sequence[str], comparisons: Sequence[Comparison]) -> list[str]:
    """The misses of a confirmation run (rule 3): met comparisons inside the noise are added."""
    unresolved = [
        f"{c.name} unresolved (within MC noise)" for c in comparisons if c.met and c.within_noise
    ]
    return [*misses, *unresolved]


def unconfirmable_miss(samples: int) -> str:
    """The miss label of a noise-decided row Monte Carlo's guard cannot re-measure (rule 4)."""
    return f"unconfirmed (MC work guard: {samples:,} samples)"
