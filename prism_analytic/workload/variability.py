"""Measured variability: per-GPU speed spread and MLPerf step times.

Data live outside the project (``shared/data`` beside the repository, read-only):

* ``gpu_variability``: per-GPU benchmark runs on whole clusters (Sinha et al., "Not All
  GPUs Are Created Equal", SC'22; ``hal-uw/blox-pal``).
* ``mlperf_llama405b``: MLPerf Training v5.0 Llama 3.1 405B logs on GB200 NVL72.

:func:`resolve_data_dir` finds them: an explicit argument, else ``$PRISM_DATA``, else
``../shared/data`` from the current directory.

Measured values (per dataset: across-GPU CV, p99/p50, max/p50 with bootstrap intervals; the
MLPerf step outliers): ``validation/results/gpu_variability_stats.md``.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from ..datasets import data_root

__all__ = [
    "DATASETS",
    "resolve_data_dir",
    "load_gpu_runs",
    "SpatialStats",
    "spatial_stats",
    "MLPerfRun",
    "load_mlperf_runs",
    "mlperf_step_times",
    "StepOutlierStats",
    "step_outlier_stats",
]

#: dataset name -> (file, column, seconds per unit). Units were checked against the
#: values: SGEMM perf is a mean kernel time in ms (25536^2 FP32 GEMM ~2.4 s on a V100);
#: Longhorn ResNet/BERT report ms; Frontera reports s.
DATASETS: dict[str, tuple[str, str, float]] = {
    "sgemm-longhorn": ("sgemm-longhorn-agg.csv", "perf", 1e-3),
    "resnet-longhorn": ("resnet-longhorn-agg.csv", "perf", 1e-3),
    "bert-longhorn": ("bert-longhorn-agg.csv", "perf", 1e-3),
    "frontera-resnet": ("frontera-resnet-agg.csv", "perf", 1.0),
    "frontera-bert": ("frontera-bert-agg.csv", "perf", 1.0),
}


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    """The shared data folder; see :func:`prism_analytic.datasets.data_root`."""
    return data_root(data_dir)


def _dataset_file(name: str, data_dir: str | Path | None) -> tuple[Path, str, float]:
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(DATASETS)}")
    fname, col, unit = DATASETS[name]
    path = resolve_data_dir(data_dir) / "gpu_variability" / fname
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    return path, col, unit


def load_gpu_runs(
    dataset: str = "sgemm-longhorn", data_dir: str | Path | None = None
) -> dict[str, np.ndarray]:
    """Per-GPU run times in seconds: ``{gpu uuid: array of runs}``.

    Parameters
    ----------
    dataset : str
        A key of :data:`DATASETS`.
    data_dir : str or Path, optional
        See :func:`resolve_data_dir`.
    """
    path, col, unit = _dataset_file(dataset, data_dir)
    runs: dict[str, list[float]] = defaultdict(list)
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        names = reader.fieldnames or []
        if col not in names or "uuid" not in names:
            raise ValueError(f"{path}: expected columns 'uuid' and {col!r}")
        for row in reader:
            try:
                v = float(row[col])
            except (TypeError, ValueError):
                continue  # a malformed cell is not a measurement
            if math.isfinite(v) and v > 0:
                runs[row["uuid"]].append(v * unit)
    if not runs:
        raise ValueError(f"{path}: no positive finite {col!r} values")
    return {k: np.asarray(v) for k, v in runs.items()}


@dataclass(frozen=True)
class SpatialStats:
    """Across-GPU spread of per-GPU median run times, with bootstrap intervals.

    Intervals are ``(low, high)`` at ``confidence``.
    """

    dataset: str
    n_gpus: int
    n_runs: int
    median_s: float
    cv: float
    cv_ci: tuple[float, float]
    p99_over_p50: float
    p99_over_p50_ci: tuple[float, float]
    max_over_p50: float
    max_over_p50_ci: tuple[float, float]
    robust_cv: float
    outlier_fraction: float
    outlier_mean_factor: float
    within_gpu_cv: float
    confidence: float

    def summary(self) -> str:
        """One line."""
        return (
            f"{self.dataset}: {self.n_gpus} GPUs, {self.n_runs} runs; CV {self.cv:.4f}"
            f" [{self.cv_ci[0]:.4f}, {self.cv_ci[1]:.4f}], p99/p50 {self.p99_over_p50:.3f}"
            f" [{self.p99_over_p50_ci[0]:.3f}, {self.p99_over_p50_ci[1]:.3f}], max/p50"
            f" {self.max_over_p50:.3f} [{self.max_over_p50_ci[0]:.3f},"
            f" {self.max_over_p50_ci[1]:.3f}]; within-GPU CV {self.within_gpu_cv:.4f}"
        )

    def to_dict(self) -> dict:
        """Plain dict."""
        return asdict(self)


def _cv(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.std(x, axis=axis) / np.mean(x, axis=axis)


def _p99(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.quantile(x, 0.99, axis=axis) / np.median(x, axis=axis)


def _pmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.max(x, axis=axis) / np.median(x, axis=axis)


def spatial_stats(
    dataset: str = "sgemm-longhorn",
    data_dir: str | Path | None = None,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    rng: int | np.random.Generator | None = 0,
) -> SpatialStats:
    """Spatial (across-GPU) variability of one dataset.

    The per-GPU value is the median over that GPU's runs; CV uses the population
    standard deviation; p99 uses numpy's default (linear) quantile. Intervals are
    percentile bootstraps over GPUs (:func:`scipy.stats.bootstrap`).

    Parameters
    ----------
    dataset : str
    data_dir : str or Path, optional
    n_resamples : int
    confidence : float
        In (0, 1).
    rng : int or numpy.random.Generator, optional
        Seed of the bootstrap.

    Returns
    -------
    SpatialStats
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 10:
        raise ValueError(f"n_resamples must be an integer >= 10, got {n_resamples!r}")
    runs = load_gpu_runs(dataset, data_dir)
    med = np.array([np.median(v) for v in runs.values()])
    p50 = float(np.median(med))
    gen = np.random.default_rng(rng)
    cis = []
    for fn in (_cv, _p99, _pmax):
        res = stats.bootstrap(
            (med,),
            fn,
            n_resamples=n_resamples,
            confidence_level=confidence,
            method="percentile",
            vectorized=True,
            random_state=gen,
        )
        cis.append((float(res.confidence_interval.low), float(res.confidence_interval.high)))
    ratio = med / p50
    robust = float(stats.median_abs_deviation(ratio, center=lambda r, axis: 1.0, scale="normal"))
    out = ratio[ratio > 1.0 + 3.0 * robust]
    within = [float(_cv(v)) for v in runs.values() if len(v) >= 2]
    return SpatialStats(
        dataset=dataset,
        n_gpus=len(med),
        n_runs=int(sum(len(v) for v in runs.values())),
        median_s=p50,
        cv=float(_cv(med)),
        cv_ci=cis[0],
        p99_over_p50=float(_p99(med)),
        p99_over_p50_ci=cis[1],
        max_over_p50=float(_pmax(med)),
        max_over_p50_ci=cis[2],
        robust_cv=robust,
        outlier_fraction=len(out) / len(ratio),
        outlier_mean_factor=float(out.mean()) if len(out) else 1.0,
        within_gpu_cv=float(np.median(within)) if within else float("nan"),
        confidence=confidence,
    )


