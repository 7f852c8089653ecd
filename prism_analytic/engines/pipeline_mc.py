"""Vectorised Monte Carlo of a compact pipeline node (exact semantics, op by op).

Every op of the schedule gets a fresh draw of its law; finish times are propagated one
topological generation at a time over a block of samples. Draws come law by law for the whole
block (one call per law), so the cost is a few numpy calls per generation plus the draws.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["sample_pipeline"]

#: Largest (ops x samples) array held at once (float64: 8 bytes each).
MAX_CELLS = 2**23


def sample_pipeline(
    spec: Any,
    size: int,
    rng: np.random.Generator,
    draw: Callable[[Any, int], np.ndarray] | None = None,
) -> np.ndarray:
    """``size`` independent makespans of a :class:`~prism_analytic.graph.pipeline.PipelineSpec`.

    Parameters
    ----------
    spec : PipelineSpec
    size : int
        Number of samples.
    rng : numpy.random.Generator
    draw : callable, optional
        ``draw(law, size)`` -> one op's ``size`` draws, called op by op in topological order
        (for a sampler that feeds its own random columns); default: bulk draws from ``rng``.

    Returns
    -------
    numpy.ndarray
        The makespans, shape ``(size,)``.
    """
    arr = spec.arrays
    n = arr["law_index"].size
    laws = [spec.laws[k] for k in arr["law_keys"]]
    members = [np.flatnonzero(arr["law_index"] == j) for j in range(len(laws))]
    preds = arr["preds"]
    out = np.empty(size)
    if draw is not None:  # one column per op, in a fixed order
        fin = np.zeros((n + 1, size))
        for gen in arr["gens"]:
            for i in gen:
                fin[i] = draw(laws[arr["law_index"][i]], size)
            fin[gen] += np.maximum(fin[preds[gen, 0]], fin[preds[gen, 1]])
        return fin[:n].max(axis=0)
    step = max(1, MAX_CELLS // n)
    for start in range(0, size, step):
        sub = min(step, size - start)
        # row n stays 0: the finish time of a missing predecessor (index -1)
        fin = np.zeros((n + 1, sub))
        for j, idx in enumerate(members):
            if idx.size:
                fin[idx] = laws[j]._sample(idx.size * sub, rng).reshape(idx.size, sub)
        for gen in arr["gens"]:
            fin[gen] += np.maximum(fin[preds[gen, 0]], fin[preds[gen, 1]])
        out[start : start + sub] = fin[:n].max(axis=0)
    return out
