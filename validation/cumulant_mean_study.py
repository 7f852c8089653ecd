"""Where the cumulant core's mean runs high on deep 1F1B lattices, and what fixes it (issue #8).

The cumulant core (``core_shape="cumulant"``) takes each max's mean from a Gram-Charlier
``E[D+]`` whose excess kurtosis ``g2`` of ``D = A - B`` comes from the kurtosis core's He2-chaos
estimate. This script measures, against seeded Monte Carlo draws propagated through the whole
schedule DAG (the same draws for every variant), the sink's mean error (in Monte Carlo sd), std
error and KS distance of the core's Pearson III law, for variants prototyped by subclassing /
patching the engine inside this script (no engine file is changed):

* ``shipped``: the core as it is;
* ``g2=0``: no kurtosis in the mean (Clark's ``E[D+]`` with the propagated skewness);
* ``g2 MC``: each max's ``g2`` replaced by the Monte Carlo excess kurtosis of its ``D`` (an
  oracle: what the mean would be if the chaos estimate were exact);
* ``g2 MC + gc MC``: the oracle ``g2`` and the engine's ``E[D+]`` replaced by Monte Carlo's own
  ``E[max] - E[B]`` at every max (an oracle that removes every local mean error; what is left
  is the inputs' drift);
* ``no g2 clip``: ``MAX_KURTOSIS`` = inf; ``no skew clip``: ``MAX_SKEW_D`` = inf;
* ``g2 0.5x``: half the chaos estimate (not a candidate fix: a sensitivity probe);
* ``E[D+] MC at tied / far maxima only``: the increment oracle restricted to the maxima whose
  Monte Carlo inputs are within / beyond 2 sd of a tie;
* ``g2 MC, negative kept`` / ``g2 chaos, negative kept``: a negative excess kurtosis used in the
  mean too (the engine uses ``g2`` only when it is > 0);
* ``g2 in every term`` (the kurtosis in every rectifier moment) and ``maxima's k3 = 0`` (the
  third cumulants the maxima create dropped), as in ``cumulant_drift_study.py``.

Then it splits each max's increment error into the formula's error at Monte Carlo's moments and
the effect of each engine input (``theta``, ``dm``, ``g1``, ``g2``), and weights the splits by
each node's criticality (Monte Carlo's probability that its finish is the makespan's) so that
their sum is a first-order account of the sink's mean error (checked against it).

Per max (two inputs, within 2 Monte Carlo sd of a tie), it also compares the engine's inputs
(``dm``, ``theta``, skewness, chaos ``g2``) and its mean increment ``E[Y] - E[B]`` with Monte
Carlo's, and evaluates the Gram-Charlier ``E[D+]`` at Monte Carlo's own moments of ``D`` (the
formula's error when its inputs are exact). Ops: F 1, B 2 per stage (divided by vpp), normal or
lognormal laws of the given CV, the last stage ``--last`` times slower. Usage::

    nice python validation/cumulant_mean_study.py [--cases NAME ...] [--samples 100000]
        [--seed 20261204]

An estimate of where the error is made; Monte Carlo noise: the sink mean's standard error is
``1 / sqrt(n)`` sd (0.003 sd at 1e5), the sd's relative one ``1 / sqrt(2 n)``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from prism_analytic.engines import cumulant_core as cc
from prism_analytic.engines import pipeline_core as pc
from prism_analytic.engines.blas_threads import single_blas_thread
from prism_analytic.engines.skew_core import skew_law

__all__ = ["CASES", "Case", "build", "sample", "Study", "main"]


@dataclass(frozen=True)
class Case:
    """A pipeline lattice: stages, microbatches, vpp, op law family and CV, last-stage factor."""

    name: str
    p: int
    m: int
    vpp: int = 1
    family: str = "normal"
    cv: float = 0.05
    last: float = 1.0


CASES = [
    Case("1f1b 8x32 normal 5%", 8, 32),
    Case("1f1b 16x64 normal 5%", 16, 64),
    Case("1f1b 32x64 normal 5%", 32, 64),
    Case("1f1b 32x64 lognormal 20% last x1.25", 32, 64, family="lognormal", cv=0.2, last=1.25),
    Case("interleaved 16x64 vpp 2 normal 5%", 16, 64, vpp=2),
    Case("interleaved 32x64 vpp 2 normal 5%", 32, 64, vpp=2),
    Case("interleaved 8x8 vpp 4 normal 5%", 8, 8, vpp=4),
]


def build(case: Case) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """Schedule structure, op means, sds and third cumulants."""
    st = pc._structure(case.p, case.m, "interleaved" if case.vpp > 1 else "1f1b", case.vpp)
    stage = np.array([int(k.split()[1][1:]) for k in st["keys"]])
    base = np.array([1.0 if k.startswith("F") else 2.0 for k in st["keys"]]) / case.vpp
    mean = base * np.where(stage == case.p - 1, case.last, 1.0)
    sd = case.cv * mean
    if case.family == "normal":
        k3 = np.zeros_like(mean)
    elif case.family == "lognormal":  # skewness (cv^2 + 3) cv
        k3 = (case.cv**2 + 3.0) * case.cv * sd**3
    else:
        raise ValueError(f"family must be 'normal' or 'lognormal', got {case.family!r}")
    return st, mean, sd, k3


def _draw(rng: np.random.Generator, case: Case, m: float, s: float, n: int) -> np.ndarray:
    if case.family == "normal":
        return m + s * rng.standard_normal(n)
    s2 = math.log1p(case.cv**2)
    return np.exp(math.log(m) - 0.5 * s2 + math.sqrt(s2) * rng.standard_normal(n))


@dataclass
class MonteCarlo:
    """Sink draws and, per two-input max node, Monte Carlo moments of its ``D`` (by node)."""

    sink: np.ndarray
    node_mean: np.ndarray
    node_sd: np.ndarray
    # node -> (E[max], E[X_p0], E[X_p1], and of D = X_p0 - X_p1: mean, theta, g1, g2)
    dstats: dict[int, tuple[float, ...]] = field(default_factory=dict)
    # node -> P(X_p0 > X_p1); sink node -> P(it is the makespan)
    p_first: dict[int, float] = field(default_factory=dict)
    p_sink: dict[int, float] = field(default_factory=dict)

    def weights(self, preds: list, gens: list) -> np.ndarray:
        """Each node's criticality: the sink mean's first-order change per unit shift of it.

        ``w = P(node's finish is the makespan's)`` by the backward pass ``w_p += w_i P(p wins
        at i)`` (Monte Carlo's probabilities).
        """
        w = np.zeros(len(preds))
        for i, pr in self.p_sink.items():
            w[i] = pr
        for gen in reversed(gens):
            for i in gen:
                ps = preds[int(i)]
                if len(ps) == 1:
                    w[ps[0]] += w[i]
                elif len(ps) == 2:
                    p0 = self.p_first[int(i)]
                    w[ps[0]] += w[i] * p0
                    w[ps[1]] += w[i] * (1.0 - p0)
        return w


def sample(case: Case, st: dict, mean: np.ndarray, sd: np.ndarray, n: int, seed: int) -> MonteCarlo:
    """Max-plus propagation of op draws, keeping only the live nodes' draws."""
    rng = np.random.default_rng(seed)
    preds = st["preds"]
    rem = np.zeros(len(preds), dtype=int)
    for ps in preds:
        for q in ps:
            rem[q] += 1
    live: dict[int, np.ndarray] = {}
    sinks = []
    mc = MonteCarlo(np.empty(0), np.zeros(len(preds)), np.zeros(len(preds)))
    for gen in st["gens"]:
        for i in gen:
            i = int(i)
            ps = preds[i]
            if not ps:
                base = 0.0
            elif len(ps) == 1:
                base = live[ps[0]]
            else:
                x0, x1 = live[ps[0]], live[ps[1]]
                d = x0 - x1
                dm, th = float(d.mean()), float(d.std())
                z = (d - dm) / th
                base = np.maximum(x0, x1)
                mc.p_first[i] = float(np.mean(x0 > x1))
                mc.dstats[i] = (
                    float(base.mean()),
                    float(x0.mean()),
                    float(x1.mean()),
                    dm,
                    th,
                    float(np.mean(z**3)),
                    float(np.mean(z**4) - 3.0),
                )
            t = base + _draw(rng, case, float(mean[i]), float(sd[i]), n)
            mc.node_mean[i], mc.node_sd[i] = float(t.mean()), float(t.std())
            live[i] = t
            for q in ps:
                rem[q] -= 1
                if rem[q] == 0:
                    del live[q]
            if rem[i] == 0:
                sinks.append(i)
    ends = np.stack([live[i] for i in sinks])
    mc.sink = np.max(ends, axis=0)
    win = np.bincount(np.argmax(ends, axis=0), minlength=len(sinks)) / n
    mc.p_sink = {i: float(pr) for i, pr in zip(sinks, win, strict=True)}
    return mc


def gc_ef(dm: float, th: float, g1: float, g2: float) -> float:
    """The engine's Gram-Charlier ``E[D+]`` (clips as in the engine)."""
    g1 = min(max(g1, -cc.MAX_SKEW_D), cc.MAX_SKEW_D)
    r, ef = cc._rectifier(dm, th, g1, 0.0, min(g2, cc.MAX_KURTOSIS) if g2 > 0 else None)
    return r["Ef"] if ef is None else ef


def mc_d(mc: MonteCarlo, node: int, swap: bool) -> tuple[float, ...]:
    """Monte Carlo ``(E[B], dm, theta, g1, g2, E[max] - E[B])`` in the engine's orientation.

    The engine's ``B`` (larger-mean input by its own means) is the node's second predecessor,
    or its first when ``swap``.
    """
    emax, e0, e1, dm, th, g1, g2 = mc.dstats[node]
    if swap:
        return e0, -dm, th, -g1, g2, emax - e0
    return e1, dm, th, g1, g2, emax - e1


class Study(cc._CumulantEngine):
    """The cumulant core with a switchable ``g2`` source and per-max records.

    ``mode``: ``"chaos"`` (shipped), ``"zero"``, ``"half"``, ``"mc"`` (Monte Carlo's ``g2`` of
    the node's ``D``); ``mc_ef``: replace the mean increment by Monte Carlo's ``E[Y] - E[B]``
    (True: at every two-input max; ``"tied"`` / ``"far"``: only where Monte Carlo's inputs are
    within / beyond 2 sd of a tie).
    """

    mode = "chaos"
    mc: MonteCarlo | None = None
    mc_ef: bool | str = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.records: list[tuple] = []
        self._node, self._swap = -1, False

    def _max_of(self, slots: list[int], node: int) -> int:
        self._swap = len(slots) == 2 and bool(self.mu[slots[1]] < self.mu[slots[0]])
        return super()._max_of(slots, node)

    def _excess_kurtosis(self, node: int, a: int, b: int) -> float:
        self._node = node
        g2 = super()._excess_kurtosis(node, a, b)
        if self.mode in ("mc-neg", "chaos-neg"):
            # the engine drops g2 <= 0; hand it over through the patched rectifier instead
            if self.mode == "mc-neg" and self.mc is not None and node in self.mc.dstats:
                g2 = self.mc.dstats[node][6]
            _G2_OVERRIDE[0] = min(g2, cc.MAX_KURTOSIS)
            return 1.0
        if self.mode == "zero":
            return 0.0
        if self.mode == "half":
            return 0.5 * g2
        if self.mode == "mc" and self.mc is not None and node in self.mc.dstats:
            return self.mc.dstats[node][6]
        return g2

    def _max(self, a: int, b: int, g2: float) -> int:
        node, self._node = self._node, -1
        C, K = self.C, self.K
        th2 = float(C[a, a] + C[b, b] - 2 * C[a, b])
        dm = float(self.mu[a] - self.mu[b])
        k3d = float(K[a, a, a] - 3 * K[a, a, b] + 3 * K[a, b, b] - K[b, b, b])
        mb = float(self.mu[b])
        chaos = float(self.chaos.g2_node[node]) if node >= 0 and self.chaos is not None else 0.0
        y = super()._max(a, b, g2)
        _G2_OVERRIDE[0] = None  # (unused where the inputs were tied)
        known = self.mc is not None and node in self.mc.dstats
        if self.mc_ef and known:
            _, mdm, mth, *_, minc = mc_d(self.mc, node, self._swap)
            tied = abs(mdm) <= 2 * mth
            if self.mc_ef is True or (self.mc_ef == "tied") == tied:
                self.mu[y] = mb + minc
        th = math.sqrt(max(th2, 0.0))
        g1 = k3d / th**3 if th > 0 else 0.0
        vsum = float(C[a, a] + C[b, b])
        self.records.append((node, self._swap, dm, th, g1, chaos, float(self.mu[y]) - mb, vsum))
        return y


_RECTIFIER = cc._rectifier


def _g2_all(dm: float, th: float, g1: float, g2: float, g2_mean: float | None) -> tuple:
    """The mean's kurtosis in every rectifier term (variance, covariances, third cumulants)."""
    if g2_mean is None:
        return _RECTIFIER(dm, th, g1, g2, None)
    out, _ = _RECTIFIER(dm, th, g1, g2_mean, None)
    return out, out["Ef"]


def _clark(dm: float, th: float, g1: float, g2: float, g2_mean: float | None) -> tuple:
    """The third cumulants the maxima create set to 0 (Clark's max with full covariances)."""
    out, ef = _RECTIFIER(dm, th, g1, g2, g2_mean)
    return {**out, "kfDD": 0.0, "kffD": 0.0, "k3f": 0.0}, ef


_G2_OVERRIDE: list[float | None] = [None]


def _g2_signed(dm: float, th: float, g1: float, g2: float, g2_mean: float | None) -> tuple:
    """The shipped rectifier, with the mean's kurtosis taken from :data:`_G2_OVERRIDE`."""
    if _G2_OVERRIDE[0] is not None:
        g2_mean, _G2_OVERRIDE[0] = _G2_OVERRIDE[0], None
    return _RECTIFIER(dm, th, g1, g2, g2_mean)


@contextlib.contextmanager
def patched(**consts: object) -> Iterator[None]:
    """Set module constants of the cumulant core for the block's duration."""
    old = {k: getattr(cc, k) for k in consts}
    for k, v in consts.items():
        setattr(cc, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(cc, k, v)


VARIANTS: dict[str, dict] = {
    "shipped": {},
    "g2=0": {"mode": "zero"},
    "g2 0.5x (probe)": {"mode": "half"},
    "g2 MC (oracle)": {"mode": "mc"},
    "g2 MC + E[D+] MC (oracle)": {"mode": "mc", "mc_ef": True},
    "E[D+] MC at tied maxima only (oracle)": {"mc_ef": "tied"},
    "E[D+] MC at far maxima only (oracle)": {"mc_ef": "far"},
    "g2 MC, negative kept (oracle)": {"mode": "mc-neg", "consts": {"_rectifier": _g2_signed}},
    "g2 chaos, negative kept": {"mode": "chaos-neg", "consts": {"_rectifier": _g2_signed}},
    "no g2 clip": {"consts": {"MAX_KURTOSIS": math.inf}},
    "no skew clip": {"consts": {"MAX_SKEW_D": math.inf}},
    "g2 in every term": {"consts": {"_rectifier": _g2_all}},
    "maxima's k3 = 0": {"consts": {"_rectifier": _clark}},
}


def evaluate(st: dict, mean: np.ndarray, sd: np.ndarray, k3: np.ndarray, mc: MonteCarlo, v: dict):
    """``(mean, std, skew, engine)`` of the variant ``v`` on the whole schedule."""
    cls = type(
        "V", (Study,), {"mode": v.get("mode", "chaos"), "mc": mc, "mc_ef": v.get("mc_ef", False)}
    )
    with patched(**v.get("consts", {})), single_blas_thread():
        eng = cls.for_dag(0, st["window"], st["gens"], k3)
        eng.preds = st["preds"]
        mu, var, _ = eng.run(st["gens"], st["preds"], mean, sd, np.zeros((len(mean), 0)))
        k3s = eng.kappa3(eng.last)
    s = math.sqrt(var)
    return mu, s, k3s / s**3, eng


def ks(sink: np.ndarray, mu: float, s: float, g: float) -> float:
    """KS distance of the draws from the Pearson III law of ``(mu, s, g)``."""
    law = skew_law(mu, s, g)
    x = np.sort(sink)
    f = np.asarray(law.cdf(x))
    n = len(x)
    return float(max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n)))


