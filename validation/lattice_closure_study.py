"""Deep tied pipeline lattices: where the Gaussian closure fails, and the kurtosis-aware core.

Two parts (results in ``validation/results/lattice_closure_study.md``):

* ``local``: on one schedule, Monte Carlo (``--local-samples`` draws, every node's finish kept)
  measures, at every max ``max(A, B)``, the skewness and excess kurtosis of ``D = A - B`` and
  the error of Clark's ``E[max]`` computed from the *exact* moments of ``A`` and ``B`` (the
  local closure error, in units of the node's sd), with and without the Gram-Charlier
  correction at the exact kurtosis (:func:`~prism_analytic.engines.kurtosis_core.
  gram_charlier_max`); and the Gaussian core's mean error node by node, by topological
  generation (how the local errors accumulate).
* ``grid``: the cases of ``validation/core_shape_choice.py`` (same builders, seed and Monte
  Carlo) plus the README body (interleaved 16 x 16 x vpp 8, m = p), judged for
  ``core_shape`` = ``normal``, ``skew`` and ``kurtosis``;
* ``readme-job``: the README main job's own pipeline body (llama3-405b at 65,536 GPUs) against
  Monte Carlo, for the three shapes.

Usage::

    nice python validation/lattice_closure_study.py local [--case NAME]
    nice python validation/lattice_closure_study.py grid [--deep] [--only SUBSTRING ...]
        [--json FILE] [--markdown FILE]
    nice python validation/lattice_closure_study.py readme-job [--samples N] [--seed S]
    nice python validation/lattice_closure_study.py render ROWS.json ...
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special, stats

import prism_analytic as pa
from prism_analytic.engines import pipeline_core as pc
from prism_analytic.engines.canonical import _Engine
from prism_analytic.engines.kurtosis_core import gram_charlier_max
from prism_analytic.graph.pipeline import PipelineSpec, law_key, pipeline_step_graph

SHAPES = ("normal", "skew", "kurtosis")


def _choice_module():
    """``validation/core_shape_choice.py`` (its grid, seed and Monte Carlo settings)."""
    path = Path(__file__).with_name("core_shape_choice.py")
    spec = importlib.util.spec_from_file_location("core_shape_choice", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["core_shape_choice"] = mod
    spec.loader.exec_module(mod)
    return mod


def local_spec(name: str) -> PipelineSpec:
    """Normal ops at CV 5%, F 1 / B 2 per stage divided by vpp: ``il8x8v4`` or ``1f1b8x32``."""
    p, m, sched, vpp = {"il8x8v4": (8, 8, "interleaved", 4), "1f1b8x32": (8, 32, "1f1b", 1)}[name]
    laws = {
        law_key(ph, s, c): pa.normal(mu / vpp, 0.05 * mu / vpp)
        for ph, mu in (("F", 1.0), ("B", 2.0))
        for s in range(p)
        for c in range(vpp)
    }
    return PipelineSpec(p, m, laws, sched, vpp)


def sample_nodes(name: str, samples: int, seed: int) -> tuple[np.ndarray, dict, tuple]:
    """Monte Carlo finish times of every node of schedule ``name``, its structure and loadings.

    Returns ``(fin, structure, (means, sds, loadings))`` (the factor model of
    ``pipeline_core``); ``fin`` has one row per node plus a last row of zeros standing for a
    missing predecessor.
    """
    spec = local_spec(name)
    st = pc._structure(spec.stages, spec.microbatches, spec.schedule, spec.vpp)
    m_arr, s_arr, lmat = pc._factor_model(spec, st)
    n, pred2 = len(st["preds"]), st["pred2"]
    rng = np.random.default_rng(seed)
    fin = np.zeros((n + 1, samples))  # row n: a missing predecessor
    for g in st["gens"]:
        noise = rng.standard_normal((len(g), samples))
        fin[g] = m_arr[g, None] + s_arr[g, None] * noise
        fin[g] += np.maximum(fin[pred2[g, 0]], fin[pred2[g, 1]])
    return fin, st, (m_arr, s_arr, lmat)


def local(name: str, samples: int, seed: int) -> dict:
    """The local closure measurement (module docstring) on schedule ``name``."""
    fin, st, (m_arr, s_arr, lmat) = sample_nodes(name, samples, seed)
    pred2 = st["pred2"]
    rows = []
    for i in np.flatnonzero(pred2[:, 1] >= 0):
        a, b = fin[pred2[i, 0]], fin[pred2[i, 1]]
        d = a - b
        dmu, th = float(d.mean()), float(d.std())
        if th == 0:
            continue
        z = (d - dmu) / th
        g1, g2 = float(np.mean(z**3)), float(np.mean(z**4) - 3)
        al = dmu / th
        t, thph = special.ndtr(al), th * stats.norm.pdf(al)
        clark = b.mean() + dmu * t + thph
        cab, vb = float(np.cov(a, b)[0, 1]), float(b.var())
        args = [np.array([v]) for v in (dmu, th, t, thph, cab, vb, g2)]
        c4, _ = gram_charlier_max(*args)
        c34, _ = gram_charlier_max(*args, g1=np.array([g1]))
        true, sd = float(np.maximum(a, b).mean()), float(fin[i].std())
        rows.append(
            (g1, g2, (clark - true) / sd, (clark + c4[0] - true) / sd, (clark + c34[0] - true) / sd)
        )
    r = np.array(rows)
    # the Gaussian core's mean error node by node, per generation (how local errors add up)
    eng = _Recorder(0, st["window"])
    eng.run(st["gens"], st["preds"], m_arr, s_arr, lmat)
    drift = []
    for g, (mu, _) in zip(st["gens"], eng.rec, strict=True):
        err = (mu - fin[g].mean(axis=1)) / np.maximum(fin[g].std(axis=1), 1e-300)
        drift.append(float(err.mean()))
    return {
        "case": name,
        "samples": samples,
        "maxima": len(r),
        "mean_skew_D": float(r[:, 0].mean()),
        "mean_excess_kurtosis_D": float(r[:, 1].mean()),
        "clark_local_err_sum": float(r[:, 2].sum()),
        "clark_local_err_mean": float(r[:, 2].mean()),
        "gram_charlier_kurtosis_local_err_sum": float(r[:, 3].sum()),
        "gram_charlier_skew_kurtosis_local_err_sum": float(r[:, 4].sum()),
        "drift_by_generation": drift,
    }


class _Recorder(_Engine):
    """The Gaussian engine, recording each generation's means after its ops are added."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.rec: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, slots, m, s, lm) -> None:
        super().add(slots, m, s, lm)
        self.rec.append((self.mu[slots].copy(), self.C[slots, slots].copy()))


