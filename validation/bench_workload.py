"""Analytic engine against PRISM-style Monte Carlo on a 65,536-GPU job: time and accuracy.

PRISM (arXiv 2510.15596, v2 note) answers with N = 1,000 sampled DAG evaluations per
scenario. This benchmark times that on the same step DAG as the analytic engine
(:func:`~prism_analytic.workload.builder.build_step_graph` of ``llama3-405b`` on 65,536 GPUs:
tp 8, pp 16, vpp 8, dp 512, 16 microbatches, a 4,096-op pipeline body):

* analytic: :func:`~prism_analytic.engines.predict.predict` (which resolves the grid policy
  itself). *Cold*: a freshly built graph, the schedule, makespan and op-grid caches cleared,
  best of ``--repeat`` (3); the process's very first call (lazy imports, first-use set-up) is
  listed separately. *Warm*: the same graph again with the pipeline makespan cached by spec
  and the op laws' grids and the speed law's range cached.
* Monte Carlo: ``--samples`` (1,000) step samples with ``explicit_limit >= dp``: every one of
  the dp replicas sampled copy by copy (each pipeline op drawn per replica, each replica's
  speed factor drawn), the same semantics as PRISM's per-sample DAG evaluation at replica
  granularity. With ``--time-samples K < samples`` only K samples are timed and the time is
  extrapolated linearly (which the output says). Graph building is excluded from both times.
* Wall time and this process's CPU time for both; the ratio is given for each. On the shared
  2-core box the wall time follows the load (both sides slow down, not equally).
* Accuracy: both answers' quantiles against a large explicit Monte Carlo reference
  (:mod:`bench_mc_reference`, 16,384 samples, another seed; its graph fingerprint must match),
  next to the 1,000-sample run's own 95% interval half-width: "equal or better accuracy" means
  the analytic error is no larger than that half-width.

The record (``python validation/bench_workload.py --also 2.5e-4:1 --out
validation/results/bench_workload``) is ``validation/results/bench_workload.md``, with its
commit, time and load.

Usage::

    python validation/bench_workload.py [--preset NAME] [--gpus N] [--samples N]
                                        [--time-samples K] [--repeat R] [--reference FILE]
                                        [--also REL_WIDTH:OP_REFINE] [--out PREFIX] [--json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from prism_analytic.engines.grid_cache import clear_grid_cache
from prism_analytic.engines.montecarlo import MonteCarloSettings
from prism_analytic.engines.pipeline_core import clear_caches
from prism_analytic.engines.predict import predict
from prism_analytic.policy import GridPolicy
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.presets import preset_job

sys.path.insert(0, str(Path(__file__).parent))
from bench_mc_reference import DEFAULT_OUT, LEVELS, commit, fingerprint  # noqa: E402

__all__ = ["bench", "accuracy", "main"]


def _timed(fn):  # noqa: ANN001, ANN202 (a bench helper)
    """``(result, wall seconds, CPU seconds of this process)`` of ``fn()``."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def bench(
    preset: str = "llama3-405b",
    gpus: int = 65536,
    samples: int = 1000,
    time_samples: int | None = None,
    repeat: int = 3,
    seed: int = 0,
    also: GridPolicy | None = None,
) -> dict:
    """Time the analytic engine (cold and warm) and PRISM-style Monte Carlo on one preset job.

    Cold: a freshly built graph and the schedule and makespan caches cleared
    (``clear_caches``), so the pipeline core and every law's moments are evaluated again; the
    very first call of the process also pays lazy imports and first-use set-up, and is listed
    separately. Warm: the same graph again, the pipeline makespan, the op laws' grids and the
    speed law's range reused from their caches. Wall and CPU time of this process are both
    recorded: on a shared machine the wall time depends on the load, the CPU time much less.
    ``also``: a second (opt-in) grid policy timed and answered the same way, beside the
    default.
    """
    graph = build_step_graph(preset_job(preset, gpus))
    dp = graph.node("replicas")["n"]
    body_ops = graph.node("replicas")["body"].total_ops()  # a compact pipeline is one node
    load0 = os.getloadavg()[0]
    clear_caches()
    clear_grid_cache()
    res, first_wall, first_cpu = _timed(lambda: predict(graph, "analytic"))
    cold, warm = [], []
    for _ in range(repeat):
        # a fresh graph (its laws memoise numeric moments) and cleared caches: all but the
        # process's one-time set-up is redone
        fresh = build_step_graph(preset_job(preset, gpus))
        clear_caches()
        clear_grid_cache()  # op laws' grids too (engines/grid_cache.py)
        cold.append(_timed(lambda g=fresh: predict(g, "analytic"))[1:])
        warm.append(_timed(lambda g=fresh: predict(g, "analytic"))[1:])
    opt = None
    if also is not None:
        cold_o, warm_o = [], []
        for _ in range(repeat):
            fresh = build_step_graph(preset_job(preset, gpus))
            clear_caches()
            clear_grid_cache()
            cold_o.append(_timed(lambda g=fresh: predict(g, "analytic", policy=also))[1:])
            warm_o.append(_timed(lambda g=fresh: predict(g, "analytic", policy=also))[1:])
        res_o = predict(graph, "analytic", policy=also)
        lo_o, hi_o = res_o.quantile_bracket(np.array(LEVELS))
        opt = {
            "policy": also.to_dict(),
            "cold_s": {"wall": min(t[0] for t in cold_o), "cpu": min(t[1] for t in cold_o)},
            "warm_s": {"wall": min(t[0] for t in warm_o), "cpu": min(t[1] for t in warm_o)},
            "quantiles_s": {f"{q:g}": float(res_o.quantile(q)) for q in LEVELS},
            "bracket_width_s": {f"{q:g}": float(b - a) for q, a, b in zip(LEVELS, lo_o, hi_o)},
        }
    timed = min(time_samples or samples, samples)
    settings = MonteCarloSettings(
        explicit_limit=max(dp, MonteCarloSettings().explicit_limit), seed=seed
    )
    mc, mc_wall, mc_cpu = _timed(
        lambda: predict(graph, "montecarlo", samples=timed, mc_settings=settings)
    )
    scale = samples / timed
    best = {
        "cold_wall": min(t[0] for t in cold),
        "cold_cpu": min(t[1] for t in cold),
        "warm_wall": min(t[0] for t in warm),
        "warm_cpu": min(t[1] for t in warm),
    }
    mc_levels = np.array(LEVELS)
    lo, hi = mc.quantile_bracket(mc_levels, 0.95)
    return {
        "preset": preset,
        "gpus": gpus,
        "dp": dp,
        "body_ops": body_ops,
        "represented_ops": graph.total_ops(),
        "graph_sha256_16": fingerprint(graph),
        "date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
        "commit": commit(),
        "cpus": os.cpu_count(),
        "load_before": load0,
        "load_after": os.getloadavg()[0],
        "analytic_first_call_s": {"wall": first_wall, "cpu": first_cpu},
        "analytic_cold_s": {"wall": best["cold_wall"], "cpu": best["cold_cpu"], "all": cold},
        "analytic_warm_s": {"wall": best["warm_wall"], "cpu": best["warm_cpu"], "all": warm},
        "analytic_quantiles_s": {f"{q:g}": float(res.quantile(q)) for q in LEVELS},
        "analytic_bracket_width_s": {
            f"{q:g}": float(b - a)
            for q, a, b in zip(LEVELS, *res.quantile_bracket(np.array(LEVELS)))
        },
        "analytic_exact": bool(res.exact),
        "mc_samples": samples,
        "mc_timed_samples": timed,
        "mc_s": {"wall": mc_wall * scale, "cpu": mc_cpu * scale},
        "extrapolated": timed < samples,
        "mc_quantiles_s": {f"{q:g}": float(mc.quantile(q)) for q in LEVELS},
        "mc_ci95_s": {f"{q:g}": [float(a), float(b)] for q, a, b in zip(LEVELS, lo, hi)},
        "pooled_groups": len(mc.diagnostics["pooled_groups"]),
        "ratio": {
            kind: {
                clock: mc_x / best[f"{kind}_{clock}"]
                for clock, mc_x in (("wall", mc_wall * scale), ("cpu", mc_cpu * scale))
            }
            for kind in ("cold", "warm")
        },
        "opt_in": opt
        and {
            **opt,
            "ratio_cpu": {
                kind: mc_cpu * scale / opt[f"{kind}_s"]["cpu"] for kind in ("cold", "warm")
            },
        },
    }


