"""Regressions found by using the ``prism`` command as a new user would (QA pass)."""

import pytest

import prism_analytic as pa
from prism_analytic.cli import main


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (
            ["crossdc", "--preset", "llama3-70b", "--gpus", "1024", "--bandwidths", "1,10"]
            + ["--bisect-steps", "-1"],
            "--bisect-steps",
        ),
        (
            ["calibrate", "--preset", "llama3-70b", "--gpus", "1024", "--mfu", "0.4"]
            + ["--drop-first", "-1"],
            "--drop-first",
        ),
        (
            ["calibrate", "--preset", "llama3-70b", "--gpus", "1024", "--mfu", "0.4"]
            + ["--drop-first", "x"],
            "--drop-first",
        ),
    ],
)
def test_negative_counts_are_rejected_naming_the_argument(argv, name, capsys):
    # were accepted silently (crossdc ran with no bisection; calibrate ignored it with --mfu)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"prism {argv[0]}: error: argument {name}:")
    assert "integer >= 0" in err


def test_verify_keeps_the_bounds_note():
    # the bounds note was overwritten by the cross-check note, so `prism predict` printed
    # "guaranteed bounds: None" or the KS message instead of why bounds were not computed
    from prism_analytic.graph.pipeline import pipeline_step_graph

    replica = pipeline_step_graph(
        2, 4, lambda phase, stage, mb, chunk: pa.normal(1e-3, 5e-5), compact=True
    )
    step = pa.StepGraph("step")
    step.add_replica_group("dp", replica, n=4)
    result = pa.predict(step)
    assert not result.exact
    ver = pa.verify(step, result, samples=1000, bounds=False).verification
    assert ver["bounds"] is None
    assert ver["bounds_note"].startswith("not computed")
    ver = pa.verify(step, result, samples=1000, bounds=True).verification
    assert ver["bounds"] is not None
    assert ver["bounds_note"].startswith("computed in")


def test_unknown_option_is_reported_by_the_command(capsys):
    # was `prism: error: unrecognized arguments: --bogus`, with the top-level usage
    with pytest.raises(SystemExit) as exc:
        main(["presets", "--bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage: prism presets" in err
    assert err.strip().splitlines()[-1] == "prism presets: error: unrecognized arguments: --bogus"


def test_trace_predict_says_where_the_plot_went(tmp_path, capsys):
    # every other command prints "plot written to FILE"; trace-predict wrote it silently
    pytest.importorskip("pandas")
    from _traces_synth import make_trace

    frame, _ = make_trace(steps=24, mb_sd=0.03, seed=5)
    trace = tmp_path / "t.parquet"
    frame.to_parquet(trace)
    plot = tmp_path / "cdf.png"
    argv = ["trace-predict", str(trace), "--samples", "300", "--analytic", "off"]
    assert main(argv + ["--plot", str(plot)]) == 0
    assert f"plot written to {plot}" in capsys.readouterr().out
    assert plot.stat().st_size > 0


def test_a_closed_pipe_ends_quietly():
    # `prism ... | head`: the reader leaves before the output is written; no traceback, the
    # shell's status for SIGPIPE (128 + 13)
    import subprocess
    import sys

    code = (
        "import builtins, sys\n"
        "from prism_analytic.cli import main\n"
        "write = builtins.print\n"
        "builtins.print = lambda *a, **k: write('x' * 200_000, **k)\n"
        "sys.exit(main(['presets']))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait() == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err
