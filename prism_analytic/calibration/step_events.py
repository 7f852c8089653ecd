"""Step events fitted by likelihood: the slow step after an evaluation pause, and stalls.

Model
-----
For step ``i`` of run ``r`` (median ``m_r``), the relative residual ``y_i = t_i / m_r - 1`` is

    y_i = b0 + b1 * first_i + b2 * later_i + e_i + B_i * S_i,
    e_i ~ Normal(0, sigma),  B_i ~ Bernoulli(q),  S_i ~ Exponential(mean s),

where ``first_i`` flags the step directly after the run's *first* evaluation pause and
``later_i`` the step after any later pause (MLPerf ``eval_stop`` records). The density is a
mixture of a normal and an exponentially modified normal (:data:`scipy.stats.exponnorm`);
it is fitted by maximum likelihood with :class:`statsmodels.base.model.
GenericLikelihoodModel`. ``sigma`` is a nuisance parameter: the body of the prediction comes
from the engine's within-run law (with its calibrated step jitter), not from this fit.

Intervals (each says what it is)
--------------------------------
* ``b0, b1, b2, sigma``: Wald intervals from the observed information (statsmodels).
* stall rate: exact (Garwood) Poisson interval of ``k``, the steps the fit attributes to a
  stall (posterior stall probability > 0.5), over the ``n`` steps.
* stall size: exact chi-square interval of an exponential mean from the ``k`` attributed
  excesses. With ``k < 3`` the size is reported as *not identified* (the 95% interval spans
  more than a factor 30); the prediction then carries its whole posterior.

Scaling rules (fitted at size ``G0``, applied at ``G``)
-------------------------------------------------------
* Pause costs are seconds, ``b * m0`` (``m0``: the calibration median): rebuilding the
  training state after evaluation does not scale with the per-GPU work.
* A stall is one GPU (or its node) holding the synchronous step: the per-GPU rate
  ``q1 = 1 - (1 - q)^(1/G0)`` gives the per-step rate ``1 - (1 - q1)^G`` at ``G``; the size
  is seconds, ``s * m0``. The public logs do not all agree: on Llama 3.1 8B (Tyche and
  Theia: 3 stalls in 1,053 steps at 8 GPUs, none at 72 and 512) this rule loses to a rate
  per step by about 70 in Poisson log-likelihood, while on Carina's 405B sizes it fits a
  little better (``validation/results/calibration_transfer.md``); the ``prism calibrate``
  overlay carries the rate per step and the size as a fraction of the step.

The step body (jitter, within-run drift, trend, warm-up) is fitted beside the events by a
state-space model (:mod:`.step_body`) on the steps that are not stalls, and the clustering
of stalls in runs by a gamma-Poisson dispersion (:mod:`.stall_dispersion`).

Prediction intervals (:func:`predict_events`) simulate datasets shaped like the measured one
(same runs, steps per run and pause positions), each run normalised by its own median, as
the measured statistics are. With a fitted body the pause costs come from the body fit
(relative there, seconds at the calibration median), and the body's parameters are drawn
from their Wald approximation in the bootstrap interval. The *point* interval uses the
fitted values (sampling only); the *bootstrap* interval also draws the parameters from
nonparametric bootstrap refits of the calibration steps. With one or two stalls the
bootstrap cannot express the size's uncertainty (every resample holds the same few sizes):
that is why the size is then reported as not identified, with its exact interval.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special, stats

from .intervals import garwood, negbin_total_interval, poisson_interval
from .logs import StepLog, StepLogError, pool_logs
from .result import CalibrationError, FittedParameter
from .stall_dispersion import fit_stall_dispersion
from .step_body import BodyFit, fit_step_body, simulate_body

__all__ = [
    "EventFit",
    "event_design",
    "fit_step_events",
    "predict_events",
    "slow_steps",
    "run_dispersion",
]

#: Fewest attributed stalls for the stall size to count as identified.
MIN_STALLS_FOR_SIZE = 3
_PARAM_NAMES = ("b0", "first_pause", "later_pause", "log_sigma", "logit_q", "log_s")


def event_design(logs: Sequence[StepLog]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-run-normalised residuals, design matrix and run index of pooled runs.

    Returns
    -------
    y : ndarray
        ``t / median(run) - 1`` for every step.
    exog : ndarray, shape (n, 3)
        Columns: constant, first step after the run's first evaluation pause, first step
        after a later pause.
    run : ndarray of int
        Run index of each step.
    """
    ys, xs, runs = [], [], []
    for r, lg in enumerate(logs):
        if lg.n == 0:
            continue
        flags = np.asarray(lg.after_pause, dtype=bool)
        first = np.zeros(lg.n)
        idx = np.flatnonzero(flags)
        if idx.size:
            first[idx[0]] = 1.0
        later = flags.astype(float) - first
        ys.append(lg.times_s / np.median(lg.times_s) - 1.0)
        xs.append(np.column_stack([np.ones(lg.n), first, later]))
        runs.append(np.full(lg.n, r))
    return np.concatenate(ys), np.vstack(xs), np.concatenate(runs)


