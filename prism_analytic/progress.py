"""Progress of long work, as a line on stderr every few seconds (stdout is left alone).

A :class:`Progress` is a callable ``progress(done, total)``, the signature the library's
long loops take (``run_sweep``, the Monte Carlo engine, the cross-DC bisection, the event
fit's refits). It prints nothing for work that ends within ``every_s`` seconds, so quick
commands and tests stay quiet; after that, one line per ``every_s`` seconds and a last line
when ``done`` reaches ``total``. Used as a context manager it also prints while no count
moves (``label: working, 40 s elapsed``): long fits that report no counts still show they
are alive. On a terminal the line is rewritten in place; elsewhere (a log file, a pipe) each
report is its own line. ``PRISM_PROGRESS=0`` in the environment silences it.

Examples
--------
>>> import io
>>> out = io.StringIO()
>>> p = Progress("sweep", unit="configurations", stream=out, every_s=0.0)
>>> p(1, 4); p(4, 4)
>>> out.getvalue().splitlines()[-1].startswith("sweep: 4/4 configurations")
True
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

__all__ = ["Progress", "report"]


class Progress:
    """Rate-limited progress lines: ``label: done/total unit, E s elapsed, about R s left``.

    Parameters
    ----------
    label : str
        What is running (``"sweep"``, ``"calibrate"``).
    unit : str
        What ``done`` counts (``"configurations"``); empty: nothing after the count.
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
        unit: str = "",
        stream: TextIO | None = None,
        every_s: float = 5.0,
        enabled: bool | None = None,
    ) -> None:
        if not every_s >= 0:
            raise ValueError(f"every_s must be a number of seconds >= 0, got {every_s!r}")
        self.label = label
        self.unit = unit
        self._stream = stream
        self.every_s = float(every_s)
        self.enabled = os.environ.get("PRISM_PROGRESS", "1") != "0" if enabled is None else enabled
        self._start = time.perf_counter()
        self._last = self._start
        self._shown = False
        self._count: tuple[int, int | None] | None = None
        self._first: tuple[float, int] | None = None  # (time, done) of the first count
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stream(self) -> TextIO:
        """Where the lines go."""
        return self._stream if self._stream is not None else sys.stderr

    def __call__(self, done: int, total: int | None = None) -> None:
        """Report ``done`` of ``total`` units (``total`` None: an open-ended count)."""
        if not self.enabled:
            return
        now = time.perf_counter()
        with self._lock:
            if self._first is None:
                self._first = (now, done)
            self._count = (done, total)
        self._maybe_print(now)

    def __enter__(self) -> Progress:
        """Also print while no count moves, until the block ends."""
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._beat, daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _beat(self) -> None:
        while not self._stop.wait(max(self.every_s, 0.05)):
            self._maybe_print(time.perf_counter())

    def _maybe_print(self, now: float) -> None:
        with self._lock:
            done, total = self._count if self._count is not None else (None, None)
            finished = done is not None and total is not None and done >= total
            if now - self._last < self.every_s and not (finished and self._shown):
                return
            self._last = now
            self._shown = True
            text = self._text(now, done, total, finished)
            tty = hasattr(self.stream, "isatty") and self.stream.isatty()
            end = "\n" if finished or not tty else ""
            print(("\r" if tty else "") + text, end=end, file=self.stream, flush=True)

    def _text(self, now: float, done: int | None, total: int | None, finished: bool) -> str:
        elapsed = now - self._start
        if done is None:
            return f"{self.label}: working, {elapsed:.0f} s elapsed"
        unit = f" {self.unit}" if self.unit else ""
        count = f"{done:,}" if total is None else f"{done:,}/{total:,}"
        text = f"{self.label}: {count}{unit}, {elapsed:.0f} s elapsed"
        t0, d0 = self._first if self._first is not None else (now, done)
        if total is not None and not finished and done > d0:
            # the rate since the first count, not since the start (work before counting)
            text += f", about {(now - t0) * (total - done) / (done - d0):.0f} s left"
        return text


def report(progress: Callable[[int, int], None] | None, done: int, total: int) -> None:
    """Call ``progress(done, total)`` when a callback was given (None: no reports)."""
    if progress is not None:
        progress(done, total)
