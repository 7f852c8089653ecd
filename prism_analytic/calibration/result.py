"""What a calibration returns: fitted parameters with intervals, the fitted law, the overlay."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "CalibrationError",
    "FittedParameter",
    "PredictedLaw",
    "CalibrationResult",
    "overlay_toml",
]


class CalibrationError(ValueError):
    """A calibration that cannot be done as asked (unreachable target, bad option)."""


@dataclass(frozen=True)
class FittedParameter:
    """One free parameter of the stochastic model after calibration.

    Attributes
    ----------
    key : str
        Full TOML key (``hardware.efficiency.gemm``).
    value : float or None
        Fitted value; None when not identified.
    interval : tuple of float or None
        ``(low, high)``: what it means is in ``method``.
    identified : bool
    method : str
        How it was fitted and what the interval is.
    written : bool
        Whether the overlay carries it (False: reported only, e.g. the jitter in seconds at
        the fitted size, whose relative form is written instead).
    """

    key: str
    value: float | None
    interval: tuple[float, float] | None
    identified: bool
    method: str
    written: bool = True


@dataclass(frozen=True)
class PredictedLaw:
    """Summary of a predicted step-time law (the analytic engine's)."""

    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    std_s: float
    result: Any = field(repr=False, compare=False)

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """Independent steps drawn from the law (inverse CDF)."""
        u = rng.uniform(1e-12, 1 - 1e-12, size)
        x = np.array(self.result.quantile(u), dtype=float)
        # a level inside the grid's tail atoms has no finite quantile (the engine gives nan:
        # e.g. a stall far beyond a narrow step body): it lies beyond the grid, so +-inf
        bad = np.isnan(x)
        x[bad] = np.where(u[bad] > 0.5, np.inf, -np.inf)
        return x


@dataclass
class CalibrationResult:
    """Outcome of a calibration: fitted parameters, the calibrated prediction, goodness of fit."""

    job_name: str
    target: dict
    parameters: list[FittedParameter]
    predicted: dict
    goodness: dict
    #: the step-event fit (:class:`~.step_events.EventFit`) when one was asked for
    events: Any = field(default=None, repr=False)

    def overlay(self) -> dict:
        """Nested mapping of the identified parameters (what ``--config`` takes)."""
        out: dict = {}
        for p in self.parameters:
            if not p.identified or p.value is None or not p.written:
                continue
            node = out
            *path, leaf = p.key.split(".")
            for k in path:
                node = node.setdefault(k, {})
            node[leaf] = p.value
        temporal = out.get("variability", {}).get("temporal", {})
        if "step_jitter_rel" in temporal:
            # the two jitter forms are exclusive: the fitted relative form replaces a jitter the
            # job may give in seconds (merging both would be refused as ambiguous)
            temporal.setdefault("step_jitter_s", 0.0)
        hiccups = out.get("variability", {}).get("hiccups", {})
        if "size_rel" in hiccups:  # the same for the stall size (the two are exclusive)
            hiccups.setdefault("size_s", 0.0)
        return out

    def to_toml(self) -> str:
        """The overlay as TOML text with the fit's provenance in comments."""
        return overlay_toml(self)

    def to_dict(self) -> dict:
        """Plain dict (JSON-ready after :func:`~prism_analytic.cli.output.jsonable`)."""
        return {
            "job": self.job_name,
            "target": self.target,
            "parameters": [asdict(p) for p in self.parameters],
            "predicted": self.predicted,
            "goodness_of_fit": self.goodness,
            "overlay": self.overlay(),
            **({"events": self.events.to_dict()} if self.events is not None else {}),
        }

    def summary(self) -> str:
        """Readable multi-line report."""
        lines = [f"calibration of {self.job_name} to {self.target.get('description', '')}"]
        for p in self.parameters:
            if p.identified and p.value is not None:
                iv = f" [{p.interval[0]:.6g}, {p.interval[1]:.6g}]" if p.interval else ""
                note = "" if p.written else ", reported, not in the overlay"
                lines.append(f"  {p.key} = {p.value:.6g}{iv}  ({p.method}{note})")
            else:
                lines.append(f"  {p.key}: not identified ({p.method})")
        pr = self.predicted
        if "mean_s" not in pr:  # several sizes: one median per size
            lines.append(f"  calibrated prediction: {pr}")
        else:
            lines.append(
                "  calibrated prediction: mean {:.4f} s, p50 {:.4f} s, p90/p50 {:.4f},"
                " p99/p50 {:.4f}".format(
                    pr["mean_s"],
                    pr["p50_s"],
                    pr["p90_s"] / pr["p50_s"],
                    pr["p99_s"] / pr["p50_s"],
                )
            )
        for k, v in self.goodness.items():
            lines.append(f"  fit: {k} = {v}")
        if self.events is not None:
            lines.append("  step events (likelihood fit; reported, not in the overlay):")
            for p in self.events.parameters:
                iv = f" [{p.interval[0]:.4g}, {p.interval[1]:.4g}]" if p.interval else ""
                val = f" = {p.value:.4g}" if p.value is not None else ": not identified"
                lines.append(f"    {p.key}{val}{iv}  ({p.method})")
            for k, v in self.events.goodness.items():
                lines.append(f"    fit: {k} = {v}")
        return "\n".join(lines)


def law_dict(law: PredictedLaw) -> dict:
    """The law's summary as a plain dict (JSON-ready)."""
    return {
        "mean_s": law.mean_s,
        "p50_s": law.p50_s,
        "p90_s": law.p90_s,
        "p99_s": law.p99_s,
        "std_s": law.std_s,
    }


def _fmt(x: float) -> str:
    return repr(float(x))


def overlay_toml(result: CalibrationResult) -> str:
    """TOML text of :meth:`CalibrationResult.overlay`, with provenance comments."""
    lines = [
        f"# prism calibrate: {result.job_name} fitted to {result.target.get('description', '')}",
        "# Apply with: prism predict ... --config THIS_FILE (merged over the job).",
    ]
    for p in result.parameters:
        state = (
            f"{p.value:.6g} in [{p.interval[0]:.6g}, {p.interval[1]:.6g}]"
            if p.identified and p.interval
            else ("fitted" if p.identified else "not identified, left at its default")
        )
        note = "" if p.written else " (reported, not written)"
        lines.append(f"# {p.key}: {state}{note}; {p.method}")
    tables: dict[str, dict[str, float]] = {}

    def collect(node: dict, path: tuple[str, ...]) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                collect(value, (*path, key))
            else:
                tables.setdefault(".".join(path), {})[key] = value

    collect(result.overlay(), ())
    for section, kv in tables.items():
        lines += ["", f"[{section}]"]
        lines += [f"{k} = {_fmt(v)}" for k, v in kv.items()]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------
# Throughput targets
# --------------------------------------------------------------------------------------
