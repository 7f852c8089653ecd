"""A stochastic model of one step, fitted on some steps of a trace, sampled by replay.

What varies, and how each part is modelled (all fitted on the fit steps only):

* **op units** (compute and other single-rank ops), on the log scale:
  ``log d = base + A[step, rank] + b[step, dp, microbatch] + e``. ``base`` is the op's
  typical value on its own rank (persistent per-rank effects: a slow worker, a longer stage)
  plus a position offset pooled over ranks; ``A`` is the level of a rank's per-microbatch work
  in a step (a step factor shared by all ranks plus the rank's own deviation); ``b`` is shared
  by every op of one microbatch on every stage (data-dependent work); ``e`` is independent
  noise. ``b`` and ``e`` get fitted laws (``b`` shrunk by the noise its estimates carry);
  ``A`` is resampled by step together with that step's gaps and waits, since a step-level
  state and the waits it causes go together (13-22 fit steps are too few to fit a law for a
  vector of per-rank levels).
* **communication units** (one draw per instance, shared by its members): a ratio to the
  instance's typical duration is fitted per signature (op names, stages). A send, receive or
  collective recorded alone (its partners not found) counts as one too: its recorded duration
  includes waits that the graph cannot reproduce, which independent draws would add up
  instead of letting them compensate (counted in ``info["lone_communication_ops"]``).
* **host gaps, hidden-dependency lags, and (by default) communication durations**: resampled
  jointly from one fit step (the empirical law, keeping whatever correlation they have within
  a step: congestion shared by the step's collectives, waits that compensate each other).
  ``comm_sampling="fitted"`` draws each instance independently from its fitted law instead.

:meth:`TraceModel.sample` draws step times by replaying the recovered structure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from prism_analytic.traces.fitting import LatencyFit, fit_latency
from prism_analytic.traces.hidden import find_hidden_dependencies
from prism_analytic.traces.structure import StepStructure, replay, unit_values

__all__ = ["TraceModel", "fit_trace_model", "is_communication"]

# Families for log-scale factors and noise: light to moderate tails. A Student t fitted to a
# few dozen log residuals can come out with under 2 degrees of freedom, whose draws exp() turns
# into absurd durations; heavy tails of the durations themselves come from the mixture of
# factors and from the empirical fallback.
_LOG_FAMILIES = ("normal", "laplace", "logistic")

# Cells (samples x units) of one block of model samples: 2**24 float64 is 128 MiB per array;
# the 4000 default samples of traces up to ~4000 units are one block.
_SAMPLE_CELLS = 1 << 24

# Words of communication op names (the shared traces' optypes, NCCL kernel names): a
# single-member unit with such a name is a send, receive or collective whose partners were not
# found, so its recorded duration includes waiting for them.
_COMM_WORDS = (
    "send",
    "recv",
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "allreduce",
    "allgather",
    "reducescatter",
    "alltoall",
    "broadcast",
    "barrier",
    "nccl",
)


def is_communication(name: str) -> bool:
    """Whether an op name is a communication op (send/receive or collective).

    Examples
    --------
    >>> is_communication("grads-reduce-scatter"), is_communication("forward-compute")
    (True, False)
    """
    low = str(name).lower()
    return any(w in low for w in _COMM_WORDS)


@dataclass
class TraceModel:
    """Fitted step model (see the module docstring).

    Attributes
    ----------
    structure : StepStructure
        Recovered dependency structure.
    fit_rows : numpy.ndarray
        Indices (into ``structure.steps``) of the steps it was fitted on.
    op_units, mb_units : numpy.ndarray
        Units that are single-rank ops; the subset that is per-microbatch work.
    log_base : numpy.ndarray
        Typical log duration of each op unit.
    residual : dict
        Op name -> :class:`LatencyFit` of the independent log-scale noise.
    step_factor : LatencyFit or None
        Law of the step factor shared by all ranks (reported; sampling resamples
        ``rank_step_level`` by step so that it stays tied to that step's gaps and waits).
    mb_factor : LatencyFit or None
        Law of the per-microbatch factor (None when not detected).
    rank_step_level : numpy.ndarray
        (fit steps, ranks) log-scale level of each rank's per-microbatch work in each fit
        step (step factor plus the rank's own deviation, shrunk by its estimation noise).
    mb_rank : numpy.ndarray
        Column of ``rank_step_level`` of each per-microbatch op unit.
    mb_factor_shrink : float
        Multiplier that removes the estimation noise from the microbatch-factor draws.
    comm_units : numpy.ndarray
        Multi-member (communication) units.
    comm_typical : numpy.ndarray
        Their typical durations.
    comm_ratio : dict
        Signature -> :class:`LatencyFit` of duration / typical duration (only fitted with
        ``comm_sampling="fitted"``).
    comm_signature : list
        Signature of each communication unit.
    gaps : numpy.ndarray
        (fit steps, rank ops) host gaps.
    hidden : list
        :class:`~prism_analytic.traces.hidden.HiddenDependency` found.
    info : dict
        Sizes of the detected effects.
    decomposition : dict
        The fit steps' log-scale parts of the per-microbatch work, for intervals
        (:mod:`~prism_analytic.traces.law_intervals`): ``a`` (steps,) step levels, ``b``
        (steps, microbatch groups) microbatch effects, ``e`` (steps, per-microbatch op units)
        noise, ``dof_scale`` (degrees of freedom of ``e`` per value).
    """

    structure: StepStructure
    fit_rows: np.ndarray
    op_units: np.ndarray
    mb_units: np.ndarray
    log_base: np.ndarray
    residual: dict
    residual_name: np.ndarray
    step_factor: LatencyFit | None
    mb_factor: LatencyFit | None
    rank_step_level: np.ndarray
    mb_rank: np.ndarray
    mb_factor_shrink: float
    mb_group: np.ndarray
    mb_group_dp: np.ndarray
    comm_units: np.ndarray
    comm_typical: np.ndarray
    comm_ratio: dict
    comm_signature: list
    gaps: np.ndarray
    hidden: list
    comm_durations: np.ndarray
    comm_sampling: str = "joint"
    info: dict = field(default_factory=dict)
    decomposition: dict = field(default_factory=dict, repr=False)

    def typical_durations(self) -> np.ndarray:
        """Every unit at its typical value (op units: exp(base); comm: typical)."""
        d = np.zeros(self.structure.n_units)
        d[self.op_units] = np.exp(self.log_base)
        d[self.comm_units] = self.comm_typical
        for h in self.hidden:
            if h.at == "end":
                d[h.unit] = h.own
        return d

    def typical_step(self) -> float:
        """Step time with every op, gap and lag at its typical (median) value."""
        gaps = np.median(self.gaps, axis=0)[None]
        for h in self.hidden:
            if h.at == "start":
                gaps[0, self.structure.units[h.unit][0]] = h.own
        lags = np.array([[np.median(h.lag) for h in self.hidden]]).reshape(1, -1)
        return float(
            replay(self.structure, gaps, self.typical_durations()[None], self.hidden, lags)[0]
        )

    def sample(self, n: int, rng=0) -> np.ndarray:
        """Draw ``n`` step times.

        Parameters
        ----------
        n : int
            Number of sampled steps.
        rng : int or numpy.random.Generator
            Seed or generator.

        Returns
        -------
        numpy.ndarray
            Step times in seconds.
        """
        rng = np.random.default_rng(rng)
        s = self.structure
        # blocks of samples bound the memory of the (samples, units) arrays on large traces
        block = max(64, _SAMPLE_CELLS // max(s.n_units, len(s.keys), 1))
        if n <= block:
            return self._sample_block(n, rng)
        return np.concatenate(
            [self._sample_block(min(block, n - i), rng) for i in range(0, n, block)]
        )

    def _sample_block(self, n: int, rng: np.random.Generator) -> np.ndarray:
        s = self.structure
        dur = np.zeros((n, s.n_units))
        log_d = np.tile(self.log_base, (n, 1))
        for name, fit in self.residual.items():
            cols = np.flatnonzero(self.residual_name == name)
            log_d[:, cols] += fit.sample((n, cols.size), rng)
        pick = rng.integers(0, self.gaps.shape[0], size=n)
        if self.rank_step_level.size:
            log_d[:, self.mb_col] += self.rank_step_level[pick][:, self.mb_rank]
        if self.mb_factor is not None:
            groups = int(self.mb_group.max()) + 1
            b = self.mb_factor.sample((n, groups), rng) * self.mb_factor_shrink
            # the step's mean microbatch cost is already in rank_step_level: draw only how
            # the microbatches of one data-parallel rank differ around it
            for d in np.unique(self.mb_group_dp):
                cols = self.mb_group_dp == d
                b[:, cols] -= b[:, cols].mean(axis=1, keepdims=True)
            log_d[:, self.mb_col] += b[:, self.mb_group]
        dur[:, self.op_units] = np.exp(log_d)
        if self.comm_sampling == "joint":
            dur[:, self.comm_units] = self.comm_durations[pick]
        else:
            for sig, fit in self.comm_ratio.items():
                cols = np.array([j for j, g in enumerate(self.comm_signature) if g == sig])
                ratio = np.clip(fit.sample((n, cols.size), rng), 0.0, None)
                dur[:, self.comm_units[cols]] = self.comm_typical[cols] * ratio
        gaps = self.gaps[pick]
        lags = np.zeros((n, len(self.hidden)))
        for j, h in enumerate(self.hidden):
            lags[:, j] = h.lag[pick]
            if h.at == "start":
                gaps[:, s.units[h.unit][0]] = h.own
            else:
                dur[:, h.unit] = h.own
        return replay(s, gaps, dur, self.hidden, lags)

    @property
    def mb_col(self) -> np.ndarray:
        """Columns of ``op_units`` that are per-microbatch work."""
        return np.flatnonzero(np.isin(self.op_units, self.mb_units))


def fit_trace_model(
    structure: StepStructure, fit_rows, *, rng=0, comm_sampling: str = "joint"
) -> TraceModel:
    """Fit the step model on the steps ``fit_rows`` of a recovered structure.

    Parameters
    ----------
    structure : StepStructure
        From :func:`~prism_analytic.traces.structure.recover_structure`.
    fit_rows : array_like of int
        Row indices of the fit steps (at least 8).
    rng : int
        Seed for the bootstrap intervals of the fits.
    comm_sampling : {"joint", "fitted"}
        Communication durations resampled jointly with the step's gaps (default), or drawn
        per instance from laws fitted per signature (fitted only in that case).

    Returns
    -------
    TraceModel
    """
    if comm_sampling not in ("joint", "fitted"):
        raise ValueError(f"comm_sampling must be 'joint' or 'fitted', got {comm_sampling!r}")
    rows = np.asarray(fit_rows, dtype=int)
    if rows.size < 8:
        raise ValueError(f"fit_rows: need at least 8 fit steps, got {rows.size}")
    s = structure
    gap_all, dur_all = unit_values(s)
    gap, dur = gap_all[rows], dur_all[rows]
    step_scale = float(np.median(replay(s, gap, dur)))
    hidden = find_hidden_dependencies(s, gap_all, dur_all, rows, max(1e-3, 1e-3 * step_scale))
    end_hidden = {h.unit for h in hidden if h.at == "end"}
    sizes = np.array([len(m) for m in s.units])
    # a send, receive or collective recorded alone (no partner found) holds waiting that the
    # graph cannot reproduce: drawn independently per op it would add up instead of
    # compensating, so it is resampled with its step like a communication instance
    lone_comm = np.array(
        [sizes[u] == 1 and is_communication(s.names[s.units[u][0]]) for u in range(s.n_units)],
        dtype=bool,
    )
    op_units = np.flatnonzero((sizes == 1) & ~lone_comm)
    comm_units = np.array(
        [u for u in np.flatnonzero((sizes > 1) | lone_comm) if u not in end_hidden], dtype=int
    )
    first = np.array([s.units[u][0] for u in op_units])
    names = np.array([str(s.names[i]) for i in first], dtype=object)
    is_mb = s.microbatch[first] >= 0
    logd = np.log(np.maximum(dur[:, op_units], 1e-9))
    log_base, resid, info, p_base = _op_bases(s, first, names, is_mb, logd)
    mb_cols = np.flatnonzero(is_mb)
    step_fit = mb_fit = None
    b_shrink = 0.0
    mb_group = np.zeros(mb_cols.size, dtype=int)
    mb_group_dp = np.zeros(1, dtype=int)
    rank_level = np.zeros((rows.size, 0))
    mb_rank = np.zeros(mb_cols.size, dtype=int)
    decomposition: dict = {}
    if mb_cols.size:
        r = resid[:, mb_cols]
        col_rank = s.ranks[first[mb_cols]]
        rank_ids = {x: j for j, x in enumerate(sorted(set(col_rank)))}
        mb_rank = np.array([rank_ids[x] for x in col_rank])
        n_r = np.bincount(mb_rank)
        level = np.stack([np.bincount(mb_rank, weights=row) / n_r for row in r])
        a = level.mean(axis=1)
        keys = list(zip(s.dp[first[mb_cols]], s.microbatch[first[mb_cols]]))
        uniq = {k: j for j, k in enumerate(sorted(set(keys)))}
        mb_group = np.array([uniq[k] for k in keys])
        mb_group_dp = np.array([k[0] for k in sorted(uniq)])
        counts = np.bincount(mb_group)
        r1 = r - level[:, mb_rank]
        b = np.stack([np.bincount(mb_group, weights=row) / counts for row in r1])
        e = r1 - b[:, mb_group]
        # free parameters behind e: the bases (fitted over all fit steps) and, per step, the
        # rank levels and microbatch effects less their overlap (one per connected block of
        # ranks and microbatch groups); the per-step effects' mean over steps is in the bases
        k = r.shape[0]
        p_step = level.shape[1] + b.shape[1] - _components(mb_rank, mb_group)
        dof = max(r.size - p_base - (k - 1) * p_step, 1)
        dof_level = max(r.size - p_base - (k - 1) * level.shape[1], 1)
        var_e = float(np.sum(e**2) / dof)
        # the rank levels hold each data-parallel replica's mean microbatch effect, so b is
        # centred within a replica: its variance is (M - 1) / M of the factor's (M groups
        # per replica), noise included
        m_dp = float(np.mean(np.bincount(mb_group_dp)))
        centring = m_dp / (m_dp - 1) if m_dp > 1 else 1.0
        var_b = max(b.var() * centring - var_e / counts.mean(), 0.0)
        dev = level - a[:, None]
        var_dev = max(dev.var() - var_e / n_r.mean(), 0.0)
        var_a = max(a.var(ddof=1) - var_e / r.shape[1] - var_b / b.shape[1], 0.0)
        shrink = np.sqrt(var_dev / dev.var()) if dev.var() > 0 else 0.0
        rank_level = a[:, None] + shrink * dev
        info.update(_factor_info(a, b, e, var_a, var_b, var_e, var_dev, mb_group))
        decomposition = {
            "a": a,
            "b": b,
            "e": e,
            "dof_scale": dof / r.size,
            "counts": counts,
            "centring": centring,
        }
        if a.size >= 8 and np.ptp(a) > 0:
            step_fit = fit_latency(a - a.mean(), families=_LOG_FAMILIES, rng=rng)
        if var_b > 0 and info["microbatch_factor"]["significant"]:
            mb_fit = fit_latency(b.ravel(), families=_LOG_FAMILIES, rng=rng)
            b_shrink = float(np.sqrt(var_b / max(b.var(), 1e-300)))
            # the raw residuals are shrunk by the effects fitted to them; rescale them so
            # that their variance is the unbiased noise variance
            resid[:, mb_cols] = e * np.sqrt(r.size / dof)
        else:
            resid[:, mb_cols] = r1 * np.sqrt(r.size / dof_level)
    other = np.flatnonzero(~is_mb)
    if other.size and rows.size > 1:
        # single-rank ops not per microbatch: each op's base is its own median over the fit
        # steps, which takes one degree of freedom per op
        resid[:, other] *= np.sqrt(rows.size / (rows.size - 1))
    residual = {}
    for name in sorted(set(names)):
        cols = np.flatnonzero(names == name)
        x = resid[:, cols].ravel()
        residual[name] = fit_latency(x - np.median(x), families=_LOG_FAMILIES, rng=rng)
        log_base[cols] += np.median(x)
    info["lone_communication_ops"] = int(np.sum(lone_comm))
    comm_typical = np.median(dur[:, comm_units], axis=0) if comm_units.size else np.zeros(0)
    comm_sig = [s.unit_signature(u) for u in comm_units]
    comm_ratio = {}
    for sig in sorted(set(comm_sig), key=str) if comm_sampling == "fitted" else ():
        cols = [j for j, g in enumerate(comm_sig) if g == sig]
        typ = np.maximum(comm_typical[cols], 1e-12)
        comm_ratio[sig] = fit_latency((dur[:, comm_units[cols]] / typ).ravel(), rng=rng)
    return TraceModel(
        structure=s,
        fit_rows=rows,
        op_units=op_units,
        mb_units=op_units[mb_cols],
        log_base=log_base,
        residual=residual,
        residual_name=names,
        step_factor=step_fit,
        mb_factor=mb_fit,
        rank_step_level=rank_level,
        mb_rank=mb_rank,
        mb_factor_shrink=b_shrink,
        mb_group=mb_group,
        mb_group_dp=mb_group_dp,
        comm_units=comm_units,
        comm_typical=comm_typical,
        comm_ratio=comm_ratio,
        comm_signature=comm_sig,
        gaps=gap,
        hidden=hidden,
        comm_durations=dur[:, comm_units],
        comm_sampling=comm_sampling,
        info=info,
        decomposition=decomposition,
    )


def _op_bases(s, first, names, is_mb, logd):
    """Typical log durations: per (rank, name) median plus a pooled position offset.

    Returns the bases, the residuals, an (empty) info dict and the number of free base
    parameters of the per-microbatch ops (rank-name levels plus positions, less one per
    connected (name, stage) block, where the two overlap), for the residuals' degrees of
    freedom.
    """
    base = np.median(logd, axis=0)
    resid = logd - base
    ranks, stages, seqs = s.ranks[first], s.stage[first], np.array([s.keys[i][2] for i in first])
    rank_name = {}
    for j in np.flatnonzero(is_mb):
        rank_name.setdefault((ranks[j], names[j]), []).append(j)
    pos = {}
    for cols in rank_name.values():
        level = np.median(logd[:, cols])
        for j in cols:
            base[j] = level
            pos.setdefault((names[j], stages[j], seqs[j]), []).append(j)
    for cols in pos.values():
        offset = np.median(logd[:, cols] - base[cols])
        base[cols] += offset
    resid = logd - base
    mb = np.flatnonzero(is_mb)
    rn_id = {k: i for i, k in enumerate(rank_name)}
    pos_id = {k: i for i, k in enumerate(pos)}
    rn_of = [rn_id[(ranks[j], names[j])] for j in mb]
    pos_of = [pos_id[(names[j], stages[j], seqs[j])] for j in mb]
    p_base = len(rank_name) + len(pos) - _components(rn_of, pos_of)
    return base, resid, {}, p_base


def _components(a, b) -> int:
    """Connected components of the bipartite graph with an edge (a[i], b[i]) per i.

    Two sets of indicator effects fitted together have (levels of a) + (levels of b) -
    (components) free parameters.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    a, b = np.asarray(a, dtype=int), np.asarray(b, dtype=int)
    if a.size == 0:
        return 0
    na, nb = int(a.max()) + 1, int(b.max()) + 1
    graph = coo_matrix((np.ones(a.size), (a, na + b)), shape=(na + nb, na + nb))
    return int(connected_components(graph, directed=False)[0])


def _factor_info(a, b, e, var_a, var_b, var_e, var_dev, mb_group):
    """Sizes (log scale, about relative) and significance of the shared factors."""
    from scipy import stats

    from prism_analytic.traces.fitting import ljung_box

    k, g = b.shape
    cells = [b[i, j] + e[i, mb_group == j] for i in range(k) for j in range(g)]
    f_mb = stats.f_oneway(*cells)
    per_step = [a[i] + b[i][mb_group] + e[i] for i in range(k)]
    f_step = stats.f_oneway(*per_step)
    return {
        "step_factor": {
            "sd_rel": float(np.sqrt(var_a)),
            "pvalue": float(f_step.pvalue),
            "significant": bool(f_step.pvalue < 0.01 and var_a > 0),
            "ljung_box_pvalue": ljung_box(a),
        },
        "rank_step_deviation_sd_rel": float(np.sqrt(var_dev)),
        "microbatch_factor": {
            "sd_rel": float(np.sqrt(var_b)),
            "pvalue": float(f_mb.pvalue),
            "significant": bool(f_mb.pvalue < 0.01 and var_b > 0),
        },
        "independent_noise_sd_rel": float(np.sqrt(var_e)),
    }
