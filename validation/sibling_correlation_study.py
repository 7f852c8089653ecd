"""Sibling maxima on deep tied lattices: where their Gaussian correlation goes wrong.

Issue #8 follow-up (results in ``validation/results/sibling_correlation_study.md``). The lattice
study found that, for adjacent maxima ``M_i = max(A_i, B_i)``, ``M_j`` of one generation, a
Gaussian model with the *exact* means and covariances of ``(A_i, B_i, A_j, B_j)`` gives a
correlation ~0.005 lower than the true one, while the input differences ``D = A - B`` are
leptokurtic. First hypothesis tested here (oracle inputs): the gap comes from the *marginal*
shape of ``D_i`` and ``D_j``, i.e. Mehler's formula with the Hermite coefficients of the
rectifier taken under ``D``'s true skewness and kurtosis instead of a Gaussian's.

Model ("Gaussian copula, Fleishman marginals"): ``D_k = mu_k + s_k h_k(Z_k)`` with ``h_k`` the
Fleishman cubic matching ``D_k``'s exact (Monte Carlo) skewness and excess kurtosis, ``(Z_i,
Z_j)`` standard bivariate normal with the correlation ``r`` that reproduces the exact
``Cov(D_i, D_j)`` (a cubic in ``r``: ``h`` has Hermite degree 3), and ``B``'s jointly normal
with the ``Z``'s. Then, with ``M = B + D+``::

    Cov(M_i, M_j) = Cov(B_i, B_j) + Cov(B_i, D_j+) + Cov(D_i+, B_j) + Cov(D_i+, D_j+)
    Cov(B, D+)    = Cov(B, D) E[Z h(Z)+] / E[Z h(Z)]        (Stein; Gaussian: Phi(alpha))
    Cov(D_i+, D_j+) by quadrature over (Z_i, Z_j)             (= Mehler with h's coefficients)

With ``h`` the identity the model is the Gaussian one (it reproduces the bivariate-normal
closed form; checked by ``check`` against ``scipy.stats.multivariate_normal`` Monte Carlo).
Every quantity is compared with the Monte Carlo truth on the same samples, term by term, so the
measurement says which of the four terms carries the gap.

The term-by-term measurement put the gap in ``Cov(B, D+)``, which led to a second, oracle model
(``stein3`` / ``stein34``): the Gaussian model plus the Stein terms of ``Cov(B, D+)`` at the
exact joint cumulants ``kappa(B, D, D)`` (and ``kappa(B, D, D, D)``). ``engine`` then puts those
terms (Monte Carlo cumulants carried slot by slot) into the kurtosis core at every max, either
added to its Mehler covariances (``stein3``) or replacing their n = 2 term, which is the same
Stein term at the chaos model's cumulant (``stein3-excess``), and judges the makespan against an
independent Monte Carlo. Oracle prototypes: nothing here is an engine feature.

Usage::

    nice python validation/sibling_correlation_study.py local [--case il8x8v4|1f1b8x32]
        [--local-samples N] [--seed S]
    nice python validation/sibling_correlation_study.py check
    nice python validation/sibling_correlation_study.py engine [--case NAME] [--samples N]
        [--mc-samples N] [--seed S] [--modes off stein3-cov stein3 stein34 stein3-excess diag]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from numpy.polynomial import hermite_e as H
from numpy.polynomial import polynomial as P
from scipy import optimize, special, stats

sys.path.insert(0, str(Path(__file__).parent))
from lattice_closure_study import sample_nodes  # noqa: E402

import prism_analytic as pa  # noqa: E402
from prism_analytic.engines import pipeline_core as pc  # noqa: E402
from prism_analytic.engines.canonical import _clark, _unit_hermite  # noqa: E402
from prism_analytic.engines.kurtosis_core import _KurtosisEngine, kurtosis_pipeline  # noqa: E402
from prism_analytic.engines.pipeline_mc import sample_pipeline  # noqa: E402
from prism_analytic.engines.skew_core import SkewResult, _run, _skewness  # noqa: E402
from prism_analytic.graph.pipeline import PipelineSpec, law_key  # noqa: E402

_LEG_X, _LEG_W = np.polynomial.legendre.leggauss(96)
_Z_MAX = 9.0


def fleishman(g1: float, g2: float) -> np.ndarray:
    """Fleishman's cubic: power coefficients ``(a, b, c, d)`` of ``a + b z + c z^2 + d z^3``.

    Mean 0, sd 1, skewness ``g1``, excess kurtosis ``g2`` (Fleishman 1978); ValueError where no
    solution exists or the cubic is not increasing on ``|z| <= 9``.
    """

    def eqs(v: np.ndarray) -> list[float]:
        b, c, d = v
        return [
            b * b + 6 * b * d + 2 * c * c + 15 * d * d - 1,
            2 * c * (b * b + 24 * b * d + 105 * d * d + 2) - g1,
            24
            * (
                b * d
                + c * c * (1 + b * b + 28 * b * d)
                + d * d * (12 + 48 * b * d + 141 * c * c + 225 * d * d)
            )
            - g2,
        ]

    sol, info, ok, msg = optimize.fsolve(eqs, [1.0, 0.0, 0.0], full_output=True, xtol=1e-13)
    if ok != 1 or max(abs(x) for x in eqs(sol)) > 1e-9:
        raise ValueError(f"fleishman: no solution for g1={g1}, g2={g2} ({msg})")
    b, c, d = sol
    coef = np.array([-c, b, c, d])
    if np.any(np.polyval(np.polyder(coef[::-1]), np.linspace(-_Z_MAX, _Z_MAX, 721)) <= 0):
        raise ValueError(f"fleishman: not monotone on |z| <= {_Z_MAX} for g1={g1}, g2={g2}")
    return coef


def _half_moments(c: float, kmax: int) -> np.ndarray:
    """``int_c^inf w^k phi(w) dw`` for k = 0..kmax."""
    phi = np.exp(-0.5 * c * c) / np.sqrt(2 * np.pi)
    m = np.zeros(kmax + 1)
    m[0] = special.ndtr(-c)
    if kmax >= 1:
        m[1] = phi
    for k in range(2, kmax + 1):
        m[k] = c ** (k - 1) * phi + (k - 1) * m[k - 2]
    return m


def _root(poly: np.ndarray) -> float:
    """The real root of a monotone increasing polynomial (power coefficients, low first)."""
    if len(np.trim_zeros(poly, "b")) <= 2:
        return -poly[0] / poly[1]
    return optimize.brentq(lambda z: P.polyval(z, poly), -50.0, 50.0, xtol=1e-14)


def _plus_moment(poly: np.ndarray, weight: np.ndarray | None = None) -> float:
    """``E[weight(Z) poly(Z)+]`` for standard normal Z (power coefficients)."""
    full = poly if weight is None else P.polymul(poly, weight)
    m = _half_moments(_root(poly), len(full) - 1)
    return float(np.dot(full, m))


def _joint_plus(h1: np.ndarray, h2: np.ndarray, r: float) -> float:
    """``E[h1(Z1)+ h2(Z2)+]``, ``(Z1, Z2)`` standard normal with correlation r."""
    s = np.sqrt(max(1.0 - r * r, 1e-300))
    u1, u2 = _root(h1), _root(h2)
    lo, hi = u1, max(u1, 0.0) + _Z_MAX
    z = 0.5 * (hi - lo) * _LEG_X + 0.5 * (hi + lo)
    w = 0.5 * (hi - lo) * _LEG_W * np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
    total = 0.0
    for zk, wk in zip(z, w, strict=True):
        # inner: E_W[h2(r z + s W)+], h2 increasing in W, positive above w0
        inner_poly = np.zeros(len(h2))
        shifted = np.array([r * zk, s])
        pw = np.array([1.0])
        for k, ck in enumerate(h2):
            if k:
                pw = P.polymul(pw, shifted)
            inner_poly = P.polyadd(inner_poly, ck * pw)
        w0 = (u2 - r * zk) / s
        inner = float(np.dot(inner_poly, _half_moments(w0, len(inner_poly) - 1)))
        total += wk * P.polyval(zk, h1) * inner
    return total


def _cov_poly(h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
    """``Cov(h1(Z1), h2(Z2))`` as a polynomial in r (Mehler: sum c_n d_n r^n n!)."""
    c1, c2 = H.poly2herme(h1), H.poly2herme(h2)
    n = min(len(c1), len(c2))
    out = np.zeros(n)
    for k in range(1, n):
        out[k] = c1[k] * c2[k] * special.factorial(k)
    return out


def model_terms(mom: dict, shape: str) -> dict:
    """Model covariance terms of a sibling pair (module docstring) for ``shape``.

    ``shape``: ``gauss`` (h identity), ``kurt`` (Fleishman, exact kurtosis, skew 0) or
    ``skewkurt`` (exact skewness and kurtosis).
    """
    if shape.startswith("stein"):
        return _stein_terms(mom, shape)
    hs, ratio, mplus, vplus = [], [], [], []
    for k in (0, 1):
        g1 = mom["g1"][k] if shape == "skewkurt" else 0.0
        g2 = mom["g2"][k] if shape != "gauss" else 0.0
        unit = np.array([0.0, 1.0]) if shape == "gauss" else fleishman(g1, g2)
        h = mom["dsd"][k] * unit
        h[0] += mom["dmu"][k]
        hs.append(h)
        e_zh = mom["dsd"][k] * (unit[1] + (3.0 * unit[3] if len(unit) > 3 else 0.0))
        ratio.append(_plus_moment(h, np.array([0.0, 1.0])) / e_zh)
        mplus.append(_plus_moment(h))
        vplus.append(_plus_moment(h, h) - mplus[-1] ** 2)  # E[h h+] = E[(h+)^2]
    cov_poly = _cov_poly(hs[0], hs[1])
    target = mom["cov_dd"]
    fn = lambda r: P.polyval(r, cov_poly) - target  # noqa: E731
    r = (
        optimize.brentq(fn, -0.999999, 0.999999, xtol=1e-14)
        if fn(-0.999999) * fn(0.999999) < 0
        else float(np.clip(target / np.prod(mom["dsd"]), -0.999999, 0.999999))
    )
    cdd = _joint_plus(hs[0], hs[1], r) - mplus[0] * mplus[1]
    c_b0_d1 = mom["cov_b0_d1"] * ratio[1]
    c_d0_b1 = mom["cov_d0_b1"] * ratio[0]
    var = [mom["var_b"][k] + 2 * mom["cov_bd"][k] * ratio[k] + vplus[k] for k in (0, 1)]
    cov = mom["cov_bb"] + c_b0_d1 + c_d0_b1 + cdd
    return {
        "bd+": c_b0_d1 + c_d0_b1,
        "d+d+": cdd,
        "var": var,
        "corr": cov / np.sqrt(var[0] * var[1]),
        "r": r,
    }


def _stein_terms(mom: dict, shape: str) -> dict:
    """The Gaussian model plus the Stein terms of ``Cov(X, D+)`` at the exact joint cumulants.

    ``Cov(X, g(D)) = sum_n kappa(X, D [n times]) / n! E[g^(n)(D)]``; for ``g = (.)+`` under the
    Gaussian law of ``D``: ``E[g^(2)] = phi(alpha) / theta``, ``E[g^(3)] = -alpha phi(alpha) /
    theta^2``. ``stein3`` adds the n = 2 term, ``stein34`` also n = 3. Only the ``Cov(B, D+)``
    terms change (in the pair's covariance and in each max's variance).
    """
    t = model_terms(mom, "gauss")
    e2, e3 = [], []
    for k in (0, 1):
        th = mom["dsd"][k]
        al = mom["dmu"][k] / th
        ph = np.exp(-0.5 * al * al) / np.sqrt(2 * np.pi)
        e2.append(ph / th)
        e3.append(-al * ph / th**2 if shape == "stein34" else 0.0)
    bd = 0.5 * (mom["k3_b0_d1"] * e2[1] + mom["k3_d0_b1"] * e2[0])
    bd += (mom["k4_b0_d1"] * e3[1] + mom["k4_d0_b1"] * e3[0]) / 6.0
    dvar = [2.0 * (0.5 * mom["k3_bd"][k] * e2[k] + mom["k4_bd"][k] * e3[k] / 6.0) for k in (0, 1)]
    var = [t["var"][k] + dvar[k] for k in (0, 1)]
    cov = t["corr"] * np.sqrt(t["var"][0] * t["var"][1]) + bd
    return {**t, "bd+": t["bd+"] + bd, "var": var, "corr": cov / np.sqrt(var[0] * var[1])}


SHAPES = ("gauss", "kurt", "skewkurt", "stein3", "stein34")


def _sample(name: str, samples: int, seed: int) -> tuple[np.ndarray, dict]:
    """Every node's finish time on schedule ``name`` (``lattice_closure_study.sample_nodes``)."""
    fin, st, _ = sample_nodes(name, samples, seed)
    return fin, st


