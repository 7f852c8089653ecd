"""``prism figures``: regenerate the paper's figures as PNG plus a manifest."""

from __future__ import annotations

import argparse
import json
import sys
import time

from .output import check_out_dir

__all__ = ["register"]


def _cmd(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..figures import FIGURES, make_all

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {str(out)!r} exists and is not a folder")
    only = [s.strip() for s in args.only.split(",")] if args.only else None
    if only is not None:
        bad = [n for n in only if n not in FIGURES]
        if bad or not all(only):
            raise ValueError(
                f"--only: unknown figure {bad[0] if bad else ''!r}; available: {', '.join(FIGURES)}"
            )
    check_out_dir(out)  # made and tried before the first figure
    start = time.perf_counter()

    def show(name, e, err):
        if args.json:
            return
        if err is not None:
            print(f"{name}: skipped ({err})", file=sys.stderr)
        else:
            print(f"{name}: {e['file']} ({e['seconds']:.1f} s)")

    manifest = make_all(out, args.data, only=only, tiny=args.tiny, progress=show)
    if args.json:
        print(
            json.dumps(
                {
                    "out": str(out),
                    "figures": [m.get("file") for m in manifest],
                    "seconds": time.perf_counter() - start,
                },
                indent=2,
            )
        )
        return 0
    print(
        f"{sum(1 for m in manifest if m.get('file'))} of {len(manifest)} figures in"
        f" {time.perf_counter() - start:.0f} s;"
        f" manifest: {out / 'manifest.json'}"
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``prism figures``."""
    p = subparsers.add_parser(
        "figures",
        help="regenerate the paper's figures (PNG) and their manifest",
        description="Render every figure (or --only NAME[,NAME]) into --out, with "
        "manifest.json: figure, the paper claim it reproduces, its numbers, its data.",
    )
    p.add_argument("--out", default="paper_figures/out", metavar="DIR", help="output folder")
    p.add_argument("--only", metavar="NAMES", help="comma-separated figure names")
    p.add_argument(
        "--data", metavar="DIR", help="data root (default: $PRISM_DATA or ../shared/data)"
    )
    p.add_argument("--tiny", action="store_true", help="small cases (seconds; for tests)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd)
