"""``prism presets``: the model and hardware presets, with the GPU-count unit of each model."""

from __future__ import annotations

import argparse
import json

__all__ = ["register"]


def _cmd_presets(args: argparse.Namespace) -> int:
    from ..job import list_presets

    res = list_presets()
    print(json.dumps(res.to_dict(), indent=2) if args.json else res.summary())
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``prism presets`` to the command's subparsers."""
    pre = subparsers.add_parser(
        "presets",
        help="list model and hardware presets",
        description="List the model presets (with the GPU-count unit "
        "their layout needs) and the hardware presets.",
    )
    pre.add_argument("--json", action="store_true", help="print JSON")
    pre.set_defaults(func=_cmd_presets)
