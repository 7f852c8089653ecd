"""Latency distributions: one interface (cdf, sf, quantile, mean, std, sample, support)."""

from .base import Affine, Distribution, affine, as_rng
from .empirical import Empirical, PointMass, empirical, point_mass
from .extremes import IIDMax, MaxOfIndependent, MinOfIndependent, OrderStatistic
from .grid import GridDistribution, discretize, to_grid
from .log_lattice import LogLatticeDistribution
from .mixture import Mixture, mixture
from .parametric import (
    ScipyDistribution,
    exponential,
    from_scipy,
    gamma,
    lognormal,
    normal,
    pareto,
    uniform,
)

__all__ = [
    "Affine",
    "Distribution",
    "Empirical",
    "GridDistribution",
    "IIDMax",
    "LogLatticeDistribution",
    "MaxOfIndependent",
    "MinOfIndependent",
    "Mixture",
    "OrderStatistic",
    "PointMass",
    "ScipyDistribution",
    "affine",
    "as_rng",
    "discretize",
    "empirical",
    "exponential",
    "from_scipy",
    "gamma",
    "lognormal",
    "mixture",
    "normal",
    "pareto",
    "point_mass",
    "to_grid",
    "uniform",
]
