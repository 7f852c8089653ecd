"""Every figure renders on a tiny case; the manifest lists them."""

import json

import pytest

from prism_analytic.cli import main
from prism_analytic.figures import FIGURES, make_all, maker

DATA = {
    "fig3_spatial_temporal",
    "fig4_clock_vs_time",
    "fig5_collective_latency",
    "traces_predicted_vs_measured",
}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_each_figure_renders(name, tmp_path, request):
    root = None
    if name in DATA:
        root = request.getfixturevalue("shared_data")
    e = maker(name)(tmp_path, root, tiny=True)
    assert e["figure"] == name and e["claim"] and e["data"]
    png = tmp_path / e["file"]
    assert png.stat().st_size > 5000
    assert png.read_bytes()[:4] == b"\x89PNG"
    json.dumps(e)


def test_make_all_writes_manifest(tmp_path):
    out = make_all(tmp_path, only=["evt_convergence"], tiny=True)
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert [x["figure"] for x in m] == ["evt_convergence"] == [x["figure"] for x in out]


def test_cli_bad_only(tmp_path, capsys):
    assert main(["figures", "--out", str(tmp_path), "--only", "fig2"]) == 2
    assert "--only" in capsys.readouterr().err
