"""Collective-noise scale model: fit at <= 128 nodes, predict 512 / 1,024 / 2,048 nodes.

Model: :mod:`prism_analytic.calibration.collective_population`, collective-latency noise as a
population of runs: each run has its own body width, per-node rate of delayed-iteration
bursts and burst continuation, drawn from population laws fitted across the <= 128-node
sessions; the excess of a delayed iteration is an absolute time (lognormal above 30 us).
Data: ``shared/data/collective_latency`` (PICO on Leonardo, MPI, host buffers, one process
per node).

Fit data (never a run above 128 nodes): every file of every <= 128-node host-buffer session
with one process per node, >= 1,000 iterations and a median below 150 us (latency-bound:
where a delay of tens of microseconds is an event, not part of the body). That is five
sessions (4, 4, 8, 16 and 128 nodes; Allreduce and Allgather; Open MPI 4.1.6 and a custom
5.0.7), 109 files.

Predicted: the same algorithm and message size in the 512-, 1,024- and two 2,048-node runs
(one session, 2025-03-28): ``default_ompi`` and ``recursive_doubling_ompi`` at 32 B .. 2 KB,
``rabenseifner_ompi`` at 16 KB .. 8 MB; a ratio passes when the measured p90/p50 or
p99/p50 lies in the 90% predictive interval for the measured number of iterations.

The noise model takes the collective's median latency as its scale (in the workload it is
the deterministic collective time). Two variants:

* **A (scale given)**: the held-out run's measured median is that input; no other number of
  a >= 512-node run enters (its ratios are only compared);
* **B (scale from <= 128 nodes)**: the median of the same algorithm and size at the largest
  fitted node count (128, or 16 for rabenseifner): what a user without a latency model
  gets.

Diagnostics (not acceptance): the width of the interval by source (sampling only, plus
parameter uncertainty, plus between-run spread), a leave-one-session-out check of coverage
at <= 128 nodes, and the per-session event statistics behind the population laws (the
held-out session's are shown for the reading, never fitted).

Run: ``nice python validation/calibration_collective_noise.py [--json] [--out FILE.md]``
(about two CPU-minutes; five minutes of wall time on a loaded machine).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from datetime import UTC, datetime

import numpy as np

from prism_analytic.calibration.collective_noise import (
    archive_files,
    load_latencies,
    load_metadata,
)
from prism_analytic.calibration.collective_population import (
    DEFAULT_THRESHOLD_S,
    fit_population,
    predicted_ratio_interval,
    summarize_run,
)

MAX_FIT_NODES = 128
MAX_FIT_MEDIAN_S = 150e-6
MIN_ITERATIONS = 1000
PREDICT = [
    (512, "2025_03_28___18_19_43"),
    (1024, "2025_03_28___17_42_08"),
    (2048, "2025_03_28___16_48_20"),
    (2048, "2025_03_28___17_14_41"),
]
#: (algorithm, int32 elements)
CASES = [
    *((a, c) for a in ("default_ompi", "recursive_doubling_ompi") for c in (8, 64, 512)),
    *(("rabenseifner_ompi", c) for c in (4096, 32768, 262144, 2097152)),
]
REPS = 1000  # the predictive is bimodal (quiet or noisy session): its 5%/95% need many draws


def fit_data() -> list[tuple[str, int, str, int, np.ndarray]]:
    """``(session, nodes, algorithm, count, latencies)`` of every fit file (see the notes)."""
    out = []
    for (arch, tid), row in sorted(load_metadata().items()):
        if row["nnodes"] > MAX_FIT_NODES or row["tasks_per_node"] != 1 or row["gpu_awareness"]:
            continue
        try:
            files = archive_files(arch)
        except FileNotFoundError:
            continue  # the metadata lists more runs than the shared archives hold
        for t, algo, count in files:
            if t != tid:
                continue
            x = load_latencies(arch, t, algo, count)
            if len(x) >= MIN_ITERATIONS and np.median(x) <= MAX_FIT_MEDIAN_S:
                out.append((f"{arch}/{t}", row["nnodes"], algo, count, x))
    return out


def _ratios(x: np.ndarray) -> tuple[float, float]:
    q = np.quantile(x, [0.5, 0.9, 0.99])
    return float(q[1] / q[0]), float(q[2] / q[0])


def _fit_scale(algo: str, count: int) -> tuple[int, float]:
    """Variant B's scale: the median at the largest <= 128-node run of this algorithm and size."""
    best = None
    for (arch, tid), row in load_metadata().items():
        if row["nnodes"] > MAX_FIT_NODES or row["tasks_per_node"] != 1 or row["gpu_awareness"]:
            continue
        try:
            x = load_latencies(arch, tid, algo, count)
        except (FileNotFoundError, ValueError):
            continue
        if best is None or row["nnodes"] > best[0]:
            best = (row["nnodes"], float(np.median(x)))
    if best is None:
        raise ValueError(f"no <= {MAX_FIT_NODES}-node run of {algo} at {count} elements")
    return best


