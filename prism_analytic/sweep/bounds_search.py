"""Layout search by branch and bound on guaranteed bounds, with a proof for every loser.

Stages (each a batch of independent tasks on the executor):

0. **screen** every candidate: build the job, the model's layout rules, the memory estimate (a
   hard filter: ``invalid`` / ``infeasible`` with the reason) and the mean-model step time. The
   mean model only *orders* the work (it is no bound).
1. **coarse**: a guaranteed lower bound on the objective for every valid candidate (the bounds
   engine's lower side on a 4x coarser lattice, one dominant path), and both guaranteed bounds
   on the fine lattice for the first ``seeds`` candidates by the mean model. The threshold
   ``T`` is the smallest guaranteed upper bound computed; a candidate whose guaranteed lower
   bound exceeds ``T`` is eliminated: its objective provably exceeds that of the candidate
   that holds ``T``.
2. **fine**: the survivors' lower bounds on the fine lattice (eight paths); eliminate again.
3. **incumbents**: guaranteed upper bounds of the survivors, lowest lower bound first, while
   one of them could still lower ``T`` (its lower bound is below ``T``); eliminate after each
   batch. When this ends ``T`` is the smallest guaranteed upper bound of *all* candidates (a
   candidate without one has a lower bound >= ``T``, and its upper bound is above its lower).
4. **full**: the full engine (``settings.method``) on the survivors; the winner is the best
   survivor by its objective column.

What is proved: every eliminated candidate's objective exceeds ``T``, which the candidate
holding ``T`` does not exceed, so the model's optimum is among the survivors: the winner and
its **tie set** (the survivors the bounds cannot separate from it). The winner is the full
engine's choice among them; when the full engine's value of every candidate lies within that
candidate's guaranteed bracket, it is also the exhaustive full-engine winner (an eliminated
candidate's value would be above ``T``, the ``T`` holder's at or below it). The search
reports any survivor whose full-engine value falls outside its bracket.

:func:`exhaustive_search` computes every bound and the full engine for every valid candidate
and applies the same rule (survivors: lower bound <= the smallest upper bound); the pruned
search returns the same winner and tie set (``tests/sweep/test_bounds_search.py``).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engines.lower_bounds import (
    COARSE,
    FINE,
    Grid,
    bound_laws,
    lower_law,
    objective_lower,
    objective_upper,
)
from .evaluate import EvalSettings, evaluate_point, screen_point
from .spec import SweepError, SweepPoint, SweepSpec

__all__ = ["Candidate", "SearchResult", "branch_and_bound", "exhaustive_search", "GRIDS"]

GRIDS = {g.name: g for g in (COARSE, FINE)}


def _column(objective: str) -> str:
    """The sweep table's column of a quantile objective (``"p95"`` -> ``"p95_s"``)."""
    return f"{objective}_s"


_SCREEN_BATCH = 64  # cheap screening tasks are sent in batches (one task ~0.1-0.5 s)


# --------------------------------------------------------------------------------------
# Tasks (top-level functions: they run on any executor, dask workers included)
# --------------------------------------------------------------------------------------
def screen_task(points: list[SweepPoint], settings: EvalSettings) -> list[dict[str, Any]]:
    """Screen rows of ``points``: status, layout, memory and the mean-model step time."""
    from ..workload.step_estimate import step_time

    rows = []
    for p in points:
        row, job = screen_point(p, settings)
        if job is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                row["mean_model_step_s"] = float(step_time(job).step_s)
        rows.append(row)
    return rows


def bound_task(
    point: SweepPoint, settings: EvalSettings, objective: str, grid: str, upper: bool
) -> dict[str, Any]:
    """Guaranteed bound(s) on ``objective`` for one candidate at one grid.

    Returns ``{"lower": float, "upper": float or None, "time_s": float, "error": str or
    None}``; a candidate whose bound cannot be computed gets ``lower = -inf`` (it is then never
    eliminated) and the reason in ``error``.
    """
    from ..workload.builder import build_step_model

    start = time.perf_counter()
    out: dict[str, Any] = {"grid": grid, "lower": -math.inf, "upper": None, "error": None}
    try:
        _, job = screen_point(point, settings)
        if job is None:
            raise SweepError("the candidate no longer passes the screen")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = build_step_model(job).graph
            if upper:
                lo, hi = bound_laws(graph, GRIDS[grid])
                out["upper"] = objective_upper(hi, objective)
            else:
                lo = lower_law(graph, GRIDS[grid])
            out["lower"] = objective_lower(lo, objective)
    except Exception as exc:  # noqa: BLE001 - a candidate without a bound is kept, not lost
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["time_s"] = time.perf_counter() - start
    return out


