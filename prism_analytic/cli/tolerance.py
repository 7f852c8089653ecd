"""``--tolerance``: the relative error of a quantile a command accepts (predict, agreement)."""

from __future__ import annotations

import argparse

__all__ = ["relative_tolerance", "DEFAULT_TOLERANCE"]

#: Default tolerance: 0.1% of the quantile (``engines.crosscheck.DEFAULT_TOLERANCE``; repeated
#: here so that building the parser imports no engine).
DEFAULT_TOLERANCE = 0.001


def relative_tolerance(text: str) -> float:
    """A relative error in [0, 1), e.g. ``0.001`` for 0.1% of the quantile."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a number in [0, 1) (e.g. 0.001 for 0.1%), got {text!r}"
        ) from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(
            f"must be a relative error in [0, 1) (e.g. 0.001 for 0.1%), got {text!r}"
        )
    return value
