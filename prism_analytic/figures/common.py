"""What every figure maker shares: the Agg backend, saving, the manifest entry."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

__all__ = ["plt", "save", "entry", "Timer"]


def plt():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    pyplot.rcParams.update({"font.size": 9, "axes.titlesize": 10, "legend.fontsize": 8})
    return pyplot


def save(fig: Any, out_dir: str | Path, name: str) -> Path:
    """Save ``fig`` as ``out_dir/name.png`` (150 dpi) and close it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt().close(fig)
    return path


def entry(
    name: str, path: Path, claim: str, numbers: dict[str, Any], data: str, seconds: float
) -> dict[str, Any]:
    """One manifest entry: the figure, the paper claim it reproduces, its numbers, its data."""
    return {
        "figure": name,
        "file": path.name,
        "claim": claim,
        "numbers": numbers,
        "data": data,
        "seconds": round(seconds, 2),
    }


class Timer:
    """Wall-clock seconds since creation."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def __call__(self) -> float:
        """Seconds elapsed since the timer was created."""
        return time.perf_counter() - self.start
