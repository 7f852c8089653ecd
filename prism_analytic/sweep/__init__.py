"""Design-space sweeps and a variability-aware layout search.

* :mod:`~prism_analytic.sweep.spec`: which configurations (presets x GPU counts x hardware x
  a grid of dotted-key overrides), every key and value checked before any work;
* :mod:`~prism_analytic.sweep.evaluate`: one configuration -> one row (pure function; invalid
  layouts are rows, not exceptions);
* :mod:`~prism_analytic.sweep.executor`: this process, a local process pool, a dask
  ``LocalCluster`` or an existing dask scheduler, all as ``concurrent.futures`` executors;
* :mod:`~prism_analytic.sweep.table`: resumable CSV/Parquet tables;
* :mod:`~prism_analytic.sweep.runner`: :func:`run_sweep`;
* :mod:`~prism_analytic.sweep.memory`: per-GPU memory estimate (model state + activations);
* :mod:`~prism_analytic.sweep.layouts` and :mod:`~prism_analytic.sweep.optimize`: the valid,
  memory-feasible layouts of a model on N GPUs and the best of them by mean, by a quantile or
  by a run-time guarantee.
"""

from __future__ import annotations

from .evaluate import EvalSettings, evaluate_point
from .executor import check_scheduler, open_executor
from .memory import MemoryEstimate, memory_estimate
from .runner import SweepOutcome, run_sweep
from .spec import SweepError, SweepPoint, SweepSpec, load_sweep_file, parse_set

__all__ = [
    "SweepError",
    "SweepPoint",
    "SweepSpec",
    "parse_set",
    "load_sweep_file",
    "EvalSettings",
    "evaluate_point",
    "open_executor",
    "check_scheduler",
    "run_sweep",
    "SweepOutcome",
    "MemoryEstimate",
    "memory_estimate",
]