def _cov(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((x - x.mean()) * (y - y.mean())))


def _k3(x: np.ndarray, d: np.ndarray) -> float:
    """Joint cumulant ``kappa(X, D, D)``."""
    xc, dc = x - x.mean(), d - d.mean()
    return float(np.mean(xc * dc * dc))


def _k4(x: np.ndarray, d: np.ndarray) -> float:
    """Joint cumulant ``kappa(X, D, D, D)``."""
    xc, dc = x - x.mean(), d - d.mean()
    return float(np.mean(xc * dc**3) - 3.0 * np.mean(xc * dc) * np.mean(dc * dc))


def local(name: str, samples: int, seed: int) -> dict:
    """Sibling pairs of ``name``: truth vs the three models, term by term (module docstring)."""
    fin, st = _sample(name, samples, seed)
    pred2 = st["pred2"]
    rows: list[dict] = []
    skipped: dict[str, int] = {}
    for g in st["gens"]:
        maxima = [int(i) for i in g if pred2[i, 1] >= 0]
        for i, j in zip(maxima[:-1], maxima[1:], strict=True):
            bs, ds, ms = [], [], []
            for k in (i, j):
                a, b = fin[pred2[k, 0]], fin[pred2[k, 1]]
                if a.mean() > b.mean():
                    a, b = b, a  # B: the larger-mean input, as the engines
                bs.append(b)
                ds.append(a - b)
                ms.append(np.maximum(a, b))
            z = [(d - d.mean()) / d.std() for d in ds]
            dp = [np.maximum(d, 0.0) for d in ds]
            mom = {
                "dmu": [float(d.mean()) for d in ds],
                "dsd": [float(d.std()) for d in ds],
                "g1": [float(np.mean(x**3)) for x in z],
                "g2": [float(np.mean(x**4) - 3.0) for x in z],
                "cov_dd": _cov(ds[0], ds[1]),
                "cov_bb": _cov(bs[0], bs[1]),
                "cov_b0_d1": _cov(bs[0], ds[1]),
                "cov_d0_b1": _cov(ds[0], bs[1]),
                "var_b": [float(b.var()) for b in bs],
                "cov_bd": [_cov(bs[k], ds[k]) for k in (0, 1)],
                # joint cumulants kappa(X, D, D) and kappa(X, D, D, D) (oracle Stein terms)
                "k3_b0_d1": _k3(bs[0], ds[1]),
                "k3_d0_b1": _k3(bs[1], ds[0]),
                "k3_bd": [_k3(bs[k], ds[k]) for k in (0, 1)],
                "k4_b0_d1": _k4(bs[0], ds[1]),
                "k4_d0_b1": _k4(bs[1], ds[0]),
                "k4_bd": [_k4(bs[k], ds[k]) for k in (0, 1)],
            }
            if min(mom["dsd"]) == 0:
                skipped["D constant"] = skipped.get("D constant", 0) + 1
                continue
            sd = np.sqrt(ms[0].var() * ms[1].var())
            row = {
                "true_corr": _cov(ms[0], ms[1]) / sd,
                "true_bd+": (_cov(bs[0], dp[1]) + _cov(dp[0], bs[1])) / sd,
                "true_d+d+": _cov(dp[0], dp[1]) / sd,
                "rho_D": mom["cov_dd"] / np.prod(mom["dsd"]),
                "g2": float(np.mean(mom["g2"])),
            }
            for shape in SHAPES:
                try:
                    t = model_terms(mom, shape)
                except ValueError as exc:
                    why = str(exc).split(" for ")[0]
                    skipped[why] = skipped.get(why, 0) + 1
                    break
                row[f"{shape}_corr"] = t["corr"] - row["true_corr"]
                row[f"{shape}_bd+"] = t["bd+"] / sd - row["true_bd+"]
                row[f"{shape}_d+d+"] = t["d+d+"] / sd - row["true_d+d+"]
                row[f"{shape}_sd"] = float(np.sqrt(t["var"][0] * t["var"][1]) / sd - 1.0)
            else:
                rows.append(row)
    out: dict = {"case": name, "samples": samples, "seed": seed, "pairs": len(rows)}
    out["skipped"] = skipped
    keys = rows[0].keys()
    out["mean"] = {k: float(np.mean([r[k] for r in rows])) for k in keys}
    out["sem"] = {
        k: float(np.std([r[k] for r in rows]) / np.sqrt(len(rows))) for k in keys if "_" in k
    }
    return out


