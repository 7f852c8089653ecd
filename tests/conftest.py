"""Shared fixtures: the measured-data folder (skips with the reason when absent)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data root (``$PRISM_DATA`` or ``../shared/data``); skip when it is absent."""
    from prism_analytic.datasets import data_root

    try:
        return data_root()
    except FileNotFoundError as exc:
        pytest.skip(f"measured data not available: {exc}")
