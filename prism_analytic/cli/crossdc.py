"""Placeholder (being written)."""


def register(subparsers):
    """Not yet available."""
