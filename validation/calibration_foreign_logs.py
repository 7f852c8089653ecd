"""`prism calibrate` on logs that are not in ``shared/data`` : a self-consistency run.

An H100 BF16 Llama 3 70B job (tp 8, pp 4, vpp 5, global batch 1,024 sequences) at 256, 1,024
and 4,096 GPUs (128, 32 and 8 microbatches per rank): one run per size (40, 60 and 80
steps) drawn from the model itself at a GEMM efficiency of 0.62 (the preset's is 0.626), one
allocation per run (the within-run law scaled to the full law's median), one 1.8x stall per
run, evaluation pauses every 16 steps at 256 and every 20 at 4,096 (the next step 1.4x
slower) and none at 1,024, ``metadata.step`` counting samples at 256 / 1,024 and steps at
4,096, a rank prefix at 4,096. The documented commands are run: ``prism calibrate`` at 256,
``prism calibrate --check`` with the overlay at 1,024 and 4,096.

What it measures: whether the pipeline recovers the efficiency the logs were drawn at and
predicts the other sizes' medians (it must, since the logs come from the model: a miss is a
bug in the pipeline, not a modelling error). It is not evidence that the model is right for
a real H100 job.

Run: ``python validation/calibration_foreign_logs.py`` (about a minute on one core).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _foreign_logs import write_mllog  # noqa: E402

from prism_analytic.calibration import predicted_law  # noqa: E402
from prism_analytic.cli import main as prism  # noqa: E402
from prism_analytic.workload.jobs import load_config, merge_config  # noqa: E402

TRUE_GEMM = 0.62
JOB = """[job]
name = "h100-70b@{g}"
preset = "llama3-70b"
hardware = "h100-sxm-80gb"
gpus = {g}

[parallelism]
tp = 8
pp = 4
vpp = 5
schedule = "interleaved"
microbatches = {mb}
micro_batch_size = 1

[training]
precision = "bf16"
"""
#: GPUs -> (steps, evaluation interval, what metadata.step counts, microbatches per rank)
SIZES = {256: (40, 16, "samples", 128), 1024: (60, None, "samples", 32), 4096: (80, 20, "steps", 8)}


def _run(args: list[str]) -> dict:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = prism([*args, "--json"])
    if rc != 0:
        raise RuntimeError(f"prism {' '.join(args)} exited {rc}")
    return json.loads(buf.getvalue())


def main() -> int:
    """Print the figures as JSON."""
    rng = np.random.default_rng(7)
    out: dict = {"true_gemm": TRUE_GEMM}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for g, (n, every, counts, mb) in SIZES.items():
            (tmp / f"job_{g}.toml").write_text(JOB.format(g=g, mb=mb))
            job = load_config(tmp / f"job_{g}.toml")
            job = merge_config(job, {"hardware": {"efficiency": {"gemm": TRUE_GEMM}}})
            law = predicted_law(job)
            quiet = {"variability": {"spatial": {"cv": 0.0, "slow_fraction": 0.0}}}
            within = predicted_law(merge_config(job, quiet))
            t = within.sample(n, rng) * law.p50_s / within.p50_s
            t[rng.choice(np.arange(3, n), 1)] *= 1.8
            write_mllog(tmp / f"run_{g}.txt", t, global_batch_size=1024,
                        gradient_accumulation_steps=mb, max_sequence_length=8192,
                        platform=f"{g // 8}xNVIDIA H100-SXM5-80GB", eval_every=every,
                        step_counts=counts, prefix="0: " if g == 4096 else "")  # fmt: skip
            out[f"true_p50_{g}"] = law.p50_s
        fit = _run(["calibrate", "--config", str(tmp / "job_256.toml"), "--steps",
                    str(tmp / "run_256.txt"), "--out", str(tmp / "fit.toml")])  # fmt: skip
        out["fit_256"] = {p["key"]: (p["value"], p["interval"]) for p in fit["parameters"]}
        for g in (1024, 4096):
            chk = _run(["calibrate", "--config", str(tmp / f"job_{g}.toml"), "--overlay",
                        str(tmp / "fit.toml"), "--steps", str(tmp / f"run_{g}.txt"),
                        "--check"])  # fmt: skip
            keep = ("median_rel_error", "measured_p90_over_p50", "predicted_p90_over_p50",
                    "measured_p99_over_p50", "predicted_p99_over_p50_sampling_95", "p99_inside",
                    "measured_steps_above_1p5x_median", "predicted_count_poisson_95")  # fmt: skip
            out[f"check_{g}"] = {k: chk[k] for k in keep}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
