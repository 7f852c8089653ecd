"""``prism optimize``: the best parallel layout of a job under variability.

``prism optimize --preset llama3-405b --gpus 16384 --objective p95`` evaluates every candidate
layout (tp, pp, vpp, cp, recompute, sharding, micro-batch size; the global batch held fixed)
that is valid and fits the per-GPU memory estimate, and reports the best by the mean and the
best by the objective side by side with what each loses on the other's objective.
"""

from __future__ import annotations

import argparse
import json

from .argtypes import int_list, positive_int
from .output import check_out_path, check_plot_path, jsonable, progress_printer, save_figure
from .sweep import (
    _names,
    add_evaluation_arguments,
    add_executor_arguments,
    read_base,
    settings_from_args,
)

__all__ = ["register"]


def _plot(result, target) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..sweep.optimize import OBJECTIVES

    ok = result.table[result.table["status"] == "ok"]
    x, y = OBJECTIVES[result.partner], OBJECTIVES[result.objective]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.scatter(ok[x], ok[y], s=12, color="0.6", label="valid, fits memory")
    for row, mark, label in (
        (result.best_partner, "s", f"best by {result.partner}"),
        (result.best, "*", f"best by {result.objective}"),
    ):
        ax.scatter([row[x]], [row[y]], s=90, marker=mark, label=label)
    ax.set_xlabel(f"{result.partner} (s)")
    ax.set_ylabel(f"{result.objective} (s)")
    ax.legend(fontsize=8)
    save_figure(fig, target)


def _cmd_optimize(args: argparse.Namespace) -> int:
    from ..sweep.executor import open_executor
    from ..sweep.layouts import LayoutSpace
    from ..sweep.optimize import objective_column, optimize
    from ..sweep.table import check_output

    plot = check_plot_path(args.plot)
    objective_column(args.objective)
    settings = settings_from_args(args, global_batch=args.global_batch)
    out = check_out_path(check_output(args.out)) if args.out else None
    space = LayoutSpace(
        tp=tuple(args.tp) if args.tp else None,
        pp=tuple(args.pp) if args.pp else None,
        vpp=tuple(args.vpp),
        cp=tuple(args.cp),
        recompute=tuple(args.recompute),
        sharding=tuple(args.sharding) if args.sharding else None,
        micro_batch_size=tuple(args.mbs),
    )
    base = read_base(args.config)
    if args.objective == "runtime" and args.steps is None:
        raise ValueError("--objective runtime needs --steps M (and --probability p)")
    with open_executor(args.scheduler, args.workers) as executor:
        result = optimize(
            args.preset,
            args.gpus,
            args.objective,
            space,
            settings=settings,
            hardware=args.hardware,
            base=base,
            out=out,
            executor=executor,
            progress=progress_printer("optimize", "layouts"),
        )
    if plot is not None:
        _plot(result, plot)
    if args.json:
        payload = {"preset": args.preset, "gpus": args.gpus, **result.to_dict()}
        payload["out"] = str(out) if out else None
        print(json.dumps(jsonable(payload), indent=2))
        return 0
    print(result.summary(top=args.top))
    if out is not None:
        print(f"every candidate written to {out}")
    if plot is not None:
        print(f"plot written to {plot}")
    return 0


def _choices(allowed: tuple[str, ...]):
    def parse(text: str) -> list[str]:
        values = _names(text)
        bad = [v for v in values if v not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"{bad[0]!r} not one of {', '.join(allowed)}")
        return values

    return parse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``prism optimize`` to the command's subparsers."""
    from ..sweep.optimize import OBJECTIVES

    p = subparsers.add_parser(
        "optimize",
        help="best layout by mean vs by p95 (or a run-time guarantee) over valid layouts",
        description="Evaluate the valid, memory-feasible layouts of a model on N GPUs (global"
        " batch fixed) and report the best by mean and the best by the objective side by side.",
    )
    p.add_argument("--preset", required=True, metavar="NAME", help="model preset")
    p.add_argument("--gpus", required=True, type=positive_int, metavar="N", help="GPU count")
    p.add_argument("--hardware", metavar="NAME", help="hardware preset (default: the model's)")
    p.add_argument(
        "--objective",
        choices=tuple(OBJECTIVES),
        default="p95",
        help="what to minimise (default p95; runtime: the run time of --steps at --probability)",
    )
    p.add_argument("--tp", type=int_list, help="tp candidates (default: powers of 2 to NVLink)")
    p.add_argument("--pp", type=int_list, help="pp candidates (default: 1,2,4,8,16,32)")
    p.add_argument("--vpp", type=int_list, default=[1, 2, 4, 8], help="vpp (1 = 1F1B)")
    p.add_argument("--cp", type=int_list, default=[1, 2], help="cp candidates (default 1,2)")
    p.add_argument(
        "--recompute",
        type=_choices(("none", "selective", "full")),
        default=["selective"],
        help="recompute candidates (default selective; e.g. selective,full)",
    )
    p.add_argument(
        "--sharding",
        type=_choices(("none", "zero1", "zero2", "fsdp")),
        help="sharding candidates (default: the preset's)",
    )
    p.add_argument("--mbs", type=int_list, default=[1], help="micro-batch sizes (default 1)")
    p.add_argument(
        "--global-batch",
        type=positive_int,
        metavar="SEQ",
        help="global batch in sequences (default: the preset's at this GPU count)",
    )
    p.add_argument("--config", metavar="FILE", help="TOML overrides under every layout")
    p.add_argument("--out", metavar="FILE", help="write every candidate to a table (resumable)")
    p.add_argument("--top", type=positive_int, default=5, help="layouts listed (default 5)")
    add_evaluation_arguments(p)
    add_executor_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--plot", metavar="FILE", help="scatter of the objective vs the mean")
    p.set_defaults(func=_cmd_optimize)
