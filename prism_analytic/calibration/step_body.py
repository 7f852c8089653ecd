"""The body of a run's step times: step jitter, within-run drift and a warm-up transient.

Model
-----
For step ``i`` of run ``r`` (relative residual ``y = t / median(run) - 1``, stalls left out
as missing values), a local-level state-space model (statsmodels
:class:`~statsmodels.tsa.statespace.structural.UnobservedComponents`, ``level="llevel"``):

    y_i = level_i + b1 first_i + b2 later_i + a exp(-i / tau) + c i + e_i,  e_i ~ N(0, sigma_e)
    level_{i+1} = level_i + u_i,                                             u_i ~ N(0, sigma_l)

``e`` is step jitter, ``level`` a random-walk drift (its start is diffuse: each run has its
own level), ``c`` a steady trend per optimizer step, ``first``/``later`` flag the step after
the run's first / a later evaluation pause (MLPerf ``eval_stop``), and ``a exp(-i / tau)``
a warm-up transient of the first logged steps. The runs share the parameters; their
Kalman-filter log likelihoods are summed and maximised.

Identifiability (each reported, never a number where it is not)
---------------------------------------------------------------
* warm-up: ``tau`` on the grid :data:`WARMUP_TAUS` (steps); likelihood-ratio test of
  ``a = 0`` against chi-square with 2 degrees of freedom (``a`` and ``tau``; approximate,
  ``tau`` being a grid choice).
* trend: likelihood-ratio test of ``c = 0`` (1 degree of freedom).
* random-walk drift: likelihood-ratio test of ``sigma_l = 0`` (a boundary: half the
  chi-square 1 tail).
A component whose test is not significant at ``1 - confidence`` is reported not identified
and left out of the final fit and of predictions.

Scaling rules (what carries to another size)
--------------------------------------------
``sigma_e``, ``sigma_l``, ``c`` and ``a`` are *relative* to the step (a slowdown
proportional to the work); ``sigma_l``, ``c`` and ``tau`` count optimizer steps. Pause costs
are seconds (:mod:`.step_events`). ``validation/calibration_acceptance.py`` fits the model
at every MLPerf size separately to show which of these hold.
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
#: Names of the full parameter vector (log scale for the two standard deviations; the trend
#: per 100 steps, for conditioning).
NAMES = ("log_sigma_e", "log_sigma_l", "first_pause", "later_pause", "warmup", "trend_per_100")


@dataclass(frozen=True)
class BodyFit:
    """A fitted body model (see the module notes).

    Attributes
    ----------
    theta : ndarray
        Final estimate in the order of :data:`NAMES` (0 for a component left out).
    cov : ndarray
        Its covariance (inverse numerical observed information; NaN rows for components
        left out or where the information is singular).
    active : ndarray of bool
        Components in the final fit.
    tau : float
        Warm-up decay length (steps) at the best grid point.
    parameters : list of FittedParameter
        What is reported (relative units, with intervals and identifiability).
    tests : dict
        Log likelihoods and the likelihood-ratio tests of warm-up, trend and drift.
    """

    theta: np.ndarray
    cov: np.ndarray
    active: np.ndarray
    tau: float
    parameters: list[FittedParameter]
    tests: dict

    @property
    def sigma_e(self) -> float:
        """Step jitter, sd relative to the run median."""
        return math.exp(self.theta[0])

    @property
    def sigma_l(self) -> float:
        """Random-walk drift, sd per optimizer step, relative (0 when left out)."""
        return math.exp(self.theta[1]) if self.active[1] else 0.0

    @property
    def pause(self) -> tuple[float, float]:
        """Relative extra of the step after the first / a later evaluation pause."""
        return float(self.theta[2]), float(self.theta[3])

    @property
    def trend(self) -> float:
        """Steady trend per optimizer step, relative (0 when left out)."""
        return float(self.theta[5]) / 100.0

    @property
    def warmup(self) -> tuple[float, float] | None:
        """``(amplitude, tau)`` of the warm-up transient, None when left out."""
        return (float(self.theta[4]), self.tau) if self.active[4] else None

    def draw(self, reps: int, rng: np.random.Generator | None = None) -> dict:
        """Parameter sets for prediction: fitted values (``rng`` None) or Wald draws.

        Draws are multivariate normal in :data:`NAMES` coordinates (standard deviations on
        the log scale) over the active components with a finite covariance; the others
        keep their fitted value.
        """
        x = np.tile(self.theta, (reps, 1))
        if rng is not None:
            ok = self.active & np.isfinite(np.diag(self.cov))
            if ok.any():
                x[:, ok] = rng.multivariate_normal(
                    self.theta[ok], self.cov[np.ix_(ok, ok)], reps, method="eigh"
                )
        return {
            "sigma_e": np.exp(x[:, 0]),
            "sigma_l": np.exp(x[:, 1]) if self.active[1] else np.zeros(reps),
            "first": x[:, 2],
            "later": x[:, 3],
            "warmup": x[:, 4],
            "trend": x[:, 5] / 100.0,
            "tau": self.tau,
        }


def _run_columns(run: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """Warm-up ``exp(-i / tau)`` and trend ``i / 100`` columns (``i``: step within its run)."""
    i = np.empty(len(run))
    for r in np.unique(run):
        cols = run == r
        i[cols] = np.arange(cols.sum())
    return np.exp(-i / tau), i / 100.0


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

    def fit(
        self, theta0: np.ndarray, drift: bool = True, polish_only: bool = False
    ) -> tuple[np.ndarray, float]:
        """Maximum likelihood from ``theta0`` (Nelder-Mead unless ``polish_only``, then BFGS)."""
        free = np.ones(len(theta0), dtype=bool)
        free[1] = drift

        def nll(u: np.ndarray) -> float:
            th = theta0.copy()
            th[free] = u
            return -self(th, drift)

        x0 = theta0[free]
        if not polish_only:
            x0 = optimize.minimize(nll, x0, method="Nelder-Mead", options={"maxiter": 2000}).x
        res = optimize.minimize(nll, x0, method="BFGS")
        th = theta0.copy()
        th[free] = res.x
        return th, -float(res.fun)

    def innovations_pvalue(self, theta: np.ndarray, drift: bool = True, lag: int = 10) -> float:
        """Smallest Ljung-Box p-value (``lag``) of the runs' standardised one-step errors.

        Goodness of fit: independent innovations mean the model took up the autocorrelation
        (drift, trend, warm-up) of the steps. ``nan`` when no run has ``> 2 lag`` steps.
        """
        from statsmodels.stats.diagnostic import acorr_ljungbox

        sd_l2 = math.exp(2 * theta[1]) if drift else 0.0
        p = np.concatenate([[math.exp(2 * theta[0]), sd_l2], theta[2:]])
        out = []
        for m in self.models:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                e = np.asarray(m.filter(p).standardized_forecasts_error[0])
            e = e[np.isfinite(e)][1:]  # the first error carries the diffuse start
            if len(e) > 2 * lag:
                out.append(float(acorr_ljungbox(e, lags=[lag])["lb_pvalue"].iloc[0]))
        return min(out) if out else math.nan

    def cov(self, theta: np.ndarray, drift: bool = True) -> np.ndarray:
        """Inverse numerical observed information (NaN where it is not definite)."""
        from statsmodels.tools.numdiff import approx_hess3

        free = np.ones(len(theta), dtype=bool)
        free[1] = drift

        def ll(u: np.ndarray) -> float:
            th = theta.copy()
            th[free] = u
            return self(th, drift)

        out = np.full((len(theta), len(theta)), np.nan)
        h = -approx_hess3(theta[free], ll)
        try:
            c = np.linalg.inv(h)
        except np.linalg.LinAlgError:
            return out
        if np.all(np.diag(c) > 0):
            out[np.ix_(free, free)] = c
        return out


def _start(y: np.ndarray, exog: np.ndarray) -> np.ndarray:
    ok = np.isfinite(y)
    coef = np.linalg.lstsq(exog[ok], y[ok], rcond=None)[0] if exog.shape[1] else np.zeros(0)
    d = np.diff(y[ok])
    sd = max(float(np.median(np.abs(d - np.median(d)))) * 1.4826 / math.sqrt(2), 1e-7)
    return np.array([math.log(sd), math.log(sd / 3), *coef])


def _lr_pvalue(ll1: float, ll0: float, df: int, boundary: bool = False) -> tuple[float, float]:
    lr = max(2 * (ll1 - ll0), 0.0)
    p = float(stats.chi2.sf(lr, df))
    return lr, (0.5 * p if lr > 0 else 1.0) if boundary else p


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
    # a pause column whose flagged steps are all missing carries no information
    pauses = [j for j in (1, 2) if (exog[:, j].astype(bool) & np.isfinite(y)).any()]
    x = exog[:, pauses]
    base, ll_base = _Likelihood(y, x, run).fit(_start(y, x))
    best = None
    for tau in WARMUP_TAUS:
        warm, trend = _run_columns(run, tau)
        like = _Likelihood(y, np.column_stack([x, warm, trend]), run)
        th, ll = like.fit(np.append(base, [0.0, 0.0]), polish_only=True)
        if best is None or ll > best[2]:
            best = (tau, th, ll)
    tau, th_full, ll_full = best
    warm, trend = _run_columns(run, tau)
    no_trend = _Likelihood(y, np.column_stack([x, warm]), run).fit(th_full[:-1], polish_only=True)
    no_warm = _Likelihood(y, np.column_stack([x, trend]), run).fit(
        np.delete(th_full, -2), polish_only=True
    )
    lr_warm, p_warm = _lr_pvalue(ll_full, no_warm[1], 2)
    lr_trend, p_trend = _lr_pvalue(ll_full, no_trend[1], 1)
    alpha = 1.0 - confidence
    use_warm, use_trend = p_warm < alpha, p_trend < alpha
    cols = [x] + [warm[:, None]] * use_warm + [trend[:, None]] * use_trend
    like = _Likelihood(y, np.column_stack(cols), run)
    theta = {
        (True, True): th_full,
        (True, False): no_trend[0],
        (False, True): no_warm[0],
        (False, False): base,
    }[(use_warm, use_trend)]
    theta, ll = like.fit(theta, polish_only=True)
    th_flat, ll_flat = like.fit(theta, drift=False, polish_only=True)
    lr_drift, p_drift = _lr_pvalue(ll, ll_flat, 1, boundary=True)
    use_drift = p_drift < alpha
    if not use_drift:
        theta, ll = th_flat, ll_flat
    cov = like.cov(theta, drift=use_drift)
    # place the estimate in the full order of NAMES
    active = np.array([True, use_drift, 1 in pauses, 2 in pauses, use_warm, use_trend])
    slots = [0, 1] + [1 + j for j in pauses] + [4] * use_warm + [5] * use_trend
    full = np.zeros(len(NAMES))
    full_cov = np.full((len(NAMES), len(NAMES)), np.nan)
    full[slots] = theta
    full_cov[np.ix_(slots, slots)] = cov
    if not use_drift:
        full[1] = -np.inf
    tests = {
        "loglike": ll,
        "warmup_tau_steps": tau,
        "warmup_amplitude_at_best_tau": float(th_full[-2]),
        "warmup_lr": lr_warm,
        "warmup_pvalue": p_warm,
        "trend_per_step_in_full_model": float(th_full[-1]) / 100.0,
        "trend_lr": lr_trend,
        "trend_pvalue": p_trend,
        "drift_lr": lr_drift,
        "drift_pvalue": p_drift,
        "sigma_e_without_drift": math.exp(th_flat[0]),
        "ljung_box_min_pvalue_innovations_lag10": like.innovations_pvalue(theta, use_drift),
    }
    # intervals of the components left out come from the full model (reported, not used)
    full_model_cov = _Likelihood(y, np.column_stack([x, warm, trend]), run).cov(th_full)
    n_flag = (int(exog[:, 1].sum()), int(exog[:, 2].sum()))
    parameters = _report(full, full_cov, active, th_full, full_model_cov, tests, n_flag, confidence)
    return BodyFit(full, full_cov, active, tau, parameters, tests)


def _report(
    theta: np.ndarray,
    cov: np.ndarray,
    active: np.ndarray,
    th_full: np.ndarray,
    cov_full: np.ndarray,
    tests: dict,
    n_flag: tuple[int, int],
    confidence: float,
) -> list[FittedParameter]:
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    how = f"maximum likelihood (Kalman filter, statsmodels), Wald {confidence:.0%} interval"

    def wald(value: float, var: float, scale: float = 1.0, log: bool = False):
        if not (np.isfinite(var) and var > 0):
            return None
        half = z * math.sqrt(var)
        if log:
            return (math.exp(value - half), math.exp(value + half))
        return ((value - half) * scale, (value + half) * scale)

    out = [
        FittedParameter(
            "body.step_jitter_rel",
            math.exp(theta[0]),
            wald(theta[0], cov[0, 0], log=True),
            True,
            f"step jitter, sd relative to the run median; {how} on the log scale",
        )
    ]
    ok = bool(active[1])
    out.append(
        FittedParameter(
            "body.drift_rel_per_step",
            math.exp(theta[1]) if ok else None,
            wald(theta[1], cov[1, 1], log=True) if ok else None,
            ok,
            f"random-walk drift, sd per optimizer step relative to the median; {how} on the"
            f" log scale; LR test of none p = {tests['drift_pvalue']:.2g}"
            + ("" if ok else " (not identified)"),
        )
    )
    for j, key, what in ((2, "first_pause", "first"), (3, "later_pause", "a later")):
        count = n_flag[j - 2]
        ok = count >= 2 and np.isfinite(cov[j, j])
        out.append(
            FittedParameter(
                f"body.{key}_rel",
                float(theta[j]) if ok else None,
                wald(theta[j], cov[j, j]) if ok else None,
                bool(ok),
                f"relative extra of the step after {what} evaluation pause ({count} steps);"
                f" {how}" + ("" if ok else "; not identified (needs >= 2 such steps)"),
            )
        )
    ok = bool(active[4])
    var = cov[4, 4] if ok else cov_full[-2, -2]
    out.append(
        FittedParameter(
            "body.warmup_rel",
            float(theta[4]) if ok else None,
            wald(theta[4] if ok else th_full[-2], var),
            ok,
            f"relative extra of the first logged steps, a exp(-i / tau), tau ="
            f" {tests['warmup_tau_steps']:g} steps (best of {WARMUP_TAUS}); LR test of none"
            f" p = {tests['warmup_pvalue']:.2g} (chi-square, 2 df)"
            + ("" if ok else "; not identified: left out of predictions"),
        )
    )
    ok = bool(active[5])
    var = cov[5, 5] if ok else cov_full[-1, -1]
    out.append(
        FittedParameter(
            "body.trend_rel_per_step",
            float(theta[5]) / 100.0 if ok else None,
            wald(theta[5] if ok else th_full[-1], var, scale=0.01),
            ok,
            f"steady trend per optimizer step, relative; {how}; LR test of none p ="
            f" {tests['trend_pvalue']:.2g}"
            + ("" if ok else "; not identified: left out of predictions"),
        )
    )
    return out


def simulate_body(draws: dict, lengths: list[int], rng: np.random.Generator) -> np.ndarray:
    """Relative body paths (jitter, drift, trend, warm-up) for datasets of runs of ``lengths``.

    Parameters
    ----------
    draws : dict
        Arrays ``sigma_e``, ``sigma_l``, ``trend``, ``warmup`` (one value per simulated
        dataset) and the scalar ``tau`` (:meth:`BodyFit.draw`).
    lengths : list of int
        Steps per run; the runs are concatenated in this order.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (reps, sum(lengths))
        ``t / (typical step) - 1`` before pauses and stalls.
    """
    se, sl = np.asarray(draws["sigma_e"]), np.asarray(draws["sigma_l"])
    trend, warm = np.asarray(draws["trend"]), np.asarray(draws["warmup"])
    reps = len(se)
    parts = []
    for n in lengths:
        i = np.arange(n)
        level = np.cumsum(rng.normal(0.0, 1.0, (reps, n)) * sl[:, None], axis=1)
        x = level + rng.normal(0.0, 1.0, (reps, n)) * se[:, None]
        x = x + trend[:, None] * i + warm[:, None] * np.exp(-i / draws["tau"])
        parts.append(x)
    return np.concatenate(parts, axis=1)
