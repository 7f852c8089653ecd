"""prism_analytic: analytic probability distributions of distributed-training step time.

Sums by numerical convolution, maxima by products of CDFs, the slowest of n identical ranks
exactly as F^n, each with a guaranteed numerical bracket; Monte Carlo as the cross-check.

The public names are imported on first use (PEP 562), so that ``import prism_analytic`` and
the ``prism`` command's start-up do not pay for numpy/scipy until a name is needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Each public name and the submodule (relative to this package) that defines it.
_LAZY_NAMES: dict[str, str] = {
    "DEFAULT_POLICY": ".policy",
    "GridPolicy": ".policy",
    "Job": ".job",
    "Distribution": ".distributions",
    "Empirical": ".distributions",
    "GridDistribution": ".distributions",
    "LogLatticeDistribution": ".distributions",
    "Mixture": ".distributions",
    "PointMass": ".distributions",
    "ScipyDistribution": ".distributions",
    "empirical": ".distributions",
    "exponential": ".distributions",
    "from_scipy": ".distributions",
    "gamma": ".distributions",
    "lognormal": ".distributions",
    "mixture": ".distributions",
    "normal": ".distributions",
    "pareto": ".distributions",
    "point_mass": ".distributions",
    "uniform": ".distributions",
    "MonteCarloSettings": ".engines",
    "StepTimeResult": ".engines",
    "predict": ".engines",
    "verify": ".engines",
    "evt_family": ".evt",
    "evt_max": ".evt",
    "GraphError": ".graph",
    "StepGraph": ".graph",
    "convolve": ".operations",
    "iid_max": ".operations",
    "iid_sum": ".operations",
    "max_independent": ".operations",
    "min_independent": ".operations",
    "order_statistic": ".operations",
}

__all__ = [
    "DEFAULT_POLICY",
    "Job",
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


def __getattr__(name: str) -> Any:
    """Import a public name's submodule on first access and cache the name here."""
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    """The module's own names plus the lazily imported public ones."""
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # static analysers and IDEs see the eager imports
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
    from .job import Job
    from .operations import (
        convolve,
        iid_max,
        iid_sum,
        max_independent,
        min_independent,
        order_statistic,
    )
    from .policy import DEFAULT_POLICY, GridPolicy