def per_max(eng: Study, mc: MonteCarlo, tied: bool = True) -> np.ndarray:
    """Rows per tied two-input max, errors in Monte Carlo ``theta``.

    ``(node, dm err, theta rel err, g1 eng, g1 MC, g2 chaos, g2 MC, E[Y] - E[B] err,
    Gram-Charlier E[D+] at Monte Carlo's moments - Monte Carlo's E[D+], the same at g2 = 0,
    the same at the chaos g2)``.
    """
    rows = []
    preds = eng.preds
    for node, swap, dm, th, g1, chaos, inc, vsum in eng.records:
        if node not in mc.dstats:
            continue
        _, mdm, mth, mg1, mg2, minc = mc_d(mc, node, swap)
        if (abs(mdm) <= 2 * mth) != tied:
            continue
        rows.append(
            (
                node,
                (dm - mdm) / mth,
                th / mth - 1,
                g1,
                mg1,
                chaos,
                mg2,
                (inc - minc) / mth,
                (gc_ef(mdm, mth, mg1, mg2) - minc) / mth,
                (gc_ef(mdm, mth, mg1, 0.0) - minc) / mth,
                (gc_ef(mdm, mth, mg1, chaos) - minc) / mth,
                # one engine input at a time in place of Monte Carlo's (theta, dm, g1, g2)
                (gc_ef(mdm, th, mg1, mg2) - gc_ef(mdm, mth, mg1, mg2)) / mth,
                (gc_ef(dm, th, mg1, mg2) - gc_ef(mdm, th, mg1, mg2)) / mth,
                (gc_ef(dm, th, g1, mg2) - gc_ef(dm, th, mg1, mg2)) / mth,
                (gc_ef(dm, th, g1, chaos) - gc_ef(dm, th, g1, mg2)) / mth,
                # theta^2 error split: Var A + Var B error, and -2 Cov(A, B) error (/ MC th^2)
                (vsum - float(np.sum(mc.node_sd[list(preds[node])] ** 2))) / mth**2,
                (th**2 - vsum - (mth**2 - float(np.sum(mc.node_sd[list(preds[node])] ** 2))))
                / mth**2,
                mth,
                mdm / mth,
            )
        )
    return np.array(rows)


