"""Layouts from meta files and --layout strings: parsing, rank order, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from prism_analytic.traces.layout import (
    Layout,
    find_layout_meta,
    parse_layout,
    read_layout_meta,
)


def test_parse_layout_defaults_and_describe():
    lay = parse_layout("dp=2, pp=4,tp=2")
    assert (lay.dp, lay.pp, lay.tp, lay.cp, lay.sp, lay.ep, lay.vpp) == (2, 4, 2, 1, 1, 1, 1)
    assert lay.world_size == 16 and lay.describe() == "dp=2,pp=4,tp=2"
    assert parse_layout("dp=4,pp=2,sp=2").cp_slot == 2


@pytest.mark.parametrize(
    "text,match",
    [
        ("dp=2,xx=3", r"'xx=3' is not KEY=N with KEY one of dp, pp, tp, cp, sp, ep, vpp"),
        ("dp=2,dp=2", "dp given twice"),
        ("dp=two", r"dp must be an integer >= 1, got 'two'"),
        ("dp=0", r"dp must be an integer >= 1, got 0"),
        ("", "empty layout"),
        ("dp=2,cp=2,sp=2", "at most one may be > 1"),
        ("dp=3,ep=2", r"ep=2 must divide dp \* cp = 3"),
    ],
)
def test_parse_layout_errors_name_the_field(text, match):
    with pytest.raises(ValueError, match=match):
        parse_layout(text)


def test_megatron_rank_order():
    """rank = tp_i + tp * (cp_i + cp * (dp_i + dp * stage)); ep blocks of dp x cp."""
    lay = Layout(dp=4, pp=2, tp=2, cp=2, ep=4)
    r = np.arange(lay.world_size)
    c = lay.coords(r)
    rebuilt = c["tp"] + 2 * (c["cp"] + 2 * (c["dp"] + 4 * c["pp"]))
    np.testing.assert_array_equal(rebuilt, r)
    # rank 13 = tp 1, cp 0, dp 3, stage 0: its dp x cp index 6 is in expert block 1
    assert [int(c[k][13]) for k in ("tp", "cp", "dp", "pp", "ep_block")] == [1, 0, 3, 0, 1]


def test_meta_files(tmp_path):
    trace = tmp_path / "trace-X.parquet"
    trace.write_bytes(b"")
    assert find_layout_meta(trace) is None
    meta = tmp_path / "meta-X.yaml"
    meta.write_text("dp_size: 2\npp_size: 2\ntp_size: 2\ndsp_size: 1\nworld_size: 8\n")
    assert find_layout_meta(trace) == meta
    lay = read_layout_meta(meta)
    assert lay.world_size == 8 and lay.source == str(meta)
    meta.write_text("dp_size: 2\npp_size: 2\ntp_size: 2\nworld_size: 16\n")
    with pytest.raises(ValueError, match=r"world_size 16 is not tp\*cp\*dp\*pp = 8"):
        read_layout_meta(meta)
    meta.write_text("dp_size: 2\n")
    with pytest.raises(ValueError, match="needs dp_size and pp_size"):
        read_layout_meta(meta)
    meta.write_text("dp_size: 2\npp_size: x\n")
    with pytest.raises(ValueError, match="pp_size must be an integer >= 1, got 'x'"):
        read_layout_meta(meta)
    meta.write_text("dp_size: 2\npp_size: 2\nschedule: gpipe\n")
    with pytest.raises(ValueError, match="schedule must be '1f1b' or 'interleaved'"):
        read_layout_meta(meta)


def test_shared_meta_files(shared_data):
    folder = shared_data / "straggler_traces"
    st = read_layout_meta(find_layout_meta(folder / "trace-ST.parquet"))
    ar = read_layout_meta(find_layout_meta(folder / "trace-AR.parquet"))
    assert (st.dp, st.pp, st.tp, st.world_size) == (2, 4, 1, 8)
    assert (ar.dp, ar.pp, ar.tp, ar.world_size) == (4, 4, 4, 64)


def test_chunks_beyond_vpp_contradict():
    from test_structure_synth import _table

    from prism_analytic.traces.layout import check_layout
    from prism_analytic.traces.structure import recover_structure
    from prism_analytic.traces.synth import SynthJob, simulate

    trace = simulate(SynthJob(pp=2, vpp=2, microbatches=4, schedule="interleaved"), 12, seed=0)
    s = recover_structure(_table(trace))
    assert check_layout(Layout(pp=2, vpp=2), s) == []
    wrong = check_layout(Layout(pp=2), s)
    assert wrong == [
        "ops are recorded with model chunk 1 (column mc), the layout has vpp=1 chunk(s) per stage"
    ]
