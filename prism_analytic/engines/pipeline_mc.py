"""Vectorised Monte Carlo of a compact pipeline node (exact semantics, op by op).

Every op of the schedule gets a fresh draw of its law; finish times are propagated one
topological generation at a time over a block of samples. Draws come law by law for the whole
block, so the cost is a few numpy calls per generation plus the draws.

The draws dominate (a 405B pipeline body holds 4,096 ops, each drawn once per copy and sample).
When every law is a scipy lognormal (the step builder's bodies), one ``standard_normal`` call
fills the whole block in op order and ``scale * exp(s * z)`` is applied in place: the same law
per op as ``law._sample`` (scipy's ``lognorm.rvs`` computes exactly that), without scipy's
per-call checks or a permutation. Those normals come from an SFC64 stream seeded by one draw
of the block's generator (faster normals than PCG64; still fixed by the seed). Otherwise runs
of consecutive lognormal laws are drawn with one call each in law order, bit-identical to
drawing law by law (tested). Generations are contiguous index ranges, so finish times are
updated in place through preallocated buffers instead of fancy-indexed copies. The normal
generator itself remains most of the cost (8-13 ns a draw here).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["sample_pipeline"]

#: Largest (ops x samples) array held at once (float64: 8 bytes each). 16 MB: the in-place
#: generation updates stay closer to cache (a 4,096-op body: 64 us per copy and sample
#: against 67-99 us at 2**23, on a contended 2-core machine).
MAX_CELLS = 2**21


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
    plan, spans = _plan(spec, laws, arr)
    p0, p1 = preds[:, 0], preds[:, 1]
    widest = max((b - a for a, b in spans), default=0)
    for start in range(0, size, step):
        sub = min(step, size - start)
        # row n stays 0: the finish time of a missing predecessor (index -1)
        fin = np.empty((n + 1, sub))
        fin[n] = 0.0
        plan.draw(fin, sub, rng if not plan.all_lognormal else _fast_stream(rng))
        w = None if wf is None else wf._sample(spec.microbatches * sub, rng).reshape(-1, sub)
        s = None if sf is None else sf._sample(spec.stages * sub, rng).reshape(-1, sub)
        _scale(fin, np.arange(n), mb, st, w, s)
        left, right = np.empty((widest, sub)), np.empty((widest, sub))
        for a, b in spans:
            k = b - a
            fin.take(p0[a:b], axis=0, out=left[:k])  # the method: no wrapper per generation
            fin.take(p1[a:b], axis=0, out=right[:k])
            np.maximum(left[:k], right[:k], out=left[:k])
            fin[a:b] += left[:k]
        out[start : start + sub] = fin[:n].max(axis=0)
    return out


#: Draw plans of recently sampled specs (a replica group samples one spec once per copy).
_PLANS: dict[int, tuple[Any, _DrawPlan, list[tuple[int, int]]]] = {}
_PLANS_KEPT = 8


def _plan(spec: Any, laws: list[Any], arr: dict[str, Any]) -> tuple[Any, list[tuple[int, int]]]:
    """The spec's draw plan and generation ranges, built once per spec object."""
    hit = _PLANS.get(id(spec))
    if hit is not None and hit[0] is spec:  # the entry holds the spec, so its id is not reused
        return hit[1], hit[2]
    plan, spans = _DrawPlan(laws, arr["law_index"]), _spans(arr["gens"])
    if len(_PLANS) >= _PLANS_KEPT:
        _PLANS.pop(next(iter(_PLANS)))
    _PLANS[id(spec)] = (spec, plan, spans)
    return plan, spans


def _fast_stream(rng: np.random.Generator) -> np.random.Generator:
    """An SFC64 generator seeded by one draw of ``rng`` (so still determined by the seed).

    Its normals cost about 8 ns against PCG64's 9-13 ns on the development machine; the op
    draws of a large pipeline body are most of a Monte Carlo step's cost.
    """
    return np.random.Generator(np.random.SFC64(int(rng.integers(2**63))))


