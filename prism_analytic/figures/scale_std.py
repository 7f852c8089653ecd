"""Fig. 1 analogue: compute and communication time per step at 16k and 64k GPUs.

For one model at two scales the step is split as the builder builds it: **compute** is the
replica barrier (the slowest pipeline replica, with its persistent speed factor and the degraded
GPUs), **communication** the step-level collectives after it (data-parallel reduce-scatter and
all-gather, pipeline fill/drain hops). Each law comes from the analytic engine; the standard
deviation ratios (64k over 16k) are compared with PRISM's 2.03x (compute) and 2.91x (comm).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .common import Timer, entry, plt, save

NAME = "fig1_scale_std"
CLAIM = (
    "PRISM Fig. 1: the 64k+ GPU job has 2.03x the std of compute time and 2.91x the std of "
    "communication time of the 16k job"
)


def parts_laws(job):
    """(compute law, communication law) of one job's step (analytic engine)."""
    from ..engines.predict import predict
    from ..graph import StepGraph
    from ..workload.builder import build_step_graph

    g = build_step_graph(job)
    node = g.node("replicas")
    comp = StepGraph("compute")
    comp.add_replica_group(
        "replicas", node["body"], node["n"], slow=node["slow"], speed=node["speed"]
    )
    comm = StepGraph("comm")
    prev: list[str] = []
    for name in g.nodes:
        d = g.node(name)
        if d["type"] != "replica" and d.get("kind") == "comm":
            comm.add_op(name, d["latency"], prev, kind="comm", tags=d["tags"])
            prev = [name]
    if not prev:  # no step-level communication (e.g. FSDP, all hidden in the body)
        from ..distributions import point_mass

        comm.add_op("none", point_mass(0.0), kind="comm")
    for r in g.regimes:
        comm.add_regime(r.name, dict(r.probs), dict(r.factors), applies_to=r.applies_to)
    return predict(comp), predict(comm)


def make(out_dir: str | Path, data_root: str | Path | None = None, tiny: bool = False) -> dict:
    """Compute and communication laws at two scales, with std ratios."""
    from ..workload.jobs import build_job

    t = Timer()
    preset, scales = ("llama3-8b", (64, 256)) if tiny else ("llama3-405b", (16384, 65536))
    laws = {n: parts_laws(build_job(preset, n)) for n in scales}
    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(9, 3.6))
    nums = {"preset": preset, "scales": list(scales)}
    for k, (ax, what) in enumerate(zip(axes, ("compute", "communication"))):
        stds = []
        for n in scales:
            law = laws[n][k]
            lo, hi = float(law.quantile(0.0005)), float(law.quantile(0.9995))
            x = np.linspace(lo, hi, 600)
            ax.plot(x, law.cdf(x), label=f"{n:,} GPUs: std {law.std() * 1e3:.1f} ms")
            stds.append(float(law.std()))
        ratio = stds[1] / stds[0] if stds[0] > 0 else float("nan")
        nums[f"{what}_std_s"] = stds
        nums[f"{what}_std_ratio"] = ratio
        prism = 2.03 if what == "compute" else 2.91
        shown = f"{ratio:.2f}x" if math.isfinite(ratio) else "n/a (no spread)"
        ax.set_title(f"{what}: std ratio {shown} (PRISM {prism}x)")
        ax.set_xlabel(f"{what} time per step (s)")
        ax.set_ylabel("CDF")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    path = save(fig, out_dir, NAME)
    return entry(NAME, path, CLAIM, nums, f"workload model, preset {preset} (no data)", t())
