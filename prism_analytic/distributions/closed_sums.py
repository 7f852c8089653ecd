"""Sums with closed forms: normal + normal is normal, gammas of one scale add their shapes.

Where the law of a sum is known exactly, no lattice is needed and no bracket is lost, whatever
the number of terms (a run of 1e9 gamma steps is Gamma(1e9 k, theta)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats

from .base import Affine, Distribution
from .parametric import ScipyDistribution, from_scipy

__all__ = ["closed_form_sum", "closed_form_iid_sum"]


def _params(dist: Distribution) -> tuple[str, float, float, float] | None:
    """(family, shape, loc, scale) of a normal/gamma/exponential law, through affine maps."""
    a, c = 1.0, 0.0
    if isinstance(dist, Affine):
        a, c, dist = dist.scale_factor, dist.shift_value, dist.base
    if not isinstance(dist, ScipyDistribution) or dist.family not in ("norm", "gamma", "expon"):
        return None
    frozen = dist.frozen
    shapes, loc, scale = frozen.dist._parse_args(*frozen.args, **frozen.kwds)
    if dist.family == "norm":
        return "norm", 0.0, a * float(loc) + c, a * float(scale)
    shape = float(shapes[0]) if dist.family == "gamma" else 1.0
    return "gamma", shape, a * float(loc) + c, a * float(scale)


def closed_form_sum(dists: Sequence[Distribution]) -> Distribution | None:
    """The exact law of a sum of independent normals, or of gammas with one scale; else None."""
    params = [_params(d) for d in dists]
    if any(p is None for p in params):
        return None
    families = {p[0] for p in params}
    loc = math.fsum(p[2] for p in params)
    if families == {"norm"}:
        return from_scipy(stats.norm(loc, math.sqrt(math.fsum(p[3] ** 2 for p in params))))
    scales = [p[3] for p in params]
    if families == {"gamma"} and max(scales) - min(scales) <= 1e-15 * max(scales):
        return from_scipy(stats.gamma(math.fsum(p[1] for p in params), loc=loc, scale=scales[0]))
    return None


def closed_form_iid_sum(dist: Distribution, m: int) -> Distribution | None:
    """The exact law of the sum of ``m`` i.i.d. normals or gammas (exponentials); else None."""
    p = _params(dist)
    if p is None:
        return None
    family, shape, loc, scale = p
    if family == "norm":
        return from_scipy(stats.norm(m * loc, math.sqrt(m) * scale))
    return from_scipy(stats.gamma(m * shape, loc=m * loc, scale=scale))