# --------------------------------------------------------------------------------------
# Candidates and the result
# --------------------------------------------------------------------------------------
@dataclass
class Candidate:
    """One valid, memory-feasible candidate and what the search learned about it."""

    point: SweepPoint
    row: dict[str, Any]
    lower: dict[str, float] = field(default_factory=dict)
    upper: float | None = None
    eliminated: dict[str, Any] | None = None
    full: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def index(self) -> int:
        """The candidate's position in the sweep."""
        return self.point.index

    @property
    def best_lower(self) -> float:
        """The largest guaranteed lower bound computed (-inf when none)."""
        return max(self.lower.values(), default=-math.inf)

    @property
    def best_grid(self) -> str | None:
        """The grid of :attr:`best_lower`."""
        if not self.lower:
            return None
        return max(self.lower, key=lambda g: (self.lower[g], g == "fine"))


@dataclass
class SearchResult:
    """The outcome of a branch-and-bound (or exhaustive) layout search.

    Attributes
    ----------
    objective : str
    mode : {"pruned", "exhaustive"}
    winner : Candidate
        The best survivor by the full engine's objective column.
    tie_set : list of Candidate
        The other survivors: guaranteed lower bound <= ``threshold`` (not separable).
    threshold : float
        The smallest guaranteed upper bound on the objective over all candidates.
    holder : Candidate
        The candidate whose guaranteed upper bound is ``threshold``.
    candidates : list of Candidate
        Every valid, memory-feasible candidate.
    screened : list of dict
        Every screened row (invalid and infeasible ones with the reason).
    counts : dict
    stages : dict
        Per stage: tasks run and seconds of work.
    outside : list of dict
        Survivors whose full-engine value lies outside their guaranteed bracket.
    """

    objective: str
    mode: str
    winner: Candidate
    tie_set: list[Candidate]
    threshold: float
    holder: Candidate
    candidates: list[Candidate]
    screened: list[dict[str, Any]]
    counts: dict[str, int]
    stages: dict[str, dict[str, float]]
    outside: list[dict[str, Any]]
    settings: EvalSettings
    lost: list[str] = field(default_factory=list)

    @property
    def eliminated(self) -> list[Candidate]:
        """Candidates with a proof of elimination."""
        return [c for c in self.candidates if c.eliminated is not None]

    def column(self) -> str:
        """The full engine's column of the objective."""
        return _column(self.objective)

    def _layout(self, c: Candidate) -> dict[str, Any]:
        from .evaluate import LAYOUT_COLUMNS

        return {k: c.row.get(k) for k in (*LAYOUT_COLUMNS, "hardware")}

    def _entry(self, c: Candidate) -> dict[str, Any]:
        col = self.column()
        full = c.full or {}
        return {
            "index": c.index,
            "config_id": c.row["config_id"],
            **self._layout(c),
            "memory_gb": c.row.get("memory_gb"),
            "mean_model_step_s": c.row.get("mean_model_step_s"),
            "lower_bounds_s": dict(c.lower),
            "upper_bound_s": c.upper,
            col: full.get(col),
            "mean_s": full.get("mean_s"),
            "eliminated_by": c.eliminated,
            "errors": c.errors or None,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the winner, the tie set, the proof per eliminated candidate, filters."""
        rejected = [
            {
                "index": r["index"],
                "config_id": r["config_id"],
                "status": r["status"],
                "reason": r["error"],
                **{k: r.get(k) for k in ("tp", "pp", "cp", "vpp", "memory_gb")},
            }
            for r in self.screened
            if r["status"] != "ok"
        ]
        return {
            "objective": self.objective,
            "mode": self.mode,
            "method": self.settings.method,
            "statement": self.statement(),
            "winner": self._entry(self.winner),
            "tie_set": [self._entry(c) for c in self.tie_set],
            "threshold": {
                "value_s": self.threshold,
                "bound": f"{self.objective} guaranteed upper bound (fine grid)",
                "candidate": self.holder.index,
                "config_id": self.holder.row["config_id"],
            },
            "eliminated": [self._entry(c) for c in self.eliminated],
            "rejected": rejected,
            "outside_bracket": self.outside,
            "counts": self.counts,
            "stages": self.stages,
            "lost": self.lost,
        }

    def statement(self) -> str:
        """What the search proved, in one sentence."""
        n = len(self.eliminated)
        return (
            f"{n} of {len(self.candidates)} valid candidates are eliminated: each has a"
            f" guaranteed lower bound on {self.objective} above {self.threshold:.6g} s, the"
            f" guaranteed upper bound of candidate {self.holder.index}; the model's optimum is"
            f" the winner or one of the {len(self.tie_set)} in its tie set"
        )

    def summary(self, top: int = 5) -> str:
        """Readable report: counts, the winner, the tie set, how the others lost."""
        c = self.counts
        col = self.column()
        lines = [
            f"{c['candidates']} candidate layouts: {c['not_a_factorisation']} do not factorise"
            f" the GPU count, {c['not_a_schedule']} are not a schedule,"
            f" {c.get('not_a_batch', 0)} do not split the global batch; of the {c['screened']}"
            f" screened: {c['ok']} valid and within memory, {c['invalid']} invalid,"
            f" {c['infeasible']} over the memory estimate, {c['error']} failed",
            f"search ({self.mode}): {self.statement()}",
        ]

        def describe(x: Candidate) -> str:
            lay = " ".join(f"{k} {x.row.get(k)}" for k in _SHOWN if x.row.get(k) is not None)
            val = (x.full or {}).get(col)
            hi = "?" if x.upper is None else f"{x.upper:.5g}"
            text = f"{lay}: {self.objective} "
            text += "n/a" if val is None else f"{val:.5g} s"
            return text + f" (guaranteed {x.best_lower:.5g}-{hi} s)"

        lines.append(f"winner: {describe(self.winner)}")
        if self.tie_set:
            ties = sorted(self.tie_set, key=lambda x: (x.full or {}).get(col) or math.inf)
            lines.append(f"tie set ({len(ties)}: brackets overlap the threshold):")
            lines += [f"  {describe(x)}" for x in ties[:top]]
            if len(ties) > top:
                lines.append(f"  ... {len(ties) - top} more (--json lists them)")
        by_stage: dict[str, int] = {}
        for x in self.eliminated:
            by_stage[x.eliminated["grid"]] = by_stage.get(x.eliminated["grid"], 0) + 1
        if by_stage:
            lines.append(
                "eliminated by guaranteed lower bounds: "
                + ", ".join(f"{n} on the {g} grid" for g, n in by_stage.items())
                + " (--json: the bound, its value and the threshold, per candidate)"
            )
        for o in self.outside:
            lines.append(
                f"WARNING: candidate {o['index']}: full engine {o['value_s']:.6g} s outside its"
                f" guaranteed bracket [{o['lower_s']:.6g}, {o['upper_s']}]"
            )
        return "\n".join(lines)


_SHOWN = ("hardware", "tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch_size", "microbatches")
_SHOWN += ("recompute", "sharding")


# --------------------------------------------------------------------------------------
# Running tasks
# --------------------------------------------------------------------------------------
def _run(
    executor: Executor | None, calls: list[tuple[Callable[..., Any], tuple[Any, ...]]]
) -> Iterator[tuple[int, Any]]:
    """``(position, result)`` of each call as it finishes (in this process when no executor)."""
    if executor is None:
        for i, (fn, args) in enumerate(calls):
            yield i, fn(*args)
        return
    futures = {executor.submit(fn, *args): i for i, (fn, args) in enumerate(calls)}
    try:
        for fut in cf.as_completed(futures):
            yield futures[fut], fut.result()
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise


class _Cache:
    """Finished bound and full-engine results, journalled to ``path`` (resumable)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.data: dict[str, Any] = {}
        if path is not None and path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:  # a line cut by a crash: evaluated again
                    continue
                self.data[rec["key"]] = rec["value"]
        self._fh = path.open("a", encoding="utf-8") if path is not None else None

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any) -> None:
        from ..json_safe import jsonable

        self.data[key] = value
        if self._fh is not None:
            self._fh.write(json.dumps({"key": key, "value": jsonable(value)}) + "\n")
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


