"""Record ``float.hex`` of quantiles and brackets on a set of graphs, to check bit-identity.

A speed change that claims to leave results unchanged is checked by recording these values with
the code before and after it (for example with the old modules first on ``PYTHONPATH``) and
comparing the two files (``--compare OLD NEW``). Graphs: the presets at a few sizes (analytic),
the README's pipeline example (analytic and bounds), compact and op-by-op 1F1B / interleaved
pipelines (analytic and bounds), and the canonical form alone on a 16 x 64 lattice (three
methods). Caches are cleared before each evaluation.

Usage::

    python validation/bench_record_hex.py --out before.json [--only NAME,NAME]
    python validation/bench_record_hex.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

import prism_analytic as pa
from prism_analytic.engines.canonical import canonical_makespan
from prism_analytic.engines.pipeline_core import clear_caches
from prism_analytic.engines.predict import predict
from prism_analytic.graph.pipeline import pipeline_step_graph
from prism_analytic.schedules import pipeline_dag
from prism_analytic.validation.scenarios import compact_pipeline, pipeline
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.presets import preset_job

__all__ = ["GRAPHS", "record", "compare", "main"]

LEVELS = (0.01, 0.5, 0.9, 0.99, 0.999)
PRESETS = (
    ("llama3-405b", 65536),
    ("llama3-405b", 1024),
    ("llama3-8b", 64),
    ("llama3-70b", 16384),
    ("mixtral-8x22b", 4096),
    ("gpt3-175b", 1024),
)


def readme_step() -> pa.StepGraph:
    """The README's pipeline example (1F1B 8 x 32 in 512 replicas, a network regime)."""
    replica = pipeline_step_graph(
        8,
        32,
        lambda phase, stage, mb, chunk: pa.normal(1e-3 if phase == "F" else 2e-3, 5e-5),
        compact=True,
    )
    step = pa.StepGraph("step")
    step.add_replica_group("dp", replica, n=512, speed=pa.lognormal(1.0, 0.02))
    step.add_op("allreduce", pa.lognormal(5e-3, 2e-3), after=["dp"], kind="comm")
    step.add_regime(
        "network",
        {"calm": 0.95, "congested": 0.05},
        {"calm": 1.0, "congested": 3.0},
        applies_to="comm",
    )
    return step


#: name -> (graph builder, method)
GRAPHS: dict[str, tuple[Callable[[], pa.StepGraph], str]] = {
    **{
        f"{p}@{n}": ((lambda p=p, n=n: build_step_graph(preset_job(p, n))), "analytic")
        for p, n in PRESETS
    },
    "readme": (readme_step, "analytic"),
    "readme_bounds": (readme_step, "bounds"),
    "c16x64": (lambda: compact_pipeline(16, 64), "analytic"),
    "c16x64_bounds": (lambda: compact_pipeline(16, 64), "bounds"),
    "i16x64": (lambda: compact_pipeline(16, 64, "interleaved", 2), "analytic"),
    "i16x64_bounds": (lambda: compact_pipeline(16, 64, "interleaved", 2), "bounds"),
    "e8x32": (lambda: pipeline(8, 32), "analytic"),
    "e8x32_bounds": (lambda: pipeline(8, 32), "bounds"),
}


def _hx(x: float) -> str:
    return float(x).hex()


def record(only: set[str] | None = None) -> dict:
    """``{name: {level: [hex, ...]}}`` for every graph (and ``cm16x64_<method>``)."""
    out: dict = {}
    for name, (build, method) in GRAPHS.items():
        if only and name not in only:
            continue
        clear_caches()
        t0, c0 = time.perf_counter(), time.process_time()
        r = predict(build(), method)
        print(
            f"{name}: {time.perf_counter() - t0:.2f} s wall, {time.process_time() - c0:.2f} s CPU",
            file=sys.stderr,
        )
        row = {} if method == "bounds" else {"mean": _hx(r.mean()), "std": _hx(r.std())}
        for q in LEVELS:
            lo, hi = r.quantile_bracket(q)
            point = [] if method == "bounds" else [_hx(r.quantile(q))]
            row[f"q{q}"] = [*point, _hx(lo), _hx(hi)]
        out[name] = row
    if not only or "cm16x64" in only:
        dag = pipeline_dag(16, 64)
        rng = np.random.default_rng(3)
        mean = {v: float(rng.uniform(1, 2)) for v in dag}
        std = {v: 0.05 * mean[v] for v in dag}
        for meth in ("clark-mehler", "clark", "independent"):
            r = canonical_makespan(dag, mean, std, method=meth)
            out[f"cm16x64_{meth}"] = [_hx(r.mean), _hx(r.std)]
    return out


def _readable(entry: object) -> object:
    """Hex strings as floats; anything else (a missing key, a non-hex entry) as it is.

    A row's ``mean`` and ``std`` are single strings, not lists: iterating them read each
    character as a hex float and crashed on the ``x``.
    """
    if isinstance(entry, list):
        return [_readable(v) for v in entry]
    try:
        return float.fromhex(entry)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return entry


def compare(old: dict, new: dict) -> int:
    """Print every differing entry; the number of differences."""
    n = bad = 0
    for name, row in new.items():
        if name not in old:
            print(f"{name}: not in the old record")
            continue
        items = row.items() if isinstance(row, dict) else [("", row)]
        for key, val in items:
            n += 1
            was = (
                (old[name].get(key) if isinstance(old[name], dict) else None) if key else old[name]
            )
            if was != val:
                bad += 1
                print(f"DIFF {name} {key}: {_readable(was)} -> {_readable(val)}")
    print(f"{n} recorded entries, {bad} differ")
    return bad


def main(argv: Sequence[str] | None = None) -> int:
    """``python validation/bench_record_hex.py``."""
    parser = argparse.ArgumentParser(prog="bench_record_hex", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", help="comma-separated graph names")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    args = parser.parse_args(argv)
    if args.compare:
        old, new = (json.loads(p.read_text()) for p in args.compare)
        return 1 if compare(old, new) else 0
    if args.out is None:
        parser.error("--out or --compare is required")
    only = set(args.only.split(",")) if args.only else None
    args.out.write_text(json.dumps(record(only), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