def check(samples: int = 2_000_000, seed: int = 1) -> dict:
    """The Gaussian model against bivariate-normal Monte Carlo, on made-up moments.

    Returns the model's and the sampler's ``Cov(D1+, D2+)`` and ``Cov(B1, D2+)`` (the latter
    independent of the Stein ratio's derivation).
    """
    rng = np.random.default_rng(seed)
    cov = np.array(
        [[1.0, 0.3, 0.5, 0.2], [0.3, 1.5, 0.1, 0.4], [0.5, 0.1, 1.2, 0.6], [0.2, 0.4, 0.6, 0.9]]
    )
    mean = np.array([0.2, 1.0, -0.3, 0.4])  # (D1, B1, D2, B2)
    x = rng.multivariate_normal(mean, cov, samples)
    d1, b1, d2, b2 = x.T
    mom = {
        "dmu": [0.2, -0.3],
        "dsd": [1.0, np.sqrt(1.2)],
        "cov_dd": 0.5,
        "cov_bb": 0.4,
        "cov_b0_d1": 0.1,
        "cov_d0_b1": 0.2,
        "var_b": [1.5, 0.9],
        "cov_bd": [0.3, 0.6],
    }
    t = model_terms(mom, "gauss")
    m1, m2 = b1 + np.maximum(d1, 0), b2 + np.maximum(d2, 0)
    return {
        "d+d+ model": t["d+d+"],
        "d+d+ mc": _cov(np.maximum(d1, 0), np.maximum(d2, 0)),
        "corr model": t["corr"],
        "corr mc": float(np.corrcoef(m1, m2)[0, 1]),
        "mc samples": samples,
    }


