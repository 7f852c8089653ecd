"""The latency library of a trace: one fitted law per op signature, with its checks.

A signature is (op name, stage, model chunk) for single-rank ops and (op names, stages of the
instance's process group) for communication instances, whose sample is the instance's duration
after its last member arrived (the transfer; the wait for slower peers is what the graph
reproduces). Before the samples of successive steps are pooled, the per-step means are tested
for autocorrelation (Ljung-Box); a small p-value is reported, not hidden.

Pipeline send/recv as *recorded* mix bubble waiting with transfer; :func:`otsu_split` splits
their log durations at the Otsu threshold (PRISM's recipe), for comparison with the
structural transfer times.
"""

from __future__ import annotations

import numpy as np

from prism_analytic.traces.fitting import fit_latency, ljung_box
from prism_analytic.traces.structure import StepStructure, unit_values

__all__ = ["fit_signatures", "otsu_threshold", "otsu_split"]


def otsu_threshold(values, bins: int = 128) -> float:
    """Otsu's threshold of a sample (maximises the between-class variance of its histogram).

    Parameters
    ----------
    values : array_like
        At least two distinct values.
    bins : int
        Histogram bins.

    Returns
    -------
    float
    """
    x = np.asarray(values, dtype=float)
    if x.size < 2 or np.ptp(x) == 0:
        raise ValueError("values: need at least two distinct values for an Otsu threshold")
    hist, edges = np.histogram(x, bins=bins)
    mids = 0.5 * (edges[1:] + edges[:-1])
    w0 = np.cumsum(hist)
    w1 = w0[-1] - w0
    m0 = np.cumsum(hist * mids) / np.maximum(w0, 1)
    m1 = (np.sum(hist * mids) - np.cumsum(hist * mids)) / np.maximum(w1, 1)
    between = w0 * w1 * (m0 - m1) ** 2
    return float(edges[1:][np.argmax(between[:-1])])


def otsu_split(table, rows_steps=None) -> dict:
    """Split recorded pipeline send/recv durations into bubble waiting and transfer.

    Parameters
    ----------
    table : EventTable
        Canonical events.
    rows_steps : sequence of int, optional
        Step ids to use (default all).

    Returns
    -------
    dict
        Threshold (seconds, found on log durations) and the two classes' count and median.
    """
    f = table.frame
    p2p = f[f["name"].str.contains("send|recv", regex=True)]
    if rows_steps is not None:
        p2p = p2p[p2p["step"].isin(list(rows_steps))]
    d = p2p["duration_s"].to_numpy()
    d = d[d > 0]
    if d.size < 2 or np.ptp(d) == 0:
        return {}
    t = float(np.exp(otsu_threshold(np.log(d))))
    low, high = d[d <= t], d[d > t]
    return {
        "threshold_s": t,
        "transfer": {"n": int(low.size), "median_s": float(np.median(low))},
        "bubble_wait": {
            "n": int(high.size),
            "median_s": float(np.median(high)) if high.size else None,
        },
    }


def fit_signatures(
    structure: StepStructure, rows, *, min_samples: int = 8, max_samples: int = 400, seed: int = 0
) -> list:
    """Fit a latency law to every op signature over the given steps.

    Parameters
    ----------
    structure : StepStructure
        Recovered structure.
    rows : array_like of int
        Row indices of the steps to use.
    min_samples : int
        Signatures with fewer samples are listed without a fit.
    max_samples : int
        Larger pools are fitted on a random subsample of this size (the maximum-likelihood
        fits of shifted families are slow on tens of thousands of values); ``n`` reports the
        full pool.
    seed : int
        Seed of that subsample and of the bootstrap.

    Returns
    -------
    list of dict
        ``signature``, ``kind``, ``n``, the fit's summary (family, KS, intervals) and
        ``ljung_box_pvalue`` of the per-step means.
    """
    rows = np.asarray(rows, dtype=int)
    _gap, dur = unit_values(structure)
    dur = dur[rows]
    groups: dict = {}
    for u, members in enumerate(structure.units):
        if len(members) == 1:
            i = members[0]
            chunk = -1 if structure.chunk is None else int(structure.chunk[i])
            stage = f"{int(structure.stage[i])}" + (f" chunk {chunk}" if chunk >= 0 else "")
            key = ("op", str(structure.names[i]), stage)
        else:
            key = structure.unit_signature(u)
            key = ("comm", "+".join(key[1]), ",".join(map(str, key[2])))
        groups.setdefault(key, []).append(u)
    rng = np.random.default_rng(seed)
    out = []
    for key, cols in sorted(groups.items(), key=lambda kv: str(kv[0])):
        x = dur[:, cols]
        entry = {"kind": key[0], "signature": f"{key[1]} @ stage {key[2]}", "n": int(x.size)}
        if x.size >= min_samples and np.ptp(x) > 0:
            pool = x.ravel()
            if pool.size > max_samples:
                pool = rng.choice(pool, size=max_samples, replace=False)
            fit = fit_latency(pool, rng=rng)
            entry.update(
                {
                    k: v
                    for k, v in fit.to_dict().items()
                    if k in ("family", "ks", "ks_pvalue", "mean_ci90", "q95_ci90")
                }
            )
            entry["ljung_box_pvalue"] = ljung_box(x.mean(axis=1))
        else:
            entry["family"] = "constant" if x.size and np.ptp(x) == 0 else None
        out.append(entry)
    return out
