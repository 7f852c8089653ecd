"""The step DAG (ops, collectives, replica groups, regimes)."""

from .step_graph import OP, REPLICA, GraphError, Regime, StepGraph

__all__ = ["GraphError", "OP", "REPLICA", "Regime", "StepGraph"]
