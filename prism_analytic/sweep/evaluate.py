"""Evaluate one sweep configuration: a pure function from a point to one table row.

:func:`evaluate_point` never raises for a bad configuration: an invalid layout (a
:class:`~prism_analytic.workload.config.ConfigError`) becomes a row with ``status =
"invalid"`` and the message; a layout over the memory estimate, when memory is checked, a row
with ``status = "infeasible"``; any other failure a row with ``status = "error"``. It depends
on nothing but its arguments (workers on other machines need only the installed package), and
for the analytic and bounds engines returns the same row wherever it runs; Monte Carlo rows are
identical for the same seed.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, dataclass
from typing import Any

from .spec import SweepPoint

__all__ = [
    "EvalSettings",
    "evaluate_point",
    "STAT_COLUMNS",
    "LAYOUT_COLUMNS",
    "row_columns",
    "int_columns",
    "screen_point",
]

#: Layout columns (resolved from the built job; empty for invalid layouts).
LAYOUT_COLUMNS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "vpp",
    "schedule",
    "sharding",
    "microbatches",
    "micro_batch_size",
    "global_batch",
    "recompute",
)
#: Result columns (seconds; brackets: analytic = numerical bracket of the engine's answer,
#: bounds = guaranteed lower/upper bounds, montecarlo = 95% order-statistic interval).
STAT_COLUMNS = (
    "mean_s",
    "std_s",
    "p50_s",
    "p90_s",
    "p95_s",
    "p99_s",
    "p999_s",
    "p95_lo_s",
    "p95_hi_s",
    "p99_lo_s",
    "p99_hi_s",
    "mean_model_step_s",
)
_MEMORY_COLUMNS = ("memory_gb", "memory_capacity_gb", "fits_memory")
_RUNTIME_COLUMNS = ("runtime_s", "runtime_mean_s")
_LEVELS = {"p50_s": 0.5, "p90_s": 0.9, "p95_s": 0.95, "p99_s": 0.99, "p999_s": 0.999}


@dataclass(frozen=True)
class EvalSettings:
    """How every configuration of a sweep is evaluated.

    Parameters
    ----------
    method : {"analytic", "bounds", "montecarlo"}
    samples, seed : int
        Monte Carlo sample count and seed.
    steps : int, optional
        Also report the run time of this many steps (``runtime_s``: its quantile at
        ``probability``; ``runtime_mean_s``) by ``prism runtime``'s model
        (:func:`~prism_analytic.analyses.runtime.run_time`, allocation held for the run, no
        interruptions). An estimate: it carries no bracket.
    probability : float
        Level of the run-time quantile.
    skip_infeasible : bool
        Do not evaluate layouts over the memory estimate (row status ``"infeasible"``).
    memory_gb : float, optional
        HBM per GPU; default: the hardware preset's datasheet figure.
    reserve_gb : float
        Memory set aside per GPU in the feasibility estimate.
    keep_batch : bool
        Keep the preset's global batch (in sequences) at every layout: microbatches =
        global batch / (dp * micro_batch_size), unless the configuration sets microbatches;
        a layout whose dp * micro_batch_size does not divide it is an invalid row.
    global_batch : int, optional
        With ``keep_batch``: this global batch (sequences) instead of the preset's.
    """

    method: str = "analytic"
    samples: int = 20_000
    seed: int = 0
    steps: int | None = None
    probability: float = 0.99
    skip_infeasible: bool = False
    memory_gb: float | None = None
    reserve_gb: float = 0.0
    keep_batch: bool = False
    global_batch: int | None = None

    def __post_init__(self) -> None:
        from ..engines.predict import METHODS

        if self.method not in METHODS:
            raise ValueError(f"method: must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.steps is not None and (isinstance(self.steps, bool) or self.steps < 1):
            raise ValueError(f"steps: must be a positive integer, got {self.steps!r}")
        if not 0 < self.probability < 1:
            raise ValueError(f"probability: must be in (0, 1), got {self.probability!r}")
        if self.global_batch is not None and (
            isinstance(self.global_batch, bool) or self.global_batch < 1
        ):
            raise ValueError(f"global_batch: must be a positive integer, got {self.global_batch!r}")

    def identity(self) -> dict[str, Any]:
        """What changes a row's numbers (part of its config id); Monte Carlo keys only for MC."""
        out = asdict(self)
        if self.method != "montecarlo":
            out.pop("samples")
            out.pop("seed")
        return out


