"""sum_by_doubling: the binary-digit schedule of additions and doublings."""

from __future__ import annotations

import pytest

from prism_analytic.distributions.doubling import sum_by_doubling


@pytest.mark.parametrize("m", [1, 2, 3, 7, 8, 1000, 2**20 + 1])
def test_sums_m_copies_with_log2_m_doublings(m):
    calls = {"add": 0, "double": 0}

    def add(a, b):
        calls["add"] += 1
        return a + b

    def double(a):
        calls["double"] += 1
        return 2 * a

    assert sum_by_doubling(1, m, add, double) == m
    assert calls["double"] == m.bit_length() - 1
    assert calls["add"] == bin(m).count("1") - 1


def test_rejects_no_copies():
    with pytest.raises(ValueError, match="m must be >= 1"):
        sum_by_doubling(1, 0, lambda a, b: a + b, lambda a: 2 * a)
