"""``prism trace-predict``: fit a step model on some steps of a real trace, predict the others."""

from __future__ import annotations

import argparse
import json
import sys

from .argtypes import sample_count, seed
from .output import check_plot_path, jsonable, save_figure

__all__ = ["register"]


def _cmd(args: argparse.Namespace) -> int:
    target = check_plot_path(args.plot)
    from ..traces.predict import predict_trace
    from ..traces.readers import read_trace

    warmup = "auto" if args.warmup == "auto" else _warmup(args.warmup)
    layout = _layout(args)
    table = read_trace(args.trace)
    if "rows_sorted" in table.meta:
        print(f"prism trace-predict: note: {table.meta['rows_sorted']}", file=sys.stderr)
    result = predict_trace(
        table,
        measured=args.measured,
        fit_steps=args.fit_steps,
        samples=args.samples,
        seed=args.seed,
        warmup=warmup,
        analytic=args.analytic,
        layout=layout,
        replay_threshold=args.replay_threshold,
        library=not args.no_library,
    )
    if args.json:
        for line in result.problems:  # the JSON says validated: false; say why where it shows
            print(line, file=sys.stderr)
        print(json.dumps(jsonable(result.to_dict()), indent=2))
    else:
        print(result.summary())
    if target is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        result.plot(ax)
        save_figure(fig, target)
        if not args.json:
            print(f"plot written to {target}")
    return 0


def _layout(args: argparse.Namespace):
    """``--layout`` parsed, else the trace's ``meta-<name>.yaml``, else None."""
    from ..traces.layout import find_layout_meta, parse_layout, read_layout_meta

    if args.layout is not None:
        return parse_layout(args.layout, source="--layout")
    meta = find_layout_meta(args.trace)
    return read_layout_meta(meta) if meta is not None else None


def _threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), e.g. 0.03; got {text!r}")
    return value


def _warmup(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"--warmup: expected 'auto' or an integer >= 0, got {text!r}") from None
    if value < 0:
        raise ValueError(f"--warmup: expected 'auto' or an integer >= 0, got {text}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``trace-predict`` subcommand."""
    p = sub.add_parser(
        "trace-predict",
        help="fit a step model on part of a real trace and predict the held-out steps",
        description=(
            "Read a per-op trace (parquet/CSV) or Kineto JSON, recover the step's dependency "
            "graph, fit per-op latency laws and shared factors on some steps, and predict the "
            "step-time distribution of the steps not used for fitting; compare with the "
            "measured step times."
        ),
    )
    p.add_argument("trace", help="per-op .parquet/.csv table, Kineto .json[.gz], or a folder")
    p.add_argument(
        "--measured",
        metavar="RESULT.json",
        help="measured step times (JSON list/object or CSV); default: from the trace",
    )
    p.add_argument(
        "--fit-steps",
        choices=("first-half", "second-half", "all"),
        default="first-half",
        help="steps to fit on; the others are predicted (all: in-sample)",
    )
    p.add_argument(
        "--samples", type=sample_count, default=4000, help="Monte Carlo samples (default 4000)"
    )
    p.add_argument("--seed", type=seed, default=0, help="random seed (default 0)")
    p.add_argument(
        "--warmup",
        default="auto",
        help="leading warm-up steps to leave out: auto (detected) or a number",
    )
    p.add_argument(
        "--analytic",
        choices=("auto", "on", "off"),
        default="auto",
        help="also compute the step law with the analytic engine and cross-check it with "
        "Monte Carlo (auto: for graphs up to 400 units)",
    )
    p.add_argument(
        "--layout",
        metavar="dp=N,pp=N,...",
        help="the job's layout (keys dp, pp, tp, cp, sp, ep, vpp; missing ones are 1); "
        "overrides meta-<name>.yaml beside the trace; the recovered process groups are "
        "checked against it",
    )
    p.add_argument(
        "--replay-threshold",
        type=_threshold,
        default=0.03,
        help="largest relative error of the fit steps replayed through the recovered "
        "structure before the prediction is labelled not validated (default 0.03)",
    )
    p.add_argument(
        "--no-library",
        action="store_true",
        help="skip the latency library (a law fitted per op signature; the slowest part on "
        "small traces)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--plot", metavar="FILE", help="save predicted vs measured CDFs")
    p.set_defaults(func=_cmd)
