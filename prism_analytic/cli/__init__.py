"""The ``prism`` command line: one module per command, each exposing ``register(subparsers)``.

To add a command, write ``prism_analytic/cli/<name>.py`` with a ``register`` function that adds
its subparser and sets ``func``, and list it in :data:`COMMANDS` with the same help line.
Commands raise ``ValueError`` / ``TypeError`` / ``FileNotFoundError`` with a clear message;
:func:`main` turns them into ``prism COMMAND: error: ...`` and exit status 2.

Start-up stays cheap: ``prism --help`` lists the commands from :data:`COMMANDS` without
importing any command module, and :func:`main` imports and registers only the command that
runs (whose module imports the numerical layers inside its run function).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

__all__ = [
    "main",
    "build_parser",
    "chosen_command",
    "check_preset_name",
    "COMMANDS",
    "COMMAND_MODULES",
]

#: Each command, in the order ``prism --help`` lists them: (its module in this package, the
#: help line its ``register`` gives; ``tests/cli/test_startup.py`` checks the two agree).
COMMANDS: dict[str, tuple[str, str]] = {
    "predict": ("predict", "step-time distribution of a preset job on N GPUs"),
    "presets": ("presets", "list model and hardware presets"),
    "demo": ("demo", "the slowest of 65,536 GPUs each running a kernel chain"),
    "agreement": ("agreement", "analytic engine against Monte Carlo on the validation scenarios"),
    "sweep": (
        "sweep",
        "evaluate a grid of configurations into a CSV/Parquet table (resumable)",
    ),
    "optimize": (
        "optimize",
        "best layout by mean vs by p95 (or a run-time guarantee) over valid layouts",
    ),
    "runtime": ("runtime", "distribution of a whole run's time, with failures and checkpoints"),
    "slowdown": ("slowdown", "P(step > (1 + threshold) x deterministic step) at each scale"),
    "placement": ("placement", "step time for placements of K slow GPUs, and the best one"),
    "sensitivity": ("sensitivity", "derivatives of the step's mean, p95, std per kernel class"),
    "crossdc": ("crossdc", "p95 step time vs inter-datacenter bandwidth and jitter"),
    "figures": ("figures", "regenerate the paper's figures (PNG) and their manifest"),
    "calibrate": (
        "calibrate",
        "fit the stochastic model to step logs or a published MFU / throughput",
    ),
    "trace-predict": (
        "trace_predict",
        "fit a step model on part of a real trace and predict the held-out steps",
    ),
    "trace-synth": (
        "trace_synth",
        "write a synthetic per-op trace of known truth (any parallel layout)",
    ),
    "validate": (
        "validate",
        "run the real-data validation cases (straggler traces, GPU variability, Kineto)",
    ),
}

#: The command modules, in the order ``prism --help`` lists them.
COMMAND_MODULES = tuple(module for module, _ in COMMANDS.values())

#: Every command: register them all (:func:`build_parser`'s default).
ALL = "all"


def build_parser(command: str | None = ALL) -> argparse.ArgumentParser:
    """The argument parser of the ``prism`` command.

    Parameters
    ----------
    command : str or None
        Which command gets its full sub-parser (its module imported and ``register`` called):
        ``"all"`` (default) every command; a command name only that one; None none. The other
        commands are listed by name and help line only, enough for ``prism --help`` and for
        argparse to name the valid choices.

    Returns
    -------
    argparse.ArgumentParser
    """
    if command not in COMMANDS and command not in (ALL, None):
        raise ValueError(f"command: expected one of {', '.join(COMMANDS)}, 'all' or None")
    parser = argparse.ArgumentParser(
        prog="prism",
        description="Analytic distributions of distributed-training step time at any scale.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module, help_line) in COMMANDS.items():
        if command in (ALL, name):
            importlib.import_module(f"{__name__}.{module}").register(sub)
        else:  # a stand-in: never parses arguments, since main registers the chosen command
            sub.add_parser(name, help=help_line, add_help=False)
    parser.set_defaults(_command_parsers=sub.choices)  # for errors in the command's own name
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names, or None (``prism --help``, no command, an unknown one).

    The top-level parser has no option taking a value, so the command is the first argument
    that is not an option.
    """
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def check_preset_name(preset: object) -> None:
    """Refuse an unknown model preset before the command imports the numerical layers.

    ``workload.presets`` needs only the config schema (no numpy/scipy), so a misspelt
    ``--preset`` is reported at once, in the words :func:`~prism_analytic.workload.jobs.build_job`
    uses. A list (``prism sweep --preset a,b``) is left to the command.

    Raises
    ------
    ValueError
        ``--preset: unknown model preset ...``, listing the available ones.
    """
    if not isinstance(preset, str):
        return
    from ..workload.config import ConfigError
    from ..workload.presets import MODELS

    if preset not in MODELS:
        raise ConfigError(
            "--preset",
            f"unknown model preset {preset!r}; available: "
            f"{', '.join(sorted(MODELS))} (see `prism presets`)",
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``prism`` command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(chosen_command(argv))
    args, extra = parser.parse_known_args(argv)
    if extra:  # report them as `prism COMMAND: error:` with the command's usage
        args._command_parsers[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        check_preset_name(getattr(args, "preset", None))
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"prism {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"prism {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`prism ... | head`): not an error of ours; point stdout at
        # devnull so that the interpreter's final flush does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
