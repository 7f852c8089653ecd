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

Shared level shape
------------------
Runs of one job follow the *same* slow curve over the optimizer steps (MLPerf GB200: every
run dips ~0.7% over its first ~40 steps, then rises ~1.3% to its end, at 512 and 1,024 GPUs
alike). A per-run random walk fitted to that curve is much larger than the runs' own
differences say: fitted on pairwise differences of aligned runs, the random walk is 2e-6 to
5e-5 per step at 512-1,536 GPUs against 3.7-4.7e-4 in the model without the shape
(``validation/results/calibration.md``). The random walk's spread over a run then
inflates the predicted p99/p50 and its interval. So the trend may be replaced by a shared
curve ``s(i)``: a natural cubic regression spline of the step index (patsy ``cr``, centred:
the diffuse level takes the constant; linear beyond the calibration's longest run), with
its degrees of freedom chosen by BIC on :data:`SHAPE_DFS`; it is adopted where its BIC beats
the model with the trend, and the random walk is tested again on top of it.

Jitter warm-up
--------------
The jitter is larger over a run's first steps (MLPerf, sd around a per-run smooth: 0.24-0.30%
over the first 20 steps at 512-1,024 GPUs, 0.12-0.14% after). One sd for every step then
overstates the jitter at the end of the run, where the rising curve peaks and p99 is set.
The jitter variance at step ``i`` is ``sigma_e^2 (1 + h exp(-i / tau))``, ``tau`` on the grid
:data:`JITTER_TAUS` (a time-varying irregular variance in the statsmodels state space);
likelihood-ratio test of ``h = 0`` (chi-square, 2 degrees of freedom, approximate). ``h`` is
relative and ``tau`` counts optimizer steps, like the warm-up of the level.

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

__all__ = ["BodyFit", "LevelShape", "SHAPE_DFS", "WARMUP_TAUS", "fit_step_body", "simulate_body"]

#: Decay lengths (optimizer steps) tried for the warm-up transient.
WARMUP_TAUS = (2.0, 5.0, 10.0, 20.0, 50.0)
#: Names of the full parameter vector (log scale for the two standard deviations; the trend
#: per 100 steps, for conditioning).
NAMES = ("log_sigma_e", "log_sigma_l", "first_pause", "later_pause", "warmup", "trend_per_100")
#: Degrees of freedom tried for the shared level shape (each capped at one per 10 steps of
#: the longest run, so a knot interval spans >= 10 steps).
SHAPE_DFS = (4, 6, 8, 10, 12, 16, 20, 24)
#: Decay lengths (optimizer steps) tried for the jitter warm-up.
JITTER_TAUS = (5.0, 10.0, 20.0, 50.0)


@dataclass(frozen=True)
class LevelShape:
    """A shared level curve over the optimizer steps (see the module notes).

    Attributes
    ----------
    df : int
        Degrees of freedom of the spline (chosen by BIC).
    last_step : float
        Longest calibration run's last step index (the spline is linear beyond it).
    coef : ndarray
        Spline coefficients (relative units).
    cov : ndarray
        Their covariance (block of the final fit's inverse observed information).
    """

    df: int
    last_step: float
    coef: np.ndarray
    cov: np.ndarray

    def basis(self, steps: np.ndarray) -> np.ndarray:
        """Spline columns at step indices ``steps`` (the calibration's knots)."""
        return shape_basis(steps, self.df, self.last_step)

    def __call__(self, steps: np.ndarray) -> np.ndarray:
        """The curve (relative to the run level) at ``steps``."""
        return self.basis(steps) @ self.coef