def run_case(case: Case, n: int, seed: int, variants: list[str]) -> None:
    """Print the sink table and the per-max diagnosis of one case."""
    st, mean, sd, k3 = build(case)
    c0, w0 = time.process_time(), time.time()
    mc = sample(case, st, mean, sd, n, seed)
    ms, ss = float(mc.sink.mean()), float(mc.sink.std())
    print(
        f"\n### {case.name} ({len(mean)} ops)\n\nMonte Carlo {n} draws (seed {seed}): mean {ms:.5f}"
        f" sd {ss:.5f} skew {stats.skew(mc.sink):.3f}; {time.process_time() - c0:.1f} s CPU,"
        f" {time.time() - w0:.1f} s wall\n"
    )
    print("| variant | mean err (MC sd) | std err | skew (MC) | KS |\n|---|---|---|---|---|")
    engines = {}
    for name in variants:
        mu, s, g, eng = evaluate(st, mean, sd, k3, mc, VARIANTS[name])
        engines[name] = eng
        print(
            f"| {name} | {(mu - ms) / ss:+.3f} | {s / ss - 1:+.2%} | {g:.3f} "
            f"({stats.skew(mc.sink):.3f}) | {ks(mc.sink, mu, s, g):.4f} |"
        )
    if "shipped" not in engines:
        return
    r = per_max(engines["shipped"], mc)
    if not len(r):
        return
    print(
        f"\nPer max (shipped engine), {len(r)} maxima within 2 sd of a tie, by sixths in"
        " topological order; errors in Monte Carlo theta; 'GC@MC': the Gram-Charlier E[D+] at"
        " Monte Carlo's own moments of D minus Monte Carlo's E[D+] (chaos g2 replaced by MC's;"
        " g2=0 beside it):\n"
    )
    print(
        "| maxima | dm err | theta err | g1 eng / MC | g2 chaos / MC | dE[Y] err (eng - MC) "
        "| GC@MC err | GC@MC g2=0 err | GC@MC chaos g2 err |\n|---|---|---|---|---|---|---|---|---|"
    )
    for part in [*np.array_split(np.arange(len(r)), 6), np.arange(len(r))]:
        if not len(part):
            continue
        c = r[part].mean(axis=0)
        span = "all" if len(part) == len(r) else f"{part[0]}-{part[-1]}"
        print(
            f"| {span} | {c[1]:+.4f} | {c[2]:+.2%} | {c[3]:+.3f} / {c[4]:+.3f} | {c[5]:+.3f} /"
            f" {c[6]:+.3f} | {c[7]:+.4f} | {c[8]:+.4f} | {c[9]:+.4f} | {c[10]:+.4f} |"
        )
    print(
        "\nThe engine's E[Y] - E[B] error per max, split (Monte Carlo theta units): the formula"
        " at Monte Carlo's moments of D, then the engine's theta, dm, skewness and chaos g2 put"
        " in one at a time (their sum is the engine's error up to the Monte Carlo noise of"
        " E[max]):\n"
    )
    print(
        "| maxima | formula | theta | dm | g1 | g2 | sum | engine |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    for part in [*np.array_split(np.arange(len(r)), 6), np.arange(len(r))]:
        if not len(part):
            continue
        c = r[part].mean(axis=0)
        span = "all" if len(part) == len(r) else f"{part[0]}-{part[-1]}"
        parts = [c[8], c[11], c[12], c[13], c[14]]
        print(
            f"| {span} | "
            + " | ".join(f"{x:+.4f}" for x in parts)
            + f" | {sum(parts):+.4f} | {c[7]:+.4f} |"
        )
    print(
        "\ntheta^2 error of the tied maxima (in Monte Carlo theta^2), split: Var A + Var B"
        f" {r[:, 15].mean():+.4f}, -2 Cov(A, B) {r[:, 16].mean():+.4f} (sum"
        f" {r[:, 15].mean() + r[:, 16].mean():+.4f})\n"
    )
    w = mc.weights(st["preds"], st["gens"])
    allr = np.concatenate([r, per_max(engines["shipped"], mc, tied=False)])
    wt = w[allr[:, 0].astype(int)] * allr[:, 17] / ss  # theta units -> sink sd, by criticality
    src = {
        "formula": allr[:, 8],
        "theta": allr[:, 11],
        "g1": allr[:, 13],
        "g2": allr[:, 14],
        "dm (transport)": allr[:, 12],
    }
    sources = allr[:, 8] + allr[:, 11] + allr[:, 13] + allr[:, 14]
    eng = engines["shipped"]
    sink_err = (float(eng.mu[eng.last]) - ms) / ss
    print(
        "Criticality-weighted sum over every two-input max (sink sd units; weight: Monte"
        " Carlo's P(the node's finish is the makespan's)): "
        + ", ".join(f"{k} {float(np.sum(wt * v)):+.4f}" for k, v in src.items())
        + f"; sources (formula + theta + g1 + g2) {float(np.sum(wt * sources)):+.4f}, all five"
        f" {float(np.sum(wt * allr[:, 7])):+.4f} vs the sink's mean error {sink_err:+.4f}\n"
    )
    top = np.argsort(-np.abs(wt * allr[:, 8]))[:20]
    print(
        "The 20 maxima with the largest weighted formula error: weight (sd per theta)"
        f" {wt[top].mean():.3f}; Monte Carlo's dm / theta {allr[top, 18].mean():+.2f}, g1"
        f" {allr[top, 4].mean():+.3f}, g2 {allr[top, 6].mean():+.3f}; formula error"
        f" {allr[top, 8].mean():+.4f} theta each (g2 = 0: {allr[top, 9].mean():+.4f}),"
        f" weighted sum {float(np.sum(wt[top] * allr[top, 8])):+.4f} sd\n"
    )
    far = per_max(engines["shipped"], mc, tied=False)
    if len(far):
        c = far.mean(axis=0)
        parts = [c[8], c[11], c[12], c[13], c[14]]
        print(
            f"| far ({len(far)} maxima beyond 2 sd of a tie) | "
            + " | ".join(f"{x:+.4f}" for x in parts)
            + f" | {sum(parts):+.4f} | {c[7]:+.4f} |"
        )
    corr = float(np.corrcoef(r[:, 5], r[:, 6])[0, 1])
    print(
        f"\ng2 chaos vs MC: correlation {corr:.2f}, mean {r[:, 5].mean():+.3f} vs"
        f" {r[:, 6].mean():+.3f}; chaos g2 > 4 (clipped) at {int(np.sum(r[:, 5] > 4))} maxima;"
        f" sum of dE[Y] err over tied maxima {r[:, 7].sum():+.3f} theta-units"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", help="substrings of case names (default: all)")
    ap.add_argument("--variants", nargs="*", help="substrings of variant names (default: all)")
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=20261204)
    a = ap.parse_args(argv)
    if a.samples < 100:
        raise SystemExit("--samples must be >= 100")
    cases = [c for c in CASES if not a.cases or any(s in c.name for s in a.cases)]
    variants = [v for v in VARIANTS if not a.variants or any(s in v for s in a.variants)]
    if not cases or not variants:
        raise SystemExit("no case / variant matches")
    for case in cases:
        run_case(case, a.samples, a.seed, variants)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
