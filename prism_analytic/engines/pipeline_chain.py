"""Makespan of a one-stage pipeline: a chain of i.i.d. ops, summed in O(log m) convolutions.

With one stage every op of the schedule runs on the same device, one after the other, so the
makespan is the sum of all ``2 * m * vpp`` op latencies: for each (phase, chunk) law, the sum of
``m`` independent copies. :func:`~prism_analytic.operations.iid_sum` evaluates each such sum by
repeated squaring, and the few per-law sums are convolved. This is the
same exact law as the op-by-op chain, whose series-parallel reduction costs ``2 m v``
convolutions (1,024 of them for a one-stage, 512-microbatch job). Each law's sum is formed by
repeated squaring on the chain's own lattice: a rounding sandwich's width adds under
convolution, so the bracket is the chain's (``m`` cells per law) at ``O(log m)`` convolutions.
"""

from __future__ import annotations

from typing import Any

from ..distributions import GridDistribution, to_grid
from ..distributions.doubling import sum_by_doubling
from ..distributions.grid import convolve_grids
from ..policy import GridPolicy

__all__ = ["single_stage_makespan"]


def single_stage_makespan(spec: Any, h: float, policy: GridPolicy) -> GridDistribution:
    """The exact makespan law of a plain one-stage :class:`~prism_analytic.graph.PipelineSpec`.

    Parameters
    ----------
    spec : PipelineSpec
        A pipeline with ``stages == 1`` and no shared microbatch or stage factor.
    h : float
        Lattice spacing requested by the caller (the result is on ``h`` or coarser, as a sum
        of grids always is).
    policy : GridPolicy
        Grid policy of the sums.

    Returns
    -------
    GridDistribution
        The law of the sum of every op latency (a rounding sandwich with its bracket).

    Raises
    ------
    ValueError
        If ``spec`` has more than one stage or carries a shared factor (its ops are then not a
        chain of independent latencies).
    """
    if spec.stages != 1:
        raise ValueError(f"spec.stages must be 1 for a one-stage chain, got {spec.stages}")
    if spec.microbatch_factor is not None or spec.stage_factor is not None:
        raise ValueError("spec must have no microbatch_factor or stage_factor (shared factors)")
    total: GridDistribution | None = None
    for key in spec.keys():
        part = _iid_sum_on(to_grid(spec.laws[key], h, policy), spec.microbatches)
        total = part if total is None else convolve_grids(total, part)
    return total


def _iid_sum_on(base: GridDistribution, m: int) -> GridDistribution:
    """The sum of ``m`` independent copies of ``base`` by repeated squaring on its lattice."""
    return sum_by_doubling(base, m, convolve_grids, lambda g: convolve_grids(g, g))