# -- engine level: the kurtosis core with oracle Stein terms at every max ----------------------


class _OracleStein(_KurtosisEngine):
    """The kurtosis core, every max's covariances given the Stein terms at oracle cumulants.

    Each slot also carries Monte Carlo samples of the node it holds (the same operations as the
    engine: zeros, copies, maxima, op draws), from which the joint cumulants ``kappa(X_j, D,
    D)`` (and ``kappa(X_j, D, D, D)``) of every live slot with the new max's input difference
    are measured. The max's covariance with slot ``j`` gains ``kappa(X_j, D, D) phi(alpha) /
    (2 theta)`` (+ the n = 3 term), its variance ``kappa(B, D, D) phi(alpha) / theta``, and two
    maxima of one batch ``kappa(B_g, D_h, D_h) phi_h / (2 theta_h)`` and its mirror. Prototype
    (class attributes set by :func:`engine_oracle`), normal ops only.
    """

    slot_rows = ("L", "Xs")
    samples = 10_000
    seed = 0
    mode = "off"  # off | stein3 | stein34 | stein3-cov (covariances only, variance as Clark's)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.Xs = np.zeros((self.cap, self.samples))
        self.diag: list[tuple[np.ndarray, ...]] = []
        self.gen_k = 0

    def add(self, slots, m, s, lm) -> None:
        super().add(slots, m, s, lm)
        rng = np.random.default_rng([self.seed, self.gen_k])
        self.gen_k += 1
        self.Xs[slots] += m[:, None] + s[:, None] * rng.standard_normal((len(slots), self.samples))

    def _terms(self, ia, ib, clark, th2):
        """``phi(alpha) / theta``, the n = 3 factor and the centred differences of a batch."""
        t, tc, thph, al, _, _, tie = clark
        ok = ~tie & (th2 > 0)
        dens = np.where(ok, thph / th2.clip(min=1e-300), 0.0)
        e3 = np.where(ok, -al * dens / np.sqrt(th2.clip(min=1e-300)), 0.0)
        if self.mode != "stein34":
            e3 = 0.0 * e3
        d = self.Xs[ia] - self.Xs[ib]
        return dens, e3, d - d.mean(axis=1, keepdims=True)

    def _kappa(self, x, dc):
        """``kappa(X_j, D_g, D_g)`` and ``kappa(X_j, D_g, D_g, D_g)`` (rows j, columns g)."""
        xc = x - x.mean(axis=1, keepdims=True)
        n = dc.shape[1]
        k3 = xc @ (dc * dc).T / n
        k4 = xc @ (dc**3).T / n - 3.0 * (xc @ dc.T / n) * np.mean(dc * dc, axis=1)[None, :]
        return k3, k4

    def _correct(self, ia, ib, clark, vb, cab, th2):
        mu, var, extra = super()._correct(ia, ib, clark, vb, cab, th2)
        if self.mode in ("stein3", "stein34", "stein3-excess"):
            dens, e3, dc = self._terms(ia, ib, clark, th2)
            xb = self.Xs[ib]
            bc = xb - xb.mean(axis=1, keepdims=True)
            n = dc.shape[1]
            k3 = np.mean(bc * dc * dc, axis=1)
            k4 = np.mean(bc * dc**3, axis=1) - 3.0 * np.mean(bc * dc, axis=1) * np.mean(
                dc * dc, axis=1
            )
            var = np.maximum(var + dens * k3 + e3 * k4 / 3.0, 0.0)
            del n
        return mu, var, extra

    def _mehler2(self, ia, ib, clark, th2):
        """The n = 2 Mehler terms the engine is about to add (``q2``: (g, W)), pre-commit."""
        t, tc, thph, al, _, _, tie = clark
        hh, live = _unit_hermite(al, thph, tie)
        inv = np.where(live, 1.0 / np.sqrt(np.where(live, th2, 1.0)), 0.0)
        r = np.clip((self.M[ia] - self.M[ib]) * inv[:, None], -1.0, 1.0)
        q2 = (2.0 * hh[:, 0])[:, None] * self.H[:, 0][None, :] * r * r
        pos = (self.ring + np.arange(len(ia))) % self.W
        return q2, self.cw.copy(), pos

    def _max_batch(self, ia, ib):
        C = self.C
        va, vb, cab = C[ia, ia], C[ib, ib], C[ia, ib]
        clark = _clark(self.mu[ia], self.mu[ib], va, vb, cab)
        th2 = va + vb - 2.0 * cab
        excess = self.mode in ("stein3-excess", "diag")
        if excess:
            q2, cw_old, pos = self._mehler2(ia, ib, clark, th2)
        iy = super()._max_batch(ia, ib)
        C = self.C  # the batch may have grown the slot arrays
        self.Xs[iy] = np.maximum(self.Xs[ia], self.Xs[ib])
        if self.mode == "off":
            return iy
        dens, e3, dc = self._terms(ia, ib, clark, th2)
        k3, k4 = self._kappa(self.Xs, dc)  # (cap, g)
        add = 0.5 * k3 * dens[None, :] + k4 * e3[None, :] / 6.0  # Cov(X_j, D_g+) extra
        if excess:
            # the engine's Mehler n = 2 term is this Stein term at the chaos model's kappa3:
            # replace it (n2[j, g] = s_g sum_l q2[g, l] cw_j,l) instead of adding to it
            n2 = np.zeros((self.cap, len(ia)))  # slots added by a growth carry no residual
            n2[: len(cw_old)] = (cw_old @ q2.T) * self.S[pos][None, :]
            add = add - n2
        others = np.setdiff1d(np.arange(self.cap), iy)
        if self.mode == "diag":  # compare, change nothing: live slots' n = 2 vs oracle terms
            live = np.setdiff1d(others, self.free)
            stein = 0.5 * k3[live] * dens[None, :]
            self.diag.append((stein.ravel(), n2[live].ravel(), C[live][:, iy].ravel()))
            return iy
        C[iy[:, None], others[None, :]] += add[others].T
        C[others[:, None], iy[None, :]] += add[others]
        # two maxima of the batch: Cov(B_g, D_h+) and Cov(D_g+, B_h)
        kb3, kb4 = self._kappa(self.Xs[ib], dc)  # (g, g): kappa(B_g, D_h, D_h)
        pair = 0.5 * kb3 * dens[None, :] + kb4 * e3[None, :] / 6.0
        if excess:
            pair = pair - n2[ib]
        blk = pair + pair.T
        np.fill_diagonal(blk, 0.0)
        C[iy[:, None], iy[None, :]] += blk
        return iy


