"""Progress of long work, as a line on stderr every few seconds (stdout is left alone).

A :class:`Progress` is a callable ``progress(done, total)``, the signature the library's
long loops take (``run_sweep``, the Monte Carlo engine, the cross-DC bisection, the event
fit's refits). It prints nothing for work that ends within ``every_s`` seconds, so quick
commands and tests stay quiet; after that, one line per ``every_s`` seconds and a last line
when ``done`` reaches ``total``. On a terminal the line is rewritten in place; elsewhere (a
log file, a pipe) each report is its own line. ``PRISM_PROGRESS=0`` in the environment
silences it.

Examples
--------
>>> import io
>>> out = io.StringIO()
>>> p = Progress("refits", stream=out, every_s=0.0)
>>> p(1, 4); p(4, 4)
>>> out.getvalue().splitlines()[-1].startswith("refits: 4/4")
True
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["Progress", "report"]


class Progress:
    """Rate-limited progress lines: ``label: done/total, E s elapsed, about R s left``.

    Parameters
    ----------
    label : str
        What is counted (``"sweep"``, ``"bisection probes"``).
    stream : file, optional
        Where lines go (default: ``sys.stderr`` at the time of each report).
    every_s : float
        Seconds between lines; nothing is printed before the first ``every_s`` has passed.
    enabled : bool, optional
        Force on or off; default: on unless ``PRISM_PROGRESS`` is ``0``.
    """

    def __init__(
        self,
        label: str,
        *,
        stream: TextIO | None = None,
        every_s: float = 5.0,
        enabled: bool | None = None,
    ) -> None:
        if not every_s >= 0:
            raise ValueError(f"every_s must be a number of seconds >= 0, got {every_s!r}")
        self.label = label
        self._stream = stream
        self.every_s = float(every_s)
        self.enabled = os.environ.get("PRISM_PROGRESS", "1") != "0" if enabled is None else enabled
        self._start = time.perf_counter()
        self._last = self._start
        self._shown = False

    @property
    def stream(self) -> TextIO:
        """Where the lines go."""
        return self._stream if self._stream is not None else sys.stderr

    def __call__(self, done: int, total: int | None = None) -> None:
        """Report ``done`` of ``total`` units (``total`` None: an open-ended count)."""
        if not self.enabled:
            return
        now = time.perf_counter()
        finished = total is not None and done >= total
        if now - self._last < self.every_s and not (finished and self._shown):
            return
        self._last = now
        self._shown = True
        elapsed = now - self._start
        text = f"{self.label}: {done:,}"
        if total is not None:
            left = elapsed * (total - done) / done if done > 0 else float("nan")
            text += f"/{total:,}, {elapsed:.0f} s elapsed"
            if done > 0 and not finished:
                text += f", about {left:.0f} s left"
        else:
            text += f", {elapsed:.0f} s elapsed"
        tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        end = "\n" if finished or not tty else ""
        print(("\r" if tty else "") + text, end=end, file=self.stream, flush=True)


def report(progress: Callable[[int, int], None] | None, done: int, total: int) -> None:
    """Call ``progress(done, total)`` when a callback was given (None: no reports)."""
    if progress is not None:
        progress(done, total)