def _split(params: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    b = np.asarray(params[:3], dtype=float)
    sigma = float(np.exp(params[3]))
    q = float(special.expit(params[4]))
    s = float(np.exp(params[5]))
    return b, sigma, q, s


def _mixture_parts(
    y: np.ndarray, mu: np.ndarray, sigma: float, q: float, s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Log densities (weighted) of the body and the stall component."""
    l0 = math.log1p(-q) + stats.norm.logpdf(y, mu, sigma)
    l1 = math.log(q) + stats.exponnorm.logpdf(y, s / sigma, loc=mu, scale=sigma)
    return l0, l1


def _mixture_cdf(y: np.ndarray, mu: np.ndarray, sigma: float, q: float, s: float) -> np.ndarray:
    return (1 - q) * stats.norm.cdf(y, mu, sigma) + q * stats.exponnorm.cdf(
        y, s / sigma, loc=mu, scale=sigma
    )


def _model_class():
    """The statsmodels likelihood model (imported lazily: statsmodels is slow to import)."""
    from statsmodels.base.model import GenericLikelihoodModel

    class StepMixture(GenericLikelihoodModel):
        """Normal body plus exponential stalls, with pause effects as regressors."""

        #: positions of the fitted parameters in the full order of ``_PARAM_NAMES``
        keep: list[int] = [0, 1, 2, 3, 4, 5]

        def nloglikeobs(self, params: np.ndarray) -> np.ndarray:
            full = np.zeros(6)
            full[self.keep] = params
            b, sigma, q, s = _split(full)
            q = min(max(q, 1e-12), 1 - 1e-12)
            l0, l1 = _mixture_parts(self.endog, self.exog @ b[self.keep[:-3]], sigma, q, s)
            return -np.logaddexp(l0, l1)

    return StepMixture


def _fit(y: np.ndarray, exog: np.ndarray, start: np.ndarray, *, polish_only: bool = False):
    """Maximum likelihood on the design columns that are present.

    A pause column with no flagged step (a log format without pauses, or a bootstrap
    resample that missed them) carries no information: it is left out of the fit, its
    coefficient is 0 and its variance NaN. Returns ``(model, result, params, cov)`` with
    ``params`` and ``cov`` in the full order of :data:`_PARAM_NAMES`.
    """
    active = [0] + [j for j in (1, 2) if exog[:, j].any()]
    keep = active + [3, 4, 5]
    model = _model_class()(y, exog[:, active], extra_params_names=list(_PARAM_NAMES[3:]))
    model.keep = keep
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x0 = start[keep]
        if not polish_only:  # Nelder-Mead first: the mixture's likelihood is not convex
            x0 = model.fit(start_params=x0, method="nm", maxiter=4000, disp=0).params
        res = model.fit(start_params=x0, method="bfgs", maxiter=400, disp=0)
        try:  # a singular information (e.g. no stall in the data) has no covariance
            cov_sub = np.asarray(res.cov_params(), dtype=float)
        except (ValueError, np.linalg.LinAlgError):
            cov_sub = np.full((len(keep), len(keep)), np.nan)
    params = np.zeros(6)
    params[keep] = np.asarray(res.params, dtype=float)
    cov = np.full((6, 6), np.nan)
    cov[np.ix_(keep, keep)] = cov_sub
    return model, res, params, cov


def _start(y: np.ndarray, exog: np.ndarray, threshold: float) -> np.ndarray:
    body = y <= threshold - 1.0
    coef, *_ = np.linalg.lstsq(exog[body], y[body], rcond=None)
    resid = y[body] - exog[body] @ coef
    sigma = max(1.4826 * float(np.median(np.abs(resid - np.median(resid)))), 1e-5)
    k = int(np.sum(~body))
    q = min(max(k, 0.5) / len(y), 0.5)
    s = float(np.mean(y[~body])) if k else 10 * sigma
    return np.array([*coef, math.log(sigma), special.logit(q), math.log(max(s, 2 * sigma))])


@dataclass(frozen=True)
class EventFit:
    """A fitted step-event model (see the module notes) and its diagnostics.

    Attributes
    ----------
    gpus : int
        Job size the logs come from.
    median_s : float
        Pooled median step (seconds); converts relative effects into seconds.
    params : ndarray
        Maximum-likelihood estimate, in the order of :data:`_PARAM_NAMES`.
    cov : ndarray
        Inverse observed information of ``params`` (statsmodels).
    n_steps : int
    stalls : int
        Steps attributed to a stall (posterior probability > 0.5).
    stall_excess : ndarray
        Their excess over the body (relative to the run median).
    parameters : list of FittedParameter
        What is reported (seconds, with intervals and identifiability).
    goodness : dict
        Goodness-of-fit statement (see :func:`fit_step_events`).
    boot : dict
        Bootstrap refits of the event parameters (seconds, stall probability).
    body : BodyFit or None
        The state-space body (jitter, drift, warm-up; :mod:`.step_body`), None when not fitted.
    dispersion : FittedParameter or None
        Run-level clustering of the stalls (:mod:`.stall_dispersion`).
    engine_sd_rel : float
        The engine's own within-run step sd at this size, relative to its median (the part
        of the fitted jitter that ``body_mode="engine"`` does not add again).
    """

    gpus: int
    median_s: float
    params: np.ndarray
    cov: np.ndarray
    n_steps: int
    stalls: int
    stall_excess: np.ndarray
    parameters: list[FittedParameter]
    goodness: dict
    boot: dict = field(default_factory=dict, repr=False)
    body: BodyFit | None = field(default=None, repr=False)
    dispersion: FittedParameter | None = None
    engine_sd_rel: float = 0.0

    @property
    def first_pause_s(self) -> float:
        """Extra seconds of the first step after the first evaluation pause."""
        return float(self.params[1]) * self.median_s

    @property
    def later_pause_s(self) -> float:
        """Extra seconds of the first step after a later evaluation pause."""
        return float(self.params[2]) * self.median_s

    @property
    def stall_prob(self) -> float:
        """Per-step stall probability at the calibration size (0 without attributed stalls)."""
        return self.stalls / self.n_steps

    @property
    def stall_mean_s(self) -> float | None:
        """Mean stall size in seconds (None without attributed stalls)."""
        if not self.stalls:
            return None
        return float(np.mean(self.stall_excess)) * self.median_s

    def to_dict(self) -> dict:
        """Plain dict of the fit (JSON-ready through ``cli.output.jsonable``)."""
        from dataclasses import asdict

        return {
            "gpus": self.gpus,
            "median_s": self.median_s,
            "steps": self.n_steps,
            "stalls_attributed": self.stalls,
            "parameters": [asdict(p) for p in self.parameters],
            "goodness_of_fit": self.goodness,
        }


def fit_step_events(
    logs: Sequence[StepLog],
    gpus: int,
    *,
    confidence: float = 0.95,
    start_threshold: float = 1.03,
    n_gof: int = 49,
    n_boot: int = 200,
    seed: int = 0,
    body_model: bool = True,
    engine_sd_rel: float = 0.0,
    progress: Callable[[int, int], None] | None = None,
) -> EventFit:
    """Fit the step-event model of the module notes to the runs of one job by likelihood.

    Parameters
    ----------
    logs : sequence of StepLog
        Runs of one job (mixed jobs and too few steps are refused by :func:`pool_logs`).
    gpus : int
        The job's GPU count (the stall rate's scaling rule is per GPU).
    confidence : float
        Level of every interval.
    start_threshold : float
        Steps above this multiple of their run median start as stalls (starting values only;
        the likelihood decides).
    n_gof : int
        Parametric-bootstrap refits for the p-value of the PIT Kolmogorov-Smirnov statistic
        (0 skips it).
    n_boot : int
        Nonparametric bootstrap refits kept for the prediction's bootstrap interval
        (:func:`predict_events`; 0: no parameter uncertainty there).
    seed : int
    body_model : bool
        Also fit the state-space body (step jitter, random-walk drift, warm-up transient;
        :func:`.step_body.fit_step_body`) on the steps that are not stalls.
    engine_sd_rel : float
        The engine's within-run step sd at this size relative to its median (see
        :class:`EventFit`); 0 when unknown.
    progress : callable, optional
        ``progress(done, total)`` after each of the ``n_gof + n_boot`` refits.

    Returns
    -------
    EventFit
        Its ``goodness`` holds: the KS statistic of the probability integral transform with
        a parametric-bootstrap p-value (parameters re-estimated on each simulated dataset,
        so the p-value accounts for the fit); the smallest Ljung-Box p-value (lag 10) of the
        body residuals over runs (drift or autocorrelation that an i.i.d. model misses).
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise CalibrationError(f"gpus must be a positive integer, got {gpus!r}")
    if not 0 < confidence < 1:
        raise CalibrationError(f"confidence must be in (0, 1), got {confidence!r}")
    if isinstance(n_gof, bool) or not isinstance(n_gof, int) or n_gof < 0:
        raise CalibrationError(f"n_gof must be an integer >= 0, got {n_gof!r}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 0:
        raise CalibrationError(f"n_boot must be an integer >= 0, got {n_boot!r}")
    if not (isinstance(engine_sd_rel, int | float) and 0 <= engine_sd_rel < 1):
        raise CalibrationError(f"engine_sd_rel must be in [0, 1), got {engine_sd_rel!r}")
    pooled = pool_logs(list(logs))
    y, exog, run = event_design(logs)
    if len(np.unique(y)) < 3:
        raise StepLogError(f"{pooled.source}: step times are (nearly) constant; nothing to fit")
    model, params, cov, is_stall = _attribute(y, exog, start_threshold)
    body, goodness_note = None, ""
    if body_model:
        # stalls (attributed against a normal body without drift) are missing values there.
        # Refitting the stalls on the deviation from the Kalman-smoothed local level was
        # tried on the MLPerf logs: the exponential component then takes the heavy upper
        # tail of the jitter (3 "stalls" at 512 GPUs, 210 at 2,496), so it is not done; a
        # stall component inside the state-space model is the fix.
        try:
            body = fit_step_body(y, exog, run, is_stall, confidence=confidence)
        except CalibrationError as err:  # e.g. runs too short: reported, the events still hold
            goodness_note = f"not fitted: {err}"
    b, sigma, q, s = _split(params)
    mu = exog @ b
    k, n = int(is_stall.sum()), len(y)
    excess = y[is_stall] - mu[is_stall]
    m0 = float(np.median(pooled.times_s))
    parameters = _report(params, cov, k, n, excess, exog, m0, gpus, confidence)
    tick = _counter(progress, n_gof + n_boot)
    goodness = _goodness(model, params, y, exog, run, mu, sigma, q, s, n_gof, seed, tick)
    goodness["stalls_attributed"] = k
    goodness["stall_ratios"] = [float(v) for v in np.sort(1 + y[is_stall])]
    boot = _bootstrap(y, exog, params, m0, n_boot, seed + 1, tick) if n_boot else {}
    per_run = [int(is_stall[run == r].sum()) for r in np.unique(run)]
    exposure = [int(np.sum(run == r)) for r in np.unique(run)]
    dispersion = fit_stall_dispersion(per_run, exposure, confidence)
    parameters.append(dispersion)
    if body is not None:
        parameters += body.parameters
        goodness["body_tests"] = body.tests
    elif body_model:
        goodness["body_model"] = goodness_note
    return EventFit(
        gpus,
        m0,
        params,
        cov,
        n,
        k,
        excess,
        parameters,
        goodness,
        boot,
        body,
        dispersion,
        float(engine_sd_rel),
    )


def _attribute(
    y: np.ndarray, exog: np.ndarray, start_threshold: float
) -> tuple[object, np.ndarray, np.ndarray, np.ndarray]:
    """Mixture fit and its stalls: ``(model, params, cov, posterior stall prob > 0.5)``."""
    model, _, params, cov = _fit(y, exog, _start(y, exog, start_threshold))
    b, sigma, q, s = _split(params)
    l0, l1 = _mixture_parts(y, exog @ b, sigma, max(q, 1e-300), s)
    return model, params, cov, np.exp(l1 - np.logaddexp(l0, l1)) > 0.5


def _report(
    params: np.ndarray,
    cov: np.ndarray,
    k: int,
    n: int,
    excess: np.ndarray,
    exog: np.ndarray,
    m0: float,
    gpus: int,
    confidence: float,
) -> list[FittedParameter]:
    z = stats.norm.ppf(0.5 + confidence / 2)
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    out = []
    for j, (key, what) in enumerate(
        (("events.first_pause_s", "first pause"), ("events.later_pause_s", "later pauses")), 1
    ):
        count = int(exog[:, j].sum())
        value = float(params[j]) * m0
        if count < 2 or not np.isfinite(se[j]):
            out.append(
                FittedParameter(
                    key,
                    None,
                    None,
                    False,
                    f"{count} step(s) after the {what}: needs >= 2 with a finite information",
                )
            )
            continue
        half = z * float(se[j]) * m0
        out.append(
            FittedParameter(
                key,
                value,
                (value - half, value + half),
                True,
                f"seconds added to the step after the {what} ({count} such steps); maximum"
                f" likelihood, Wald {confidence:.0%} interval",
            )
        )
    lo, hi = garwood(k, confidence)
    rate_key = "events.stall_probability"
    if k == 0:
        out.append(
            FittedParameter(
                rate_key,
                None,
                (0.0, hi / n),
                False,
                f"no step attributed to a stall in {n}; rate <= {hi / n:.3g}"
                f" ({confidence:.0%} Garwood upper bound)",
            )
        )
        out.append(FittedParameter("events.stall_mean_s", None, None, False, "no stall"))
        return out
    per_gpu = 1.0 - (1.0 - k / n) ** (1.0 / gpus)
    out.append(
        FittedParameter(
            rate_key,
            k / n,
            (lo / n, hi / n),
            True,
            f"{k} of {n} steps attributed to a stall (posterior > 0.5) at {gpus} GPUs"
            f" (per GPU {per_gpu:.3g}); exact Garwood {confidence:.0%} interval",
        )
    )
    total = float(excess.sum()) * m0
    a = 1.0 - confidence
    s_lo = 2 * total / stats.chi2.ppf(1 - a / 2, 2 * k)
    s_hi = 2 * total / stats.chi2.ppf(a / 2, 2 * k)
    ident = k >= MIN_STALLS_FOR_SIZE
    out.append(
        FittedParameter(
            "events.stall_mean_s",
            total / k if ident else None,
            (float(s_lo), float(s_hi)),
            ident,
            f"mean excess of {k} attributed stall(s), {total / k:.3g} s; exact chi-square"
            f" {confidence:.0%} interval of an exponential mean"
            + ("" if ident else f"; not identified (< {MIN_STALLS_FOR_SIZE} stalls)"),
        )
    )
    return out


def _counter(progress: Callable[[int, int], None] | None, total: int) -> Callable[[], None]:
    """A function to call after each refit: reports ``progress(done, total)`` when given."""
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], total)

    return tick


