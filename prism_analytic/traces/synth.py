"""Synthetic per-op traces of known truth: the ground truth for the trace tests.

:func:`simulate` runs a :class:`~prism_analytic.traces.synth_job.SynthJob` (any Megatron-style
layout: data, pipeline with 1F1B or interleaved schedules, tensor, ring context or Ulysses
sequence, expert parallel) for some steps and returns a :class:`SynthTrace`: the per-op table
in the straggler-trace schema, its layout metadata, the step times, the true laws and factors,
and the true dependency edges. :func:`step_time_samples` is the generator's own Monte Carlo of
the step time; :func:`write_trace` writes the files the trace readers take.

The simulation semantics are in :mod:`prism_analytic.traces.synth_sim`; the programs and
process groups in :mod:`prism_analytic.traces.synth_layout`.

Examples
--------
>>> trace = simulate(SynthJob(dp=2, pp=2, microbatches=2), steps=3, seed=1)
>>> len(trace.step_times), sorted(trace.frame.columns)[:3]
(3, ['dp_rank', 'duration', 'mb_id'])
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prism_analytic.traces.errors import require_pandas
from prism_analytic.traces.synth_job import COMPUTE_OPTYPES, Law, SynthJob, parse_layout
from prism_analytic.traces.synth_layout import Program, build_program
from prism_analytic.traces.synth_sim import run_steps

__all__ = [
    "SynthJob",
    "Law",
    "SynthTrace",
    "simulate",
    "step_time_samples",
    "write_trace",
    "parse_layout",
]

_RECEIVES = ("forward-recv", "backward-recv")
#: Column order of the written per-op table.
COLUMNS = (
    "dp_rank",
    "stage",
    "rank",
    "step",
    "optype",
    "start_ts",
    "duration",
    "seq_id",
    "mc",
    "mb_id",
)


def _check_count(name: str, value, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


@dataclass
class SynthTrace:
    """A simulated trace and its truth.

    Attributes
    ----------
    job : SynthJob
        What was simulated.
    frame : pandas.DataFrame
        Per-op table: ``dp_rank, stage, rank, step, optype, start_ts, duration, seq_id, mc,
        mb_id`` (seconds; steps back to back from 0).
    meta : dict
        Layout metadata (keys of the shared ``meta-*.yaml``).
    step_times : numpy.ndarray
        Per step: last op end minus first op start.
    truth : dict
        ``laws`` (family parameters per optype present, by the name written), ``gap``,
        ``slow_ranks``, ``stage_scale``, ``step_factor`` and ``mb_factor`` laws and their
        drawn values ``step_factors`` (steps,) and ``mb_factors`` (steps, dp, microbatches).
    program : Program
        The static per-rank programs and units.
    step_start : numpy.ndarray
        (steps,) absolute time of each step's zero (the previous step's last end).
    """

    job: SynthJob
    frame: object
    meta: dict
    step_times: np.ndarray
    truth: dict
    program: Program
    step_start: np.ndarray

    def edges(self) -> dict:
        """True dependency edges in the trace contract's shape.

        Returns
        -------
        dict
            ``"chain"``: set of ``(key_before, key_after)`` in-rank program order;
            ``"groups"``: set of frozensets of the keys of each multi-member unit (a
            collective instance, a send with its receive). ``key = (rank, optype, seq_id)``.
        """
        prog = self.program
        keys = [prog.key(i) for i in range(prog.n_ops)]
        chain = {
            (keys[a], keys[b])
            for ops in prog.rank_ops
            for a, b in zip(ops[:-1], ops[1:], strict=True)
        }
        groups = {frozenset(keys[i] for i in m) for m in prog.units if len(m) > 1}
        return {"chain": chain, "groups": groups}


def _truth(job: SynthJob, prog: Program, sim) -> dict:
    present = sorted(set(prog.optype.tolist()))
    return {
        # a receive has no law of its own: its transfer is drawn from the send's law
        "laws": {job.label(o): job.law(o).params() for o in present if o not in _RECEIVES},
        "gap": job.gap.params(),
        "slow_ranks": dict(job.slow_ranks),
        "stage_scale": dict(job.stage_scale),
        "step_factor": job.step_factor.params(),
        "mb_factor": job.mb_factor.params(),
        "step_factors": sim.step_factors,
        "mb_factors": sim.mb_factors,
        "compute_optypes": [job.label(o) for o in COMPUTE_OPTYPES],
        "scaling": (
            "compute duration = law draw x slow-rank factor x stage scale x step factor x "
            "microbatch factor "
            "(optimizer: no microbatch factor); communication: one law draw per instance"
        ),
    }


def simulate(job: SynthJob | dict, steps: int, seed: int | None = 0) -> SynthTrace:
    """Simulate ``steps`` steps of a synthetic job.

    Parameters
    ----------
    job : SynthJob or dict
        The job (a dict is passed to :meth:`SynthJob.from_dict`).
    steps : int
        Steps to simulate (>= 1).
    seed : int or None
        Random seed.

    Returns
    -------
    SynthTrace
    """
    pd = require_pandas()
    job = job if isinstance(job, SynthJob) else SynthJob.from_dict(job)
    steps = _check_count("steps", steps)
    prog = build_program(job)
    sim = run_steps(job, prog, steps, np.random.default_rng(seed), record=True)
    n = prog.n_ops
    start = sim.start + sim.step_start[None, :]
    names, codes = np.unique(prog.label.astype(str), return_inverse=True)
    frame = pd.DataFrame(
        {
            "dp_rank": np.tile(prog.dp_rank, steps),
            "stage": np.tile(prog.stage, steps),
            "rank": np.tile(prog.rank, steps),
            "step": np.repeat(np.arange(steps), n),
            "optype": pd.Categorical.from_codes(np.tile(codes, steps), categories=names),
            "start_ts": start.T.ravel(),
            "duration": (sim.end - sim.start).T.ravel(),
            "seq_id": np.tile(prog.seq_id, steps),
            "mc": np.tile(prog.chunk, steps),
            "mb_id": np.tile(prog.mb, steps),
        }
    )
    truth = _truth(job, prog, sim)
    return SynthTrace(job, frame, job.meta(), sim.step_times, truth, prog, sim.step_start)


def step_time_samples(job: SynthJob | dict, n: int, seed: int | None = 0) -> np.ndarray:
    """The generator's own Monte Carlo of the step time (no op table built).

    With the same ``seed`` it returns exactly ``simulate(job, n, seed).step_times``.

    Parameters
    ----------
    job : SynthJob or dict
        The job.
    n : int
        Number of step times (>= 1).
    seed : int or None
        Random seed.

    Returns
    -------
    numpy.ndarray
        (n,) step times (seconds).
    """
    job = job if isinstance(job, SynthJob) else SynthJob.from_dict(job)
    n = _check_count("n", n)
    prog = build_program(job)
    return run_steps(job, prog, n, np.random.default_rng(seed), record=False).step_times


def _yaml_value(v) -> str:
    return json.dumps(v) if isinstance(v, str) else str(v)


def write_trace(
    trace: SynthTrace, folder, name: str | None = None, fmt: str = "parquet", kineto: bool = False
) -> list[Path]:
    """Write a trace as the shared traces are: table, metadata and result files.

    Parameters
    ----------
    trace : SynthTrace
        The trace.
    folder : str or Path
        Output folder (created).
    name : str, optional
        File stem: ``trace-<name>.<fmt>``, ``meta-<name>.yaml``, ``result-<name>.json``
        (``step_t_base``: step time by step id), ``truth-<name>.json`` (:attr:`SynthTrace.truth`).
        Default: the job's name.
    fmt : {"parquet", "csv"}
        Table format.
    kineto : bool
        Also write ``kineto-<name>/rank<r>.json`` (Chrome-trace JSON, one file per rank).

    Returns
    -------
    list of Path
        The files written.
    """
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"format must be 'parquet' or 'csv', got {fmt!r}")
    name = trace.job.name if name is None else name
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"name must be a non-empty file stem without '/', got {name!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    table = folder / f"trace-{name}.{fmt}"
    if fmt == "parquet":
        trace.frame.to_parquet(table, index=False)
    else:
        trace.frame.to_csv(table, index=False, float_format="%.9f")
    meta = folder / f"meta-{name}.yaml"
    meta.write_text("".join(f"{k}: {_yaml_value(v)}\n" for k, v in trace.meta.items()))
    result = folder / f"result-{name}.json"
    steps = {str(i): float(t) for i, t in enumerate(trace.step_times)}
    result.write_text(json.dumps({"job_meta": trace.meta, "step_t_base": steps}, indent=1))
    truth = folder / f"truth-{name}.json"
    known = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in trace.truth.items()}
    for key in ("slow_ranks", "stage_scale"):
        known[key] = {str(r): f for r, f in known[key].items()}
    truth.write_text(json.dumps(known, indent=1))
    written = [table, meta, result, truth]
    if kineto:
        from prism_analytic.traces.synth_kineto import write_kineto

        written += write_kineto(trace, folder / f"kineto-{name}")
    return written
