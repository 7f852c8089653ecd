"""Which predicted law per-run-normalised steps are drawn from: within-run or marginal.

A measured run holds one allocation: its persistent GPU speeds (``variability.spatial``:
the per-GPU spread and the degraded GPUs) are fixed for all its steps, and dividing by the
run's own median removes them, so its normalised steps follow the *within-run* law (the
prediction with the persistent spread removed). Steps drawn afresh from the prediction
(a new allocation every step: simulated logs, or steps pooled over many short jobs as one
log) follow the *marginal* law, whose spread includes the allocations'.

Compared with the wrong one, the jitter fit reads the allocations' spread as per-step
jitter. Since degraded GPUs are drawn per replica (a Binomial count of slow replicas), the
marginal law of a job with ``slow_fraction > 0`` is a mixture with a slow mode, and a
jitter wide enough to reach that mode also smooths the mixture and moves its median, so the
GEMM efficiency fitted on the median moves too (llama3-8b, 16 GPUs, ``slow_fraction`` 0.01,
200 marginal draws: ``gemm_fp4`` 0.4022 [0.4012, 0.4037] against a true 0.400;
``tests/calibration/test_calibration_shape_choice.py``).

``shape="auto"`` decides from the steps. Within-run is what a measured run is, so it is kept
unless the steps say otherwise: each shape's law, with the jitter fitted under that shape and
divided by its own median (as the steps are by theirs), is compared with the normalised
steps by the Kolmogorov-Smirnov distance, and the marginal law is taken only when it is the
closer one beyond the steps' sampling noise: the paired bootstrap of the difference of the
two distances (:func:`~prism_analytic.validation.paired_ks.paired_ks`, 400 resamples) puts
its ``confidence`` interval below 0. A KS *test* of the within-run law alone would not do:
real logs reject every model of this kind (MLPerf GB200 512, 933 steps: p 4e-24 for the
within-run law and 3e-23 for the marginal one, distances 0.170 and 0.167), and a bare
"smaller distance" would take the marginal law there on 0.003, dropping the measured
jitter. The bootstrap keeps each step's normalised value fixed (the run medians are not
redrawn) and the jitter is fitted to the same steps, so the interval is approximate. Where
the two laws are too alike for the steps to tell apart (a small spatial spread, few steps),
within-run stays, and either choice then gives nearly the same efficiency
(``validation/results/calibration_consistency.md``, section 4). The one-sample KS p-values
are reported too (approximate for the same reasons; conservative).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from scipy import stats

from ..validation.paired_ks import DEFAULT_RESAMPLES, paired_ks

__all__ = ["SHAPES", "SHAPE_OPTIONS", "normalised_ks", "choose_shape"]

#: The two laws a per-run-normalised log can be compared with (the first wins ties).
SHAPES = ("within-run", "marginal")
#: What ``shape=`` accepts: a shape, or ``"auto"`` (chosen from the steps).
SHAPE_OPTIONS = ("auto", *SHAPES)


def normalised_ks(law: Any, norm: np.ndarray) -> tuple[float, float]:
    """Kolmogorov-Smirnov test of ``norm`` against ``law`` divided by its median.

    Parameters
    ----------
    law : PredictedLaw
        A predicted law (its ``result`` answers ``sf``; ``p50_s`` is its median).
    norm : numpy.ndarray
        Steps divided by their run's median, pooled.

    Returns
    -------
    tuple of float
        The one-sample KS statistic and its p-value (``scipy.stats.kstest``, exact for a
        fully specified law; see the module docstring); mass beyond the engine's grid counts
        as beyond every step.
    """
    res = stats.kstest(np.asarray(norm, dtype=float), _cdf(law))
    return float(res.statistic), float(res.pvalue)


def _cdf(law: Any) -> Callable[[np.ndarray], np.ndarray]:
    """The CDF of ``law`` divided by its median, vectorised."""
    scale = float(law.p50_s)

    def cdf(x: np.ndarray) -> np.ndarray:
        # the engine's sf is computed directly (exact in the upper tail); nan: beyond the grid
        sf = np.asarray(law.result.sf(np.asarray(x, dtype=float) * scale), dtype=float)
        return 1.0 - np.nan_to_num(sf, nan=1.0)

    return cdf


def choose_shape(
    candidates: Mapping[str, Any], norm: np.ndarray, confidence: float = 0.95, seed: int = 0
) -> tuple[str, dict]:
    """Within-run unless the marginal law is closer to the steps beyond their noise.

    Parameters
    ----------
    candidates : mapping of str to PredictedLaw
        ``{"within-run": law, "marginal": law}``, each with the jitter fitted under it.
    norm : numpy.ndarray
        Steps divided by their run's median, pooled.
    confidence : float
        Level of the paired bootstrap interval of ``KS_marginal - KS_within_run``.
    seed : int
        Seed of the bootstrap.

    Returns
    -------
    tuple of (str, dict)
        The chosen shape and ``{"rule", "ks_within_run", "p_within_run", "ks_marginal",
        "p_marginal", "ks_difference_interval", "chosen"}``.
    """
    if set(candidates) != set(SHAPES):
        raise ValueError(f"candidates: need exactly the shapes {SHAPES}, got {sorted(candidates)}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    (ks_w, p_w), (ks_m, p_m) = (normalised_ks(candidates[s], norm) for s in SHAPES)
    pair = paired_ks(
        np.asarray(norm, dtype=float),
        _cdf(candidates["marginal"]),
        {"within-run": _cdf(candidates["within-run"])},
        # enough resamples that the interval's ends lie >= 5 ordered values inside (paired_ks
        # refuses fewer): 400 at the default 95%, more for a stricter level
        resamples=max(DEFAULT_RESAMPLES, math.ceil(10 / (1 - confidence)) + 1),
        confidence=confidence,
        seed=seed,
    )["within-run"]
    chosen = "marginal" if pair.outcome == "beats" else "within-run"
    return chosen, {
        "rule": "within-run unless the marginal law's KS distance is the smaller one beyond"
        f" the steps' noise (paired bootstrap {confidence:.0%} interval of KS_marginal -"
        " KS_within_run below 0; each law with the jitter fitted under it, over its median)",
        "ks_within_run": ks_w,
        "p_within_run": p_w,
        "ks_marginal": ks_m,
        "p_marginal": p_m,
        "ks_difference_interval": (pair.low, pair.high),
        "chosen": chosen,
    }
