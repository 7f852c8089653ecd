"""The README and docs/ are true: their Python examples run as doctests, their commands run.

The examples read two files a user would have: ``trace.csv`` (a per-op trace, here simulated
by ``_traces_synth``) and ``steps.csv`` (a step log); both are written into a temporary
working directory before the examples run there.
"""

from __future__ import annotations

import doctest
import re
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest

from prism_analytic.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

#: The README's two setup commands; CI (.ci/run) runs the second one verbatim.
SETUP = (
    "pip install . && prism predict --preset llama3-405b --gpus 65536",
    "pip install -e '.[dev]' && ruff check . && ruff format --check . && python -m pytest -q",
)

#: Documented commands too slow to run in the test suite (each was run by hand): why.
SLOW = {"prism figures": "every paper figure (about a minute)"}


def _bash_commands(path: Path) -> list[str]:
    """The ``prism ...`` lines of the file's ```bash blocks (continuations joined)."""
    text = path.read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith("prism "):
                out.append(line)
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A working directory holding the files the examples read."""
    pytest.importorskip("pandas")
    sys.path.insert(0, str(Path(__file__).parent))
    from _traces_synth import make_trace

    folder = tmp_path_factory.mktemp("readme")
    frame, _ = make_trace(steps=20, seed=1)
    frame.to_csv(folder / "trace.csv", index=False)
    # step logs of llama3-8b on 8 and 64 GPUs: steps near the predicted medians, with jitter
    rng = np.random.default_rng(0)
    for name, median in (("steps.csv", 47.7), ("steps_64.csv", 6.2)):
        steps = median * (1 + 0.004 * rng.standard_normal(200))
        (folder / name).write_text("step_time_s\n" + "\n".join(f"{s:.4f}" for s in steps) + "\n")
    for gpus in (8, 64):
        (folder / f"job_{gpus}.toml").write_text(f'[job]\npreset = "llama3-8b"\ngpus = {gpus}\n')
    return folder


def _in(folder: Path, monkeypatch) -> None:
    monkeypatch.chdir(folder)
    import matplotlib

    matplotlib.use("Agg")


def test_readme_is_short_and_keeps_the_setup_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for command in SETUP:
        assert command in text


def test_readme_python_examples(workdir, monkeypatch):
    _in(workdir, monkeypatch)
    result = doctest.testfile(str(README), module_relative=False, optionflags=FLAGS)
    assert result.attempted >= 15
    assert result.failed == 0


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_python_examples(doc, workdir, monkeypatch):
    _in(workdir, monkeypatch)
    result = doctest.testfile(str(doc), module_relative=False, optionflags=FLAGS)
    assert result.failed == 0


@pytest.mark.parametrize("command", _bash_commands(README))
def test_readme_commands_run(command, workdir, monkeypatch, capsys):
    _in(workdir, monkeypatch)
    assert main(shlex.split(command)[1:]) == 0, capsys.readouterr().err


def _docs_commands() -> list[tuple[str, str]]:
    return [(doc.name, c) for doc in DOCS for c in _bash_commands(doc)]


@pytest.mark.parametrize(("doc", "command"), _docs_commands())
def test_docs_commands_parse(doc, command):
    """Every documented command line is one the parser accepts (options and values)."""
    args, extra = build_parser().parse_known_args(shlex.split(command)[1:])
    assert not extra, f"{doc}: {command}: unknown {extra}"


@pytest.mark.slow
@pytest.mark.parametrize(("doc", "command"), _docs_commands())
def test_docs_commands_run(doc, command, workdir, monkeypatch, capsys):
    why = next((w for prefix, w in SLOW.items() if command.startswith(prefix)), None)
    if why is not None:
        pytest.skip(f"{doc}: too slow for the suite ({why}); run by hand")
    _in(workdir, monkeypatch)
    assert main(shlex.split(command)[1:]) == 0, capsys.readouterr().err


def test_configuration_reference_is_up_to_date():
    sys.path.insert(0, str(ROOT / "docs"))
    from make_configuration import OUT, render

    assert OUT.read_text(encoding="utf-8") == render(), (
        "docs/configuration.md is out of date: run python docs/make_configuration.py"
    )


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_toml_examples_are_valid_jobs(doc):
    from prism_analytic.workload.jobs import load_config

    for block in re.findall(r"```toml\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S):
        assert load_config(block).gpus >= 1
