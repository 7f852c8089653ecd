"""The exposed part of an overlapped communication: ``max(0, a * M - hidden)``, in closed form."""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
from scipy import special

from .base import Distribution

__all__ = ["ExposedComm", "MAX_EVENTS", "tail_components"]

#: Most independent events one law takes (its mixture has up to ``2 ** (MAX_EVENTS + 1)``
#: components, each evaluated at every grid point).
MAX_EVENTS = 8


def _check_events(events: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """``events`` as float pairs, those without effect (probability 0 or factor 1) dropped."""
    out = []
    for i, ev in enumerate(events):
        try:
            p, g = (float(x) for x in ev)
        except (TypeError, ValueError):
            raise ValueError(
                f"events[{i}] must be a (probability, factor) pair, got {ev!r}"
            ) from None
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"events[{i}] probability must be in [0, 1], got {p!r}")
        if not (math.isfinite(g) and g >= 1.0):
            raise ValueError(f"events[{i}] factor must be a finite number >= 1, got {g!r}")
        if p > 0 and g > 1:
            out.append((p, g))
    if len(out) > MAX_EVENTS:
        raise ValueError(f"events: at most {MAX_EVENTS} events with an effect, got {len(out)}")
    return tuple(out)


def tail_components(
    tail_prob: float, tail_factor: float, events: Sequence[tuple[float, float]] = ()
) -> tuple[np.ndarray, np.ndarray]:
    """Weights and values of a tier's tail multiplier ``T`` (exact, as a finite mixture).

    ``T = 1 + (tail_factor - 1) I_0 + sum_i (factor_i - 1) I_i`` with independent indicators:
    ``I_0`` of the tier's own tail (probability ``tail_prob``) and ``I_i`` of each further
    event ``(probability_i, factor_i)`` (e.g. a per-node event of ``variability.scale``).
    Events are delays of one instance, so when several strike their excesses add; each
    event doubles the components (none / it), with weights multiplied by ``1 - p`` / ``p``.

    Parameters
    ----------
    tail_prob, tail_factor : float
        The tier's own tail (no tail unless ``tail_prob > 0`` and ``tail_factor > 1``).
    events : sequence of (float, float)
        Further independent events, (probability in [0, 1], factor >= 1); at most
        :data:`MAX_EVENTS` with an effect.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Weights (summing to one) and multipliers.
    """
    q, f = float(tail_prob), float(tail_factor)
    if q > 0 and f > 1:
        w, m = np.array([1 - q, q]), np.array([1.0, f])
    else:
        w, m = np.array([1.0]), np.array([1.0])
    for p, g in _check_events(events):
        w, m = np.concatenate([w * (1.0 - p), w * p]), np.concatenate([m, m + (g - 1.0)])
    return w, m


