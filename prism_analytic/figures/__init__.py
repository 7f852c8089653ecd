"""The paper's figures: one maker per figure, each returning its manifest entry.

``make(out_dir, data_root=None, tiny=False) -> dict`` writes ``out_dir/<name>.png`` and returns
``{"figure", "file", "claim", "numbers", "data", "seconds"}``. :func:`make_all` runs them (all
or ``only``) and writes ``manifest.json``; ``prism figures`` and the thin scripts in the
repository's ``paper_figures/`` call these.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["FIGURES", "make_all", "maker"]

#: figure name -> (module, function)
FIGURES: dict[str, tuple[str, str]] = {
    "fig1_scale_std": ("scale_std", "make"),
    "fig3_spatial_temporal": ("gpu_variability", "make_spatial"),
    "fig4_clock_vs_time": ("gpu_variability", "make_clock"),
    "fig5_collective_latency": ("collectives", "make"),
    "traces_predicted_vs_measured": ("traces_cdf", "make"),
    "placement": ("analyses_figs", "make_placement"),
    "kernel_ranking": ("analyses_figs", "make_sensitivity"),
    "slowdown_vs_scale": ("analyses_figs", "make_slowdown"),
    "crossdc_bandwidth": ("analyses_figs", "make_crossdc"),
    "runtime_failures": ("analyses_figs", "make_runtime"),
    "analytic_vs_montecarlo": ("accuracy", "make"),
    "evt_convergence": ("evt_convergence", "make"),
}


def maker(name: str) -> Callable[..., dict[str, Any]]:
    """The maker function of figure ``name``."""
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; available: {', '.join(FIGURES)}")
    mod, fn = FIGURES[name]
    return getattr(importlib.import_module(f"{__name__}.{mod}"), fn)


def make_all(
    out_dir: str | Path,
    data_root: str | Path | None = None,
    *,
    only: list[str] | None = None,
    tiny: bool = False,
    progress: Callable[[str, dict | None, Exception | None], None] | None = None,
) -> list[dict[str, Any]]:
    """Render every figure (or ``only`` those) into ``out_dir`` and write ``manifest.json``.

    A figure whose data is missing (``FileNotFoundError``) is listed in the manifest with its
    error instead of stopping the others.
    """
    names = list(FIGURES) if not only else list(only)
    for n in names:
        maker(n)  # unknown names fail before any work
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    for n in names:
        try:
            e = maker(n)(out, data_root, tiny=tiny)
            err = None
        except FileNotFoundError as exc:
            e, err = {"figure": n, "file": None, "error": str(exc)}, exc
        manifest.append(e)
        if progress:
            progress(n, e, err)
    (out / "manifest.json").write_text(json.dumps(_jsonable(manifest), indent=2))
    return manifest


def _jsonable(obj: Any) -> Any:
    import math

    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
