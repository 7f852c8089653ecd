"""What the grid resolution costs and buys: time, bracket width and quantiles per policy.

The analytic engine's bracket is guaranteed at any resolution (up to the round-off bound it
reports), so a coarser grid is honest; the question is whether the answer it gives is still
as precise as the request needs. For each policy ``rel_width:op_refine`` (see
:class:`~prism_analytic.policy.GridPolicy`) this measures, on llama3-405b at 65,536 GPUs:

* cold CPU time (fresh graph, schedule, makespan and op-grid caches cleared; best of
  ``--repeat``) and warm CPU time (same graph again: pipeline makespan and op grids cached);
* each level's quantile, its bracket width, its move from the default policy's quantile and
  whether it stays inside the default's bracket; against the explicit Monte Carlo reference
  of :mod:`bench_mc_reference` (16,384 samples) and next to the 1,000-sample run's 95%
  half-width recorded in ``validation/results/bench_workload.json`` (PRISM's accuracy);

and, on a set of graphs (:data:`GRAPHS`: presets at a few sizes, the README's example,
compact and op-by-op pipelines), whether every quantile (0.01 ... 0.999) stays inside the
default policy's bracket and how much wider the brackets get.

Usage::

    nice python validation/bench_resolution.py [--policies 2.5e-4:4,2.5e-4:1,...]
                                               [--repeat R] [--out PREFIX]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

import prism_analytic as pa
from prism_analytic.engines.grid_cache import clear_grid_cache
from prism_analytic.engines.pipeline_core import clear_caches
from prism_analytic.engines.predict import predict
from prism_analytic.graph.pipeline import pipeline_step_graph
from prism_analytic.policy import DEFAULT_POLICY, GridPolicy
from prism_analytic.validation.scenarios import compact_pipeline, pipeline
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.presets import preset_job

sys.path.insert(0, str(Path(__file__).parent))
from bench_mc_reference import DEFAULT_OUT, commit  # noqa: E402

__all__ = ["GRAPHS", "policies", "main_job", "presets", "main"]

MAIN = ("llama3-405b", 65536)
LEVELS = (0.05, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999)
PRESET_LEVELS = (0.01, 0.5, 0.9, 0.99, 0.999)
DEFAULT_POLICIES = "2.5e-4:4,2.5e-4:2,2.5e-4:1,5e-4:4,5e-4:1,1e-3:1"
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


#: name -> graph builder: the graphs whose brackets are compared across policies
GRAPHS: dict[str, Callable[[], pa.StepGraph]] = {
    **{f"{p}@{n}": (lambda p=p, n=n: build_step_graph(preset_job(p, n))) for p, n in PRESETS},
    "readme": readme_step,
    "c16x64": lambda: compact_pipeline(16, 64),
    "i16x64": lambda: compact_pipeline(16, 64, "interleaved", 2),
    "e8x32": lambda: pipeline(8, 32),
}


def policies(text: str) -> list[GridPolicy]:
    """``"rel_width:op_refine,..."`` as policies (the first need not be the default)."""
    out = []
    for item in text.split(","):
        rel, _, refine = item.partition(":")
        out.append(GridPolicy(rel_width=float(rel), op_refine=int(refine or 4)))
    return out


def _answer(graph, policy: GridPolicy, levels: Sequence[float]) -> dict:  # noqa: ANN001
    d = predict(graph, "analytic", policy=policy).distribution
    q = np.asarray(levels)
    lo, hi = d.quantile_bracket(q)
    return {"q": d.quantile(q), "lo": np.asarray(lo), "hi": np.asarray(hi)}


def _cpu(fn) -> float:  # noqa: ANN001
    c = time.process_time()
    fn()
    return time.process_time() - c


def main_job(pols: list[GridPolicy], repeat: int) -> dict:
    """Times and per-level answers of the main job under each policy."""
    graph = build_step_graph(preset_job(*MAIN))
    predict(graph, "analytic")  # one-time set-up (lazy imports) out of the timings
    base = _answer(graph, DEFAULT_POLICY, LEVELS)
    rows = []
    for pol in pols:
        cold, warm = [], []
        for _ in range(repeat):
            fresh = build_step_graph(preset_job(*MAIN))
            clear_caches()
            clear_grid_cache()
            cold.append(_cpu(lambda g=fresh, p=pol: predict(g, "analytic", policy=p)))
            warm.append(_cpu(lambda g=fresh, p=pol: predict(g, "analytic", policy=p)))
        a = _answer(graph, pol, LEVELS)
        rows.append(
            {
                "rel_width": pol.rel_width,
                "op_refine": pol.op_refine,
                "cold_cpu_s": min(cold),
                "warm_cpu_s": min(warm),
                "quantiles_s": a["q"].tolist(),
                "bracket_width_s": (a["hi"] - a["lo"]).tolist(),
                "move_s": (a["q"] - base["q"]).tolist(),
                "inside_default_bracket": bool(
                    np.all((a["q"] >= base["lo"]) & (a["q"] <= base["hi"]))
                ),
            }
        )
    return {"levels": list(LEVELS), "rows": rows}


def presets(pols: list[GridPolicy]) -> list[dict]:
    """Per recorded graph and policy: inside the default's bracket at every level, widening.

    The graphs are :data:`GRAPHS` (presets, the README's example, compact and op-by-op
    pipelines).
    """
    out = []
    for name, build in GRAPHS.items():
        graph = build()
        base = _answer(graph, DEFAULT_POLICY, PRESET_LEVELS)
        width0 = base["hi"] - base["lo"]
        for pol in pols:
            a = _answer(graph, pol, PRESET_LEVELS)
            finite = np.isfinite(width0) & np.isfinite(a["hi"] - a["lo"]) & (width0 > 0)
            ratio = (a["hi"] - a["lo"])[finite] / width0[finite]
            out.append(
                {
                    "preset": name,
                    "rel_width": pol.rel_width,
                    "op_refine": pol.op_refine,
                    "inside_default_bracket": bool(
                        np.all((a["q"] >= base["lo"]) & (a["q"] <= base["hi"]))
                    ),
                    "max_move_s": float(np.max(np.abs(a["q"] - base["q"]))),
                    "max_width_ratio": float(ratio.max()) if ratio.size else None,
                }
            )
    return out


def _mc_context() -> tuple[dict | None, dict | None]:
    """The reference quantiles and the 1,000-sample 95% half-widths (None when absent)."""
    ref_path = DEFAULT_OUT.with_suffix(".json")
    bench_path = Path(__file__).parent / "results" / "bench_workload.json"
    ref = json.loads(ref_path.read_text()) if ref_path.is_file() else None
    bench = json.loads(bench_path.read_text()) if bench_path.is_file() else None
    return ref, bench


def report(job: dict, rows: list[dict], meta: dict) -> str:
    """The results file's body."""
    ref, bench = _mc_context()
    lines = [
        f"llama3-405b on 65,536 GPUs; {meta['date_utc']} UTC, commit {meta['commit']}, load"
        f" {meta['load_before']:.1f} -> {meta['load_after']:.1f} on {meta['cpus']} CPUs;"
        " CPU times, best of the repeats",
        "",
        "| rel_width:op_refine | cold CPU ms | warm CPU ms | bracket width ms (min-max) |"
        " largest move from default ms | inside default bracket |",
        "|---|---|---|---|---|---|",
    ]
    for r in job["rows"]:
        w = 1e3 * np.asarray(r["bracket_width_s"])
        lines.append(
            f"| {r['rel_width']:g}:{r['op_refine']} | {1e3 * r['cold_cpu_s']:.0f} |"
            f" {1e3 * r['warm_cpu_s']:.0f} | {w.min():.2f}-{w.max():.2f} |"
            f" {1e3 * np.max(np.abs(r['move_s'])):.3f} |"
            f" {'yes' if r['inside_default_bracket'] else 'NO'} |"
        )
    lines += ["", "Per level (quantile s / bracket width ms / error vs reference ms):", ""]
    head = "| level | MC 1,000 95% half ms | reference s |"
    head += "".join(f" {r['rel_width']:g}:{r['op_refine']} |" for r in job["rows"])
    lines += [head, "|---" * (3 + len(job["rows"])) + "|"]
    for i, lev in enumerate(job["levels"]):
        key = f"{lev:g}"
        half = "-"
        if bench and key in bench.get("mc_ci95_s", {}):
            a, b = bench["mc_ci95_s"][key]
            half = f"{0.5e3 * (b - a):.2f}"
        rv = ref["quantiles"].get(key, {}).get("value") if ref else None
        cells = []
        for r in job["rows"]:
            q, w = r["quantiles_s"][i], 1e3 * r["bracket_width_s"][i]
            err = "-" if rv is None else f"{1e3 * (q - rv):+.2f}"
            cells.append(f" {q:.5f} / {w:.2f} / {err} |")
        lines.append(
            f"| {lev:g} | {half} | {'-' if rv is None else f'{rv:.5f}'} |" + "".join(cells)
        )
    lines += [
        "",
        "Analytic graphs of GRAPHS (levels 0.01, 0.5, 0.9, 0.99, 0.999), against the default:",
        "",
        "| graph | rel_width:op_refine | inside default bracket | largest move ms |"
        " widest bracket / default |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = "-" if r["max_width_ratio"] is None else f"{r['max_width_ratio']:.2f}"
        lines.append(
            f"| {r['preset']} | {r['rel_width']:g}:{r['op_refine']} |"
            f" {'yes' if r['inside_default_bracket'] else 'NO'} | {1e3 * r['max_move_s']:.3f} |"
            f" {ratio} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python validation/bench_resolution.py``."""
    parser = argparse.ArgumentParser(prog="bench_resolution", description=__doc__.split("\n")[0])
    parser.add_argument("--policies", default=DEFAULT_POLICIES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the report (.md) and JSON (.json)")
    args = parser.parse_args(argv)
    pols = policies(args.policies)
    meta = {
        "date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
        "commit": commit(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg()[0],
    }
    job = main_job(pols, max(args.repeat, 1))
    rows = presets(pols)
    meta["load_after"] = os.getloadavg()[0]
    text = report(job, rows, meta)
    print(text)
    if args.out is not None:
        cmd = " ".join(["python validation/bench_resolution.py", *(argv or sys.argv[1:])])
        args.out.with_suffix(".md").write_text(
            f"# bench_resolution: grid resolution vs time and precision\n\n```\n{cmd}\n```\n\n"
            + text
            + "\n"
        )
        args.out.with_suffix(".json").write_text(
            json.dumps({**meta, "main_job": job, "presets": rows}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
