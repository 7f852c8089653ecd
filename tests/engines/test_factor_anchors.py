"""The anchor rule of engines/pipeline_factors.py against the core at every design point.

The anchor line maps the cheap independent-input Clark recursion onto the Clark-Mehler core.
The core's bias is not a function of the cheap one (it scatters about the line), so a line
through a fixed 8 anchors is a noisy estimate: on the agreement's r90 8x32 row it left KS
0.0033 against 1e6 Monte Carlo samples (0.0011 with the line at all points). The reference here
is exact for the line's job: the core evaluated at every point of a 1,024-point design of an
r90-like 1F1B 6x16 pipeline (stored by ``validation/factor_anchor_reference.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import special

from prism_analytic.engines import pipeline_factors as pf
from validation import factor_anchor_reference as ref  # the repo root is on pytest's path

DATA = Path(__file__).parents[1] / "data" / "factor_anchor_6x16.npz"
#: The tolerance the engine gives the rule on its default 2**18 mean-path points.
TOL = pf.anchor_tolerance(pf.MAX_PATH_POINTS)
#: On this design the rule stops at its budget (128 anchors; its own error estimate stays
#: above TOL), so the mixture's error depends on the anchors drawn: over the anchor seeds
#: SEED + 0..19 it was 0.0008-0.0021, at most 2.2 TOL. The fixed 8-anchor
#: line's 0.0033 (3.4 TOL) fails the same bound.
ALLOW = 2.5


@pytest.fixture(scope="module")
def case() -> dict:
    stored = np.load(DATA)
    d = ref.design()
    return {"spec": ref.spec(), "d": d, **{k: stored[k] for k in stored.files}}


def _lookup_core(case: dict):
    """The stored core values, looked up by the condition's factor row."""
    table = {row.tobytes(): j for j, row in enumerate(case["d"]["w"])}

    def core(w, s):
        j = table[np.asarray(w, dtype=float).tobytes()]
        return float(case["mean"][j]), float(case["var"][j])

    return core


def _ks(case: dict, mean: np.ndarray, sd: np.ndarray) -> float:
    """Sup distance between the line's mixture and the all-points core's, on a fine grid."""
    emu, esd, wt = case["mean"], np.sqrt(case["var"]), case["d"]["weight"]
    g = np.linspace((emu - 6 * esd).min(), (emu + 6 * esd).max(), 4000)[:, None]
    return float(
        np.abs(special.ndtr((g - mean) / sd) @ wt - special.ndtr((g - emu) / esd) @ wt).max()
    )


