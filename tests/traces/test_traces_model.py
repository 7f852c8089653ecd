"""Structure recovery, fitting, the step model and its comparison, on a known synthetic truth."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from _traces_synth import make_trace

from prism_analytic.traces import (
    EventTable,
    fit_latency,
    fit_trace_model,
    ljung_box,
    recover_structure,
    replay,
    unit_values,
)
from prism_analytic.traces.compare import compare_steps
from prism_analytic.traces.effects import warmup_steps
from prism_analytic.traces.predict import predict_trace
from prism_analytic.traces.readers import read_op_table


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    frame, times = make_trace(dp=2, pp=3, microbatches=4, steps=40, slow=((1, 1), 1.5), mb_sd=0.05)
    path = tmp_path_factory.mktemp("tr") / "synth.parquet"
    frame.to_parquet(path)
    return read_op_table(path), times


def test_structure_recovers_the_schedule(synth):
    table, _ = synth
    s = recover_structure(table)
    # 2 dp x 2 stage boundaries x 4 microbatches x (forward + backward) hand-offs
    assert s.diagnostics["pipeline hand-offs"] == 32
    assert s.diagnostics["collective groups"] == {"grads-reduce-scatter": "same stage"}
    gap, dur = unit_values(s)
    np.testing.assert_allclose(replay(s, gap, dur), table.measured_step_times(), rtol=1e-9)


def test_noop_send_left_unpaired(synth):
    """A recorded send with no receive (a no-op record) is counted, the others still pair."""
    table, _ = synth
    f = table.frame
    last = f[(f["rank"] == 0) & (f["name"] == "forward-send")]
    last = last[last["seq_id"] == last["seq_id"].max()].copy()
    last["seq_id"] += 1
    last["start_s"] += last["duration_s"] + 1e-4
    last["duration_s"] = 0.0
    noisy = EventTable(pd.concat([f, last], ignore_index=True), "with no-op sends")
    s = recover_structure(noisy)
    assert s.diagnostics["pipeline hand-offs"] == 32
    assert s.diagnostics["pipeline send/recv without a peer (kept as single ops)"] == 1
    gap, dur = unit_values(s)
    np.testing.assert_allclose(replay(s, gap, dur), noisy.measured_step_times(), rtol=1e-9)


def test_hidden_dependency_found(tmp_path):
    """A wait on an unrecorded event is found from the timing and its lag measured."""
    from prism_analytic.traces.hidden import find_hidden_dependencies

    # rank (1, 2)'s optimizer waits for rank (0, 0)'s last backward + 30 ms (unrecorded)
    frame, _ = make_trace(dp=2, pp=3, steps=24, mb_sd=0.05, hidden=((1, 2), (0, 0), 0.03))
    path = tmp_path / "h.parquet"
    frame.to_parquet(path)
    s = recover_structure(read_op_table(path))
    gap, dur = unit_values(s)
    found = find_hidden_dependencies(s, gap, dur, np.arange(24), 1e-3)
    waiter = [h for h in found if s.ranks[s.units[h.unit][0]] == 5]
    assert len(waiter) == 1
    h = waiter[0]
    anchor = s.units[h.anchor][0]
    assert s.ranks[anchor] == 0 and "backward" in s.names[anchor]
    assert h.at == "start" and np.mean(h.lag) == pytest.approx(0.03 + 1e-4, abs=2e-3)


def test_replay_is_monotone(synth):
    table, _ = synth
    s = recover_structure(table)
    gap, dur = unit_values(s)
    slower = replay(s, gap, dur * 1.1)
    assert (slower >= replay(s, gap, dur)).all()


def test_effects_and_factors_detected(synth):
    table, _ = synth
    r = predict_trace(table, samples=2000, analytic="off", library=False)
    slow = r.effects["slow_ranks"]
    assert [x["rank"] for x in slow] == [4]
    assert slow[0]["slowdown"] == pytest.approx(1.5, rel=0.05)
    assert r.effects["shared_factors"]["microbatch_factor"]["significant"]
    assert r.effects["shared_factors"]["microbatch_factor"]["sd_rel"] == pytest.approx(
        0.05, rel=0.3
    )
    assert r.effects["stage_imbalance"] > 1.1  # the last stage is 1.5x longer
    d = r.to_dict()
    for key in ("mean_s", "std_s", "p50_s", "p90_s", "p95_s"):
        assert key in d["predicted"] and key in d["measured"]
    assert d["out_of_sample"] and not set(d["fit_steps"]) & set(d["predicted_steps"])


def test_prediction_matches_held_out_steps(synth):
    table, _ = synth
    r = predict_trace(table, samples=4000, fit_steps="second-half", analytic="off", library=False)
    m = r.metrics
    assert abs(m["mean_rel_err"]) < 0.01
    assert 0.6 < m["std_ratio"] < 1.6
    assert m["ks_shape_pvalue"] > 0.01


def test_fitted_comm_sampling(synth):
    table, _ = synth
    s = recover_structure(table)
    model = fit_trace_model(s, np.arange(20), comm_sampling="fitted")
    assert model.comm_ratio and model.sample(500, 0).std() > 0
    with pytest.raises(ValueError, match="comm_sampling"):
        fit_trace_model(s, np.arange(20), comm_sampling="both")


def test_independent_draws_understate_the_spread(synth):
    """Drawing each microbatch's ops independently loses the shared factor's spread."""
    table, _ = synth
    s = recover_structure(table)
    model = fit_trace_model(s, np.arange(40))
    full = model.sample(4000, 1).std()
    indep = copy.copy(model)
    indep.mb_factor = None
    indep.rank_step_level = np.zeros_like(model.rank_step_level)
    assert indep.sample(4000, 1).std() < 0.8 * full


def test_typical_step_near_median(synth):
    table, _ = synth
    r = predict_trace(table, samples=500, analytic="off", library=False)
    assert r.typical["per_rank_s"] == pytest.approx(r.typical["measured_median_s"], rel=0.03)


def test_analytic_engine_agrees_with_replay(synth):
    """The analytic mixture over fit-step states against the model's own Monte Carlo."""
    table, _ = synth
    small = EventTable(table.frame[table.frame["step"] < 20], "first 20 steps")
    r = predict_trace(small, samples=4000, analytic="on", library=False)
    a = r.analytic
    assert a["states"] == 10
    assert a["ks_vs_replay"] < 0.1
    assert a["engine_ks_vs_montecarlo"] < 0.05
    assert a["mean_s"] == pytest.approx(r.metrics["predicted"]["mean_s"], rel=0.005)
    with pytest.raises(ValueError, match="analytic"):
        predict_trace(small, analytic="maybe")