def _diag(st: dict, m_arr: np.ndarray, s_arr: np.ndarray, lmat: np.ndarray) -> str:
    """The engine's n = 2 Mehler covariance terms against the oracle Stein terms, all maxima."""
    eng = _OracleStein.for_dag(lmat.shape[1], st["window"], st["gens"], None)
    eng.run(st["gens"], st["preds"], m_arr, s_arr, lmat)
    stein, n2, cov = (np.concatenate(x) for x in zip(*eng.diag, strict=True))
    slope = float(np.dot(stein, n2) / np.dot(n2, n2))
    return (
        f"  diag: {len(n2)} (max, live slot) pairs; sum oracle Stein {stein.sum():.4g}, sum "
        f"engine n=2 {n2.sum():.4g} (sum covariance {cov.sum():.4g}); corr "
        f"{np.corrcoef(stein, n2)[0, 1]:.3f}, slope oracle on engine {slope:.3f}"
    )


def body_spec(p: int, m: int, schedule: str, vpp: int) -> PipelineSpec:
    """Normal ops at CV 5%, F 1 / B 2 per stage divided by vpp (as ``local_spec``)."""
    laws = {
        law_key(ph, s, c): pa.normal(mu / vpp, 0.05 * mu / vpp)
        for ph, mu in (("F", 1.0), ("B", 2.0))
        for s in range(p)
        for c in range(vpp)
    }
    return PipelineSpec(p, m, laws, schedule, vpp)


