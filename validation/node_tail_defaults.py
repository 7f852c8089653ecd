"""Per-node collective tail defaults from the collective data: derivation and verdict.

Can the ``node_tail_*`` defaults (``node_tail_prob``: per node and collective *instance*,
the probability of a hit; ``node_tail_factor``: the hit instance's time multiplier) be derived
from the fit of ``calibration.collective_population`` to ``shared/data/collective_latency``?
Only if that fit measures the quantity the defaults mean.
This script prints the derivation and its verdict; it sets nothing.

Steps (fit data: exactly ``validation/calibration_collective_noise.py``'s, every <= 128-node,
one-process-per-node, host-buffer file with >= 1,000 iterations and a median below 150 us;
nothing above 128 nodes):

1. **Per iteration or per second?** One benchmark iteration is one MPI collective of 4-150 us;
   a step-level data-parallel collective in training lasts 10 ms to 1 s. A delayed iteration
   (excess over the run's median above 30 us) starts a burst; if bursts came per *iteration*,
   their rate per node-iteration would not depend on the iteration's length; if they come per
   *second* (a node preempted by the OS or a daemon), it grows in proportion. A quasi-Poisson
   GLM (statsmodels) of each run's burst starts on ln(median latency), with one intercept per
   session and offset ln(iterations x nodes), estimates that exponent with a 95% interval
   (sessions without any burst carry no information on it and are left out).
2. **Rate and size**, in the units the exponent supports: delayed iterations per node-second
   of collective time (pooled over all five sessions, exact Poisson 95% interval; per session
   beside it, since sessions differ by more than their Poisson spread), and the excess of a
   delayed iteration (mean and mean square, bootstrap 95% intervals over delayed iterations).
3. **Transfer** to the step-level data-parallel collectives of reference jobs: expected
   events per instance over the group's nodes, the time multiplier one event makes, and an
   upper bound on the step-level effect if every event's delay added to the collective
   (``n r T E[D]`` mean, ``sqrt(n r T E[D^2])`` sd; overlapped delays, as in a tree, add less).

Run: ``nice python validation/node_tail_defaults.py [--out FILE.md] [--json]`` (about 20 s;
most of it reading the archives).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import statsmodels.api as sm
import statsmodels.formula.api as smf
from scipy import stats

from prism_analytic.calibration.collective_population import DEFAULT_THRESHOLD_S, summarize_run
from prism_analytic.workload.jobs import build_job
from prism_analytic.workload.mean_model import op_means
from prism_analytic.workload.scale_variability import nodes_spanned
from prism_analytic.workload.step_estimate import step_time

sys.path.insert(0, str(Path(__file__).parent))
from calibration_collective_noise import fit_data  # noqa: E402 (the same fit files)

__all__ = ["runs_table", "duration_exponent", "rates", "transfer", "derive", "main"]

CONFIGS = Path(__file__).parent / "configs"
#: (label, preset, gpus, config): the jobs whose data-parallel collectives are read.
JOBS = (
    ("Llama 3 405B, 8,192 H100", "llama3-405b", 8192, None),
    ("Llama 3 405B, 16,384 H100", "llama3-405b", 16384, None),
    ("Llama 3 405B, 65,536 H100", "llama3-405b", 65536, None),
    ("llama3-8b FSDP, 1,024 H100", "llama3-8b", 1024, None),
    ("MLPerf GB200, 512", None, None, CONFIGS / "mlperf_gb200_512.toml"),
    ("MLPerf GB200, 2,496", None, None, CONFIGS / "mlperf_gb200_2496.toml"),
)
BOOT = 2000
SEED = 20261130


def runs_table(threshold_s: float = DEFAULT_THRESHOLD_S) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per fit run (session, nodes, iterations, median, delayed, burst starts).

    Also returns every delayed iteration's excess over its run's median (seconds).
    """
    rows, excess = [], []
    for session, nodes, algo, count, x in fit_data():
        r = summarize_run(x, nodes, session, threshold_s=threshold_s)
        rows.append(
            {
                "session": session,
                "nodes": nodes,
                "algorithm": algo,
                "count": count,
                "iterations": r.iterations,
                "median_s": r.median_s,
                "delayed": r.events,
                "starts": r.events - r.pairs,
            }
        )
        excess.append(r.excess_s)
    return pd.DataFrame(rows), np.concatenate(excess)


def duration_exponent(df: pd.DataFrame) -> dict[str, float]:
    """Exponent of the per-node-iteration burst-start rate in the iteration's length.

    0: bursts come per iteration; 1: per second. Quasi-Poisson GLM with session intercepts.
    """
    noisy = df[df.groupby("session")["starts"].transform("sum") > 0].copy()
    noisy["ln_median"] = np.log(noisy["median_s"])
    offset = np.log(noisy["iterations"] * noisy["nodes"])
    fit = smf.glm(
        "starts ~ C(session) + ln_median",
        data=noisy,
        family=sm.families.Poisson(),
        offset=offset,
    ).fit(scale="X2")
    lo, hi = fit.conf_int().loc["ln_median"]
    return {
        "exponent": float(fit.params["ln_median"]),
        "ci95": (float(lo), float(hi)),
        "dispersion": float(fit.scale),
        "sessions": int(noisy["session"].nunique()),
        "runs": len(noisy),
    }