class _Search:
    """State of one search: candidates, the threshold, the task runner and its bookkeeping."""

    def __init__(
        self,
        spec: SweepSpec,
        counts: dict[str, int],
        settings: EvalSettings,
        objective: str,
        executor: Executor | None,
        progress: Callable[[int, int], None] | None,
        journal: Path | None,
    ) -> None:
        self.spec, self.settings, self.objective = spec, settings, objective
        self.executor, self.progress = executor, progress
        self.counts = dict(counts)
        self.cache = _Cache(journal)
        self.stages: dict[str, dict[str, float]] = {}
        self.done = self.total = 0
        self.threshold, self.holder = math.inf, None
        self.screened: list[dict[str, Any]] = []
        self.candidates: list[Candidate] = []

    # ----- bookkeeping ------------------------------------------------------------------
    def _tick(self, n: int = 1) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.done, self.total)

    def _stage(self, name: str, tasks: int, seconds: float) -> None:
        s = self.stages.setdefault(name, {"tasks": 0, "work_s": 0.0})
        s["tasks"] += tasks
        s["work_s"] += seconds

    # ----- stage 0 ----------------------------------------------------------------------
    def screen(self) -> None:
        points = self.spec.configurations()
        batches = [points[i : i + _SCREEN_BATCH] for i in range(0, len(points), _SCREEN_BATCH)]
        self.total += len(points)
        rows: list[dict[str, Any]] = []
        for _, got in _run(self.executor, [(screen_task, (b, self.settings)) for b in batches]):
            rows += got
            self._tick(len(got))
        rows.sort(key=lambda r: r["index"])
        self._stage("screen", len(rows), sum(r["compute_time_s"] for r in rows))
        self.screened = rows
        self.counts["screened"] = len(rows)
        for status in ("ok", "invalid", "infeasible", "error"):
            self.counts[status] = sum(r["status"] == status for r in rows)
        by_index = {p.index: p for p in points}
        ok = [r for r in rows if r["status"] == "ok"]
        ok.sort(key=lambda r: (r.get("mean_model_step_s") or math.inf, r["index"]))
        self.candidates = [Candidate(by_index[r["index"]], r) for r in ok]

    # ----- bounds -----------------------------------------------------------------------
    def bounds(self, stage: str, jobs: list[tuple[Candidate, Grid, bool]]) -> None:
        """Compute (or read back) the bounds ``jobs`` asks for; record them on the candidates."""
        todo, keys = [], []
        for c, grid, upper in jobs:
            key = f"{c.row['config_id']}|{self.objective}|{grid.name}|{'both' if upper else 'lo'}"
            hit = self.cache.get(key)
            if hit is not None:
                self._record(c, hit)
                continue
            todo.append((c, key))
            keys.append((bound_task, (c.point, self.settings, self.objective, grid.name, upper)))
        self.total += len(todo)
        work = 0.0
        for i, out in _run(self.executor, keys):
            c, key = todo[i]
            self.cache.put(key, out)
            self._record(c, out)
            work += out["time_s"]
            self._tick()
        self._stage(stage, len(todo), work)

    def _record(self, c: Candidate, out: dict[str, Any]) -> None:
        if out.get("error"):
            c.errors.append(f"{out['grid']} bound: {out['error']}")
            return
        c.lower[out["grid"]] = max(out["lower"], c.lower.get(out["grid"], -math.inf))
        if out.get("upper") is not None:
            c.upper = out["upper"] if c.upper is None else min(c.upper, out["upper"])
            # ties go to the lower index: the holder does not depend on completion order
            if self.holder is None or (c.upper, c.index) < (self.threshold, self.holder.index):
                self.threshold, self.holder = c.upper, c

    def eliminate(self) -> None:
        """Eliminate every live candidate whose guaranteed lower bound exceeds the threshold."""
        for c in self.live():
            if c.best_lower > self.threshold:
                c.eliminated = {
                    "bound": f"{self.objective} guaranteed lower bound ({c.best_grid} grid)",
                    "grid": c.best_grid,
                    "value_s": c.best_lower,
                    "incumbent": self.holder.index,
                    "incumbent_config_id": self.holder.row["config_id"],
                    "incumbent_bound": f"{self.objective} guaranteed upper bound (fine grid)",
                    "incumbent_value_s": self.threshold,
                }

    def live(self) -> list[Candidate]:
        return [c for c in self.candidates if c.eliminated is None]

    # ----- stage 4 ----------------------------------------------------------------------
    def full(self, chosen: list[Candidate]) -> list[str]:
        lost: list[str] = []
        todo = []
        for c in chosen:
            key = f"{c.row['config_id']}|full"
            hit = self.cache.get(key)
            if hit is not None:
                c.full = hit
            else:
                todo.append((c, key))
        self.total += len(todo)
        calls = [(evaluate_point, (c.point, self.settings)) for c, _ in todo]
        work = 0.0
        try:
            for i, row in _run(self.executor, calls):
                c, key = todo[i]
                c.full = row
                if row.get("status") == "ok":
                    self.cache.put(key, row)
                work += row.get("compute_time_s") or 0.0
                self._tick()
        finally:
            self._stage("full", len(todo), work)
        return lost

    def result(self, mode: str, lost: list[str]) -> SearchResult:
        col = _column(self.objective)
        survivors = self.live()
        scored = [
            c
            for c in survivors
            if c.full is not None and c.full.get("status") == "ok" and c.full.get(col) is not None
        ]
        if not scored:
            raise SweepError(
                f"the full engine failed on every surviving candidate ({len(survivors)});"
                " see the table's error column"
            )
        winner = min(scored, key=lambda c: (c.full[col], c.index))
        outside = []
        for c in scored:
            v = c.full[col]
            # the engine's numerical bracket of its value, where it reports one
            lo_v = c.full.get(f"{col[:-2]}_lo_s", v) if col.endswith("_s") else v
            hi_v = c.full.get(f"{col[:-2]}_hi_s", v) if col.endswith("_s") else v
            lo_v = v if lo_v is None else lo_v
            hi_v = v if hi_v is None else hi_v
            if hi_v < c.best_lower or (c.upper is not None and lo_v > c.upper):
                outside.append(
                    {"index": c.index, "value_s": v, "lower_s": c.best_lower, "upper_s": c.upper}
                )
        self.cache.close()
        return SearchResult(
            objective=self.objective,
            mode=mode,
            winner=winner,
            tie_set=[c for c in survivors if c is not winner],
            threshold=self.threshold,
            holder=self.holder if self.holder is not None else winner,
            candidates=self.candidates,
            screened=self.screened,
            counts={**self.counts, "eliminated": len(self.candidates) - len(survivors)},
            stages=self.stages,
            outside=outside,
            settings=self.settings,
            lost=lost,
        )


