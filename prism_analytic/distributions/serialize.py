"""Distributions to and from plain dicts (for JSON round trips of step graphs)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from .._checks import check_count, check_finite, check_nonnegative, check_positive
from .base import Affine, Distribution
from .empirical import Empirical, PointMass
from .exposed import ExposedComm
from .extremes import IIDMax, OrderStatistic
from .grid import GridDistribution
from .log_lattice import LogLatticeDistribution
from .mixture import Mixture
from .parametric import ScipyDistribution

__all__ = ["to_spec", "from_spec"]

#: Package classes that describe themselves with ``to_spec_fields()`` and rebuild with
#: ``from_spec_fields``, by the name a spec's ``class`` field holds (the old module path of
#: ExposedComm is kept so that graphs saved before it moved still load). A registry, not an
#: import by name: a spec file cannot make this module import code.
CUSTOM_CLASSES: dict[str, type] = {
    "ExposedComm": ExposedComm,
    "prism_analytic.workload.builder:ExposedComm": ExposedComm,
    "LogLatticeDistribution": LogLatticeDistribution,
}

#: Largest replica count a spec may name (the same limit as :func:`prism_analytic.iid_max`).
MAX_COUNT = 10**12


def to_spec(dist: Distribution) -> dict[str, Any]:
    """A JSON-friendly description of ``dist`` that :func:`from_spec` turns back into it.

    Distributions defined elsewhere in the package (e.g. the workload builder's) serialise
    themselves through a ``to_spec_fields()`` method and a ``from_spec_fields`` classmethod.
    """
    if type(dist) in CUSTOM_CLASSES.values():
        return {
            "type": "custom",
            "class": type(dist).__qualname__,
            "fields": dist.to_spec_fields(),
        }
    if isinstance(dist, IIDMax):
        return {"type": "iid_max", "n": dist.n, "parent": to_spec(dist.parent)}
    if isinstance(dist, OrderStatistic):
        return {"type": "order_statistic", "k": dist.k, "n": dist.n, "parent": to_spec(dist.parent)}
    if isinstance(dist, ScipyDistribution):
        return {
            "type": "scipy",
            "family": dist.family,
            "args": [float(a) for a in dist.frozen.args],
            "kwds": {k: float(v) for k, v in dist.frozen.kwds.items()},
        }
    if isinstance(dist, PointMass):
        return {"type": "point_mass", "value": dist.value}
    if isinstance(dist, Empirical):
        return {"type": "empirical", "samples": dist.samples.tolist()}
    if isinstance(dist, Mixture):
        return {
            "type": "mixture",
            "weights": dist.weights.tolist(),
            "components": [to_spec(c) for c in dist.components],
        }
    if isinstance(dist, Affine):
        return {
            "type": "affine",
            "shift": dist.shift_value,
            "scale": dist.scale_factor,
            "base": to_spec(dist.base),
        }
    if isinstance(dist, GridDistribution):
        return {
            "type": "grid",
            "h": dist.h,
            "k0": dist.k0,
            "lo": dist.lo.tolist(),
            "hi": dist.hi.tolist(),
            "below": dist.below,
            "above": dist.above,
        }
    raise TypeError(
        f"cannot serialise {type(dist).__name__}; supported: scipy, point_mass, "
        "empirical, mixture, affine, grid, iid_max, order_statistic, and classes "
        "with to_spec_fields()"
    )


def from_spec(spec: dict[str, Any], where: str = "latency") -> Distribution:
    """Rebuild a distribution from :func:`to_spec`'s output; ``where`` names it in errors."""
    if not isinstance(spec, dict) or "type" not in spec:
        raise ValueError(f"{where} must be an object with a 'type' key, got {spec!r}")
    kind = spec["type"]
    try:
        if kind == "scipy":
            family = getattr(stats, spec["family"], None)
            if not isinstance(family, stats.rv_continuous):
                raise ValueError(
                    f"{where}.family: unknown scipy.stats continuous family {spec['family']!r}"
                )
            try:
                return ScipyDistribution(family(*spec.get("args", []), **spec.get("kwds", {})))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}: {exc}") from None
        if kind == "point_mass":
            return PointMass(spec["value"])
        if kind == "empirical":
            return Empirical(spec["samples"])
        if kind == "mixture":
            comps = [
                from_spec(c, f"{where}.components[{i}]") for i, c in enumerate(spec["components"])
            ]
            return Mixture(comps, spec["weights"])
        if kind == "affine":
            shift = check_finite(spec["shift"], f"{where}.shift")
            scale = check_positive(spec["scale"], f"{where}.scale")
            return Affine(from_spec(spec["base"], f"{where}.base"), shift, scale)
        if kind == "iid_max":
            n = check_count(spec["n"], f"{where}.n", minimum=1, maximum=MAX_COUNT)
            return IIDMax(from_spec(spec["parent"], f"{where}.parent"), n)
        if kind == "order_statistic":
            n = check_count(spec["n"], f"{where}.n", minimum=1, maximum=MAX_COUNT)
            k = check_count(spec["k"], f"{where}.k", minimum=1, maximum=n)
            return OrderStatistic(from_spec(spec["parent"], f"{where}.parent"), k, n)
        if kind == "custom":
            return _custom(spec["class"], spec["fields"], where)
        if kind == "grid":
            return _grid_from_spec(spec, where)
    except KeyError as exc:
        raise ValueError(f"{where}: missing field {exc.args[0]!r} for type {kind!r}") from None
    raise ValueError(
        f"{where}.type must be one of scipy, point_mass, empirical, mixture, affine, "
        f"grid, iid_max, order_statistic, custom; got {kind!r}"
    )


def _grid_from_spec(spec: dict[str, Any], where: str) -> GridDistribution:
    """A grid from its fields, checked: masses non-negative, each side a probability law."""
    h = check_positive(spec["h"], f"{where}.h")
    k0 = check_count(spec["k0"], f"{where}.k0", minimum=-(2**62), maximum=2**62)
    sides = {}
    for name in ("lo", "hi"):
        try:
            arr = np.asarray(spec[name], dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{where}.{name} must be a list of numbers") from None
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"{where}.{name} must be a non-empty list of numbers")
        if not np.isfinite(arr).all() or (arr < 0).any():
            raise ValueError(f"{where}.{name} must hold finite masses >= 0")
        sides[name] = arr
    if sides["lo"].size != sides["hi"].size:
        raise ValueError(f"{where}.lo and {where}.hi must have the same length")
    below = check_nonnegative(spec["below"], f"{where}.below")
    above = check_nonnegative(spec["above"], f"{where}.above")
    for name, total in (("lo", sides["lo"].sum() + below), ("hi", sides["hi"].sum() + above)):
        if abs(total - 1.0) > 1e-9:
            atom = "below" if name == "lo" else "above"
            raise ValueError(
                f"{where}: {name} masses plus {atom} must sum to 1 (within 1e-9), got {total:.12g}"
            )
    # The lower side must be stochastically below the upper side, or brackets invert.
    f_lo = below + np.cumsum(sides["lo"])
    f_hi = np.cumsum(sides["hi"])
    if (f_hi > f_lo + 1e-9).any():
        raise ValueError(
            f"{where}: the 'lo' side must lie below the 'hi' side (its CDF above hi's "
            "everywhere); the sides look swapped"
        )
    return GridDistribution(h, k0, sides["lo"], sides["hi"], below, above)


def _custom(name: str, fields: dict[str, Any], where: str) -> Distribution:
    """Rebuild a registered package class (:data:`CUSTOM_CLASSES`) from its fields."""
    cls = CUSTOM_CLASSES.get(str(name))
    if cls is None:
        raise ValueError(f"{where}.class must be one of {sorted(CUSTOM_CLASSES)}, got {name!r}")
    if not isinstance(fields, dict):
        raise ValueError(f"{where}.fields must be an object, got {fields!r}")
    return cls.from_spec_fields(fields)