def int_columns(keys: list[str]) -> tuple[str, ...]:
    """Columns holding integers: counts, the layout and integer override keys."""
    from .spec import check_key

    fixed = ("index", "gpus", "tp", "pp", "dp", "cp", "ep", "vpp", "microbatches")
    fixed += ("micro_batch_size", "global_batch", "runtime_steps")
    return fixed + tuple(k for k in keys if check_key(k)["kind"] == "int")


def row_columns(keys: list[str], settings: EvalSettings) -> list[str]:
    """Column order of a sweep table whose override keys are ``keys``."""
    cols = ["index", "config_id", "preset", "gpus", "hardware", *keys, "status", "error"]
    cols += [*LAYOUT_COLUMNS, "method", *STAT_COLUMNS, *_MEMORY_COLUMNS]
    if settings.steps is not None:
        cols += ["runtime_steps", "runtime_probability", *_RUNTIME_COLUMNS]
    return cols + ["warnings", "compute_time_s"]


def _finite(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _runtime(job: Any, steps: int, prob: float) -> tuple[float, float]:
    """(quantile at ``prob``, mean) of the time of ``steps`` steps: ``prism runtime``'s model.

    :func:`~prism_analytic.analyses.runtime.run_time` holds the persistent allocation (the
    per-GPU speeds) fixed over the run, which widens the law well beyond a sum of
    independent steps; interruptions are not included.
    """
    from ..analyses.runtime import run_time

    rt = run_time(job, steps)
    return float(rt.quantile(prob)), float(rt.mean())


def _keep_batch(point: SweepPoint, target: int | None) -> dict[str, Any]:
    """The point's job mapping with microbatches = global batch / (dp * micro_batch_size)."""
    from ..workload.config import ConfigError
    from ..workload.jobs import load_config
    from ..workload.presets import default_layout
    from .spec import flatten

    mapping = point.job_mapping()
    key = "parallelism.microbatches"
    if key in point.overrides or key in flatten(point.base):
        return mapping
    if target is None:
        target = default_layout(point.preset, point.gpus).global_batch
    # dp first (the layout rules, e.g. interleaving, are checked once microbatches are set)
    p = load_config(mapping, check_layout=False).parallelism
    per = p.dp * p.micro_batch_size
    if target % per:
        raise ConfigError(
            key,
            f"the global batch of {target} sequences does not split over dp*micro_batch_size"
            f" = {p.dp}*{p.micro_batch_size} = {per}",
        )
    mapping.setdefault("parallelism", {})["microbatches"] = target // per
    return mapping


def evaluate_point(point: SweepPoint, settings: EvalSettings) -> dict[str, Any]:
    """Build and predict one configuration; one row, whatever happens.

    Parameters
    ----------
    point : SweepPoint
    settings : EvalSettings

    Returns
    -------
    dict
        Keys of :func:`row_columns` (missing values are None). ``status`` is ``"ok"``,
        ``"invalid"`` (the layout is not valid: ``error`` says why), ``"infeasible"`` (over
        the memory estimate, with ``skip_infeasible``) or ``"error"`` (evaluation failed).
    """
    with _one_blas_thread():
        return _evaluate(point, settings)


def _one_blas_thread() -> Any:
    """Single-threaded BLAS while a configuration evaluates.

    The engines' means and variances are BLAS dot products whose last bit depends on the
    thread count, and dask workers run with ``OMP_NUM_THREADS=1`` while a local process
    does not: pinning one thread makes a row the same bits wherever it runs (and a sweep
    gets its parallelism from running configurations side by side anyway).
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: rows may then differ in the last bit across machines
        from contextlib import nullcontext

        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def screen_point(point: SweepPoint, settings: EvalSettings) -> tuple[dict[str, Any], Any]:
    """The cheap part of :func:`evaluate_point`: build the job, check it and its memory.

    Returns
    -------
    row : dict
        The row so far (layout, memory); ``status`` is ``"ok"`` when the layout is valid and
        (with ``skip_infeasible``) fits, else ``"invalid"``, ``"infeasible"`` or ``"error"``
        with the reason in ``error``.
    job : JobConfig or None
        The job when ``status`` is ``"ok"`` (None otherwise).
    """
    from ..workload.builder import layout_dict
    from ..workload.config import ConfigError
    from ..workload.jobs import load_config
    from .memory import memory_estimate

    start = time.perf_counter()
    row: dict[str, Any] = {
        "index": point.index,
        "config_id": point.config_id(settings.identity()),
        "preset": point.preset,
        "gpus": point.gpus,
        "hardware": point.hardware,
        **point.overrides,
        "status": "ok",
        "error": None,
        "method": settings.method,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            mapping = (
                _keep_batch(point, settings.global_batch)
                if settings.keep_batch
                else point.job_mapping()
            )
            job = load_config(mapping)
        except ConfigError as exc:
            row.update(status="invalid", error=str(exc))
            row["compute_time_s"] = time.perf_counter() - start
            return row, None
    row["warnings"] = "; ".join(sorted({str(w.message) for w in caught})) or None
    layout = layout_dict(job)
    row["hardware"] = job.hardware.name
    row.update({k: layout[k] for k in LAYOUT_COLUMNS if k in layout})
    row["recompute"] = job.training.recompute
    try:
        mem = memory_estimate(job, capacity_gb=settings.memory_gb, reserve_gb=settings.reserve_gb)
        row.update(
            memory_gb=mem.total / 1e9, memory_capacity_gb=mem.capacity / 1e9, fits_memory=mem.fits
        )
    except ConfigError as exc:  # unknown capacity of custom hardware: estimate only
        mem = None
        row["memory_gb"] = None
        if settings.skip_infeasible:
            row.update(status="error", error=str(exc))
            row["compute_time_s"] = time.perf_counter() - start
            return row, None
    if settings.skip_infeasible and mem is not None and not mem.fits:
        row.update(
            status="infeasible",
            error=f"estimated {mem.total / 1e9:.1f} GB per GPU > {mem.capacity / 1e9:.0f} GB"
            f" (activations {mem.activations / 1e9:.1f} GB, model state"
            f" {(mem.weights + mem.grads + mem.optimizer) / 1e9:.1f} GB)",
        )
        row["compute_time_s"] = time.perf_counter() - start
        return row, None
    row["compute_time_s"] = time.perf_counter() - start
    return row, job


def _evaluate(point: SweepPoint, settings: EvalSettings) -> dict[str, Any]:
    from ..workload.prediction import predict_job as run_prediction

    start = time.perf_counter()
    row, job = screen_point(point, settings)
    if job is None:
        return row
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result, _, info = run_prediction(
                job, method=settings.method, samples=settings.samples, seed=settings.seed
            )
            row["mean_s"] = _finite(result.mean())
            row["std_s"] = _finite(result.std())
            for col, q in _LEVELS.items():
                row[col] = _finite(result.quantile(q))
            for q, name in ((0.95, "p95"), (0.99, "p99")):
                lo, hi = result.quantile_bracket(q)
                row[f"{name}_lo_s"], row[f"{name}_hi_s"] = _finite(lo), _finite(hi)
            row["mean_model_step_s"] = _finite(info["mean_model_step_s"])
            if settings.steps is not None:
                row["runtime_steps"] = settings.steps
                row["runtime_probability"] = settings.probability
                rt = _runtime(job, settings.steps, settings.probability)
                row.update(zip(_RUNTIME_COLUMNS, rt))
    except Exception as exc:  # noqa: BLE001 - one failed configuration must not end a sweep
        row.update(status="error", error=f"{type(exc).__name__}: {exc}")
    row["compute_time_s"] = time.perf_counter() - start
    return row
