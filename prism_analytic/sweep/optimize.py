"""The best layout under variability: search the valid, memory-feasible layouts of a job.

:func:`search` is the default: branch and bound on guaranteed bounds
(:mod:`~prism_analytic.sweep.bounds_search`), which evaluates the full engine only on the
candidates the bounds cannot eliminate and states, for every other one, the bound that
eliminated it. :func:`optimize` is the exhaustive evaluation described below.

Deterministic planners pick the layout with the smallest mean step. :func:`optimize` evaluates
every candidate layout's step-time *distribution* (the sweep machinery, on any executor) and
reports the best by the mean and the best by the chosen objective (a quantile such as p95, or
the run time of M steps at probability p) side by side, with what each loses on the other's
objective. Candidates that are not valid layouts or do not fit the memory estimate are kept in
the table with the reason and never win.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .evaluate import EvalSettings
from .layouts import LayoutSpace, layout_spec
from .runner import run_sweep
from .spec import SweepError

__all__ = ["OBJECTIVES", "OptimizeResult", "optimize", "objective_column", "search", "SEARCHES"]

#: Search modes of :func:`search`.
SEARCHES = ("bnb", "exhaustive")

#: Objectives and the table column each minimises.
OBJECTIVES = {
    "mean": "mean_s",
    "p50": "p50_s",
    "p90": "p90_s",
    "p95": "p95_s",
    "p99": "p99_s",
    "p999": "p999_s",
    "runtime": "runtime_s",
}
_BRACKETS = {"p95": ("p95_lo_s", "p95_hi_s"), "p99": ("p99_lo_s", "p99_hi_s")}
LAYOUT_KEYS = ("tp", "pp", "dp", "cp", "vpp", "schedule", "microbatches", "recompute", "sharding")


def objective_column(objective: str) -> str:
    """The table column an objective minimises (``"p95"`` -> ``"p95_s"``)."""
    if objective not in OBJECTIVES:
        raise SweepError(f"--objective: {objective!r}; allowed: {', '.join(OBJECTIVES)}")
    return OBJECTIVES[objective]


@dataclass
class OptimizeResult:
    """The outcome of a layout search.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per candidate layout (status ok / invalid / infeasible / error).
    objective : str
        What ``best`` minimises; ``partner`` is the other side of the comparison (``mean``,
        or ``p95`` when the objective is the mean).
    best, best_partner : dict
        The winning rows.
    counts : dict
        Candidates generated, dropped (not a factorisation / not a schedule) and rows by status.
    settings : EvalSettings
    """

    table: Any
    objective: str
    partner: str
    best: dict[str, Any]
    best_partner: dict[str, Any]
    counts: dict[str, int]
    settings: EvalSettings
    lost: list[str] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        """Whether the two objectives pick different layouts."""
        return self.best["config_id"] != self.best_partner["config_id"]

    def losses(self) -> dict[str, float]:
        """Relative loss of each winner on the other's objective (0 when they agree)."""
        c_obj, c_par = OBJECTIVES[self.objective], OBJECTIVES[self.partner]
        return {
            f"best_by_{self.partner}_on_{self.objective}": self.best_partner[c_obj]
            / self.best[c_obj]
            - 1,
            f"best_by_{self.objective}_on_{self.partner}": self.best[c_par]
            / self.best_partner[c_par]
            - 1,
        }

    def runner_up(self) -> dict[str, Any] | None:
        """The best valid layout by the objective other than ``best`` (None if there is none)."""
        col = OBJECTIVES[self.objective]
        ok = self.table[(self.table["status"] == "ok") & self.table[col].notna()]
        ok = ok[ok["config_id"] != self.best["config_id"]]
        if ok.empty:
            return None
        row = ok.sort_values([col, "index"]).iloc[0]
        return row.astype(object).where(row.notna(), None).to_dict()

    def _stat(self, row: dict[str, Any], name: str) -> str:
        """``"p95 7.7148 s [7.7125, 7.7171]"``: a column, with its bracket when it has one."""
        text = f"{name} {row[OBJECTIVES[name]]:.5g} s"
        lo, hi = _BRACKETS.get(name, (None, None))
        if lo is not None and row.get(lo) is not None and row.get(hi) is not None:
            kind = "95% CI" if self.settings.method == "montecarlo" else "bracket"
            text += f" ({kind} {row[lo]:.5g}-{row[hi]:.5g})"
        return text

    def resolved(self) -> bool | None:
        """Whether the winners' quantile brackets are disjoint (None: no bracket to compare).

        Analytic brackets contain the engine's exact quantile, so disjoint brackets mean the
        ranking is not a grid artefact; it says nothing about the model's own error.
        """
        for name in (self.objective, self.partner):
            if name in _BRACKETS and self.differs and self.settings.method != "montecarlo":
                lo, hi = _BRACKETS[name]
                a, b = (
                    (self.best, self.best_partner)
                    if name == self.objective
                    else (self.best_partner, self.best)
                )
                return bool(a[hi] < b[lo])
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (both winners, losses, counts)."""

        def lay(row: dict[str, Any]) -> dict[str, Any]:
            cols = (*LAYOUT_KEYS, "mean_s", "p95_s", "p99_s", "p95_lo_s", "p95_hi_s")
            cols += ("p99_lo_s", "p99_hi_s")
            cols += ("memory_gb", "runtime_s") if "runtime_s" in row else ("memory_gb",)
            return {k: row.get(k) for k in cols}

        second = self.runner_up()
        return {
            "objective": self.objective,
            "partner": self.partner,
            f"best_by_{self.objective}": lay(self.best),
            f"best_by_{self.partner}": lay(self.best_partner),
            f"runner_up_by_{self.objective}": None if second is None else lay(second),
            "differs": self.differs,
            "losses": self.losses(),
            "bracket_resolved": self.resolved(),
            "counts": self.counts,
            "method": self.settings.method,
            "runtime_steps": self.settings.steps,
            "runtime_probability": self.settings.probability if self.settings.steps else None,
            "lost": self.lost,
        }

    def summary(self, top: int = 5) -> str:
        """Readable report: counts, the two winners side by side, the top layouts."""
        c = self.counts
        lines = [
            f"{c['candidates']} candidate layouts: {c['not_a_factorisation']} do not factorise"
            f" the GPU count, {c['not_a_schedule']} are not a schedule; of the"
            f" {c['rows']} evaluated: {c['ok']} ok, {c['invalid']} invalid,"
            f" {c['infeasible']} over the memory estimate, {c['error']} failed"
        ]
        c_obj = OBJECTIVES[self.objective]
        w = max(len(self.objective), len(self.partner)) + 8
        for label, row in (
            (f"best by {self.partner}", self.best_partner),
            (f"best by {self.objective}", self.best),
        ):
            lay = " ".join(f"{k} {row[k]}" for k in LAYOUT_KEYS)
            lines.append(
                f"{label:<{w}} {lay}: {self._stat(row, self.partner)},"
                f" {self._stat(row, self.objective)}, memory {row['memory_gb']:.0f} GB"
            )
        if self.differs:
            loss = self.losses()
            a, b = list(loss.values())
            lines.append(
                f"the {self.partner}-optimal layout is {a:+.2%} worse on {self.objective};"
                f" the {self.objective}-optimal layout is {b:+.2%} worse on {self.partner}"
            )
            res = self.resolved()
            if res is not None:
                lines.append(
                    "the winners' numerical brackets are "
                    + ("disjoint" if res else "overlapping (the ranking is within grid error)")
                )
        else:
            lines.append(f"the same layout is best by {self.partner} and by {self.objective}")
            second = self.runner_up()
            if second is not None:
                lay = " ".join(f"{k} {second[k]}" for k in LAYOUT_KEYS)
                lines.append(
                    f"runner-up by {self.objective}: {lay}: {self._stat(second, self.partner)},"
                    f" {self._stat(second, self.objective)}"
                    f" ({second[c_obj] / self.best[c_obj] - 1:+.2%} on {self.objective})"
                )
        ok = self.table[self.table["status"] == "ok"].sort_values(c_obj).head(top)
        lines.append(f"top {len(ok)} by {self.objective}:")
        for _, row in ok.iterrows():
            lay = " ".join(f"{k} {row[k]}" for k in LAYOUT_KEYS)
            lines.append(
                f"  {lay}: mean {row['mean_s']:.5g} s, {self.objective} {row[c_obj]:.5g} s"
            )
        return "\n".join(lines)


def optimize(
    preset: str,
    gpus: int,
    objective: str = "p95",
    space: LayoutSpace | None = None,
    *,
    settings: EvalSettings | None = None,
    hardware: str | None = None,
    base: dict[str, Any] | None = None,
    out: str | Path | None = None,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> OptimizeResult:
    """Search the layouts of ``preset`` on ``gpus`` GPUs for the best by ``objective``.

    Parameters
    ----------
    preset : str
    gpus : int
    objective : {"mean", "p50", "p90", "p95", "p99", "p999", "runtime"}
        ``runtime`` needs ``settings.steps`` (the run time of that many steps at
        ``settings.probability``).
    space : LayoutSpace, optional
        Candidate values per axis.
    settings : EvalSettings, optional
        Engine and memory options; ``keep_batch`` and ``skip_infeasible`` are always on.
    hardware : str, optional
        Hardware preset (default: the model preset's).
    base : dict, optional
        Overrides applied to every layout (e.g. variability).
    out : path, optional
        Table of every candidate (CSV or Parquet; resumable).
    executor, progress
        As for :func:`~prism_analytic.sweep.runner.run_sweep`.

    Returns
    -------
    OptimizeResult

    Raises
    ------
    SweepError
        For a bad objective, ``runtime`` without steps, or when no layout is valid and fits.
    """
    col = objective_column(objective)
    settings = replace(settings or EvalSettings(), keep_batch=True, skip_infeasible=True)
    if objective == "runtime" and settings.steps is None:
        raise SweepError("--objective runtime needs --steps M (and --probability p)")
    partner = "p95" if objective == "mean" else "mean"
    spec, counts = layout_spec(preset, gpus, space, hardware=hardware, base=base)
    outcome = run_sweep(spec, settings, out, executor=executor, progress=progress)
    df = outcome.table
    # an --out table may hold rows of other searches: only this search's candidates compete
    df = df[df["config_id"].isin(outcome.ids)].reset_index(drop=True)
    counts = {**counts, "rows": len(df)}
    for status in ("ok", "invalid", "infeasible", "error"):
        counts[status] = int((df["status"] == status).sum())
    ok = df[(df["status"] == "ok") & df[col].notna() & df[OBJECTIVES[partner]].notna()]
    if ok.empty:
        raise SweepError(
            f"no valid layout of {preset} on {gpus} GPUs fits the memory estimate"
            f" ({counts['invalid']} invalid, {counts['infeasible']} over memory); widen the"
            " candidates (--tp/--pp/--cp/--recompute full) or set --memory-gb"
        )
    records = ok.astype(object).where(ok.notna(), None).to_dict("records")
    best = min(records, key=lambda r: (r[col], r["index"]))
    best_partner = min(records, key=lambda r: (r[OBJECTIVES[partner]], r["index"]))
    return OptimizeResult(
        table=df,
        objective=objective,
        partner=partner,
        best=best,
        best_partner=best_partner,
        counts=counts,
        settings=settings,
        lost=outcome.lost,
    )


def search(
    preset: str,
    gpus: int,
    objective: str = "p95",
    space: LayoutSpace | None = None,
    *,
    mode: str = "bnb",
    settings: EvalSettings | None = None,
    hardware: str | None = None,
    base: dict[str, Any] | None = None,
    out: str | Path | None = None,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Any:
    """The best layout by a quantile objective, with a proof for every eliminated layout.

    Parameters
    ----------
    preset, gpus, space, settings, hardware, base, executor, progress
        As for :func:`optimize`.
    objective : {"p50", "p90", "p95", "p99", "p999"}
        Objectives with guaranteed bounds (the mean and the run time have none: use
        :func:`optimize`).
    mode : {"bnb", "exhaustive"}
        ``bnb``: branch and bound; ``exhaustive``: every bound and the full engine on every
        candidate, the same rule (the reference the pruned search agrees with).
    out : path, optional
        Table of every candidate (CSV or Parquet: status, reason, bounds, proof, full-engine
        values). Finished bounds and full-engine rows are journalled next to it
        (``OUT.bounds.jsonl``) and read back by a rerun with the same ``out``.

    Returns
    -------
    SearchResult
    """
    from .bounds_search import branch_and_bound, candidate_table, exhaustive_search
    from .table import check_output

    objective_column(objective)
    if mode not in SEARCHES:
        raise SweepError(f"--search: {mode!r}; allowed: {', '.join(SEARCHES)}")
    path = check_output(out) if out is not None else None
    spec, counts = layout_spec(preset, gpus, space, hardware=hardware, base=base)
    if mode == "bnb":
        journal = None if path is None else path.with_name(path.name + ".bounds.jsonl")
        result = branch_and_bound(
            spec,
            counts,
            objective,
            settings=settings,
            executor=executor,
            progress=progress,
            journal=journal,
        )
    else:
        result = exhaustive_search(
            spec, counts, objective, settings=settings, executor=executor, progress=progress
        )
    if path is not None:
        table = candidate_table(result)
        if path.suffix.lower() == ".csv":
            table.to_csv(path, index=False)
        else:
            table.to_parquet(path, index=False)
    return result
