"""Collective-latency noise as a population of runs (a hierarchical, random-effects model).

Why a population: in ``collective_latency`` a run's noise parameters do not carry over to the
next run. Among the <= 128-node host-buffer sessions on Leonardo the rate of delayed
iterations ranges from none in 1.6 million node-iterations (16 nodes, 2025-05-06) to about
1e-4 per node and iteration (128 nodes, 2025-03-19), half of the delayed iterations follow
another in some sessions and none in others, and the body's width differs between runs of
the same size. A prediction for a new run has to draw that run's parameters from the
population of runs, so that its interval includes the between-run spread, not only the
sampling spread of one fitted law.

Model of one run ``r`` of a collective over ``n`` nodes whose median latency is ``c``
(seconds; the scale, an input: the workload model's deterministic collective time, or a
measured median):

* **body**: an undelayed iteration takes ``c * exp(sigma_r * Z)``, ``Z`` Student-t scaled
  to the normal's p90 (so ``sigma_r`` is a width: p90/p50 = ``exp(z_0.9 sigma_r)``), its
  degrees of freedom matched to the median ``ln(p99/p50) / ln(p90/p50)`` of the runs with no
  delayed iteration (about 2.7 at 4-16 nodes against 1.82 for a lognormal: small jitter);
  ``ln sigma_r = a + b ln n + u_s + e_r`` with a session effect ``u_s ~ N(0, tau_s^2)`` and a
  run (file) effect ``e_r ~ N(0, tau_f^2)``: a linear mixed model (statsmodels ``MixedLM``)
  fitted to each run's ``sigma = ln(p90 / p50) / z_0.9``;
* **events**: an excess over ``c`` above ``threshold`` (an absolute time: a node preempted by
  the operating system or a daemon delays the collective by tens of microseconds whatever
  the message). A burst of delayed iterations starts in an iteration with probability
  ``1 - (1 - lambda_r)^n`` (per-node rate ``lambda_r``) and each delayed iteration is followed
  by another with probability ``q_r``; the excess is lognormal ``(mu_d, s_d)`` truncated at
  ``threshold``. Across sessions ``ln lambda ~ N(mu_l, tau_l^2)`` (a Poisson-lognormal model
  of the burst starts, fitted by likelihood with adaptive Gauss-Hermite quadrature),
  optionally with a share ``pi`` of quiet sessions that have no bursts at all (two of the
  five <= 128-node sessions have none in 0.4-1.7 million node-iterations while the others
  have 1-4e-5 per node; the choice is made by AIC on the fit data), and
  ``q ~ Beta(alpha, beta)`` (a beta-binomial model of the delayed iterations that follow a
  delayed one). The excess law is pooled over all runs (one law, no session effect).

Parameter uncertainty: the fixed effects of the body model and the (mean, log spread) of
each population law have covariances from the observed information (statsmodels' numerical
Hessian); a variance component estimated from ``G`` sessions is drawn as
``tau^2 (G - k) / chi2_{G - k}`` (its small-sample spread), so that few sessions give wide
intervals instead of overconfident ones. :func:`predicted_ratio_interval` draws population
parameters, then a run, then the measured number of iterations, and takes numpy-default
sample quantiles, as measured ratios are taken.

What it leaves out (stated so that a miss can be named): latency that itself changes
between sessions (``c`` is an input), contention on shared global links that widens
bandwidth-bound messages at hundreds of nodes, delays proportional to the collective's
own time (ms-scale collectives), and any dependence of the excess law on the session.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special, stats
from statsmodels.tools.numdiff import approx_hess3

__all__ = [
    "DEFAULT_THRESHOLD_S",
    "RunSummary",
    "RunNoise",
    "NoisePopulation",
    "summarize_run",
    "fit_population",
    "predicted_ratio_interval",
]

#: Excess over the median (s) above which an iteration counts as delayed. At <= 128 nodes
#: and medians below 150 us the body's own excess stays below ~12 us (4 sigma of a 3% body
#: at 100 us), while the delayed iterations' median excess is 60-100 us.
DEFAULT_THRESHOLD_S = 30e-6
_Z90 = float(special.ndtri(0.9))


@dataclass(frozen=True)
class RunSummary:
    """What the population fit needs from one measured run.

    A run is one file: one collective, algorithm and message size in one session.

    Parameters
    ----------
    session : str
        The allocation it ran in (runs of one session share its state).
    nodes : int
    iterations : int
    median_s : float
    body_sigma : float
        ``ln(p90 / p50) / z_0.9``: the body's width at p90, in lognormal-shape units.
    body_tail : float
        ``ln(p99 / p50) / ln(p90 / p50)`` (1.82 for a lognormal; the body's tail shape where
        the run has no delayed iteration).
    events : int
        Iterations whose excess over the median is above ``threshold_s``.
    pairs : int
        Delayed iterations whose next iteration is delayed too.
    excess_s : numpy.ndarray
        The delayed iterations' excesses over the median (s).
    threshold_s : float
    """

    session: str
    nodes: int
    iterations: int
    median_s: float
    body_sigma: float
    body_tail: float
    events: int
    pairs: int
    excess_s: np.ndarray = field(repr=False)
    threshold_s: float = DEFAULT_THRESHOLD_S


def summarize_run(
    x: np.ndarray, nodes: int, session: str, *, threshold_s: float = DEFAULT_THRESHOLD_S
) -> RunSummary:
    """Summarise one run's per-iteration latencies (seconds, in measured order).

    Raises
    ------
    ValueError
        If ``x`` is not a 1-D array of >= 100 finite positive latencies, ``nodes`` < 1 or
        ``threshold_s`` <= 0.
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or len(x) < 100:
        raise ValueError(f"x: need a 1-D array of >= 100 iterations, got shape {x.shape}")
    if not np.all(np.isfinite(x) & (x > 0)):
        raise ValueError("x: latencies must be finite and > 0")
    if int(nodes) != nodes or nodes < 1:
        raise ValueError(f"nodes must be an integer >= 1, got {nodes!r}")
    if not (math.isfinite(threshold_s) and threshold_s > 0):
        raise ValueError(f"threshold_s must be a finite number > 0, got {threshold_s!r}")
    med, q90, q99 = np.quantile(x, [0.5, 0.9, 0.99])
    hit = x - med > threshold_s
    w90 = max(math.log(q90 / med), 1e-6)
    return RunSummary(
        session=str(session),
        nodes=int(nodes),
        iterations=len(x),
        median_s=float(med),
        body_sigma=w90 / _Z90,
        body_tail=max(math.log(q99 / med), 1e-6) / w90,
        events=int(hit.sum()),
        pairs=int(np.sum(hit[1:] & hit[:-1])),
        excess_s=x[hit] - med,
        threshold_s=float(threshold_s),
    )


