"""``prism calibrate``: fit the stochastic model to step logs or published throughput.

``prism calibrate --config JOB.toml --steps LOG [LOG ...] --out fit.toml`` fits the job's
free parameters to measured step times (MLPerf ``:::MLLOG``, CSV, JSON); ``--mfu F`` or
``--tokens-per-s R`` fits to a published rate instead. The overlay it writes is taken by
``prism predict --config JOB.toml --config fit.toml``. ``--check`` does not fit: it predicts
the job (with ``--overlay`` files merged on top) and compares it with the logs, out of sample;
with ``--size JOB LOG...`` (repeatable: logs at other sizes) it also prints the transfer error
table of the overlay against ratio scaling.

The command is :meth:`Job.calibrate <prism_analytic.job.Job.calibrate>` (or
:meth:`Job.check <prism_analytic.job.Job.check>`) of
``Job.from_args(NAME, N, CONFIG, *OVERLAYS)``: it checks its options, prints the result's
``summary()`` or ``to_dict()``.
"""

from __future__ import annotations

import argparse
import json

from .argtypes import nonnegative_float, nonnegative_int, positive_float, positive_int, seed
from .output import check_out_path, progress_printer

__all__ = ["register"]


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1), got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a fraction strictly between 0 and 1 (41% MFU is 0.41), got {text}"
        )
    return value


def _above_one(text: str) -> float:
    value = positive_float(text)
    if value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number > 1, got {text}")
    return value