def accuracy(r: dict, reference: dict | None) -> dict | None:
    """Errors of the analytic answer and of the timed Monte Carlo against a large reference.

    Per level: ``analytic_err`` and ``mc_err`` (seconds, estimate minus reference), the timed
    Monte Carlo's 95% interval half-width (its own stated accuracy), the reference's 99%
    order-statistic half-width (how well the reference itself knows the quantile) and
    ``analytic_within_mc_ci``: whether the analytic error is no larger than that half-width,
    i.e. whether the analytic answer is at least as accurate as 1,000 samples claim to be.
    ``None`` when there is no reference; ``{"stale": ...}`` when it sampled another graph.
    """
    if reference is None:
        return None
    if reference.get("graph_sha256_16") != r["graph_sha256_16"]:
        return {
            "stale": f"reference graph {reference.get('graph_sha256_16')} != timed graph "
            f"{r['graph_sha256_16']}: rerun validation/bench_mc_reference.py"
        }
    rows = {}
    for key, ref in reference["quantiles"].items():
        if key not in r["analytic_quantiles_s"]:
            continue
        a, b = r["mc_ci95_s"][key]
        lo, hi = ref["ci99"]
        mc_half = 0.5 * (b - a)
        an_err = r["analytic_quantiles_s"][key] - ref["value"]
        rows[key] = {
            "reference_s": ref["value"],
            "reference_ci99_half_s": None if lo is None or hi is None else 0.5 * (hi - lo),
            "analytic_err_s": an_err,
            "mc_err_s": r["mc_quantiles_s"][key] - ref["value"],
            "mc_ci95_half_s": mc_half,
            "analytic_within_mc_ci": abs(an_err) <= mc_half,
            "analytic_bracket_width_s": r.get("analytic_bracket_width_s", {}).get(key),
        }
        if r.get("opt_in"):
            opt_err = r["opt_in"]["quantiles_s"][key] - ref["value"]
            rows[key]["opt_in_err_s"] = opt_err
            rows[key]["opt_in_bracket_width_s"] = r["opt_in"]["bracket_width_s"][key]
            rows[key]["opt_in_within_mc_ci"] = abs(opt_err) <= mc_half
    return {
        "reference_samples": reference["samples"],
        "reference_seed": reference["seed"],
        "levels": rows,
    }


