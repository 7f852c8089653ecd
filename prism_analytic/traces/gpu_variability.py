"""Slowest of n GPUs from measured per-GPU speeds: fit on half the GPUs, check on the other.

The per-GPU value is the median over that GPU's runs of the SGEMM duration (Longhorn V100,
``sgemm-longhorn-agg.csv``). A random half of the GPUs is fitted with the candidate families
of :func:`~prism_analytic.traces.fitting.fit_latency`; the slowest of n GPUs is then computed
analytically as F^n (``prism_analytic.iid_max``) and compared, by the KS distance, with the
maxima of n GPUs drawn (with replacement, since n can exceed the half) from the other half.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prism_analytic.traces.errors import TraceFormatError, require_pandas
from prism_analytic.traces.fitting import LatencyFit, fit_latency

__all__ = ["GpuMaxCase", "gpu_max_case", "per_gpu_speeds"]


def per_gpu_speeds(path) -> np.ndarray:
    """Per-GPU median SGEMM duration (ms) from the Longhorn aggregate CSV.

    Parameters
    ----------
    path : str or Path
        ``sgemm-longhorn-agg.csv`` (columns ``uuid`` and ``perf``).

    Returns
    -------
    numpy.ndarray
        One value per GPU.
    """
    pd = require_pandas()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"GPU variability file not found: {path}")
    try:
        frame = pd.read_csv(path)
    except Exception as exc:
        raise TraceFormatError(f"{path}: cannot be read as CSV: {exc}") from None
    missing = [c for c in ("uuid", "perf") if c not in frame.columns]
    if missing:
        raise TraceFormatError(f"{path}: columns {missing} missing; has {list(frame.columns)}")
    perf = pd.to_numeric(frame["perf"], errors="coerce")
    bad = ~np.isfinite(perf.to_numpy()) | (perf.to_numpy() <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(f"{path}: row {i}: perf {frame['perf'].iloc[i]!r} must be > 0")
    return frame.assign(perf=perf).groupby("uuid")["perf"].median().to_numpy()


@dataclass(frozen=True)
class GpuMaxCase:
    """Result of the max-over-n check.

    Attributes
    ----------
    fit : LatencyFit
        The per-GPU law fitted on the fit half.
    n_fit, n_test : int
        GPUs in each half.
    ks : dict
        n -> KS distance between the analytic max of n and the test half's subsampled maxima.
    predicted_median, measured_median : dict
        n -> median of the slowest of n (ms), predicted and from the test half.
    noise_floor_ks : dict
        n -> KS distance between the fit half's and the test half's own empirical laws of the
        slowest of n: what a perfect model of the fit half could not get below.
    """

    fit: LatencyFit
    n_fit: int
    n_test: int
    ks: dict
    predicted_median: dict
    measured_median: dict
    noise_floor_ks: dict

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {
            "family": self.fit.family,
            "n_fit_gpus": self.n_fit,
            "n_test_gpus": self.n_test,
            "ks": {str(k): float(v) for k, v in self.ks.items()},
            "predicted_median_ms": {str(k): float(v) for k, v in self.predicted_median.items()},
            "measured_median_ms": {str(k): float(v) for k, v in self.measured_median.items()},
            "noise_floor_ks": {str(k): float(v) for k, v in self.noise_floor_ks.items()},
        }


def gpu_max_case(path, *, ns=(4, 16, 64, 256), subsamples: int = 4000, seed: int = 0) -> GpuMaxCase:
    """Fit per-GPU speed on a random half; compare the analytic max of n with the other half.

    Parameters
    ----------
    path : str or Path
        ``sgemm-longhorn-agg.csv``.
    ns : sequence of int
        Group sizes.
    subsamples : int
        Subsampled groups per n from the test half.
    seed : int
        Seed of the split and the subsampling.

    Returns
    -------
    GpuMaxCase
    """
    import prism_analytic as pa

    values = per_gpu_speeds(path)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(values.size)
    half = values.size // 2
    fit_half, test_half = values[perm[:half]], values[perm[half:]]
    fit = fit_latency(fit_half, rng=seed)
    law = fit.distribution()
    ks, pred_med, meas_med, floor = {}, {}, {}, {}
    everything = np.sort(values)
    f_fit = np.searchsorted(np.sort(fit_half), everything, side="right") / fit_half.size
    f_test = np.searchsorted(np.sort(test_half), everything, side="right") / test_half.size
    for n in ns:
        mx = pa.iid_max(law, int(n))
        drawn = rng.choice(test_half, size=(subsamples, int(n)), replace=True).max(axis=1)
        grid = np.unique(drawn)
        emp = np.searchsorted(np.sort(drawn), grid, side="right") / drawn.size
        emp_left = np.searchsorted(np.sort(drawn), grid, side="left") / drawn.size
        model = np.asarray(mx.cdf(grid), dtype=float)
        ks[int(n)] = float(max(np.max(np.abs(model - emp)), np.max(np.abs(model - emp_left))))
        pred_med[int(n)] = float(mx.quantile(0.5))
        meas_med[int(n)] = float(np.median(drawn))
        floor[int(n)] = float(np.max(np.abs(f_fit**n - f_test**n)))
    return GpuMaxCase(fit, half, test_half.size, ks, pred_med, meas_med, floor)