def _bootstrap_count(text: str) -> int:
    """``--bootstrap``: resamples of the 95% percentile intervals, in the range they need."""
    from ..calibration.quantile_bootstrap import check_resamples

    try:
        return check_resamples(positive_int(text), 0.95, "--bootstrap")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from ..job import Job

    out = check_out_path(args.out)
    targets = sum(x is not None for x in (args.steps, args.mfu, args.tokens_per_s))
    if targets != 1:
        raise ValueError("give exactly one target: --steps LOG..., --mfu F or --tokens-per-s R")
    if args.check and not args.steps:
        raise ValueError("--check compares a prediction with measured --steps logs")
    if bool(args.events_from) != (args.events_gpus is not None):
        raise ValueError("--events-from LOG... and --events-gpus N go together (with --check)")
    if args.events_from and not args.check:
        raise ValueError("--events-from is for --check; to fit the events here use --events")
    if (args.stall_dispersion is not None or args.body_mode != "fitted") and not args.events_from:
        raise ValueError("--stall-dispersion and --body-mode apply to --check --events-from LOG...")
    if args.size and not args.check:
        raise ValueError("--size JOB LOG... is for --check (the transfer table of an overlay)")
    for given in args.size or []:
        if len(given) < 2:
            raise ValueError(
                f"--size {' '.join(given)}: give a job file and at least one step log of it"
            )
    job = Job.from_args(args.preset, args.gpus, args.config, *(args.overlay or []))
    if args.check:
        res = job.check(
            args.steps,
            drop_first=args.drop_first,
            seed=args.seed,
            shape=args.shape or "within-run",
            events_from=args.events_from,
            events_gpus=args.events_gpus,
            body_mode=args.body_mode,
            stall_dispersion=args.stall_dispersion,
            **({"sizes": [(s[0], s[1:]) for s in args.size]} if args.size else {}),
        )
    elif args.steps:
        with progress_printer("calibrate", "step-event refits") as progress:
            res = job.calibrate(
                args.steps,
                drop_first=args.drop_first,
                stall_threshold=args.stall_threshold,
                bootstrap=args.bootstrap,
                seed=args.seed,
                shape=args.shape or "auto",
                events=args.events,
                out=out,
                progress=progress,
            )
    else:
        res = job.calibrate(mfu=args.mfu, tokens_per_s=args.tokens_per_s, out=out)
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
    else:
        print(res.summary())
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``prism calibrate`` to the command's subparsers."""
    p = subparsers.add_parser(
        "calibrate",
        help="fit the stochastic model to step logs or a published MFU / throughput",
        description="Fit the free parameters of the stochastic step-time model (GEMM "
        "efficiency on the *predicted* median or mean, rare stalls; others reported as not "
        "identified) to measured step logs or a published rate, with intervals, and write a "
        "TOML overlay for `prism predict --config`. With --check: compare a prediction with "
        "logs instead (out of sample).",
    )
    p.add_argument("--preset", metavar="NAME", help="model preset (see `prism presets`)")
    p.add_argument("--gpus", type=positive_int, metavar="N", help="number of GPUs")
    p.add_argument("--config", metavar="FILE", help="job TOML (overrides, or a whole job)")
    p.add_argument(
        "--overlay",
        metavar="FILE",
        action="append",
        help="TOML merged on top of the job before fitting or checking (repeatable)",
    )
    p.add_argument("--steps", nargs="+", metavar="LOG", help="step logs of the job (runs pooled)")
    p.add_argument("--mfu", type=_fraction, help="published MFU (fraction of the BF16 peak)")
    p.add_argument("--tokens-per-s", type=positive_float, help="published tokens per second")
    p.add_argument("--check", action="store_true", help="compare with --steps, do not fit")
    p.add_argument("--out", metavar="FILE", help="write the fitted overlay (TOML) here")
    p.add_argument(
        "--drop-first",
        type=nonnegative_int,
        default=2,
        help="warm-up steps dropped per log (default 2)",
    )
    p.add_argument(
        "--stall-threshold",
        type=_above_one,
        default=1.1,
        help="a step above this multiple of its run's median is a stall (default 1.1)",
    )
    p.add_argument(
        "--bootstrap",
        type=_bootstrap_count,
        default=2000,
        help="bootstrap resamples of the 95%% intervals, 200 to 1,000,000 (default 2000)",
    )
    p.add_argument("--seed", type=seed, default=0, help="bootstrap seed, >= 0 (default 0)")
    p.add_argument(
        "--shape",
        choices=("auto", "within-run", "marginal"),
        default=None,
        help="predicted law compared with per-run-normalised steps: persistent GPU speeds held"
        " fixed (within-run; the default with --check) or redrawn every step (marginal); auto"
        " (the default when fitting): within-run unless the marginal law is closer to the steps"
        " beyond their noise (paired bootstrap of the two KS distances)",
    )
    p.add_argument(
        "--events",
        action="store_true",
        help="also fit step events by likelihood (slow step after an evaluation pause, stalls"
        " with a per-GPU rate); reported, not written to the overlay",
    )
    p.add_argument(
        "--events-from",
        nargs="+",
        metavar="LOG",
        help="with --check: fit step events on these logs (another size) and predict them here",
    )
    p.add_argument(
        "--events-gpus", type=positive_int, metavar="N", help="GPU count of --events-from"
    )
    p.add_argument(
        "--body-mode",
        choices=("fitted", "engine", "none"),
        default="fitted",
        help="with --events-from: step body of the prediction: the fitted jitter, drift, trend"
        " and warm-up around the engine's median (fitted, default), the engine's within-run"
        " law times the fitted drift plus the jitter beyond the engine's (engine), or the"
        " engine's law alone (none)",
    )
    p.add_argument(
        "--stall-dispersion",
        type=nonnegative_float,
        metavar="ALPHA",
        help="with --events-from: variance of a gamma per-run multiplier of the stall rate"
        " (stalls that cluster in runs; 0 = one common rate); default: the value fitted with"
        " the events where identified, else 0",
    )
    p.add_argument(
        "--size",
        nargs="+",
        action="append",
        metavar=("JOB", "LOG"),
        help="with --check (repeatable): a job file of another size and its step logs; the"
        " --overlay files are merged on top of it and the transfer error table is printed"
        " (predicted vs measured median and p90/p50 per size, beside ratio scaling: the"
        " uncalibrated prediction times measured/predicted at the --config size)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_calibrate)
