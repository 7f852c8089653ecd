"""The ``prism`` command line: one module per command, each exposing ``register(subparsers)``.

To add a command, write ``prism_analytic/cli/<name>.py`` with a ``register`` function that adds
its subparser and sets ``func``, and list the module in :data:`COMMAND_MODULES`. Commands raise
``ValueError`` / ``TypeError`` / ``FileNotFoundError`` with a clear message; :func:`main` turns
them into ``prism COMMAND: error: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser", "COMMAND_MODULES"]

#: Command modules, in the order ``prism --help`` lists them.
COMMAND_MODULES = (
    "predict",
    "presets",
    "demo",
    "agreement",
    "sweep",
    "optimize",
    "runtime",
    "slowdown",
    "placement",
    "sensitivity",
    "crossdc",
    "figures",
    "calibrate",
    "trace_predict",
    "validate",
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``prism`` command."""
    parser = argparse.ArgumentParser(
        prog="prism",
        description="Analytic distributions of distributed-training step time at any scale.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    parser.set_defaults(_command_parsers=sub.choices)  # for errors in the command's own name
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``prism`` command; returns the exit status."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # report them as `prism COMMAND: error:` with the command's usage
        args._command_parsers[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"prism {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"prism {args.command}: interrupted", file=sys.stderr)
        return 130