def _spans(gens: list[np.ndarray]) -> list[tuple[int, int]]:
    """Each generation as a ``(first, stop)`` range.

    The spec numbers ops generation by generation; checked, since the in-place update relies
    on it.
    """
    spans = []
    for gen in gens:
        if gen.size == 0:
            continue
        a, b = int(gen[0]), int(gen[-1]) + 1
        if b - a != gen.size or not np.array_equal(gen, np.arange(a, b)):
            raise ValueError("pipeline spec: a generation is not a contiguous range of ops")
        spans.append((a, b))
    return spans


def _lognormal(law: Any) -> tuple[float, float] | None:
    """``(s, scale)`` of a plain scipy lognormal (no loc), else None."""
    frozen = getattr(law, "frozen", None)
    if frozen is None or getattr(law, "family", None) != "lognorm" or frozen.args:
        return None
    kw = frozen.kwds
    if set(kw) - {"s", "scale", "loc"} or float(kw.get("loc", 0.0)) != 0.0 or "s" not in kw:
        return None
    s, scale = float(kw["s"]), float(kw.get("scale", 1.0))
    ok = np.isfinite(s) and np.isfinite(scale) and s > 0 and scale > 0
    return (s, scale) if ok else None


class _DrawPlan:
    """Draws every op of a pipeline body.

    When every law is a plain lognormal (the step builder's pipeline ops), the normals are
    drawn straight into the ops' rows in op order and transformed in place: no permutation,
    no temporary. Otherwise ops are drawn law by law, in the order ``law._sample`` would
    (laws in key order, ops in index order within a law), a run of consecutive lognormal laws
    as one ``standard_normal`` call: bit-identical to law-by-law sampling.
    """

    def __init__(self, laws: list[Any], law_index: np.ndarray) -> None:
        self.laws = laws
        self.order = np.argsort(law_index, kind="stable")  # ops, law by law
        self.counts = np.bincount(law_index, minlength=len(laws))
        params = [_lognormal(law) for law in laws]
        self.runs: list[tuple[int, int, int | None]] = []  # (first row, stop, law or None)
        row, j = 0, 0
        while j < len(laws):
            if params[j] is None:
                self.runs.append((row, row + int(self.counts[j]), j))
                row += int(self.counts[j])
                j += 1
                continue
            first = row
            while j < len(laws) and params[j] is not None:
                row += int(self.counts[j])
                j += 1
            self.runs.append((first, row, None))
        table = np.array([p if p is not None else (np.nan, np.nan) for p in params], dtype=float)
        per_op = table.reshape(-1, 2)[law_index]
        self.all_lognormal = all(p is not None for p in params)
        self.op_shape, self.op_scale = per_op[:, :1], per_op[:, 1:]  # op order
        per_row = per_op[self.order]  # law order
        self.shape = per_row[:, :1]
        self.scale = per_row[:, 1:]

    def draw(self, fin: np.ndarray, sub: int, rng: np.random.Generator) -> None:
        """Fill ``fin[:n]`` with ``sub`` draws of every op."""
        if self.all_lognormal:
            ops = fin[: self.order.size]
            rng.standard_normal(out=ops)
            ops *= self.op_shape
            np.exp(ops, out=ops)
            ops *= self.op_scale
            return
        for a, b, j in self.runs:
            if b == a:
                continue
            rows = self.order[a:b]
            if j is not None:
                fin[rows] = self.laws[j]._sample((b - a) * sub, rng).reshape(b - a, sub)
                continue
            # scipy's lognorm.rvs: exp(s * standard_normal(size)) * scale (+ loc = 0)
            z = rng.standard_normal((b - a, sub))
            z *= self.shape[a:b]
            np.exp(z, out=z)
            z *= self.scale[a:b]
            fin[rows] = z


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
