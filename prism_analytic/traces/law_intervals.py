"""Interval estimates of a fitted trace model's parameters, and their coverage of a known truth.

A fitted :class:`~prism_analytic.traces.model.TraceModel` implies values for the parameters a
synthetic job is built from (:mod:`prism_analytic.traces.synth_job`): each compute op type's
mean duration and log-scale noise, the log-scale spread of the shared step and microbatch
factors, each communication op type's mean transfer time, the slowdown of slow ranks. Each is
estimated from the fit steps with a 90% interval that treats whole fit steps as the
independent units (the shared factors make the ops of one step dependent): a Student t interval
of the mean of per-step values for means and slowdowns, a percentile bootstrap resampling fit
steps for spreads. :func:`coverage` says which true parameters the intervals contain; over many
parameters a 90% interval misses about one in ten by chance.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["law_intervals", "coverage", "true_log_sd"]


def _boot(stat, k: int, rng, resamples: int, level: float) -> tuple:
    """Estimate and percentile interval of ``stat(rows)`` over resampled fit steps."""
    est = float(stat(np.arange(k)))
    draws = np.array([stat(rng.integers(0, k, size=k)) for _ in range(resamples)])
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return est, float(lo), float(hi)


def _t_interval(per_step, level: float) -> tuple:
    """Mean of per-step values and its Student t interval (steps independent)."""
    from scipy import stats

    x = np.asarray(per_step, dtype=float)
    est = float(x.mean())
    if x.size < 2 or np.ptp(x) == 0:
        return est, est, est
    half = stats.t.ppf((1 + level) / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return est, float(est - half), float(est + half)


def _var_interval(x, known: float, level: float) -> dict:
    """Sd of a normal sample's variance part beyond ``known``, with a chi-square interval."""
    from scipy import stats

    x = np.asarray(x, dtype=float)
    n = x.size
    s2 = float(np.var(x, ddof=1))
    lo_q, hi_q = stats.chi2.ppf([(1 + level) / 2, (1 - level) / 2], n - 1)

    def sd(v):
        return math.sqrt(max(v - known, 0.0))

    return {
        "estimate": sd(s2),
        "low": sd((n - 1) * s2 / lo_q),
        "high": sd((n - 1) * s2 / hi_q),
    }


def _unit_optype(structure, u: int) -> str:
    """The op type a unit's law belongs to (a send/receive pair: its send's)."""
    names = sorted({n for i in structure.units[u] for n in str(structure.names[i]).split("+")})
    sends = [n for n in names if n.endswith("-send")]
    return sends[0] if sends else names[0]


