"""Fit the stochastic step-time model to measured step logs or published throughput.

What is matched is always the *predicted distribution* of the full stochastic model (the
analytic engine's step-time law, with every noise source switched on), never the
deterministic mean model alone:

* **Throughput targets** (MFU, tokens/s) fix the *mean* step time:
  ``mean = model FLOPs per step / (MFU * GPUs * BF16 peak)`` or
  ``tokens per step / (tokens/s)``.
* **Step logs** fix the *median* step time (runs pooled; robust to rare stalls).

The fitted parameters (each reported with an interval, or as not identified):

``hardware.efficiency.gemm`` (``gemm_fp8`` for FP8/MXFP8 jobs, ``gemm_fp4`` for NVFP4)
    Achieved fraction of the GEMM dtype's peak, found by a secant search on the predicted
    median/mean. Its interval is the target's interval mapped through that (monotone) map:
    for logs, the percentile-bootstrap interval of the pooled median (steps resampled as if
    independent: autocorrelation would widen it); for a published MFU, its rounding
    interval (+- half a unit of the last quoted digit). A percentile interval maps exactly
    through a monotone function, so no refit per resample is needed.
``variability.hiccups.probability`` and ``size_s`` / ``size_rel``
    Rare stalls: steps above ``stall_threshold`` times their run's median. Rate (per step):
    count over steps, with the exact (Garwood) Poisson interval; size: median excess in
    seconds over the run median, with a percentile-bootstrap interval (>= 3 stalls) or an
    exact chi-square interval (1-2 stalls), reported, and written as ``size_rel``, its
    fraction of the deterministic step, which carries across sizes. No stall observed:
    not identified (only an upper bound on the rate is reported), unless the job's own rate
    is above that bound: then the estimate, 0, is written.
Body dispersion (``variability.temporal.kernel_cv``)
    Identified only when moving it moves the predicted p90/p50 by more than the
    measured p90/p50's bootstrap interval; otherwise reported as not identified.
Fixed per-step cost and a part growing with the data-parallel group
    Not identifiable from one job size (they trade off exactly against the GEMM
    efficiency); reported as not identified.

Goodness of fit compares the measured per-run-normalised p90/p50 and p99/p50 with the
prediction's, and reports the count of steps above 1.5x the median against the predicted
count's Poisson 95% interval.

Steps directly after an evaluation pause (MLPerf ``eval_stop``) are left out of the median,
the stall count and the ratios (the step law has no pauses; the step-event fit models
them), and facts a log states about its job (global batch, microbatches, sequence length,
GPU count) must match the job given (:func:`.log_job.check_logs_match_job`): a calibration of
the wrong job would otherwise return a number, silently off.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from scipy import stats

from .intervals import garwood, poisson_interval
from .log_job import check_logs_match_job
from .logs import StepLog, StepLogError, per_run_normalised, pool_logs, without_pauses
from .quantile_bootstrap import (
    bootstrap_quantiles,
    check_resamples,
    percentile_interval,
    sample_quantiles,
)
from .result import (
    CalibrationError,
    CalibrationResult,
    FittedParameter,
    PredictedLaw,
    law_dict,
    overlay_toml,
)
from .shape_choice import SHAPE_OPTIONS, SHAPES, choose_shape

__all__ = [
    "CalibrationError",
    "FittedParameter",
    "CalibrationResult",
    "PredictedLaw",
    "predicted_law",
    "solve_gemm_efficiency",
    "gemm_key",
    "calibrate_to_throughput",
    "calibrate_to_logs",
    "calibrate_sizes",
    "check_against_logs",
    "overlay_toml",
]


def predicted_law(job: Any) -> PredictedLaw:
    """The analytic engine's step-time law of ``job``."""
    from ..workload.prediction import predict_job as run_prediction

    result, _, _ = run_prediction(job, method="analytic")
    q = np.asarray(result.quantile([0.5, 0.9, 0.99]), dtype=float)
    # an upper level in the grid's top atom (the engine gives nan) lies beyond the grid
    q[1:] = np.nan_to_num(q[1:], nan=np.inf, posinf=np.inf)
    return PredictedLaw(float(result.mean()), q[0], q[1], q[2], float(result.std()), result=result)


def _with(job: Any, overrides: Mapping[str, Any]) -> Any:
    from ..workload.jobs import merge_config

    return merge_config(job, dict(overrides), check_layout=False)


def _jitter(job: Any, seconds: float) -> Any:
    """``job`` with a per-step jitter of ``seconds`` sd (and no relative jitter)."""
    temporal = {"step_jitter_s": float(seconds), "step_jitter_rel": 0.0}
    return _with(job, {"variability": {"temporal": temporal}})


def gemm_key(job: Any) -> str:
    """Efficiency key of the job's GEMM precision: ``gemm`` (BF16), ``gemm_fp8``, ``gemm_fp4``."""
    return job.hardware.efficiency.gemm_key(job.training.precision)


def _gemm_overlay(job: Any, eff: float) -> dict:
    return {"hardware": {"efficiency": {gemm_key(job): float(eff)}}}


