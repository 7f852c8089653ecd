"""Plots of distributions: CDF, or CCDF on a log axis for tails. matplotlib is imported lazily."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["plot_distribution"]


def plot_distribution(
    dist: Any,
    ax: Any = None,
    *,
    ccdf: bool = False,
    label: str | None = None,
    levels: tuple[float, float] = (1e-4, 1 - 1e-6),
) -> Any:
    """Draw ``dist``'s CDF (or CCDF, log scale) between two quantile levels.

    Grid results also show their numerical bracket as a shaded band.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    elif not (callable(getattr(ax, "plot", None)) and callable(getattr(ax, "set_xlabel", None))):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__} {ax!r}")
    if not isinstance(ccdf, bool):
        raise TypeError(f"ccdf must be True or False, got {ccdf!r}")
    lo = float(dist.quantile(levels[0]))
    hi = float(dist.quantile(levels[1]))
    if hi <= lo:
        hi = lo + 1e-9
    x = np.linspace(lo, hi, 600)
    y = np.asarray(dist.sf(x) if ccdf else dist.cdf(x))
    line = ax.plot(x, y, label=label or type(dist).__name__)[0]
    bounds = getattr(dist, "sf_bounds" if ccdf else "cdf_bounds", None)
    if bounds is not None:
        low, high = bounds(x)
        ax.fill_between(
            x, low, high, color=line.get_color(), alpha=0.25, step="post", label="numerical bracket"
        )
    if ccdf:
        ax.set_yscale("log")
        ax.set_ylabel("P(T > t)")
    else:
        ax.set_ylabel("P(T <= t)")
    ax.set_xlabel("time (s)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return ax
