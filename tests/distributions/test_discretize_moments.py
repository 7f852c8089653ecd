"""``discretize(..., with_moments=False)`` and ``_LogOf.tail_index``: the cold-path shortcuts
of :func:`~prism_analytic.distributions.products.scale_mixture` change no grid value."""

from __future__ import annotations

import math

import numpy as np
import pytest

import prism_analytic as pa
from prism_analytic.distributions.base import Distribution
from prism_analytic.distributions.extremes import IIDMax
from prism_analytic.distributions.grid import discretize
from prism_analytic.distributions.products import _LogOf

LAWS = [
    IIDMax(pa.lognormal(1.0, 0.017), 128),  # a replica's slowest-of-128 speed factor
    pa.lognormal(1.0, 0.3),
    pa.pareto(2.5, 1.0),  # a power tail in S: log S still has none
]


@pytest.mark.parametrize("law", LAWS, ids=["iidmax", "lognormal", "pareto"])
def test_log_tail_index_is_what_the_default_finds(law: Distribution) -> None:
    log = _LogOf(law)
    assert log.tail_index == math.inf
    assert Distribution.tail_index.fget(_LogOf(law)) == math.inf  # the integrating default


@pytest.mark.parametrize("law", LAWS, ids=["iidmax", "lognormal", "pareto"])
def test_without_moments_same_grid(law: Distribution) -> None:
    h = 1e-4
    full = discretize(_LogOf(law), h)
    bare = discretize(_LogOf(law), h, with_moments=False)
    assert bare.moments is None and full.moments is not None
    assert (bare.h, bare.k0, bare.below, bare.above) == (full.h, full.k0, full.below, full.above)
    assert np.array_equal(bare.lo, full.lo) and np.array_equal(bare.hi, full.hi)
    # without stored moments the grid's own are used: within a cell of the exact ones
    assert abs(bare.mean() - full.moments[0]) <= h
