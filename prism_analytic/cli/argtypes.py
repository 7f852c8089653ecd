"""argparse types shared by the ``prism`` commands: each rejects bad text with a clear message."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

__all__ = [
    "add_job_arguments",
    "positive_int",
    "nonnegative_int",
    "seed",
    "positive_float",
    "nonnegative_float",
    "probability",
    "sample_count",
    "int_list",
    "float_list",
    "check_text_file",
]


def positive_int(text: str) -> int:
    """An integer >= 1; accepts exact scientific notation such as ``1e6``."""
    try:
        value = float(text) if "e" in text.lower() else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not math.isfinite(value) or value != int(value) or value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return int(value)


def nonnegative_int(text: str) -> int:
    """An integer >= 0, e.g. a count of steps to drop or of bisection probes."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text}")
    return value


def seed(text: str) -> int:
    """A random seed: an integer >= 0 (numpy's generators refuse negative seeds)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"must be a non-negative integer (random generators take no negative seed), got {text}"
        )
    return value


def sample_count(text: str) -> int:
    """A Monte Carlo sample count (>= 2); accepts scientific notation such as ``1e5``."""
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected an integer >= 2, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {text}")
    return value


def nonnegative_float(text: str) -> float:
    """A finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not value >= 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return value


def probability(text: str) -> float:
    """A probability level strictly between 0 and 1 (not a percentage)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a probability in (0, 1), got {text!r}"
        ) from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a probability strictly between 0 and 1 (e.g. 0.99), got {text}"
        )
    return value


def _list(text: str, item, what: str) -> list:
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of {what}, got {text!r}")
    return [item(p) for p in parts]


def int_list(text: str) -> list[int]:
    """A comma-separated list of positive integers, e.g. ``1024,4096``."""
    return _list(text, positive_int, "positive integers")


def float_list(text: str) -> list[float]:
    """A comma-separated list of positive numbers, e.g. ``0.5,1,2``."""
    return _list(text, positive_float, "positive numbers")


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """``--preset NAME --gpus N --config FILE``, the job options of the analysis commands."""
    parser.add_argument("--preset", metavar="NAME", help="model preset (see `prism presets`)")
    parser.add_argument("--gpus", type=positive_int, metavar="N", help="number of GPUs")
    parser.add_argument("--config", metavar="FILE", help="TOML overrides / whole job file")


def check_text_file(path: str | None, option: str, formats: str) -> Path | None:
    """``path`` if it is a readable UTF-8 text file, else a ValueError naming it and ``formats``.

    Parameters
    ----------
    path : str or None
        The argument (None: not given, None back).
    option : str
        The option's name, for the message (``--file``).
    formats : str
        What the option takes, for the message (``"a TOML sweep file"``).
    """
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{option}: no such file: {str(p)!r} (expected {formats})")
    try:
        with open(p, encoding="utf-8") as fh:
            head = fh.read(1 << 16)
    except UnicodeDecodeError:
        head = "\0"
    except OSError as exc:
        raise ValueError(f"{option}: cannot read {str(p)!r}: {exc.strerror}") from None
    if "\0" in head:
        raise ValueError(f"{option}: {str(p)!r} is a binary file, not text; expected {formats}")
    return p
