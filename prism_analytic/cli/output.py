"""What all ``prism`` commands print the same way: JSON values, percent labels, progress, plots."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..json_safe import jsonable

__all__ = [
    "LEVELS",
    "pct",
    "jsonable",
    "progress_printer",
    "check_plot_path",
    "check_out_path",
    "check_out_dir",
    "save_figure",
    "plot_result",
]

#: Quantile levels the commands report.
LEVELS = (0.5, 0.9, 0.99, 0.999)


def pct(q: float) -> str:
    """The label of quantile level ``q``: 0.5 -> ``50``, 0.999 -> ``999``."""
    return f"{q * 100:g}".replace(".", "")


def progress_printer(label: str, unit: str = "") -> Any:
    """A progress line on stderr every few seconds of long work (:class:`..progress.Progress`).

    Nothing is printed for work shorter than that, and stdout (``--json``) is never touched.
    A callable ``progress(done, total)``; as a context manager it also prints while no count
    moves.
    """
    from ..progress import Progress

    return Progress(label, unit=unit)


def check_plot_path(path: str | os.PathLike[str] | None) -> Path | None:
    """The file a ``--plot`` argument will write, checked before any work is done.

    Raises
    ------
    ValueError
        When the path is a directory, its folder does not exist, or the folder is not writable.
    """
    if path is None:
        return None
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"--plot: {str(target)!r} is a directory; give a file name such as x.png")
    if target.suffix == "":
        target = target.with_suffix(".png")
    # matplotlib's savefig formats (the Agg canvas's list), asked without drawing anything
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if target.suffix[1:].lower() not in formats:
        raise ValueError(
            f"--plot: format {target.suffix!r} is not supported; use one of "
            f"{', '.join('.' + f for f in sorted(formats))}"
        )
    return _check_writable(target, "--plot")


def check_out_path(
    path: str | os.PathLike[str] | None,
    option: str = "--out",
    suffixes: tuple[str, ...] | None = None,
) -> Path | None:
    """The file an ``--out`` argument will write, checked before any work is done.

    Parameters
    ----------
    path : path or None
        The argument (None: nothing to write, None back).
    option : str
        The option's name, for the message.
    suffixes : tuple of str, optional
        File suffixes allowed (``(".csv", ".parquet")``); default: any.

    Raises
    ------
    ValueError
        When the path is a directory, has a suffix not allowed, its folder does not exist, or
        the file cannot be written there.
    """
    if path is None:
        return None
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"{option}: {str(target)!r} is a directory; give a file name")
    if suffixes is not None and target.suffix.lower() not in suffixes:
        raise ValueError(
            f"{option}: {str(target)!r} must end in one of {', '.join(suffixes)}"
            f" (got {target.suffix or 'no suffix'!r})"
        )
    return _check_writable(target, option)


def check_out_dir(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """The folder an ``--out DIR`` argument will write into, made and tried before any work.

    Raises
    ------
    ValueError
        When the path is a file, or the folder cannot be made or written to.
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{option}: {str(folder)!r} exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(
            f"{option}: cannot make the folder {str(folder)!r}: {exc.strerror}"
        ) from None
    probe = folder / f".prism-write-check-{os.getpid()}"
    _check_writable(probe, option)
    return folder


def _check_writable(target: Path, option: str) -> Path:
    """``target`` if its folder exists and the file can be written, else a ValueError."""
    folder = target.parent
    if not folder.is_dir():
        raise ValueError(f"{option}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ValueError(f"{option}: cannot write {str(target)!r} (permission denied)")
    existed = target.exists()
    try:  # os.access is not the whole story (read-only or special file systems): try it
        with open(target, "ab"):
            pass
    except OSError as exc:
        raise ValueError(f"{option}: cannot write {str(target)!r}: {exc.strerror}") from None
    if not existed:
        target.unlink(missing_ok=True)
    return target


def save_figure(fig: Any, target: Path) -> None:
    """Save a matplotlib figure to ``target`` and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(target)
    plt.close(fig)


def plot_result(
    target: Path, result: Any, title: str, figsize: tuple[float, float] = (6, 3.5)
) -> None:
    """Draw ``result.plot(ax)`` with ``title`` into the file ``target`` (Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize)
    result.plot(ax)
    ax.set_title(title)
    save_figure(fig, target)
