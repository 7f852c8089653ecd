"""The task-level API: one :class:`Job`, one method per question, one :class:`Result` each.

>>> from prism_analytic import Job
>>> job = Job("llama3-8b", gpus=8)
>>> job.gpus, job.config.parallelism.dp
(8, 8)

Each method wraps the library function the matching ``prism`` command calls
(:func:`~prism_analytic.workload.prediction.predict_job`,
:func:`~prism_analytic.analyses.runtime.run_time`, ...) and returns a
:class:`~prism_analytic.results.Result` whose ``summary()`` is the command's text and whose
``to_dict()`` is its ``--json`` content. Heavy modules are imported inside the methods, so
importing this module is cheap.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .results import Result

__all__ = ["Job", "list_presets", "predict_trace", "rare_stall_note"]

PathLike = str | os.PathLike[str]
#: The sections a keyword override may name (``Job("llama3-8b", 8, parallelism={...})``).
SECTIONS = ("model", "parallelism", "hardware", "training", "variability")


class Job:
    """A training job: a model, a layout on N GPUs, a cluster and a variability model.

    ``Job(preset, gpus, **overrides)`` is :meth:`from_preset`; see also :meth:`from_toml`,
    :meth:`from_dict` and :meth:`from_config`.

    Parameters
    ----------
    preset : str
        Model preset (``prism presets``), e.g. ``"llama3-405b"``.
    gpus : int
        Number of GPUs (a multiple of the preset's unit).
    **overrides : mapping or str
        Config sections overriding the preset key by key, e.g.
        ``parallelism={"tp": 4}``, ``variability={"spatial": {"cv": 0.03}}``;
        ``hardware="h200-sxm-141gb"`` names a hardware preset.

    Raises
    ------
    ValueError
        An unknown preset, section or key, or a GPU count the layout cannot use; the message
        names the key and what is allowed.
    """

    def __init__(self, preset: str, gpus: int, **overrides: Any) -> None:
        self._recipe: tuple[str, Any] = ("preset", (preset, dict(overrides)))
        self._overlays: tuple[Any, ...] = ()
        self.config = _preset_config(preset, gpus, overrides)

    # ----- construction --------------------------------------------------------------------
    @classmethod
    def from_preset(cls, preset: str, gpus: int, **overrides: Any) -> Job:
        """The job of a model preset on ``gpus`` GPUs, with keyword overrides (see :class:`Job`).

        Examples
        --------
        >>> Job.from_preset("llama3-70b", gpus=64, parallelism={"pp": 2}).config.parallelism.dp
        4
        """
        return cls(preset, gpus, **overrides)

    @classmethod
    def from_toml(cls, path: PathLike, *overlays: PathLike) -> Job:
        """The job a TOML file describes, with more TOML files merged on top in order.

        Parameters
        ----------
        path : str or PathLike
            A whole job (``[job] preset = ..., gpus = ...`` plus overrides), as
            ``prism predict --config FILE`` reads it.
        *overlays : str or PathLike
            Files merged on top (e.g. a ``prism calibrate`` overlay), as a repeated
            ``--config``; one that sets only an unused precision's GEMM efficiency is refused.
        """
        return cls._build(("toml", Path(path)), tuple(Path(p) for p in overlays), None)

    @classmethod
    def from_dict(cls, mapping: Mapping[str, Any]) -> Job:
        """The job a parsed TOML mapping describes (same shape as the file)."""
        if not isinstance(mapping, Mapping):
            raise TypeError(f"from_dict: expected a mapping, got {type(mapping).__name__}")
        return cls._build(("dict", dict(mapping)), (), None)

    @classmethod
    def from_config(cls, config: Any) -> Job:
        """Wrap an existing :class:`~prism_analytic.workload.config.JobConfig`."""
        from .workload.config import JobConfig

        if not isinstance(config, JobConfig):
            raise TypeError(f"from_config: expected a JobConfig, got {type(config).__name__}")
        return cls._build(("config", config), (), None)

    @classmethod
    def from_args(
        cls,
        preset: str | None = None,
        gpus: int | None = None,
        config: PathLike | None = None,
        *overlays: PathLike,
    ) -> Job:
        """The job of the commands' ``--preset NAME --gpus N --config FILE ...`` options.

        ``config`` overrides the preset key by key, or alone is a whole job file (then
        ``gpus`` overrides its ``[job] gpus``), as
        :func:`~prism_analytic.workload.jobs.build_job` reads them. ``overlays`` are the
        further ``--config`` files, merged on top in order. The files that overlay a job
        (``config`` on top of ``preset``, and ``overlays``) are checked together against the
        final job for a GEMM efficiency its precision does not use, as ``prism predict``
        checks them; :meth:`overlay` checks each step instead.
        """
        return cls._build(("args", (preset, config)), tuple(Path(p) for p in overlays), gpus)

    @classmethod
    def _build(cls, recipe: tuple[str, Any], overlays: tuple[Any, ...], gpus: int | None) -> Job:
        job = cls.__new__(cls)
        job._recipe = recipe
        job._overlays = overlays
        job.config = _recipe_config(recipe, overlays, gpus)
        return job

    def overlay(self, source: PathLike | Mapping[str, Any]) -> Job:
        """A new job with ``source`` (a TOML file, TOML text or a mapping) merged on top.

        Examples
        --------
        >>> fp8 = Job("llama3-8b", 8).overlay({"training": {"precision": "fp8"}})
        >>> fp8.config.training.precision
        'fp8'
        """
        if isinstance(source, Mapping):
            source = dict(source)
        elif isinstance(source, os.PathLike) or ("\n" not in source and "=" not in source):
            source = Path(source)  # a file, checked as --config overlays are
        return self._build(self._recipe, (*self._overlays, source), self.config.gpus)

    def at(self, gpus: int) -> Job:
        """The same job on another GPU count (a preset's layout is re-derived for it)."""
        return self._build(self._recipe, self._overlays, gpus)

    # ----- facts -----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The job's name (``preset@gpus`` for a preset)."""
        return self.config.name

    @property
    def gpus(self) -> int:
        """The job's GPU count."""
        return self.config.gpus

    @property
    def preset(self) -> str | None:
        """The model preset the job started from, when it was built from one by name."""
        return self._recipe[1][0] if self._recipe[0] in ("preset", "args") else None

    def summary(self) -> str:
        """One line: model, layout, hardware, batch, precision."""
        return self.config.summary()

    def __repr__(self) -> str:
        return f"Job({self.summary()!r})"

    # ----- tasks -----------------------------------------------------------------------------
    def predict(
        self,
        method: str = "analytic",
        *,
        samples: int = 20_000,
        seed: int = 0,
        verify: bool = True,
        tolerance: float | None = None,
        executor: Any = None,
        scheduler: str | None = None,
        workers: int | None = None,
        progress: Any = None,
        policy: Any = None,
    ) -> Result:
        """The step-time distribution (``prism predict``).

        Parameters
        ----------
        method : {"analytic", "montecarlo", "bounds"}
            The engine.
        samples, seed : int
            Monte Carlo options (the seed also seeds the cross-check).
        verify : bool
            Cross-check an approximate analytic answer (the command's default; its
            ``--no-verify`` is ``verify=False``).
        tolerance : float, optional
            Largest approximation error of a printed quantile, relative to it, that the
            cross-check accepts without a WARNING (``--tolerance``; default 0.001, i.e. 0.1%).
        executor : concurrent.futures.Executor, optional
            Runs Monte Carlo blocks (same result for the same seed).
        scheduler : str, optional
            Where Monte Carlo blocks run instead: ``"local"`` (a process pool), ``"dask"`` (a
            dask LocalCluster) or ``"tcp://HOST:PORT"`` (an existing dask scheduler), opened
            for this call and closed after it (``--scheduler``); only with ``"montecarlo"``.
        workers : int, optional
            Processes for ``"local"``/``"dask"`` (default: the CPU count; 1: this process).
        progress : callable, optional
            ``progress(done, total)`` for Monte Carlo.
        policy : GridPolicy, optional
            Grid resolution of the analytic and bounds engines.

        Returns
        -------
        Result
            Wraps the engine's result (``quantile``, ``mean``, ``quantile_bracket`` ...);
            ``info`` holds the graph size and the mean-model step.
        """
        from contextlib import nullcontext

        from .workload.builder import layout_dict
        from .workload.prediction import predict_job

        methods = ("analytic", "montecarlo", "bounds")
        if method not in methods:
            raise ValueError(f"method: expected one of {', '.join(methods)}, got {method!r}")
        if scheduler is not None and method != "montecarlo":
            raise ValueError(
                "--scheduler distributes Monte Carlo blocks: use it with --method montecarlo"
            )
        if scheduler is not None and executor is not None:
            raise ValueError("predict: give executor= or scheduler=, not both")
        job = self.config
        options = {} if tolerance is None else {"tolerance": tolerance}
        try:
            # opening the scheduler is part of the evaluation: its errors name the job too
            if scheduler is None:
                where = nullcontext(executor)
            else:
                from .sweep.executor import open_executor

                where = open_executor(scheduler, workers)
            with where as pool:
                value, _, info = predict_job(
                    job,
                    method=method,
                    samples=samples,
                    seed=seed,
                    verify=verify,
                    executor=pool,
                    progress=progress if method == "montecarlo" else None,
                    policy=policy,
                    **options,
                )
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"cannot evaluate {job.name}: {exc}") from exc
        layout = layout_dict(job)
        lines = [
            job.summary(),
            "layout: " + ", ".join(f"{k} {v}" for k, v in layout.items()),
            f"step graph: {info['graph_nodes']:,} nodes representing {info['represented_ops']:,}"
            f" ops (built in {info['build_time_s'] * 1e3:.0f} ms); mean-model step"
            f" {info['mean_model_step_s']:.4g} s",
            value.summary(),
        ]
        note = rare_stall_note(job)
        if note:
            lines.append(note)
        data = {"preset": self.preset, "gpus": job.gpus, "layout": layout}
        data.update(value.to_dict())
        data.update(info)
        result = Result(
            "predict",
            value,
            text="\n".join(lines),
            data=data,
            draw=value.plot,
            title=f"{job.name}: step time ({method})",
        )
        result.info = info
        return result

    def runtime(
        self,
        steps: int | None = None,
        *,
        tokens: float | None = None,
        failures: bool = True,
        failure_rate: float | None = None,
        checkpoint_interval_s: float | None = None,
        checkpoint_cost_s: float = 60.0,
        restart_s: float = 600.0,
        failslow_rate: float = 0.0,
        failslow_duration_s: float = 1800.0,
        failslow_factor: float = 1.5,
        deadline_s: float | None = None,
        prob: float | None = None,
        cells: int = 4000,
        renewal_cells: int = 1 << 14,
    ) -> Result:
        """The time of a whole run of ``steps`` steps (``prism runtime``).

        Parameters
        ----------
        steps : int, optional
            Training steps in the run; or give ``tokens``.
        tokens : float, optional
            Tokens to train on (converted to steps with the job's global batch).
        failures : bool
            Model failures, checkpoints, restarts and fail-slow episodes (``False``: the steps
            alone, the command's ``--no-failures``).
        failure_rate : float, optional
            Job-stopping failures per GPU-hour (default: Llama 3's, 2.19e-5).
        checkpoint_interval_s : float, optional
            Work between checkpoints (default: the optimum).
        checkpoint_cost_s, restart_s : float
            Time to write a checkpoint; from a failure to training again (seconds).
        failslow_rate, failslow_duration_s, failslow_factor : float
            Fail-slow episodes per GPU-hour, their mean length (s), the slow-down (>= 1).
        deadline_s : float, optional
            Also report P(run <= deadline_s).
        prob : float, optional
            Also report the run time met with probability ``prob``.
        cells : int
            Lattice size of the steps-alone law.
        renewal_cells : int
            Lattice size of each work stratum's law with interruptions
            (:func:`~prism_analytic.analyses.renewal.run_wall_law`).

        Returns
        -------
        Result
            Wraps :class:`~prism_analytic.analyses.runtime.RunTime` (``cdf``, ``quantile``).
        """
        from .analyses.interruptions import LLAMA3_RATE_PER_GPU_HOUR, Interruptions
        from .analyses.runtime import run_time, steps_for_tokens

        if (steps is None) == (tokens is None):
            raise ValueError("runtime: give exactly one of steps= or tokens=")
        _check_positive("deadline_s", deadline_s)
        if prob is not None and not (isinstance(prob, int | float) and 0 < prob < 1):
            raise ValueError(f"prob: expected a probability strictly in (0, 1), got {prob!r}")
        for name, value in (("cells", cells), ("renewal_cells", renewal_cells)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 16:
                raise ValueError(f"{name}: expected an integer >= 16 lattice points, got {value!r}")
        job = self.config
        if steps is None:
            _check_positive("tokens", tokens)
            steps = steps_for_tokens(job, tokens)
        elif isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps: expected an integer >= 1, got {steps!r}")
        intr = None
        if failures:
            intr = Interruptions(
                failure_rate=LLAMA3_RATE_PER_GPU_HOUR if failure_rate is None else failure_rate,
                checkpoint_interval_s=checkpoint_interval_s,
                checkpoint_cost_s=checkpoint_cost_s,
                restart_s=restart_s,
                failslow_rate=failslow_rate,
                failslow_duration_s=failslow_duration_s,
                failslow_factor=failslow_factor,
            )
        rt = run_time(job, steps, interruptions=intr, cells=cells, renewal_cells=renewal_cells)
        data = {"preset": self.preset, **rt.to_dict()}
        lines = [job.summary(), rt.summary()]
        if deadline_s is not None:
            data["deadline_s"] = deadline_s
            data["p_within_deadline"] = float(rt.cdf(deadline_s))
            lines.append(f"P(run <= {deadline_s / 3600:.4g} h) = {data['p_within_deadline']:.4f}")
        if prob is not None:
            data["prob"] = prob
            data["time_at_prob_s"] = float(rt.quantile(prob))
            lines.append(f"met with probability {prob:g}: {data['time_at_prob_s'] / 3600:.4g} h")
        return Result(
            "runtime",
            rt,
            text="\n".join(lines),
            data=data,
            draw=rt.plot,
            title=f"{job.name}: {steps:,} steps",
        )

    def slowdown(self, gpus: Sequence[int] | None = None, threshold: float = 0.05) -> Result:
        """P(step more than ``threshold`` over the deterministic step), by scale.

        Parameters
        ----------
        gpus : sequence of int, optional
            Strictly increasing GPU counts (default: the job's own); the job is rebuilt at
            each (a preset's layout re-derived), as ``prism slowdown --gpus A,B`` does.
        threshold : float
            Slow-down threshold (> 0), e.g. 0.05 for 5%.

        Returns
        -------
        Result
            Wraps :class:`~prism_analytic.analyses.slowdown.SlowdownResult` (``rows``).
        """
        from .analyses.slowdown import SlowdownResult, check_scales, slowdown_one

        scales = check_scales([self.gpus] if gpus is None else list(gpus), "gpus")
        if not (
            isinstance(threshold, int | float)
            and not isinstance(threshold, bool)
            and math.isfinite(threshold)
            and threshold > 0
        ):
            raise ValueError(f"threshold: expected a number > 0 (e.g. 0.05), got {threshold!r}")
        rows = tuple(
            slowdown_one(self.config if g == self.gpus else self.at(g).config, threshold)
            for g in scales
        )
        res = SlowdownResult(self.preset, float(threshold), rows)
        return Result(
            "slowdown",
            res,
            text=res.summary(),
            data=res.to_dict(),
            draw=res.plot,
            title=f"{self.preset or 'job'}: probability of slow-down",
        )

    def placement(self, slow_gpus: int, slow_factor: float, *, search: bool = True) -> Result:
        """Step time of placements of ``slow_gpus`` GPUs ``slow_factor`` x slower.

        Parameters
        ----------
        slow_gpus : int
            How many GPUs are slow (1 <= K <= the job's GPUs).
        slow_factor : float
            Their time multiplier (1.5 = 50% slower; below 1 = faster).
        search : bool
            Also run the structured search (``False``: the command's ``--no-search``).

        Returns
        -------
        Result
            Wraps :class:`~prism_analytic.analyses.placement.PlacementResult`.
        """
        from .analyses.placement import placement_analysis

        job = self.config
        res = placement_analysis(job, slow_gpus, slow_factor, search=search)
        text = "\n".join(
            [
                job.summary(),
                res.summary(),
                "stage cost of one slow stage (makespan ratio, mean times): "
                + ", ".join(f"s{i} {c:.3f}" for i, c in enumerate(res.stage_costs)),
            ]
        )
        return Result(
            "placement",
            res,
            text=text,
            data=res.to_dict(),
            draw=res.plot,
            title=f"{job.name}: {slow_gpus} GPUs {slow_factor:g}x slower",
            figsize=(7.0, 4.0),
        )

    def sensitivity(
        self, *, h: float = 0.05, rel_width: float = 5e-5, symbolic: bool = False
    ) -> Result:
        """Derivatives of the step's mean, p95 and std per kernel class.

        Parameters
        ----------
        h : float
            Relative difference step, in (0, 0.5).
        rel_width : float
            Grid resolution of the fine lattice (the engine may coarsen it for the job).
        symbolic : bool
            Also give the derived formulae in LaTeX (text, and ``latex`` in ``to_dict()``).

        Returns
        -------
        Result
            Wraps :class:`~prism_analytic.analyses.sensitivity.SensitivityResult`;
            ``closed_form_check`` compares sympy's closed forms, the engine and finite
            differences.
        """
        from .analyses.perturb import class_moments_per_rank
        from .analyses.sensitivity import sensitivity
        from .analyses.symbolic import closed_form_check, latex_formulae
        from .workload.mean_model import op_means

        if not (isinstance(h, int | float) and 0 < h < 0.5):
            raise ValueError(f"h: must lie in (0, 0.5), got {h!r}")
        job = self.config
        res = sensitivity(job, h=h, rel_width=rel_width)
        checks = closed_form_check(class_moments_per_rank(job, op_means(job)), job.parallelism.dp)
        data = res.to_dict()
        data["closed_form_check"] = [{**c.__dict__, "rel_error": c.rel_error} for c in checks]
        lines = [
            job.summary(),
            res.summary(),
            f"closed form (slowest of {job.parallelism.dp} i.i.d. normal ranks, sympy) vs engine"
            " (implicit) vs finite differences, largest relative disagreement per quantity:",
        ]
        lines += [
            f"  {c.cls:<15} {c.quantity:<28} symbolic {c.symbolic:.5g}  engine {c.engine:.5g}"
            f"  FD {c.finite_difference:.5g}  ({c.rel_error:.2%})"
            for c in checks
        ]
        if symbolic:
            data["latex"] = latex_formulae()
            lines.append(data["latex"])
        result = Result(
            "sensitivity",
            res,
            text="\n".join(lines),
            data=data,
            draw=res.plot,
            title=f"{job.name}: p95 sensitivity to kernel-class variability",
            figsize=(6.5, 4.0),
        )
        result.closed_form_check = checks
        return result

    def calibrate(
        self,
        logs: PathLike | Sequence[PathLike] | None = None,
        *,
        mfu: float | None = None,
        tokens_per_s: float | None = None,
        drop_first: int = 2,
        stall_threshold: float = 1.1,
        bootstrap: int = 2000,
        seed: int = 0,
        shape: str = "auto",
        events: bool = False,
        out: PathLike | None = None,
        progress: Any = None,
    ) -> Result:
        """Fit the stochastic model to step logs, or to a published MFU or throughput.

        Parameters
        ----------
        logs : path or sequence of paths, optional
            Step logs of this job (MLPerf ``:::MLLOG``, CSV, JSON); runs are pooled.
        mfu : float, optional
            Published MFU, a fraction in (0, 1) (instead of ``logs``).
        tokens_per_s : float, optional
            Published tokens per second (instead of ``logs``).
        drop_first : int
            Warm-up steps dropped per log.
        stall_threshold : float
            A step above this multiple (> 1) of its run's median is a stall.
        bootstrap, seed : int
            Bootstrap resamples and seed.
        shape : {"auto", "within-run", "marginal"}
            Which predicted law the normalised steps are compared with.
        events : bool
            Also fit step events by likelihood (reported, not in the overlay).
        out : path, optional
            Write the fitted overlay (TOML) here; ``job.overlay(out)`` applies it.
        progress : callable, optional
            ``progress(done, total)`` for the step-event refits (with ``logs``).

        Returns
        -------
        Result
            Wraps :class:`~prism_analytic.calibration.result.CalibrationResult`
            (``to_toml()``, ``parameters``); it has no plot.
        """
        from .calibration import calibrate_to_logs, calibrate_to_throughput

        if sum(x is not None for x in (logs, mfu, tokens_per_s)) != 1:
            raise ValueError("calibrate: give exactly one target: logs, mfu= or tokens_per_s=")
        target = _writable(out, "out")
        if logs is not None:
            res = calibrate_to_logs(
                self.config,
                _read_logs(logs, drop_first),
                stall_threshold=stall_threshold,
                n_resamples=bootstrap,
                seed=seed,
                shape=shape,
                events=events,
                progress=progress,
            )
        else:
            if mfu is not None and not (isinstance(mfu, int | float) and 0 < mfu < 1):
                raise ValueError(f"mfu: expected a fraction in (0, 1) (41% is 0.41), got {mfu!r}")
            _check_positive("tokens_per_s", tokens_per_s)
            res = calibrate_to_throughput(self.config, mfu=mfu, tokens_per_s=tokens_per_s)
        text = res.summary()
        if target is not None:
            target.write_text(res.to_toml())
            text += f"\noverlay written to {target} (use: prism predict ... --config {target})"
        return Result("calibrate", res, text=text, data=res.to_dict())

    def check(
        self,
        logs: PathLike | Sequence[PathLike],
        *,
        drop_first: int = 2,
        seed: int = 0,
        shape: str = "within-run",
        events_from: PathLike | Sequence[PathLike] | None = None,
        events_gpus: int | None = None,
        body_mode: str = "fitted",
        stall_dispersion: float | None = None,
        sizes: Sequence[tuple[Any, PathLike | Sequence[PathLike]]] | None = None,
    ) -> Result:
        """Compare this job's prediction with measured step logs, out of sample.

        What ``prism calibrate --check`` does.

        Parameters
        ----------
        logs : path or sequence of paths
            Step logs of this job (runs pooled).
        drop_first : int
            Warm-up steps dropped per log (also of ``events_from``).
        seed : int
            Seed of the bootstraps and of the event fit.
        shape : {"within-run", "marginal", "auto"}
            Which predicted law the normalised steps are compared with.
        events_from : path or sequence of paths, optional
            Step logs of the same job at another size (``events_gpus`` GPUs): step events are
            fitted on them and predicted at this size (``--events-from``).
        events_gpus : int, optional
            GPU count of ``events_from`` (given with it).
        body_mode : {"fitted", "engine", "none"}
            With ``events_from``: the step body of the prediction
            (:func:`~prism_analytic.calibration.step_events.predict_events`).
        stall_dispersion : float, optional
            With ``events_from``: variance (>= 0) of a gamma per-run multiplier of the stall
            rate; default: the value fitted with the events where identified, else 0.
        sizes : sequence of (job, logs), optional
            Logs of the same job at other sizes: ``job`` is a job file (or an uncalibrated
            :class:`Job`) of that size, and this job's overlays (the calibration) are merged
            on top of it. The result then holds the transfer error table (``"transfer"``:
            per size, predicted against measured median and p90/p50, the errors, and ratio
            scaling's: :func:`~prism_analytic.calibration.transfer.transfer_table`), this
            job (its logs, without its overlays for ratio scaling) being the calibration
            size.

        Returns
        -------
        Result
            Wraps the report dict (predicted and measured quantiles, KS distance ...).
        """
        from .calibration import check_against_logs, fit_step_events
        from .calibration.overlay_job import check_overlay_gemm

        if (events_from is None) != (events_gpus is None):
            raise ValueError("check: events_from= and events_gpus= go together")
        if events_gpus is not None and (
            isinstance(events_gpus, bool) or not isinstance(events_gpus, int) or events_gpus < 1
        ):
            raise ValueError(f"events_gpus: expected a positive integer, got {events_gpus!r}")
        modes = ("fitted", "engine", "none")
        if body_mode not in modes:
            raise ValueError(f"body_mode: expected one of {', '.join(modes)}, got {body_mode!r}")
        if stall_dispersion is not None and (
            isinstance(stall_dispersion, bool)
            or not isinstance(stall_dispersion, int | float)
            or not 0 <= stall_dispersion < math.inf
        ):
            raise ValueError(
                f"stall_dispersion: expected a finite number >= 0, got {stall_dispersion!r}"
            )
        if (stall_dispersion is not None or body_mode != "fitted") and events_from is None:
            raise ValueError("check: body_mode= and stall_dispersion= apply with events_from=")
        measured = _read_logs(logs, drop_first)
        check_overlay_gemm(self.config, [p for p in self._overlays if isinstance(p, Path)])
        events = None
        if events_from is not None:  # step events fitted at another size, predicted at this one
            ref = _read_logs(events_from, drop_first)
            events = fit_step_events(ref, events_gpus, seed=seed)
        report = check_against_logs(
            self.config,
            measured,
            seed=seed,
            shape=shape,
            events=events,
            body_mode=body_mode,
            stall_dispersion=stall_dispersion,
        )
        text = "\n".join(f"{k}: {v}" for k, v in report.items())
        if sizes is not None:
            from .calibration.transfer import seconds_notes, transfer_table, transfer_text

            ref, others = self._transfer_cases(measured, sizes, drop_first)
            notes = seconds_notes(self._overlays)
            report["transfer"] = transfer_table(ref, others, notes=notes)
            text += "\n" + transfer_text(report["transfer"])
        return Result("check", report, text=text, data=report)

    def _transfer_cases(
        self, measured: list[Any], sizes: Sequence[tuple[Any, Any]], drop_first: int
    ) -> tuple[Any, list[Any]]:
        """The transfer cases: this job (the calibration size), then ``sizes``.

        The calibration is this job's overlays: merged on top of every other size's job, and
        left out for ratio scaling's uncalibrated predictions.
        """
        from .calibration.transfer import SizeCase

        if isinstance(sizes, str | os.PathLike) or not sizes:
            raise ValueError("sizes: give a sequence of (job file or Job, logs) pairs")
        if not self._overlays:
            raise ValueError(
                "sizes: the transfer table compares a calibration with ratio scaling; this job"
                " has no overlay (give the calibration overlay: --overlay fit.toml)"
            )
        bare = self._build(self._recipe, (), self.config.gpus)
        ref = SizeCase(self.config, bare.config, measured)
        others = []
        for i, pair in enumerate(sizes):
            if not (isinstance(pair, Sequence) and not isinstance(pair, str) and len(pair) == 2):
                raise ValueError(f"sizes[{i}]: expected a (job file or Job, logs) pair")
            where, logs = pair
            other = where if isinstance(where, Job) else Job.from_args(None, None, where)
            overlays = (*other._overlays, *self._overlays)
            calibrated = other._build(other._recipe, overlays, other.config.gpus)
            others.append(SizeCase(calibrated.config, other.config, _read_logs(logs, drop_first)))
        return ref, others

    def sweep(
        self,
        grid: Mapping[str, Sequence[Any]] | None = None,
        *,
        gpus: Sequence[int] | None = None,
        hardware: Sequence[str] | None = None,
        method: str = "analytic",
        samples: int = 20_000,
        seed: int = 0,
        steps: int | None = None,
        probability: float = 0.99,
        memory_gb: float | None = None,
        reserve_gb: float = 0.0,
        keep_batch: bool = False,
        out: PathLike | None = None,
        scheduler: str | None = None,
        workers: int | None = None,
    ) -> Result:
        """Evaluate a grid of variants of this job, one row each (``prism sweep``).

        Parameters
        ----------
        grid : mapping, optional
            Dotted config key -> values, e.g. ``{"parallelism.tp": [4, 8]}``; every
            combination is evaluated.
        gpus : sequence of int, optional
            GPU counts (default: the job's own).
        hardware : sequence of str, optional
            Hardware presets (default: the job's).
        method, samples, seed, steps, probability, memory_gb, reserve_gb, keep_batch
            As the command's options (:class:`~prism_analytic.sweep.evaluate.EvalSettings`).
        out : path, optional
            CSV or Parquet table to write; rerunning with it skips finished rows.
        scheduler : str, optional
            ``"local"`` (a process pool), ``"dask"`` or ``"tcp://HOST:PORT"``; default: this
            process.
        workers : int, optional
            Processes for ``local``/``dask``.

        Returns
        -------
        Result
            Wraps the :class:`~prism_analytic.sweep.runner.SweepOutcome` (``table``).

        Notes
        -----
        A sweep varies a model preset; the job must come from one (by name, or a TOML file or
        mapping with ``[job] preset``). Keyword overrides, the file's other tables and
        overlays apply under every configuration.
        """
        from contextlib import nullcontext

        from .sweep.evaluate import EvalSettings
        from .sweep.executor import open_executor
        from .sweep.runner import run_sweep
        from .sweep.spec import SweepSpec
        from .sweep.table import check_output, sweep_report

        preset, base = self._sweep_base()
        spec = SweepSpec(
            presets=(preset,),
            gpus=tuple(gpus) if gpus is not None else (self.gpus,),
            hardware=tuple(hardware) if hardware is not None else (None,),
            grid=dict(grid or {}),
            base=base,
        )
        settings = EvalSettings(
            method=method,
            samples=samples,
            seed=seed,
            steps=steps,
            probability=probability,
            memory_gb=memory_gb,
            reserve_gb=reserve_gb,
            keep_batch=keep_batch,
        )
        target = check_output(out) if out is not None else None
        where = nullcontext() if scheduler is None else open_executor(scheduler, workers)
        with where as executor:
            outcome = run_sweep(spec, settings, target, executor=executor)
        text, data = sweep_report(outcome, target, len(spec))
        return Result("sweep", outcome, text=text, data=data)

    def optimize(
        self,
        objective: str = "p95",
        space: Any = None,
        *,
        search: str | None = None,
        method: str = "analytic",
        memory_gb: float | None = None,
        reserve_gb: float = 0.0,
        global_batch: int | None = None,
        out: PathLike | None = None,
        scheduler: str | None = None,
        workers: int | None = None,
    ) -> Result:
        """Search this job's layouts (``prism optimize``).

        Parameters
        ----------
        objective : {"p50", "p90", "p95", "p99", "p999", "mean"}
            A quantile is searched by branch and bound on guaranteed bounds (the winner, its
            tie set and a proof per eliminated layout); the mean by evaluating every layout.
        space : LayoutSpace, optional
            Candidate values per axis (:class:`~prism_analytic.sweep.layouts.LayoutSpace`).
        search : {"bnb", "exhaustive", "sweep"}, optional
            Default: ``bnb`` for a quantile, ``sweep`` for the mean.
        method, memory_gb, reserve_gb, global_batch
            The full engine and the memory and batch settings
            (:class:`~prism_analytic.sweep.evaluate.EvalSettings`).
        out : path, optional
            Table of every candidate (a rerun with it reads finished work back).
        scheduler, workers
            As for :meth:`sweep`.

        Returns
        -------
        Result
            Wraps the :class:`~prism_analytic.sweep.bounds_search.SearchResult` (or, for
            ``search="sweep"``, the :class:`~prism_analytic.sweep.optimize.OptimizeResult`).
        """
        from contextlib import nullcontext

        from .engines.lower_bounds import has_guaranteed_bounds
        from .sweep.evaluate import EvalSettings
        from .sweep.executor import open_executor
        from .sweep.optimize import optimize
        from .sweep.optimize import search as bnb_search

        preset, base = self._sweep_base()
        mode = search or ("bnb" if has_guaranteed_bounds(objective) else "sweep")
        settings = EvalSettings(
            method=method, memory_gb=memory_gb, reserve_gb=reserve_gb, global_batch=global_batch
        )
        where = nullcontext() if scheduler is None else open_executor(scheduler, workers)
        with where as executor:
            if mode == "sweep":
                value = optimize(
                    preset,
                    self.gpus,
                    objective,
                    space,
                    settings=settings,
                    base=base,
                    out=out,
                    executor=executor,
                )
            else:
                value = bnb_search(
                    preset,
                    self.gpus,
                    objective,
                    space,
                    mode=mode,
                    settings=settings,
                    base=base,
                    out=out,
                    executor=executor,
                )
        data = {"preset": preset, "gpus": self.gpus, **value.to_dict()}
        return Result("optimize", value, text=value.summary(), data=data)

    def _sweep_base(self) -> tuple[str, dict[str, Any]]:
        """The preset and the nested overrides a sweep applies under every configuration."""
        from .workload.config.toml_io import _deep_merge, _read_source

        kind, arg = self._recipe
        if kind == "preset":
            preset, base = arg[0], _hardware_as_table(arg[1])
        elif kind == "args" and arg[0] is not None:
            preset, base = arg[0], {} if arg[1] is None else dict(_read_source(Path(arg[1])))
        elif kind in ("toml", "dict", "args"):
            raw = dict(_read_source(Path(arg[1]) if kind == "args" else arg))
            table = dict(raw.pop("job", {}))
            if "preset" not in table:
                raise ValueError("sweep: the job's [job] table names no preset; a sweep varies one")
            if "hardware" in table:
                raise ValueError(
                    "sweep: give a [job] hardware preset with sweep(hardware=[...]) instead"
                )
            preset, base = table["preset"], raw
        else:
            raise ValueError("sweep: a job wrapped from a JobConfig names no preset to vary")
        for extra in self._overlays:
            base = _deep_merge(base, dict(_read_source(extra)))
        return preset, base


def predict_trace(
    trace: PathLike | Any,
    *,
    measured: PathLike | None = None,
    fit_steps: str = "first-half",
    samples: int = 4000,
    seed: int = 0,
    warmup: str | int = "auto",
    analytic: str = "auto",
) -> Result:
    """Fit a step model on some steps of a real trace and predict the others.

    ``prism trace-predict`` as a function (needs the ``traces`` extra for parquet/CSV); the
    arguments are :func:`~prism_analytic.traces.predict.predict_trace`'s.

    Returns
    -------
    Result
        Wraps :class:`~prism_analytic.traces.predict.TracePrediction`.
    """
    from .traces.predict import predict_trace as fit_and_predict

    res = fit_and_predict(
        trace,
        measured=measured,
        fit_steps=fit_steps,
        samples=samples,
        seed=seed,
        warmup=warmup,
        analytic=analytic,
    )
    return Result(
        "trace-predict",
        res,
        text=res.summary(),
        data=res.to_dict(),
        draw=res.plot,
        figsize=(6.0, 4.0),
    )


def list_presets() -> Result:
    """The model presets (with the GPU-count unit of each) and the hardware presets.

    Returns
    -------
    Result
        ``to_dict()`` is ``{"models": {name: {description, gpu_multiple}}, "hardware": ...}``.
    """
    from .workload.presets import HARDWARE, MODELS, PRESETS, allowed_gpu_multiple

    models = {
        n: {"description": PRESETS.get(n, ""), "gpu_multiple": allowed_gpu_multiple(n)}
        for n in MODELS
    }
    hardware = {n: {"description": PRESETS.get(n, "")} for n in HARDWARE}
    lines = ["Model presets (prism predict --preset NAME --gpus N, N a multiple of the unit):"]
    width = max(len(n) for n in models)
    lines += [
        f"  {n:<{width}}  unit {d['gpu_multiple']:>4}  {d['description']}"
        for n, d in models.items()
    ]
    lines.append("Hardware presets (TOML: [job] hardware = NAME):")
    width = max(len(n) for n in hardware)
    lines += [f"  {n:<{width}}  {d['description']}" for n, d in hardware.items()]
    data = {"models": models, "hardware": hardware}
    return Result("presets", data, text="\n".join(lines), data=data)


# ----- helpers ---------------------------------------------------------------------------------
def _preset_config(preset: str, gpus: int, overrides: Mapping[str, Any]) -> Any:
    """``build_job(preset, gpus)`` with keyword section overrides merged on top."""
    from .workload.jobs import build_job, merge_config

    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int)):
        raise ValueError(f"gpus: expected a positive integer, got {gpus!r}")
    if gpus is not None and gpus < 1:
        raise ValueError(f"gpus: expected a positive integer, got {gpus}")
    unknown = sorted(set(overrides) - set(SECTIONS))
    if unknown:
        raise ValueError(
            f"{unknown[0]}: unknown override; allowed keyword overrides: {', '.join(SECTIONS)}"
        )
    job = build_job(preset, gpus)
    if overrides:
        job = merge_config(job, _hardware_as_table(overrides))
    return job