def test_latency_library_and_otsu(synth):
    from prism_analytic.traces.library import fit_signatures, otsu_split, otsu_threshold

    table, _ = synth
    s = recover_structure(table)
    lib = fit_signatures(s, np.arange(20))
    kinds = {e["kind"] for e in lib}
    assert kinds == {"op", "comm"}
    fitted = [e for e in lib if e.get("ks") is not None]
    assert fitted and all(0 <= e["ks"] <= 1 for e in fitted)
    x = np.r_[np.full(50, 1.0), np.full(50, 5.0)]
    assert 1.0 < otsu_threshold(x) < 5.0
    split = otsu_split(table)
    assert split["transfer"]["median_s"] < split["threshold_s"] < split["bubble_wait"]["median_s"]
    with pytest.raises(ValueError, match="two distinct"):
        otsu_threshold([1.0, 1.0])


def test_fit_latency_families():
    rng = np.random.default_rng(2)
    g = fit_latency(rng.gamma(5.0, 1.0, 400))
    assert g.family != "empirical" and g.ks_pvalue > 0.01
    assert g.mean_ci[0] < 5.0 < g.mean_ci[1]
    bimodal = np.concatenate([rng.normal(1, 0.01, 300), rng.normal(2, 0.01, 300)])
    assert fit_latency(bimodal).family == "empirical"
    assert fit_latency(rng.normal(size=50), criterion="ks").criterion == "ks"
    with pytest.raises(ValueError, match="at least 8"):
        fit_latency([1.0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        fit_latency([1.0] * 9 + [np.nan])
    with pytest.raises(ValueError, match="unknown"):
        fit_latency(rng.normal(size=20), families=["cauchy"])


def test_fit_draws_stay_plausible():
    """A tiny spiky sample must not yield a law with absurd draws (Cauchy-like fits refused)."""
    x = np.r_[np.ones(12), 1.001, 0.999, 1.2]
    fit = fit_latency(x)
    draws = fit.sample(20000, np.random.default_rng(0))
    assert draws.max() < x.max() + 3 * np.ptp(x)


def test_ljung_box():
    rng = np.random.default_rng(0)
    assert ljung_box(rng.normal(size=60)) > 0.01
    assert ljung_box(np.cumsum(rng.normal(size=60))) < 1e-6


def test_compare_identical():
    rng = np.random.default_rng(0)
    x = rng.normal(10, 0.1, 400)
    out = compare_steps(x, x)
    assert out["mean_rel_err"] == 0 and out["std_ratio"] == pytest.approx(1.0)
    assert out["p95_in_measured_ci"] and out["ks"] == 0
    with pytest.raises(ValueError, match="at least 4"):
        compare_steps(x, x[:3])


def test_warmup_detection():
    x = np.r_[3.0, 2.9, np.random.default_rng(0).normal(2.0, 0.01, 30)]
    assert warmup_steps(x) == 2
    assert warmup_steps(x[2:]) == 0


def test_bad_arguments(synth):
    table, _ = synth
    with pytest.raises(ValueError, match="fit_steps"):
        predict_trace(table, fit_steps="middle")
    with pytest.raises(ValueError, match="samples"):
        predict_trace(table, samples=10)
    small = EventTable(table.frame[table.frame["step"] < 6], "small")
    with pytest.raises(ValueError, match="need at least 8"):
        predict_trace(small)


def test_context_parallel_groups_found():
    """A collective within each (dp rank, stage) pair of ranks (context parallel) is grouped so."""
    rng = np.random.default_rng(4)
    rows = []
    for step in range(12):
        t0 = step * 10.0
        ends = {}
        for rank in range(8):
            dp, stage = rank // 4, (rank // 2) % 2
            d = 0.1 * np.exp(rng.normal(0, 0.05))
            rows.append((rank, dp, stage, step, "attn-compute", t0, d, 0))
            ends[rank] = t0 + d
        for rank in range(8):
            dp, stage = rank // 4, (rank // 2) % 2
            peer = rank ^ 1
            done = max(ends[rank], ends[peer]) + 0.001
            rows.append((rank, dp, stage, step, "cp-all-gather", ends[rank], done - ends[rank], -1))
    frame = pd.DataFrame(
        rows,
        columns=["rank", "dp_rank", "stage", "step", "optype", "start_ts", "duration", "mb_id"],
    )
    frame["seq_id"] = 0
    s = recover_structure(EventTable(_canonical(frame), "cp"))
    assert s.diagnostics["collective groups"] == {
        "cp-all-gather": "same data-parallel rank and stage"
    }


def _canonical(frame):
    out = frame.rename(
        columns={
            "optype": "name",
            "start_ts": "start_s",
            "duration": "duration_s",
            "mb_id": "microbatch",
        }
    )
    out["chunk"] = -1
    return out
