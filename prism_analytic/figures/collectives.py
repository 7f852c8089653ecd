"""Fig. 5 analogue: collective latency distributions by message size and node count.

Measured: Allreduce (Open MPI, Rabenseifner, host buffers, one process per node) on Leonardo
(``shared/data/collective_latency``), per-iteration time of the slowest rank, normalised by its
median. Model: the per-node law fitted to 4-16 nodes
(:func:`~prism_analytic.calibration.collective_noise.fit_node_noise`) raised to the node count
(``F^N``) for 512 and 2,048 nodes, a prediction, not a fit. The last panel is the workload
model's own noise multipliers (defaults, or the ``variability`` passed): intra-node (NVLink),
for which there is no measured data, and the panel says so, and inter-node for a collective
over 4, 512 and 2,048 nodes as ``prism predict`` draws it (the tier plus
``variability.scale``'s per-node event: :func:`~prism_analytic.workload.comm_noise.
collective_multiplier`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .common import Timer, entry, plt, save

if TYPE_CHECKING:
    from ..workload.config import VariabilityConfig

NAME = "fig5_collective_latency"
CLAIM = (
    "PRISM Fig. 5: intra-node collectives are nearly deterministic at large messages; inter-node "
    "latency fluctuates and its tail grows (up to an order of magnitude)"
)
ARCHIVES = {
    4: "2025_05_10___18_33_42",
    8: "2025_05_10___18_34_08",
    16: "2025_05_06___19_06_52",
    512: "2025_03_28___18_19_43",
    2048: "2025_03_28___16_48_20",
}
SIZES = (32768, 2097152)  # int32 elements: 128 KiB and 8 MiB


def _log_x(ax, ticks) -> None:
    from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def make(
    out_dir: str | Path,
    data_root: str | Path | None = None,
    tiny: bool = False,
    *,
    variability: VariabilityConfig | None = None,
) -> dict:
    """Measured vs model latency CDFs (normalised by the median) per size and node count.

    ``variability``: the workload model's
    :class:`~prism_analytic.workload.config.VariabilityConfig` drawn in the last panel
    (default: the defaults).
    """
    from ..calibration.collective_noise import fit_node_noise, load_latencies
    from ..workload.builder import tier_multiplier
    from ..workload.comm_noise import collective_multiplier
    from ..workload.config import VariabilityConfig

    var = VariabilityConfig() if variability is None else variability
    if not isinstance(var, VariabilityConfig):
        raise TypeError(f"variability must be a VariabilityConfig, got {type(var).__name__}")

    t = Timer()
    p = plt()
    sizes = SIZES[:1] if tiny else SIZES
    fig, axes = p.subplots(1, len(sizes) + 1, figsize=(4.2 * (len(sizes) + 1), 3.8))
    axes = np.atleast_1d(axes)
    nums: dict = {}
    levels = np.linspace(0.001, 0.999, 400)
    for ax, size in zip(axes, sizes):
        data = {
            n: load_latencies(a, 0, "rabenseifner_ompi", size, data_root)
            for n, a in ARCHIVES.items()
        }
        fit, rms = fit_node_noise({n: data[n] for n in (4, 8, 16)})
        nums[f"{size * 4 // 1024}KiB"] = row = {"fit_rms_log_ratio": rms}
        for i, (n, x) in enumerate(sorted(data.items())):
            r = np.sort(x / np.median(x))
            col = f"C{i}"
            ax.plot(r, np.arange(1, r.size + 1) / r.size, color=col, label=f"{n} nodes, measured")
            row[f"measured_p99_over_p50_{n}"] = float(np.quantile(x, 0.99) / np.median(x))
            if n >= 512:
                q = fit.max_quantile(levels, n)
                q50 = fit.max_quantile(np.array([0.5]), n)[0]
                ax.plot(q / q50, levels, "--", color=col, label=f"{n} nodes, model F^N")
                row[f"model_p99_over_p50_{n}"] = float(
                    fit.max_quantile(np.array([0.99]), n)[0] / q50
                )
        _log_x(ax, (0.5, 0.8, 1, 1.5, 2, 3, 5))
        ax.set_xlim(0.5, 5)
        ax.set_xlabel("iteration latency / median (log scale)")
        ax.set_ylabel("CDF")
        med4 = float(np.median(data[4])) * 1e6
        ax.set_title(f"Allreduce {size * 4 // 1024} KiB, inter-node (median {med4:.0f} us at 4)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=6, loc="lower right")
    # intra-node: the workload model's tier (no measured data)
    ax = axes[-1]
    net = var.network
    intra = tier_multiplier(net.intra_node)
    x = np.geomspace(0.3, 12, 800)
    ax.plot(
        x, intra.cdf(x), "k-", label=f"model intra-node (NVLink), sigma {net.intra_node.sigma:g}"
    )
    for style, n in zip((":", "--", "-."), (4, 512, 2048)):
        # as predict draws a collective over n nodes: the tier and variability.scale's event
        inter = collective_multiplier(var, n)
        label = f"model inter-node, {n} nodes, sigma {net.inter_node.sigma:g}"
        ax.plot(x, inter.cdf(x), "k" + style, label=label)
        nums[f"inter_node_model_p99_over_p50_{n}"] = float(
            inter.quantile(0.99) / inter.quantile(0.5)
        )
    _log_x(ax, (0.3, 0.5, 1, 2, 5, 10))
    ax.set_xlabel("latency / mean (model noise multiplier, log scale)")
    ax.set_ylabel("CDF")
    ax.set_title("intra-node: MODEL ONLY (no measured NVLink data)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right")
    nums["intra_node_model_p99_over_p50"] = float(intra.quantile(0.99) / intra.quantile(0.5))
    path = save(fig, out_dir, NAME)
    data = "shared/data/collective_latency (PICO on Leonardo, Open MPI, host buffers)"
    return entry(NAME, path, CLAIM, nums, data, t())
