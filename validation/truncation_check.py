"""Whether extrapolating a long pipeline from a truncation moves the presets' answers.

A compact pipeline longer than its core's op cap is evaluated at two (or three) truncated
microbatch counts and extrapolated block by block (:mod:`prism_analytic.engines.pipeline_core`,
:func:`~prism_analytic.engines.skew_core.skew_pipeline`). On balanced interleaved pipelines with
normal ops of CV 5% that extrapolation is off against evaluating the same core whole (16 x 256,
vpp 2, Gaussian core: mean -1.46 sd, std +60%). The presets are long balanced interleaved
pipelines evaluated from truncations; this script measures, at each preset's GPU counts with the
most microbatches per replica:

* the pipeline body's mean and std from the engine's truncated path (what ``predict`` uses),
* the same core evaluated whole (the truncation forced off: :func:`pipeline_core.first_size`
  answers None, so no truncation, steady-state trial or extrapolation happens),
* Monte Carlo of the body alone (``predict(body, "montecarlo")``; mean and std with a 95%
  interval: the normal interval for the mean, a bootstrap one for the std),
* the step's p50 / p99 with the truncated core and with the whole core, beside the step's
  numerical bracket (the grid rounding of the approximation).

Run (about 10 minutes of CPU at the defaults)::

    nice python validation/truncation_check.py --out validation/results/truncation_check.md
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from prism_analytic import normal
from prism_analytic.engines import pipeline_core as pc
from prism_analytic.engines.predict import predict
from prism_analytic.engines.skew_core import clear_cache as clear_shape_cache
from prism_analytic.graph.pipeline_spec import law_key
from prism_analytic.graph.step_graph import StepGraph
from prism_analytic.workload.builder import build_step_graph
from prism_analytic.workload.presets import preset_job

#: (preset, GPUs): each preset's GPU counts with the most microbatches per replica.
CASES = (
    ("llama3-405b", 1024),
    ("llama3-405b", 2048),
    ("gpt3-175b", 64),
    ("gpt3-175b", 256),
    ("llama3-70b", 32),
    ("llama3-70b", 128),
    ("llama3-405b", 512),
    ("llama3-405b", 128),
)
LEVELS = (0.5, 0.99)


def _pipeline_node(graph: StepGraph) -> tuple[StepGraph, str]:
    """The (sub-graph, node) of the step's one compact pipeline (searched depth first)."""
    stack = [graph]
    while stack:
        g = stack.pop()
        for v, d in g.graph.nodes(data=True):
            if d["type"] == "pipeline":
                return g, v
            if "body" in d:
                stack.append(d["body"])
    raise ValueError("no compact pipeline in the step graph")


def _analytic(graph: StepGraph) -> tuple[dict, object, float]:
    """The auto-shape prediction's pipeline core record, the result and its CPU seconds."""
    pc.clear_caches()
    clear_shape_cache()
    c0 = time.process_time()
    res = predict(graph, core_shape="auto")
    cpu = time.process_time() - c0
    cores = [c for c in res.diagnostics["cores"] if "evaluated_microbatches" in c]
    return cores[0], res, cpu


def _whole(graph: StepGraph) -> tuple[dict, object, float]:
    """:func:`_analytic` with every pipeline evaluated whole (no truncation anywhere)."""
    keep = pc.first_size
    pc.first_size = lambda spec, cap=pc.OPS_CAP: None
    try:
        return _analytic(graph)
    finally:
        pc.first_size = keep


def _body_mc(graph: StepGraph, samples: int, seed: int) -> dict[str, float]:
    """Monte Carlo of the pipeline node alone: mean and std with 95% intervals."""
    g, v = _pipeline_node(graph)
    d = g.graph.nodes[v]
    body = StepGraph(v)
    body.add_pipeline(v, d["spec"], kind=d["kind"], tags=d["tags"])
    return _mc_moments(body, samples, seed)


