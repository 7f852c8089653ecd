"""Engines that turn a step graph into a step-time distribution."""

from .montecarlo import MonteCarloSettings, sample_step
from .predict import METHODS, predict
from .result import StepTimeResult

__all__ = ["METHODS", "MonteCarloSettings", "StepTimeResult", "predict", "sample_step"]
