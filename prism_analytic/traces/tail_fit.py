"""Spliced law: a normal body with a generalized Pareto (GPD) upper tail.

The slowest of n draws is decided by the upper ``1/n`` of the law, which a whole-sample family
fitted by likelihood describes poorly when a few values (slow outliers) sit far above the body:
the body's many points dominate the likelihood. The peaks-over-threshold recipe of extreme
value theory models the two parts separately: values at or below the threshold ``u`` (the
sample's ``1 - tail_fraction`` quantile, a fixed rule, not tuned) follow a normal law truncated
at ``u``; the excesses over ``u`` follow a GPD (``scipy.stats.genpareto``), whose shape says how
heavy the tail is. The tail weight ``w`` is the fraction of values above ``u`` (its maximum
likelihood estimate). All five parameters (mu, sigma, w, GPD shape and scale) come from maximum
likelihood, so the fit has a proper density and an AIC comparable with whole-sample families.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

__all__ = ["SplicedFit", "fit_spliced"]

#: Lower truncation of the normal body in its own standard units: a finite stand-in for minus
#: infinity (``prism_analytic.from_scipy`` needs finite parameters; Phi(-40) is 0 in doubles).
_BODY_LOWER_Z = -40.0


@dataclass(frozen=True)
class SplicedFit:
    """A normal body below ``threshold`` spliced with a GPD tail above it.

    Attributes
    ----------
    mu, sigma : float
        Parameters of the (untruncated) normal whose part below ``threshold`` is the body.
    threshold : float
        The splice point ``u``.
    tail_weight : float
        Probability of exceeding ``u``.
    shape, scale : float
        GPD shape ``c`` (> 0: heavy, power-law tail; < 0: bounded) and scale of the excesses.
    n : int
        Sample size.
    loglik : float
        Maximized log-likelihood of the sample.
    """

    mu: float
    sigma: float
    threshold: float
    tail_weight: float
    shape: float
    scale: float
    n: int
    loglik: float

    family = "normal body + GPD tail"
    #: Estimated parameters (mu, sigma, w, shape, scale); the threshold is set by rule.
    n_params = 5

    @property
    def aic(self) -> float:
        """Akaike information criterion, ``2 k - 2 log L`` with k = 5."""
        return 2 * self.n_params - 2 * self.loglik

    @property
    def body(self):
        """The frozen truncated normal of the body (scipy)."""
        b = (self.threshold - self.mu) / self.sigma
        return stats.truncnorm(_BODY_LOWER_Z, b, loc=self.mu, scale=self.sigma)

    @property
    def tail(self):
        """The frozen GPD of the values above the threshold (scipy, located at ``u``)."""
        return stats.genpareto(self.shape, loc=self.threshold, scale=self.scale)

    def cdf(self, x) -> np.ndarray:
        """Cumulative distribution function at ``x``."""
        x = np.asarray(x, dtype=float)
        w = self.tail_weight
        return (1 - w) * self.body.cdf(x) + w * self.tail.cdf(x)

    def logpdf(self, x) -> np.ndarray:
        """Log density at ``x`` (``-inf`` outside the support)."""
        x = np.asarray(x, dtype=float)
        w = self.tail_weight
        with np.errstate(divide="ignore"):
            below = np.log1p(-w) + self.body.logpdf(x)
            above = np.log(w) + self.tail.logpdf(x)
        return np.where(x <= self.threshold, below, above)

    def rvs(self, size, rng) -> np.ndarray:
        """``size`` random draws with the generator ``rng``."""
        in_tail = rng.random(size) < self.tail_weight
        body = self.body.rvs(size=size, random_state=rng)
        tail = self.tail.rvs(size=size, random_state=rng)
        return np.where(in_tail, tail, body)

    def distribution(self):
        """The law as a ``prism_analytic`` mixture (body, tail) for the analytic engine."""
        import prism_analytic as pa

        w = self.tail_weight
        return pa.mixture([pa.from_scipy(self.body), pa.from_scipy(self.tail)], [1 - w, w])

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {
            "family": self.family,
            "mu": float(self.mu),
            "sigma": float(self.sigma),
            "threshold": float(self.threshold),
            "tail_weight": float(self.tail_weight),
            "gpd_shape": float(self.shape),
            "gpd_scale": float(self.scale),
            "n": self.n,
            "aic": float(self.aic),
        }


def fit_spliced(samples, *, tail_fraction: float = 0.1) -> SplicedFit:
    """Fit a normal body + GPD tail by maximum likelihood.

    Parameters
    ----------
    samples : array_like
        Finite values; at least 5 must lie above the threshold and 8 at or below it.
    tail_fraction : float
        In (0, 0.5]: the threshold is the sample's ``1 - tail_fraction`` quantile (numpy linear).

    Returns
    -------
    SplicedFit

    Raises
    ------
    ValueError
        Non-finite values, a bad ``tail_fraction``, too few values on either side of the
        threshold, or excesses that are all equal.
    """
    x = np.sort(np.asarray(samples, dtype=float).ravel())
    if not np.isfinite(x).all():
        raise ValueError("samples: values must be finite")
    if not 0 < tail_fraction <= 0.5:
        raise ValueError(f"tail_fraction must be in (0, 0.5], got {tail_fraction!r}")
    u = float(np.quantile(x, 1 - tail_fraction))
    body, excess = x[x <= u], x[x > u] - u
    if excess.size < 5 or body.size < 8:
        raise ValueError(
            f"samples: need >= 5 values above the threshold {u:.6g} and >= 8 at or below it, "
            f"got {excess.size} and {body.size} (n = {x.size}, tail_fraction = {tail_fraction})"
        )
    if np.ptp(excess) == 0 or np.ptp(body) == 0:
        raise ValueError("samples: body or tail values are all equal; nothing to fit")

    def body_nll(p):
        mu, log_s = p
        s = np.exp(log_s)
        return -(stats.norm.logpdf(body, mu, s).sum() - body.size * stats.norm.logcdf(u, mu, s))

    start = [float(np.median(body)), float(np.log(np.std(body)))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = optimize.minimize(body_nll, start, method="Nelder-Mead")
        shape, _, scale = stats.genpareto.fit(excess, floc=0.0)
    if not res.success or not np.isfinite(res.fun):
        raise ValueError(f"samples: the truncated-normal body fit failed ({res.message})")
    w = excess.size / x.size
    loglik = (
        -res.fun
        + body.size * np.log1p(-w)
        + excess.size * np.log(w)
        + stats.genpareto.logpdf(excess, shape, 0.0, scale).sum()
    )
    return SplicedFit(
        mu=float(res.x[0]),
        sigma=float(np.exp(res.x[1])),
        threshold=u,
        tail_weight=float(w),
        shape=float(shape),
        scale=float(scale),
        n=int(x.size),
        loglik=float(loglik),
    )