def acceptance(pop) -> list[dict]:
    """Measured ratios of the held-out runs against both variants' intervals."""
    rows = []
    for algo, count in CASES:
        fit_n, fit_median = _fit_scale(algo, count)
        for n, arch in PREDICT:
            x = load_latencies(arch, 0, algo, count)
            m90, m99 = _ratios(x)
            med = float(np.median(x))
            for variant, scale in (("A", med), ("B", fit_median)):
                iv = predicted_ratio_interval(pop, n, len(x), scale, reps=REPS, seed=n + count)
                rows.append(
                    {
                        "variant": variant,
                        "algorithm": algo,
                        "bytes": 4 * count,
                        "nodes": n,
                        "run": arch,
                        "iterations": len(x),
                        "median_us": med * 1e6,
                        "scale_us": scale * 1e6,
                        "scale_from_nodes": n if variant == "A" else fit_n,
                        "measured_p90_p50": m90,
                        "pred_p90_p50": iv[0.9],
                        "p90_inside": bool(iv[0.9][0] <= m90 <= iv[0.9][2]),
                        "measured_p99_p50": m99,
                        "pred_p99_p50": iv[0.99],
                        "p99_inside": bool(iv[0.99][0] <= m99 <= iv[0.99][2]),
                    }
                )
    return rows


def summarize(rows: list[dict]) -> dict:
    """Counts per variant: inside, per ratio, per size; sizes with every ratio inside."""
    out = {}
    for variant in ("A", "B"):
        mine = [r for r in rows if r["variant"] == variant]
        keys = sorted({(r["algorithm"], r["bytes"]) for r in mine})
        per_size = {}
        for k in keys:
            rs = [r for r in mine if (r["algorithm"], r["bytes"]) == k]
            per_size[f"{k[0]} {k[1]} B"] = {
                "p90": sum(r["p90_inside"] for r in rs),
                "p99": sum(r["p99_inside"] for r in rs),
                "runs": len(rs),
            }
        out[variant] = {
            "inside": sum(r["p90_inside"] + r["p99_inside"] for r in mine),
            "p90_inside": sum(r["p90_inside"] for r in mine),
            "p99_inside": sum(r["p99_inside"] for r in mine),
            "ratios": 2 * len(mine),
            "per_size": per_size,
            "sizes_all_inside": [
                k for k, v in per_size.items() if v["p90"] == v["p99"] == v["runs"]
            ],
            "median_width_p90": float(
                np.median([r["pred_p90_p50"][2] / r["pred_p90_p50"][0] for r in mine])
            ),
            "median_width_p99": float(
                np.median([r["pred_p99_p50"][2] / r["pred_p99_p50"][0] for r in mine])
            ),
        }
    return out


