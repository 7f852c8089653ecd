"""Numeric moments are computed once per distribution object and never shared between objects."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import prism_analytic as pa
from prism_analytic.distributions.base import Distribution


def test_numeric_moments_are_computed_once_per_object(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = Distribution._integrate_moments

    def counting(self: Distribution, points: int) -> tuple[float, float]:
        calls.append(id(self))
        return real(self, points)

    monkeypatch.setattr(Distribution, "_integrate_moments", counting)
    a = pa.iid_max(pa.lognormal(1.0, 0.1), 8)  # no closed form: numeric moments
    first = (a.mean(), a.var(), a.std())
    assert (a.mean(), a.var(), a.std()) == first  # the memo returns the same floats
    assert calls == [id(a)]
    b = pa.iid_max(pa.lognormal(1.0, 0.2), 8)  # another object: its own moments
    assert b.var() > a.var()
    assert calls == [id(a), id(b)]


def test_memoised_moments_match_an_independent_reference() -> None:
    # the max of 8 i.i.d. normals: its moments by quadrature of n F^(n-1) f
    d = pa.iid_max(pa.normal(0.0, 1.0), 8)
    x = np.linspace(-12, 12, 200_001)
    pdf = 8 * stats.norm.cdf(x) ** 7 * stats.norm.pdf(x)
    mean = np.trapezoid(x * pdf, x)
    var = np.trapezoid((x - mean) ** 2 * pdf, x)
    for _ in range(2):
        assert d.mean() == pytest.approx(mean, abs=1e-7)
        assert d.var() == pytest.approx(var, abs=1e-7)
