"""Calibration of the stochastic step-time model to measured logs and published throughput.

* :mod:`.logs`: step-log readers (MLPerf ``:::MLLOG``, CSV, JSON, straggler-trace results).
* :mod:`.log_job`: facts a log states (batch, microbatches, sequence length, GPUs) checked
  against the job given; :mod:`.overlay_job`: an overlay's GEMM key against the job's.
* :mod:`.result`: what a calibration returns (parameters with intervals, the law, the overlay).
* :mod:`.fit`: the fit (GEMM efficiency on the *predicted* median/mean, stalls, goodness of
  fit, identifiability).
* :mod:`.shape_choice`: whether normalised steps are compared with the within-run law (one
  allocation) or the marginal one (redrawn every step), chosen from the steps.
* :mod:`.step_events`: a likelihood fit of step events (the slow step after an evaluation
  pause, stalls with a per-GPU rate and a size) and their prediction at other sizes.
* :mod:`.step_body`: the step body by a state-space fit (jitter, random-walk drift, trend,
  warm-up transient), each component tested for identifiability.
* :mod:`.stall_dispersion`: run-level clustering of stalls (gamma-Poisson dispersion).
* :mod:`.transfer`: whether an overlay fitted at one size predicts the others (the transfer
  error table, beside ratio scaling).
* :mod:`.intervals`: exact Poisson and negative-binomial count intervals.
* :mod:`.collective_noise`: the scale model of collective-latency noise (slowest of N nodes).
* :mod:`.collective_events`: rare per-node collective events (rate per node, size by fat-tree
  tiers), fitted by likelihood, with predictive intervals of quantile ratios.
* :mod:`.collective_population`: collective noise as a population of runs (random effects
  across sessions), with predictive intervals that include the between-run spread.
"""

from __future__ import annotations

from .fit import (
    CalibrationError,
    CalibrationResult,
    FittedParameter,
    PredictedLaw,
    calibrate_sizes,
    calibrate_to_logs,
    calibrate_to_throughput,
    check_against_logs,
    overlay_toml,
    predicted_law,
    solve_gemm_efficiency,
)
from .logs import StepLog, StepLogError, pool_logs, read_step_log
from .step_events import EventFit, fit_step_events, predict_events, run_dispersion, slow_steps

__all__ = [
    "CalibrationError",
    "CalibrationResult",
    "EventFit",
    "FittedParameter",
    "PredictedLaw",
    "StepLog",
    "StepLogError",
    "calibrate_sizes",
    "calibrate_to_logs",
    "calibrate_to_throughput",
    "check_against_logs",
    "fit_step_events",
    "overlay_toml",
    "pool_logs",
    "predict_events",
    "predicted_law",
    "read_step_log",
    "run_dispersion",
    "slow_steps",
    "solve_gemm_efficiency",
]