def decomposition(pop) -> list[dict]:
    """Interval by source for the small-message cases at each held-out size (variant A)."""
    rows = []
    for algo, count in (("default_ompi", 8), ("rabenseifner_ompi", 4096)):
        for n, arch in PREDICT[:3]:
            x = load_latencies(arch, 0, algo, count)
            med = float(np.median(x))
            for label, pu, br in (
                ("sampling only", False, False),
                ("+ parameter uncertainty", True, False),
                ("+ between-run spread (full)", True, True),
            ):
                iv = predicted_ratio_interval(
                    pop,
                    n,
                    len(x),
                    med,
                    reps=REPS,
                    seed=1,
                    parameter_uncertainty=pu,
                    between_runs=br,
                )
                rows.append(
                    {
                        "algorithm": algo,
                        "bytes": 4 * count,
                        "nodes": n,
                        "source": label,
                        "pred_p90_p50": iv[0.9],
                        "pred_p99_p50": iv[0.99],
                        "measured": _ratios(x),
                    }
                )
    return rows


def leave_one_session_out(data, threshold_s: float) -> list[dict]:
    """Fit on all but one <= 128-node session, predict that session's runs (variant A)."""
    summaries = [summarize_run(x, n, s, threshold_s=threshold_s) for s, n, _, _, x in data]
    rows = []
    for held in sorted({s for s, *_ in data}):
        pop = fit_population([r for r in summaries if r.session != held])
        ins90 = ins99 = k = 0
        nodes = next(n for s, n, *_ in data if s == held)
        for (s, n, _, _, x), summ in zip(data, summaries):
            if s != held:
                continue
            iv = predicted_ratio_interval(pop, n, len(x), summ.median_s, reps=200, seed=k)
            m90, m99 = _ratios(x)
            ins90 += iv[0.9][0] <= m90 <= iv[0.9][2]
            ins99 += iv[0.99][0] <= m99 <= iv[0.99][2]
            k += 1
        rows.append(
            {"session": held, "nodes": nodes, "runs": k, "p90_inside": ins90, "p99_inside": ins99}
        )
    return rows


def session_stats(data, pop) -> list[dict]:
    """Per session: delayed iterations, bursts and per-node rates.

    The fit sessions, then the held-out session's small messages (for the reading only).
    """
    held = []
    for n, arch in PREDICT:
        for algo, count in CASES[:6]:
            held.append((arch + "/0", n, algo, count, load_latencies(arch, 0, algo, count)))
    out = []
    for role, group in (("fit", data), ("held out", held)):
        for s in sorted({g[0] for g in group}):
            summ = [
                summarize_run(x, n, s, threshold_s=pop.threshold_s)
                for ss, n, _, _, x in group
                if ss == s
            ]
            ev = sum(r.events for r in summ)
            pr = sum(r.pairs for r in summ)
            expo = sum(r.iterations * r.nodes for r in summ)
            exc = np.concatenate([r.excess_s for r in summ]) if ev else np.array([np.nan])
            out.append(
                {
                    "role": role,
                    "session": s,
                    "nodes": summ[0].nodes,
                    "runs": len(summ),
                    "node_iterations": expo,
                    "events": ev,
                    "pairs": pr,
                    "start_rate_per_node": (ev - pr) / expo,
                    "continuation": pr / ev if ev else float("nan"),
                    "median_excess_us": float(np.median(exc) * 1e6),
                    "body_p90_p50": [
                        float(np.min([math.exp(1.2816 * r.body_sigma) for r in summ])),
                        float(np.max([math.exp(1.2816 * r.body_sigma) for r in summ])),
                    ],
                }
            )
    return out


def run(threshold_s: float = DEFAULT_THRESHOLD_S) -> dict:
    """Fit, acceptance (both variants) and the diagnostics.

    ``threshold_s``: what counts as a delayed iteration (the default's reason is in
    ``collective_population``).
    """
    data = fit_data()
    pop = fit_population(
        [summarize_run(x, n, s, threshold_s=threshold_s) for s, n, _, _, x in data]
    )
    rows = acceptance(pop)
    return {
        "population": pop.to_dict(),
        "rows": rows,
        "summary": summarize(rows),
        "decomposition": decomposition(pop),
        "leave_one_session_out": leave_one_session_out(data, threshold_s),
        "sessions": session_stats(data, pop),
    }