CASES = {
    "il8x8v4": (8, 8, "interleaved", 4),
    "il16x64v2": (16, 64, "interleaved", 2),
    "readme16x16v8": (16, 16, "interleaved", 8),
    "1f1b8x32": (8, 32, "1f1b", 1),
}


def engine_oracle(case: str, samples: int, mc_samples: int, seed: int, modes) -> list[str]:
    """KS / mean / std of the kurtosis core with and without the oracle Stein terms vs MC."""
    spec = body_spec(*CASES[case])
    st = pc._structure(spec.stages, spec.microbatches, spec.schedule, spec.vpp)
    m_arr, s_arr, lmat = pc._factor_model(spec, st)
    x = sample_pipeline(spec, mc_samples, np.random.default_rng(seed + 1))
    ref, _ = kurtosis_pipeline(spec)
    out = [
        f"{case}: {spec.n_ops} ops; oracle samples {samples} (seed {seed}), "
        f"Monte Carlo {mc_samples} (seed {seed + 1}), window {st['window']}"
    ]

    def line(name, mean, std, skew, secs):
        law = SkewResult(mean, std, skew, st["window"], spec.n_ops).law()
        ks = stats.kstest(x, law.cdf).statistic
        return (
            f"  {name:22s} KS {ks:.4f}  mean {(mean - x.mean()) / x.std():+.3f} sd  "
            f"std {std / x.std() - 1:+.2%}  skew {skew:+.3f}  ({secs:.1f} s)"
        )

    out.append(line("kurtosis_pipeline", ref.mean, ref.std, ref.skew, 0.0))
    for mode in modes:
        _OracleStein.samples, _OracleStein.seed, _OracleStein.mode = samples, seed, mode
        if mode == "diag":
            out.append(_diag(st, m_arr, s_arr, lmat))
            continue
        t0 = time.perf_counter()
        mu, var, k3 = _run(
            st["gens"], st["preds"], m_arr, s_arr, lmat, st["window"], None, _OracleStein
        )
        sd = float(np.sqrt(var))
        out.append(line(f"oracle {mode}", mu, sd, _skewness(var, k3), time.perf_counter() - t0))
        print(out[-1], file=sys.stderr, flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    lo = sub.add_parser("local")
    lo.add_argument("--case", choices=("il8x8v4", "1f1b8x32"), default="il8x8v4")
    lo.add_argument("--local-samples", type=int, default=40_000)
    lo.add_argument("--seed", type=int, default=2)
    sub.add_parser("check")
    en = sub.add_parser("engine")
    en.add_argument("--case", choices=tuple(CASES), default="il8x8v4")
    en.add_argument("--samples", type=int, default=10_000, help="oracle samples")
    en.add_argument("--mc-samples", type=int, default=100_000)
    en.add_argument("--seed", type=int, default=7)
    en.add_argument("--modes", nargs="+", default=["off", "stein3-cov", "stein3", "stein34"])
    args = ap.parse_args(argv)
    if args.cmd == "engine":
        print(
            "\n".join(
                engine_oracle(args.case, args.samples, args.mc_samples, args.seed, args.modes)
            )
        )
        return 0
    if args.cmd == "check":
        print(json.dumps(check(), indent=1))
        return 0
    print(json.dumps(local(args.case, args.local_samples, args.seed), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
