"""The command line as a user meets it."""

import json

import pytest

from prism_analytic.cli import main


def test_demo_json_reports_quantiles_inside_their_brackets(capsys):
    assert main(["demo", "--gpus", "1024", "--ops", "16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("p50_s", "p99_s", "p999_s"):
        q = {"p50_s": "0.5", "p99_s": "0.99", "p999_s": "0.999"}[key]
        low, high = out["bracket"][q]
        assert low <= out[key] <= high
    assert out["p50_s"] < out["p99_s"] < out["p999_s"]


def test_demo_text_mentions_the_scale(capsys):
    assert main(["demo", "--gpus", "65536"]) == 0
    assert "65,536 GPUs" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv", [["demo", "--gpus", "0"], ["demo", "--cv", "nan"], ["demo", "--ops", "x"]]
)
def test_demo_rejects_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "expected" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--scheduler", "local"], "--scheduler distributes Monte Carlo blocks"),
        (["--tolerance", "2"], "--tolerance: must be a relative error in [0, 1)"),
        (["--config", "/no/such.toml"], "--config: no such config file"),
    ],
)
def test_predict_rejects_bad_arguments_before_any_work(argv, message, capsys):
    try:
        status = main(["predict", "--preset", "llama3-8b", "--gpus", "8", *argv])
    except SystemExit as exc:  # argparse's own checks exit; the command's return 2
        status = exc.code
    assert status == 2
    assert message in capsys.readouterr().err