def readme_body() -> pa.StepGraph:
    """The README main job's pipeline body shape: interleaved 16 x 16 x vpp 8, normal CV 5%."""

    def latency(phase: str, stage: int, mb: int, chunk: int) -> pa.Distribution:
        mean = (1.0 if phase == "F" else 2.0) / 8
        return pa.normal(mean, 0.05 * mean)

    return pipeline_step_graph(
        16, 16, latency, schedule="interleaved", vpp=8, name="interleaved 16x16 v8", compact=True
    )


def readme_job(samples: int, seed: int) -> list[str]:
    """The README main job's own body (llama3-405b at 65,536 GPUs), the three shapes vs MC."""
    from prism_analytic.engines.kurtosis_core import kurtosis_pipeline
    from prism_analytic.engines.pipeline_mc import sample_pipeline
    from prism_analytic.engines.skew_core import skew_pipeline
    from prism_analytic.graph import PIPELINE, REPLICA
    from prism_analytic.workload.builder import build_step_graph
    from prism_analytic.workload.jobs import build_job

    def body(sg):
        for _, d in sg.graph.nodes(data=True):
            if d["type"] == PIPELINE:
                return d["spec"]
            if d["type"] == REPLICA and (found := body(d["body"])) is not None:
                return found
        return None

    spec = body(build_step_graph(build_job("llama3-405b", 65536)))
    x = sample_pipeline(spec, samples, np.random.default_rng(seed))
    mu, sd, _ = pc.pipeline_makespan(spec)
    laws = {"normal": (stats.norm(mu, sd), mu, sd)}
    for name, run in (("skew", skew_pipeline), ("kurtosis", kurtosis_pipeline)):
        r, _ = run(spec)
        laws[name] = (r.law(), r.mean, r.std)
    out = [
        f"body {spec.stages} x {spec.microbatches} {spec.schedule} vpp {spec.vpp}, "
        f"{spec.n_ops} ops; {samples} samples, seed {seed}"
    ]
    for name, (law, mean, std) in laws.items():
        ks = stats.kstest(x, law.cdf).statistic
        out.append(
            f"{name}: KS {ks:.4f}, mean {(mean - x.mean()) / x.std():+.3f} sd, "
            f"std {std / x.std() - 1:+.2%}"
        )
    return out


