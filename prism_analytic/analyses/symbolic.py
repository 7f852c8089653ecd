"""Closed-form step sensitivities derived with sympy, and their check against the engine.

Where the step has a closed form the derivatives are derived symbolically:

* **the slowest of n i.i.d. ranks**, each rank a sum of independent normal class times
  ``R = sum_c X_c``, ``X_c ~ N(T_c, S_c^2)``: the step's p-quantile solves
  ``Phi((x - M) / S)^n = p`` (``M = sum T_c``, ``S^2 = sum S_c^2``); implicit differentiation
  gives ``dq/dtheta = -(dG/dtheta) / (dG/dx)`` for ``G = n log Phi((x - M)/S) - log p``. The
  mean and std are ``M + S e_n`` and ``S s_n`` (``e_n``, ``s_n``: mean and std of the max of
  n standard normals, computed once by quadrature);
* **sums**: means and variances add;
* **Clark's max** of two normals (exact for two independent normals): its mean
  ``mu_A Phi(a) + mu_B Phi(-a) + theta phi(a)``, differentiated symbolically.

:func:`closed_form_check` builds the same model as a step graph (a replica group of n copies of
a chain of normal ops: the analytic engine is exact on it), differentiates the engine by the
implicit-function rule and by finite differences, and returns all three for comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import sympy as sp
from scipy import integrate, special

__all__ = [
    "max_of_normals_formulae",
    "clark_formulae",
    "latex_formulae",
    "max_normal_constants",
    "ClosedFormCheck",
    "closed_form_check",
]


@lru_cache(maxsize=1)
def max_of_normals_formulae() -> dict[str, Any]:
    """Symbols, the implicit equation and the derived derivatives (sympy expressions)."""
    x, m, s, n, p, t, sc, lam = sp.symbols("x M S n p T_c S_c lambda", positive=True)
    phi = sp.Function("Phi")
    z = (x - m) / s
    g = n * sp.log(sp.erfc(-z / sp.sqrt(2)) / 2) - sp.log(p)
    dq = {}
    # theta = M (a class mean shift adds to M), theta = S
    for name, th in (("M", m), ("S", s)):
        dq[name] = sp.simplify(-sp.diff(g, th) / sp.diff(g, x))
    zq = sp.Symbol("z_p", real=True)  # (q - M) / S = Phi^-1(p^(1/n))
    dq_sub = {k: sp.simplify(v.subs(x, m + s * zq)) for k, v in dq.items()}
    # chain rule to one class: M = T_c + rest, S = sqrt(S_c^2 + rest2)
    rest, rest2 = sp.symbols("M_rest S_rest2", positive=True)
    s_of = sp.sqrt(sc**2 + rest2)
    q_expr = (t + rest) + s_of * zq
    e_n, s_n = sp.symbols("e_n s_n", positive=True)
    mean_expr = (t + rest) + s_of * e_n
    std_expr = s_of * s_n
    out = {
        "symbols": dict(
            x=x,
            M=m,
            S=s,
            n=n,
            p=p,
            T=t,
            Sc=sc,
            lam=lam,
            z=zq,
            rest=rest,
            rest2=rest2,
            e_n=e_n,
            s_n=s_n,
        ),
        "implicit": sp.Eq(phi((x - m) / s) ** n, p),
        "dq_dM": dq_sub["M"],
        "dq_dS": dq_sub["S"],
        # elasticities: class mean (T_c and S_c scale together), class variability (S_c only)
        "dq_dlogmean": sp.simplify(
            sp.diff(q_expr.subs({t: lam * t, sc: lam * sc}), lam).subs(lam, 1)
        ),
        "dq_dlogvar": sp.simplify(sp.diff(q_expr.subs(sc, lam * sc), lam).subs(lam, 1)),
        "dmean_dlogvar": sp.simplify(sp.diff(mean_expr.subs(sc, lam * sc), lam).subs(lam, 1)),
        "dstd_dlogvar": sp.simplify(sp.diff(std_expr.subs(sc, lam * sc), lam).subs(lam, 1)),
        "dmean_dlogmean": sp.simplify(
            sp.diff(mean_expr.subs({t: lam * t, sc: lam * sc}), lam).subs(lam, 1)
        ),
        "q_expr": q_expr,
        "mean_expr": mean_expr,
        "std_expr": std_expr,
    }
    return out


@lru_cache(maxsize=1)
def clark_formulae() -> dict[str, Any]:
    """Clark's mean of max(A, B) for independent normals and its derivatives (sympy)."""
    ma, mb, sa, sb = sp.symbols("mu_A mu_B sigma_A sigma_B", positive=True)
    th = sp.sqrt(sa**2 + sb**2)
    a = (ma - mb) / th
    cdf = sp.erfc(-a / sp.sqrt(2)) / 2
    pdf = sp.exp(-(a**2) / 2) / sp.sqrt(2 * sp.pi)
    mean = ma * cdf + mb * (1 - cdf) + th * pdf
    return {
        "symbols": dict(mu_A=ma, mu_B=mb, sigma_A=sa, sigma_B=sb),
        "mean": mean,
        "d_mean": {str(v): sp.simplify(sp.diff(mean, v)) for v in (ma, mb, sa, sb)},
    }


