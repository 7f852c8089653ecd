"""Acceptance figures of `prism calibrate` (issue #10): Llama 3 MFU and MLPerf GB200.

1. Llama 3 405B: calibrate the GEMM efficiency so the *stochastic mean* step gives 41% MFU at
   16,384 H100s; predict 8,192 GPUs (published 43%).
2. MLPerf GB200 (``shared/data/mlperf_llama405b``): uncalibrated medians at every size; then
   calibrate on 512 GPUs only and check 1,024-2,496 out of sample.

Run: ``python validation/calibration_acceptance.py`` (a few minutes on one core).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from prism_analytic.calibration import (
    calibrate_to_logs,
    calibrate_to_throughput,
    check_against_logs,
    predicted_law,
    read_step_log,
)
from prism_analytic.datasets import data_root
from prism_analytic.workload.jobs import load_config, merge_config
from prism_analytic.workload.presets import preset_job
from prism_analytic.workload.step_estimate import step_time

CONFIGS = Path(__file__).parent / "configs"
SIZES = (512, 1024, 1536, 2048, 2496)


def _mfu(job, mean_s: float) -> float:
    est = step_time(job)
    return est.model_flops_per_step / (mean_s * job.gpus * job.hardware.peak_flops.bf16)


def main() -> int:
    """Print the acceptance figures as JSON."""
    out: dict = {}
    j16 = preset_job("llama3-405b", 16384)
    cal = calibrate_to_throughput(j16, mfu=0.41)
    ov = cal.overlay()
    j8 = merge_config(preset_job("llama3-405b", 8192), ov)
    law8 = predicted_law(j8)
    out["llama3"] = {
        "gemm": cal.parameters[0].value,
        "gemm_interval": cal.parameters[0].interval,
        "mfu_16k_stochastic_mean": _mfu(merge_config(j16, ov), cal.predicted["mean_s"]),
        "mfu_8k_stochastic_mean": _mfu(j8, law8.mean_s),
    }
    root = data_root() / "mlperf_llama405b"
    logs = {
        g: [read_step_log(f) for f in sorted((root / f"carina_gb200_ngpu{g}").glob("result_*.txt"))]
        for g in SIZES
    }
    jobs = {g: load_config(CONFIGS / f"mlperf_gb200_{g}.toml") for g in SIZES}
    out["mlperf_uncalibrated"] = {
        g: check_against_logs(jobs[g], logs[g])["median_rel_error"] for g in SIZES
    }
    fit = calibrate_to_logs(jobs[512], logs[512])
    out["mlperf_fit_512"] = fit.to_dict()
    out["mlperf_out_of_sample"] = {
        g: check_against_logs(merge_config(jobs[g], fit.overlay()), logs[g]) for g in SIZES[1:]
    }
    from prism_analytic.cli.output import jsonable

    print(json.dumps(jsonable(out), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
