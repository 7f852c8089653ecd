"""Kernel-class sensitivities: sympy closed forms vs the engine vs finite differences."""

import json
import math

import numpy as np
import pytest
import sympy as sp
from scipy import integrate, special, stats

from prism_analytic.analyses.perturb import class_time_per_rank, perturbed_graph
from prism_analytic.analyses.sensitivity import resolve, sensitivity
from prism_analytic.analyses.symbolic import (
    clark_formulae,
    closed_form_check,
    latex_formulae,
    max_normal_constants,
)
from prism_analytic.cli import main
from prism_analytic.distributions import from_scipy, normal, point_mass
from prism_analytic.engines.predict import predict
from prism_analytic.graph import StepGraph
from prism_analytic.policy import GridPolicy
from prism_analytic.workload.jobs import build_job, merge_config
from prism_analytic.workload.mean_model import op_means


def test_max_normal_constants_oracle():
    # E[max of 65,536 N(0,1)] = 4.2911, sd 0.2770 (closed-form oracle)
    m, s = max_normal_constants(65536)
    assert m == pytest.approx(4.2911, abs=2e-4) and s == pytest.approx(0.2770, abs=2e-4)


def test_symbolic_derivatives_match_engine_and_finite_differences():
    checks = closed_form_check(
        {"gemm": (0.6, 0.004), "attention": (0.12, 0.002), "allgather": (0.1, 0.02)}, 1024
    )
    assert len(checks) == 15
    for c in checks:
        assert c.rel_error < 0.01, (c.cls, c.quantity, c.symbolic, c.engine, c.finite_difference)


def test_clark_derivatives():
    # Clark's symbolic derivatives of E[max(A, B)] against the engine's central differences
    c = clark_formulae()
    vals = {"mu_A": 1.0, "sigma_A": 0.1, "mu_B": 1.05, "sigma_B": 0.05}
    subs = {c["symbols"][k]: v for k, v in vals.items()}

    def mean(v: dict) -> float:
        g = StepGraph("clark")
        g.add_op("A", normal(v["mu_A"], v["sigma_A"]))
        g.add_op("B", normal(v["mu_B"], v["sigma_B"]))
        g.add_op("join", normal(0.0, 1e-12), ["A", "B"])
        return float(predict(g).mean())

    for k, x in vals.items():
        step = 0.01 * x
        fd = (mean({**vals, k: x + step}) - mean({**vals, k: x - step})) / (2 * step)
        sym = float(c["d_mean"][k].subs(subs).evalf())
        assert sym == pytest.approx(fd, rel=0.01), k


def test_latex_mentions_implicit_quantile():
    text = latex_formulae()
    assert "z_{p}" in text and r"\Phi" in text and "erfc" in text


def test_variability_perturbation_keeps_mean_in_body():
    job = build_job("llama3-8b", 8)
    om = op_means(job)
    bodies = [
        predict(perturbed_graph(job, om, "gemm", "variability", f).node("replicas")["body"])
        for f in (0.0, 1.0, 2.0)
    ]
    var = [b.std() ** 2 for b in bodies]
    # the GEMM kernels' noise adds independently to a chain of sums: its variance scales as
    # factor^2, so var(2) - var(1) = 3 (var(1) - var(0)), whatever the other terms are
    assert var[1] > var[0]
    assert var[2] - var[1] == pytest.approx(3.0 * (var[1] - var[0]), rel=1e-3)
    assert bodies[2].mean() == pytest.approx(bodies[0].mean(), rel=1e-3)
    with pytest.raises(ValueError, match="kernel class"):
        perturbed_graph(job, om, "matmul", "mean", 1.1)


def test_fsdp_ranks_reduce_scatter_and_allgather_first():
    # the whole dp communication hideable (the shipped default exposes 86% of it) on a noisy
    # network (inter-node sigma of small messages; the default is the >= 64 MB value)
    over = {
        "parallelism": {"overlap": {"dp": 1.0}},
        "variability": {"network": {"inter_node": {"sigma": 0.17}}},
    }
    job = merge_config(build_job("llama3-8b", 256), over)
    r = sensitivity(job, classes=["gemm", "allgather", "reduce_scatter"])
    top = r.ranking("p95_drop_without_variability_s")
    assert set(top[:2]) == {"allgather", "reduce_scatter"}
    # they are hidden on average: exposed mean 0, yet their noise reaches the step
    per = class_time_per_rank(job, op_means(job))
    assert per["reduce_scatter"] == 0
    for c in r.classes:
        if c.key in ("reduce_scatter", "gemm"):
            assert c.d_p95_d_var is not None and c.d_p95_d_var_fd is not None
            assert c.d_p95_d_var == pytest.approx(c.d_p95_d_var_fd, rel=0.25)


def _lognormal_max_chain(n, mu, sigma, pol):
    body = StepGraph("rank")
    body.add_op("fixed", point_mass(1.0))
    body.add_op("kernel", from_scipy(stats.lognorm(s=sigma, scale=math.exp(mu))), ["fixed"])
    g = StepGraph("step")
    g.add_replica_group("ranks", body, n)
    return predict(g, policy=pol)


