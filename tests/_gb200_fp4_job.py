"""The small GB200 FP4 job the calibration-consistency and shape-choice tests fit.

Its true GEMM efficiency is :data:`TRUE_EFF` (the preset's ``gemm_fp4`` default is 0.388: the
fit has something to find), as in ``validation/results/calibration_consistency.md``.
"""

TRUE_EFF = 0.4
JOB_TOML = """
[job]
name = "gb200-8b-fp4"
preset = "llama3-8b"
hardware = "gb200-nvl72"
gpus = 16

[parallelism]
microbatches = 4
micro_batch_size = 1

[training]
precision = "nvfp4"
"""
QUIET_SPATIAL = {"variability": {"spatial": {"cv": 0.0, "slow_fraction": 0.0}}}
