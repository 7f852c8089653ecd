"""Shared fixtures: the measured-data folder (skips with the reason when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# headless plots, set before matplotlib's first import (here and in subprocesses), without
# importing matplotlib into every test process
os.environ["MPLBACKEND"] = "Agg"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data root (``$PRISM_DATA`` or ``../shared/data``); skip when it is absent."""
    from prism_analytic.datasets import data_root

    try:
        return data_root()
    except FileNotFoundError as exc:
        pytest.skip(f"measured data not available: {exc}")