def _goodness(
    model, params, y, exog, run, mu, sigma, q, s, n_gof: int, seed: int, tick=lambda: None
) -> dict:
    from statsmodels.stats.diagnostic import acorr_ljungbox

    pit = _mixture_cdf(y, mu, sigma, q, s)
    ks = float(stats.kstest(pit, "uniform").statistic)
    l0, l1 = _mixture_parts(y, mu, sigma, max(q, 1e-300), s)
    out: dict = {"pit_ks_statistic": ks, "loglike": float(np.logaddexp(l0, l1).sum())}
    if n_gof:
        rng = np.random.default_rng(seed)
        hits = 0
        for _ in range(n_gof):
            sim = _simulate_y(exog, params, rng)
            *_, p_sim, _ = _fit(sim, exog, params)
            bb, sg, qq, ss = _split(p_sim)
            u = _mixture_cdf(sim, exog @ bb, sg, qq, ss)
            hits += stats.kstest(u, "uniform").statistic >= ks
            tick()
        out["pit_ks_pvalue_parametric_bootstrap"] = (hits + 1) / (n_gof + 1)
        out["pit_ks_refits"] = n_gof
    lb = []
    body = y - exog[:, 1:] @ params[1:3]
    for r in np.unique(run):
        x = body[run == r]
        if len(x) > 20:
            lb.append(float(acorr_ljungbox(x, lags=[10])["lb_pvalue"].iloc[0]))
    out["ljung_box_min_pvalue_lag10"] = min(lb) if lb else None
    return out


