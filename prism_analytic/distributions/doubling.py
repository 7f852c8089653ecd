"""The sum of ``m`` copies by repeated doubling: ``log2(m)`` doublings, one addition per set bit.

Shared by every lattice that sums i.i.d. copies (linear grids in :mod:`~prism_analytic.operations`
and the one-stage pipeline chain, the log lattice in :mod:`.log_lattice_ops`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["sum_by_doubling"]

T = TypeVar("T")


def sum_by_doubling(base: T, m: int, add: Callable[[T, T], T], double: Callable[[T], T]) -> T:
    """The sum of ``m`` >= 1 independent copies of ``base``.

    Parameters
    ----------
    base : object
        The law of one copy (a lattice).
    m : int
        Number of copies, >= 1.
    add : callable
        ``add(a, b)``: the law of the sum of independent ``a`` and ``b``.
    double : callable
        ``double(a)``: the law of the sum of two independent copies of ``a``.

    Returns
    -------
    object
        The law of the sum, built from the binary digits of ``m`` (lowest first).
    """
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    result: T | None = None
    while True:
        if m & 1:
            result = base if result is None else add(result, base)
        m >>= 1
        if not m:
            return result
        base = double(base)
