"""Where sweep configurations and Monte Carlo blocks run: this process, a local pool, or dask.

Every choice is a :class:`concurrent.futures.Executor` (or None for "in this process"), so
the sweep runner and the Monte Carlo engine need no dask-specific code. dask.distributed is
an optional dependency (``pip install 'prism_analytic[distributed]'``), imported only when a
dask scheduler is asked for. Scheduling, work stealing and rescheduling the tasks of a worker
that dies are dask's; this module only opens and closes the connection.

Scheduler names:

* ``"local"``: a :class:`~concurrent.futures.ProcessPoolExecutor` with ``workers`` processes
  (``workers = 1``: no pool, everything runs in this process);
* ``"dask"``: a ``dask.distributed.LocalCluster`` of ``workers`` single-threaded processes;
* ``"tcp://HOST:PORT"`` (or ``tls://``, ``ws://``, ``wss://``): an existing dask scheduler;
  its workers need this package installed.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import urlsplit

__all__ = ["open_executor", "check_scheduler", "require_distributed", "MissingDependencyError"]

_SCHEMES = ("tcp", "tls", "ws", "wss")


class MissingDependencyError(ImportError, ValueError):
    """An optional dependency is not installed (a ValueError too, so commands report it)."""


def require_distributed() -> Any:
    """The ``distributed`` module, or a clear error saying how to install it."""
    try:
        import distributed
    except ImportError as exc:
        raise MissingDependencyError(
            "dask.distributed is needed for --scheduler dask or tcp://...: "
            "pip install 'prism_analytic[distributed]'"
        ) from exc
    return distributed


def check_scheduler(scheduler: str) -> str:
    """Validate a scheduler name or address (before any work); returns it normalised.

    Raises
    ------
    ValueError
        For anything but ``local``, ``dask`` or ``SCHEME://HOST:PORT`` with a known scheme
        and a numeric port.
    """
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise ValueError(f"--scheduler: expected local, dask or tcp://HOST:PORT, got {scheduler!r}")
    scheduler = scheduler.strip()
    if scheduler in ("local", "dask"):
        return scheduler
    parts = urlsplit(scheduler)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in _SCHEMES or not parts.hostname or port is None:
        raise ValueError(
            f"--scheduler: {scheduler!r} is not local, dask or SCHEME://HOST:PORT"
            f" (SCHEME one of {', '.join(_SCHEMES)}), e.g. tcp://10.0.0.5:8786"
        )
    return scheduler


def _probe(address: str, timeout_s: float) -> None:
    """Fail fast when nothing listens at the address (dask itself retries until its timeout)."""
    parts = urlsplit(address)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise ValueError(
            f"--scheduler: cannot reach a dask scheduler at {address} ({exc}); start one with"
            f" `dask scheduler` and `dask worker {address}`, or use --scheduler local"
        ) from None


@contextmanager
def open_executor(
    scheduler: str = "local", workers: int | None = None, *, timeout_s: float = 10.0
) -> Iterator[Executor | None]:
    """Open the executor a scheduler name stands for; close it (and any cluster) on exit.

    Parameters
    ----------
    scheduler : str
        ``"local"``, ``"dask"`` or a dask scheduler address (module docstring).
    workers : int, optional
        Processes for ``local`` and ``dask`` (default: the CPU count); ignored for an address.
    timeout_s : float
        How long to try to reach a scheduler address before giving up.

    Yields
    ------
    concurrent.futures.Executor or None
        None means "run in this process" (``local`` with one worker).

    Raises
    ------
    ValueError
        For a malformed or unreachable scheduler address (nothing has run yet).
    """
    scheduler = check_scheduler(scheduler)
    if workers is not None and (
        isinstance(workers, bool) or int(workers) != workers or workers < 1
    ):
        raise ValueError(f"--workers: expected a positive integer, got {workers!r}")
    n = int(workers or os.cpu_count() or 1)
    if scheduler == "local":
        if n == 1:
            yield None
            return
        with ProcessPoolExecutor(max_workers=n) as pool:
            yield pool
        return
    distributed = require_distributed()
    cluster = None
    if scheduler == "dask":
        cluster = distributed.LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        )
        address = cluster.scheduler_address
    else:
        address = scheduler
        _probe(address, timeout_s)
    try:
        client = distributed.Client(address, timeout=timeout_s)
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        raise ValueError(
            f"--scheduler: cannot reach a dask scheduler at {address} within {timeout_s:g} s"
            f" ({exc}); start one with `dask scheduler` and `dask worker {address}`, or use"
            " --scheduler local"
        ) from None
    try:
        yield client.get_executor()
    finally:
        with suppress(Exception):
            client.close()
        if cluster is not None:
            with suppress(Exception):
                cluster.close()
