"""prism_analytic: analytic probability distributions of distributed-training step time.

Sums by numerical convolution, maxima by products of CDFs, the slowest of n identical ranks
exactly as F^n, each with a guaranteed numerical bracket; Monte Carlo as the cross-check.
"""

from .distributions import (
    Distribution,
    Empirical,
    GridDistribution,
    LogLatticeDistribution,
    Mixture,
    PointMass,
    ScipyDistribution,
    empirical,
    exponential,
    from_scipy,
    gamma,
    lognormal,
    mixture,
    normal,
    pareto,
    point_mass,
    uniform,
)
from .engines import MonteCarloSettings, StepTimeResult, predict, verify
from .evt import evt_family, evt_max
from .graph import GraphError, StepGraph
from .operations import (
    convolve,
    iid_max,
    iid_sum,
    max_independent,
    min_independent,
    order_statistic,
)
from .policy import DEFAULT_POLICY, GridPolicy

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_POLICY",
    "Distribution",
    "GraphError",
    "MonteCarloSettings",
    "StepGraph",
    "StepTimeResult",
    "evt_family",
    "evt_max",
    "predict",
    "verify",
    "Empirical",
    "GridDistribution",
    "LogLatticeDistribution",
    "GridPolicy",
    "Mixture",
    "PointMass",
    "ScipyDistribution",
    "convolve",
    "empirical",
    "exponential",
    "from_scipy",
    "gamma",
    "iid_max",
    "iid_sum",
    "lognormal",
    "max_independent",
    "min_independent",
    "mixture",
    "normal",
    "order_statistic",
    "pareto",
    "point_mass",
    "uniform",
]
