"""Workload agreement: the analytic engine against Monte Carlo on preset jobs at scale.

For each model preset and GPU count the script builds the step DAG of
:func:`~prism_analytic.workload.builder.build_step_graph` (default ``spatial="slowest-gpu"``),
evaluates it with the analytic engine (under :func:`~prism_analytic.workload.builder.grid_policy`,
as ``prism predict`` does) and compares it with seeded Monte Carlo samples of the *same* graph:

* ``KS``: sup |F_analytic - F_mc| over the Monte Carlo sample points (``scipy.stats.kstest``);
* ``p50 err``, ``p99 err``: analytic / Monte Carlo quantile - 1;
* ``an s``, ``mc s``: compute times of the two engines;
* ``mc p99 ci``: half-width of Monte Carlo's 95% order-statistic interval of its p99,
  relative; ``F_an(mc p99)``: the analytic CDF at Monte Carlo's p99 (0.99 when they agree);
* ``dkw``: Monte Carlo's own 95% DKW half-width of its CDF (the KS floor it can resolve);
  ``pool ks``: the KS error a pooled replica group adds (0 when every copy is sampled).

Two Monte Carlo modes (column ``mc``):

* ``default``: the library's :class:`~prism_analytic.engines.montecarlo.MonteCarloSettings`
  (``explicit_limit = 1024``, ``pool_size = 1e6``): groups of more than 1,024 replicas are
  sampled from a sorted pool of 1e6 copies (order statistic at ``U^(1/n)``);
* ``explicit``: ``explicit_limit >= dp``: every one of the ``dp`` pipeline replicas is sampled
  copy by copy: its own draw of every pipeline op (one draw per F/B x stage x microbatch x
  chunk op, which stands for that op on all the replica's ``tp * cp`` GPUs) and its own
  persistent speed factor (one draw of the slowest of its ``tp * pp * cp`` GPUs' factors),
  then the max over the ``dp`` replicas, then the step-level ops. The two modes are the same
  computation when ``dp <= 1024`` (every row at 1,024 GPUs, and more), so ``explicit`` rows are
  only run where ``dp > 1024``; at 1,024 GPUs the ``default`` row *is* the explicit one.

What "explicit" does not cover (no Monte Carlo row does; ``--folding`` checks one op): the
builder's folding *inside* a replica. The ``tp * cp`` GPUs that run a kernel segment in lockstep
are an :func:`~prism_analytic.iid_max` of a lognormal folded into moments, the layers of a chunk
are summed by moments into one lognormal op (CLT), and the replica's speed is one factor for the
whole pipeline (the slowest of its GPUs, not per stage). Both engines see the same folded graph,
so this table validates the engine (replica maxima, pipeline DAG, regimes, hiccups), not those
modelling choices; ``prism_analytic.workload.breakdown`` states what they imply per rank.

Targets: KS <= 0.05 and |p99 err| <= 0.5%.

Measured tables and their reading: ``validation/results/workload_agreement.md``.

Usage::

    python validation/workload_agreement.py [--samples N] [--presets NAME ...] [--gpus N ...]
                                            [--seed S] [--no-explicit] [--json]
                                            [--folding | --folding-only] [--config FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from prism_analytic.cli.argtypes import positive_int, sample_count
from prism_analytic.cli.predict import build_job
from prism_analytic.engines.montecarlo import MonteCarloSettings
from prism_analytic.engines.predict import predict
from prism_analytic.graph.pipeline import op_name
from prism_analytic.workload.builder import build_step_graph, grid_policy, layout_dict
from prism_analytic.workload.comm_noise import CommNoise
from prism_analytic.workload.mean_model import op_means

__all__ = [
    "DEFAULT_PRESETS",
    "DEFAULT_GPUS",
    "TARGETS",
    "evaluate",
    "format_table",
    "folding_check",
    "format_folding",
    "main",
]

DEFAULT_PRESETS = ("llama3-8b", "llama3-70b", "llama3-405b")
DEFAULT_GPUS = (1024, 16384, 65536)
DEFAULT_SAMPLES = 10_000
DEFAULT_SEED = 12345
DEFAULT_EXPLICIT_LIMIT = MonteCarloSettings().explicit_limit
TARGETS = {"ks": 0.05, "p99": 5e-3}


def _rel(a: float, b: float) -> float:
    return float(a / b - 1.0) if b != 0 else math.inf


def _compare(analytic: Any, mc: Any, mode: str) -> dict[str, Any]:
    samples = mc.distribution.samples
    q50, q99 = (float(mc.quantile(q)) for q in (0.5, 0.99))
    ks = float(stats.kstest(samples, analytic.cdf).statistic)
    pool = max((p["ks_error"] for p in mc.diagnostics["pooled_groups"]), default=0.0)
    lo, hi = mc.quantile_bracket(0.99, confidence=0.95)
    row = {
        "mc": mode,
        "ks": ks,
        "p50_rel_err": _rel(float(analytic.quantile(0.5)), q50),
        "p99_rel_err": _rel(float(analytic.quantile(0.99)), q99),
        "mc_p50_s": q50,
        "mc_p99_s": q99,
        "mc_s": mc.compute_time_s,
        "mc_dkw_95": float(mc.diagnostics["dkw_95"]),
        "mc_pool_ks": pool,
        "p99_mc_ci": float(hi - lo) / 2 / q99,
        "an_cdf_at_mc_p99": float(analytic.cdf(q99)),
    }
    misses = []
    if ks > TARGETS["ks"]:
        misses.append("ks")
    if abs(row["p99_rel_err"]) > TARGETS["p99"]:
        # within noise when the miss is inside MC's own 95% interval of its p99
        noise = abs(row["p99_rel_err"]) <= TARGETS["p99"] + row["p99_mc_ci"]
        misses.append("p99" + (" ~noise" if noise else ""))
    row["verdict"] = "PASS" if not misses else "MISS (" + ", ".join(misses) + ")"
    return row


def evaluate(
    preset: str,
    gpus: int,
    samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    *,
    explicit: bool = True,
    progress: Any = None,
    config: str | None = None,
) -> list[dict[str, Any]]:
    """Rows (one per Monte Carlo mode) comparing analytic and Monte Carlo on one preset job.

    ``config``: a TOML overlay on the preset (as ``prism predict --config``), e.g. to switch
    on ``variability.scale``. Raises ``ValueError`` (a ``ConfigError``) when the preset cannot
    use ``gpus``.
    """
    job = build_job(preset, gpus, config)
    lay = layout_dict(job)
    graph = build_step_graph(job)
    dp = graph.node("replicas")["n"]
    start = time.perf_counter()
    policy = grid_policy(graph)
    analytic = predict(graph, "analytic", policy=policy)
    an_s = time.perf_counter() - start
    base = {
        "preset": preset,
        "gpus": gpus,
        "tp": lay["tp"],
        "pp": lay["pp"],
        "dp": dp,
        "microbatches": lay["microbatches"],
        "body_ops": len(graph.node("replicas")["body"]),
        "an_p50_s": float(analytic.quantile(0.5)),
        "an_p99_s": float(analytic.quantile(0.99)),
        "an_s": an_s,
        "rel_width": policy.rel_width,
        "samples": samples,
        "seed": seed,
    }
    modes = [("default", DEFAULT_EXPLICIT_LIMIT)]
    if explicit and dp > DEFAULT_EXPLICIT_LIMIT:
        modes.append(("explicit", dp))
    rows = []
    for mode, limit in modes:
        settings = MonteCarloSettings(explicit_limit=limit, seed=seed)
        mc = predict(graph, "montecarlo", samples=samples, mc_settings=settings)
        mode_name = "default=explicit" if mode == "default" and dp <= limit else mode
        row = {**base, **_compare(analytic, mc, mode_name)}
        rows.append(row)
        if progress:
            progress(
                f"{preset}@{gpus} {mode_name}: KS {row['ks']:.4f} p99 "
                f"{row['p99_rel_err']:+.3%} (analytic {an_s:.1f} s, MC {row['mc_s']:.1f} s)"
            )
    return rows


# ----- the builder's folding inside a replica, GPU by GPU and kernel by kernel -----------------
_SYNC = ("tp", "cp", "ep")


def _explicit_layers(
    job: Any, ops: Sequence[Any], layers: int, samples: int, rng: np.random.Generator
) -> np.ndarray:
    """Sample ``layers`` passes over ``ops``, GPU by GPU.

    Every compute kernel is drawn on each of the tp * cp GPUs, the slowest GPU is taken at every
    synchronising collective, and each collective is one shared draw.
    """
    p = job.parallelism
    width, cv = p.tp * p.cp, job.variability.temporal.kernel_cv
    noise = CommNoise.of(job)  # the builder's instance law (tier, variability.scale, overlap)
    total = np.zeros(samples)
    for _ in range(layers):
        seg = np.zeros((samples, width))
        for o in ops:
            if o.kind == "compute":
                if cv > 0:
                    s2 = math.log1p(cv * cv)
                    z = rng.standard_normal((o.count, samples, width))
                    seg += o.seconds * np.exp(-0.5 * s2 + math.sqrt(s2) * z).sum(axis=0)
                else:
                    seg += o.count * o.seconds
                continue
            if o.group in _SYNC:
                total += seg.max(axis=1)
                seg[:] = 0.0
            law = noise.instance(o)
            if law.mean() > 0:
                total += sum(law.sample(samples, rng) for _ in range(o.count))
        total += seg.max(axis=1)
    return total


def _body_law(body: Any, phase: str, stage: int) -> Any:
    """Latency law of the (phase, stage, chunk 0) ops of a replica body.

    The builder makes the body one compact pipeline node (its laws in a ``PipelineSpec``);
    an op-by-op body has the op itself.
    """
    if op_name(phase, stage, 0, 0) in body.nodes:
        return body.node(op_name(phase, stage, 0, 0))["latency"]
    (spec,) = (body.node(n)["spec"] for n in body.nodes if "spec" in body.node(n))
    return spec.law(phase, stage, 0)


def folding_check(
    preset: str,
    gpus: int = 1024,
    samples: int = 20_000,
    seed: int = DEFAULT_SEED,
    config: str | None = None,
) -> list[dict[str, Any]]:
    """Compare the builder's law of a middle pipeline op with sampling it GPU by GPU.

    The op is checked forward and backward, sampled kernel by kernel on ``tp * cp`` GPUs with
    every kernel its own lognormal draw.

    Only for pipelines whose ops are not the first or last chunk (pp * vpp > 2) and without
    per-microbatch data-parallel traffic (ZeRO-1 presets): the op is then exactly
    ``layers_per_chunk`` layers plus the exposed pipeline send. Communication is drawn per
    instance as the builder draws it (:class:`~prism_analytic.workload.comm_noise.CommNoise`:
    the tier, ``variability.scale``'s per-node event, noise before overlap); ``config`` as in
    :func:`evaluate`.
    """
    job = build_job(preset, gpus, config)
    om, p = op_means(job), job.parallelism
    if om.dp_microbatch or p.pp * (p.vpp if p.schedule == "interleaved" else 1) <= 2:
        raise ValueError(f"{preset}: folding check needs a ZeRO-1 pipeline with middle chunks")
    body = build_step_graph(job, means=om).node("replicas")["body"]
    rng = np.random.default_rng(seed)
    rows = []
    for phase, ops in (("F", om.layer_fwd), ("B", om.layer_bwd)):
        law = _body_law(body, phase, 1)
        t0 = time.perf_counter()
        x = _explicit_layers(job, ops, om.layers_per_chunk, samples, rng)
        if om.pp_send is not None:
            send = CommNoise.of(job).instance(om.pp_send)
            if send.mean() > 0:
                x = x + sum(send.sample(samples, rng) for _ in range(om.pp_send.count))
        q = np.quantile(x, [0.5, 0.99])
        rows.append(
            {
                "preset": preset,
                "gpus": gpus,
                "phase": phase,
                "width": p.tp * p.cp,
                "layers": om.layers_per_chunk,
                "samples": samples,
                "ks": float(stats.kstest(x, law.cdf).statistic),
                "mean_rel_err": _rel(law.mean(), float(x.mean())),
                "std_rel_err": _rel(law.std(), float(x.std(ddof=1))),
                "p50_rel_err": _rel(float(law.quantile(0.5)), float(q[0])),
                "p99_rel_err": _rel(float(law.quantile(0.99)), float(q[1])),
                "cv_explicit": float(x.std(ddof=1) / x.mean()),
                "seconds": time.perf_counter() - t0,
            }
        )
    return rows


def format_folding(rows: Sequence[dict[str, Any]]) -> str:
    """Table of :func:`folding_check` rows."""
    header = [
        "preset",
        "GPUs",
        "op",
        "tp*cp",
        "layers",
        "KS",
        "mean err",
        "std err",
        "p50 err",
        "p99 err",
        "cv (explicit)",
    ]
    body = [
        [
            r["preset"],
            f"{r['gpus']:,}",
            r["phase"],
            str(r["width"]),
            str(r["layers"]),
            f"{r['ks']:.4f}",
            f"{r['mean_rel_err']:+.3%}",
            f"{r['std_rel_err']:+.2%}",
            f"{r['p50_rel_err']:+.3%}",
            f"{r['p99_rel_err']:+.3%}",
            f"{r['cv_explicit']:.3%}",
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    out = [
        "  ".join(h.ljust(w) for h, w in zip(header, widths)),
        "  ".join("-" * w for w in widths),
    ]
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    return "\n".join(out)


_COLUMNS = [
    ("preset", "preset", "{}"),
    ("GPUs", "gpus", "{:,}"),
    ("dp", "dp", "{:,}"),
    ("mb", "microbatches", "{}"),
    ("body ops", "body_ops", "{:,}"),
    ("mc", "mc", "{}"),
    ("p50 s", "an_p50_s", "{:.4g}"),
    ("p99 s", "an_p99_s", "{:.4g}"),
    ("KS", "ks", "{:.4f}"),
    ("dkw", "mc_dkw_95", "{:.4f}"),
    ("pool ks", "mc_pool_ks", "{:.4f}"),
    ("p50 err", "p50_rel_err", "{:+.3%}"),
    ("p99 err", "p99_rel_err", "{:+.3%}"),
    ("mc p99 ci", "p99_mc_ci", "{:.2%}"),
    ("F_an(mc p99)", "an_cdf_at_mc_p99", "{:.4f}"),
    ("an s", "an_s", "{:.2f}"),
    ("mc s", "mc_s", "{:.1f}"),
    ("verdict", "verdict", "{}"),
]


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as an aligned text table."""
    header = [c[0] for c in _COLUMNS]
    body = [[fmt.format(r[key]) for _, key, fmt in _COLUMNS] for r in rows]
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)
    ]
    out = [
        "  ".join(h.ljust(w) for h, w in zip(header, widths)),
        "  ".join("-" * w for w in widths),
    ]
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    out.append(
        f"Targets: KS <= {TARGETS['ks']}, |p99 err| <= {TARGETS['p99']:.1%}. p50/p99 s: "
        "analytic. 'default=explicit': dp <= 1024, every replica sampled copy by copy.\n"
        "mc p99 ci: half-width of MC's 95% order-statistic interval of its p99 (relative);"
        " F_an(mc p99): the analytic CDF at MC's p99 (0.99 = perfect); '~noise': the p99"
        " miss is within target + mc p99 ci."
    )
    return "\n".join(out)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python validation/workload_agreement.py``: run the sweep and print the table."""
    parser = argparse.ArgumentParser(prog="workload_agreement", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--samples",
        type=sample_count,
        default=DEFAULT_SAMPLES,
        help=f"Monte Carlo samples per job (default {DEFAULT_SAMPLES:,})",
    )
    parser.add_argument("--presets", nargs="+", default=list(DEFAULT_PRESETS), metavar="NAME")
    parser.add_argument(
        "--gpus", nargs="+", type=positive_int, default=list(DEFAULT_GPUS), metavar="N"
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--no-explicit",
        action="store_true",
        help="skip the explicit_limit >= dp Monte Carlo where dp > 1024",
    )
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    parser.add_argument(
        "--folding",
        action="store_true",
        help="also check the builder's per-op folding GPU by GPU (tp > 1 presets, smallest --gpus)",
    )
    parser.add_argument("--folding-only", action="store_true", help="only the folding check")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="TOML overlay on every preset (as prism predict --config), e.g. [variability.scale]",
    )
    args = parser.parse_args(argv)
    folds: list[dict[str, Any]] = []
    if args.folding or args.folding_only:
        for preset in args.presets:
            try:
                folds += folding_check(
                    preset, min(args.gpus), max(args.samples, 20_000), args.seed, args.config
                )
            except ValueError as exc:
                print(f"folding {preset}: skipped: {exc}", file=sys.stderr, flush=True)
    if args.folding_only:
        print(json.dumps(folds, indent=2) if args.json else format_folding(folds))
        return 0 if folds else 2
    rows: list[dict[str, Any]] = []
    for preset in args.presets:
        for gpus in args.gpus:
            try:
                rows += evaluate(
                    preset,
                    gpus,
                    args.samples,
                    args.seed,
                    explicit=not args.no_explicit,
                    progress=lambda s: print(s, file=sys.stderr, flush=True),
                    config=args.config,
                )
            except ValueError as exc:
                print(f"{preset}@{gpus}: skipped: {exc}", file=sys.stderr, flush=True)
    if args.json:
        out: Any = {"rows": rows, "folding": folds} if folds else rows
        print(json.dumps(out, indent=2, default=_json_default))
    else:
        print(
            f"Analytic vs Monte Carlo on preset jobs ({args.samples:,} samples, seed {args.seed})\n"
        )
        print(format_table(rows))
        if folds:
            print(
                "\nThe builder's folded law of a middle pipeline op against GPU-by-GPU, "
                "kernel-by-kernel sampling\n"
            )
            print(format_folding(folds))
    return 0 if rows else 2


if __name__ == "__main__":
    sys.exit(main())