def latex_formulae() -> str:
    """The derived formulae in LaTeX (what ``prism sensitivity --symbolic`` prints)."""
    f = max_of_normals_formulae()
    c = clark_formulae()
    lines = [
        "% slowest of n i.i.d. normal ranks, rank = sum of class times X_c ~ N(T_c, S_c^2)",
        "% quantile q_p defined implicitly:",
        sp.latex(f["implicit"]),
        r"\frac{\partial q_p}{\partial M} = " + sp.latex(f["dq_dM"]),
        r"\frac{\partial q_p}{\partial S} = " + sp.latex(f["dq_dS"]),
        r"% with z_p = \Phi^{-1}(p^{1/n}); per class (elasticities, d/d\log\theta):",
        r"\frac{\partial q_p}{\partial \log \mathrm{mean}_c} = " + sp.latex(f["dq_dlogmean"]),
        r"\frac{\partial q_p}{\partial \log \mathrm{var}_c} = " + sp.latex(f["dq_dlogvar"]),
        r"\frac{\partial E}{\partial \log \mathrm{var}_c} = " + sp.latex(f["dmean_dlogvar"]),
        r"\frac{\partial \mathrm{sd}}{\partial \log \mathrm{var}_c} = "
        + sp.latex(f["dstd_dlogvar"]),
        "% Clark's max of two independent normals:",
        r"E[\max(A,B)] = " + sp.latex(c["mean"]),
        *(
            rf"\frac{{\partial E}}{{\partial {sp.latex(sp.Symbol(k))}}} = " + sp.latex(v)
            for k, v in c["d_mean"].items()
        ),
        "% engine (gridded law): implicit function of F(q; theta) = p",
        r"\frac{dq_p}{d\theta} = -\frac{\partial F(q_p;\theta)/\partial\theta}{f(q_p;\theta)}",
    ]
    return "\n".join(lines)


@lru_cache(maxsize=64)
def max_normal_constants(n: int) -> tuple[float, float]:
    """(mean, std) of the max of ``n`` i.i.d. standard normals.

    Computed by quadrature of the density ``n phi Phi^(n-1)``.
    """

    def pdf(z):
        return n * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi) * special.ndtr(z) ** (n - 1)

    m1 = integrate.quad(lambda z: z * pdf(z), -12, 12, limit=400)[0]
    m2 = integrate.quad(lambda z: z * z * pdf(z), -12, 12, limit=400)[0]
    return m1, math.sqrt(max(m2 - m1 * m1, 0.0))


@dataclass(frozen=True)
class ClosedFormCheck:
    """Symbolic, engine (implicit) and finite-difference derivatives for one class."""

    cls: str
    quantity: str
    symbolic: float
    engine: float
    finite_difference: float

    @property
    def rel_error(self) -> float:
        """max(|engine - symbolic|, |fd - symbolic|) / |symbolic|."""
        d = max(abs(self.engine - self.symbolic), abs(self.finite_difference - self.symbolic))
        return d / abs(self.symbolic) if self.symbolic else float("inf")


def _evaluate(f: dict, subs: dict) -> float:
    return float(f.subs(subs).evalf())


