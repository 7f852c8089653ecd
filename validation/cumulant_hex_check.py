"""Record ``float.hex`` of ``core_shape="cumulant"`` results, to check a change is bit-identical.

:mod:`bench_record_hex` records ``auto`` results, which rarely use the cumulant core. This one
predicts with ``core_shape="cumulant"`` on the graphs where that core's cost and truncation
paths differ: llama3-405b at 128, 1,024, 8,192 and 65,536 GPUs (a forked 16 / 32 microbatch
pair, the whole 32 and the whole 16: interleaved 16 stages x vpp 8, lognormal ops),
llama3-70b at 32 and 8,192, gpt3-175b at 64 and 65,536, the agreement suite's deep compact
rows (``pipe_1f1b_16x64``, ``pipe_interleaved_32x64``) and two op-by-op pipelines (1F1B 8 x 32
normal ops; interleaved 4 x 8 x vpp 2 lognormal ops). Mean, std and five quantiles each;
caches are cleared before each graph. Record with the code before and after a change (the old
modules first on ``PYTHONPATH``, e.g. a ``git archive`` copy) and compare the two files.

Usage::

    python validation/cumulant_hex_check.py --out after.json [--only NAME,NAME]
    python validation/cumulant_hex_check.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import prism_analytic as pa
from prism_analytic.engines.pipeline_core import clear_caches
from prism_analytic.engines.predict import predict
from prism_analytic.engines.skew_core import clear_cache
from prism_analytic.graph.pipeline import pipeline_step_graph
from prism_analytic.validation.scenarios import SCENARIOS, pipeline
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.presets import preset_job

sys.path.insert(0, str(Path(__file__).parent))
from bench_record_hex import compare  # noqa: E402

__all__ = ["GRAPHS", "LEVELS", "record", "main"]

LEVELS = (0.01, 0.5, 0.9, 0.99, 0.999)
_PRESETS = (
    ("llama3-405b", (128, 1024, 8192, 65536)),
    ("llama3-70b", (32, 8192)),
    ("gpt3-175b", (64, 65536)),
)


def _lognormal_interleaved() -> pa.StepGraph:
    """Op-by-op interleaved 4 x 8 x vpp 2 with lognormal ops (F 1 ms, B 2 ms, sd 0.1 ms)."""
    return pipeline_step_graph(
        4,
        8,
        lambda phase, stage, mb, chunk: pa.lognormal(1e-3 if phase == "F" else 2e-3, 1e-4),
        schedule="interleaved",
        vpp=2,
    )


#: name -> graph builder
GRAPHS: dict[str, Callable[[], pa.StepGraph]] = {
    **{
        f"{p}@{n}": (lambda p=p, n=n: build_step_graph(preset_job(p, n)))
        for p, counts in _PRESETS
        for n in counts
    },
    "pipe_1f1b_16x64": SCENARIOS["pipe_1f1b_16x64"].build,
    "pipe_interleaved_32x64": SCENARIOS["pipe_interleaved_32x64"].build,
    "opbyop_1f1b_8x32": lambda: pipeline(8, 32),
    "opbyop_interleaved_4x8_lognormal": _lognormal_interleaved,
}


def record(only: set[str] | None = None) -> dict[str, dict[str, str]]:
    """``{name: {"mean": hex, "std": hex, "q<level>": hex, ...}}`` for every graph.

    Parameters
    ----------
    only : set of str, optional
        Names of :data:`GRAPHS` to record (all when None).

    Returns
    -------
    dict
        The hex strings by graph name.

    Raises
    ------
    ValueError
        If ``only`` names a graph that is not in :data:`GRAPHS`.
    """
    unknown = sorted((only or set()) - set(GRAPHS))
    if unknown:
        raise ValueError(f"only: unknown graph names {unknown}; choose from {sorted(GRAPHS)}")
    out = {}
    for name, build in GRAPHS.items():
        if only and name not in only:
            continue
        graph = build()
        clear_caches()
        clear_cache()
        c0 = time.process_time()
        r = predict(graph, core_shape="cumulant")
        print(f"{name}: {time.process_time() - c0:.2f} s CPU", file=sys.stderr)
        row = {"mean": float(r.mean()).hex(), "std": float(r.std()).hex()}
        row.update({f"q{q}": float(r.quantile(q)).hex() for q in LEVELS})
        out[name] = row
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python validation/cumulant_hex_check.py``; exit status 1 when a compare differs."""
    parser = argparse.ArgumentParser(prog="cumulant_hex_check", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", help="comma-separated graph names")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    args = parser.parse_args(argv)
    if args.compare:
        old, new = (json.loads(p.read_text()) for p in args.compare)
        missing = sorted(set(old) - set(new))
        if missing:
            print(f"not in the new record: {missing}")
        return 1 if compare(old, new) or missing else 0
    if args.out is None:
        parser.error("--out or --compare is required")
    only = set(args.only.split(",")) if args.only else None
    args.out.write_text(json.dumps(record(only), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