def _prepare(spec: SweepSpec, settings: EvalSettings, objective: str) -> tuple[EvalSettings, str]:
    from dataclasses import replace

    from ..engines.lower_bounds import has_guaranteed_bounds

    if not has_guaranteed_bounds(objective):
        raise SweepError(
            f"--objective {objective}: no guaranteed bounds to prune on (the bounds engine"
            " bounds quantiles only: p50, p90, p95, p99, p999); use --search exhaustive"
        )
    return replace(settings, keep_batch=True, skip_infeasible=True), objective


def branch_and_bound(
    spec: SweepSpec,
    counts: dict[str, int],
    objective: str = "p95",
    *,
    settings: EvalSettings | None = None,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
    journal: str | Path | None = None,
    seeds: int = 2,
) -> SearchResult:
    """The best candidate of ``spec`` by ``objective``, pruning on guaranteed bounds.

    Parameters
    ----------
    spec : SweepSpec
        The candidates (e.g. :func:`~prism_analytic.sweep.layouts.layout_spec`).
    counts : dict
        Candidates dropped before ``spec`` (reported with the result).
    objective : {"p50", "p90", "p95", "p99", "p999"}
    settings : EvalSettings, optional
        The full engine and memory options (``keep_batch``, ``skip_infeasible`` always on).
    executor : concurrent.futures.Executor, optional
        Runs every stage's tasks (None: this process).
    progress : callable, optional
        ``progress(done, total)``; ``total`` grows as stages add tasks.
    journal : path, optional
        JSON-lines file of finished bounds and full-engine rows; a rerun reads it back.
    seeds : int
        Candidates (best by the mean model) whose guaranteed upper bound is computed first.

    Returns
    -------
    SearchResult
    """
    settings, objective = _prepare(spec, settings or EvalSettings(), objective)
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise SweepError(f"seeds: must be a positive integer, got {seeds!r}")
    s = _Search(spec, counts, settings, objective, executor, progress, _path(journal))
    s.screen()
    _need_candidates(s)
    first = s.candidates[:seeds]
    jobs = [(c, FINE, True) for c in first] + [(c, COARSE, False) for c in s.candidates]
    s.bounds("coarse", jobs)
    s.eliminate()
    s.bounds("fine", [(c, FINE, False) for c in s.live() if "fine" not in c.lower])
    s.eliminate()
    width = max(2, getattr(executor, "_max_workers", 2) if executor is not None else 1)
    while True:
        need = [c for c in s.live() if c.upper is None and c.best_lower < s.threshold]
        need = [c for c in need if not any(e.startswith("fine") for e in c.errors)]
        if not need:
            break
        need.sort(key=lambda c: (c.best_lower, c.index))
        s.bounds("incumbents", [(c, FINE, True) for c in need[:width]])
        s.eliminate()
    lost = s.full(s.live())
    return s.result("pruned", lost)


