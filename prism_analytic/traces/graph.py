"""The fitted trace model as ``StepGraph``s, for the analytic engine.

The model's step-level state (each rank's work level, host gaps, communication durations,
hidden-dependency lags) is resampled from the fit steps, so the step-time law is exactly the
equal-weight mixture over fit steps of the law given that step's state. Given the state, each
op unit is an independent lognormal (log-scale mean = its base plus its rank's level; log-scale
variance = microbatch-factor variance plus its noise variance) and everything else is fixed.
One graph per fit step is evaluated by :func:`prism_analytic.predict` and the results are
mixed with :func:`prism_analytic.mixture`.

Approximations, each measured against the model's own Monte Carlo replay: (1) the op noise is
lognormal (the replay uses the fitted log-scale family); (2) the microbatch factor, shared by a
microbatch's ops on every stage, is drawn independently per op here (the graph engines do not
yet condition on factors shared by many ops); the step-level part of it is in the rank levels.
"""

from __future__ import annotations

import numpy as np

__all__ = ["state_graph", "analytic_crosscheck"]


def state_graph(model, row: int):
    """The step graph given the state of fit step ``row`` (index into ``model.fit_rows``).

    Parameters
    ----------
    model : TraceModel
        Fitted model.
    row : int
        Which fit step's state.

    Returns
    -------
    prism_analytic.StepGraph
    """
    import prism_analytic as pa

    s = model.structure
    g = pa.StepGraph(f"trace-state-{row}")
    zero = pa.point_mass(0.0)
    sd = _op_log_sd(model)
    log_mu = np.array(model.log_base, dtype=float)
    if model.rank_step_level.size:
        log_mu[model.mb_col] += model.rank_step_level[row][model.mb_rank]
    dist = {}
    for j, u in enumerate(model.op_units):
        if sd[j] > 0:
            dist[u] = pa.from_scipy(_lognorm(log_mu[j], sd[j]))
        else:
            dist[u] = pa.point_mass(float(np.exp(log_mu[j])))
    for j, u in enumerate(model.comm_units):
        dist[u] = pa.point_mass(float(model.comm_durations[row, j]))
    hidden = {h.unit: (k, h) for k, h in enumerate(model.hidden)}
    gaps = model.gaps[row]
    end_name = {}
    for u, members in enumerate(s.units):
        after = []
        for i in members:
            gap = float(gaps[i])
            if u in hidden and hidden[u][1].at == "start":
                gap = hidden[u][1].own
            pred = end_name.get(s.unit_of[s.pred[i]]) if s.pred[i] >= 0 else None
            if gap > 0:
                after.append(g.add_op(f"gap{i}", pa.point_mass(gap), after=[pred] if pred else []))
            elif pred:
                after.append(pred)
        lat = dist.get(u, zero)
        if u in hidden:
            k, h = hidden[u]
            anchor = [end_name[h.anchor]] if h.anchor >= 0 else []
            lag = g.add_op(f"lag{k}", pa.point_mass(float(h.lag[row])), after=anchor)
            if h.at == "start":
                after.append(lag)
                end_name[u] = g.add_op(f"u{u}", lat, after=after)
            else:
                own = g.add_op(f"u{u}", pa.point_mass(h.own), after=after)
                end_name[u] = g.add_op(f"u{u}_end", zero, after=[own, lag])
        else:
            end_name[u] = g.add_op(f"u{u}", lat, after=after)
    return g


def _lognorm(mu, sigma):
    from scipy import stats

    return stats.lognorm(s=sigma, scale=float(np.exp(mu)))


def _op_log_sd(model) -> np.ndarray:
    """Log-scale sd of each op unit given the state: noise plus (if any) microbatch factor."""
    sd = np.zeros(model.op_units.size)
    for name, fit in model.residual.items():
        cols = np.flatnonzero(model.residual_name == name)
        sd[cols] = np.std(fit.sample(4000, np.random.default_rng(0)))
    if model.mb_factor is not None:
        var_b = (np.std(model.mb_factor.samples) * model.mb_factor_shrink) ** 2
        sd[model.mb_col] = np.sqrt(sd[model.mb_col] ** 2 + var_b)
    return sd


def analytic_crosscheck(model, replay_samples, *, states=None, mc_samples=4000, seed=0) -> dict:
    """The analytic mixture, checked against Monte Carlo two ways.

    Parameters
    ----------
    model : TraceModel
        Fitted model.
    replay_samples : numpy.ndarray
        Step times sampled from the model by replay (its exact semantics).
    states : sequence of int, optional
        Fit-step states to evaluate (default all).
    mc_samples : int
        Samples of the engine's own Monte Carlo on the first state's graph.
    seed : int
        Seed of that Monte Carlo.

    Returns
    -------
    dict
        ``mean_s, std_s, p50_s, p90_s, p95_s`` of the analytic law; ``states``;
        ``ks_vs_replay`` (KS distance to the replay samples: the graph approximations listed in
        the module docstring plus Monte Carlo noise); ``engine_ks_vs_montecarlo`` (first state:
        analytic engine against the engine's Monte Carlo on the identical graph);
        ``compute_time_s``.
    """
    import time

    import prism_analytic as pa

    t0 = time.perf_counter()
    rows = list(range(model.gaps.shape[0]) if states is None else states)
    results = [pa.predict(state_graph(model, r)) for r in rows]
    law = pa.mixture([r.distribution for r in results], [1.0 / len(results)] * len(results))
    elapsed = time.perf_counter() - t0
    x = np.sort(np.asarray(replay_samples, dtype=float))
    ecdf = np.arange(1, x.size + 1) / x.size
    ks_replay = float(np.max(np.abs(np.asarray(law.cdf(x)) - ecdf)))
    mc = pa.predict(state_graph(model, rows[0]), "montecarlo", samples=mc_samples, seed=seed)
    probe = np.quantile(x, np.linspace(0.001, 0.999, 400))
    ks_engine = float(np.max(np.abs(np.asarray(results[0].cdf(probe)) - np.asarray(mc.cdf(probe)))))
    out = {"mean_s": float(law.mean()), "std_s": float(law.std())}
    out.update({f"p{int(q * 100)}_s": float(law.quantile(q)) for q in (0.5, 0.9, 0.95)})
    out.update(
        states=len(rows),
        ks_vs_replay=ks_replay,
        engine_ks_vs_montecarlo=ks_engine,
        engine_exact=all(bool(r.exact) for r in results),
        compute_time_s=elapsed,
    )
    return out
