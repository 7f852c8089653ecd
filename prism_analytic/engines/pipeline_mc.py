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
    mb, st = arr["microbatch"], arr["stage"]
    wf, sf = spec.microbatch_factor, spec.stage_factor
    if draw is not None:  # one column per random input, in a fixed order
        w = None if wf is None else np.stack([draw(wf, size) for _ in range(spec.microbatches)])
        s = None if sf is None else np.stack([draw(sf, size) for _ in range(spec.stages)])
        fin = np.zeros((n + 1, size))
        for gen in arr["gens"]:
            for i in gen:
                fin[i] = draw(laws[arr["law_index"][i]], size)
            _scale(fin, gen, mb, st, w, s)
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
        w = None if wf is None else wf._sample(spec.microbatches * sub, rng).reshape(-1, sub)
        s = None if sf is None else sf._sample(spec.stages * sub, rng).reshape(-1, sub)
        _scale(fin, np.arange(n), mb, st, w, s)
        for gen in arr["gens"]:
            fin[gen] += np.maximum(fin[preds[gen, 0]], fin[preds[gen, 1]])
        out[start : start + sub] = fin[:n].max(axis=0)
    return out


def _scale(
    fin: np.ndarray,
    ops: np.ndarray,
    mb: np.ndarray,
    st: np.ndarray,
    w: np.ndarray | None,
    s: np.ndarray | None,
) -> None:
    """Multiply the durations of ``ops`` by their microbatch's and stage's factor draws."""
    if w is not None:
        fin[ops] *= w[mb[ops]]
    if s is not None:
        fin[ops] *= s[st[ops]]
