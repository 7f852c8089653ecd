"""Engines that turn a step graph into a step-time distribution."""

from .crosscheck import verify
from .montecarlo import MonteCarloSettings, sample_step
from .predict import METHODS, predict
from .result import AnalyticResult, BoundsResult, MonteCarloResult, StepTimeResult

__all__ = [
    "METHODS",
    "AnalyticResult",
    "BoundsResult",
    "MonteCarloResult",
    "MonteCarloSettings",
    "StepTimeResult",
    "predict",
    "sample_step",
    "verify",
]