def _poisson_ci(k: int, exposure: float) -> tuple[float, float]:
    """Exact 95% interval of a Poisson rate from k events in ``exposure``."""
    lo = stats.chi2.ppf(0.025, 2 * k) / 2 if k > 0 else 0.0
    hi = stats.chi2.ppf(0.975, 2 * k + 2) / 2
    return lo / exposure, hi / exposure


def rates(df: pd.DataFrame, excess: np.ndarray) -> dict[str, Any]:
    """Delayed iterations per node-second, excess moments, per session and pooled."""
    d = df.assign(node_s=df["nodes"] * df["iterations"] * df["median_s"])
    per = d.groupby("session").agg(
        nodes=("nodes", "first"),
        runs=("iterations", "size"),
        node_s=("node_s", "sum"),
        delayed=("delayed", "sum"),
        starts=("starts", "sum"),
    )
    per["delayed_per_node_s"] = per["delayed"] / per["node_s"]
    k, expo = int(per["delayed"].sum()), float(per["node_s"].sum())
    rng = np.random.default_rng(SEED)
    idx = rng.integers(0, excess.size, size=(BOOT, excess.size))
    m1, m2 = excess[idx].mean(axis=1), (excess[idx] ** 2).mean(axis=1)
    noisy = per[per["delayed"] > 0]
    return {
        "per_session": per.reset_index().to_dict("records"),
        "noisy_nodes": ", ".join(str(n) for n in sorted(noisy["nodes"])),
        "noisy_fold": float(noisy["nodes"].max() / noisy["nodes"].min()),
        "noisy_range": (
            float(noisy["delayed_per_node_s"].min()),
            float(noisy["delayed_per_node_s"].max()),
        ),
        "delayed_per_node_s": k / expo,
        "delayed_per_node_s_ci95": _poisson_ci(k, expo),
        "delayed_per_node_s_range": (
            float(per["delayed_per_node_s"].min()),
            float(per["delayed_per_node_s"].max()),
        ),
        "excess_mean_s": float(excess.mean()),
        "excess_mean_s_ci95": tuple(float(v) for v in np.quantile(m1, [0.025, 0.975])),
        "excess_ms_s2": float((excess**2).mean()),
        "excess_ms_s2_ci95": tuple(float(v) for v in np.quantile(m2, [0.025, 0.975])),
        "delayed_iterations": k,
        "node_seconds": expo,
    }


def transfer(rate: dict[str, Any]) -> list[dict[str, Any]]:
    """What the measured per-second events mean for each reference job's DP collectives."""
    r, d1, d2 = rate["delayed_per_node_s"], rate["excess_mean_s"], rate["excess_ms_s2"]
    out = []
    for label, preset, gpus, config in JOBS:
        job = build_job(preset, gpus, config)
        om = op_means(job)
        n = nodes_spanned(job)
        step = step_time(job).step_s
        ops = [(o, 1) for o in om.dp_step] + [(o, om.microbatches) for o in om.dp_microbatch]
        ops = [(o, k) for o, k in ops if o.tier == "inter_node" and o.seconds > 0]
        total = sum(k * o.count * o.seconds for o, k in ops)  # DP collective seconds per step
        inst = [o.seconds for o, _ in ops]
        out.append(
            {
                "job": label,
                "gpus": job.gpus,
                "gpus_per_node": job.hardware.gpus_per_node,
                "nodes_spanned": n,
                "step_s": step,
                "dp_instance_s": (min(inst), max(inst)) if inst else (0.0, 0.0),
                "dp_seconds_per_step": total,
                # per instance: events over the group, the multiplier one event makes
                "events_per_instance": (n * r * min(inst), n * r * max(inst)) if inst else (0, 0),
                "one_event_factor": (1 + d1 / max(inst), 1 + d1 / min(inst)) if inst else (1, 1),
                # upper bound: every delay adds to the collective, none hidden
                "added_mean_pct_of_step": 100 * n * r * total * d1 / step,
                "added_sd_pct_of_step": 100 * math.sqrt(n * r * total * d2) / step,
            }
        )
    return out


def derive(threshold_s: float = DEFAULT_THRESHOLD_S) -> dict[str, Any]:
    """The whole derivation (see the module notes) as a plain dict."""
    df, excess = runs_table(threshold_s)
    expo = duration_exponent(df)
    rate = rates(df, excess)
    jobs = transfer(rate)
    per_second = expo["ci95"][0] > 0.0  # a per-iteration rate (exponent 0) is rejected
    verdict = (
        "not transferable as a constant (node_tail_prob, node_tail_factor): the events come "
        "per node-second of collective time (exponent excludes 0), and their delay is an "
        "absolute time, so per collective instance the hit probability grows with the "
        "instance's length T and the multiplier 1 + D/T shrinks with it; one pair cannot hold "
        "for instances of different lengths (see the events-per-instance and one-event-factor "
        "columns). Default left at 0 (off)."
        if per_second
        else "per-iteration rate not rejected: a constant per-instance probability is defensible"
    )
    return {
        "threshold_s": threshold_s,
        "runs": len(df),
        "sessions": int(df["session"].nunique()),
        "duration_exponent": expo,
        "rate": rate,
        "jobs": jobs,
        "verdict": verdict,
    }