def _iv(t) -> str:
    return f"{t[1]:.3f} [{t[0]:.3f}, {t[2]:.3f}]"


def report(out: dict) -> str:
    """Markdown report."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    p = out["population"]
    b = p["body_log_sigma"]
    lines = [
        "# Collective noise out of sample",
        "",
        "`nice python validation/calibration_collective_noise.py --out"
        " validation/results/collective_noise.md`"
        f" ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {commit}).",
        "",
        "Model: `calibration.collective_population` (a population of runs, fitted on"
        f" {p['runs']} files of {p['sessions']} sessions at {p['node_range'][0]}-"
        f"{p['node_range'][1]} nodes; nothing above 128 nodes is fitted). Acceptance: the"
        " measured p90/p50 and p99/p50 inside the 90% predictive interval for the measured"
        " number of iterations. Variant A takes the held-out run's median latency as the"
        " scale (an input of the noise model); variant B the median at <= 128 nodes.",
        "",
    ]
    for v, s in out["summary"].items():
        lines.append(
            f"- **Variant {v}**: {s['inside']} of {s['ratios']} inside (p90/p50"
            f" {s['p90_inside']} of {s['ratios'] // 2}, p99/p50 {s['p99_inside']} of"
            f" {s['ratios'] // 2}); sizes with both ratios inside at 512, 1,024 and both"
            f" 2,048-node runs: {len(s['sizes_all_inside'])} ({', '.join(s['sizes_all_inside'])})."
            f" Median interval width (upper / lower): p90/p50 {s['median_width_p90']:.2f}x,"
            f" p99/p50 {s['median_width_p99']:.2f}x."
        )
    lines += [
        "",
        "Per size (runs inside of 4, variant A | B):",
        "",
        "| algorithm, size | p90/p50 A | p99/p50 A | p90/p50 B | p99/p50 B |",
        "|---|---|---|---|---|",
    ]
    sa, sb = out["summary"]["A"]["per_size"], out["summary"]["B"]["per_size"]
    for k in sa:
        lines.append(f"| {k} | {sa[k]['p90']} | {sa[k]['p99']} | {sb[k]['p90']} | {sb[k]['p99']} |")
    lines += [
        "",
        "Population fitted (<= 128 nodes): body `ln sigma = "
        f"{b['intercept']:.2f} + {b['per_ln_nodes']:.3f} ln n` (se {b['se'][0]:.2f},"
        f" {b['se'][1]:.3f}), session spread {b['tau_session']:.3f}, run spread"
        f" {b['tau_run']:.3f}, tail Student-t with {b['dof']:.2f} degrees of freedom (median"
        f" ln(p99/p50) / ln(p90/p50) of the runs without delayed iterations"
        f" {b['tail_ratio_p99_p90']:.2f}) (p90/p50 of the median run:"
        f" {math.exp(1.2816 * math.exp(b['intercept'] + b['per_ln_nodes'] * math.log(2048))):.3f}"
        " at 2,048 nodes); burst-start rate per node and iteration: a share"
        f" {p['rate_per_node']['quiet_prob']:.2f} of quiet sessions (no bursts), otherwise"
        f" median {p['rate_per_node']['median']:.2e}, between-session spread (ln)"
        f" {p['rate_per_node']['tau_ln']:.2f} (se of ln median {p['rate_per_node']['se_mu']:.2f};"
        " rate population chosen by AIC: "
        + ", ".join(
            f"{m} {v['aic']:.1f}{' (chosen)' if v['chosen'] else ''}"
            for m, v in p["rate_per_node"]["models"].items()
        )
        + ");"
        " burst continuation Beta("
        f"{p['burst_continuation']['alpha']:.2f}, {p['burst_continuation']['beta']:.2f}) (mean"
        f" {p['burst_continuation']['mean']:.2f}); excess lognormal, median"
        f" {p['delay_s']['median'] * 1e6:.0f} us, shape {p['delay_s']['sigma_ln']:.2f}, above"
        f" {p['threshold_s'] * 1e6:.0f} us. Not identified: {p['not_identified'] or 'none'}.",
        "",
        "| variant | algorithm | bytes | nodes | iters | median (us) | scale (us) |"
        " p90/p50 meas | pred [90%] | in | p99/p50 meas | pred [90%] | in |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in out["rows"]:
        lines.append(
            f"| {r['variant']} | {r['algorithm']} | {r['bytes']} | {r['nodes']}"
            f" | {r['iterations']} | {r['median_us']:.1f} | {r['scale_us']:.1f}"
            f" | {r['measured_p90_p50']:.3f} | {_iv(r['pred_p90_p50'])}"
            f" | {'yes' if r['p90_inside'] else 'no'} | {r['measured_p99_p50']:.3f}"
            f" | {_iv(r['pred_p99_p50'])} | {'yes' if r['p99_inside'] else 'no'} |"
        )
    lines += [
        "",
        "## Diagnostic: what makes the interval wide (variant A)",
        "",
        "| algorithm | bytes | nodes | spread included | p90/p50 pred [90%] |"
        " p99/p50 pred [90%] | measured p90, p99 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in out["decomposition"]:
        m = r["measured"]
        lines.append(
            f"| {r['algorithm']} | {r['bytes']} | {r['nodes']} | {r['source']}"
            f" | {_iv(r['pred_p90_p50'])} | {_iv(r['pred_p99_p50'])} | {m[0]:.3f}, {m[1]:.3f} |"
        )
    lines += [
        "",
        "## Diagnostic: leave one <= 128-node session out (variant A)",
        "",
        "Fit on the other four sessions, predict every file of the held-out one; a calibrated"
        " 90% interval holds about 90% of them (files of one session share its state, so the"
        " counts are not independent).",
        "",
        "| held-out session | nodes | runs | p90/p50 inside | p99/p50 inside |",
        "|---|---|---|---|---|",
    ]
    for r in out["leave_one_session_out"]:
        lines.append(
            f"| {r['session']} | {r['nodes']} | {r['runs']} | {r['p90_inside']}"
            f" | {r['p99_inside']} |"
        )
    lines += [
        "",
        "## Diagnostic: sessions (fit sessions, and the held-out session's small messages)",
        "",
        f"Delayed: excess over the run's median above {p['threshold_s'] * 1e6:.0f} us; a"
        " burst start is a delayed iteration not preceded by one; continuation = delayed"
        " iterations followed by another / delayed iterations.",
        "",
        "| role | session | nodes | runs | node-iterations | delayed | follow | start rate"
        " per node | continuation | median excess (us) | body p90/p50 range |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in out["sessions"]:
        lines.append(
            f"| {r['role']} | {r['session']} | {r['nodes']} | {r['runs']}"
            f" | {r['node_iterations']:.3g} | {r['events']} | {r['pairs']}"
            f" | {r['start_rate_per_node']:.2e} | {r['continuation']:.2f}"
            f" | {r['median_excess_us']:.0f} | {r['body_p90_p50'][0]:.3f}-"
            f"{r['body_p90_p50'][1]:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the report (or JSON); ``--out`` also writes it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", help="write the markdown report here")
    ap.add_argument(
        "--threshold-us",
        type=float,
        default=DEFAULT_THRESHOLD_S * 1e6,
        help="excess over the median (us) that makes an iteration delayed (sensitivity check)",
    )
    args = ap.parse_args(argv)
    if not (math.isfinite(args.threshold_us) and args.threshold_us > 0):
        ap.error(f"--threshold-us must be a finite number > 0, got {args.threshold_us}")
    out = run(args.threshold_us * 1e-6)
    if args.json:
        print(json.dumps(out, indent=1, default=float))
        return 0
    text = report(out)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
