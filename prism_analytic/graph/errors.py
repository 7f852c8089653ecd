"""The error of a step graph that cannot be evaluated."""

__all__ = ["GraphError"]


class GraphError(ValueError):
    """A step graph that cannot be evaluated: cycles, unknown nodes, bad sizes or latencies."""
