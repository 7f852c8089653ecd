"""Tail indices: which moments of a latency law exist.

The tail index ``a`` of a law says that E|X|^r is finite for r < a and infinite for r >= a
(``inf`` for laws with all moments, e.g. normal, gamma, lognormal). A grid holds only a window
of the law, so its own mean and variance would always look finite; operations carry the index
instead, and a moment of order >= a is reported as ``inf``, never as the window's number.
"""

from __future__ import annotations

import math

__all__ = ["tail_index", "FAMILY_TAIL_INDEX"]

#: scipy.stats families with a power-law upper tail: the tail index from the shape arguments.
FAMILY_TAIL_INDEX = {
    "pareto": lambda a: a[0],
    "lomax": lambda a: a[0],
    "t": lambda a: a[0],
    "cauchy": lambda a: 1.0,
    "halfcauchy": lambda a: 1.0,
    "levy": lambda a: 0.5,
    "invgamma": lambda a: a[0],
    "invweibull": lambda a: a[0],
    "fisk": lambda a: a[0],
    "burr": lambda a: a[0] * a[1],
    "burr12": lambda a: a[0] * a[1],
    "genpareto": lambda a: 1.0 / a[0] if a[0] > 0 else math.inf,
}


def tail_index(dist: object) -> float:
    """The upper tail index of ``dist`` (``inf`` when every moment is finite).

    Parameters
    ----------
    dist : Distribution
        Any latency distribution of the package (each class answers through its
        ``tail_index`` property).

    Returns
    -------
    float
        Moments of order below the index are finite; from the index on they are infinite.
    """
    return float(dist.tail_index)