def test_lognormal_max_chain_derivatives_match_sympy():
    # slowest of n i.i.d. ranks, each a chain 1 s + LogNormal(mu, sigma): with
    # Z_max ~ n phi Phi^(n-1), E = 1 + E[exp(mu + sigma Z_max)], q_p = 1 + exp(mu + sigma z_p)
    n, mu, sig0, h = 64, math.log(0.5), 0.1, 0.02
    z, s, m = sp.symbols("z sigma mu", real=True)
    dmean_dlogs = sp.lambdify((z, s, m), sp.diff(sp.exp(m + s * z), s) * s)
    zp = float(special.ndtri(0.95 ** (1 / n)))
    q_sym = sp.exp(m + s * sp.Float(zp))
    dq_dlogs = float((sp.diff(q_sym, s) * s).subs({s: sig0, m: mu}))

    def wmax(x):
        return n * stats.norm.pdf(x) * special.ndtr(x) ** (n - 1)

    sym = integrate.quad(lambda x: dmean_dlogs(x, sig0, mu) * wmax(x), -12, 12, limit=200)[0]
    pol = GridPolicy(rel_width=5e-5)  # one policy for both laws
    hi = _lognormal_max_chain(n, mu, sig0 * (1 + h), pol)
    lo = _lognormal_max_chain(n, mu, sig0 * (1 - h), pol)
    fd_mean = (float(hi.mean()) - float(lo.mean())) / (2 * h)
    fd_q = (float(hi.quantile(0.95)) - float(lo.quantile(0.95))) / (2 * h)
    assert sym > 0 and fd_mean > 0
    assert fd_mean == pytest.approx(sym, rel=0.01)
    assert fd_q == pytest.approx(dq_dlogs, rel=0.01)


def test_resolve_reports_values_below_resolution_as_unresolved():
    fine = {"d_mean_d_var": -1.3e-6, "d_p95_d_var": 7.16e-5, "d_p95_d_var_fd": 7.16e-5}
    coarse = {"d_mean_d_var": 1.2e-6, "d_p95_d_var": 7.41e-5, "d_p95_d_var_fd": 7.41e-5}
    values, res, why = resolve(fine, coarse)
    assert values["d_mean_d_var"] is None and "resolution" in why["d_mean_d_var"]
    assert res["d_mean_d_var"] == pytest.approx(2.5e-6)
    assert values["d_p95_d_var"] == 7.16e-5 and "d_p95_d_var" not in why
    # an implicit derivative that disagrees with its finite difference is not resolved either
    values, _, why = resolve({**fine, "d_p95_d_var_fd": 2e-5}, coarse)
    assert values["d_p95_d_var"] is None and values["d_p95_d_var_fd"] is None


def test_llama_variability_mean_effect_is_unresolved_not_negative():
    # a class's variability moves the step mean by ~1e-8 of it: below the lattice, so it must
    # be reported unresolved (it printed as a negative number before); the p95 effect is resolved
    r = sensitivity(build_job("llama3-8b", 64), classes=["gemm", "optimizer"])
    by = {c.key: c for c in r.classes}
    for c in r.classes:
        # unresolved below the lattice; where resolved (GEMM at the sourced efficiencies:
        # 3.1e-7) it has the physical sign
        assert (c.d_mean_d_var is None and "d_mean_d_var" in c.unresolved) or c.d_mean_d_var > 0
        assert c.d_mean_d_mean is not None and c.d_mean_d_mean > 0
    assert by["optimizer"].d_mean_d_var is None
    g = by["gemm"]
    assert g.d_p95_d_var is not None and g.d_p95_d_var > 0
    # removing the variability: the drop has the derivative's sign and is no larger than the
    # derivative (q grows like sigma^2 when the class is a small part of the spread)
    drop = g.p95_drop_without_variability_s
    assert drop is not None and 0 < drop <= 1.05 * g.d_p95_d_var
    opt = by["optimizer"]
    assert opt.p95_drop_without_variability_s is None
    assert r.ranking()[-1] == "optimizer"
    assert "n/r" in r.summary() and np.isfinite(r.p95_s)


