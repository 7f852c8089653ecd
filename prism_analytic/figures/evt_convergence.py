"""Extreme-value convergence: exact F^n against the Gumbel limit as n grows."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .common import Timer, entry, plt, save

NAME = "evt_convergence"
CLAIM = (
    "PRISM's large-scale slow-downs come from maxima over ranks; the exact max (F^n) and the "
    "extreme-value (Gumbel) limit agree only slowly for normal ranks (rate O(1/log n))"
)


def make(out_dir: str | Path, data_root: str | Path | None = None, tiny: bool = False) -> dict:
    """Relative error of the Gumbel q99 and mean of the max of n N(0,1) vs the exact F^n."""
    from .. import evt_max, iid_max, normal

    t = Timer()
    base = normal(0.0, 1.0)
    ns = np.unique(np.logspace(0.5, 3 if tiny else 9, 7 if tiny else 19).astype(int))
    err_q, err_m, exact_q = [], [], []
    for n in ns:
        ex = iid_max(base, int(n))
        ev = evt_max(base, int(n))
        q_ex, q_ev = float(ex.quantile(0.99)), float(ev.quantile(0.99))
        exact_q.append(q_ex)
        err_q.append(abs(q_ev / q_ex - 1))
        err_m.append(abs(float(ev.mean()) / float(ex.mean()) - 1))
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(9, 3.6))
    a1.loglog(ns, np.array(err_q) * 100, "o-", label="q99")
    a1.loglog(ns, np.array(err_m) * 100, "s-", label="mean")
    a1.set_xlabel("ranks n")
    a1.set_ylabel("|Gumbel / exact - 1| (%)")
    a1.set_title("Gumbel limit vs exact max of n N(0,1)")
    a1.grid(alpha=0.3, which="both")
    a1.legend()
    x = np.linspace(-1, 8, 400)
    for n in (8, 1024, 65536):
        if n > ns.max():
            continue
        a2.plot(x, iid_max(base, n).cdf(x), label=f"exact, n={n:,}")
        a2.plot(x, evt_max(base, n).cdf(x), "--", label=f"Gumbel, n={n:,}")
    a2.set_xlabel("max of n standard normals (sd units)")
    a2.set_ylabel("CDF")
    a2.set_title("exact F^n (solid) vs Gumbel (dashed)")
    a2.grid(alpha=0.3)
    a2.legend(fontsize=6)
    path = save(fig, out_dir, NAME)
    nums = {
        "n": [int(n) for n in ns],
        "gumbel_q99_rel_error": [float(e) for e in err_q],
        "gumbel_mean_rel_error": [float(e) for e in err_m],
    }
    return entry(NAME, path, CLAIM, nums, "closed form (no data)", t())