def exhaustive_search(
    spec: SweepSpec,
    counts: dict[str, int],
    objective: str = "p95",
    *,
    settings: EvalSettings | None = None,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SearchResult:
    """Every bound and the full engine for every valid candidate, then the same rule.

    The reference of :func:`branch_and_bound`: the threshold is the smallest guaranteed upper
    bound of all candidates, survivors have a lower bound at or below it, and the winner is the
    best candidate by the full engine over *all* valid candidates (not only the survivors).
    """
    settings, objective = _prepare(spec, settings or EvalSettings(), objective)
    s = _Search(spec, counts, settings, objective, executor, progress, None)
    s.screen()
    _need_candidates(s)
    s.bounds("coarse", [(c, COARSE, False) for c in s.candidates])
    s.bounds("fine", [(c, FINE, True) for c in s.candidates])
    s.eliminate()
    lost = s.full(s.candidates)
    # the winner over every candidate; an eliminated winner means the engine left its bracket
    col = _column(objective)
    scored = [c for c in s.candidates if (c.full or {}).get(col) is not None]
    result = s.result("exhaustive", lost)
    if scored:
        best = min(scored, key=lambda c: (c.full[col], c.index))
        if best is not result.winner:
            result.winner = best
            result.tie_set = [c for c in s.live() if c is not best]
    return result


def _need_candidates(s: _Search) -> None:
    if not s.candidates:
        c = s.counts
        raise SweepError(
            f"no valid candidate fits the memory estimate ({c['invalid']} invalid,"
            f" {c['infeasible']} over memory, {c['error']} failed); widen the candidates"
            " (--tp/--pp/--cp/--recompute full) or set --memory-gb"
        )


def _path(journal: str | Path | None) -> Path | None:
    return None if journal is None else Path(journal)


def candidate_table(result: SearchResult) -> Any:
    """Every screened candidate as a DataFrame: status, bounds, proof and full-engine values."""
    import pandas as pd

    by_index = {c.index: c for c in result.candidates}
    tie = {c.index for c in result.tie_set}
    records: list[dict[str, Any]] = []
    for r in result.screened:
        rec = dict(r)
        c = by_index.get(r["index"])
        if c is not None:
            for g in GRIDS:
                rec[f"lower_{g}_s"] = c.lower.get(g)
            rec["upper_fine_s"] = c.upper
            rec["search"] = (
                "winner" if c is result.winner else "tie" if c.index in tie else "eliminated"
            )
            if c.eliminated is not None:
                rec["eliminated_by"] = c.eliminated["bound"]
                rec["eliminated_value_s"] = c.eliminated["value_s"]
                rec["threshold_s"] = c.eliminated["incumbent_value_s"]
                rec["threshold_candidate"] = c.eliminated["incumbent"]
            if c.full is not None:
                rec.update({k: v for k, v in c.full.items() if k.endswith("_s")})
        else:
            rec["search"] = r["status"]
        records.append(rec)
    return pd.DataFrame.from_records(records)