def test_stored_reference_is_current(case):
    # the same design, and the live core gives the stored values (else: regenerate the file)
    d = case["d"]
    assert np.array_equal(d["weight"], case["weight"])
    assert np.allclose(d["w"].sum(axis=1), case["w_sum"], rtol=1e-12, atol=0)
    live = ref.core()
    for j in (0, 500, d["weight"].size - 1):
        mu, var = live(d["w"][j], None)
        assert mu == pytest.approx(case["mean"][j], rel=1e-9)
        assert var == pytest.approx(case["var"][j], rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adaptive_line_matches_the_core_at_every_point(case, seed):
    # for these anchor draws the rule's mixture is within ALLOW x TOL of the exact one
    d = case["d"]
    mean, sd, info = pf.anchored_laws(
        case["spec"], d["w"], None, d["weight"], _lookup_core(case), tol=TOL, seed=pf.SEED + seed
    )
    assert info["anchor_rule"] == "adaptive" and info["anchors"] > pf.N_ANCHORS
    assert info["anchors"] <= max(pf.N_ANCHORS, pf.ANCHOR_BUDGET // case["spec"].n_ops)
    assert _ks(case, mean, sd) <= ALLOW * TOL


def test_rule_stops_once_its_error_is_below_tol(case):
    # a loose tolerance is met by the first 8 anchors; a tight one doubles up to the budget
    d, core = case["d"], _lookup_core(case)
    _, _, loose = pf.anchored_laws(case["spec"], d["w"], None, d["weight"], core, tol=1.0)
    assert loose["anchors"] == pf.N_ANCHORS and not loose["anchor_budget_reached"]
    _, _, tight = pf.anchored_laws(case["spec"], d["w"], None, d["weight"], core, tol=0.0)
    assert tight["anchor_budget_reached"]
    cap = max(pf.N_ANCHORS, pf.ANCHOR_BUDGET // case["spec"].n_ops)
    assert tight["anchors"] <= cap < 2 * tight["anchors"]  # doubled while it fits the budget
    with pytest.raises(ValueError, match="anchors"):
        pf.anchored_laws(case["spec"], d["w"], None, d["weight"], core, 0)


def test_fixed_eight_anchor_line_misses(case):
    # the former rule (8 anchors at (i + 1/2) / 8) fails the same check
    d = case["d"]
    mean, sd, _ = pf.anchored_laws(case["spec"], d["w"], None, d["weight"], _lookup_core(case), 8)
    assert _ks(case, mean, sd) > ALLOW * TOL


def test_anchor_levels_are_nested_and_stratified():
    a8, a64 = pf.anchor_levels(8), pf.anchor_levels(64)
    assert np.array_equal(a64[:8], a8)
    for k in (8, 16, 32, 64):
        assert np.array_equal(np.sort(np.floor(a64[:k] * k)), np.arange(k))
    with pytest.raises(ValueError, match="anchor count"):
        pf.anchor_levels(0)
    with pytest.raises(ValueError, match="points"):
        pf.anchor_tolerance(0)


def test_line_cdf_effect_is_the_first_order_shift():
    # one standard normal moved by e: sup |Phi(x - e) - Phi(x)| = e phi(0) to first order;
    # its sd scaled by 1 + e: sup |z| phi(z) e = e phi(1)
    one = np.ones(1)
    e = 1e-4
    shift = pf.line_cdf_effect(one, np.zeros(1), one, e * one, 0 * one)
    assert shift == pytest.approx(e / np.sqrt(2 * np.pi), rel=1e-3)
    scale = pf.line_cdf_effect(one, np.zeros(1), one, 0 * one, e * one)
    assert scale == pytest.approx(e * np.exp(-0.5) / np.sqrt(2 * np.pi), rel=1e-3)
    x = np.linspace(-8, 8, 200001)
    assert shift == pytest.approx(np.abs(special.ndtr(x - e) - special.ndtr(x)).max(), rel=1e-3)


def test_binning_on_the_mean_path_keeps_the_mixtures_moments(case):
    # what factor_components' docstring states: at the core's own points, the binned bias and
    # variance keep the mixture's mean and variance up to the interpolation (measured on this
    # design: mean -2.2e-4 of a conditional sd, sd +1.5e-4 relative); the bias scatter that
    # L does not explain moves into the conditional variance
    d, spec = case["d"], case["spec"]
    wt, mean, sd = d["weight"], case["mean"], np.sqrt(case["var"])
    path = pf.mean_paths(spec, d["w"], None)
    bias, var, share = pf._binned(path, mean - path, sd, path, wt)
    m0, m1 = wt @ mean, wt @ (path + bias)
    v0, v1 = wt @ (sd**2 + mean**2) - m0**2, wt @ (var + (path + bias) ** 2) - m1**2
    cond_sd = np.sqrt(wt @ sd**2)
    assert abs(m1 - m0) <= 1e-3 * cond_sd
    assert abs(np.sqrt(v1 / v0) - 1) <= 1e-3
    # (without the scatter the conditional variance would be 2.8% smaller here)
    assert wt @ var == pytest.approx(wt @ sd**2 * (1 + share), rel=0.005)


def test_spline_fit_follows_curvature_a_line_misses():
    # the anchor curve is piecewise linear with ceil(K**(1/5)) pieces; on a curved relation
    # it misses by less than a line does, and its standard error is the OLS one (line: exact)
    assert [pf.segments(k) for k in (8, 32, 64, 128, 256, 512)] == [2, 2, 3, 3, 4, 4]
    at = np.linspace(0.0, 1.0, 2001)
    wt = np.full(at.size, 1.0 / at.size)
    x = at[::8]
    fit, se, r = pf._spline_fit(x, x**2, at, wt)
    line = np.polyval(np.polyfit(x, x**2, 1), at)
    assert np.abs(fit - at**2).max() < 0.3 * np.abs(line - at**2).max()
    y = 1.0 + 2.0 * x + np.random.default_rng(1).normal(0, 0.1, x.size)
    fit1, se1, r1 = pf._fit(x[:2], y[:2], at)  # two points: a line, no residual
    assert r1 == 0.0 and np.allclose(fit1, np.polyval(np.polyfit(x[:2], y[:2], 1), at))
    fit, se, r = pf._spline_fit(x[:4], y[:4], at, wt)  # 4 anchors: one piece, OLS line
    line_fit, line_se, line_r = pf._fit(x[:4], y[:4], at)
    assert np.allclose(fit, line_fit) and np.allclose(se, line_se) and r == pytest.approx(line_r)


@pytest.mark.parametrize("pieces", [1, 3])
@pytest.mark.parametrize("with_l", [False, True])
def test_spline_press_is_the_leave_one_out_error(pieces, with_l):
    # the closed form sum (e_i / (1 - h_ii))**2 equals refitting without each anchor in turn
    # (the knots depend on `at` only, so every refit has the same basis)
    rng = np.random.default_rng(3)
    at = np.linspace(0.0, 1.0, 2001)
    wt = np.full(at.size, 1.0 / at.size)
    c = np.sin(3 * at) + rng.normal(0, 0.05, at.size)
    idx = np.arange(0, at.size, 50)
    y = at[idx] ** 2 + 0.3 * c[idx] + rng.normal(0, 0.02, idx.size)
    cov = (lambda keep: (c[idx][keep], c)) if with_l else (lambda keep: None)
    every = np.ones(idx.size, dtype=bool)
    *_, press = pf._spline_model(at[idx], y, at, wt, cov(every), pieces)
    loo = 0.0
    for i in range(idx.size):
        keep = every.copy()
        keep[i] = False
        fit, *_ = pf._spline_model(at[idx][keep], y[keep], at, wt, cov(keep), pieces)
        loo += (y[i] - fit[idx[i]]) ** 2
    assert press == pytest.approx(loo, rel=1e-8)