def _simulate_y(exog: np.ndarray, params: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    b, sigma, q, s = _split(params)
    n = len(exog)
    stall = rng.random(n) < q
    return exog @ b + rng.normal(0.0, sigma, n) + stall * rng.exponential(s, n)


# --------------------------------------------------------------------------------------
# Prediction at another size
# --------------------------------------------------------------------------------------
def _bootstrap(
    y: np.ndarray,
    exog: np.ndarray,
    params: np.ndarray,
    m0: float,
    reps: int,
    seed: int,
    tick: Callable[[], None] = lambda: None,
) -> dict:
    """Event parameters (seconds) refitted on nonparametric bootstrap resamples of the steps.

    Steps are resampled with replacement, pause flags kept with their steps (i.i.d. steps:
    the drift between them is ignored). Each resample is refitted from the full-data
    estimate; its stalls are the steps with posterior stall probability > 0.5.
    """
    rng = np.random.default_rng(seed)
    n = len(y)
    out = {key: np.empty(reps) for key in ("first", "later", "q", "s")}
    for i in range(reps):
        idx = rng.integers(0, n, n)
        yy, xx = y[idx], exog[idx]
        *_, p, _ = _fit(yy, xx, params, polish_only=True)
        b, sigma, q, s = _split(p)
        mu = xx @ b
        l0, l1 = _mixture_parts(yy, mu, sigma, max(q, 1e-300), s)
        stall = l1 > l0
        # a pause flag missing from the resample leaves its effect unidentified: keep the
        # full-data value rather than an arbitrary one
        out["first"][i] = (b[1] if xx[:, 1].any() else params[1]) * m0
        out["later"][i] = (b[2] if xx[:, 2].any() else params[2]) * m0
        out["q"][i] = stall.mean()
        out["s"][i] = float(np.mean(yy[stall] - mu[stall])) * m0 if stall.any() else 0.0
        tick()
    return out


def _draws(fit: EventFit, reps: int, bootstrap: bool, rng: np.random.Generator) -> dict:
    """Per-replicate event parameters in seconds at the calibration size."""
    if bootstrap and fit.boot:
        pick = rng.integers(0, len(fit.boot["q"]), reps)
        return {key: v[pick] for key, v in fit.boot.items()}
    return {
        "first": np.full(reps, fit.first_pause_s),
        "later": np.full(reps, fit.later_pause_s),
        "q": np.full(reps, fit.stall_prob),
        "s": np.full(reps, fit.stall_mean_s or 0.0),
    }


def predict_events(
    fit: EventFit,
    body: object,
    logs: Sequence[StepLog],
    gpus: int,
    *,
    reps: int = 400,
    confidence: float = 0.95,
    seed: int = 0,
    body_mode: str = "fitted",
    stall_dispersion: float | None = None,
    median_s: float | None = None,
) -> dict:
    """Per-run-normalised p90/p50, p99/p50 and steps above 1.5x at another size.

    Parameters
    ----------
    fit : EventFit
        Fitted at the calibration size.
    body : PredictedLaw
        The engine's within-run step law at the target size *without* hiccups (stalls
        come from ``fit``); sampled by inverse CDF.
    logs : sequence of StepLog
        The measured runs at the target size: their steps per run and pause positions
        shape the simulated datasets, and their statistics are compared.
    gpus : int
        Target size (stall-rate scaling rule).
    reps : int
        Simulated datasets per interval.
    body_mode : {"fitted", "engine", "none"}
        Where the step body comes from when ``fit.body`` exists (else always ``"none"``):
        ``"fitted"``: the calibrated state-space body (relative jitter, random-walk drift,
        warm-up where identified) around the engine's median (``body.p50_s``); ``"engine"``:
        the engine's within-run law times the drift and warm-up, plus the fitted jitter
        beyond the engine's own at the calibration size (``fit.engine_sd_rel``, in
        quadrature); ``"none"``: the engine's within-run law alone (the previous model).
    stall_dispersion : float, optional
        Dispersion of the per-run stall rate (gamma variance; :mod:`.stall_dispersion`).
        Default: the calibration's value where it was identified, else one common rate.
    median_s : float, optional
        The predicted median step at the target size (default ``body.p50_s``). The pause
        costs and stall sizes are seconds: their size relative to the step is set by this
        median, and ``body`` is rescaled to it. ``body`` is a *within-run* law (persistent
        GPU speed spread removed, :func:`.fit.check_against_logs`), whose median lacks the
        run's slowest-replica factor (MLPerf 1,024 GPUs: 7.18 s against a predicted median of
        8.50 s); taking its median as the scale made every second-valued cost 18% too large
        relative to the step.

    Returns
    -------
    dict
        Measured statistics; ``*_point_95%`` intervals (fitted parameters, sampling only) and
        ``*_bootstrap_95%`` (parameters from the bootstrap refits too), ``*_posterior_95%``
        (stall rate and size from their posteriors, :func:`_posterior_draws`; its count
        interval is the posterior predictive, ``count_inside_posterior``); the predicted mean
        count above 1.5x with its Poisson interval and, with a dispersion, its negative
        binomial interval (``count_negbin_95``); ``p99_inside`` (bootstrap interval),
        ``count_inside`` (Poisson interval of the point estimate's mean count) and
        ``count_inside_negbin``.
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise CalibrationError(f"gpus must be a positive integer, got {gpus!r}")
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 20:
        raise CalibrationError(f"reps must be an integer >= 20, got {reps!r}")
    if body_mode not in BODY_MODES:
        raise CalibrationError(f"body_mode must be one of {BODY_MODES}, got {body_mode!r}")
    alpha, alpha_from = _dispersion(fit, stall_dispersion)
    if median_s is None:
        median_s = float(body.p50_s)
    elif not (
        isinstance(median_s, int | float)
        and not isinstance(median_s, bool)
        and math.isfinite(median_s)
        and median_s > 0
    ):
        raise CalibrationError(f"median_s must be a positive number of seconds, got {median_s!r}")
    mode = body_mode if fit.body is not None else "none"
    runs = [lg for lg in logs if lg.n]
    if not runs:
        raise StepLogError("no steps in the logs to compare with")
    _, exog, run = event_design(runs)
    meas = np.concatenate([lg.times_s / np.median(lg.times_s) for lg in runs])
    rng = np.random.default_rng(seed)
    a = 1.0 - confidence
    out: dict = {
        "gpus": gpus,
        "steps": len(meas),
        "measured_p90_over_p50": float(np.quantile(meas, 0.9) / np.median(meas)),
        "measured_p99_over_p50": float(np.quantile(meas, 0.99)),
        "measured_steps_above_1p5x_median": int(np.sum(meas > 1.5)),
        "body_mode": mode,
        "stall_dispersion_used": alpha,
        "stall_dispersion_from": alpha_from,
    }
    lengths = [lg.n for lg in runs]
    labels = [("point", False), ("bootstrap", True)] + [("posterior", True)] * (fit.stalls > 0)
    for label, boot in labels:
        par = (
            _posterior_draws(fit, reps, rng)
            if label == "posterior"
            else _draws(fit, reps, boot, rng)
        )
        # simulated datasets in blocks of at most _SIM_ELEMENTS steps: memory stays bounded
        # on long logs (one block, the same draws, where reps x steps fits in it)
        n = len(exog)
        block = max(1, min(reps, _SIM_ELEMENTS // max(n, 1)))
        parts = [
            _simulate_stats(
                fit,
                body,
                mode,
                lengths,
                {k: v[i : i + block] for k, v in par.items()},
                boot,
                rng,
                float(median_s),
                exog,
                run,
                gpus,
                alpha,
            )
            for i in range(0, reps, block)
        ]
        r90, r99, count, per_run = (np.concatenate(x) for x in zip(*parts))
        out[f"p90_over_p50_{label}"] = float(np.median(r90))
        out[f"p99_over_p50_{label}"] = float(np.median(r99))
        out[f"p99_over_p50_{label}_{confidence:.0%}"] = (
            float(np.quantile(r99, a / 2)),
            float(np.quantile(r99, 1 - a / 2)),
        )
        out[f"count_above_1p5x_{label}_{confidence:.0%}"] = (
            int(np.quantile(count, a / 2)),
            int(np.quantile(count, 1 - a / 2)),
        )
        if not boot:
            out["predicted_count_above_1p5x"] = float(np.mean(count))
            out["count_poisson_95"] = poisson_interval(float(np.mean(count)))
            if alpha:
                # the simulated mean per run already includes the clustering's mean (1)
                out["count_negbin_95"] = negbin_total_interval(
                    per_run.mean(axis=0), alpha, confidence
                )
    lo, hi = out[f"p99_over_p50_bootstrap_{confidence:.0%}"]
    c_lo, c_hi = out["count_poisson_95"]
    k_meas = out["measured_steps_above_1p5x_median"]
    out["p90_abs_diff"] = abs(out["p90_over_p50_point"] - out["measured_p90_over_p50"])
    out["p99_inside"] = bool(lo <= out["measured_p99_over_p50"] <= hi)
    out["count_inside"] = bool(c_lo <= k_meas <= c_hi)
    if alpha:
        n_lo, n_hi = out["count_negbin_95"]
        out["count_inside_negbin"] = bool(n_lo <= k_meas <= n_hi)
    post = f"count_above_1p5x_posterior_{confidence:.0%}"
    if post in out:
        out["count_inside_posterior"] = bool(out[post][0] <= k_meas <= out[post][1])
    else:
        out[post] = None
        out["count_posterior_note"] = "no stall at the calibration size: no size to predict from"
    return out


#: Simulated steps (datasets x steps) held at once by :func:`predict_events`.
_SIM_ELEMENTS = 4_000_000


def _simulate_stats(
    fit: EventFit,
    body: object,
    mode: str,
    lengths: list[int],
    par: dict,
    boot: bool,
    rng: np.random.Generator,
    median_s: float,
    exog: np.ndarray,
    run: np.ndarray,
    gpus: int,
    alpha: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """p90/p50, p99/p50, count above 1.5x and per-run counts of ``len(par["q"])`` datasets."""
    reps, n = len(par["q"]), len(exog)
    q1 = 1.0 - (1.0 - par["q"]) ** (1.0 / fit.gpus)
    q_g = 1.0 - (1.0 - q1) ** gpus
    t = _body_times(fit, body, mode, lengths, reps, boot, rng, par, median_s)
    t = t + np.outer(par["first"], exog[:, 1]) + np.outer(par["later"], exog[:, 2])
    rate = np.broadcast_to(q_g[:, None], (reps, n))
    if alpha:  # a gamma multiplier per run and dataset: stalls cluster in runs
        g = rng.gamma(1.0 / alpha, alpha, (reps, len(lengths)))
        rate = np.minimum(rate * g[:, run], 1.0)
    stall = rng.random((reps, n)) < rate
    t = t + stall * rng.exponential(1.0, (reps, n)) * par["s"][:, None]
    norm = np.empty_like(t)
    per_run = np.empty((reps, len(lengths)))
    for r in np.unique(run):
        cols = run == r
        norm[:, cols] = t[:, cols] / np.median(t[:, cols], axis=1, keepdims=True)
        per_run[:, r] = np.sum(norm[:, cols] > 1.5, axis=1)
    r90 = np.quantile(norm, 0.9, axis=1) / np.median(norm, axis=1)
    r99 = np.quantile(norm, 0.99, axis=1)
    return r90, r99, np.sum(norm > 1.5, axis=1), per_run


def _posterior_draws(fit: EventFit, reps: int, rng: np.random.Generator) -> dict:
    """Stall rate and size drawn from their posteriors (Jeffreys priors), pauses fitted.

    ``k`` stalls in ``n`` steps: rate ``q ~ Gamma(k + 1/2, 1/n)`` (Jeffreys prior of a Poisson
    rate); exponential mean size ``s ~ InvGamma(k, total excess)`` (Jeffreys prior ``1/s``).
    With one stall the size's posterior has no mean: the predictive count then carries what
    one stall cannot say about the size, which the bootstrap (every resample holds the same
    stall) cannot. Needs ``k >= 1``.
    """
    k, n = fit.stalls, fit.n_steps
    total = float(np.sum(fit.stall_excess)) * fit.median_s
    par = _draws(fit, reps, False, rng)
    par["q"] = np.minimum(rng.gamma(k + 0.5, 1.0 / n, reps), 1.0)
    par["s"] = total / rng.gamma(k, 1.0, reps)
    return par


BODY_MODES = ("fitted", "engine", "none")


def _dispersion(fit: EventFit, given: float | None) -> tuple[float, str]:
    """The stall dispersion a prediction uses, and where it comes from."""
    if given is not None:
        if (
            isinstance(given, bool)
            or not isinstance(given, int | float)
            or not (math.isfinite(given) and given >= 0)
        ):
            raise CalibrationError(f"stall_dispersion must be a number >= 0, got {given!r}")
        return float(given), "given"
    d = fit.dispersion
    if d is not None and d.identified and d.value is not None:
        return float(d.value), "fitted"
    return 0.0, "not identified: one common rate (Poisson)"


def _body_times(
    fit: EventFit,
    body: object,
    mode: str,
    lengths: list[int],
    reps: int,
    boot: bool,
    rng: np.random.Generator,
    par: dict,
    median_s: float,
) -> np.ndarray:
    """Simulated step times (seconds) before pauses and stalls, shape ``(reps, n)``.

    The step's scale is ``median_s`` (the engine's law is rescaled to it). With a fitted
    body its pause costs (relative at the calibration size, converted to seconds there)
    replace the mixture's in ``par``.
    """
    n = sum(lengths)
    scale = median_s / float(body.p50_s)
    if mode == "none":
        return body.sample(reps * n, rng).reshape(reps, n) * scale
    bf = fit.body
    draws = bf.draw(reps, rng if boot else None)
    par["first"] = draws["first"] * fit.median_s
    par["later"] = draws["later"] * fit.median_s
    if mode == "fitted":
        return median_s * (1.0 + simulate_body(draws, lengths, rng))
    extra = np.sqrt(np.maximum(draws["sigma_e"] ** 2 - fit.engine_sd_rel**2, 0.0))
    rel = simulate_body({**draws, "sigma_e": extra}, lengths, rng)
    return body.sample(reps * n, rng).reshape(reps, n) * scale * (1.0 + rel)


# --------------------------------------------------------------------------------------
# Where the slow steps sit
# --------------------------------------------------------------------------------------
def slow_steps(logs: Sequence[StepLog], threshold: float = 1.03, warmup: int = 50) -> dict:
    """Where the steps above ``threshold`` times their run median sit.

    Each slow step is classed, in this order, as ``first_pause`` (directly after the run's
    first evaluation pause), ``later_pause`` (after a later pause), ``warmup`` (among the
    first ``warmup`` logged steps of the run) or ``elsewhere``.

    Returns
    -------
    dict
        ``counts`` per class, ``steps`` (run, index, ratio, class) and ``per_run`` counts.
    """
    if not (isinstance(threshold, int | float) and threshold > 1):
        raise CalibrationError(f"threshold must be > 1, got {threshold!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise CalibrationError(f"warmup must be an integer >= 0, got {warmup!r}")
    _, exog, run = event_design(logs)
    ratios = np.concatenate([lg.times_s / np.median(lg.times_s) for lg in logs if lg.n])
    index = np.concatenate([np.arange(lg.n) for lg in logs if lg.n])
    steps, counts = [], {"first_pause": 0, "later_pause": 0, "warmup": 0, "elsewhere": 0}
    for i in np.flatnonzero(ratios > threshold):
        cls = (
            "first_pause"
            if exog[i, 1]
            else "later_pause"
            if exog[i, 2]
            else "warmup"
            if index[i] < warmup
            else "elsewhere"
        )
        counts[cls] += 1
        steps.append((int(run[i]), int(index[i]), float(ratios[i]), cls))
    per_run = [int(np.sum((ratios > threshold) & (run == r))) for r in np.unique(run)]
    return {"threshold": threshold, "counts": counts, "steps": steps, "per_run": per_run}


def run_dispersion(
    logs: Sequence[StepLog], threshold: float = 1.5, *, draws: int = 20000, seed: int = 0
) -> dict:
    """Test whether steps above ``threshold`` x median spread over runs as one rate says.

    Under one per-step rate, given the total ``k`` the per-run counts are multinomial with
    probabilities proportional to the runs' step counts. The p-value is P(largest per-run
    count >= the observed one), by Monte Carlo (``draws`` multinomial samples): small means
    the events cluster in runs (a bad allocation), which a per-step Poisson model misses.
    """
    runs = [lg for lg in logs if lg.n]
    counts = np.array([int(np.sum(lg.times_s > threshold * np.median(lg.times_s))) for lg in runs])
    k = int(counts.sum())
    if k == 0:
        return {"threshold": threshold, "per_run": counts.tolist(), "p_value": None}
    p = np.array([lg.n for lg in runs], dtype=float)
    sim = np.random.default_rng(seed).multinomial(k, p / p.sum(), size=draws)
    pval = float((np.sum(sim.max(axis=1) >= counts.max()) + 1) / (draws + 1))
    return {"threshold": threshold, "per_run": counts.tolist(), "p_value": pval}
