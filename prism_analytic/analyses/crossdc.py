"""Training across datacenters: p95 step time against inter-datacenter bandwidth and jitter.

The job is split over ``datacenters`` sites (``hardware.datacenters``); collectives whose group
spans sites cross the inter-datacenter link (aggregate ``hardware.inter_dc_bandwidth``, shared
by the GPUs that use it at once; :func:`~prism_analytic.workload.collectives.cross_dc_tier`)
with the ``variability.network.cross_dc`` noise (``jitter`` = its lognormal shape ``sigma``).
For every (jitter, bandwidth) the step law is computed analytically; the degradation is the
p95 relative to the same job in one datacenter. The **threshold bandwidth** is where the
degradation crosses ``tolerance`` (default 5%), found by bisection in log-bandwidth (each probe
a full analytic evaluation), reported per jitter.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CrossDCResult", "crossdc", "TBIT", "MAX_BISECT_STEPS"]

#: Bytes per second in one terabit per second.
TBIT = 1e12 / 8
#: Most threshold bisection probes: each halves the bracket in log bandwidth, so 64 narrow it
#: by 2**64 (1.8e19), far finer than a bandwidth means; more would only spend time.
MAX_BISECT_STEPS = 64


def _increasing(values: Any, name: str, minimum: float, strict_min: bool) -> list[float]:
    try:
        items = [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a list of numbers, got {values!r}") from None
    if not items:
        raise ValueError(f"{name}: the list is empty")
    for v in items:
        if not math.isfinite(v) or (v <= minimum if strict_min else v < minimum):
            op = ">" if strict_min else ">="
            raise ValueError(f"{name}: values must be finite and {op} {minimum:g}, got {v!r}")
    if any(b <= a for a, b in zip(items, items[1:])):
        raise ValueError(f"{name}: values must be strictly increasing, got {items}")
    return items


@dataclass(frozen=True)
class CrossDCResult:
    """p95 step time over a bandwidth x jitter grid and the threshold bandwidths."""

    job: str
    datacenters: int
    tolerance: float
    single_dc_p95_s: float
    single_dc_mean_s: float
    bandwidths_tbps: tuple[float, ...]
    jitters: tuple[float, ...]
    p95_s: tuple[tuple[float, ...], ...]  # [jitter][bandwidth]
    mean_s: tuple[tuple[float, ...], ...]
    threshold_tbps: tuple[float | None, ...]
    threshold_note: tuple[str, ...]

    def degradation(self, j: int, b: int) -> float:
        """p95 relative to one datacenter, minus 1."""
        return self.p95_s[j][b] / self.single_dc_p95_s - 1

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        d = dataclasses.asdict(self)
        d["degradation"] = [
            [self.degradation(j, b) for b in range(len(self.bandwidths_tbps))]
            for j in range(len(self.jitters))
        ]
        return d

    def summary(self) -> str:
        """A table per jitter."""
        lines = [
            f"{self.job} over {self.datacenters} datacenters; one datacenter: p95"
            f" {self.single_dc_p95_s:.4g} s (mean {self.single_dc_mean_s:.4g} s)"
        ]
        for j, jit in enumerate(self.jitters):
            lines.append(f"cross-DC jitter sigma {jit:g}:")
            lines.append(f"  {'Tb/s':>10} {'mean s':>9} {'p95 s':>9} {'p95 vs 1 DC':>12}")
            for b, bw in enumerate(self.bandwidths_tbps):
                lines.append(
                    f"  {bw:>10.4g} {self.mean_s[j][b]:>9.4g} {self.p95_s[j][b]:>9.4g}"
                    f" {self.degradation(j, b):>+12.2%}"
                )
            thr = self.threshold_tbps[j]
            lines.append(
                f"  p95 within {self.tolerance:.0%} of one datacenter above "
                + (f"{thr:.4g} Tb/s" if thr is not None else "n/a")
                + f" ({self.threshold_note[j]})"
            )
        return "\n".join(lines)

    def plot(self, ax: Any = None) -> Any:
        """p95 degradation against bandwidth (log x), one line per jitter."""
        import matplotlib.pyplot as plt

        ax = ax or plt.gca()
        for j, jit in enumerate(self.jitters):
            deg = [
                max(100 * self.degradation(j, b), 0.01) for b in range(len(self.bandwidths_tbps))
            ]
            (line,) = ax.semilogx(self.bandwidths_tbps, deg, "o-", label=f"jitter sigma {jit:g}")
            thr = self.threshold_tbps[j]
            if thr is not None:
                ax.axvline(thr, color=line.get_color(), ls=":", lw=1)
        ax.axhline(100 * self.tolerance, color="k", ls="--", lw=1, label=f"{self.tolerance:.0%}")
        ax.set_xlabel("inter-datacenter bandwidth (Tb/s, aggregate)")
        ax.set_ylabel("p95 increase over one datacenter (%, log)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
        return ax


def _with(job: Any, datacenters: int, bw_bytes: float | None, jitter: float | None) -> Any:
    hw = job.hardware
    hw = dataclasses.replace(
        hw, datacenters=datacenters, inter_dc_bandwidth=bw_bytes or hw.inter_dc_bandwidth
    )
    var = job.variability
    if jitter is not None:
        net = dataclasses.replace(
            var.network, cross_dc=dataclasses.replace(var.network.cross_dc, sigma=jitter)
        )
        var = dataclasses.replace(var, network=net)
    return dataclasses.replace(job, hardware=hw, variability=var)


def _stats(job: Any) -> tuple[float, float]:
    from ..engines.predict import predict
    from ..workload.builder import build_step_graph

    r = predict(build_step_graph(job))
    return float(r.mean()), float(r.quantile(0.95))


def crossdc(
    job: Any,
    datacenters: int,
    bandwidths_tbps: list[float],
    jitters: list[float] | None = None,
    *,
    tolerance: float = 0.05,
    bisect_steps: int = 6,
    progress: Callable[[int, int], None] | None = None,
) -> CrossDCResult:
    """p95 step time over bandwidths and jitters, and the bandwidth for ``tolerance``.

    Parameters
    ----------
    job : JobConfig
    datacenters : int
        Sites the job spans (>= 2).
    bandwidths_tbps : list of float
        Strictly increasing aggregate inter-datacenter bandwidths, Tb/s.
    jitters : list of float, optional
        Strictly increasing cross-DC noise shapes (lognormal sigma, >= 0); default: the
        job's ``variability.network.cross_dc.sigma``.
    tolerance : float
        Acceptable p95 degradation (> 0).
    bisect_steps : int
        Bisection probes per jitter for the threshold, 0 to :data:`MAX_BISECT_STEPS` (0: the
        first tested bandwidth that meets it). Probing stops early once the bracket is one
        floating-point step wide.
    progress : callable, optional
        ``progress(done, total)`` after each evaluation of the job (``total`` counts every
        bisection probe allowed, so the run may end before ``done`` reaches it).
    """
    if isinstance(datacenters, bool) or not isinstance(datacenters, int) or datacenters < 2:
        raise ValueError(f"--datacenters must be an integer >= 2, got {datacenters!r}")
    bws = _increasing(bandwidths_tbps, "--bandwidths", 0.0, True)
    jits = (
        [job.variability.network.cross_dc.sigma]
        if jitters is None
        else _increasing(jitters, "--jitter", 0.0, False)
    )
    if not (math.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"--tolerance must be > 0, got {tolerance!r}")
    if (
        isinstance(bisect_steps, bool)
        or not isinstance(bisect_steps, int)
        or not 0 <= bisect_steps <= MAX_BISECT_STEPS
    ):
        raise ValueError(
            f"--bisect-steps must be an integer from 0 to {MAX_BISECT_STEPS} (each probe halves"
            f" the bracket in log bandwidth; {MAX_BISECT_STEPS} narrow it by"
            f" 2**{MAX_BISECT_STEPS}), got {bisect_steps!r}"
        )
    total = 1 + len(jits) * (len(bws) + bisect_steps)
    done = [0]

    def stats_of(j: Any) -> tuple[float, float]:
        out = _stats(j)
        done[0] += 1
        if progress is not None:
            progress(done[0], total)
        return out

    base_mean, base_p95 = stats_of(
        dataclasses.replace(job, hardware=dataclasses.replace(job.hardware, datacenters=1))
    )
    p95s, means, thr, notes = [], [], [], []
    for jit in jits:
        row = [stats_of(_with(job, datacenters, bw * TBIT, jit)) for bw in bws]
        means.append(tuple(m for m, _ in row))
        p95s.append(tuple(q for _, q in row))
        deg = [q / base_p95 - 1 for _, q in row]
        ok = [d <= tolerance for d in deg]
        if all(ok):
            thr.append(bws[0])
            notes.append("met at every bandwidth tested: at most the lowest")
            continue
        if not ok[-1]:
            thr.append(None)
            notes.append("not met at the highest bandwidth tested")
            continue
        i = max(k for k in range(len(bws)) if not ok[k])  # last failing point
        lo, hi = math.log(bws[i]), math.log(bws[i + 1])
        for _ in range(bisect_steps):
            mid = 0.5 * (lo + hi)
            if not lo < mid < hi:  # the bracket is one floating-point step wide
                break
            _, q = stats_of(_with(job, datacenters, math.exp(mid) * TBIT, jit))
            lo, hi = (mid, hi) if q / base_p95 - 1 > tolerance else (lo, mid)
        thr.append(math.exp(hi))
        notes.append(
            f"bisection in log bandwidth, within a factor {math.exp(hi - lo):.3f}"
            if bisect_steps
            else "the first tested bandwidth that meets it"
        )
    return CrossDCResult(
        job.name,
        datacenters,
        float(tolerance),
        base_p95,
        base_mean,
        tuple(bws),
        tuple(jits),
        tuple(p95s),
        tuple(means),
        tuple(thr),
        tuple(notes),
    )
