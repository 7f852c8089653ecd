"""Compare predicted step times with measured ones: errors, intervals and shape tests.

Quantiles use numpy's default (linear) estimator. The measured p95's 90% interval is a
percentile bootstrap (scipy.stats.bootstrap), as the targets ask; because a bootstrap cannot
reach above the largest measured step, the distribution-free order-statistic interval
(scipy.stats.quantile_test) is reported beside it. The raw KS distance compares the two samples as
they are; the shape test first shifts the prediction so that its median equals the measured
median, and reports the two-sample KS p-value.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["describe", "compare_steps", "out_of_sample_checks", "model_check", "QUANTILES"]

QUANTILES = {"p50_s": 0.5, "p90_s": 0.9, "p95_s": 0.95}


def describe(x) -> dict:
    """Mean, standard deviation and quantiles of a sample (seconds).

    Parameters
    ----------
    x : array_like
        Step times.

    Returns
    -------
    dict
        ``n, mean_s, std_s, p50_s, p90_s, p95_s``.
    """
    x = np.asarray(x, dtype=float)
    out = {"n": int(x.size), "mean_s": float(x.mean()), "std_s": float(x.std(ddof=1))}
    out.update({k: float(np.quantile(x, q)) for k, q in QUANTILES.items()})
    return out


def compare_steps(predicted, measured, *, rng=0) -> dict:
    """Errors of a predicted step-time sample against measured step times.

    Parameters
    ----------
    predicted : array_like
        Sampled predicted step times.
    measured : array_like
        Measured step times (at least 4).
    rng : int
        Seed of the bootstrap.

    Returns
    -------
    dict
        ``predicted``, ``measured`` (from :func:`describe`), ``mean_rel_err``,
        ``p50_rel_err``, ``p90_rel_err``, ``p95_rel_err``, ``measured_p95_ci90`` (percentile
        bootstrap), ``p95_in_measured_ci``, ``measured_p95_ci90_order_stat`` (distribution-free;
        None for an unbounded end), ``p95_in_order_stat_ci``, ``ks``, ``ks_pvalue``, ``ks_shape``,
        ``ks_shape_pvalue``, ``std_ratio``.
    """
    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    if m.size < 4:
        raise ValueError(f"measured: need at least 4 step times to compare, got {m.size}")
    dp, dm = describe(p), describe(m)
    out = {"predicted": dp, "measured": dm}
    out["mean_rel_err"] = dp["mean_s"] / dm["mean_s"] - 1
    for key in QUANTILES:
        out[f"{key[:-2]}_rel_err"] = dp[key] / dm[key] - 1
    boot = stats.bootstrap(
        (m,),
        lambda v, axis=-1: np.quantile(v, 0.95, axis=axis),
        n_resamples=4000,
        confidence_level=0.9,
        method="percentile",
        rng=np.random.default_rng(rng),
    )
    lo, hi = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    out["measured_p95_ci90"] = [lo, hi]
    out["p95_in_measured_ci"] = bool(lo <= dp["p95_s"] <= hi)
    # a resampling bootstrap never exceeds the sample maximum, so with a few dozen steps its
    # interval for p95 ends at the largest step even when the true p95 lies above it; the
    # distribution-free order-statistic interval (binomial) says how far up it may go
    # (unbounded above, reported as None, when there are too few steps to bound it)
    ci = stats.quantile_test(m, q=float(np.median(m)), p=0.95).confidence_interval(0.9)
    o_lo = float(ci.low) if np.isfinite(ci.low) else None
    o_hi = float(ci.high) if np.isfinite(ci.high) else None
    out["measured_p95_ci90_order_stat"] = [o_lo, o_hi]
    out["p95_in_order_stat_ci"] = bool(
        (o_lo is None or o_lo <= dp["p95_s"]) and (o_hi is None or dp["p95_s"] <= o_hi)
    )
    raw = stats.ks_2samp(p, m)
    shape = stats.ks_2samp(p - np.median(p) + np.median(m), m)
    out.update(
        ks=float(raw.statistic),
        ks_pvalue=float(raw.pvalue),
        ks_shape=float(shape.statistic),
        ks_shape_pvalue=float(shape.pvalue),
        std_ratio=dp["std_s"] / dm["std_s"] if dm["std_s"] > 0 else float("inf"),
    )
    return out


def out_of_sample_checks(metrics: dict) -> dict:
    """The trace issue's out-of-sample distribution targets, each met or not.

    Parameters
    ----------
    metrics : dict
        From :func:`compare_steps` (held-out steps).

    Returns
    -------
    dict
        Target -> bool: ``|mean err| <= 2%``, ``|p50 err| <= 2%``, ``|p90 err| <= 3%``,
        ``p95 in measured 90% CI`` (percentile bootstrap), ``KS shape p >= 0.05``,
        ``std ratio in [0.67, 1.5]``. The in-sample mean target needs the fit steps and is
        checked by the caller.
    """
    m = metrics
    return {
        "|mean err| <= 2%": abs(m["mean_rel_err"]) <= 0.02,
        "|p50 err| <= 2%": abs(m["p50_rel_err"]) <= 0.02,
        "|p90 err| <= 3%": abs(m["p90_rel_err"]) <= 0.03,
        "p95 in measured 90% CI": bool(m["p95_in_measured_ci"]),
        "KS shape p >= 0.05": m["ks_shape_pvalue"] >= 0.05,
        "std ratio in [0.67, 1.5]": 0.67 <= m["std_ratio"] <= 1.5,
    }


#: In-sample limits of :func:`model_check`: |mean error| and the std ratio's band. With 10 fit
#: steps an honest model's std ratio falls below 0.5 with probability about 1% (chi-square with
#: 9 degrees of freedom below 2.25) and above 2 with probability under 1e-4.
MODEL_CHECK_MEAN = 0.03
MODEL_CHECK_STD = (0.5, 2.0)


def model_check(in_sample: dict, *, lone_communication_ops: int = 0) -> list:
    """Problems of a fitted model seen on its own fit steps (empty when none).

    A model that misses the very steps it was fitted on by more than the replay tolerance
    (3%), or whose spread is off by 2x, has a wrong structure or a wrong decomposition; its
    prediction must not be presented as validated.

    Parameters
    ----------
    in_sample : dict
        :func:`compare_steps` of the model's samples against the fit steps.
    lone_communication_ops : int
        Sends, receives or collectives recorded without their partners (the model's
        ``info["lone_communication_ops"]``), named as the likely cause.

    Returns
    -------
    list of str
        One line per problem, each starting with ``MODEL CHECK FAILED``.

    Examples
    --------
    >>> model_check({"mean_rel_err": 0.6, "std_ratio": 7.0}, lone_communication_ops=12)[0][:40]
    'MODEL CHECK FAILED: on its own fit steps'
    >>> model_check({"mean_rel_err": 0.004, "std_ratio": 1.1})
    []
    """
    mean, ratio = float(in_sample["mean_rel_err"]), float(in_sample["std_ratio"])
    lo, hi = MODEL_CHECK_STD
    if abs(mean) <= MODEL_CHECK_MEAN and lo <= ratio <= hi:
        return []
    cause = (
        f"; {lone_communication_ops} communication ops were recorded without their partners "
        "(their waits are resampled, not explained by the structure)"
        if lone_communication_ops
        else ""
    )
    return [
        f"MODEL CHECK FAILED: on its own fit steps the fitted model's mean is {mean:+.1%} off "
        f"(limit {MODEL_CHECK_MEAN:.0%}) and its std {ratio:.2f}x the measured (limits "
        f"{lo}-{hi}x){cause}; the prediction is not validated"
    ]