def shape_basis(steps: np.ndarray, df: int, last_step: float) -> np.ndarray:
    """Centred natural cubic regression spline columns of the step index (patsy ``cr``)."""
    import patsy  # lazily, like statsmodels: only calibrations need it

    steps = np.asarray(steps, dtype=float)
    # the knots depend on the data patsy sees: fix them on the calibration's step grid
    grid = np.arange(int(last_step) + 1, dtype=float)
    spec = f"cr(i, df={df}, constraints='center', lower_bound=0, upper_bound={last_step!r}) - 1"
    info = patsy.dmatrix(spec, {"i": grid}).design_info
    return np.asarray(patsy.build_design_matrices([info], {"i": steps})[0])


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
    shape : LevelShape or None
        The shared level curve where BIC adopted it (the trend is then left out).
    jitter : tuple or None
        Jitter warm-up ``(log h, variance of log h, tau)`` where identified.
    """

    theta: np.ndarray
    cov: np.ndarray
    active: np.ndarray
    tau: float
    parameters: list[FittedParameter]
    tests: dict
    shape: LevelShape | None = None
    jitter: tuple[float, float, float] | None = None

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
        keep their fitted value. The shape's coefficients are drawn from their own block of
        the covariance (their cross-covariance with the rest is left out).
        """
        x = np.tile(self.theta, (reps, 1))
        shape = None
        if self.shape is not None:
            shape = np.tile(self.shape.coef, (reps, 1))
        if rng is not None:
            ok = self.active & np.isfinite(np.diag(self.cov))
            if ok.any():
                x[:, ok] = rng.multivariate_normal(
                    self.theta[ok], self.cov[np.ix_(ok, ok)], reps, method="eigh"
                )
            sh = self.shape
            if sh is not None and np.all(np.isfinite(sh.cov)):
                shape = rng.multivariate_normal(sh.coef, sh.cov, reps, method="eigh")
        jit_h = np.zeros(reps)
        if self.jitter is not None:
            log_h, var, _ = self.jitter
            sd = math.sqrt(var) if (rng is not None and np.isfinite(var) and var > 0) else 0.0
            jit_h = np.exp(log_h + sd * (rng.standard_normal(reps) if sd else np.zeros(reps)))
        return {
            "jitter_h": jit_h,
            "jitter_tau": self.jitter[2] if self.jitter is not None else 1.0,
            "shape": self.shape,
            "shape_coef": shape,
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


def _uc_class():
    """UnobservedComponents whose irregular variance may vary over the steps (``profile``)."""
    from statsmodels.tsa.statespace.structural import UnobservedComponents

    class _UC(UnobservedComponents):
        profile: np.ndarray | None = None

        def update(self, params, *args, **kwargs):
            super().update(params, *args, **kwargs)
            if self.profile is not None:  # sd_e^2 (1 + h exp(-i / tau)) at step i
                var = float(np.asarray(params)[0])
                self.ssm["obs_cov"] = (var * self.profile)[None, None, :]

    return _UC


class _Likelihood:
    """Summed Kalman-filter log likelihood of the runs, in ``(log sd_e, log sd_l, betas)``.

    With ``jitter_tau`` the last entry of ``theta`` is ``log h`` of the jitter warm-up: the
    jitter variance at step ``i`` is ``sd_e^2 (1 + h exp(-i / jitter_tau))``.
    """

    def __init__(
        self, y: np.ndarray, exog: np.ndarray, run: np.ndarray, jitter_tau: float | None = None
    ) -> None:
        uc = _uc_class()
        self.jitter_tau = jitter_tau
        self.data = (y, exog, run)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.models = [
                uc(y[run == r], level="llevel", exog=exog[run == r]) for r in np.unique(run)
            ]
        self.steps = [np.arange(int(np.sum(run == r)), dtype=float) for r in np.unique(run)]

    def _params(self, theta: np.ndarray, drift: bool) -> np.ndarray:
        """The statsmodels parameters; sets each run's jitter profile."""
        if self.jitter_tau is not None:
            h = math.exp(min(float(theta[-1]), 50.0))
            for m, i in zip(self.models, self.steps, strict=True):
                m.profile = 1.0 + h * np.exp(-i / self.jitter_tau)
            theta = theta[:-1]
        sd_l2 = math.exp(2 * theta[1]) if drift else 0.0
        return np.concatenate([[math.exp(2 * theta[0]), sd_l2], theta[2:]])

    def __call__(self, theta: np.ndarray, drift: bool = True) -> float:
        p = self._params(theta, drift)
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

        p = self._params(theta, drift)
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
        x = theta[free]
        eps = np.finfo(float).eps ** 0.25 * np.maximum(np.abs(x), 0.1)  # statsmodels' default
        if self.jitter_tau is not None:
            # the likelihood is flat in log h at the 1e-5 level but carries ~1e-5 round-off:
            # the default step (~1e-4) gave a curvature 13x too large (sd of log h 0.06, not
            # 0.21 as a 0.03-0.1 step and the profile say)
            eps[-1] = 0.05
        h = -approx_hess3(x, ll, epsilon=eps)
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
    shape: bool = True,
    jitter_warmup: bool = True,
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
    shape : bool
        Try the shared level shape (module notes); False gives the model without it.
    jitter_warmup : bool
        Try the jitter warm-up (module notes); False: one jitter sd for every step.

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
    nobs = int(np.isfinite(y).sum())
    shape_tests: dict = {"bic_without_shape": _bic(ll, len(theta) - (not use_drift), nobs)}
    shape_fit = None
    if shape:
        cols = [x] + [warm[:, None]] * use_warm
        shape_fit = _fit_shape(y, np.column_stack(cols), run, nobs, shape_tests)
    if shape_fit is not None:  # the shared curve replaces the trend; drift tested again
        use_trend = False
        like, theta, ll, last = shape_fit
        shape_tests["drift_lr_without_shape"], shape_tests["drift_pvalue_without_shape"] = (
            lr_drift,
            p_drift,
        )
        th_flat, ll_flat = like.fit(theta, drift=False, polish_only=True)
        lr_drift, p_drift = _lr_pvalue(ll, ll_flat, 1, boundary=True)
        use_drift = p_drift < alpha
        if not use_drift:
            theta, ll = th_flat, ll_flat
    n_shape = len(theta) - (2 + len(pauses) + use_warm + use_trend)
    jitter_fit = None
    if jitter_warmup:
        jitter_fit = _fit_jitter_warmup(like, theta, ll, use_drift, alpha, shape_tests)
    if jitter_fit is not None:  # the drift is tested again beside the larger early jitter
        like, theta, ll = jitter_fit
        if use_drift:
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
    full[slots] = theta[: len(slots)]
    full_cov[np.ix_(slots, slots)] = cov[: len(slots), : len(slots)]
    level_shape = None
    k = len(slots)
    if shape_fit is not None:
        df = shape_tests["shape_df"]
        cut = slice(k, k + n_shape)
        level_shape = LevelShape(df, last, theta[cut], cov[cut, cut])
    jitter = None
    if jitter_fit is not None:  # (log h, its variance, tau)
        jitter = (float(theta[-1]), float(cov[-1, -1]), float(like.jitter_tau))
    if not use_drift:
        full[1] = -np.inf
    tests = {
        **shape_tests,
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
    parameters.append(_shape_parameter(level_shape, tests, shape))
    parameters.append(_jitter_parameter(jitter, tests, jitter_warmup, confidence))
    return BodyFit(full, full_cov, active, tau, parameters, tests, level_shape, jitter)


def _fit_jitter_warmup(
    like: _Likelihood, theta: np.ndarray, ll: float, drift: bool, alpha: float, tests: dict
) -> tuple[_Likelihood, np.ndarray, float] | None:
    """The jitter warm-up of highest likelihood over :data:`JITTER_TAUS`, if significant.

    Likelihood-ratio test of ``h = 0`` against chi-square with 2 degrees of freedom (``h``
    and ``tau``; approximate: ``h = 0`` is a boundary and ``tau`` a grid choice).
    """
    y, exog, run = like.data
    best = None
    for tau in JITTER_TAUS:
        cand = _Likelihood(y, exog, run, jitter_tau=tau)
        th, val = cand.fit(np.append(theta, 0.0), drift=drift, polish_only=True)
        if best is None or val > best[2]:
            best = (cand, th, val)
    # BFGS alone can stop short on the (log sd_e, log h) ridge: Nelder-Mead first at the best tau
    th, val = best[0].fit(best[1], drift=drift)
    if val > best[2]:
        best = (best[0], th, val)
    lr, p = _lr_pvalue(best[2], ll, 2)
    tests["jitter_warmup_tau_steps"] = best[0].jitter_tau
    tests["jitter_warmup_lr"], tests["jitter_warmup_pvalue"] = lr, p
    tests["jitter_warmup_h_at_best_tau"] = math.exp(min(float(best[1][-1]), 50.0))
    return best if p < alpha else None


def _jitter_parameter(
    jitter: tuple[float, float, float] | None, tests: dict, tried: bool, confidence: float
) -> FittedParameter:
    key = "body.jitter_warmup_rel"
    if not tried:
        return FittedParameter(key, None, None, False, "not tried (jitter_warmup=False)")
    how = (
        "extra jitter variance of the first steps, sd_e^2 (1 + h exp(-i / tau)), tau ="
        f" {tests['jitter_warmup_tau_steps']:g} steps (best of {JITTER_TAUS}); LR test of"
        f" none p = {tests['jitter_warmup_pvalue']:.2g} (chi-square, 2 df)"
    )
    if jitter is None:
        return FittedParameter(key, None, None, False, how + "; not identified")
    log_h, var, _ = jitter
    ci = None
    if np.isfinite(var) and var > 0:
        half = float(stats.norm.ppf(0.5 + confidence / 2)) * math.sqrt(var)
        ci = (math.exp(log_h - half), math.exp(log_h + half))
    return FittedParameter(key, math.exp(log_h), ci, True, how + "; h, Wald interval (log scale)")


def _bic(loglike: float, k: int, nobs: int) -> float:
    return -2.0 * loglike + k * math.log(nobs)


def _fit_shape(
    y: np.ndarray, x: np.ndarray, run: np.ndarray, nobs: int, tests: dict
) -> tuple[_Likelihood, np.ndarray, float, float] | None:
    """The shared level shape of lowest BIC, or None where the model without it is better.

    ``x``: the other regressors (pauses, warm-up). Records the BIC of every ``df`` tried in
    ``tests``. Returns ``(likelihood, theta, loglike, last_step)``; ``theta`` ends with the
    spline coefficients.
    """
    steps = np.empty(len(y))
    for r in np.unique(run):
        steps[run == r] = np.arange(int(np.sum(run == r)))
    last = float(steps.max())
    best = None
    by_df = {}
    for df in SHAPE_DFS:
        if df > last / 10:
            break
        X = np.column_stack([x, shape_basis(steps, df, last)])
        like = _Likelihood(y, X, run)
        # start from least squares: the coefficients are linear, only the two sds are not
        th, ll = like.fit(_start(y, X), polish_only=True)
        # with and without the random walk (a vanishing walk must not cost its parameter)
        th0, ll0 = like.fit(th, drift=False, polish_only=True)
        by_df[df] = min(_bic(ll, len(th), nobs), _bic(ll0, len(th) - 1, nobs))
        if best is None or by_df[df] < by_df[best[0]]:
            best = (df, like, th, ll) if ll > ll0 else (df, like, th0, ll0)
    tests["shape_bic_by_df"] = by_df
    if best is None or by_df[best[0]] >= tests["bic_without_shape"]:
        tests["shape_df"] = None
        return None
    tests["shape_df"] = best[0]
    return best[1], best[2], best[3], last


def _shape_parameter(shape: LevelShape | None, tests: dict, tried: bool) -> FittedParameter:
    key = "body.level_shape_df"
    if not tried:
        return FittedParameter(key, None, None, False, "not tried (shape=False)")
    bics = ", ".join(f"{df}: {b:.1f}" for df, b in tests.get("shape_bic_by_df", {}).items())
    how = (
        "shared level curve over the optimizer steps, natural cubic spline (patsy cr) with"
        f" df by BIC ({bics or 'no df fits the run length'}; without it"
        f" {tests['bic_without_shape']:.1f})"
    )
    if shape is None:
        return FittedParameter(key, None, None, False, how + "; not adopted (BIC)")
    return FittedParameter(
        key,
        float(shape.df),
        None,
        True,
        how + f"; adopted, replaces the trend; drift LR p = {tests['drift_pvalue']:.2g}"
        f" with it ({tests['drift_pvalue_without_shape']:.2g} without)",
    )


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
        dataset), the scalar ``tau`` and, optionally, ``shape`` (a :class:`LevelShape`) with
        ``shape_coef`` (its coefficients, one row per dataset), and ``jitter_h`` (one per
        dataset) with ``jitter_tau`` (the jitter warm-up) (:meth:`BodyFit.draw`).
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
    shape, coef = draws.get("shape"), draws.get("shape_coef")
    reps = len(se)
    parts = []
    for n in lengths:
        i = np.arange(n)
        level = np.cumsum(rng.normal(0.0, 1.0, (reps, n)) * sl[:, None], axis=1)
        sd = se[:, None] * np.ones(n)
        if "jitter_h" in draws:  # larger jitter over the first steps
            prof = np.exp(-i / draws["jitter_tau"])
            sd = se[:, None] * np.sqrt(1.0 + np.asarray(draws["jitter_h"])[:, None] * prof)
        x = level + rng.normal(0.0, 1.0, (reps, n)) * sd
        x = x + trend[:, None] * i + warm[:, None] * np.exp(-i / draws["tau"])
        if shape is not None:  # the shared curve, linear beyond the calibration's runs
            x = x + coef @ shape.basis(i).T
        parts.append(x)
    return np.concatenate(parts, axis=1)
