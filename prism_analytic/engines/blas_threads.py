"""Run the grid engines with a single-threaded BLAS.

The analytic and bounds engines call BLAS only for vector products over lattices (norms in the
FFT round-off bound, means of grids, mixtures' CDFs: ``(cells x components) @ weights``). These
are memory-bound; OpenBLAS splits them over its threads once they pass a few thousand entries,
and on a busy machine the threads wait for each other (``np.dot`` of 3e5 doubles under load:
27 ms with the default threads, 0.6 ms with one). :func:`single_blas_thread` limits BLAS to one
thread for the duration of an evaluation and restores the caller's setting afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["single_blas_thread"]

_CONTROLLER: list[Any] = []  # one ThreadpoolController, created on first use (a few ms)


@contextlib.contextmanager
def single_blas_thread() -> Iterator[None]:
    """Context in which BLAS runs on one thread (a no-op without ``threadpoolctl``)."""
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # optional at run time: the result is the same, only slower
            _CONTROLLER.append(None)
        else:
            _CONTROLLER.append(ThreadpoolController())
    controller = _CONTROLLER[0]
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield
