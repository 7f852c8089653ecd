"""How often a perfect model meets the held-out step targets: their noise floor.

The trace issue scores a prediction against a dozen held-out step times
(:func:`~prism_analytic.traces.compare.out_of_sample_checks`). With so few steps a target can
fail even when the predicted law is the true one. Two tools say how often:

* :func:`quantile_ci_coverage_bound`, a proven bound. A percentile bootstrap resamples the
  measured steps, so no resample's p95 exceeds the largest measured step. When the true p95
  lies above all ``m`` held-out steps, which happens with probability ``q**m`` for any
  continuous law, the true p95 is outside the interval. So the true law's p95 is inside the
  measured p95's bootstrap interval with probability at most ``1 - q**m``.
* :func:`target_pass_rates`, a Monte Carlo estimate. Held-out sets of ``m`` steps are drawn
  from a stated truth (the fit half's own steps, or a fitted model's law), and the share on
  which each target is met is counted. The prediction is either the truth itself (a perfect
  model) or the empirical law of a fresh fit set drawn from it (a model that reproduces its
  fit steps exactly, so the fit set's sampling noise is included).
"""

from __future__ import annotations

import numpy as np

from prism_analytic.traces.compare import compare_steps, out_of_sample_checks

__all__ = ["quantile_ci_coverage_bound", "target_pass_rates"]


def quantile_ci_coverage_bound(m: int, q: float = 0.95) -> float:
    """Upper bound on the chance that the true q-quantile is in a percentile-bootstrap interval.

    Parameters
    ----------
    m : int
        Held-out steps (>= 1) drawn independently from a continuous law.
    q : float
        Quantile level in (0, 1).

    Returns
    -------
    float
        ``1 - q**m``. The interval is built from resamples of the ``m`` steps, so it never
        reaches above their maximum; the maximum is below the true q-quantile with
        probability ``q**m``.
    """
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m must be an integer >= 1, got {m!r}")
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    return float(1 - q**m)


def target_pass_rates(truth, m: int, *, predicted=None, fit_size=None, reps=500, seed=0) -> dict:
    """Share of held-out sets drawn from ``truth`` on which a prediction meets each target.

    Parameters
    ----------
    truth : array_like
        Samples of the true step law. Held-out sets are drawn from them with replacement:
        a few thousand model draws stand for a continuous law; a dozen measured steps make
        their empirical law the truth.
    m : int
        Held-out steps per set (>= 4).
    predicted : array_like, optional
        The prediction's samples. By default it is ``truth`` itself (a perfect model).
    fit_size : int, optional
        When given, each repetition also draws ``fit_size`` steps from ``truth``. Their
        empirical law is the prediction: a model that reproduces its fit steps exactly.
        This cannot be combined with ``predicted``.
    reps : int
        Held-out sets drawn (>= 10).
    seed : int
        Random seed.

    Returns
    -------
    dict
        ``rates`` (target -> share of sets meeting it, plus ``"all"``), ``reps``, and
        ``std_error`` (the largest binomial standard error of a rate, ``sqrt(0.25 / reps)``).
    """
    t = np.asarray(truth, dtype=float).ravel()
    if t.size < 4 or not np.isfinite(t).all():
        raise ValueError(f"truth: need >= 4 finite samples, got {t.size}")
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 4:
        raise ValueError(f"m must be an integer >= 4, got {m!r}")
    if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)) or reps < 10:
        raise ValueError(f"reps must be an integer >= 10, got {reps!r}")
    if fit_size is not None and predicted is not None:
        raise ValueError("give either predicted or fit_size, not both")
    if fit_size is not None and (not isinstance(fit_size, (int, np.integer)) or fit_size < 4):
        raise ValueError(f"fit_size must be an integer >= 4, got {fit_size!r}")
    pred = t if predicted is None else np.asarray(predicted, dtype=float).ravel()
    rng = np.random.default_rng(seed)
    hits = []
    for i in range(reps):
        held_out = rng.choice(t, m)
        if fit_size is not None:
            pred = rng.choice(t, fit_size)
        hits.append(out_of_sample_checks(compare_steps(pred, held_out, rng=i)))
    rates = {k: float(np.mean([h[k] for h in hits])) for k in _TARGETS}
    rates["all"] = float(np.mean([all(h.values()) for h in hits]))
    return {"rates": rates, "reps": int(reps), "std_error": float(np.sqrt(0.25 / reps))}


_TARGETS = tuple(
    out_of_sample_checks(
        {
            "mean_rel_err": 0.0,
            "p50_rel_err": 0.0,
            "p90_rel_err": 0.0,
            "p95_in_measured_ci": True,
            "ks_shape_pvalue": 1.0,
            "std_ratio": 1.0,
        }
    )
)
