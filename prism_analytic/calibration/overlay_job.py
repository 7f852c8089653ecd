"""Whether a calibration overlay changes the GEMM efficiency a job actually uses.

A ``prism calibrate`` overlay sets the efficiency key of the *calibrated* job's GEMM precision
(``gemm`` for BF16, ``gemm_fp8`` for FP8/MXFP8, ``gemm_fp4`` for NVFP4). Merged into a job of
another precision (e.g. the job file of the larger size forgot ``training.precision =
"fp8"``), it changes nothing the job uses, and the "calibrated" prediction is the
uncalibrated one, silently. :func:`check_overlay_gemm` turns that into an error.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .result import CalibrationError

__all__ = ["GEMM_KEYS", "check_overlay_gemm"]

#: The per-precision GEMM efficiency keys of ``[hardware.efficiency]``.
GEMM_KEYS = ("gemm", "gemm_fp8", "gemm_fp4")


def _gemm_keys_set(path: str | Path) -> set[str]:
    """GEMM efficiency keys an overlay file sets (an unreadable file is left to the loader)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return set()
    eff = data.get("hardware", {}).get("efficiency", {})
    return {k for k in GEMM_KEYS if isinstance(eff, dict) and k in eff}


def check_overlay_gemm(job: Any, overlays: Sequence[str | Path]) -> None:
    """Raise when the overlays set GEMM efficiencies but not the one ``job`` uses.

    Parameters
    ----------
    job : JobConfig
        The job after the overlays are merged.
    overlays : sequence of path
        The overlay files (``--overlay`` / ``--config`` after the job file).

    Raises
    ------
    CalibrationError
        Naming the keys the overlays set, the job's precision and the key it uses.
    """
    eff = job.hardware.efficiency
    used = eff.gemm_key(job.training.precision)
    if getattr(eff, used, None) is None:
        used = "gemm"  # an unset per-precision key falls back to the BF16 one
    given = set()
    for path in overlays:
        given |= _gemm_keys_set(path)
    if given and used not in given:
        raise CalibrationError(
            f"the overlay sets hardware.efficiency.{', '.join(sorted(given))} but job"
            f" {job.name!r} runs its GEMMs in training.precision = {job.training.precision!r},"
            f" which uses hardware.efficiency.{used}: the calibration would change nothing;"
            " set training.precision to the calibrated job's, or calibrate this precision"
        )