def _hardware_as_table(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``hardware="NAME"`` becomes that hardware preset's table."""
    out = dict(overrides)
    if isinstance(out.get("hardware"), str):
        from .workload.config.toml_io import config_to_dict
        from .workload.presets import hardware_preset

        out["hardware"] = config_to_dict(hardware_preset(out["hardware"]))
    return out


def _recipe_config(recipe: tuple[str, Any], overlays: tuple[Any, ...], gpus: int | None) -> Any:
    """The JobConfig a recipe gives (at ``gpus`` when given), with the overlays merged."""
    from .workload.jobs import apply_overlay, build_job, load_config, merge_config

    kind, arg = recipe
    if kind == "preset":
        job = _preset_config(arg[0], gpus, arg[1])
    elif kind == "toml":
        job = build_job(None, gpus, arg)
    elif kind == "args":
        job = build_job(arg[0], gpus, arg[1])
    elif kind == "dict":
        mapping = dict(arg)
        if gpus is not None:
            mapping["job"] = {**dict(mapping.get("job", {})), "gpus": gpus}
        job = load_config(mapping)
    else:
        job = (
            arg if gpus is None or gpus == arg.gpus else merge_config(arg, {"job": {"gpus": gpus}})
        )
    for extra in overlays:
        # a file is read as a --config overlay is (a missing one is named as --config's)
        job = apply_overlay(job, extra) if isinstance(extra, Path) else merge_config(job, extra)
    paths = [p for p in overlays if isinstance(p, Path)]
    if kind == "args" and arg[0] is not None and arg[1] is not None:
        paths.insert(0, Path(arg[1]))  # the file is an overlay on the preset, as in predict
    if paths:
        from .calibration.overlay_job import check_overlay_gemm

        check_overlay_gemm(job, paths)
    return job


def rare_stall_note(job: Any) -> str | None:
    """The note ``prism predict`` prints about the rare whole-step stall, if any.

    The default stall (``variability.hiccups``, measured on the MLPerf logs) strikes well under
    1% of steps, so it leaves p99 alone and lifts the quantiles above ``1 - probability`` by about
    its size: without a sentence the jump from p99 to p999 reads like a numerical artefact.
    """
    from .workload.step_estimate import step_time

    hic = job.variability.hiccups
    if not 0.0 < hic.probability < 0.5:
        return None
    size = hic.size_s if hic.size_s > 0.0 else hic.seconds(step_time(job).step_s)
    if not size > 0.0:
        return None
    level = 100.0 * (1.0 - hic.probability)
    return (
        f"note: quantiles above ~p{level:.4g} include the rare whole-step stall"
        f" (variability.hiccups: {100.0 * hic.probability:.3g}% of steps, +{size:.3g} s);"
        " set variability.hiccups.probability = 0 to leave it out"
    )


def _read_logs(logs: PathLike | Sequence[PathLike], drop_first: int) -> list[Any]:
    from .calibration import read_step_log

    paths = [logs] if isinstance(logs, str | os.PathLike) else list(logs)
    if not paths:
        raise ValueError("logs: give at least one step log")
    return [read_step_log(p, drop_first=drop_first) for p in paths]


def _check_positive(name: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name}: expected a finite number > 0, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number > 0, got {value!r}")


def _writable(path: PathLike | None, name: str) -> Path | None:
    if path is None:
        return None
    p = Path(path)
    if p.is_dir() or not p.parent.is_dir():
        raise ValueError(f"{name}: {str(path)!r} is not a writable file path")
    return p
