"""Distributions to and from plain dicts (for JSON round trips of step graphs)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from .affine import Affine
from .base import Distribution
from .empirical import Empirical, PointMass
from .grid import GridDistribution
from .mixture import Mixture
from .parametric import ScipyDistribution

__all__ = ["to_spec", "from_spec"]


def to_spec(dist: Distribution) -> dict[str, Any]:
    """A JSON-friendly description of ``dist`` that :func:`from_spec` turns back into it."""
    if isinstance(dist, ScipyDistribution):
        return {"type": "scipy", "family": dist.family, "args": [float(a) for a in dist.frozen.args],
                "kwds": {k: float(v) for k, v in dist.frozen.kwds.items()}}
    if isinstance(dist, PointMass):
        return {"type": "point_mass", "value": dist.value}
    if isinstance(dist, Empirical):
        return {"type": "empirical", "samples": dist.samples.tolist()}
    if isinstance(dist, Mixture):
        return {"type": "mixture", "weights": dist.weights.tolist(),
                "components": [to_spec(c) for c in dist.components]}
    if isinstance(dist, Affine):
        return {"type": "affine", "shift": dist.shift_value, "scale": dist.scale_factor,
                "base": to_spec(dist.base)}
    if isinstance(dist, GridDistribution):
        return {"type": "grid", "h": dist.h, "k0": dist.k0, "lo": dist.lo.tolist(),
                "hi": dist.hi.tolist(), "below": dist.below, "above": dist.above}
    raise TypeError(f"cannot serialise {type(dist).__name__}; supported: scipy, point_mass, "
                    "empirical, mixture, affine, grid")


def from_spec(spec: dict[str, Any], where: str = "latency") -> Distribution:
    """Rebuild a distribution from :func:`to_spec`'s output; ``where`` names it in errors."""
    if not isinstance(spec, dict) or "type" not in spec:
        raise ValueError(f"{where} must be an object with a 'type' key, got {spec!r}")
    kind = spec["type"]
    try:
        if kind == "scipy":
            family = getattr(stats, spec["family"], None)
            if not isinstance(family, stats.rv_continuous):
                raise ValueError(f"{where}.family: unknown scipy.stats continuous family "
                                 f"{spec['family']!r}")
            try:
                return ScipyDistribution(family(*spec.get("args", []), **spec.get("kwds", {})))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}: {exc}") from None
        if kind == "point_mass":
            return PointMass(spec["value"])
        if kind == "empirical":
            return Empirical(spec["samples"])
        if kind == "mixture":
            comps = [from_spec(c, f"{where}.components[{i}]")
                     for i, c in enumerate(spec["components"])]
            return Mixture(comps, spec["weights"])
        if kind == "affine":
            return Affine(from_spec(spec["base"], f"{where}.base"), spec["shift"], spec["scale"])
        if kind == "grid":
            return GridDistribution(spec["h"], spec["k0"], np.asarray(spec["lo"]),
                                    np.asarray(spec["hi"]), spec["below"], spec["above"])
    except KeyError as exc:
        raise ValueError(f"{where}: missing field {exc.args[0]!r} for type {kind!r}") from None
    raise ValueError(f"{where}.type must be one of scipy, point_mass, empirical, mixture, affine, "
                     f"grid; got {kind!r}")
