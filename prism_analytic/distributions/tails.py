"""Tail indices: which moments of a latency law exist.

The tail index ``a`` of a law says that E|X|^r is finite for r < a and infinite for r >= a
(``inf`` for laws with all moments, e.g. normal, gamma, lognormal). A grid holds only a window
of the law, so its own mean and variance would always look finite; operations carry the index
instead, and a moment of order >= a is reported as ``inf``, never as the window's number.
"""

from __future__ import annotations

import math

import numpy as np

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


def _from_moments(dist: object) -> float:
    """A conservative index from the law's own mean and variance (1, 2 or inf)."""
    if not math.isfinite(dist.mean()):
        return 1.0
    if not math.isfinite(dist.var()):
        return 2.0
    return math.inf


def tail_index(dist: object) -> float:
    """The upper tail index of ``dist`` (``inf`` when every moment is finite).

    Parameters
    ----------
    dist : Distribution
        Any latency distribution of the package.

    Returns
    -------
    float
        Moments of order below the index are finite; from the index on they are infinite.
    """
    from .affine import Affine
    from .empirical import Empirical, PointMass
    from .extremes import IIDMax, MaxOfIndependent, MinOfIndependent, OrderStatistic
    from .mixture import Mixture
    from .parametric import ScipyDistribution

    own = getattr(dist, "tail_index", None)
    if isinstance(own, int | float):
        return float(own)
    if isinstance(dist, PointMass | Empirical):
        return math.inf
    if isinstance(dist, ScipyDistribution):
        rule = FAMILY_TAIL_INDEX.get(dist.family)
        shapes = [float(a) for a in dist.frozen.args]
        names = dist.frozen.dist.shapes
        if names:  # shape parameters passed by keyword
            for name in [s.strip() for s in names.split(",")][len(shapes) :]:
                if name in dist.frozen.kwds:
                    shapes.append(float(dist.frozen.kwds[name]))
        if rule is not None:
            try:
                return float(rule(shapes))
            except (IndexError, ZeroDivisionError):
                pass
        return _from_moments(dist)
    if isinstance(dist, Affine):
        return tail_index(dist.base)
    if isinstance(dist, Mixture):
        live = [c for w, c in zip(dist.weights, dist.components) if w > 0]
        return min(tail_index(c) for c in live)
    if isinstance(dist, IIDMax):
        return tail_index(dist.parent)
    if isinstance(dist, OrderStatistic):
        # The k-th smallest of n exceeds x only if n - k + 1 copies do: S^(n-k+1).
        return (dist.n - dist.k + 1) * tail_index(dist.parent)
    if isinstance(dist, MaxOfIndependent):
        return min(tail_index(d) for d in dist.dists)
    if isinstance(dist, MinOfIndependent):
        return float(np.sum([tail_index(d) for d in dist.dists]))
    return _from_moments(dist)