@dataclass(frozen=True)
class RunNoise:
    """One run's noise law (see the module notes); times in seconds.

    The body is ``c * exp(s * T)`` with ``T`` Student-t of ``body_dof`` degrees of freedom
    (normal when infinite) and ``s`` set so that its p90/p50 is ``exp(z_0.9 body_sigma)``
    whatever ``body_dof``: ``body_sigma`` is a width, ``body_dof`` the tail's shape.
    """

    body_sigma: float
    rate: float
    burst: float
    delay_mu: float
    delay_sigma: float
    threshold_s: float = DEFAULT_THRESHOLD_S
    body_dof: float = math.inf

    def __post_init__(self) -> None:
        for name in ("body_sigma", "delay_sigma", "threshold_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if not 0 <= self.rate < 1:
            raise ValueError(f"rate must be in [0, 1), got {self.rate!r}")
        if not 0 <= self.burst < 1:
            raise ValueError(f"burst must be in [0, 1), got {self.burst!r}")
        if not math.isfinite(self.delay_mu):
            raise ValueError(f"delay_mu must be finite, got {self.delay_mu!r}")
        if not self.body_dof >= 1:
            raise ValueError(f"body_dof must be >= 1 (inf = normal), got {self.body_dof!r}")

    def start_prob(self, n: int) -> float:
        """P(a burst starts in one iteration over ``n`` nodes)."""
        return float(-math.expm1(n * math.log1p(-self.rate))) if self.rate > 0 else 0.0

    def sample(
        self, n: int, iterations: int, median_s: float, rng: np.random.Generator
    ) -> np.ndarray:
        """``iterations`` consecutive iterations over ``n`` nodes at median latency ``median_s``."""
        if math.isinf(self.body_dof):
            z = rng.standard_normal(iterations)
        else:
            z = rng.standard_t(self.body_dof, iterations) * (_Z90 / stats.t.ppf(0.9, self.body_dof))
        x = median_s * np.exp(self.body_sigma * z)
        starts = np.flatnonzero(rng.uniform(size=iterations) < self.start_prob(n))
        if len(starts) == 0:
            return x
        # a burst is a geometric run of delayed iterations (length >= 1, mean 1 / (1 - q))
        length = rng.geometric(1 - self.burst, size=len(starts))
        offset = np.arange(length.sum()) - np.repeat(np.cumsum(length) - length, length)
        pos = np.repeat(starts, length) + offset
        hit = np.zeros(iterations, dtype=bool)
        hit[pos[pos < iterations]] = True
        lo = special.ndtr((math.log(self.threshold_s) - self.delay_mu) / self.delay_sigma)
        u = rng.uniform(lo, 1.0, size=int(hit.sum()))
        x[hit] = median_s + np.exp(self.delay_mu + self.delay_sigma * special.ndtri(u))
        return x


@dataclass(frozen=True)
class NoisePopulation:
    """The fitted population of runs (see the module notes).

    ``*_cov`` are covariances of ``(a, b)``, ``(mu_l, ln tau_l)``, ``(ln alpha, ln beta)`` and
    ``(mu_d, ln s_d)``; ``sessions`` and ``runs`` count what the fit saw;
    ``not_identified`` names the laws the data could not set (then drawn from their bounds'
    flat spread, and said so in :meth:`to_dict`).
    """

    body_coef: np.ndarray
    body_cov: np.ndarray
    body_tau_session: float
    body_tau_run: float
    rate_mu: float
    rate_tau: float
    rate_cov: np.ndarray
    burst_alpha: float
    burst_beta: float
    burst_cov: np.ndarray
    delay_mu: float
    delay_sigma: float
    delay_cov: np.ndarray
    threshold_s: float
    sessions: int
    runs: int
    node_range: tuple[int, int]
    not_identified: tuple[str, ...] = ()
    quiet_prob: float = 0.0
    rate_models: dict = field(default_factory=dict)
    body_dof: float = math.inf
    body_tail: float = float("nan")

    def draw_runs(
        self,
        n: int,
        k: int,
        rng: np.random.Generator,
        *,
        parameter_uncertainty: bool = True,
        between_runs: bool = True,
    ) -> list[RunNoise]:
        """Draw ``k`` runs over ``n`` nodes.

        Population parameters are drawn from their uncertainty, then each run's parameters
        from the population.

        ``parameter_uncertainty=False`` holds the population laws at their estimates;
        ``between_runs=False`` gives every run the population's central law (median body
        width and rate, mean burst continuation): the two switches show what makes an
        interval wide.
        """
        g = self.sessions
        u = 1.0 if parameter_uncertainty else 0.0
        w = 1.0 if between_runs else 0.0

        def mvn(mean, cov) -> np.ndarray:
            return rng.multivariate_normal(mean, u * np.asarray(cov), size=k, method="eigh")

        ab = mvn(self.body_coef, self.body_cov)
        # small-sample spread of a variance component from g sessions (2 fixed effects)
        dof = max(g - 2, 1)
        tau_s = self.body_tau_session * (np.sqrt(dof / rng.chisquare(dof, size=k)) if u else 1)
        log_sig = ab[:, 0] + ab[:, 1] * math.log(n)
        log_sig = log_sig + w * (
            tau_s * rng.standard_normal(k) + self.body_tau_run * rng.standard_normal(k)
        )
        center = [self.rate_mu, math.log(self.rate_tau)]
        if self.quiet_prob > 0:
            center.append(float(special.logit(self.quiet_prob)))
        rl = mvn(center, self.rate_cov)
        log_rate = rl[:, 0] + w * np.exp(rl[:, 1]) * rng.standard_normal(k)
        if self.quiet_prob > 0:
            pi = special.expit(rl[:, 2])
            if between_runs:  # a quiet session has no bursts at all
                log_rate = np.where(rng.uniform(size=k) < pi, -np.inf, log_rate)
            else:  # central law: the median noisy rate, thinned by the quiet share
                log_rate = log_rate + np.log1p(-pi)
        bb = np.exp(mvn([math.log(self.burst_alpha), math.log(self.burst_beta)], self.burst_cov))
        if between_runs:
            q = np.minimum(rng.beta(bb[:, 0], bb[:, 1]), 0.99)
        else:
            q = bb[:, 0] / (bb[:, 0] + bb[:, 1])
        dl = mvn([self.delay_mu, math.log(self.delay_sigma)], self.delay_cov)
        return [
            RunNoise(
                body_sigma=float(np.exp(log_sig[i])),
                rate=float(min(np.exp(log_rate[i]), 0.05)),
                burst=float(q[i]),
                delay_mu=float(dl[i, 0]),
                delay_sigma=float(np.exp(dl[i, 1])),
                threshold_s=self.threshold_s,
                body_dof=self.body_dof,
            )
            for i in range(k)
        ]

    def to_dict(self) -> dict:
        """Plain dict of the population laws (natural units) and what the fit saw."""
        se = [math.sqrt(max(self.body_cov[i, i], 0.0)) for i in range(2)]
        return {
            "body_log_sigma": {
                "intercept": float(self.body_coef[0]),
                "per_ln_nodes": float(self.body_coef[1]),
                "se": se,
                "tau_session": self.body_tau_session,
                "tau_run": self.body_tau_run,
                "tail_ratio_p99_p90": self.body_tail,
                "dof": self.body_dof,
            },
            "rate_per_node": {
                "median": math.exp(self.rate_mu),
                "tau_ln": self.rate_tau,
                "se_mu": math.sqrt(max(self.rate_cov[0, 0], 0.0)),
                "quiet_prob": self.quiet_prob,
                "models": self.rate_models,
            },
            "burst_continuation": {
                "alpha": self.burst_alpha,
                "beta": self.burst_beta,
                "mean": self.burst_alpha / (self.burst_alpha + self.burst_beta),
            },
            "delay_s": {"median": math.exp(self.delay_mu), "sigma_ln": self.delay_sigma},
            "threshold_s": self.threshold_s,
            "sessions": self.sessions,
            "runs": self.runs,
            "node_range": list(self.node_range),
            "not_identified": list(self.not_identified),
        }


def _hess_cov(f, x: np.ndarray) -> tuple[np.ndarray, bool]:
    """Covariance from the observed information; ``False`` when the likelihood is flat."""
    h = approx_hess3(x, f)
    try:
        cov = np.linalg.inv(h)
    except np.linalg.LinAlgError:
        cov = np.linalg.pinv(h)
    cov = 0.5 * (cov + cov.T)
    w, v = np.linalg.eigh(cov)
    ok = bool(np.all(np.isfinite(w)) and np.all(w > 0))
    return (v * np.maximum(w, 0.0)) @ v.T, ok


def _fit_body(runs: Sequence[RunSummary]) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Mixed model ``ln sigma ~ 1 + ln n`` with a session random intercept (REML)."""
    from statsmodels.regression.mixed_linear_model import MixedLM

    y = np.log([r.body_sigma for r in runs])
    ln_n = np.log([r.nodes for r in runs])
    groups = [r.session for r in runs]
    exog = np.column_stack([np.ones_like(ln_n), ln_n])
    if np.ptp(ln_n) == 0:
        raise ValueError("runs: the body's growth with nodes needs >= 2 node counts")
    import warnings

    with warnings.catch_warnings():
        # a boundary (zero) session variance is a valid answer, not an error
        warnings.simplefilter("ignore")
        res = MixedLM(y, exog, groups=groups).fit(reml=True)
    coef = np.asarray(res.fe_params, dtype=float)
    cov = np.asarray(res.cov_params(), dtype=float)[:2, :2]
    tau_s = math.sqrt(max(float(np.asarray(res.cov_re)[0, 0]), 0.0))
    tau_f = math.sqrt(max(float(res.scale), 0.0))
    return coef, cov, tau_s, tau_f


def _fit_body_tail(runs: Sequence[RunSummary]) -> tuple[float, float]:
    """Fit the body's tail shape (Student-t degrees of freedom, and the target ratio).

    Matches the median ``ln(p99/p50) / ln(p90/p50)`` of the runs without any delayed
    iteration (>= 10,000 iterations, so that their p99 is the body's own); ``(inf, nan)``
    when fewer than 3 such runs.
    """
    r = [x.body_tail for x in runs if x.events == 0 and x.iterations >= 10_000]
    if len(r) < 3:
        return math.inf, float("nan")
    target = float(np.median(r))

    def ratio(nu: float) -> float:
        return float(stats.t.ppf(0.99, nu) / stats.t.ppf(0.9, nu))

    if target <= ratio(1e4):
        return math.inf, target
    if target >= ratio(1.0):
        return 1.0, target
    return float(optimize.brentq(lambda nu: ratio(nu) - target, 1.0, 1e4)), target


def _fit_rate(starts: np.ndarray, exposure: np.ndarray, quiet: bool) -> dict:
    """ML of per-node burst-start rates across sessions (Poisson-lognormal).

    With ``quiet=True`` a session is quiet (no starts at all) with probability ``pi`` and
    otherwise draws its rate from the lognormal: a zero-inflated Poisson-lognormal. The
    integral over each session's random effect is adaptive Gauss-Hermite: nodes centred on
    the integrand's mode and scaled by its curvature, because a session with hundreds of
    starts has an integrand far narrower than fixed nodes resolve (a bumpy likelihood).

    Returns
    -------
    dict
        ``mu``, ``tau``, ``quiet_prob``, ``cov`` (of ``mu, ln tau[, logit pi]``), ``ok``
        (information positive definite), ``loglik``, ``aic``.
    """
    x, w = np.polynomial.hermite_e.hermegauss(20)
    lw = np.log(w / math.sqrt(2 * math.pi)) + 0.5 * x * x
    lgk = special.gammaln(starts + 1)
    le = np.log(exposure)

    def log_pl(mu: float, tau: float) -> np.ndarray:
        zh = np.zeros_like(le)
        for _ in range(40):  # Newton on a concave log integrand
            m = np.exp(np.minimum(le + mu + tau * zh, 700.0))
            zh = zh + (starts * tau - tau * m - zh) / (tau * tau * m + 1)
        s = 1 / np.sqrt(tau * tau * np.exp(np.minimum(le + mu + tau * zh, 700.0)) + 1)
        z = zh[:, None] + s[:, None] * x[None, :]
        lam = le[:, None] + mu + tau * z
        ll = starts[:, None] * lam - np.exp(np.minimum(lam, 700.0)) - lgk[:, None] - 0.5 * z * z
        return np.log(s) + special.logsumexp(ll + lw[None, :], axis=1)

    def nll(v: np.ndarray) -> float:
        lp = log_pl(v[0], math.exp(v[1]))
        if quiet:
            lq, ln = special.log_expit(v[2]), special.log_expit(-v[2])
            lp = np.where(starts == 0, np.logaddexp(lq, ln + lp), ln + lp)
        return -float(np.sum(lp))

    mu0 = math.log(max(starts.sum(), 0.5) / exposure.sum())
    bounds = [(math.log(1e-12), math.log(0.05)), (math.log(0.02), math.log(5.0))]
    starts0 = [[mu0, math.log(t0)] for t0 in (0.3, 1.0, 2.5)]
    if quiet:
        bounds.append((-8.0, 8.0))
        starts0 = [v + [p0] for v in starts0 for p0 in (-1.0, 1.0)]
    best = min(
        (optimize.minimize(nll, v0, method="L-BFGS-B", bounds=bounds) for v0 in starts0),
        key=lambda r: r.fun,
    )
    cov, ok = _hess_cov(nll, best.x)
    k = len(best.x)
    return {
        "mu": float(best.x[0]),
        "tau": float(math.exp(best.x[1])),
        "quiet_prob": float(special.expit(best.x[2])) if quiet else 0.0,
        "cov": cov,
        "ok": ok,
        "loglik": -float(best.fun),
        "aic": 2 * k + 2 * float(best.fun),
    }


def _fit_burst(pairs: np.ndarray, events: np.ndarray) -> tuple[float, float, np.ndarray, bool]:
    """Beta-binomial ML of the burst continuation ``q`` across sessions."""
    keep = events > 0
    k, m = pairs[keep], events[keep]

    def nll(v: np.ndarray) -> float:
        return -float(np.sum(stats.betabinom.logpmf(k, m, math.exp(v[0]), math.exp(v[1]))))

    bounds = [(math.log(0.05), math.log(200.0))] * 2
    best = min(
        (
            optimize.minimize(nll, [math.log(a0), math.log(b0)], method="L-BFGS-B", bounds=bounds)
            for a0, b0 in ((0.5, 0.5), (1.0, 5.0), (5.0, 5.0))
        ),
        key=lambda r: r.fun,
    )
    cov, ok = _hess_cov(nll, best.x)
    return float(math.exp(best.x[0])), float(math.exp(best.x[1])), cov, ok and len(k) >= 2


def _fit_delay(excess: np.ndarray, threshold: float) -> tuple[float, float, np.ndarray, bool]:
    """ML of a lognormal excess truncated below at ``threshold`` (pooled over runs)."""
    le = np.log(excess)
    lt = math.log(threshold)

    def nll(v: np.ndarray) -> float:
        mu, s = v[0], math.exp(v[1])
        u = (le - mu) / s
        tail = special.log_ndtr(-(lt - mu) / s)
        return -float(np.sum(-0.5 * u * u - math.log(s) - le) - len(le) * tail)

    v0 = [float(np.median(le)), math.log(max(float(np.std(le)), 0.1))]
    bounds = [(math.log(1e-7), math.log(1.0)), (math.log(0.05), math.log(5.0))]
    r = optimize.minimize(nll, v0, method="L-BFGS-B", bounds=bounds)
    cov, ok = _hess_cov(nll, r.x)
    return float(r.x[0]), float(math.exp(r.x[1])), cov, ok


def fit_population(runs: Sequence[RunSummary], *, rate_model: str = "auto") -> NoisePopulation:
    """Fit the population of runs (two stages: each run summarised, then the population laws).

    Parameters
    ----------
    runs : sequence of RunSummary
        Runs from >= 3 sessions and >= 2 node counts, all with one ``threshold_s``.
    rate_model : {"auto", "lognormal", "quiet"}
        Population of burst-start rates: lognormal, or lognormal with a share of quiet
        sessions (no bursts); ``auto`` fits both and keeps the lower AIC.

    Returns
    -------
    NoisePopulation

    Raises
    ------
    ValueError
        Too few sessions or node counts, no delayed iteration at all, or mixed thresholds.
    """
    if rate_model not in ("auto", "lognormal", "quiet"):
        raise ValueError(f"rate_model must be 'auto', 'lognormal' or 'quiet', got {rate_model!r}")
    runs = list(runs)
    sessions = sorted({r.session for r in runs})
    if len(sessions) < 3:
        raise ValueError(f"runs: need >= 3 sessions for a between-session spread, got {sessions}")
    thresholds = {r.threshold_s for r in runs}
    if len(thresholds) != 1:
        raise ValueError(f"runs: all summaries need one threshold_s, got {sorted(thresholds)}")
    threshold = thresholds.pop()
    coef, cov, tau_s, tau_f = _fit_body(runs)
    dof, tail = _fit_body_tail(runs)
    per = {s: [r for r in runs if r.session == s] for s in sessions}
    events = np.array([sum(r.events for r in per[s]) for s in sessions], dtype=float)
    pairs = np.array([sum(r.pairs for r in per[s]) for s in sessions], dtype=float)
    exposure = np.array([sum(r.iterations * r.nodes for r in per[s]) for s in sessions], float)
    if events.sum() < 10:
        raise ValueError(f"runs: {int(events.sum())} delayed iterations in all, need >= 10")
    not_id = []
    fits = {
        m: _fit_rate(events - pairs, exposure, quiet=m == "quiet")
        for m in ("lognormal", "quiet")
        if rate_model in ("auto", m)
    }
    chosen = min(fits, key=lambda m: fits[m]["aic"])
    rate = fits[chosen]
    if not rate["ok"]:
        not_id.append("rate spread")
    alpha, beta, burst_cov, ok = _fit_burst(pairs, events)
    if not ok:
        not_id.append("burst")
    excess = np.concatenate([r.excess_s for r in runs])
    d_mu, d_sig, d_cov, ok = _fit_delay(excess, threshold)
    if not ok:
        not_id.append("delay")
    return NoisePopulation(
        body_coef=coef,
        body_cov=cov,
        body_tau_session=tau_s,
        body_tau_run=tau_f,
        rate_mu=rate["mu"],
        rate_tau=rate["tau"],
        rate_cov=rate["cov"],
        burst_alpha=alpha,
        burst_beta=beta,
        burst_cov=burst_cov,
        delay_mu=d_mu,
        delay_sigma=d_sig,
        delay_cov=d_cov,
        threshold_s=threshold,
        sessions=len(sessions),
        runs=len(runs),
        node_range=(min(r.nodes for r in runs), max(r.nodes for r in runs)),
        not_identified=tuple(not_id),
        quiet_prob=rate["quiet_prob"],
        body_dof=dof,
        body_tail=tail,
        rate_models={
            m: {"chosen": m == chosen, "loglik": f["loglik"], "aic": f["aic"]}
            for m, f in fits.items()
        },
    )


def predicted_ratio_interval(
    pop: NoisePopulation,
    n: int,
    iterations: int,
    median_s: float,
    *,
    levels: tuple[float, ...] = (0.9, 0.99),
    reps: int = 400,
    seed: int = 0,
    coverage: float = 0.90,
    parameter_uncertainty: bool = True,
    between_runs: bool = True,
) -> dict[float, tuple[float, float, float]]:
    """Predictive interval of a new run's sample ratio ``Q(p) / Q(0.5)``.

    Each replicate draws population parameters (their uncertainty), a run from the
    population (between-run spread), then ``iterations`` iterations at ``n`` nodes and median
    latency ``median_s`` (sampling spread). The two switches (see
    :meth:`NoisePopulation.draw_runs`) leave a source of spread out, to show its share.

    Returns
    -------
    dict
        ``{level: (lower, median, upper)}`` of the replicate ratios at ``coverage``.
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if iterations < 2:
        raise ValueError(f"iterations must be >= 2, got {iterations}")
    if not (math.isfinite(median_s) and median_s > 0):
        raise ValueError(f"median_s must be a finite number > 0, got {median_s!r}")
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be in (0, 1), got {coverage}")
    rng = np.random.default_rng(seed)
    ratios = np.empty((reps, len(levels)))
    runs = pop.draw_runs(
        int(n),
        reps,
        rng,
        parameter_uncertainty=parameter_uncertainty,
        between_runs=between_runs,
    )
    for i, run in enumerate(runs):
        q = np.quantile(run.sample(int(n), iterations, median_s, rng), [0.5, *levels])
        ratios[i] = q[1:] / q[0]
    a = (1 - coverage) / 2
    return {
        p: (
            float(np.quantile(ratios[:, j], a)),
            float(np.median(ratios[:, j])),
            float(np.quantile(ratios[:, j], 1 - a)),
        )
        for j, p in enumerate(levels)
    }