def grid_rows(mod, cases, samples: int, seed: int, json_path: str | None = None) -> list[dict]:
    """One row per (case, shape): KS, spread, p99, mean and std errors, analytic time.

    With ``json_path`` the rows are written as they come (a long run keeps what it finished).
    """
    rows = []
    for case in cases:
        start = time.perf_counter()
        graph = case.build()
        n = mod.REPLICA_SAMPLES if case.replicas else samples
        mc = pa.predict(graph, "montecarlo", samples=n, seed=seed)
        if mc.diagnostics["pooled_groups"]:
            raise RuntimeError(f"{case.name}: Monte Carlo pooled a replica group")
        x = mc.distribution.samples
        q50, q99 = np.quantile(x, [0.5, 0.99])
        mean, sd = float(np.mean(x)), float(np.std(x))
        for shape in SHAPES:
            res = pa.predict(graph, "analytic", core_shape=shape)
            a50, a99 = (float(res.quantile(q)) for q in (0.5, 0.99))
            rows.append(
                {
                    "case": case.name,
                    "class": case.cls,
                    "core_shape": shape,
                    "ks": float(stats.kstest(x, res.cdf).statistic),
                    "spread_err": (a99 - a50) / (q99 - q50) - 1.0,
                    "p99_err": a99 / q99 - 1.0,
                    "mean_err_sd": (res.mean() - mean) / sd,
                    "std_err": res.std() / sd - 1.0,
                    "analytic_s": res.compute_time_s,
                    "samples": n,
                    "seed": seed,
                    "dkw_95": float(mc.diagnostics["dkw_95"]),
                    "replicas": case.replicas,
                }
            )
        ks = {r["core_shape"]: round(r["ks"], 4) for r in rows[-len(SHAPES) :]}
        print(f"{case.name}: {ks} {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
        if json_path:
            with open(json_path, "w") as fh:
                json.dump(rows, fh, indent=1)
    return rows


def markdown(rows: list[dict]) -> str:
    """Per case: KS / spread error / mean error of each shape; per class: where kurtosis wins."""
    by_case: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["core_shape"]] = r
    out = [
        "| class | case | KS normal / skew / kurtosis | spread normal / skew / kurtosis "
        "| mean err (sd) normal / skew / kurtosis | std kurtosis | kurtosis s | DKW 95% |",
        "|---|---|---|---|---|---|---|---|",
    ]
    wins: dict[str, list[bool]] = {}
    for name, sh in by_case.items():
        n, s, k = (sh[x] for x in SHAPES)
        wins.setdefault(n["class"], []).append(k["ks"] <= min(n["ks"], s["ks"]))
        out.append(
            f"| {n['class']} | {name} | {n['ks']:.4f} / {s['ks']:.4f} / **{k['ks']:.4f}** | "
            f"{n['spread_err']:+.1%} / {s['spread_err']:+.1%} / {k['spread_err']:+.1%} | "
            f"{n['mean_err_sd']:+.3f} / {s['mean_err_sd']:+.3f} / {k['mean_err_sd']:+.3f} | "
            f"{k['std_err']:+.1%} | {k['analytic_s']:.2f} | {n['dkw_95']:.4f} |"
        )
    out += ["", "| class | variants | kurtosis KS <= min(normal, skew) on |", "|---|---|---|"]
    out += [f"| {c} | {len(v)} | {sum(v)} |" for c, v in wins.items()]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    lo = sub.add_parser("local")
    lo.add_argument("--case", choices=("il8x8v4", "1f1b8x32"), default="il8x8v4")
    lo.add_argument("--local-samples", type=int, default=40_000)
    lo.add_argument("--seed", type=int, default=2)
    gr = sub.add_parser("grid")
    gr.add_argument("--samples", type=int, default=100_000)
    gr.add_argument("--deep", action="store_true")
    gr.add_argument("--only", nargs="+", metavar="SUBSTRING")
    gr.add_argument("--json", metavar="FILE")
    gr.add_argument("--markdown", metavar="FILE")
    rj = sub.add_parser("readme-job")
    rj.add_argument("--samples", type=int, default=20_000)
    rj.add_argument("--seed", type=int, default=5)
    rd = sub.add_parser("render")
    rd.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    if args.cmd == "local":
        out = local(args.case, args.local_samples, args.seed)
        drift = out.pop("drift_by_generation")
        print(json.dumps(out, indent=1))
        step = max(1, len(drift) // 12)
        print("Gaussian core's mean error by generation (node sd):")
        print(", ".join(f"g{k}: {drift[k]:+.3f}" for k in range(0, len(drift), step)))
        return 0
    if args.cmd == "readme-job":
        print("\n".join(readme_job(args.samples, args.seed)))
        return 0
    if args.cmd == "render":
        rows = [r for f in args.files for r in json.load(open(f))]
        print(markdown(rows))
        return 0
    mod = _choice_module()
    cases = [c for c in mod.grid(args.deep) if not c.name.startswith(("fsdp", "op-by-op"))]
    cases.append(
        mod.Case(
            "README body interleaved 16x16 v8 normal 5%",
            "pipeline-interleaved, symmetric ops",
            readme_body,
        )
    )
    if args.only:
        cases = [c for c in cases if any(s in c.name for s in args.only)]
    rows = grid_rows(mod, cases, args.samples, mod.SEED, args.json)
    table = markdown(rows)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