def solve_gemm_efficiency(
    job: Any,
    target_s: float,
    statistic: str = "p50",
    *,
    rtol: float = 2e-4,
    max_iter: int = 12,
    evaluate: Callable[[Any], PredictedLaw] = predicted_law,
) -> tuple[float, PredictedLaw]:
    """GEMM efficiency at which the predicted ``statistic`` (p50 or mean) is ``target_s``.

    A secant search in log-log space (step time is close to ``a / eff + b``), started at the
    job's own efficiency. Raises :class:`CalibrationError` when the target needs an
    efficiency above 1 (the rest of the step alone is slower than the target).
    """
    if statistic not in ("p50", "mean"):
        raise CalibrationError(f"statistic must be 'p50' or 'mean', got {statistic!r}")
    if not (math.isfinite(target_s) and target_s > 0):
        raise CalibrationError(f"target step time must be a positive number, got {target_s!r}")

    def stat(eff: float) -> tuple[float, PredictedLaw]:
        law = evaluate(_with(job, _gemm_overlay(job, eff)))
        return (law.p50_s if statistic == "p50" else law.mean_s), law

    x0 = float(job.hardware.efficiency.for_precision(job.training.precision))
    y0, law0 = stat(x0)
    x1 = min(1.0, max(1e-3, x0 * y0 / target_s))  # the same bounds as every later step
    y1, law1 = stat(x1)
    for _ in range(max_iter):
        if abs(y1 / target_s - 1.0) < rtol:
            return x1, law1
        if x1 >= 1.0 and y1 > target_s:
            raise CalibrationError(
                f"target {statistic} step {target_s:.6g} s is unreachable: even at GEMM"
                f" efficiency 1.0 the predicted {statistic} is {y1:.6g} s (the non-GEMM part of"
                " the step is too slow; check the layout, precision and network)"
            )
        slope = (math.log(y1) - math.log(y0)) / (math.log(x1) - math.log(x0)) if x1 != x0 else -1
        if not (slope < -1e-6):
            slope = -1.0
        x2 = math.exp(math.log(x1) + (math.log(target_s) - math.log(y1)) / slope)
        x2 = min(1.0, max(1e-3, x2))
        x0, y0 = x1, y1
        x1 = x2
        y1, law1 = stat(x1)
    if abs(y1 / target_s - 1.0) < 10 * rtol:
        return x1, law1
    if x1 <= 1e-3 and y1 < target_s:
        # a step far slower than any plausible efficiency allows: units or job, not the GPUs
        raise CalibrationError(
            f"target {statistic} step {target_s:.6g} s is unreachable: even at GEMM efficiency"
            f" 0.001 the predicted {statistic} is {y1:.6g} s; check that the step times are"
            " in seconds (a CSV 'step_time' column in milliseconds reads 1000x too slow) and"
            " that the job is the logged one (GPU count, batch, sequence length)"
        )
    raise CalibrationError(f"GEMM efficiency search did not converge (last {x1:.6g})")


def calibrate_to_throughput(
    job: Any,
    *,
    mfu: float | None = None,
    tokens_per_s: float | None = None,
    rel_precision: float | None = None,
    evaluate: Callable[[Any], PredictedLaw] = predicted_law,
) -> CalibrationResult:
    """Fit the GEMM efficiency so that the *predicted mean* step matches a published rate.

    Parameters
    ----------
    job : JobConfig
    mfu : float, optional
        Model FLOPs utilisation against the BF16 peak, in (0, 1).
    tokens_per_s : float, optional
        Training throughput (exactly one of ``mfu`` / ``tokens_per_s``).
    rel_precision : float, optional
        Half-width of the published number's uncertainty, relative; default: half a unit of
        the last digit as quoted (0.41 -> 0.005 / 0.41).
    """
    from ..workload.step_estimate import step_time

    if (mfu is None) == (tokens_per_s is None):
        raise CalibrationError("give exactly one of mfu= or tokens_per_s=")
    est = step_time(job)
    if mfu is not None:
        if not (isinstance(mfu, int | float) and 0 < mfu < 1):
            raise CalibrationError(f"mfu must be a fraction in (0, 1), got {mfu!r}")
        peak = job.hardware.peak_flops.bf16
        target = est.model_flops_per_step / (mfu * job.gpus * peak)
        value, desc = float(mfu), f"MFU {mfu:g} (predicted mean step)"
    else:
        if not (isinstance(tokens_per_s, int | float) and tokens_per_s > 0):
            raise CalibrationError(f"tokens_per_s must be > 0, got {tokens_per_s!r}")
        target = est.tokens_per_step / tokens_per_s
        value, desc = float(tokens_per_s), f"{tokens_per_s:g} tokens/s (predicted mean step)"
    if rel_precision is None:
        digits = len(f"{value:g}".split(".")[-1]) if "." in f"{value:g}" else 0
        rel_precision = 0.5 * 10.0**-digits / value
    eff, law = solve_gemm_efficiency(job, target, "mean", evaluate=evaluate)
    # the rate is inversely proportional to the mean step: rate*(1+r) -> step/(1+r)
    lo, _ = solve_gemm_efficiency(job, target * (1 + rel_precision), "mean", evaluate=evaluate)
    hi, _ = solve_gemm_efficiency(job, target / (1 + rel_precision), "mean", evaluate=evaluate)
    params = [
        FittedParameter(
            f"hardware.efficiency.{gemm_key(job)}",
            eff,
            (lo, hi),
            True,
            "predicted mean step matched to the published rate; interval: the rate's"
            f" rounding (+-{rel_precision:.2%}) mapped through the model",
        ),
        *_not_identified_from_one_size(),
    ]
    achieved = est.model_flops_per_step / (law.mean_s * job.gpus * job.hardware.peak_flops.bf16)
    return CalibrationResult(
        job.name,
        {"description": desc, "value": value, "target_mean_step_s": target},
        params,
        law_dict(law),
        {
            "predicted_mfu_at_mean_step": achieved,
            # the mean model at the fitted efficiency (the noise-free step the fit implies)
            "deterministic_core_step_s": step_time(_with(job, _gemm_overlay(job, eff))).step_s,
        },
    )


def _not_identified_from_one_size() -> list[FittedParameter]:
    why = (
        "one job size: trades off exactly against hardware.efficiency.gemm; needs logs at"
        " >= 2 sizes (a part growing with the data-parallel group needs >= 3)"
    )
    return [
        FittedParameter("training.step_overhead_s", None, None, False, why),
        FittedParameter("hardware.efficiency.attention", None, None, False, why),
    ]


