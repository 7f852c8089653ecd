"""Recognising an op-by-op pipeline: sizes proposed by its op names, proven by its edges.

An op-by-op pipeline (:func:`~prism_analytic.graph.pipeline.pipeline_step_graph` without
``compact``) names its ops ``"F s0 m3 c0"`` (:func:`~.pipeline_spec.op_name`). The names only
*propose* the sizes (stages, microbatches, chunks: one more than the largest index of each);
the structure decides: the edges must be exactly those of a reference built from
:func:`~prism_analytic.schedules.pipeline_dag` at those sizes, for a 1F1B, GPipe or interleaved
schedule. Two callers share this: the bounds engine (a whole graph that is exactly a pipeline
DAG, compared edge for edge) and ``core_shape="auto"`` (a series-parallel reduced core,
compared with the reduced core of the schedule's DAG).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from functools import lru_cache

from ..schedules import pipeline_dag
from .pipeline_spec import op_name

__all__ = ["parse_op_name", "pipeline_edges", "match_pipeline"]

#: Op names of an op-by-op pipeline (:func:`~.pipeline_spec.op_name`).
_OP_NAME = re.compile(r"([FB]) s(\d+) m(\d+) c(\d+)")

#: ``(schedule, stages, microbatches, vpp) -> edges with multiplicity`` of a reference.
Reference = Callable[[str, int, int, int], Counter]


def parse_op_name(name: object) -> tuple[str, int, int, int] | None:
    """``(phase, stage, microbatch, chunk)`` of a pipeline op name, or None if it is not one.

    Parameters
    ----------
    name : object
        A node name; only strings written as :func:`~.pipeline_spec.op_name` writes them
        (``"F s0 m3 c0"``) parse.

    Returns
    -------
    tuple or None
        The phase and the three indices.
    """
    match = _OP_NAME.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        return None
    phase, stage, microbatch, chunk = match.groups()
    return phase, int(stage), int(microbatch), int(chunk)


@lru_cache(maxsize=16)
def pipeline_edges(schedule: str, stages: int, microbatches: int, vpp: int) -> Counter:
    """The edges of a schedule's op DAG, between op names (each once).

    Raises
    ------
    ValueError
        For sizes the schedule does not allow (interleaved: ``microbatches % stages != 0``).
    """
    dag = pipeline_dag(stages, microbatches, schedule, vpp)
    return Counter((op_name(*a), op_name(*b)) for a, b in dag.edges())


def match_pipeline(
    names: Iterable[object],
    edges: Iterable[tuple[Hashable, Hashable]],
    *,
    reference: Reference = pipeline_edges,
    plausible: Callable[[int, int, int, int], bool] | None = None,
) -> tuple[str, int, int, int] | None:
    """``(schedule, stages, microbatches, vpp)`` when ``edges`` are a schedule's, else None.

    Parameters
    ----------
    names : iterable
        The op names (one per op node of the graph or core; repeats allowed). Any name that
        :func:`parse_op_name` rejects, or none at all, gives None.
    edges : iterable of (node, node)
        The edges to check, with multiplicity (a multigraph's repeated edges count).
    reference : callable, optional
        ``(schedule, stages, microbatches, vpp) -> Counter`` of the expected edges (default:
        :func:`pipeline_edges`, the schedule's DAG itself); a ``ValueError`` from it means the
        schedule does not allow those sizes and that schedule is skipped.
    plausible : callable, optional
        ``(stages, microbatches, vpp, names) -> bool``, asked with the proposed sizes and the
        number of names before any reference is built; False gives None (a cheap guard against
        building a huge reference for a graph that cannot match).

    Returns
    -------
    tuple or None
        The first schedule whose reference equals ``edges``: ``"interleaved"`` when the names
        hold more than one chunk, else ``"1f1b"`` then ``"gpipe"``.
    """
    top = [0, 0, 0]
    count = 0
    for name in names:
        parsed = parse_op_name(name)
        if parsed is None:
            return None
        count += 1
        top = [max(t, i) for t, i in zip(top, parsed[1:])]
    if count == 0:
        return None
    p, m, vpp = (t + 1 for t in top)
    if plausible is not None and not plausible(p, m, vpp, count):
        return None
    # iter(): a DiGraph's edge view is also a Mapping, which Counter would read as counts
    seen = Counter(iter(edges))
    for schedule in ("interleaved",) if vpp > 1 else ("1f1b", "gpipe"):
        try:
            expected = reference(schedule, p, m, vpp)
        except ValueError:  # sizes this schedule does not allow
            continue
        if seen == expected:
            return schedule, p, m, vpp
    return None