# --------------------------------------------------------------------------------------
# MLPerf step logs
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MLPerfRun:
    """One MLPerf result log.

    Attributes
    ----------
    gpus : int
    run : int
        Index of ``result_<run>.txt``.
    step_times_s : numpy.ndarray
        ``train_step_time`` of every optimizer step, warm-up steps dropped.
    global_batch_size, gradient_accumulation_steps, max_sequence_length : int or None
        As logged.
    """

    gpus: int
    run: int
    step_times_s: np.ndarray
    global_batch_size: int | None
    gradient_accumulation_steps: int | None
    max_sequence_length: int | None


_MARK = ":::MLLOG "


def _parse_mllog(path: Path, drop_first: int) -> tuple[list[float], dict[str, float]]:
    times: list[float] = []
    meta: dict[str, float] = {}
    with path.open(encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            i = line.find(_MARK)
            if i < 0:
                continue
            try:
                rec = json.loads(line[i + len(_MARK) :])
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: bad MLLOG JSON: {err}") from None
            key, value = rec.get("key"), rec.get("value")
            if key == "tracked_stats" and isinstance(value, dict) and "train_step_time" in value:
                t = float(value["train_step_time"])
                if not (math.isfinite(t) and t > 0):
                    raise ValueError(f"{path}:{lineno}: train_step_time {t!r} is not > 0")
                times.append(t)
            elif (
                key in ("global_batch_size", "gradient_accumulation_steps", "max_sequence_length")
                and value is not None
            ):
                meta[key] = float(value)
    return times[drop_first:], meta


def load_mlperf_runs(data_dir: str | Path | None = None, *, drop_first: int = 2) -> list[MLPerfRun]:
    """Parse every ``mlperf_llama405b/*/result_*.txt``.

    Parameters
    ----------
    data_dir : str or Path, optional
        See :func:`resolve_data_dir`.
    drop_first : int
        Warm-up steps dropped from the start of each run (SOURCE.md: 2).

    Returns
    -------
    list of MLPerfRun
        Sorted by GPU count, then run.
    """
    if isinstance(drop_first, bool) or not isinstance(drop_first, int) or drop_first < 0:
        raise ValueError(f"drop_first must be an integer >= 0, got {drop_first!r}")
    root = resolve_data_dir(data_dir) / "mlperf_llama405b"
    if not root.is_dir():
        raise FileNotFoundError(f"{root} not found")
    out = []
    for folder in sorted(root.iterdir()):
        m = re.search(r"ngpu(\d+)$", folder.name)
        if not (folder.is_dir() and m):
            continue
        for f in sorted(folder.glob("result_*.txt")):
            run = int(re.search(r"result_(\d+)", f.name).group(1))
            times, meta = _parse_mllog(f, drop_first)

            def _int(k: str, meta: dict[str, float] = meta) -> int | None:
                return int(meta[k]) if k in meta else None

            out.append(
                MLPerfRun(
                    gpus=int(m.group(1)),
                    run=run,
                    step_times_s=np.asarray(times),
                    global_batch_size=_int("global_batch_size"),
                    gradient_accumulation_steps=_int("gradient_accumulation_steps"),
                    max_sequence_length=_int("max_sequence_length"),
                )
            )
    if not out:
        raise FileNotFoundError(f"no carina_*_ngpu<N>/result_*.txt logs under {root}")
    return sorted(out, key=lambda r: (r.gpus, r.run))


def mlperf_step_times(
    data_dir: str | Path | None = None, *, drop_first: int = 2
) -> dict[int, np.ndarray]:
    """Step times pooled over runs: ``{gpus: array of seconds}``."""
    pooled: dict[int, list[np.ndarray]] = defaultdict(list)
    for r in load_mlperf_runs(data_dir, drop_first=drop_first):
        pooled[r.gpus].append(r.step_times_s)
    return {g: np.concatenate(v) for g, v in sorted(pooled.items())}


@dataclass(frozen=True)
class StepOutlierStats:
    """Steps slower than ``threshold`` times their GPU count's median, pooled."""

    threshold: float
    n_steps: int
    n_outliers: int
    probability: float
    median_excess_s: float

    def to_dict(self) -> dict:
        """Plain dict."""
        return asdict(self)


def step_outlier_stats(
    data_dir: str | Path | None = None, *, threshold: float = 1.1
) -> StepOutlierStats:
    """Rare slow steps in the MLPerf logs (the default hiccup parameters).

    Parameters
    ----------
    data_dir : str or Path, optional
    threshold : float
        A step is an outlier above ``threshold`` times its size's median (> 1).
    """
    if not (isinstance(threshold, int | float) and math.isfinite(threshold) and threshold > 1):
        raise ValueError(f"threshold must be a finite number > 1, got {threshold!r}")
    n, excess = 0, []
    for t in mlperf_step_times(data_dir).values():
        med = float(np.median(t))
        n += len(t)
        excess += list(t[t > threshold * med] - med)
    return StepOutlierStats(
        threshold, n, len(excess), len(excess) / n, float(np.median(excess)) if excess else 0.0
    )