# --------------------------------------------------------------------------------------
# Step logs
# --------------------------------------------------------------------------------------
def _bootstrap_ci(
    data: np.ndarray, statistic: str, n_resamples: int, confidence: float, seed: int
) -> tuple[float, float, str]:
    """Percentile bootstrap interval of the median or of p90/p50, and a note on its ends.

    Resamples are drawn through their order statistics
    (:func:`.quantile_bootstrap.bootstrap_quantiles`): the same law as resampling the steps,
    with memory and time independent of the number of steps times ``n_resamples``. The note
    is ``""``, or says that an end was moved to the estimate, which the percentiles missed.
    """
    rng = np.random.default_rng(seed)
    if statistic == "median":
        reps = bootstrap_quantiles(data, [0.5], n_resamples, rng)[:, 0]
        estimate = float(np.median(data))
    else:
        q = bootstrap_quantiles(data, [0.5, 0.9], n_resamples, rng)
        reps = q[:, 1] / q[:, 0]
        estimate = float(_q90(data))
    lo, hi, moved = percentile_interval(reps, estimate, confidence)
    note = (
        f" (the resamples' percentiles missed the estimate {estimate:.6g}; the interval is"
        " widened to it: the bootstrap law is lumpy at these steps)"
        if moved
        else ""
    )
    return lo, hi, note


