"""Errors raised by the trace readers and the trace model."""

from __future__ import annotations

__all__ = ["TraceFormatError", "require_pandas"]


class TraceFormatError(ValueError):
    """A trace file or table that cannot be read as the canonical event table.

    The message names the file, the row or event, and the problem.
    """


def require_pandas():
    """Import pandas lazily; a clear message when the ``traces`` extra is missing.

    Returns
    -------
    module
        The ``pandas`` module.
    """
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "reading traces needs pandas and pyarrow: pip install 'prism_analytic[traces]'"
        ) from exc
    return pd
