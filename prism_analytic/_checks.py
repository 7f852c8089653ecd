"""Input validation at the public boundary: clear errors that name the argument."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

__all__ = [
    "check_finite",
    "check_positive",
    "check_nonnegative",
    "check_count",
    "check_probabilities",
    "check_x",
]


def check_finite(value: object, name: str) -> float:
    """Return ``value`` as a float, or raise if it is not a finite real number."""
    if isinstance(value, bool) or not isinstance(value, Real | np.number):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"{name} must be finite, got {out}")
    return out


def check_positive(value: object, name: str) -> float:
    """Return ``value`` as a float, or raise unless it is finite and > 0."""
    out = check_finite(value, name)
    if out <= 0:
        raise ValueError(f"{name} must be > 0, got {out}")
    return out


def check_nonnegative(value: object, name: str) -> float:
    """Return ``value`` as a float, or raise unless it is finite and >= 0."""
    out = check_finite(value, name)
    if out < 0:
        raise ValueError(f"{name} must be >= 0, got {out}")
    return out


def check_count(value: object, name: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an int, or raise unless it is an integer in [minimum, maximum]."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got bool {value!r}")
    if isinstance(value, Integral):
        out = int(value)
    elif isinstance(value, Real | np.floating) and float(value).is_integer():
        out = int(value)
    else:
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if out < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {out}")
    if maximum is not None and out > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {out}")
    return out


def check_probabilities(q: object, name: str = "q") -> np.ndarray:
    """Return ``q`` as a float array, or raise unless every entry lies in [0, 1]."""
    try:
        arr = np.asarray(q, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be numeric quantile levels in [0, 1], got {q!r}") from exc
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not contain NaN")
    if (arr < 0).any() or (arr > 1).any():
        bad = arr[(arr < 0) | (arr > 1)].ravel()[0]
        raise ValueError(f"{name} must lie in [0, 1] (quantile levels, not percent), got {bad}")
    return arr


def check_x(x: object, name: str = "x") -> np.ndarray:
    """Return ``x`` as a float array, or raise if it contains NaN (infinities are allowed)."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be numeric, got {x!r}") from exc
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not contain NaN")
    return arr