def _ci(v: tuple[float, float], f: str, scale: float = 1.0) -> str:
    return f"[{v[0] * scale:{f}}, {v[1] * scale:{f}}]"


def report(out: dict[str, Any]) -> str:
    """Markdown report of :func:`derive`."""
    e, r = out["duration_exponent"], out["rate"]
    lines = [
        "# Per-node collective tail defaults from `collective_latency`",
        "",
        "`nice python validation/node_tail_defaults.py --out "
        "validation/results/node_tail_defaults.md`: the fit files of "
        "`validation/calibration_collective_noise.py` "
        f"({out['runs']} runs, {out['sessions']} sessions, <= 128 nodes; delayed = excess over "
        f"the run's median above {out['threshold_s'] * 1e6:.0f} us).",
        "",
        "## 1. Per iteration or per second",
        "",
        f"Burst starts per node-iteration ~ (iteration length)^b: **b = {e['exponent']:.2f}, "
        f"95% {_ci(e['ci95'], '.2f')}** (quasi-Poisson GLM, session intercepts, "
        f"{e['runs']} runs of the {e['sessions']} sessions with bursts, dispersion "
        f"{e['dispersion']:.2f}). b = 0 (a rate per iteration, what `node_tail_prob` means) is "
        "outside the interval; b = 1 (a rate per second of collective time) is inside.",
        "",
        "## 2. Rate and size",
        "",
        "| session | nodes | runs | node-seconds | delayed | burst starts | delayed per node-s |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in r["per_session"]:
        lines.append(
            f"| {s['session']} | {s['nodes']} | {s['runs']} | {s['node_s']:.2f} | "
            f"{s['delayed']} | {s['starts']} | {s['delayed_per_node_s']:.3g} |"
        )
    lines += [
        "",
        f"Pooled: **{r['delayed_per_node_s']:.3g} delayed iterations per node-second** "
        f"(exact Poisson 95% {_ci(r['delayed_per_node_s_ci95'], '.3g')}; sessions range "
        f"{_ci(r['delayed_per_node_s_range'], '.3g')}: the between-session spread dominates). "
        f"Excess of a delayed iteration: mean **{r['excess_mean_s'] * 1e6:.0f} us** "
        f"(bootstrap 95% {_ci(r['excess_mean_s_ci95'], '.0f', 1e6)}), root mean square "
        f"{math.sqrt(r['excess_ms_s2']) * 1e6:.0f} us "
        f"({_ci(tuple(math.sqrt(v) for v in r['excess_ms_s2_ci95']), '.0f', 1e6)}): an "
        "absolute delay, the same whatever the message.",
        "",
        f"Per node: the sessions with bursts ({r['noisy_nodes']} nodes) have "
        f"{_ci(r['noisy_range'], '.3g')} delayed iterations per node-second, within a factor "
        f"{r['noisy_range'][1] / r['noisy_range'][0]:.1f} over a {r['noisy_fold']:.0f}-fold "
        "range of nodes; a rate per collective (not per node) would fall in proportion to "
        "the nodes.",
        "",
        "## 3. Transfer to step-level data-parallel collectives",
        "",
        "n = nodes the data-parallel group spans (`scale_variability.nodes_spanned`; a node is "
        "`hardware.gpus_per_node` GPUs, one host: 8 H100 or 4 GB200, as one benchmark process "
        "per Leonardo host). T = one instance's mean time. Upper bound: "
        "every event's delay adds to the collective and nothing hides it.",
        "",
        "| job | n | step s | DP instance T s | events per instance (n r T) | one event's "
        "factor 1 + E[D]/T | added mean, % of step | added sd, % of step |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for j in out["jobs"]:
        t, ev, fa = j["dp_instance_s"], j["events_per_instance"], j["one_event_factor"]
        if j["dp_seconds_per_step"] <= 0:
            lines.append(
                f"| {j['job']} | {j['nodes_spanned']} | {j['step_s']:.3g} | no inter-node DP "
                "collective (the group stays in the NVLink domain) | | | 0 | 0 |"
            )
            continue
        lines.append(
            f"| {j['job']} | {j['nodes_spanned']} | {j['step_s']:.3g} | {t[0]:.3g}-{t[1]:.3g} | "
            f"{ev[0]:.3g}-{ev[1]:.3g} | {fa[0]:.5f}-{fa[1]:.5f} | "
            f"{j['added_mean_pct_of_step']:.3f} | {j['added_sd_pct_of_step']:.3f} |"
        )
    lines += ["", f"**Verdict:** {out['verdict']}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print (and with ``--out`` write) the derivation."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    ap.add_argument("--out", type=Path, help="also write the markdown report here")
    args = ap.parse_args(argv)
    out = derive()
    text = report(out)
    print(json.dumps(out, indent=2, default=str) if args.json else text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
