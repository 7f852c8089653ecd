"""Benchmark: branch and bound vs exhaustive layout search, and one process vs dask.

``exhaustive`` (issue #26's 512 candidates): llama3-405b on 16,384 GPUs, tp {4, 8} x pp {4, 8, 16,
32} x vpp {1, 2, 4, 8} x cp {1, 2, 4, 8} x mbs {1, 2} x recompute {selective, full}. In one
process, one after the other on the same executor kind:

1. the exhaustive evaluation (``optimize``: the full engine on every valid candidate, what
   ``prism optimize`` did before), the baseline;
2. the branch-and-bound search (``search(mode="bnb")``).

It checks that both pick the same winner by p95, that every eliminated candidate carries a
proof (its guaranteed lower bound above the threshold, the holder's guaranteed upper bound),
and that the exhaustive table agrees with every proof (each eliminated candidate's full-engine
p95 above the winner's).

``scaling``: the branch-and-bound search in one process, then on a dask ``LocalCluster`` of
2 single-threaded workers; the winner, tie set, threshold and every proof must be identical.
``--grid knobs`` is the >= 10,000-candidate search over the added knobs (rank order, global
batch, micro-batch size 4, recompute none, tp 1-2 and pp 2 besides the issue's axes).

The machine's load average is printed before and after every run: on a shared machine the
wall times are contended, and only ratios measured in the same run mean anything.

Usage::

    python validation/bench_optimize.py exhaustive --workers 2        # 512: exhaustive vs bnb
    python validation/bench_optimize.py scaling --grid issue          # one process vs dask
    python validation/bench_optimize.py scaling --grid knobs --runs dask
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from typing import Any

# the tasks' modules load now: a run that starts later in the same process (one process after
# dask) must evaluate the same model as the workers, whatever changes on disk meanwhile
import prism_analytic.engines.predict  # noqa: F401
import prism_analytic.workload.builder  # noqa: F401
import prism_analytic.workload.jobs  # noqa: F401
import prism_analytic.workload.prediction  # noqa: F401
import prism_analytic.workload.step_estimate  # noqa: F401
from prism_analytic.progress import Progress
from prism_analytic.sweep import EvalSettings
from prism_analytic.sweep.executor import open_executor
from prism_analytic.sweep.layouts import LayoutSpace, layout_spec
from prism_analytic.sweep.optimize import optimize, search

ISSUE = LayoutSpace(
    tp=(4, 8),
    pp=(4, 8, 16, 32),
    vpp=(1, 2, 4, 8),
    cp=(1, 2, 4, 8),
    micro_batch_size=(1, 2),
    recompute=("selective", "full"),
)
# 11,520 candidates: 2,328 global batches that do not split, 4,458 invalid, 3,098 over memory,
# 1,636 valid (counted by the screen)
KNOBS = LayoutSpace(
    tp=(1, 2, 4, 8),
    pp=(2, 4, 8, 16, 32),
    vpp=(1, 2, 4, 8),
    cp=(1, 2, 4, 8),
    micro_batch_size=(1, 2, 4),
    recompute=("none", "selective", "full"),
    rank_order=("tp-cp-dp-pp", "tp-cp-pp-dp"),
    global_batch=(1024, 2048),
)
GRIDS = {"issue": ISSUE, "knobs": KNOBS}


def _load() -> str:
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def _signature(result: Any) -> dict[str, Any]:
    """What must be identical across executors: winner, ties, threshold, every proof."""
    return {
        "winner": result.winner.index,
        "tie_set": sorted(c.index for c in result.tie_set),
        "threshold": result.threshold,
        "proofs": {c.index: c.eliminated for c in result.eliminated},
        "lower": {c.index: c.lower for c in result.candidates},
    }


def _check_proofs(result: Any) -> int:
    """Number of eliminated candidates whose proof is complete and consistent."""
    good = 0
    for c in result.eliminated:
        p = c.eliminated
        if (
            p["value_s"] > p["incumbent_value_s"]
            and p["value_s"] == c.lower[p["grid"]]
            and p["incumbent_value_s"] >= result.threshold
        ):
            good += 1
    return good


def bench_issue(workers: int) -> dict[str, Any]:
    """The 512-candidate search: exhaustive baseline, then branch and bound (same process)."""
    out: dict[str, Any] = {"workers": workers}
    settings = EvalSettings()
    with open_executor("local", workers) as ex:
        out["load_before_exhaustive"] = _load()
        t = time.perf_counter()
        base = optimize("llama3-405b", 16384, "p95", ISSUE, settings=settings, executor=ex)
        out["exhaustive_s"] = time.perf_counter() - t
        out["load_before_bnb"] = _load()
        t = time.perf_counter()
        bnb = search(
            "llama3-405b",
            16384,
            "p95",
            ISSUE,
            settings=settings,
            executor=ex,
            progress=Progress("bnb", every_s=30),
        )
        out["bnb_s"] = time.perf_counter() - t
        out["load_after"] = _load()
    table = base.table.set_index("index")
    best = base.best
    out["exhaustive_winner"] = int(best["index"])
    out["bnb_winner"] = bnb.winner.index
    out["same_winner"] = out["exhaustive_winner"] == out["bnb_winner"]
    out["tie_set"] = sorted(c.index for c in bnb.tie_set)
    out["threshold_s"] = bnb.threshold
    out["counts"] = bnb.counts
    out["stages"] = bnb.stages
    out["exhaustive_work_s"] = float(base.table["compute_time_s"].sum())
    out["eliminated"] = len(bnb.eliminated)
    out["proofs_complete"] = _check_proofs(bnb)
    # the exhaustive table agrees with every proof: each eliminated p95 is above the winner's
    out["proofs_confirmed_by_exhaustive"] = sum(
        float(table.loc[c.index, "p95_s"]) > best["p95_s"] for c in bnb.eliminated
    )
    out["outside_bracket"] = bnb.outside
    out["speedup"] = out["exhaustive_s"] / out["bnb_s"]
    return out


def bench_scaling(grid: str, runs: list[str], workers: int) -> dict[str, Any]:
    """The branch-and-bound search in one process and/or on a dask ``LocalCluster``."""
    space = GRIDS[grid]
    spec, counts = layout_spec("llama3-405b", 16384, space)
    out: dict[str, Any] = {"grid": grid, "candidates": counts["candidates"]}
    results = {}
    plan = {"one": ("local", 1), "dask": ("dask", workers)}
    for name in runs:
        scheduler, n = plan[name]
        with open_executor(scheduler, n) as ex:
            out[f"load_before_{name}"] = _load()
            t = time.perf_counter()
            results[name] = search(
                "llama3-405b", 16384, "p95", space, executor=ex, progress=Progress(name, every_s=30)
            )
            out[f"{name}_s"] = time.perf_counter() - t
    out["load_after"] = _load()
    one = results[runs[0]]
    if len(results) == 2:
        out["identical"] = _signature(results["one"]) == _signature(results["dask"])
        out["speedup"] = out["one_s"] / out["dask_s"]
    out["signature_sha256"] = {
        name: hashlib.sha256(
            json.dumps(_signature(r), sort_keys=True, default=str).encode()
        ).hexdigest()
        for name, r in results.items()
    }
    out["winner"] = one._entry(one.winner)
    out["tie_set"] = sorted(c.index for c in one.tie_set)
    out["threshold_s"] = one.threshold
    out["counts"] = one.counts
    out["stages"] = one.stages
    out["eliminated"] = len(one.eliminated)
    out["proofs_complete"] = _check_proofs(one)
    return out


def main() -> None:
    """Run one benchmark and print its JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", choices=("exhaustive", "scaling"))
    ap.add_argument("--grid", choices=tuple(GRIDS), default="issue", help="for scaling")
    ap.add_argument("--runs", default="one,dask", help="for scaling: one, dask or both")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    runs = [r.strip() for r in args.runs.split(",")]
    if not runs or any(r not in ("one", "dask") for r in runs):
        ap.error(f"--runs: a comma-separated list of one and dask, got {args.runs!r}")
    if args.which == "exhaustive":
        res = bench_issue(args.workers)
    else:
        res = bench_scaling(args.grid, runs, args.workers)
    print(json.dumps(res, indent=2, default=str))


if __name__ == "__main__":
    main()
