"""The stall count's posterior predictive interval (rate and size uncertainty carried).

Reference: with stalls far above 1.5x the median, every stall counts, and the posterior
predictive of the count over ``N`` steps from ``k`` stalls in ``n`` is negative binomial
(Poisson-gamma with the Jeffreys prior): ``NB(k + 1/2, n / (n + N))``.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from prism_analytic.calibration import StepLog, fit_step_events, predict_events


class _Body:
    p50_s = 10.0

    def sample(self, size, rng):
        return self.p50_s + 1e-3 * rng.standard_normal(size)


def _logs(rng, stalls: tuple[int, ...]) -> list[StepLog]:
    out = []
    for r in range(3):
        t = 10.0 * (1 + rng.normal(0.0, 0.002, 300))
        out.append(StepLog(f"r{r}", t, {}, np.zeros(300, dtype=bool)))
    for j, i in enumerate(stalls):
        out[j % 3].times_s[i] += 200.0  # 21x the median: every stall size counts
    return out


def test_posterior_predictive_count_matches_the_poisson_gamma_closed_form():
    rng = np.random.default_rng(41)
    fit = fit_step_events(_logs(rng, (50, 150, 250)), 512, n_gof=0, n_boot=0, body_model=False)
    assert fit.stalls == 3
    target = _logs(rng, ())
    out = predict_events(fit, _Body(), target, 512, reps=4000, stall_dispersion=0.0)
    lo, hi = out["count_above_1p5x_posterior_95%"]
    ref = stats.nbinom(3.5, 900 / (900 + 900))
    assert abs(lo - ref.ppf(0.025)) <= 1 and abs(hi - ref.ppf(0.975)) <= 1, (lo, hi)
    # wider than the plain Poisson interval of the fitted rate, which ignores its uncertainty
    assert hi > out["count_poisson_95"][1]
    assert out["count_inside_posterior"] is True


def test_no_stall_at_calibration_gives_no_posterior_count():
    rng = np.random.default_rng(42)
    fit = fit_step_events(_logs(rng, ()), 512, n_gof=0, n_boot=0, body_model=False)
    out = predict_events(fit, _Body(), _logs(rng, ()), 512, reps=50)
    assert (
        out["count_above_1p5x_posterior_95%"] is None and "no stall" in out["count_posterior_note"]
    )
