"""The step DAG (ops, collectives, replica groups, regimes)."""

from .step_graph import OP, PIPELINE, REPLICA, GraphError, Regime, StepGraph

__all__ = ["GraphError", "OP", "PIPELINE", "REPLICA", "Regime", "StepGraph"]
