"""``prism optimize``: the best parallel layout of a job under variability.

``prism optimize --preset llama3-405b --gpus 16384 --objective p95`` searches the candidate
layouts (tp, pp, vpp, cp, ep, recompute, sharding, micro-batch size, rank order, global batch,
hardware) that are valid and fit the per-GPU memory estimate. For a quantile objective the
default ``--search bnb`` is branch and bound on guaranteed bounds: it reports the winner, the
layouts the bounds cannot separate from it (the tie set) and, for every other layout, the bound
that eliminated it (``--json``). ``--search sweep`` (the only search for ``mean`` and
``runtime``, which have no guaranteed bounds) evaluates every layout with the full engine and
reports the best by the mean and the best by the objective side by side.
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


def _search_mode(args: argparse.Namespace) -> str:
    """``--search``, defaulted and checked against the objective."""
    from ..engines.lower_bounds import has_guaranteed_bounds

    bounded = has_guaranteed_bounds(args.objective)
    mode = args.search or ("bnb" if bounded else "sweep")
    if mode != "sweep" and not bounded:
        raise ValueError(
            f"--search {mode}: --objective {args.objective} has no guaranteed bounds to prune"
            " on (quantiles only: p50, p90, p95, p99, p999); use --search sweep"
        )
    if mode != "sweep" and args.plot:
        raise ValueError("--plot: only with --search sweep (it plots every layout's values)")
    return mode


def _cmd_optimize(args: argparse.Namespace) -> int:
    from ..sweep.executor import open_executor
    from ..sweep.layouts import LayoutSpace
    from ..sweep.optimize import objective_column, optimize
    from ..sweep.table import check_output

    plot = check_plot_path(args.plot)
    objective_column(args.objective)
    mode = _search_mode(args)
    if args.rank_order:
        from ..workload.config.sections import RANK_ORDERS

        bad = [o for o in args.rank_order if o not in RANK_ORDERS]
        if bad:
            raise ValueError(f"--rank-order: {bad[0]!r}; allowed: {', '.join(RANK_ORDERS)}")
    # one global batch or hardware is a setting (as before); several are a search axis
    batches = args.global_batch or []
    hardware = args.hardware or []
    settings = settings_from_args(args, global_batch=batches[0] if len(batches) == 1 else None)
    out = check_out_path(check_output(args.out)) if args.out else None
    space = LayoutSpace(
        tp=tuple(args.tp) if args.tp else None,
        pp=tuple(args.pp) if args.pp else None,
        vpp=tuple(args.vpp),
        cp=tuple(args.cp),
        recompute=tuple(args.recompute),
        sharding=tuple(args.sharding) if args.sharding else None,
        micro_batch_size=tuple(args.mbs),
        ep=tuple(args.ep) if args.ep else None,
        rank_order=tuple(args.rank_order) if args.rank_order else None,
        global_batch=tuple(batches) if len(batches) > 1 else None,
        hardware=tuple(hardware) if len(hardware) > 1 else None,
    )
    one_hw = hardware[0] if len(hardware) == 1 else None
    base = read_base(args.config)
    if args.objective == "runtime" and args.steps is None:
        raise ValueError("--objective runtime needs --steps M (and --probability p)")
    if mode != "sweep":
        return _run_search(args, mode, space, settings, one_hw, base, out)
    with open_executor(args.scheduler, args.workers) as executor:
        result = optimize(
            args.preset,
            args.gpus,
            args.objective,
            space,
            settings=settings,
            hardware=one_hw,
            base=base,
            out=out,
            executor=executor,
            progress=progress_printer("optimize", "layouts"),
        )
    if plot is not None:
        _plot(result, plot)
    return _report(args, result, out, plot)


def _run_search(args, mode, space, settings, hardware, base, out) -> int:
    """``--search bnb`` / ``exhaustive``: the search with proofs, printed or as JSON."""
    from ..sweep.executor import open_executor
    from ..sweep.optimize import search

    with open_executor(args.scheduler, args.workers) as executor:
        result = search(
            args.preset,
            args.gpus,
            args.objective,
            space,
            mode=mode,
            settings=settings,
            hardware=hardware,
            base=base,
            out=out,
            executor=executor,
            progress=progress_printer("optimize", "tasks"),
        )
    return _report(args, result, out)


def _report(args, result, out, plot=None) -> int:
    """Print a search's result: its JSON with ``--json``, else its summary and what was written."""
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
    from ..sweep.optimize import OBJECTIVES, SEARCHES

    p = subparsers.add_parser(
        "optimize",
        # the table of commands in cli/__init__.py repeats this line (startup without imports)
        help="best layout by mean vs by p95 (or a run-time guarantee) over valid layouts",
        description="Search the valid, memory-feasible layouts of a model on N GPUs: for a"
        " quantile objective by branch and bound on guaranteed bounds (the winner, its tie set"
        " and the bound that eliminated every other layout); with --search sweep, every"
        " layout's full-engine law, best by mean and by the objective side by side.",
    )
    p.add_argument("--preset", required=True, metavar="NAME", help="model preset")
    p.add_argument("--gpus", required=True, type=positive_int, metavar="N", help="GPU count")
    p.add_argument(
        "--hardware",
        type=_names,
        metavar="NAMES",
        help="hardware preset, or a comma-separated list to search over (default: the model's)",
    )
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
    p.add_argument("--ep", type=int_list, help="expert-parallel sizes (default: the preset's)")
    p.add_argument(
        "--rank-order",
        type=_names,
        metavar="ORDERS",
        help="rank orders (default: the preset's; tp-cp-dp-pp, tp-cp-pp-dp)",
    )
    p.add_argument(
        "--global-batch",
        type=int_list,
        metavar="SEQ",
        help="global batch in sequences, or a list to search over (default: the preset's at"
        " this GPU count)",
    )
    p.add_argument(
        "--search",
        choices=SEARCHES + ("sweep",),
        help="bnb: branch and bound on guaranteed bounds (default for quantile objectives);"
        " exhaustive: every bound and the full engine on every layout, the same rule; sweep:"
        " the full engine on every layout, best by mean and by the objective side by side"
        " (default, and the only search, for mean and runtime)",
    )
    p.add_argument("--config", metavar="FILE", help="TOML overrides under every layout")
    p.add_argument("--out", metavar="FILE", help="write every candidate to a table (resumable)")
    p.add_argument("--top", type=positive_int, default=5, help="layouts listed (default 5)")
    add_evaluation_arguments(p)
    add_executor_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--plot", metavar="FILE", help="scatter of the objective vs the mean")
    p.set_defaults(func=_cmd_optimize)