def closed_form_check(
    class_moments: dict[str, tuple[float, float]], n: int, p: float = 0.95, h: float = 0.02
) -> list[ClosedFormCheck]:
    """Symbolic vs engine derivatives on the max of ``n`` i.i.d. ranks of normal class times.

    Parameters
    ----------
    class_moments : dict
        ``{class: (T_c, S_c)}`` mean and standard deviation of the class's time per rank.
    n : int
        Ranks.
    p : float
        Quantile level.
    h : float
        Relative step of the engine's differences.
    """
    from ..distributions import normal
    from ..engines.predict import predict
    from ..graph import StepGraph
    from ..policy import GridPolicy
    from .sensitivity import implicit_quantile_derivative, implicit_step

    f = max_of_normals_formulae()
    sym = f["symbols"]
    classes = [c for c, (t, s) in class_moments.items() if t > 0 and s > 0]
    if not classes:
        raise ValueError("closed_form_check needs at least one class with mean > 0 and sd > 0")
    total_m = sum(class_moments[c][0] for c in classes)
    total_v = sum(class_moments[c][1] ** 2 for c in classes)
    zp = float(special.ndtri(p ** (1.0 / n)))
    e_n, s_n = max_normal_constants(n)
    # a grid fine enough to resolve the max's spread (S s_n) with ~200 cells
    policy = GridPolicy(rel_width=min(2.5e-4, math.sqrt(total_v) * s_n / (200 * total_m)))
    # classes below the grid's resolution carry no measurable derivative: left out
    classes = [c for c in classes if class_moments[c][0] > 1e-3 * total_m]

    def step(scale_mean: dict, scale_sd: dict):
        body = StepGraph("rank")
        prev: list[str] = []
        for c in classes:
            t, s = class_moments[c]
            a, b = scale_mean.get(c, 1.0), scale_sd.get(c, 1.0)
            body.add_op(c, normal(t * a, s * a * b), prev)
            prev = [c]
        g = StepGraph("step")
        g.add_replica_group("ranks", body, n)
        return predict(g, policy=policy)

    base = step({}, {})
    out = []
    for c in classes:
        t, s = class_moments[c]
        subs = {
            sym["T"]: t,
            sym["Sc"]: s,
            sym["rest"]: total_m - t,
            sym["rest2"]: total_v - s * s,
            sym["z"]: zp,
            sym["e_n"]: e_n,
            sym["s_n"]: s_n,
        }
        for what, key_q, key_m, key_s in (
            ("mean", "dq_dlogmean", "dmean_dlogmean", None),
            ("variability", "dq_dlogvar", "dmean_dlogvar", "dstd_dlogvar"),
        ):

            def kw(v: float, c: str = c, what: str = what) -> tuple[dict, dict]:
                return ({c: v}, {}) if what == "mean" else ({}, {c: v})

            hi, lo = step(*kw(1 + h)), step(*kw(1 - h))
            # the implicit rule linearises F(q; theta) in theta: keep the law's move small
            slope = abs(float(hi.mean()) - float(lo.mean())) / (2 * h)
            hq = implicit_step(h, float(base.std()), slope)
            qhi, qlo = (hi, lo) if hq == h else (step(*kw(1 + hq)), step(*kw(1 - hq)))
            d_q = implicit_quantile_derivative(base, qhi, qlo, hq, p)
            fd_q = (float(hi.quantile(p)) - float(lo.quantile(p))) / (2 * h)
            d_mean = (float(hi.mean()) - float(lo.mean())) / (2 * h)
            sym_q, sym_m = _evaluate(f[key_q], subs), _evaluate(f[key_m], subs)
            out += [
                ClosedFormCheck(c, f"d p{round(p * 100)} / d log {what}", sym_q, d_q, fd_q),
                ClosedFormCheck(c, f"d mean / d log {what}", sym_m, d_mean, d_mean),
            ]
            if key_s:
                d_std = (float(hi.std()) - float(lo.std())) / (2 * h)
                sym_s = _evaluate(f[key_s], subs)
                out.append(ClosedFormCheck(c, f"d std / d log {what}", sym_s, d_std, d_std))
    return out
