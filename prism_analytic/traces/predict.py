"""Trace -> step model -> prediction of held-out steps, compared with the measurement.

:func:`predict_trace` reads a trace, recovers the step structure, drops detected warm-up
steps, fits the model on one half of the remaining steps (``fit_steps``) and predicts the
other half, which it never saw; ``"all"`` fits and predicts every step (in-sample, flagged).

Before anything is fitted, the structure is proven: the fit steps' measured values are
replayed through it (:func:`~prism_analytic.traces.replay_check.replay_check`) and the
recovered process groups are checked against the job's layout when it is known
(:mod:`~prism_analytic.traces.layout`); after fitting, the model must reproduce its own fit
steps (:func:`~prism_analytic.traces.compare.model_check`). A prediction that fails a check
is still made but labelled not validated, with one line per failed check naming the likely
cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from prism_analytic.traces.compare import compare_steps, describe, model_check
from prism_analytic.traces.effects import rank_effects, warmup_steps
from prism_analytic.traces.layout import (
    Layout,
    check_layout,
    find_layout_meta,
    parse_layout,
    read_layout_meta,
)
from prism_analytic.traces.library import fit_signatures, otsu_split
from prism_analytic.traces.model import TraceModel, fit_trace_model
from prism_analytic.traces.readers import read_step_series, read_trace
from prism_analytic.traces.replay_check import DEFAULT_THRESHOLD, replay_check
from prism_analytic.traces.structure import recover_structure, replay, unit_values
from prism_analytic.traces.table import EventTable
from prism_analytic.traces.typical import typical_step_by_type, typical_step_per_rank

__all__ = ["TracePrediction", "predict_trace", "FIT_STEPS"]

FIT_STEPS = ("first-half", "second-half", "all")
#: Largest structure (units) for which ``analytic="auto"`` runs the analytic engine.
ANALYTIC_AUTO_UNITS = 400


@dataclass(frozen=True)
class TracePrediction:
    """Prediction of a trace's held-out steps and its comparison with the measurement.

    Attributes
    ----------
    source : str
        Trace file(s).
    fit_steps, predicted_steps, warmup_steps : list of int
        Step ids used to fit, predicted, and left out as warm-up.
    samples : numpy.ndarray
        Sampled predicted step times (seconds).
    measured : numpy.ndarray
        Measured times of the predicted steps.
    metrics : dict
        From :func:`~prism_analytic.traces.compare.compare_steps`.
    in_sample : dict
        The same comparison against the fit steps.
    typical : dict
        Deterministic step times (every op at a typical value).
    effects : dict
        Effects detected in the fit steps.
    model : TraceModel
        The fitted model.
    analytic : dict or None
        The analytic engine's law and its Monte Carlo cross-checks (or why it was skipped).
    latency_library : list
        A fitted law per op signature (:func:`~prism_analytic.traces.library.fit_signatures`).
    replay : dict
        The fit steps replayed through the structure
        (:meth:`~prism_analytic.traces.replay_check.ReplayCheck.to_dict`).
    layout : dict or None
        The layout used for the check and its contradictions, or None when unknown.
    problems : list of str
        One line per failed check (``REPLAY FAILED: ...``, ``LAYOUT CONTRADICTION: ...``,
        ``MODEL CHECK FAILED: ...``: the fitted model off its own fit steps).
    """

    source: str
    fit_steps: list
    predicted_steps: list
    warmup_steps: list
    samples: np.ndarray = field(repr=False)
    measured: np.ndarray = field(repr=False)
    metrics: dict
    in_sample: dict
    typical: dict
    effects: dict
    model: TraceModel = field(repr=False)
    analytic: dict | None = None
    latency_library: list = field(default_factory=list, repr=False)
    replay: dict = field(default_factory=dict)
    layout: dict | None = None
    problems: list = field(default_factory=list)

    @property
    def validated(self) -> bool:
        """Whether the structure reproduced the measured steps and fits the layout."""
        return not self.problems

    def to_dict(self) -> dict:
        """JSON-ready result (the keys of ``prism trace-predict --json``)."""
        m = self.metrics
        out = {
            "trace": self.source,
            "fit_steps": self.fit_steps,
            "predicted_steps": self.predicted_steps,
            "warmup_steps_excluded": self.warmup_steps,
            "out_of_sample": self.fit_steps != self.predicted_steps,
            "validated": self.validated,
            "problems": list(self.problems),
            "replay": self.replay,
            "layout": self.layout,
            "predicted": m["predicted"],
            "measured": m["measured"],
        }
        for key in (
            "mean_rel_err",
            "p50_rel_err",
            "p90_rel_err",
            "p95_rel_err",
            "measured_p95_ci90",
            "p95_in_measured_ci",
            "measured_p95_ci90_order_stat",
            "p95_in_order_stat_ci",
            "ks",
            "ks_pvalue",
            "ks_shape",
            "ks_shape_pvalue",
            "std_ratio",
        ):
            out[key] = m[key]
        out["in_sample_mean_rel_err"] = self.in_sample["mean_rel_err"]
        out["typical_step_s"] = self.typical["per_rank_s"]
        out["typical_step_by_type_s"] = self.typical["by_type_s"]
        out["effects"] = self.effects
        out["latency_library"] = self.latency_library
        if self.analytic is not None:
            out["analytic"] = self.analytic
        return out

    def summary(self) -> str:
        """A short table of predicted vs measured."""
        p, m = self.metrics["predicted"], self.metrics["measured"]
        r = self.replay
        lines = list(self.problems) + [
            f"trace {self.source}: fit on {len(self.fit_steps)} steps, predicted "
            f"{len(self.predicted_steps)} held-out steps"
            + (f" ({len(self.warmup_steps)} warm-up steps left out)" if self.warmup_steps else ""),
            (
                f"validated: the structure replays the fit steps within median "
                f"{r['median_rel_err']:.2%}, max {r['max_rel_err']:.2%}"
                + (f"; layout {self.layout['layout']} agrees" if self.layout else "")
                + f"; the model's mean is {self.in_sample['mean_rel_err']:+.2%} off its fit steps"
                if self.validated
                else "prediction NOT VALIDATED: see the line(s) above"
            ),
            f"{'':10}{'mean':>10}{'std':>10}{'p50':>10}{'p90':>10}{'p95':>10}",
        ]
        for label, d in (("predicted", p), ("measured", m)):
            lines.append(
                f"{label:10}"
                + "".join(f"{d[k]:10.4f}" for k in ("mean_s", "std_s", "p50_s", "p90_s", "p95_s"))
            )
        x = self.metrics
        lines.append(
            f"errors: mean {x['mean_rel_err']:+.2%}, p50 {x['p50_rel_err']:+.2%}, "
            f"p90 {x['p90_rel_err']:+.2%}; p95 in measured 90% CI: {x['p95_in_measured_ci']}; "
            f"KS {x['ks']:.3f} (shape p {x['ks_shape_pvalue']:.3f}); std ratio "
            f"{x['std_ratio']:.2f}"
        )
        lines.append(
            f"typical step: {self.typical['per_rank_s']:.4f} s per rank (with host gaps), "
            f"{self.typical['by_type_s']:.4f} s with every op type at its typical value"
        )
        slow = self.effects.get("slow_ranks") or []
        if slow:
            lines.append(
                "slow ranks: " + ", ".join(f"rank {s['rank']} (x{s['slowdown']:.2f})" for s in slow)
            )
        return "\n".join(lines)

    def plot(self, ax=None):
        """Predicted vs measured CDFs of the held-out steps.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Axes to draw on (a new figure otherwise).

        Returns
        -------
        matplotlib.axes.Axes
        """
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 4))
        p = np.sort(self.samples)
        ax.plot(p, np.arange(1, p.size + 1) / p.size, label="predicted (model)")
        m = np.sort(self.measured)
        ax.step(m, np.arange(1, m.size + 1) / m.size, where="post", label="measured")
        ax.set_xlabel("step time (s)")
        ax.set_ylabel("CDF")
        ax.set_title(Path(self.source).name)
        ax.legend()
        return ax


def _split(n_rows: int, first: int, fit_steps: str):
    rows = np.arange(first, n_rows)
    half = rows.size // 2
    if fit_steps == "first-half":
        return rows[:half], rows[half:]
    if fit_steps == "second-half":
        return rows[half:], rows[:half]
    return rows, rows


def predict_trace(
    trace,
    *,
    measured=None,
    fit_steps: str = "first-half",
    samples: int = 4000,
    seed: int = 0,
    warmup: str | int = "auto",
    analytic: str = "auto",
    library: bool = True,
    layout: Layout | str | None = None,
    replay_threshold: float = DEFAULT_THRESHOLD,
) -> TracePrediction:
    """Fit on some steps of a trace and predict the others.

    Parameters
    ----------
    trace : str, Path or EventTable
        A per-op table or Kineto trace (see :func:`~prism_analytic.traces.read_trace`).
    measured : str or Path, optional
        Measured step times (JSON/CSV); by default the trace's own step times (last end
        minus first start). Step ids must match the trace's when the file has them.
    fit_steps : {"first-half", "second-half", "all"}
        Which steps to fit on; the others are predicted (``"all"``: in-sample).
    samples : int
        Monte Carlo samples of the fitted model.
    seed : int
        Random seed.
    warmup : "auto" or int
        Leading steps to leave out: detected (``"auto"``) or a given number.
    analytic : {"auto", "on", "off"}
        Also compute the step law with the analytic engine (a mixture over fit-step states,
        see :mod:`prism_analytic.traces.graph`) and cross-check it with Monte Carlo.
        ``"auto"``: only when the structure has at most :data:`ANALYTIC_AUTO_UNITS` units
        (the engine takes seconds per state on graphs of thousands of nodes).
    library : bool
        Also fit a latency law per op signature (the latency library; a few seconds).
    layout : Layout, str or None
        The job's layout: a :class:`~prism_analytic.traces.layout.Layout`, a
        ``dp=..,pp=..`` string, or None to read ``meta-<name>.yaml`` beside a trace file
        (no check when there is none).
    replay_threshold : float
        Largest replay error (per step, relative) of a validated structure.

    Returns
    -------
    TracePrediction
    """
    if analytic not in ("auto", "on", "off"):
        raise ValueError(f"analytic must be 'auto', 'on' or 'off', got {analytic!r}")
    if fit_steps not in FIT_STEPS:
        raise ValueError(f"fit_steps must be one of {FIT_STEPS}, got {fit_steps!r}")
    if not isinstance(samples, (int, np.integer)) or samples < 100:
        raise ValueError(f"samples must be an integer >= 100, got {samples!r}")
    if isinstance(layout, str):
        layout = parse_layout(layout)
    elif layout is None and not isinstance(trace, EventTable):
        meta = find_layout_meta(trace)
        layout = read_layout_meta(meta) if meta is not None else None
    elif layout is not None and not isinstance(layout, Layout):
        raise ValueError(f"layout must be a Layout, a 'dp=..,pp=..' string or None, got {layout!r}")
    table = trace if isinstance(trace, EventTable) else read_trace(trace)
    structure = recover_structure(table)
    steps = structure.steps
    gap, dur = unit_values(structure)
    times = replay(structure, gap, dur)
    if measured is not None:
        series = read_step_series(measured)
        missing = [s for s in steps if s not in series.index]
        if missing and len(series) == len(steps):
            times = series.to_numpy()
        elif missing:
            raise ValueError(
                f"measured: {measured} has no time for steps {missing[:5]} of the trace "
                f"({len(missing)} missing)"
            )
        else:
            times = series.loc[steps].to_numpy()
    if warmup == "auto":
        n_warm = warmup_steps(times)
    elif isinstance(warmup, (int, np.integer)) and 0 <= warmup < len(steps):
        n_warm = int(warmup)
    else:
        raise ValueError(
            f"warmup must be 'auto' or an integer in [0, {len(steps)}), got {warmup!r}"
        )
    fit_rows, pred_rows = _split(len(steps), n_warm, fit_steps)
    if fit_rows.size < 8 or pred_rows.size < 4:
        raise ValueError(
            f"{table.source}: {len(steps) - n_warm} usable steps; need at least 8 to fit and 4 "
            "to predict"
        )
    check = replay_check(structure, fit_rows, threshold=replay_threshold)
    problems = [check.failure_line()] if not check.passed else []
    layout_out = None
    if layout is not None:
        wrong = check_layout(layout, structure)
        layout_out = {
            "layout": layout.describe(),
            "source": layout.source,
            "sizes": layout.to_dict(),
            "contradictions": wrong,
        }
        if wrong:
            more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
            problems.append(
                f"LAYOUT CONTRADICTION: {wrong[0]}{more}; layout {layout.describe()} from "
                f"{layout.source}; the prediction is not validated"
            )
    model = fit_trace_model(structure, fit_rows, rng=seed)
    draws = model.sample(samples, seed)
    metrics = compare_steps(draws, times[pred_rows], rng=seed)
    in_sample = compare_steps(draws, times[fit_rows], rng=seed)
    problems += model_check(
        in_sample, lone_communication_ops=int(model.info.get("lone_communication_ops", 0))
    )
    typical = {
        "per_rank_s": typical_step_per_rank(structure, fit_rows),
        "per_rank_no_gaps_s": typical_step_per_rank(structure, fit_rows, gaps=False),
        "by_type_s": typical_step_by_type(structure, fit_rows),
        "model_s": model.typical_step(),
        "measured_median_s": float(np.median(times[pred_rows])),
    }
    effects = dict(rank_effects(model))
    effects["shared_factors"] = model.info
    effects["hidden_dependencies"] = [h.to_dict(structure) for h in model.hidden]
    effects["collective_groups"] = structure.diagnostics.get("collective groups", {})
    effects["structure"] = {
        k: v for k, v in structure.diagnostics.items() if k != "collective groups"
    }
    effects["fit_families"] = {k: v.family for k, v in model.residual.items()}
    effects["measured_fit_steps"] = describe(times[fit_rows])
    effects["pipeline_p2p_otsu"] = otsu_split(table, [steps[i] for i in fit_rows])
    library_out = fit_signatures(structure, fit_rows, seed=seed) if library else []
    analytic_out = None
    if analytic == "on" or (analytic == "auto" and structure.n_units <= ANALYTIC_AUTO_UNITS):
        from prism_analytic.traces.graph import analytic_crosscheck

        try:
            analytic_out = analytic_crosscheck(model, draws, seed=seed)
        except (ValueError, ArithmeticError, RuntimeError) as exc:
            # the replay is the model's exact semantics; an engine failure on this graph is
            # reported, not allowed to hide the prediction
            analytic_out = {"error": f"analytic engine failed: {type(exc).__name__}: {exc}"}
    elif analytic == "auto":
        analytic_out = {
            "skipped": f"{structure.n_units} units > {ANALYTIC_AUTO_UNITS}; pass analytic='on' "
            "(--analytic on) to run it (seconds per fit step)"
        }
    return TracePrediction(
        source=table.source,
        fit_steps=[int(steps[i]) for i in fit_rows],
        predicted_steps=[int(steps[i]) for i in pred_rows],
        warmup_steps=[int(s) for s in steps[:n_warm]],
        samples=draws,
        measured=times[pred_rows],
        metrics=metrics,
        in_sample=in_sample,
        typical=typical,
        effects=effects,
        model=model,
        analytic=analytic_out,
        latency_library=library_out,
        replay=check.to_dict(),
        layout=layout_out,
        problems=problems,
    )
