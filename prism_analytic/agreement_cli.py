"""``prism agreement``: run the analytic-vs-Monte-Carlo agreement suite from the command line.

The suite lives in ``validation/agreement.py`` in the source repository, outside the installed
package, so it is located relative to this file and loaded by path. An installation without the
repository (a wheel) gets a clear error instead of an ImportError.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from .cli import sample_count

__all__ = ["register", "suite_path", "load_suite", "add_arguments"]

_MODULE_NAME = "prism_validation_agreement"


def suite_path() -> Path:
    """Where the agreement suite is expected: ``<repository>/validation/agreement.py``."""
    return Path(__file__).resolve().parents[1] / "validation" / "agreement.py"


def load_suite(path: Path | None = None) -> ModuleType:
    """Import the agreement suite from ``path`` (default :func:`suite_path`).

    Raises
    ------
    FileNotFoundError
        When the file does not exist (e.g. the package was installed without its repository).
    """
    path = suite_path() if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"the agreement suite was not found at {path}; it ships with the source repository "
            "(validation/agreement.py), not with the installed package. Run this command from an "
            "editable install of a repository checkout (pip install -e .)"
        )
    loaded = sys.modules.get(_MODULE_NAME)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    spec = importlib.util.spec_from_file_location(_MODULE_NAME, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"cannot load the agreement suite from {path}")
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the module executes
    sys.modules[_MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_MODULE_NAME]
        raise
    return module


def _cmd_agreement(args: argparse.Namespace) -> int:
    suite = load_suite()
    samples = suite.DEFAULT_SAMPLES if args.samples is None else args.samples
    seed = suite.DEFAULT_SEED if args.seed is None else args.seed
    return suite.run(
        samples,
        args.only,
        args.json,
        seed=seed,
        do_timing=args.timing,
        list_only=args.list,
        strict=args.strict,
        core_shape=args.core_shape,
    )


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The suite's options, shared by ``prism agreement`` and ``python validation/agreement.py``.

    ``--samples`` and ``--seed`` default to None: the suite's own defaults then apply.
    """
    p.add_argument(
        "--samples",
        type=sample_count,
        default=None,
        help="Monte Carlo samples per scenario (default: the suite's, 100,000)",
    )
    p.add_argument(
        "--seed", type=int, default=None, help="Monte Carlo seed (default: the suite's, 12345)"
    )
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these scenarios")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.add_argument(
        "--timing",
        action="store_true",
        help="instead of the scenarios, time analytic predict on a 16x64 1F1B "
        "pipeline inside 1, 512, 1e3 and 1e6 replicas",
    )
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit with status 1 when any scenario misses its targets",
    )
    p.add_argument(
        "--core-shape",
        default=None,
        metavar="SHAPE",
        help="core_shape of the analytic engine, e.g. template or normal (default: the engine's)",
    )
    return p


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``agreement`` subcommand to the ``prism`` parser's ``subparsers``.

    The options mirror ``python validation/agreement.py``; the suite itself is loaded only when
    the command runs, so building the parser stays cheap and works without the repository.
    """
    p = subparsers.add_parser(
        "agreement",
        help="analytic engine against Monte Carlo on the validation scenarios",
        description="Run the agreement suite (validation/agreement.py): KS distance, quantile "
        "and spread errors, bounds check and timings of the analytic engine against "
        "Monte Carlo on named scenarios.",
    )
    add_arguments(p)
    p.set_defaults(func=_cmd_agreement)
