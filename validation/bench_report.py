"""The record a benchmark keeps: when, at which commit, under which load; its markdown file."""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from pathlib import Path

from bench_mc_reference import commit


def run_stamp() -> str:
    """``"YYYY-MM-DD HH:MM UTC, commit C, load average L at the start on N CPUs"``."""
    return (
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, commit {commit()}, "
        f"load average {os.getloadavg()[0]:.1f} at the start on {os.cpu_count()} CPUs"
    )


def write_report(out: Path, title: str, script: str, argv: Sequence[str], lines: list[str]) -> None:
    """Write ``# title``, the command that made it (``python script argv``) and ``lines``."""
    cmd = " ".join([f"python {script}", *argv])
    out.write_text(f"# {title}\n\n```\n{cmd}\n```\n\n" + "\n".join(lines) + "\n")