def _mc_moments(body: StepGraph, samples: int, seed: int) -> dict[str, float]:
    """Monte Carlo mean and std of ``body`` with 95% intervals (normal; bootstrap for std)."""
    c0 = time.process_time()
    res = predict(body, "montecarlo", samples=samples, seed=seed)
    x = np.asarray(res.distribution.samples, dtype=float)
    rng = np.random.default_rng(seed + 1)
    boot = [np.std(rng.choice(x, x.size), ddof=1) for _ in range(400)]
    return {
        "mean": float(x.mean()),
        "mean_half": 1.96 * float(x.std(ddof=1)) / np.sqrt(x.size),
        "std": float(x.std(ddof=1)),
        "std_lo": float(np.quantile(boot, 0.025)),
        "std_hi": float(np.quantile(boot, 0.975)),
        "cpu_s": time.process_time() - c0,
        "n": int(x.size),
    }


def check(preset: str, gpus: int, samples: int, seed: int) -> dict:
    """One row: truncated vs whole core vs Monte Carlo of the body, and the step quantiles."""
    job = preset_job(preset, gpus)
    graph = build_step_graph(job)
    core_t, res_t, cpu_t = _analytic(graph)
    core_w, res_w, cpu_w = _whole(graph)
    mc = _body_mc(graph, samples, seed)
    row = {
        "preset": preset,
        "gpus": gpus,
        "pp": job.parallelism.pp,
        "vpp": job.parallelism.vpp,
        "microbatches": job.parallelism.microbatches,
        "shape": core_t["shape"],
        "sizes": core_t["evaluated_microbatches"],
        "trunc": (core_t["mean_s"], core_t["std_s"], cpu_t),
        "whole": (core_w["mean_s"], core_w["std_s"], cpu_w),
        "whole_sizes": core_w["evaluated_microbatches"],
        "mc": mc,
    }
    for q in LEVELS:
        lo, hi = res_t.quantile_bracket(q)
        row[f"p{q}"] = (float(res_t.quantile(q)), float(res_w.quantile(q)), float(lo), float(hi))
    return row


