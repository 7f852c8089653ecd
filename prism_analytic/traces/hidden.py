"""Hidden dependencies: waits on events the trace does not record.

A recorded op can wait for something that is not one of its recorded predecessors: an
overlapped gradient reduction with a data-parallel peer, a tensor-parallel rank that was not
traced, a host-side barrier. The signature in the data is waiting (an op's host gap, a
communication instance's duration) that varies from step to step while the time the wait
ends is explained by another recorded event: the lag from that event's end varies less than
half as much as the waiting itself. The most immediate such event (least lag among those
within 10% of the smallest lag spread, over the fit steps) becomes an extra predecessor with
a measured lag; the step start is a candidate too (an unexplained event at a fixed time into
the step). Only earlier units in topological order are candidates,
so the graph stays acyclic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["HiddenDependency", "find_hidden_dependencies"]

_GAIN = 0.5  # an anchor must at least halve the spread of the waiting to be believed
_OWN_Q = 0.1  # the unit's own (unwaited) time: this quantile of its waiting over the fit steps


@dataclass(frozen=True)
class HiddenDependency:
    """An extra predecessor learnt from the timing.

    Attributes
    ----------
    unit : int
        The unit that waits.
    anchor : int
        The unit whose end releases it (-1: the step start).
    at : str
        ``"start"``: the unit's start waits (an op's host gap); ``"end"``: its completion
        waits (a communication instance).
    own : float
        The unit's own gap (``"start"``) or duration (``"end"``) when not waiting (seconds).
    lag : numpy.ndarray
        Per fit step: wait end minus anchor end (seconds).
    spread_s : float
        Standard deviation of the lag (how well the anchor explains the wait).
    corr : float
        Correlation of the waiting with the ready time (negative: the wait compensates).
    """

    unit: int
    anchor: int
    at: str
    own: float
    lag: np.ndarray
    spread_s: float
    corr: float

    def to_dict(self, structure) -> dict:
        """JSON-ready description naming the ops involved."""

        def name(u):
            if u < 0:
                return "step start"
            i = structure.units[u][0]
            return f"rank {structure.ranks[i]} {structure.names[i]} #{structure.keys[i][2]}"

        return {
            "unit": name(self.unit),
            "waits_for": name(self.anchor),
            "at": self.at,
            "lag_mean_s": float(np.mean(self.lag)),
            "lag_sd_s": float(self.spread_s),
            "corr_wait_ready": float(self.corr),
        }


def find_hidden_dependencies(structure, gap, duration, rows, min_sd: float) -> list:
    """Find hidden dependencies from the fit steps.

    Parameters
    ----------
    structure : StepStructure
        Recovered structure.
    gap, duration : numpy.ndarray
        From :func:`~prism_analytic.traces.structure.unit_values` (all steps).
    rows : numpy.ndarray
        Indices of the fit steps.
    min_sd : float
        Waiting that varies less than this (seconds) is left alone.

    Returns
    -------
    list of HiddenDependency
    """
    g, d = gap[rows], duration[rows]
    s, e = structure.start[rows], structure.end[rows]
    n_units = structure.n_units
    u_end = np.stack([np.nanmax(e[:, m], axis=1) for m in structure.units], axis=1)
    u_start = np.stack([np.nanmax(s[:, m], axis=1) for m in structure.units], axis=1)
    found = []
    for u in range(n_units):
        members = structure.units[u]
        if len(members) == 1:
            i = members[0]
            wait, target = g[:, i], u_start[:, u]
            ready, at = target - wait, "start"
        else:
            wait, target = d[:, u], u_end[:, u]
            ready, at = u_start[:, u], "end"
        if np.std(wait) < min_sd or np.std(ready) == 0:
            continue
        corr = float(np.corrcoef(wait, ready)[0, 1])
        lags = target[:, None] - np.concatenate([np.zeros((len(rows), 1)), u_end[:, :u]], axis=1)
        ok = (np.mean(lags >= -5e-5, axis=0) >= 0.9) & (np.mean(lags, axis=0) >= 0)
        spread = np.where(ok, lags.std(axis=0), np.inf)
        best = int(np.argmin(spread))
        if not spread[best] < _GAIN * np.std(wait):
            continue
        # among anchors explaining the wait about as well, the most immediate one (least lag)
        near = np.flatnonzero(spread <= 1.1 * spread[best])
        best = int(near[np.argmin(np.mean(lags[:, near], axis=0))])
        found.append(
            HiddenDependency(
                unit=u,
                anchor=best - 1,
                at=at,
                own=float(np.quantile(wait, _OWN_Q)),
                lag=lags[:, best].copy(),
                spread_s=float(spread[best]),
                corr=corr,
            )
        )
    return found
