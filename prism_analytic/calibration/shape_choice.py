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
``tests/test_calibration_shape_choice.py``).

``shape="auto"`` decides from the steps. Within-run is what a measured run is, so it is kept
unless the steps reject it: each shape's law, with the jitter fitted under that shape, is
compared with the normalised steps by the one-sample Kolmogorov-Smirnov test (each law
divided by its own median, as the steps are by theirs), and the marginal law is taken only
when the within-run law's p-value is below ``1 - confidence`` *and* the marginal law is the
closer one. Both p-values are approximate: the jitter is fitted to, and the normalisation
taken from, the same steps, which makes them conservative (too large), so a rejection is
not overstated. Where the two laws are too alike for the steps to tell apart (a small
spatial spread, few steps), within-run stays, and either choice then gives nearly the same
efficiency (``validation/results/calibration_consistency.md``, section 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import stats

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
    scale = float(law.p50_s)

    def cdf(x: np.ndarray) -> np.ndarray:
        # the engine's sf is computed directly (exact in the upper tail); nan: beyond the grid
        sf = np.asarray(law.result.sf(np.asarray(x, dtype=float) * scale), dtype=float)
        return 1.0 - np.nan_to_num(sf, nan=1.0)

    res = stats.kstest(np.asarray(norm, dtype=float), cdf)
    return float(res.statistic), float(res.pvalue)


def choose_shape(
    candidates: Mapping[str, Any], norm: np.ndarray, confidence: float = 0.95
) -> tuple[str, dict]:
    """Within-run unless the steps reject it and the marginal law fits them better.

    Parameters
    ----------
    candidates : mapping of str to PredictedLaw
        ``{"within-run": law, "marginal": law}``, each with the jitter fitted under it.
    norm : numpy.ndarray
        Steps divided by their run's median, pooled.
    confidence : float
        The within-run law is rejected at level ``1 - confidence``.

    Returns
    -------
    tuple of (str, dict)
        The chosen shape and ``{"rule", "ks_within_run", "p_within_run", "ks_marginal",
        "p_marginal", "chosen"}``.
    """
    if set(candidates) != set(SHAPES):
        raise ValueError(f"candidates: need exactly the shapes {SHAPES}, got {sorted(candidates)}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    (ks_w, p_w), (ks_m, p_m) = (normalised_ks(candidates[s], norm) for s in SHAPES)
    chosen = "marginal" if p_w < 1 - confidence and ks_m < ks_w else "within-run"
    return chosen, {
        "rule": "within-run unless its one-sample KS test rejects it at"
        f" {1 - confidence:.3g} and the marginal law is closer (each law with the jitter"
        " fitted under it, divided by its median)",
        "ks_within_run": ks_w,
        "p_within_run": p_w,
        "ks_marginal": ks_m,
        "p_marginal": p_m,
        "chosen": chosen,
    }