def stage_deficits(spec: Any, m: int) -> np.ndarray:
    """Per stage, how much shorter (s) the longest mean path through its middle block's ops is.

    The deterministic schedule at ``m`` microbatches (every op at its mean latency): the
    longest path through an op is the longest path to it plus the longest from it, less its
    own latency; the deficit of stage ``s`` is the makespan minus the longest such path through
    any of its ops on microbatches in the middle block. The critical stage reads 0; a stage
    with a small deficit carries near-critical paths (405b's layout: stages 1-14 tie at the
    busiest rate, stage 14 is critical, stage 13 is 26.2 ms short, stage 15 36.9 ms). Steady
    from 64 microbatches on that layout (equal at 64, 96, 128, 256).
    """
    sp = spec.with_microbatches(m)
    st = pc._structure(sp.stages, m, sp.schedule, sp.vpp)
    w = [sp.moments[k][0] for k in st["keys"]]
    pred2 = st["pred2"].tolist()
    n = len(w)
    to = [0.0] * (n + 1)  # index -1: a missing predecessor
    for i, (a, b) in enumerate(pred2):
        to[i] = w[i] + max(to[a], to[b])
    after = [0.0] * n  # longest path from any successor of i
    frm = [0.0] * n
    for i in reversed(range(n)):  # ops are numbered in a topological order
        frm[i] = w[i] + after[i]
        for q in pred2[i]:
            if q >= 0 and frm[i] > after[q]:
                after[q] = frm[i]
    through = np.array(to[:n]) + np.array(frm) - np.array(w)
    length = float(max(to[:n]))
    mb = np.array([o[2] for o in st["order"]])
    stage = np.array([o[1] for o in st["order"]])
    mid = (mb >= m // 2 - sp.period // 2) & (mb < m // 2 + sp.period // 2)
    return np.array([length - through[mid & (stage == s)].max() for s in range(sp.stages)])


def bend_forecast(spec: Any, m: int, deficits: np.ndarray) -> float:
    """Forecast (s) of how far the makespan's mean rises above its linear extrapolation.

    A hypothesis, not fitted: each stage's work over the run is a random walk (variance per
    block: the sum of its ops' variances); a path that runs on a stage of deficit ``d`` and
    crosses to the critical one at the best moment beats the critical path by ``sup_t D_t -
    d``, ``D`` the difference of the two walks (a Brownian motion of variance ``theta^2`` over
    the run), whose expected positive part is ``2 (theta phi(d / theta) - d Phi(-d / theta))``
    (reflection principle); the forecast sums that over the non-critical stages. It ignores
    correlations between paths and the truncated sizes' own (small) excess, so it is a rough
    upper reading: compared with the whole evaluation in validation/results/truncation_check.md.
    """
    mom = spec.moments
    block_var = np.array(
        [
            spec.period
            * sum(mom[law_key(ph, s, c)][1] ** 2 for ph in ("F", "B") for c in range(spec.vpp))
            for s in range(spec.stages)
        ]
    )
    crit = int(np.argmin(deficits))
    total = 0.0
    for s in range(spec.stages):
        if s == crit:
            continue
        theta = float(np.sqrt((block_var[s] + block_var[crit]) * m / spec.period))
        d = float(deficits[s])
        if theta > 0:
            total += 2 * (theta * stats.norm.pdf(d / theta) - d * stats.norm.sf(d / theta))
    return total


def increments(
    preset: str,
    gpus: int,
    sizes: Sequence[int],
    sd_scale: float | None = None,
    samples: int = 0,
    seed: int = 20261201,
) -> list[str]:
    """The Gaussian core's makespan truncated vs whole as the preset's pipeline lengthens.

    The preset's pipeline spec at each microbatch count of ``sizes``: the difference of the
    truncated path from the whole evaluation, and the whole evaluation's mean and variance
    increments per block since the previous size (a linear extrapolation assumes them constant).
    ``sd_scale``: every op law replaced by a normal law of the same mean and ``sd_scale`` times
    its std (how the bend moves with the ops' noise). ``samples``: Monte Carlo of the body at
    the largest size too.
    """
    sg, v = _pipeline_node(build_step_graph(preset_job(preset, gpus)))
    d = sg.graph.nodes[v]
    spec = d["spec"]
    tag = ""
    if sd_scale is not None:
        laws = {k: normal(mu, sd_scale * sd) for k, (mu, sd) in spec.moments.items()}
        spec = dataclasses.replace(spec, laws=laws)
        tag = f", ops normal with {sd_scale:g} x the preset's std"
    out = [
        f"{preset}@{gpus} pipeline spec (pp {spec.stages}, vpp {spec.vpp}, period {spec.period}"
        f"{tag}):",
        "",
        "| microbatches | trunc - whole mean (ms; sd) | std trunc / whole (ms) | "
        "whole: mean / variance increment per block since the previous row | "
        "bend forecast (ms) |",
        "|---|---|---|---|---|",
    ]
    deficits = stage_deficits(spec, max(4 * spec.period, 64))
    prev = None
    for m in sizes:
        s = spec.with_microbatches(m)
        mu_t, sd_t, _ = pc.pipeline_makespan(s)
        mu_w, sd_w, _ = pc.pipeline_makespan(s, cap=10**12)
        inc = "-"
        if prev is not None:
            blocks = (m - prev[2]) / spec.period
            inc = f"{(mu_w - prev[0]) / blocks:.6f} s / {(sd_w**2 - prev[1] ** 2) / blocks:.3e} s^2"
        out.append(
            f"| {m} | {1e3 * (mu_t - mu_w):+.4f}; {(mu_t - mu_w) / sd_w:+.4f} | "
            f"{1e3 * sd_t:.4f} / {1e3 * sd_w:.4f} ({sd_t / sd_w - 1:+.2%}) | {inc} | "
            f"{1e3 * bend_forecast(spec, m, deficits):.3f} |"
        )
        prev = (mu_w, sd_w, m)
    if samples:
        m = max(sizes)
        body = StepGraph(v)
        body.add_pipeline(v, spec.with_microbatches(m), kind=d["kind"], tags=d["tags"])
        mc = _mc_moments(body, samples, seed)
        out += [
            "",
            f"Monte Carlo at {m} microbatches ({samples:,} samples, seed {seed}): mean "
            f"{prev[0] - mc['mean']:+.6f} s from the whole core's (95% half-width "
            f"{mc['mean_half']:.6f} s), std {1e3 * mc['std']:.3f} [{1e3 * mc['std_lo']:.3f}, "
            f"{1e3 * mc['std_hi']:.3f}] ms; truncated - MC mean {mu_t - mc['mean']:+.6f} s.",
        ]
    return out


def _tied_spec(schedule, p, m, vpp, slow, factor, family=normal, cv=0.05) -> Any:
    """``p x m`` (F 1, B 2 per microbatch, split over vpp chunks), one stage ``factor`` x."""
    from prism_analytic.graph.pipeline import PipelineSpec

    laws = {}
    for ph, base in (("F", 1.0), ("B", 2.0)):
        for s in range(p):
            for c in range(vpp):
                mean = base / vpp * (factor if s == slow else 1.0)
                laws[law_key(ph, s, c)] = family(mean, cv * mean)
    return PipelineSpec(p, m, laws, schedule, vpp)


def _old_next_pair(spec: Any, sizes: tuple, moments: Sequence, evaluate: Any) -> Any:
    """The rule before next_pair: only a mean increment short of the rate moves the sizes."""
    (mu1, _), (mu2, var2) = moments
    return pc.next_sizes(spec, sizes) if pc.short_of_rate(spec, sizes, mu2 - mu1, var2) else sizes


def tied(large: bool = False) -> list[str]:
    """Truncated vs whole on pipelines whose stages tie (or nearly) at the busiest rate.

    Each case by the current rule (:func:`pipeline_core.next_pair`), by the rule before it
    (a mean increment short of the rate only), and whole; CPU seconds of each.
    """
    from prism_analytic import lognormal
    from prism_analytic.engines import skew_core
    from prism_analytic.engines.cumulant_core import cumulant_pipeline
    from prism_analytic.engines.kurtosis_core import kurtosis_pipeline

    def gauss(spec, cap):
        mu, sd, info = pc.pipeline_makespan(spec, cap=cap)
        return mu, sd, info["evaluated_microbatches"]

    def shaped(fn):
        def run(spec, cap):
            res, info = fn(spec, cap=cap)
            return res.mean, res.std, info["evaluated_microbatches"]

        return run

    cores = {
        "Gaussian": gauss,
        "skew": shaped(skew_core.skew_pipeline),
        "kurtosis": shaped(kurtosis_pipeline),
        "cumulant": shaped(cumulant_pipeline),
    }
    cases = [
        ("GPipe 8x256, stage 0 x0.8", _tied_spec("gpipe", 8, 256, 1, 0, 0.8), 2048),
        ("GPipe 8x256, stage 3 x0.9", _tied_spec("gpipe", 8, 256, 1, 3, 0.9), 2048),
        (
            "interleaved 8x128 vpp 2, stage 3 x0.8",
            _tied_spec("interleaved", 8, 128, 2, 3, 0.8),
            2048,
        ),
        (
            "interleaved 8x128 vpp 2, stage 7 x0.9",
            _tied_spec("interleaved", 8, 128, 2, 7, 0.9),
            2048,
        ),
        ("1F1B 8x256, stage 3 x0.8", _tied_spec("1f1b", 8, 256, 1, 3, 0.8), 2048),
        (
            "GPipe 8x256, stage 3 x1.05 (one bottleneck)",
            _tied_spec("gpipe", 8, 256, 1, 3, 1.05),
            2048,
        ),
    ]
    if large:
        spec = _tied_spec("interleaved", 32, 256, 2, 16, 1.05, lognormal, 0.2)
        cases.append(("interleaved 32x256 vpp 2, lognormal 20%, stage 16 x1.05", spec, None))
    out = [
        "| case | core | before: sizes, mean (sd), std | now: sizes, mean (sd), std | "
        "CPU s before / now / whole |",
        "|---|---|---|---|---|",
    ]
    for name, spec, cap in cases:
        for core, run in cores.items():
            if core == "Gaussian" and cap is None:
                continue
            c = skew_core.SKEW_OPS_CAP if cap is None else cap  # None: the default cap
            row = {}
            for rule in ("now", "before", "whole"):
                keep_rule, keep_cap = pc.next_pair, skew_core.STEADY_CAP
                if rule == "before":
                    pc.next_pair = _old_next_pair
                if rule == "whole":
                    skew_core.STEADY_CAP = 10**9
                try:
                    pc.clear_caches()
                    skew_core.clear_cache()
                    t0 = time.process_time()
                    row[rule] = (
                        *run(spec, 10**12 if rule == "whole" else c),
                        time.process_time() - t0,
                    )
                finally:
                    pc.next_pair, skew_core.STEADY_CAP = keep_rule, keep_cap
            wm, ws = row["whole"][:2]
            cells = [
                f"{r[2]}, {(r[0] - wm) / ws:+.3f}, {r[1] / ws - 1:+.2%}"
                for r in (row["before"], row["now"])
            ]
            out.append(
                f"| {name} | {core} | {cells[0]} | {cells[1]} | "
                f"{row['before'][3]:.2f} / {row['now'][3]:.2f} / {row['whole'][3]:.2f} |"
            )
            print(out[-1], flush=True)
    return out


def _lines(rows: list[dict]) -> list[str]:
    out = [
        "| preset | GPUs | pp x m (vpp) | core | sizes | body mean: trunc - whole (ms; sd) | "
        "body std: trunc / whole / MC [95%] (ms) | whole - MC mean (ms) [MC 95% half] | "
        "step p50: trunc - whole (ms) [bracket width] | step p99: trunc - whole (ms) "
        "[bracket width] | CPU s trunc / whole / MC |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        (mt, st, ct), (mw, sw, cw), mc = r["trunc"], r["whole"], r["mc"]
        p50, p99 = r["p0.5"], r["p0.99"]
        out.append(
            f"| {r['preset']} | {r['gpus']:,} | {r['pp']} x {r['microbatches']} ({r['vpp']}) | "
            f"{r['shape']} | {r['sizes']} | {1e3 * (mt - mw):+.4f}; {(mt - mw) / sw:+.4f} | "
            f"{1e3 * st:.4f} / {1e3 * sw:.4f} / {1e3 * mc['std']:.3f} "
            f"[{1e3 * mc['std_lo']:.3f}, {1e3 * mc['std_hi']:.3f}] | "
            f"{1e3 * (mw - mc['mean']):+.3f} [{1e3 * mc['mean_half']:.3f}] | "
            f"{1e3 * (p50[0] - p50[1]):+.3f} [{1e3 * (p50[3] - p50[2]):.1f}] | "
            f"{1e3 * (p99[0] - p99[1]):+.3f} [{1e3 * (p99[3] - p99[2]):.1f}] | "
            f"{ct:.2f} / {cw:.2f} / {mc['cpu_s']:.1f} |"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Measure the cases (``--case preset@gpus`` to pick) and print / write the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", help="preset@gpus (repeatable; default: CASES)")
    ap.add_argument("--samples", type=int, default=4000, help="Monte Carlo samples of the body")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--out", type=Path, help="append the table to this markdown file")
    ap.add_argument(
        "--increments",
        metavar="PRESET@GPUS",
        help="instead: the Gaussian core truncated vs whole as that preset's pipeline lengthens",
    )
    ap.add_argument("--sizes", default="128,256,512,768,1024,1536,2048", help="--increments' m")
    ap.add_argument("--sd-scale", type=float, help="--increments: ops normal, this x their std")
    ap.add_argument("--mc", action="store_true", help="--increments: Monte Carlo at the last m")
    ap.add_argument("--tied", action="store_true", help="instead: tied-stage cases (next_pair)")
    ap.add_argument("--large", action="store_true", help="--tied: also interleaved 32 x 256")
    args = ap.parse_args(argv)
    if args.tied:
        text = "\n".join(tied(args.large))
        if args.out:
            with args.out.open("a") as fh:
                fh.write(text + "\n")
        return 0
    if args.increments:
        preset, gpus = args.increments.split("@")
        sizes = tuple(int(x) for x in args.sizes.split(","))
        n = args.samples if args.mc else 0
        text = "\n".join(increments(preset, int(gpus), sizes, args.sd_scale, n, args.seed))
        print(text)
        if args.out:
            with args.out.open("a") as fh:
                fh.write(text + "\n")
        return 0
    cases = CASES
    if args.case:
        cases = tuple((c.split("@")[0], int(c.split("@")[1])) for c in args.case)
    rows = []
    for preset, gpus in cases:
        rows.append(check(preset, gpus, args.samples, args.seed))
        print(_lines(rows[-1:])[-1], flush=True)
    table = "\n".join(_lines(rows))
    print(table)
    if args.out:
        with args.out.open("a") as fh:
            fh.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
