"""The body of a run's step times: step jitter, within-run drift and a warm-up transient.

Model
-----
For step ``i`` of run ``r`` (relative residual ``y = t / median(run) - 1``, stalls left out
as missing values), a local-level state-space model (statsmodels
:class:`~statsmodels.tsa.statespace.structural.UnobservedComponents`, ``level="llevel"``):

    y_i = level_i + b1 * first_i + b2 * later_i + a * w_i + e_i,   e_i ~ N(0, sigma_e)
    level_{i+1} = level_i + u_i,                                    u_i ~ N(0, sigma_l)

``e`` is step jitter, ``level`` a random-walk drift (its start is diffuse: each run has its
own level), ``first``/``later`` flag the step after the run's first / a later evaluation
pause, and ``w_i = exp(-i / tau)`` a warm-up transient of the first logged steps. The runs
share the parameters; their Kalman-filter log likelihoods are summed and maximised.

Identifiability (each reported, never a number where it is not)
---------------------------------------------------------------
* drift: likelihood-ratio test of ``sigma_l = 0`` (a boundary: the statistic is referred to
  a 50:50 mixture of chi-square 0 and 1).
* warm-up: ``tau`` on a grid of :data:`WARMUP_TAUS` steps; likelihood-ratio test of
  ``a = 0`` against chi-square with 2 degrees of freedom (``a`` and ``tau``; approximate,
  ``tau`` being a grid choice). Not significant at ``1 - confidence``: not identified, left
  out of the prediction.

Scaling rules (what carries to another size)
--------------------------------------------
``sigma_e``, ``sigma_l`` and the warm-up amplitude are *relative* to the step (a per-step
slowdown proportional to the work), ``sigma_l`` and ``tau`` count optimizer steps. Pause
costs are seconds (:mod:`.step_events`). The per-size fits of
``validation/calibration_acceptance.py`` show which of these hold on the MLPerf logs.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from .result import CalibrationError, FittedParameter

__all__ = ["BodyFit", "WARMUP_TAUS", "fit_step_body", "simulate_body"]

#: Decay lengths (optimizer steps) tried for the warm-up transient.
WARMUP_TAUS = (2.0, 5.0, 10.0, 20.0, 50.0)


@dataclass(frozen=True)
class BodyFit:
    """A fitted body model (see the module notes).

    Attributes
    ----------
    sigma_e : float
        Step jitter, relative to the run median.
    sigma_l : float
        Random-walk drift per optimizer step, relative.
    pause : tuple of float
        Relative extra of the step after the first / a later evaluation pause (0 where the
        logs hold no such step).
    warmup : tuple of (float, float) or None
        ``(amplitude, tau)`` when identified, else None.
    cov : ndarray
        Covariance of ``(log sigma_e, log sigma_l, first, later)`` (inverse numerical
        Hessian; NaN where singular).
    parameters : list of FittedParameter
        What is reported (relative units, with intervals and identifiability).
    tests : dict
        Log likelihoods and the likelihood-ratio tests of drift and warm-up.
    """

    sigma_e: float
    sigma_l: float
    pause: tuple[float, float]
    warmup: tuple[float, float] | None
    cov: np.ndarray
    parameters: list[FittedParameter]
    tests: dict

    def draw(self, reps: int, rng: np.random.Generator) -> dict:
        """Parameter draws from the Wald (normal) approximation, for prediction intervals.

        ``sigma_e`` and ``sigma_l`` are drawn on the log scale; where the covariance is not
        available the fitted values are repeated (sampling only).
        """
        mean = np.array([math.log(self.sigma_e), math.log(max(self.sigma_l, 1e-12)), *self.pause])
        if np.all(np.isfinite(self.cov)):
            x = rng.multivariate_normal(mean, self.cov, reps, method="eigh")
        else:
            x = np.tile(mean, (reps, 1))
        return {
            "sigma_e": np.exp(x[:, 0]),
            "sigma_l": np.exp(x[:, 1]) if self.sigma_l > 0 else np.zeros(reps),
            "first": x[:, 2],
            "later": x[:, 3],
        }


def _warm_column(run: np.ndarray, tau: float) -> np.ndarray:
    out = np.empty(len(run))
    for r in np.unique(run):
        cols = run == r
        out[cols] = np.exp(-np.arange(cols.sum()) / tau)
    return out


class _Likelihood:
    """Summed Kalman-filter log likelihood of the runs, in ``(log sd_e, log sd_l, betas)``."""

    def __init__(self, y: np.ndarray, exog: np.ndarray, run: np.ndarray) -> None:
        from statsmodels.tsa.statespace.structural import UnobservedComponents

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.models = [
                UnobservedComponents(y[run == r], level="llevel", exog=exog[run == r])
                for r in np.unique(run)
            ]

    def __call__(self, theta: np.ndarray, drift: bool = True) -> float:
        sd_l2 = math.exp(2 * theta[1]) if drift else 0.0
        p = np.concatenate([[math.exp(2 * theta[0]), sd_l2], theta[2:]])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            val = float(sum(m.loglike(p) for m in self.models))
        return val if np.isfinite(val) else -1e300

    def fit(self, theta0: np.ndarray, drift: bool = True) -> tuple[np.ndarray, float]:
        """Maximum likelihood from ``theta0`` (Nelder-Mead, then BFGS)."""
        free = np.ones(len(theta0), dtype=bool)
        free[1] = drift

        def nll(u: np.ndarray) -> float:
            th = theta0.copy()
            th[free] = u
            return -self(th, drift)

        res = optimize.minimize(nll, theta0[free], method="Nelder-Mead", options={"maxiter": 3000})
        res = optimize.minimize(nll, res.x, method="BFGS")
        th = theta0.copy()
        th[free] = res.x
        return th, -float(res.fun)

    def cov(self, theta: np.ndarray) -> np.ndarray:
        """Inverse of the numerical observed information (NaN where it is not definite)."""
        from statsmodels.tools.numdiff import approx_hess3

        h = -approx_hess3(theta, self)
        try:
            c = np.linalg.inv(h)
        except np.linalg.LinAlgError:
            return np.full(h.shape, np.nan)
        return c if np.all(np.diag(c) > 0) else np.full(h.shape, np.nan)


def _start(y: np.ndarray, exog: np.ndarray) -> np.ndarray:
    ok = np.isfinite(y)
    coef, *_ = np.linalg.lstsq(exog[ok], y[ok], rcond=None) if exog.shape[1] else ([],)
    d = np.diff(y[ok])
    sd = max(float(np.median(np.abs(d - np.median(d)))) * 1.4826 / math.sqrt(2), 1e-7)
    return np.array([math.log(sd), math.log(sd / 3), *coef])


def fit_step_body(
    y: np.ndarray,
    exog: np.ndarray,
    run: np.ndarray,
    stalls: np.ndarray | None = None,
    *,
    confidence: float = 0.95,
) -> BodyFit:
    """Fit the body model of the module notes to per-run relative residuals.

    Parameters
    ----------
    y, exog, run : ndarray
        As returned by :func:`.step_events.event_design` (columns: constant, first pause,
        later pause).
    stalls : ndarray of bool, optional
        Steps left out as missing values (the stalls of the event fit).
    confidence : float
        Level of the intervals and of the identifiability tests.

    Returns
    -------
    BodyFit
    """
    if not 0 < confidence < 1:
        raise CalibrationError(f"confidence must be in (0, 1), got {confidence!r}")
    y = np.array(y, dtype=float)
    run = np.asarray(run)
    if stalls is not None:
        y[np.asarray(stalls, dtype=bool)] = np.nan
    counts = np.bincount(run[np.isfinite(y)])
    if counts.size == 0 or counts.max() < 10:
        raise CalibrationError("the body model needs a run with >= 10 steps that are not stalls")
    cols = [j for j in (1, 2) if exog[:, j].any()]
    x = exog[:, cols]
    like = _Likelihood(y, x, run)
    theta, ll = like.fit(_start(y, x))
    theta0, ll0 = like.fit(theta, drift=False)
    lr_drift = max(2 * (ll - ll0), 0.0)
    p_drift = 0.5 * float(stats.chi2.sf(lr_drift, 1)) if lr_drift > 0 else 1.0
    best: tuple | None = None
    for tau in WARMUP_TAUS:
        lw = _Likelihood(y, np.column_stack([x, _warm_column(run, tau)]), run)
        th, llw = lw.fit(np.append(theta, 0.0))
        if best is None or llw > best[2]:
            best = (tau, th, llw, lw)
    tau, theta_w, ll_w, like_w = best
    lr_warm = max(2 * (ll_w - ll), 0.0)
    p_warm = float(stats.chi2.sf(lr_warm, 2))
    warm_ident = p_warm < 1 - confidence
    cov_w = like_w.cov(theta_w)
    if warm_ident:  # the warm-up changes the other estimates: report the joint fit
        theta, ll, cov = theta_w[:-1], ll_w, cov_w[:-1, :-1]
    else:
        cov = like.cov(theta)
    idx = [0, 1] + [1 + j for j in cols]
    full_cov = np.full((4, 4), np.nan)
    full_cov[np.ix_(idx, idx)] = cov
    full = np.full(4, 0.0)
    full[idx] = theta
    warm_se = math.sqrt(cov_w[-1, -1]) if np.isfinite(cov_w[-1, -1]) else math.nan
    tests = {
        "loglike": ll,
        "drift_lr": lr_drift,
        "drift_pvalue": p_drift,
        "no_drift_sigma_e": math.exp(theta0[0]),
        "warmup_lr": lr_warm,
        "warmup_pvalue": p_warm,
        "warmup_tau_steps": tau,
        "warmup_amplitude_at_best_tau": float(theta_w[-1]),
        "warmup_amplitude_se": warm_se,
    }
    n_flag = (int(exog[:, 1].sum()), int(exog[:, 2].sum()))
    parameters = _report(full, full_cov, warm_ident, tests, n_flag, confidence)
    return BodyFit(
        math.exp(full[0]),
        math.exp(full[1]),
        (float(full[2]), float(full[3])),
        (float(theta_w[-1]), tau) if warm_ident else None,
        full_cov,
        parameters,
        tests,
    )


def _report(
    theta: np.ndarray,
    cov: np.ndarray,
    warm_ident: bool,
    tests: dict,
    n_flag: tuple[int, int],
    confidence: float,
) -> list[FittedParameter]:
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    se = np.sqrt(np.where(np.isfinite(np.diag(cov)), np.diag(cov), np.nan))
    how = f"maximum likelihood (Kalman filter, statsmodels), Wald {confidence:.0%} interval"

    def log_interval(j: int) -> tuple[float, float] | None:
        if not np.isfinite(se[j]):
            return None
        return (math.exp(theta[j] - z * se[j]), math.exp(theta[j] + z * se[j]))

    out = [
        FittedParameter(
            "body.step_jitter_rel",
            math.exp(theta[0]),
            log_interval(0),
            True,
            f"step jitter, sd relative to the run median; {how} on the log scale",
        )
    ]
    drift_ok = tests["drift_pvalue"] < 1 - confidence
    out.append(
        FittedParameter(
            "body.drift_rel_per_step",
            math.exp(theta[1]) if drift_ok else None,
            log_interval(1),
            drift_ok,
            f"random-walk drift, sd per optimizer step relative to the median; {how} on the"
            f" log scale; LR test of no drift p = {tests['drift_pvalue']:.2g}"
            + ("" if drift_ok else " (not identified)"),
        )
    )
    for j, (key, what) in enumerate((("first_pause", "first"), ("later_pause", "a later")), 2):
        count = n_flag[j - 2]
        ok = count >= 2 and np.isfinite(se[j])
        out.append(
            FittedParameter(
                f"body.{key}_rel",
                float(theta[j]) if ok else None,
                (theta[j] - z * se[j], theta[j] + z * se[j]) if ok else None,
                bool(ok),
                f"relative extra of the step after {what} evaluation pause ({count} steps);"
                f" {how}" + ("" if ok else "; not identified (needs >= 2 such steps)"),
            )
        )
    amp, s = tests["warmup_amplitude_at_best_tau"], tests["warmup_amplitude_se"]
    out.append(
        FittedParameter(
            "body.warmup_rel",
            amp if warm_ident else None,
            (amp - z * s, amp + z * s) if np.isfinite(s) else None,
            warm_ident,
            f"relative extra of the first logged steps, a * exp(-i / tau), tau ="
            f" {tests['warmup_tau_steps']:g} steps (best of {WARMUP_TAUS}); LR test of no"
            f" warm-up p = {tests['warmup_pvalue']:.2g} (chi-square, 2 df)"
            + ("" if warm_ident else "; not identified: left out of predictions"),
        )
    )
    return out


def simulate_body(
    draws: dict, lengths: list[int], warmup: tuple[float, float] | None, rng: np.random.Generator
) -> np.ndarray:
    """Relative body paths (jitter + drift + warm-up) for datasets of runs of ``lengths``.

    Parameters
    ----------
    draws : dict
        ``sigma_e`` and ``sigma_l`` arrays, one value per simulated dataset
        (:meth:`BodyFit.draw`).
    lengths : list of int
        Steps per run; the runs are concatenated in this order.
    warmup : (amplitude, tau) or None
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (reps, sum(lengths))
        ``t / (typical step) - 1`` before pauses and stalls.
    """
    se, sl = np.asarray(draws["sigma_e"]), np.asarray(draws["sigma_l"])
    reps = len(se)
    parts = []
    for n in lengths:
        level = np.cumsum(rng.normal(0.0, 1.0, (reps, n)) * sl[:, None], axis=1)
        x = level + rng.normal(0.0, 1.0, (reps, n)) * se[:, None]
        if warmup is not None:
            x = x + warmup[0] * np.exp(-np.arange(n) / warmup[1])
        parts.append(x)
    return np.concatenate(parts, axis=1)
