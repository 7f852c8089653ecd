"""Gamma laws at huge shapes (sums of many gammas) against Kummer's series in mpmath."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import special

import prism_analytic as pa
from prism_analytic.distributions.gamma_large import LARGE_SHAPE, gamma_cdf_sf, gamma_quantile
from prism_analytic.distributions.serialize import from_spec, to_spec


def kummer_p(a: float, x: float, dps: int = 40) -> mpmath.mpf:
    """P(a, x) = x^a e^-x / Gamma(a+1) * sum_k x^k / ((a+1)...(a+k)): positive terms only."""
    with mpmath.workdps(dps):
        a, x = mpmath.mpf(a), mpmath.mpf(x)
        pref = mpmath.exp(a * mpmath.log(x) - x - mpmath.loggamma(a + 1))
        total, term, k = mpmath.mpf(1), mpmath.mpf(1), 0
        eps = mpmath.mpf(10) ** (5 - dps)
        while True:
            k += 1
            term = term * x / (a + k)
            total += term
            if x < a + k and term < eps * total:  # terms fall geometrically from here
                return pref * total


@pytest.mark.parametrize("a", [LARGE_SHAPE, 4e6])
@pytest.mark.parametrize("z", [-8.0, -4.75, -1.0, 0.0, 0.3, 6.0, 8.0])
def test_cdf_and_sf_match_the_series(a, z):
    x = float(round(a + z * math.sqrt(a)))
    ref = kummer_p(a, x)
    p, q = gamma_cdf_sf(np.array([x]), a)
    assert float(abs(p[0] - ref) / ref) < 1e-13
    assert float(abs(q[0] - (1 - ref)) / (1 - ref)) < 1e-13


def test_scipy_is_wrong_where_this_module_takes_over():
    # the reason for the module: cephes' series stops after 2,000 terms
    a = 4e6
    x = float(round(a - 4.75 * math.sqrt(a)))
    ref = float(kummer_p(a, x))
    assert abs(special.gammainc(a, x) / ref - 1) > 1e-3
    assert abs(gamma_cdf_sf(np.array([x]), a)[0][0] / ref - 1) < 1e-13


def test_quantiles_invert_the_cdf_in_both_tails():
    a, scale = 4e9, 0.25
    q = np.array([1e-300, 1e-6, 0.3, 0.5])
    x = gamma_quantile(q, a, 0.0, scale)
    assert np.allclose(gamma_cdf_sf(x, a, 0.0, scale)[0], q, rtol=1e-9, atol=0)
    p = np.array([1e-200, 1e-9, 0.2])
    x = gamma_quantile(p, a, 0.0, scale, upper=True)
    assert np.allclose(gamma_cdf_sf(x, a, 0.0, scale)[1], p, rtol=1e-9, atol=0)
    with pytest.raises(ValueError, match="a must be at least"):
        gamma_cdf_sf(np.array([1.0]), 10.0)


def test_iid_sum_of_a_million_gammas_brackets_the_series_quantile():
    # before: the 1e-6 bracket [997625.09, 997625.09] lay above the true quantile (P = 1.0044e-6)
    m = 10**6
    s = pa.iid_sum(pa.gamma(1.0, 0.5), m)  # Gamma(4e6, scale 0.25)
    low, high = s.quantile_bracket(1e-6)
    assert kummer_p(4.0 * m, low / 0.25) < 1e-6 <= kummer_p(4.0 * m, high / 0.25)
    assert high - low <= 1e-6 * s.std()
    assert from_spec(to_spec(s)).quantile_bracket(1e-6) == (low, high)  # JSON round trip


def test_support_ends_and_infinities():
    g = pa.iid_sum(pa.gamma(1.0, 0.5), 10**9)
    assert list(g.cdf([-1.0, 0.0, np.inf])) == [0.0, 0.0, 1.0]
    assert list(g.sf([-np.inf, 0.0, np.inf])) == [1.0, 1.0, 0.0]
    assert list(g.quantile([0.0, 1.0])) == [0.0, np.inf]