def _q90(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.quantile(x, 0.9, axis=axis) / np.median(x, axis=axis)


def _stalls(logs: list[StepLog], threshold: float) -> tuple[int, int, np.ndarray]:
    """(stall count, steps, excess seconds over the run median of each stall)."""
    excess, n = [], 0
    for lg in logs:
        med = float(np.median(lg.times_s))
        n += lg.n
        excess += list(lg.times_s[lg.times_s > threshold * med] - med)
    return len(excess), n, np.asarray(excess)


def calibrate_to_logs(
    job: Any,
    logs: list[StepLog],
    *,
    stall_threshold: float = 1.1,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    check_body: bool = True,
    shape: str = "auto",
    fit_jitter: bool = True,
    events: bool = False,
    event_resamples: int = 200,
    event_gof_refits: int = 49,
    evaluate: Callable[[Any], PredictedLaw] = predicted_law,
    progress: Callable[[int, int], None] | None = None,
) -> CalibrationResult:
    """Fit the stochastic model of ``job`` to measured step logs of that job.

    Parameters
    ----------
    job : JobConfig
        The job the logs come from (layout, precision, hardware).
    logs : list of StepLog
        Runs of that one job (pooled; mixed jobs are refused).
    stall_threshold : float
        A step above this multiple of its run's median is a stall (> 1).
    n_resamples, confidence, seed
        Percentile bootstrap settings.
    check_body : bool
        Test whether the body dispersion (kernel CV) is identifiable (two extra evaluations).
    shape : {"auto", "within-run", "marginal"}
        Which predicted law the per-run-normalised steps are compared with (jitter fit and
        goodness of fit; see :func:`_shape_law`). ``"auto"`` (default) takes the one closer
        to the steps (:func:`.shape_choice.choose_shape`, reported as
        ``goodness["shape_choice"]``): within-run (a real run holds one allocation) unless
        the marginal law (steps drawn afresh from the model) is closer to the steps beyond
        their noise (a paired bootstrap of the two KS distances at ``confidence``); fitted
        with the wrong one the jitter absorbs the allocations' spread and moves the
        efficiency.
    fit_jitter : bool
        Fit the per-step jitter to the per-run-normalised p90/p50 (in seconds,
        ``variability.temporal.step_jitter_s``, reported); the overlay gets its relative
        form ``step_jitter_rel`` (sd over the job's deterministic step at the fitted
        efficiency), which scales with the step when carried to another size.
    events : bool
        Also fit the step-event model by likelihood (:func:`.step_events.fit_step_events`:
        the slow step after an evaluation pause, stalls with a per-GPU rate and a size); the
        result's ``events`` then holds it, for :func:`check_against_logs` at other sizes.
        Its parameters are reported, not written to the overlay (no config keys hold them).
    event_resamples : int
        Bootstrap refits of the event model (its prediction intervals).
    event_gof_refits : int
        Parametric-bootstrap refits for the event model's goodness-of-fit p-value.
    evaluate : callable
        ``job -> PredictedLaw`` (the analytic engine by default; tests may pass a stub).
    progress : callable, optional
        ``progress(done, total)`` over the event model's refits (with ``events``).
    """
    if not (isinstance(stall_threshold, int | float) and stall_threshold > 1):
        raise CalibrationError(f"stall_threshold must be > 1, got {stall_threshold!r}")
    if not 0 < confidence < 1:
        raise CalibrationError(f"confidence must be in (0, 1), got {confidence!r}")
    check_resamples(n_resamples, confidence)
    _check_shape(shape)
    check_logs_match_job(job, logs)
    all_logs = logs
    logs = without_pauses(logs)  # steps after an evaluation pause are not draws of the law
    pooled = pool_logs(logs)
    norm = per_run_normalised(logs)
    if len(np.unique(pooled.times_s)) < 3:
        raise StepLogError(f"{pooled.source}: step times are (nearly) constant; nothing to fit")
    k, n, excess = _stalls(logs, stall_threshold)
    params: list[FittedParameter] = []
    overrides: dict = {}
    lo_r, hi_r = garwood(k, confidence)
    if k == 0:
        why = (
            f"no step above {stall_threshold}x its run median in {n} steps; rate <="
            f" {hi_r / n:.3g} ({confidence:.0%} Garwood upper bound)"
        )
        own = float(job.variability.hiccups.probability)
        if own > hi_r / n:
            # the job's own stall rate (e.g. the default, measured on other logs, with a size
            # in seconds) is refuted by these steps: the estimate, 0, is fitted and written
            params.append(
                FittedParameter(
                    "variability.hiccups.probability",
                    0.0,
                    (0.0, hi_r / n),
                    True,
                    f"{why}, below the job's {own:.3g}: 0 (the estimate) written",
                )
            )
            overrides = {"variability": {"hiccups": {"probability": 0.0}}}
        else:
            bound = (0.0, hi_r / n)
            params.append(
                FittedParameter("variability.hiccups.probability", None, bound, False, why)
            )
        params.append(
            FittedParameter("variability.hiccups.size_s", None, None, False, "no stall observed")
        )
    else:
        size = float(np.median(excess))
        if k >= 3:
            s_lo, s_hi, s_note = _bootstrap_ci(excess, "median", n_resamples, confidence, seed)
            s_how = "median excess over the run median; percentile bootstrap" + s_note
        else:
            # one or two stalls: an observed range would be an interval of width ~0; the
            # exact chi-square interval of an exponential mean states what k stalls allow
            a = 1.0 - confidence
            total = float(excess.sum())
            s_lo = 2 * total / float(stats.chi2.ppf(1 - a / 2, 2 * k))
            s_hi = 2 * total / float(stats.chi2.ppf(a / 2, 2 * k))
            s_how = (
                f"median excess over the run median ({k} stall(s)); interval: exact chi-square"
                f" {confidence:.0%} interval of an exponential mean (assumes exponential sizes)"
            )
        params += [
            FittedParameter(
                "variability.hiccups.probability",
                k / n,
                (lo_r / n, hi_r / n),
                True,
                f"{k} of {n} steps above {stall_threshold}x their run median; exact Poisson"
                f" (Garwood) {confidence:.0%} interval",
            ),
            FittedParameter("variability.hiccups.size_s", size, (s_lo, s_hi), True, s_how),
        ]
        overrides = {"variability": {"hiccups": {"probability": k / n, "size_s": size}}}
    base = _with(job, overrides) if overrides else job
    target = float(np.median(pooled.times_s))
    m_lo, m_hi, m_note = _bootstrap_ci(pooled.times_s, "median", n_resamples, confidence, seed)
    r90 = float(_q90(norm))
    r90_ci = _bootstrap_ci(norm, "q90_over_median", n_resamples, confidence, seed)[:2]
    shape_choice = None
    if fit_jitter:
        # the within-run spread fixes the per-step jitter; the median then fixes the GEMMs
        eff, _ = solve_gemm_efficiency(base, target, "p50", evaluate=evaluate)
        first = _with(base, _gemm_overlay(base, eff))
        shape, jitter_param, shape_choice = _jitter_and_shape(
            first, (r90, *r90_ci), shape, norm, evaluate, confidence, seed
        )
        params.append(jitter_param)
        if jitter_param.identified:
            base = _jitter(base, jitter_param.value)
        elif jitter_param.method.startswith(_NO_JITTER):
            # the steps are no wider than the model without jitter: a default jitter of the
            # job (variability.temporal) would widen them, so the fit carries none
            base = _jitter(base, 0.0)
    # the search's tolerance well inside the median's interval (1e6 steps: an interval of
    # 2e-4 of the step, the default tolerance), so that its ends are not search noise
    rtol = min(2e-4, max(1e-6, 0.05 * (m_hi - m_lo) / target))
    eff, law = solve_gemm_efficiency(base, target, "p50", rtol=rtol, evaluate=evaluate)
    tuned = _with(base, _gemm_overlay(base, eff))
    if shape == "auto":  # no jitter fitted: the two laws of the fitted job compete
        shape, shape_choice = _auto_shape(tuned, law, norm, evaluate, confidence, seed)
    # the percentile interval maps through the monotone median(eff): slower median -> lower eff
    e_lo, _ = solve_gemm_efficiency(tuned, m_hi, "p50", rtol=rtol, evaluate=evaluate)
    e_hi, _ = solve_gemm_efficiency(tuned, m_lo, "p50", rtol=rtol, evaluate=evaluate)
    if not e_lo <= eff <= e_hi:  # the three searches each stop within rtol of their target
        e_lo, e_hi = min(e_lo, eff), max(e_hi, eff)
        m_note += f" (widened to the estimate: the searches stop within {rtol:.1g} of the step)"
    params.insert(
        0,
        FittedParameter(
            f"hardware.efficiency.{gemm_key(job)}",
            eff,
            (e_lo, e_hi),
            True,
            f"predicted median step matched to the measured {target:.6g} s; interval: the"
            f" median's {confidence:.0%} percentile bootstrap ({m_lo:.6g}, {m_hi:.6g} s){m_note}"
            " mapped through the model, given the stalls and jitter fitted here (their"
            " uncertainty is not carried into it; the jitter has mean 0, so it barely moves"
            " the median)",
        ),
    )
    if fit_jitter:
        params = _jitter_relative(params, tuned)
    params = _stall_relative(params, tuned)
    if check_body:
        params.append(_body_identifiability(tuned, law, r90_ci, evaluate))
    params += _not_identified_from_one_size()
    goodness = _goodness(_shape_law(tuned, law, shape, evaluate), norm, pooled.n, seed, law)
    goodness["shape"] = shape
    if shape_choice is not None:
        goodness["shape_choice"] = shape_choice
    goodness.update(_after_pause(all_logs))
    goodness["measured_p90_over_p50_ci"] = r90_ci
    goodness["measured_p90_over_p50"] = r90
    event_fit = None
    if events:
        from .step_events import fit_step_events

        # the engine's own within-run spread here: the fitted body adds only what is beyond it
        own = _with(tuned, {"variability": {"hiccups": {"probability": 0.0}}})
        own = _jitter(own, 0.0)
        own_law = _shape_law(own, evaluate(own), shape, evaluate)
        event_fit = fit_step_events(
            all_logs,
            job.gpus,
            confidence=confidence,
            n_gof=event_gof_refits,
            n_boot=event_resamples,
            seed=seed,
            engine_sd_rel=min(own_law.std_s / own_law.p50_s, 0.5),
            progress=progress,
        )
    return CalibrationResult(
        job.name,
        {
            "description": f"{len(logs)} run(s), {pooled.n} steps, median {target:.6g} s",
            "median_s": target,
            "median_ci_s": (m_lo, m_hi),
            "steps": pooled.n,
            "steps_after_eval_pause_left_out": sum(lg.n for lg in all_logs) - pooled.n,
            "runs": len(logs),
            "sources": [lg.source for lg in logs],
        },
        params,
        law_dict(law),
        goodness,
        events=event_fit,
    )


def _fit_jitter(
    job: Any, r90: tuple[float, float, float], shape: str, evaluate: Callable
) -> FittedParameter:
    """``step_jitter_s`` at which the predicted (shape-law) p90/p50 equals the measured one.

    ``r90`` is (estimate, low, high) of the measured per-run-normalised p90/p50; the interval
    maps through the monotone p90/p50(jitter). Not identified when the model without jitter
    is already as wide as the measurement.
    """
    key = "variability.temporal.step_jitter_s"

    def ratio(j: float) -> float:
        law0 = evaluate(_jitter(job, j))
        law = _shape_law(_jitter(job, j), law0, shape, evaluate)
        return law.p90_s / law.p50_s - 1.0

    floor = ratio(0.0)
    if r90[0] - 1.0 <= floor:
        return FittedParameter(
            key,
            None,
            None,
            False,
            f"{_NO_JITTER} ({1 + floor:.4f}): measured p90/p50 {r90[0]:.4f}",
        )
    med = evaluate(job).p50_s
    # p90/p50 - 1 is close to linear in the jitter: ~1.28 sd / median above the floor
    cache: dict[float, float] = {0.0: floor}

    def solve(level: float) -> float | None:
        """The jitter giving ``level``; None when the search does not reach it."""
        if level - 1.0 <= floor:
            return 0.0
        x0, y0 = 0.0, floor
        x1 = max(1e-6, (level - 1.0 - floor) * med / 1.2816)
        y1 = cache.setdefault(x1, ratio(x1))
        for _ in range(8):
            if abs(y1 - (level - 1.0)) < 2e-5 or y1 == y0:
                break
            x2 = max(0.0, x1 + (level - 1.0 - y1) * (x1 - x0) / (y1 - y0))
            x0, y0, x1 = x1, y1, x2
            y1 = cache.setdefault(x1, ratio(x1))
        return x1 if abs(y1 - (level - 1.0)) < 1e-4 + 0.02 * (level - 1.0) else None

    value = solve(r90[0])
    lo, hi = solve(r90[1]), solve(r90[2])
    if value is None or lo is None or hi is None:
        return FittedParameter(
            key, None, None, False, "the predicted p90/p50 does not respond to the jitter"
        )
    return FittedParameter(
        key,
        value,
        (lo, hi),
        True,
        f"predicted {shape} p90/p50 matched to the measured {r90[0]:.4f}; interval: its"
        f" percentile bootstrap ({r90[1]:.4f}, {r90[2]:.4f}) mapped through the model",
    )


#: How :func:`_fit_jitter` starts its reason when the steps need no jitter at all.
_NO_JITTER = "the steps are no wider than the model without jitter"


def _jitter_relative(params: list[FittedParameter], tuned: Any) -> list[FittedParameter]:
    """The fitted jitter in seconds reported only, its relative form written to the overlay.

    Seconds do not carry across sizes: measured within-run step sd stays near 0.5% of the
    step while the step changes 20x (see ``TemporalVariability``). The relative form is the
    sd over ``tuned``'s deterministic step (the builder's reference), so at this size the
    overlay reproduces exactly the law fitted here.
    """
    from ..workload.step_estimate import step_time

    key = "variability.temporal.step_jitter_s"
    out = []
    for p in params:
        if p.key == key and not p.identified and p.method.startswith(_NO_JITTER):
            out.append(p)
            out.append(
                FittedParameter(
                    "variability.temporal.step_jitter_rel",
                    0.0,
                    None,
                    True,
                    f"{p.method}; 0 written so that a default jitter of the job does not"
                    " widen the steps beyond what was measured",
                )
            )
            continue
        if p.key != key or not p.identified:
            out.append(p)
            continue
        core = step_time(tuned).step_s
        out.append(FittedParameter(key, p.value, p.interval, True, p.method, written=False))
        out.append(
            FittedParameter(
                "variability.temporal.step_jitter_rel",
                p.value / core,
                (p.interval[0] / core, p.interval[1] / core),
                True,
                f"{key} over the deterministic step {core:.6g} s at the fitted efficiency"
                " (written instead of seconds: it scales with the step across sizes)",
            )
        )
    return out


def _stall_relative(params: list[FittedParameter], tuned: Any) -> list[FittedParameter]:
    """The fitted stall size as a fraction of the deterministic step, beside its seconds.

    A stall measured in seconds at one size does not carry to another: the same logs put a
    stall at 0.14-0.16 of the step on Llama 3.1 8B (0.06 s at 0.35-0.41 s steps) and
    0.17-0.42 on 405B (3.7-8 s at 19 s steps), seconds 60-140x apart
    (``validation/results/calibration_transfer.md``). The relative form
    (``variability.hiccups.size_rel``, the excess over ``tuned``'s deterministic step)
    is written instead of ``size_s`` (reported). The rate stays per step: Llama 3.1 8B on Tyche
    had 3 stalls in 1,053 steps at 8 GPUs and none in 455 / 333 steps at 72 / 512, where a
    rate per GPU would expect about 12 and 61.
    """
    from ..workload.step_estimate import step_time

    key = "variability.hiccups.size_s"
    out = []
    for p in params:
        if p.key != key or not p.identified or p.value is None:
            out.append(p)
            continue
        core = step_time(tuned).step_s
        rel = FittedParameter(
            "variability.hiccups.size_rel",
            p.value / core,
            (p.interval[0] / core, p.interval[1] / core) if p.interval else None,
            True,
            f"{key} over the deterministic step {core:.6g} s at the fitted efficiency"
            " (written instead of seconds: it scales with the step across sizes)",
        )
        out += [dataclasses.replace(p, written=False), rel]
    return out


def _body_identifiability(
    job: Any, law: PredictedLaw, r90_ci: tuple[float, float], evaluate: Callable
) -> FittedParameter:
    cv = float(job.variability.temporal.kernel_cv)
    alt = 0.05 if cv < 0.05 else cv / 2
    other = evaluate(_with(job, {"variability": {"temporal": {"kernel_cv": alt}}}))
    move = abs(other.p90_s / other.p50_s - law.p90_s / law.p50_s)
    width = r90_ci[1] - r90_ci[0]
    return FittedParameter(
        "variability.temporal.kernel_cv",
        None,
        None,
        False,
        f"changing it {cv:g} -> {alt:g} moves the predicted p90/p50 by {move:.2g}, less than"
        f" the measured p90/p50 interval width {width:.2g}"
        if move < width
        else f"moves the predicted p90/p50 by {move:.2g} (> interval width {width:.2g}) but is"
        " not fitted by this version; left at its default",
    )


def _after_pause(logs: list[StepLog]) -> dict:
    """The first steps after an evaluation pause, relative to their run's median.

    Reported, not modelled in the step law (``[training.evaluation]`` holds their cost in run
    time): they are left out of the stall count and the quantile ratios
    (:func:`~.logs.without_pauses`), so a slow first step after evaluation is not fitted as
    a stall.
    """
    ratios = np.concatenate(
        [lg.times_s[lg.after_pause] / np.median(lg.times_s) for lg in logs if lg.n]
    )
    return {
        "steps_after_eval_pause": int(ratios.size),
        "after_pause_median_ratio": float(np.median(ratios)) if ratios.size else None,
    }


def _check_shape(shape: str) -> None:
    if shape not in SHAPE_OPTIONS:
        raise CalibrationError(f"shape must be one of {SHAPE_OPTIONS}, got {shape!r}")


def _no_spatial_spread(job: Any) -> bool:
    """Whether the within-run and marginal laws of ``job`` are the same law."""
    sp = job.variability.spatial
    return sp.cv == 0 and sp.slow_fraction == 0


def _auto_shape(
    job: Any, law: PredictedLaw, norm: np.ndarray, evaluate: Callable, confidence: float, seed: int
) -> tuple:
    """(shape, choice report) for ``job`` as it is (no jitter fitted per shape)."""
    if _no_spatial_spread(job):
        return "within-run", {"rule": "no persistent spatial spread: the two shapes coincide"}
    laws = {s: _shape_law(job, law, s, evaluate) for s in SHAPES}
    return choose_shape(laws, norm, confidence, seed)


def _jitter_and_shape(
    job: Any,
    r90: tuple[float, float, float],
    shape: str,
    norm: np.ndarray,
    evaluate: Callable,
    confidence: float,
    seed: int,
) -> tuple[str, FittedParameter, dict | None]:
    """The jitter fitted under ``shape``; under ``"auto"``, under each, and the closer shape.

    Returns (shape used, jitter parameter, choice report or None).
    """
    if shape != "auto":
        return shape, _fit_jitter(job, r90, shape, evaluate), None
    if _no_spatial_spread(job):
        note = {"rule": "no persistent spatial spread: the two shapes coincide"}
        return "within-run", _fit_jitter(job, r90, "within-run", evaluate), note
    fits = {s: _fit_jitter(job, r90, s, evaluate) for s in SHAPES}
    laws = {}
    for s, p in fits.items():
        jittered = _jitter(job, p.value if p.identified else 0.0)
        # with a spatial spread the within-run law is evaluated on its own (the marginal unused)
        laws[s] = evaluate(jittered) if s == "marginal" else _shape_law(jittered, None, s, evaluate)
    chosen, report = choose_shape(laws, norm, confidence, seed)
    p = fits[chosen]
    lo, hi = report["ks_difference_interval"]
    why = (
        f"; shape {chosen} chosen from the steps (KS {report['ks_within_run']:.4f} within-run,"
        f" {report['ks_marginal']:.4f} marginal; difference interval [{lo:.4f}, {hi:.4f}])"
    )
    return chosen, dataclasses.replace(p, method=p.method + why), report


def _shape_law(job: Any, law: PredictedLaw, shape: str, evaluate: Callable) -> PredictedLaw:
    """The law whose shape (quantile ratios) is compared with per-run-normalised steps.

    ``"marginal"``: the prediction itself, which also varies over allocations (every step
    redraws the persistent GPU speeds). ``"within-run"``: the prediction with the persistent
    speed spread removed (``variability.spatial`` cv and slow fraction 0): within one run the
    allocation is fixed, so only per-step sources move the step. This is an approximation
    (it drops which replica is slowest, not just the redraw); measured logs are normalised
    by each run's own median for the same reason.
    """
    if shape not in SHAPES:
        raise CalibrationError(f"shape must be one of {SHAPES}, got {shape!r}")
    if shape == "marginal" or _no_spatial_spread(job):
        return law
    return evaluate(_with(job, {"variability": {"spatial": {"cv": 0.0, "slow_fraction": 0.0}}}))


def _level(x: np.ndarray, q: float) -> float:
    """``np.quantile(x, q)``, inf where it interpolates between infinite values."""
    with np.errstate(invalid="ignore"):
        v = float(np.quantile(x, q))
    return np.inf if np.isnan(v) else v


#: Simulated logs behind the predicted quantile ratios' sampling intervals.
_GOODNESS_REPS = 400
#: Draws behind the predicted mass beyond the engine's grid.
_MASS_DRAWS = 1_000_000


def _law_ppf(law: PredictedLaw) -> Callable[[np.ndarray], np.ndarray]:
    """The quantile function of ``law``, +-inf where the level lies beyond the grid.

    As :meth:`PredictedLaw.sample`: levels are kept in ``[1e-12, 1 - 1e-12]`` and a nan
    quantile (a level inside a tail atom of the grid) is beyond the grid.
    """

    def ppf(u: np.ndarray) -> np.ndarray:
        u = np.clip(u, 1e-12, 1 - 1e-12)
        x = np.array(law.result.quantile(u.ravel()), dtype=float).reshape(u.shape)
        bad = np.isnan(x)
        x[bad] = np.where(u[bad] > 0.5, np.inf, -np.inf)
        return x

    return ppf


def _goodness(
    law: PredictedLaw, norm: np.ndarray, n: int, seed: int, full: PredictedLaw | None = None
) -> dict:
    """Predicted vs measured shape (per-run-normalised), with sampling intervals.

    Quantile ratios come from ``law`` (the shape law); the count of steps above 1.5x the
    median from ``full`` (the whole prediction; default ``law``): rare stalls are additive
    seconds, so their size relative to the median must use the real median.

    Draws beyond the engine's grid are +inf (:meth:`PredictedLaw.sample`): a ratio that
    lands on them is unbounded above (inf, not nan), and ``predicted_mass_beyond_grid``
    says how much of the law that is.
    """
    full = law if full is None else full
    rng = np.random.default_rng(seed + 1)
    # 400 simulated logs of n steps, drawn through their order statistics: only their p50,
    # p90 and p99 are needed, so memory and time do not grow with 400 x n
    q = sample_quantiles(_law_ppf(law), n, [0.5, 0.9, 0.99], _GOODNESS_REPS, rng)
    with np.errstate(invalid="ignore"):  # inf / inf: the median itself beyond the grid
        r90 = np.nan_to_num(q[:, 1] / q[:, 0], nan=np.inf, posinf=np.inf)
        r99 = np.nan_to_num(q[:, 2] / q[:, 0], nan=np.inf, posinf=np.inf)
    # one simulated log for the two-sample KS; the mass beyond the grid (a fraction, which
    # more draws only sharpen) from 400 logs' worth of draws, at most 1e6 beyond the one log
    draws = law.sample(max(n, min(_GOODNESS_REPS * n, _MASS_DRAWS)), rng)
    one = draws[:n]
    med = np.median(one)
    p_over = float(full.result.sf(1.5 * full.p50_s))
    count_mean = p_over * n
    return {
        "predicted_p90_over_p50": law.p90_s / law.p50_s,
        "predicted_p99_over_p50": law.p99_s / law.p50_s,
        "measured_p99_over_p50": float(np.quantile(norm, 0.99)),
        "predicted_p99_over_p50_sampling_95": (_level(r99, 0.025), _level(r99, 0.975)),
        "predicted_p90_over_p50_sampling_95": (_level(r90, 0.025), _level(r90, 0.975)),
        "predicted_mass_beyond_grid": float(np.mean(~np.isfinite(draws))),
        "measured_steps_above_1p5x_median": int(np.sum(norm > 1.5)),
        "predicted_steps_above_1p5x_median": count_mean,
        "predicted_count_poisson_95": poisson_interval(count_mean),
        "ks_statistic_normalised": float(stats.ks_2samp(norm, one / med).statistic),
    }


def check_against_logs(
    job: Any,
    logs: list[StepLog],
    *,
    seed: int = 0,
    shape: str = "within-run",
    events: Any = None,
    body_mode: str = "fitted",
    stall_dispersion: float | None = None,
    evaluate: Callable[[Any], PredictedLaw] = predicted_law,
) -> dict:
    """Out-of-sample check: the prediction of ``job`` against measured logs of it.

    Returns the predicted and measured medians (and relative error), the per-run-normalised
    p90/p50 and p99/p50 against the prediction's (with the prediction's 95% sampling
    interval for the measured number of steps), and the count of steps above 1.5x the
    median against the predicted count's Poisson 95% interval.

    With ``events`` (an :class:`~.step_events.EventFit` from another size, e.g.
    ``calibrate_to_logs(..., events=True).events``), ``out["events"]`` holds the same
    comparison for the engine's within-run law *without* hiccups plus the fitted events,
    scaled to this size (:func:`~.step_events.predict_events`, which documents
    ``body_mode`` and ``stall_dispersion``; the engine's step jitter is left out of its
    body unless ``body_mode="none"``: the fitted body replaces it).

    ``shape`` is ``"within-run"`` by default (measured runs each hold one allocation);
    ``"auto"`` takes the law closer to the steps, as :func:`calibrate_to_logs` does, and
    reports the distances as ``out["shape_choice"]``.
    """
    _check_shape(shape)
    check_logs_match_job(job, logs)
    steady = without_pauses(logs)  # steps after an evaluation pause are not draws of the law
    pooled = pool_logs(steady)
    law = evaluate(job)
    norm = per_run_normalised(steady)
    choice = None
    if shape == "auto":
        shape, choice = _auto_shape(job, law, norm, evaluate, 0.95, seed)
    med = float(np.median(pooled.times_s))
    out = {
        "job": job.name,
        "gpus": job.gpus,
        "steps": pooled.n,
        "measured_median_s": med,
        "predicted_median_s": law.p50_s,
        "median_rel_error": law.p50_s / med - 1.0,
        "predicted_mean_s": law.mean_s,
        "measured_p90_over_p50": float(_q90(norm)),
        "marginal_p90_over_p50": law.p90_s / law.p50_s,
        "marginal_p99_over_p50": law.p99_s / law.p50_s,
        "shape": shape,
    }
    if choice is not None:
        out["shape_choice"] = choice
    out.update(_goodness(_shape_law(job, law, shape, evaluate), norm, pooled.n, seed, law))
    lo, hi = out["predicted_p99_over_p50_sampling_95"]
    c_lo, c_hi = out["predicted_count_poisson_95"]
    out["p90_abs_diff"] = abs(out["predicted_p90_over_p50"] - out["measured_p90_over_p50"])
    out["p99_inside"] = bool(lo <= out["measured_p99_over_p50"] <= hi)
    out["count_inside"] = bool(c_lo <= out["measured_steps_above_1p5x_median"] <= c_hi)
    if events is not None:
        from .step_events import predict_events

        quiet = _with(job, {"variability": {"hiccups": {"probability": 0.0}}})
        if body_mode != "none" and getattr(events, "body", None) is not None:
            quiet = _jitter(quiet, 0.0)
        body = _shape_law(quiet, evaluate(quiet), shape, evaluate)
        out["events"] = predict_events(
            events,
            body,
            logs,
            job.gpus,
            seed=seed,
            body_mode=body_mode,
            stall_dispersion=stall_dispersion,
            # seconds-valued events are relative to the predicted median, not to the
            # within-run law's (which lacks the run's slowest-replica factor)
            median_s=law.p50_s,
        )
    return out


# --------------------------------------------------------------------------------------
# Several job sizes: the fixed per-step cost becomes identifiable
# --------------------------------------------------------------------------------------
def calibrate_sizes(
    cases: list[tuple[Any, list[StepLog]]],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    evaluate: Callable[[Any], PredictedLaw] = predicted_law,
) -> CalibrationResult:
    """Fit the GEMM efficiency *and* the fixed per-step cost to logs at >= 2 job sizes.

    The two trade off exactly at one size; across sizes the GEMM part scales with the
    per-GPU work and the fixed cost does not, so both are identified. Weighted least squares
    (``scipy.optimize.least_squares``) on the predicted medians, weights from each size's
    bootstrap standard error of the median; intervals by the delta method (Gauss-Newton
    covariance at the solution), an estimate that assumes the model is right. All jobs must
    share a GEMM precision. Stalls and jitter are not fitted here (use
    :func:`calibrate_to_logs` at one size first and merge its overlay into the jobs).
    """
    from scipy import optimize

    if len(cases) < 2:
        raise CalibrationError("calibrate_sizes needs logs of at least 2 job sizes")
    check_resamples(n_resamples, 0.6827)
    keys = {gemm_key(job) for job, _ in cases}
    if len(keys) != 1:
        raise CalibrationError(f"all jobs must share one GEMM precision, got {sorted(keys)}")
    if len({job.gpus for job, _ in cases}) < 2:
        raise CalibrationError("the jobs must differ in size (GPU count)")
    key = keys.pop()
    meds, ses = [], []
    for job, logs in cases:
        check_logs_match_job(job, logs)
        pooled = pool_logs(without_pauses(logs))
        meds.append(float(np.median(pooled.times_s)))
        lo, hi, _ = _bootstrap_ci(pooled.times_s, "median", n_resamples, 0.6827, seed)
        ses.append(max((hi - lo) / 2, 1e-6 * meds[-1]))
    meds_a, ses_a = np.asarray(meds), np.asarray(ses)

    def predict(v: np.ndarray) -> np.ndarray:
        over = {
            "hardware": {"efficiency": {key: float(v[0])}},
            "training": {"step_overhead_s": float(v[1])},
        }
        return np.array([evaluate(_with(job, over)).p50_s for job, _ in cases])

    x0 = np.array(
        [cases[0][0].hardware.efficiency.for_precision(cases[0][0].training.precision), 0.0]
    )
    res = optimize.least_squares(
        lambda v: (predict(v) - meds_a) / ses_a,
        x0,
        bounds=([1e-3, 0.0], [1.0, np.inf]),
        diff_step=[1e-3, 1e-3],
        max_nfev=60,
    )
    jac = res.jac
    z = stats.norm.ppf(0.5 + confidence / 2)
    try:
        cov = np.linalg.inv(jac.T @ jac)
        half = z * np.sqrt(np.maximum(np.diag(cov), 0.0))
        ok = bool(np.all(np.isfinite(half)))
    except np.linalg.LinAlgError:
        half, ok = np.full(2, np.nan), False
    how = (
        f"weighted least squares on the predicted medians at {len(cases)} sizes; interval:"
        f" delta method ({confidence:.0%})"
    )
    params = [
        FittedParameter(
            f"hardware.efficiency.{key}",
            float(res.x[0]),
            (float(res.x[0] - half[0]), float(res.x[0] + half[0])) if ok else None,
            ok,
            how if ok else "singular fit: the sizes do not separate the two parameters",
        ),
        FittedParameter(
            "training.step_overhead_s",
            float(res.x[1]),
            (max(0.0, float(res.x[1] - half[1])), float(res.x[1] + half[1])) if ok else None,
            ok,
            how if ok else "singular fit: the sizes do not separate the two parameters",
        ),
    ]
    if res.x[1] <= 1e-6:  # at the bound: the delta-method interval means nothing there
        params[1] = FittedParameter(
            "training.step_overhead_s",
            0.0,
            None,
            False,
            "at its lower bound 0: the medians ask for a negative fixed cost (the model's"
            " step shrinks faster with size than the measured one)",
        )
    pred = predict(res.x)
    return CalibrationResult(
        " + ".join(job.name for job, _ in cases),
        {
            "description": f"medians at {len(cases)} sizes",
            "medians_s": meds,
            "median_se_s": ses,
        },
        params,
        {"p50_s": pred.tolist()},
        {
            "median_rel_errors": (pred / meds_a - 1).tolist(),
            "chi2": float(np.sum(res.fun**2)),
            "dof": len(cases) - 2,
        },
    )
