"""Where the measured data live: an explicit path, ``$PRISM_DATA``, or ``../shared/data``.

The package never looks for data relative to its own location: an installed wheel has no
repository around it. The default is relative to the current directory, which is what a user
running from a checkout beside ``shared/`` expects.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["data_root", "DEFAULT_DATA_DIR"]

DEFAULT_DATA_DIR = Path("..") / "shared" / "data"


def data_root(path: str | Path | None = None) -> Path:
    """The folder of shared measured data.

    Parameters
    ----------
    path : str or Path, optional
        Explicit folder. Otherwise ``$PRISM_DATA``, otherwise ``../shared/data`` relative to
        the current working directory.

    Returns
    -------
    Path
        The resolved folder.

    Raises
    ------
    FileNotFoundError
        When the folder does not exist; the message says where it looked and why.
    """
    if path is not None:
        folder, how = Path(path), "the path argument"
    elif os.environ.get("PRISM_DATA"):
        folder, how = Path(os.environ["PRISM_DATA"]), "$PRISM_DATA"
    else:
        folder, how = (
            DEFAULT_DATA_DIR,
            "the default ../shared/data (relative to the current directory)",
        )
    if not folder.is_dir():
        raise FileNotFoundError(
            f"shared data folder not found at {folder} (from {how}); pass a path or set PRISM_DATA"
        )
    return folder.resolve()