class ExposedComm(Distribution):
    """``max(0, a * M - hidden)``: the exposed part of a communication of mean time ``a``.

    ``M`` is a tier's noise multiplier (``tier``: anything with ``sigma``, ``tail_prob`` and
    ``tail_factor``, such as :class:`~prism_analytic.workload.config.TierNoise`): a mean-one
    lognormal with shape ``sigma``, times ``tail_factor`` with probability ``tail_prob``; ``hidden``
    (>= 0) is the part that overlap hides; ``events`` are further independent (probability,
    factor) events on the same instance, exact as extra mixture components
    (:func:`tail_components`). Everything is closed form (CDF, survival, mean and
    variance through normal CDFs, as in the Black-Scholes formula; quantiles by vectorised
    bisection in log space), so the engines never integrate or invert it numerically.
    Quantile levels inside the atom at 0 return ``-1e-12 * a`` (see :meth:`_quantile`).
    A ``sigma`` of 0 is floored at 1e-6 (a mixture of point masses is not gridded exactly).
    """

    def __init__(
        self, a: float, tier: Any, hidden: float = 0.0, events: Sequence[tuple[float, float]] = ()
    ) -> None:
        if not (math.isfinite(a) and a > 0):
            raise ValueError(f"a must be a finite positive time, got {a!r}")
        if not (math.isfinite(hidden) and hidden >= 0):
            raise ValueError(f"hidden must be a finite time >= 0, got {hidden!r}")
        self.a, self.hidden = float(a), float(hidden)
        self.sigma = max(float(tier.sigma), 1e-6)
        q, f = float(tier.tail_prob), float(tier.tail_factor)
        # the tier's own tail as the spec names it (as before events existed: bit-identical)
        self._tail = (q, self.a * f / self.a) if q > 0 and f > 1 else (0.0, 1.0)
        self.events = _check_events(events)
        self.w, m = tail_components(q, f, self.events)
        self.scales = self.a * m
        self.mu = -0.5 * self.sigma**2  # log-mean of the mean-one body

    def to_spec_fields(self) -> dict[str, Any]:
        """Constructor arguments, for JSON round trips of step graphs."""
        out: dict[str, Any] = {
            "a": self.a,
            "hidden": self.hidden,
            "sigma": self.sigma,
            "tail_prob": self._tail[0],
            "tail_factor": self._tail[1],
        }
        if self.events:  # only then: specs of graphs without events are unchanged
            out["events"] = [list(e) for e in self.events]
        return out

    @classmethod
    def from_spec_fields(cls, fields: dict[str, Any]) -> ExposedComm:
        """Inverse of :meth:`to_spec_fields`."""
        tier = SimpleNamespace(
            sigma=fields["sigma"], tail_prob=fields["tail_prob"], tail_factor=fields["tail_factor"]
        )
        return cls(fields["a"], tier, fields["hidden"], fields.get("events", ()))

    def __repr__(self) -> str:
        return (
            f"ExposedComm(a={self.a:.6g}, sigma={self.sigma:g}, hidden={self.hidden:.6g},"
            f" tail={self.w[1:].tolist()}x{(self.scales[1:] / self.a).tolist()})"
        )

    @property
    def support(self) -> tuple[float, float]:
        """Exposure is never negative and has no upper end."""
        return 0.0, math.inf

    def _z(self, x: np.ndarray) -> np.ndarray:
        """Standardised log of (x + hidden) / scale per component: shape (..., components)."""
        y = np.maximum(np.asarray(x, dtype=float) + self.hidden, 0.0)[..., None]
        with np.errstate(divide="ignore"):
            return (np.log(y) - np.log(self.scales) - self.mu) / self.sigma

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        out = special.ndtr(self._z(x)) @ self.w
        return np.where(np.asarray(x) < 0, 0.0, out)

    def _sf(self, x: np.ndarray) -> np.ndarray:
        out = special.ndtr(-self._z(x)) @ self.w
        return np.where(np.asarray(x) < 0, 1.0, out)

    def _solve(self, level: np.ndarray, upper: bool) -> np.ndarray:
        """X with cdf(x) = level (or sf(x) = level when ``upper``), for x >= 0."""
        level = np.asarray(level, dtype=float)
        # each component's own quantile in log space brackets the mixture's
        z = special.ndtri(level) if not upper else -special.ndtri(level)
        comp = np.log(self.scales) + self.mu + self.sigma * z[..., None]
        lo, hi = comp.min(axis=-1), comp.max(axis=-1)
        for _ in range(64 if len(self.w) > 1 else 0):
            mid = 0.5 * (lo + hi)
            zm = (mid[..., None] - np.log(self.scales) - self.mu) / self.sigma
            if upper:
                below = special.ndtr(-zm) @ self.w > level
            else:
                below = special.ndtr(zm) @ self.w < level
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        with np.errstate(over="ignore"):
            return np.maximum(np.exp(0.5 * (lo + hi)) - self.hidden, 0.0)

    def _quantile(self, q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, dtype=float)
        out = self._solve(np.clip(q, 1e-300, 1.0), upper=False)
        # Levels inside the atom at 0 map to a point a hair below 0 (1e-12 a): the grid
        # discretisation starts at the lowest quantile and would otherwise book the atom as
        # mass *below* its grid (an infinite lower bound and a biased mean).
        return np.where(q <= self._cdf(np.zeros_like(q)), -1e-12 * self.a, out)

    def _isf(self, p: np.ndarray) -> np.ndarray:
        p = np.asarray(p, dtype=float)
        out = self._solve(np.clip(p, 1e-300, 1.0), upper=True)
        return np.where(p >= self._sf(np.zeros_like(p)), 0.0, out)

    def _partial(self, n: int) -> np.ndarray:
        """E[L^n; L > k_j] per component, L the mean-one lognormal, k_j = hidden / scale_j."""
        s = self.sigma
        with np.errstate(divide="ignore"):
            lk = (
                np.log(self.hidden / self.scales)
                if self.hidden > 0
                else np.full_like(self.scales, -np.inf)
            )
        return np.exp(n * self.mu + 0.5 * n * n * s * s) * special.ndtr(
            (self.mu + n * s * s - lk) / s
        )

    def _mean(self) -> float:
        e0, e1 = self._partial(0), self._partial(1)
        return float(self.w @ (self.scales * e1 - self.hidden * e0))

    def _var(self) -> float:
        e0, e1, e2 = self._partial(0), self._partial(1), self._partial(2)
        h = self.hidden
        second = float(self.w @ (self.scales**2 * e2 - 2 * h * self.scales * e1 + h * h * e0))
        return max(0.0, second - self._mean() ** 2)

    def _sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        comp = rng.choice(len(self.w), size=size, p=self.w)
        body = np.exp(self.mu + self.sigma * rng.standard_normal(size))
        return np.maximum(self.scales[comp] * body - self.hidden, 0.0)
