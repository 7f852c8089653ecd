"""``prism presets``: the model and hardware presets, with the GPU-count unit of each model."""

from __future__ import annotations

import argparse
import json

__all__ = ["register"]


def _cmd_presets(args: argparse.Namespace) -> int:
    from ..workload.presets import HARDWARE, MODELS, PRESETS, allowed_gpu_multiple

    models = {
        n: {"description": PRESETS.get(n, ""), "gpu_multiple": allowed_gpu_multiple(n)}
        for n in MODELS
    }
    hardware = {n: {"description": PRESETS.get(n, "")} for n in HARDWARE}
    if args.json:
        print(json.dumps({"models": models, "hardware": hardware}, indent=2))
        return 0
    print("Model presets (prism predict --preset NAME --gpus N, N a multiple of the unit):")
    width = max(len(n) for n in models)
    for n, d in models.items():
        print(f"  {n:<{width}}  unit {d['gpu_multiple']:>4}  {d['description']}")
    print("Hardware presets (TOML: [job] hardware = NAME):")
    width = max(len(n) for n in hardware)
    for n, d in hardware.items():
        print(f"  {n:<{width}}  {d['description']}")
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