def test_cli(capsys, tmp_path):
    assert main(["sensitivity", "--symbolic"]) == 0
    assert "Phi" in capsys.readouterr().out
    png = tmp_path / "s.png"
    assert (
        main(["sensitivity", "--preset", "llama3-8b", "--gpus", "64", "--json", "--plot", str(png)])
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert d["classes"] and d["closed_form_check"] and png.stat().st_size > 0
    # an unresolved value is null in JSON, with its reason; a resolved one has the right sign
    unresolved = [c for c in d["classes"] if c["d_mean_d_var"] is None]
    assert unresolved and all("d_mean_d_var" in c["unresolved"] for c in unresolved)
    assert all(c["d_mean_d_var"] > 0 for c in d["classes"] if c["d_mean_d_var"] is not None)
    assert main(["sensitivity", "--preset", "llama3-8b", "--gpus", "64", "--h", "0.9"]) == 2
    assert "--h" in capsys.readouterr().err


def _spread(d, lam):
    # mu + lam (X - mu): the mean-preserving spread the variability perturbation applies
    mu = float(d.mean())
    return d.scale(lam).shift((1 - lam) * mu)


def _max_then_tiny(n, lam_kernel, lam_tiny, pol):
    # slowest of n ranks (1 s + LogNormal kernel), then a serial op far narrower than a cell
    body = StepGraph("rank")
    body.add_op("fixed", point_mass(1.0))
    body.add_op(
        "kernel", _spread(from_scipy(stats.lognorm(s=0.1, scale=0.5)), lam_kernel), ["fixed"]
    )
    g = StepGraph("step")
    g.add_replica_group("ranks", body, n)
    g.add_op("tiny", _spread(from_scipy(stats.lognorm(s=0.05, scale=2e-4)), lam_tiny), ["ranks"])
    return predict(g, policy=pol)


def test_convex_max_variance_effect_resolved_and_below_resolution_unresolved():
    # E[max_n (1 + mu + lam (X - mu))] = 1 + mu + lam (E[max_n X] - mu): the derivative in
    # log lam is E[max_n X] - mu > 0 (quad). The serial tiny op's spread leaves the mean of
    # the sum exactly unchanged (0): the engine's value for it is lattice noise of either sign
    n, h = 64, 0.05
    x = stats.lognorm(s=0.1, scale=0.5)
    emax = integrate.quad(lambda t: t * n * x.cdf(t) ** (n - 1) * x.pdf(t), 0, 5, limit=200)[0]
    exact = emax - float(x.mean())
    for widths in ((5e-5, 1e-4), (1e-4, 2e-4)):
        raw = []
        for rw in widths:
            pol = GridPolicy(rel_width=rw)

            def dmean(k, t, pol=pol):
                hi, lo = _max_then_tiny(n, *k, pol), _max_then_tiny(n, *t, pol)
                return (float(hi.mean()) - float(lo.mean())) / (2 * h)

            raw.append(
                {
                    "d_mean_d_var": dmean((1 + h, 1), (1 - h, 1)),
                    "tiny": dmean((1, 1 + h), (1, 1 - h)),
                }
            )
        values, _, why = resolve(*raw)
        assert values["d_mean_d_var"] == pytest.approx(exact, rel=1e-6) and exact > 0.1
        assert values["tiny"] is None and "resolution" in why["tiny"]
        # as a variance effect on the mean it is never reported negative
        fine, coarse = ({"d_mean_d_var": r["tiny"]} for r in raw)
        v, _, _ = resolve(fine, coarse)
        assert v["d_mean_d_var"] is None or v["d_mean_d_var"] >= 0


def test_resolve_never_reports_an_excluded_sign():
    # the optimizer row of llama3-405b at 16,384: -1.51e-7 s on both "lattices" (predict had
    # coarsened both requested widths to one, so the lattice change was 0); it printed as a
    # resolved -0.000151 ms
    same = {"d_mean_d_var": -1.512e-7, "d_p95_d_var": -1.512e-7, "d_p95_d_var_fd": -1.513e-7}
    values, res, why = resolve(same, dict(same))
    assert values["d_mean_d_var"] is None and "negative" in why["d_mean_d_var"]
    assert res["d_mean_d_var"] >= 1.512e-7
    # a p95 has no such sign rule: with a zero lattice change it needs another floor
    values, _, why = resolve(same, dict(same), floors={"d_p95_d_var": 1e-7})
    assert values["d_p95_d_var"] is None and "d_p95_d_var" in why
    rng = np.random.default_rng(7)
    signed = ("d_mean_d_mean", "d_p95_d_mean", "d_p95_d_mean_fd", "d_mean_d_var")
    for _ in range(200):
        fine = {k: float(rng.normal()) for k in signed}
        coarse = (
            fine if rng.random() < 0.5 else {k: v + 0.01 * rng.normal() for k, v in fine.items()}
        )
        values, _, why = resolve(fine, coarse)
        for k in signed:
            assert values[k] is None or values[k] > 0
            assert (values[k] is None) == (k in why)


def test_sensitivity_doubles_the_lattice_predict_really_uses():
    # llama3-70b at 1,024 GPUs: predict coarsens both 5e-5 and 1e-4 to one width, so the two
    # "lattices" were one. The optimizer is a serial op: its spread changes the step mean by
    # exactly 0, which must come out unresolved (it was a resolved +8.5e-6 s before)
    r = sensitivity(build_job("llama3-70b", 1024), classes=["optimizer"])
    fine, coarse = r.rel_widths
    assert fine > 1e-4 and coarse == pytest.approx(2 * fine)
    (opt,) = r.classes
    assert opt.d_mean_d_var is None and "resolution" in opt.unresolved["d_mean_d_var"]
    for k in ("d_mean_d_mean", "d_p95_d_mean", "d_mean_d_var"):
        v = getattr(opt, k)
        assert v is None or v > 0
    # the footer must not advise a finer --rel-width when the engine coarsened the request
    assert r.requested_rel_width == pytest.approx(5e-5)
    assert "cannot resolve them" in r.summary() and "may resolve" not in r.summary()
    assert r.to_dict()["requested_rel_width"] == pytest.approx(5e-5)