def law_intervals(model, *, level: float = 0.9, resamples: int = 200, rng=0) -> dict:
    """Estimates of the model's parameters with bootstrap intervals over fit steps.

    Parameters
    ----------
    model : TraceModel
        Fitted model.
    level : float
        Interval coverage, in (0, 1).
    resamples : int
        Bootstrap resamples of the fit steps.
    rng : int or numpy.random.Generator
        Seed.

    Returns
    -------
    dict
        Parameter name -> ``{"estimate", "low", "high"}``. Names:
        ``"mean <optype> @ stage <s>"`` (compute op mean duration on the stage's ranks not
        flagged slow), ``"noise log-sd <optype>"`` (per-microbatch compute),
        ``"step factor log-sd"``, ``"microbatch factor log-sd"``, ``"transfer mean <optype>"``
        (communication), ``"slowdown rank <r>"`` (every rank with per-microbatch work: its
        work over the median of its stage's other ranks).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    from prism_analytic.traces.effects import rank_effects
    from prism_analytic.traces.structure import unit_values

    rng = np.random.default_rng(rng)
    s = model.structure
    _gap, dur_all = unit_values(s)
    dur = dur_all[model.fit_rows]
    k = dur.shape[0]
    out: dict = {}

    def add(name, stat):
        est, lo, hi = _boot(stat, k, rng, resamples, level)
        out[name] = {"estimate": est, "low": lo, "high": hi}

    def add_mean(name, per_step, transform=None):
        est, lo, hi = _t_interval(per_step, level)
        if transform is not None:
            est, lo, hi = transform(est), transform(lo), transform(hi)
        out[name] = {"estimate": est, "low": lo, "high": hi}

    slow = {int(x["rank"]) for x in rank_effects(model)["slow_ranks"]}
    first = np.array([s.units[u][0] for u in model.op_units])
    op_names = np.array([_unit_optype(s, u) for u in model.op_units], dtype=object)
    normal = ~np.isin(s.ranks[first], list(slow))
    stages = s.stage[first]
    for name in sorted(set(op_names)):
        if not name.endswith("compute") and name != "optimizer":
            continue
        # per stage: stages may do different work (the last one the loss and output layer)
        for st in np.unique(stages):
            cols = model.op_units[(op_names == name) & normal & (stages == st)]
            if cols.size:
                add_mean(f"mean {name} @ stage {int(st)}", dur[:, cols].mean(axis=1))
    d = model.decomposition
    if d:
        e, a, b = d["e"], d["a"], d["b"]
        mb_first = first[model.mb_col]
        mb_names = op_names[model.mb_col]
        scale = d["dof_scale"]

        def var_e(rows):
            return float(np.sum(e[rows] ** 2) / (e[rows].size * scale))

        for name in sorted(set(mb_names)):
            c = np.flatnonzero(mb_names == name)
            add(
                f"noise log-sd {name}",
                lambda rows, c=c: math.sqrt(
                    np.sum(e[rows][:, c] ** 2) / (rows.size * c.size * scale)
                ),
            )
        centring = d.get("centring", 1.0)

        def var_b(rows):
            return max(b[rows].var() * centring - var_e(rows) / d["counts"].mean(), 0.0)

        add("microbatch factor log-sd", lambda rows: math.sqrt(var_b(rows)))
        # the step levels are few (one per fit step): a chi-square interval of their variance
        # (normal levels), less the noise and microbatch parts they carry
        rows = np.arange(k)
        known = var_e(rows) / e.shape[1] + var_b(rows) / b.shape[1]
        out["step factor log-sd"] = _var_interval(a, known, level)
        logd = np.log(np.maximum(dur[:, model.mb_units], 1e-12))
        ranks = s.ranks[mb_first]
        stage = s.stage[mb_first]
        uniq = np.unique(ranks)
        level_r = np.stack([logd[:, ranks == r].mean(axis=1) for r in uniq], axis=1)
        st = np.array([stage[ranks == r][0] for r in uniq])
        for j, r in enumerate(uniq):
            others = np.flatnonzero((st == st[j]) & (uniq != r))
            if others.size:
                rel = level_r[:, j] - np.median(level_r[:, others], axis=1)
                add_mean(f"slowdown rank {int(r)}", rel, math.exp)
    comm_names = np.array([_unit_optype(s, u) for u in model.comm_units], dtype=object)
    for name in sorted(set(comm_names)):
        cols = model.comm_units[comm_names == name]
        add_mean(f"transfer mean {name}", dur[:, cols].mean(axis=1))
    return out


def true_log_sd(law: dict) -> float:
    """Log-scale standard deviation of a law given by its parameters (``Law.params()``).

    Parameters
    ----------
    law : dict
        ``family`` and ``cv`` (and the family's own parameters).

    Returns
    -------
    float
        ``sigma`` (lognormal), ``sqrt(trigamma(shape))`` (gamma), 0 (deterministic).
    """
    from scipy.special import polygamma

    if law.get("cv", 0) == 0 or law["family"] == "const":
        return 0.0
    if law["family"] == "lognormal":
        return float(law["sigma"])
    if law["family"] == "gamma":
        return float(math.sqrt(polygamma(1, law["shape"])))
    raise ValueError(f"law family must be lognormal, gamma or const, got {law['family']!r}")


def coverage(intervals: dict, truth: dict) -> dict:
    """Which true parameters of a synthetic job the intervals contain.

    Parameters
    ----------
    intervals : dict
        From :func:`law_intervals`.
    truth : dict
        ``SynthTrace.truth`` (``laws``, ``slow_ranks``, ``stage_scale``, ``step_factor``,
        ``mb_factor``).

    Returns
    -------
    dict
        ``covered``, ``total``, ``missed`` (names of parameters outside their interval, or
        ``"<name> (not estimated)"`` when the model gave none), ``rows`` (name, truth,
        estimate, low, high).
    """
    laws = truth["laws"]
    step_f, mb_f = truth["step_factor"], truth["mb_factor"]
    stage_scale = {int(k): float(v) for k, v in truth.get("stage_scale", {}).items()}
    expected = {}
    for name, law in laws.items():
        if name.endswith("compute") or name == "optimizer":
            factor = step_f["mean"] * (mb_f["mean"] if name != "optimizer" else 1.0)
            prefix = f"mean {name} @ stage "
            for key in intervals:
                if key.startswith(prefix):
                    st = int(key[len(prefix) :])
                    expected[key] = law["mean"] * factor * stage_scale.get(st, 1.0)
            if name != "optimizer":
                expected[f"noise log-sd {name}"] = true_log_sd(law)
        else:
            expected[f"transfer mean {name}"] = law["mean"]
    if any(n.startswith("noise log-sd") for n in expected):
        expected["step factor log-sd"] = true_log_sd(step_f)
        expected["microbatch factor log-sd"] = true_log_sd(mb_f)
    for r, f in truth.get("slow_ranks", {}).items():
        expected[f"slowdown rank {int(r)}"] = float(f)
    rows, missed = [], []
    for name, value in expected.items():
        got = intervals.get(name)
        if got is None:
            # a pair or collective the trace does not contain is not a miss; a slow rank is
            if name.startswith("slowdown"):
                missed.append(f"{name} (not estimated)")
            continue
        ok = got["low"] <= value <= got["high"]
        rows.append((name, value, got["estimate"], got["low"], got["high"]))
        if not ok:
            missed.append(name)
    total = len(rows) + sum(1 for m in missed if m.endswith("(not estimated)"))
    return {"covered": total - len(missed), "total": total, "missed": missed, "rows": rows}
