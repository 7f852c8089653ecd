"""Start-up cost: ``prism --help`` and argument errors import no numerical library.

What is asserted is the *import set* of a fresh interpreter (wall-clock times depend on the
machine): ``import prism_analytic`` is lazy (PEP 562), the ``prism`` parser lists the commands
from a table, and only the command that runs is imported, with its heavy imports inside its
run function.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import prism_analytic
from prism_analytic import cli

#: Libraries that cost tenths of a second each to import; none is needed to parse arguments.
HEAVY = ("numpy", "scipy", "matplotlib", "pandas", "pyarrow", "networkx", "sympy", "statsmodels")


def _fresh(code: str) -> dict:
    """Run ``code`` in a new interpreter; it prints one JSON object as its last line."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


_RUN_MAIN = """
import contextlib, io, json, sys
import prism_analytic, prism_analytic.cli
heavy = {heavy!r}
results = {{}}
for argv in {argvs!r}:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            status = prism_analytic.cli.main(argv)
        except SystemExit as exc:
            status = exc.code
    loaded = [m for m in heavy if m in sys.modules]
    results[" ".join(argv)] = {{"status": status, "heavy": loaded, "stderr": err.getvalue()}}
print(json.dumps(results))
"""


def _run_main(*argvs: list[str]) -> dict:
    """``cli.main(argv)`` for each argv in turn in one fresh interpreter: status, stderr and
    the heavy libraries loaded so far (cumulative, so the first argv that loads one shows)."""
    return _fresh(_RUN_MAIN.format(heavy=HEAVY, argvs=list(argvs)))


def test_import_prism_analytic_is_light():
    got = _fresh(
        f"""
        import json, sys
        import prism_analytic, prism_analytic.cli
        print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))
        """
    )
    assert got == []


def test_help_imports_no_numerical_library():
    res = _run_main(["--help"])["--help"]
    assert res["status"] == 0
    assert res["heavy"] == []


def test_argument_errors_import_no_numerical_library():
    argvs = [
        ["predict", "--gpus", "-3"],
        ["predict", "--preset", "nosuch", "--gpus", "8"],
        ["nosuch"],
    ] + [[name, "--no-such-option"] for name in cli.COMMANDS]
    res = _run_main(*argvs)
    for argv in argvs:
        key = " ".join(argv)
        assert res[key]["status"] == 2, (key, res[key])
        assert res[key]["heavy"] == [], f"`prism {key}` imported {res[key]['heavy']}"
    assert "--gpus: expected a positive integer" in res["predict --gpus -3"]["stderr"]
    assert "unknown model preset 'nosuch'" in res["predict --preset nosuch --gpus 8"]["stderr"]
    assert "invalid choice: 'nosuch'" in res["nosuch"]["stderr"]


def test_each_command_help_is_light():
    argvs = [[name, "--help"] for name in cli.COMMANDS]
    res = _run_main(*argvs)
    for argv in argvs:
        key = " ".join(argv)
        assert res[key]["status"] == 0, (key, res[key])
        assert res[key]["heavy"] == [], f"`prism {key}` imported {res[key]['heavy']}"


def test_the_command_table_matches_each_module():
    """The help lines ``prism --help`` shows (the table) are the ones each command registers."""
    parser = cli.build_parser()  # every command registered
    sub = next(a for a in parser._actions if a.dest == "command")
    registered = {a.dest: a.help for a in sub._choices_actions}
    assert registered == {name: help_line for name, (_, help_line) in cli.COMMANDS.items()}
    assert list(sub.choices) == list(cli.COMMANDS)


def test_the_lazy_parser_lists_every_command():
    lazy = cli.build_parser(None).format_help()
    for name, (_, help_line) in cli.COMMANDS.items():
        assert name in lazy
        assert help_line.split()[0] in lazy


def test_build_parser_refuses_an_unknown_command():
    with pytest.raises(ValueError, match="command: expected one of predict"):
        cli.build_parser("nosuch")


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["--help"], None),
        ([], None),
        (["predict", "--gpus", "8"], "predict"),
        (["-h", "trace-predict"], "trace-predict"),
        (["nosuch", "predict"], None),
        (["--", "predict"], None),
    ],
)
def test_chosen_command(argv, command):
    assert cli.chosen_command(argv) == command


def test_preset_check_words_it_as_build_job_does():
    from prism_analytic.workload.jobs import build_job

    with pytest.raises(ValueError) as from_job:
        build_job("nosuch", 8)
    with pytest.raises(ValueError) as from_cli:
        cli.check_preset_name("nosuch")
    assert str(from_cli.value) == str(from_job.value)
    cli.check_preset_name("llama3-8b")  # a known one passes
    cli.check_preset_name(None)  # a whole-job --config
    cli.check_preset_name(["a", "b"])  # a sweep's list: the sweep checks it


@pytest.mark.parametrize("command", ["predict", "sweep", "optimize"])
def test_cli_method_choices_are_the_engines(command):
    """The commands list the engines' names without importing the engines; same names."""
    from prism_analytic.engines.predict import METHODS

    sub = next(a for a in cli.build_parser(command)._actions if a.dest == "command")
    method = next(a for a in sub.choices[command]._actions if a.dest == "method")
    assert set(method.choices) == set(METHODS)


def test_lazy_package_namespace():
    assert set(prism_analytic._LAZY_NAMES) == set(prism_analytic.__all__)
    assert set(prism_analytic.__all__) <= set(dir(prism_analytic))
    for name in prism_analytic.__all__:
        module = prism_analytic._LAZY_NAMES[name]
        source = __import__(f"prism_analytic{module}", fromlist=[name])
        assert getattr(prism_analytic, name) is getattr(source, name)
    assert isinstance(prism_analytic.__version__, str)
    with pytest.raises(AttributeError, match="no_such_name"):
        prism_analytic.no_such_name  # noqa: B018


def test_every_command_module_is_in_the_table():
    from pathlib import Path

    folder = Path(cli.__file__).parent
    with_register = {
        p.stem for p in folder.glob("*.py") if "\ndef register(" in p.read_text(encoding="utf-8")
    }
    assert with_register == set(cli.COMMAND_MODULES)