def format_report(r: dict) -> str:
    """Human-readable lines (the results file's body)."""
    extra = (
        f" (timed {r['mc_timed_samples']:,} samples, extrapolated linearly)"
        if r["extrapolated"]
        else ""
    )
    c, w, f = r["analytic_cold_s"], r["analytic_warm_s"], r["analytic_first_call_s"]
    lines = [
        f"{r['preset']} on {r['gpus']:,} GPUs: dp {r['dp']}, pipeline body {r['body_ops']:,} ops,"
        f" {r['represented_ops']:,} represented ops (graph {r['graph_sha256_16']})",
        f"{r['date_utc']} UTC, commit {r['commit']}, load average {r['load_before']:.1f} before,"
        f" {r['load_after']:.1f} after, on {r['cpus']} CPUs",
        f"analytic first call of the process: {f['wall']:.3f} s wall, {f['cpu']:.3f} s CPU",
        f"analytic cold (fresh graph, caches cleared, best of {len(c['all'])}):"
        f" {c['wall']:.3f} s wall, {c['cpu']:.3f} s CPU",
        f"analytic warm (pipeline makespan, op grids, speed range cached): {w['wall']:.3f} s wall,"
        f" {w['cpu']:.3f} s CPU",
        f"Monte Carlo, {r['mc_samples']:,} samples, every replica explicit (pooled groups:"
        f" {r['pooled_groups']}): {r['mc_s']['wall']:.1f} s wall, {r['mc_s']['cpu']:.1f} s CPU"
        + extra,
        "ratio Monte Carlo / analytic: cold {:.0f}x wall, {:.0f}x CPU; warm {:.0f}x wall,"
        " {:.0f}x CPU".format(
            r["ratio"]["cold"]["wall"],
            r["ratio"]["cold"]["cpu"],
            r["ratio"]["warm"]["wall"],
            r["ratio"]["warm"]["cpu"],
        ),
    ]
    opt = r.get("opt_in")
    if opt:
        pol = opt["policy"]
        lines += [
            f"opt-in policy rel_width {pol['rel_width']:g}, op_refine {pol['op_refine']}: cold"
            f" {opt['cold_s']['wall']:.3f} s wall, {opt['cold_s']['cpu']:.3f} s CPU; warm"
            f" {opt['warm_s']['wall']:.3f} s wall, {opt['warm_s']['cpu']:.3f} s CPU",
            "ratio Monte Carlo / analytic with it: cold {:.0f}x CPU; warm {:.0f}x CPU".format(
                opt["ratio_cpu"]["cold"], opt["ratio_cpu"]["warm"]
            ),
        ]
    acc = r.get("accuracy")
    if acc is None:
        lines.append("accuracy: no Monte Carlo reference (validation/bench_mc_reference.py)")
    elif "stale" in acc:
        lines.append(f"accuracy: {acc['stale']}")
    else:
        lines.append(
            f"accuracy against {acc['reference_samples']:,} explicit samples (seed"
            f" {acc['reference_seed']}), seconds:"
        )
        n = f"{r['mc_samples']:,}"
        head = (
            f"| level | reference (99% half) | analytic err (bracket) | MC {n} err |"
            f" MC {n} 95% half | analytic within MC's CI |"
        )
        if opt:
            head += " opt-in err (bracket) | opt-in within MC's CI |"
        lines.append(head)
        lines.append("|---" * (8 if opt else 6) + "|")
        for key, row in acc["levels"].items():
            half = row["reference_ci99_half_s"]
            within = "yes" if row["analytic_within_mc_ci"] else "NO"
            width = row.get("analytic_bracket_width_s")
            line = (
                f"| {key} | {row['reference_s']:.5f} ({'-' if half is None else f'{half:.5f}'})"
                f" | {row['analytic_err_s']:+.5f} ({'-' if width is None else f'{width:.5f}'})"
                f" | {row['mc_err_s']:+.5f} | {row['mc_ci95_half_s']:.5f} | {within} |"
            )
            if opt:
                line += (
                    f" {row['opt_in_err_s']:+.5f} ({row['opt_in_bracket_width_s']:.5f}) |"
                    f" {'yes' if row['opt_in_within_mc_ci'] else 'NO'} |"
                )
            lines.append(line)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python validation/bench_workload.py``."""
    parser = argparse.ArgumentParser(prog="bench_workload", description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="llama3-405b")
    parser.add_argument("--gpus", type=int, default=65536)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument(
        "--time-samples",
        type=int,
        default=None,
        help="time only this many samples and extrapolate linearly",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--also",
        metavar="REL_WIDTH:OP_REFINE",
        help="also time an opt-in grid policy, e.g. 2.5e-4:1 (GridPolicy rel_width, op_refine)",
    )
    parser.add_argument(
        "--reference",
        type=Path,
        default=DEFAULT_OUT.with_suffix(".json"),
        help="summary written by bench_mc_reference.py (skipped when absent)",
    )
    parser.add_argument("--out", type=Path, help="also write the report (.md) and JSON (.json)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.samples < 2 or args.repeat < 1 or (args.time_samples or 2) < 2:
        parser.error("--samples and --time-samples must be >= 2, --repeat >= 1")
    also = None
    if args.also:
        rel, _, refine = args.also.partition(":")
        try:
            also = GridPolicy(rel_width=float(rel), op_refine=int(refine or 4))
        except (TypeError, ValueError) as exc:
            parser.error(f"--also: {exc}")
    r = bench(args.preset, args.gpus, args.samples, args.time_samples, args.repeat, also=also)
    ref = json.loads(args.reference.read_text()) if args.reference.is_file() else None
    r["accuracy"] = accuracy(r, ref)
    text = format_report(r)
    print(json.dumps(r, indent=2) if args.json else text)
    if args.out is not None:
        args.out.with_suffix(".md").write_text(
            "# bench_workload: analytic vs PRISM-style Monte Carlo\n\n```\n"
            + " ".join(["python validation/bench_workload.py", *(argv or sys.argv[1:])])
            + "\n```\n\n"
            + text.replace("\n", "\n\n", 9 if also else 7)
            + "\n"
        )
        args.out.with_suffix(".json").write_text(json.dumps(r, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
