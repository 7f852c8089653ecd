"""The description of a synthetic training job: layout, schedule, op laws, slow ranks, factors.

A :class:`SynthJob` is what :func:`prism_analytic.traces.synth.simulate` runs. Every field is
checked when the job is built, so an impossible layout fails with a message naming the field
and what is allowed rather than deep inside the simulator.

Examples
--------
>>> job = SynthJob(dp=2, pp=2, tp=2, microbatches=4)
>>> job.world_size
8
>>> SynthJob.from_dict({"dp": 2, "laws": {"forward-compute": {"mean": 0.01, "cv": 0.05}}}).dp
2
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from prism_analytic.schedules import check_schedule

__all__ = [
    "Law",
    "SynthJob",
    "DEFAULT_LAWS",
    "COMPUTE_OPTYPES",
    "COMM_OPTYPES",
    "parse_layout",
    "MAX_RANKS",
]

#: The most ranks a synthetic job may have (a larger one would not fit in memory as a table).
MAX_RANKS = 100_000
FAMILIES = ("lognormal", "gamma", "const")
SCHEDULE_NAMES = ("1f1b", "interleaved")

#: Ops a rank runs on its own (slow-rank and shared factors scale these).
COMPUTE_OPTYPES = ("forward-compute", "backward-compute", "optimizer")
#: Communication ops: one transfer time per instance, drawn once for all its members.
COMM_OPTYPES = (
    "forward-send",
    "forward-recv",
    "backward-send",
    "backward-recv",
    "tp-all-reduce",
    "tp-all-gather",
    "tp-reduce-scatter",
    "cp-send-recv",
    "sp-all-to-all",
    "ep-dispatch-all-to-all",
    "ep-combine-all-to-all",
    "embedding-grads-all-reduce",
    "grads-reduce-scatter",
    "params-all-gather",
)


@dataclass(frozen=True)
class Law:
    """A positive random duration with a known mean and coefficient of variation.

    Parameters
    ----------
    mean : float
        Mean (seconds, or a dimensionless factor), >= 0.
    cv : float
        Coefficient of variation (std / mean), >= 0; 0 makes the law deterministic.
    family : {"lognormal", "gamma", "const"}
        Distribution family; "const" needs ``cv == 0``.

    Examples
    --------
    >>> law = Law(0.01, 0.1, "gamma")
    >>> round(law.params()["shape"], 6), round(law.params()["scale"], 8)
    (100.0, 0.0001)
    """

    mean: float
    cv: float = 0.0
    family: str = "lognormal"

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"law family must be one of {FAMILIES}, got {self.family!r}")
        for name in ("mean", "cv"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"law {name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"law {name} must be finite and >= 0, got {value!r}")
            object.__setattr__(self, name, float(value))
        if self.family == "const" and self.cv != 0:
            raise ValueError(f"law family 'const' needs cv = 0, got cv={self.cv!r}")

    @property
    def deterministic(self) -> bool:
        """True when every draw equals the mean."""
        return self.cv == 0 or self.mean == 0

    def params(self) -> dict:
        """The family's own parameters (lognormal ``mu, sigma``; gamma ``shape, scale``)."""
        out = {"family": self.family, "mean": float(self.mean), "cv": float(self.cv)}
        if self.deterministic:
            return out
        if self.family == "lognormal":
            s2 = math.log1p(self.cv**2)
            out.update(mu=math.log(self.mean) - s2 / 2, sigma=math.sqrt(s2))
        elif self.family == "gamma":
            out.update(shape=1 / self.cv**2, scale=self.mean * self.cv**2)
        return out

    def draw(self, rng: np.random.Generator, size) -> np.ndarray:
        """Independent draws of the law, an array of ``size``."""
        if self.deterministic:
            return np.full(size, float(self.mean))
        p = self.params()
        if self.family == "lognormal":
            return rng.lognormal(p["mu"], p["sigma"], size)
        return rng.gamma(p["shape"], p["scale"], size)

    @classmethod
    def coerce(cls, what: str, value) -> Law:
        """A law from a Law, a number (deterministic) or a mapping ``{mean, cv, family}``."""
        if isinstance(value, Law):
            return value
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return cls(float(value), 0.0, "const")
        if isinstance(value, dict):
            unknown = set(value) - {"mean", "cv", "family"}
            if unknown or "mean" not in value:
                raise ValueError(
                    f"{what}: a law is a number or a table with 'mean' and optional 'cv', "
                    f"'family' {FAMILIES}; got keys {sorted(value)}"
                )
            try:
                return cls(value["mean"], value.get("cv", 0.0), value.get("family", "lognormal"))
            except ValueError as exc:
                raise ValueError(f"{what}: {exc}") from None
        raise ValueError(
            f"{what}: expected a number or a table {{mean, cv, family}}, got {value!r}"
        )


#: Default op laws (seconds): a small dense model, compute a few percent noisy.
DEFAULT_LAWS: dict[str, Law] = {
    "forward-compute": Law(0.010, 0.03),
    "backward-compute": Law(0.020, 0.03),
    "optimizer": Law(0.004, 0.05, "gamma"),
    # a send and its receive are one transfer: its time is the send's law
    "forward-send": Law(3e-4, 0.1),
    "backward-send": Law(3e-4, 0.1),
    "tp-all-reduce": Law(5e-4, 0.1),
    "tp-all-gather": Law(3e-4, 0.1),
    "tp-reduce-scatter": Law(3e-4, 0.1),
    "cp-send-recv": Law(5e-4, 0.1),
    "sp-all-to-all": Law(4e-4, 0.1),
    "ep-dispatch-all-to-all": Law(8e-4, 0.15),
    "ep-combine-all-to-all": Law(8e-4, 0.15),
    "embedding-grads-all-reduce": Law(0.002, 0.1, "gamma"),
    "grads-reduce-scatter": Law(0.006, 0.05, "gamma"),
    "params-all-gather": Law(0.004, 0.05, "gamma"),
}


def _positive_int(name: str, value) -> int:
    # bool is an int subclass; True ranks is a bug, not 1
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"SynthJob.{name} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class SynthJob:
    """A synthetic Megatron-style training job.

    Parameters
    ----------
    dp, pp, tp : int
        Data-, pipeline- and tensor-parallel sizes.
    cp : int
        Ring context-parallel size (``cp-send-recv`` per layer); at most one of cp, sp > 1.
    sp : int
        Ulysses sequence-parallel size (``sp-all-to-all`` before and after attention); it uses
        the context-parallel slot of the rank order.
    ep : int
        Expert-parallel size (MoE layers: ``ep-dispatch-all-to-all``, expert compute,
        ``ep-combine-all-to-all``); must divide ``dp * cp * sp``.
    vpp : int
        Model chunks per stage; > 1 only with ``schedule="interleaved"``.
    schedule : {"1f1b", "interleaved"}
        Megatron pipeline schedule (:mod:`prism_analytic.schedules`).
    microbatches : int
        Microbatches per step; a multiple of ``pp`` for "interleaved".
    layers : int
        Layers per model chunk; each layer of each microbatch has its own compute ops and
        tp/cp/sp/ep collectives.
    sequence_parallel : bool
        Megatron sequence parallelism: ``tp-all-gather`` before and ``tp-reduce-scatter`` after
        each layer's compute instead of one ``tp-all-reduce``.
    tied_embeddings : bool
        Input and output embeddings shared: an ``embedding-grads-all-reduce`` between the
        first and the last stage (same tp, cp/sp, dp indices) before the gradient
        reduce-scatter, when ``pp > 1``.
    laws : dict
        Op laws by optype (:class:`Law`, a number, or ``{mean, cv, family}``), merged over
        :data:`DEFAULT_LAWS`. Compute laws are per op; communication laws are the transfer
        time of one instance, shared by its members.
    gap : Law
        Host gap before every op (from the rank's previous op end, or the step start).
    slow_ranks : dict
        ``{rank: factor}`` multiplying that rank's compute durations.
    stage_scale : dict
        ``{stage: factor}`` multiplying the compute of every rank of that stage (e.g. the last
        stage's loss and output layer).
    step_factor, mb_factor : Law
        Shared multiplicative factors on compute: one per step (all ranks), one per
        (step, data-parallel replica, microbatch) (all ranks processing that microbatch).
    name : str
        Trial name written to the metadata.
    optype_names : dict
        Names written to the trace instead of the built-in optypes, e.g.
        ``{"tp-all-reduce": "nccl:AllReduce"}``: traces whose collectives have names the
        tools do not know.
    """

    dp: int = 1
    pp: int = 1
    tp: int = 1
    cp: int = 1
    sp: int = 1
    ep: int = 1
    vpp: int = 1
    schedule: str = "1f1b"
    microbatches: int = 4
    layers: int = 1
    sequence_parallel: bool = False
    tied_embeddings: bool = False
    laws: dict = field(default_factory=dict)
    gap: Law = Law(2e-5, 0.5)
    slow_ranks: dict = field(default_factory=dict)
    stage_scale: dict = field(default_factory=dict)
    step_factor: Law = Law(1.0, 0.0)
    mb_factor: Law = Law(1.0, 0.0)
    name: str = "synth"
    optype_names: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in ("dp", "pp", "tp", "cp", "sp", "ep", "vpp", "microbatches", "layers"):
            object.__setattr__(self, f, _positive_int(f, getattr(self, f)))
        if self.schedule not in SCHEDULE_NAMES:
            raise ValueError(
                f"SynthJob.schedule must be one of {SCHEDULE_NAMES}, got {self.schedule!r}"
            )
        try:
            check_schedule(self.pp, self.microbatches, self.schedule, self.vpp)
        except ValueError as exc:
            raise ValueError(f"SynthJob (pp={self.pp}, vpp, microbatches): {exc}") from None
        if self.cp > 1 and self.sp > 1:
            raise ValueError(
                f"SynthJob: cp (ring context parallel) and sp (Ulysses) share one rank slot; "
                f"at most one may be > 1, got cp={self.cp}, sp={self.sp}"
            )
        if (self.dp * self.cx) % self.ep:
            raise ValueError(
                f"SynthJob.ep must divide dp * cp * sp (experts are spread over the data- and "
                f"context-parallel ranks of a stage), got ep={self.ep}, dp={self.dp}, "
                f"cp*sp={self.cx}"
            )
        if self.world_size > MAX_RANKS:
            raise ValueError(
                f"SynthJob: world size dp*pp*tp*cp*sp = {self.world_size} exceeds {MAX_RANKS}"
            )
        for f in ("sequence_parallel", "tied_embeddings"):
            if not isinstance(getattr(self, f), bool):
                raise ValueError(f"SynthJob.{f} must be true or false, got {getattr(self, f)!r}")
        if not isinstance(self.laws, dict):
            raise ValueError(f"SynthJob.laws must be a table by optype, got {self.laws!r}")
        recv = sorted(k for k in self.laws if k in ("forward-recv", "backward-recv"))
        if recv:
            raise ValueError(
                f"SynthJob.laws: {recv}: a send and its receive are one transfer; give its "
                "law under the send's name ('forward-send', 'backward-send')"
            )
        unknown = sorted(set(self.laws) - set(DEFAULT_LAWS))
        if unknown:
            raise ValueError(
                f"SynthJob.laws: unknown optypes {unknown}; allowed: {sorted(DEFAULT_LAWS)}"
            )
        laws = {k: Law.coerce(f"SynthJob.laws[{k!r}]", v) for k, v in self.laws.items()}
        for k, law in laws.items():
            if law.mean <= 0:
                raise ValueError(f"SynthJob.laws[{k!r}]: mean must be > 0, got {law.mean}")
        object.__setattr__(self, "laws", laws)
        for f in ("gap", "step_factor", "mb_factor"):
            object.__setattr__(self, f, Law.coerce(f"SynthJob.{f}", getattr(self, f)))
        for f in ("step_factor", "mb_factor"):
            if getattr(self, f).mean <= 0:
                raise ValueError(f"SynthJob.{f}: mean must be > 0, got {getattr(self, f).mean}")
        self._check_factor_tables()
        self._check_optype_names()
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise ValueError(
                f"SynthJob.name must be a non-empty string without '/', got {self.name!r}"
            )

    def _check_optype_names(self) -> None:
        names = self.optype_names
        if not isinstance(names, dict):
            raise ValueError(f"SynthJob.optype_names must be a table, got {names!r}")
        allowed = COMPUTE_OPTYPES + COMM_OPTYPES
        unknown = sorted(set(names) - set(allowed))
        if unknown:
            raise ValueError(
                f"SynthJob.optype_names: unknown optypes {unknown}; allowed: {sorted(allowed)}"
            )
        for old, new in names.items():
            if not isinstance(new, str) or not new.strip():
                raise ValueError(f"SynthJob.optype_names[{old!r}] must be a name, got {new!r}")
        written = [names.get(o, o) for o in allowed]
        clash = sorted({n for n in written if written.count(n) > 1})
        if clash:
            raise ValueError(
                f"SynthJob.optype_names: {clash} would name two different optypes; names must "
                "stay distinct"
            )

    def label(self, optype: str) -> str:
        """The name an optype is written under."""
        return self.optype_names.get(optype, optype)

    def _check_factor_tables(self) -> None:
        for f, what, n in (
            ("slow_ranks", "rank", self.world_size),
            ("stage_scale", "stage", self.pp),
        ):
            object.__setattr__(self, f, _factor_table(f"SynthJob.{f}", what, getattr(self, f), n))

    @property
    def cx(self) -> int:
        """Size of the context slot of the rank order (ring cp or Ulysses sp)."""
        return self.cp * self.sp

    @property
    def world_size(self) -> int:
        """Number of ranks."""
        return self.dp * self.pp * self.tp * self.cp * self.sp

    def law(self, optype: str) -> Law:
        """The law of one optype (the job's own, else the default)."""
        return self.laws.get(optype, DEFAULT_LAWS[optype])

    @classmethod
    def from_dict(cls, data: dict) -> SynthJob:
        """A job from a mapping of its fields (e.g. a TOML table); unknown keys are errors."""
        if not isinstance(data, dict):
            raise ValueError(f"a synthetic job is a table of fields, got {type(data).__name__}")
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ValueError(f"SynthJob: unknown fields {unknown}; allowed: {names}")
        return cls(**data)

    @classmethod
    def from_toml(cls, path) -> SynthJob:
        """A job from a TOML file: its ``[synth]`` table, or the top level when there is none."""
        import tomllib

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"synthetic job file not found: {path}")
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: not valid TOML: {exc}") from None
        try:
            return cls.from_dict(data.get("synth", data))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    def meta(self) -> dict:
        """Layout metadata in the keys of the shared ``meta-*.yaml`` files."""
        return {
            "trial_name": self.name,
            "run_id": 0,
            "dp_size": self.dp,
            "dsp_size": self.sp,
            "pp_size": self.pp,
            "tp_size": self.tp,
            "vpp_size": self.vpp,
            "world_size": self.world_size,
            "cp_size": self.cp,
            "ep_size": self.ep,
            "schedule": self.schedule,
            "microbatches": self.microbatches,
        }


def _factor_table(name: str, what: str, table, n: int) -> dict[int, float]:
    """``{index: factor}`` with integer indices in ``[0, n)`` and positive finite factors."""
    if not isinstance(table, dict):
        raise ValueError(f"{name} must be a table {{{what}: factor}}, got {table!r}")
    out = {}
    for key, factor in table.items():
        try:
            index = int(key)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: {what} {key!r} is not an integer") from None
        if not 0 <= index < n:
            raise ValueError(f"{name}: {what} {index} outside [0, {n})")
        if (
            isinstance(factor, bool)
            or not isinstance(factor, numbers.Real)
            or not (math.isfinite(factor) and factor > 0)
        ):
            raise ValueError(f"{name}[{index}]: factor must be a positive number, got {factor!r}")
        out[index] = float(factor)
    return out


_LAYOUT_INTS = ("dp", "pp", "tp", "cp", "sp", "ep", "vpp", "microbatches", "layers")


def parse_layout(text: str) -> dict:
    """Fields of a :class:`SynthJob` from ``"dp=4,pp=2,tp=2,schedule=1f1b,..."``.

    Examples
    --------
    >>> parse_layout("dp=4,pp=2,schedule=interleaved,vpp=2")
    {'dp': 4, 'pp': 2, 'schedule': 'interleaved', 'vpp': 2}
    """
    allowed = (*_LAYOUT_INTS, "schedule", "sequence_parallel", "tied_embeddings", "name")
    out: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or key not in allowed:
            raise ValueError(f"--layout: {part!r} is not KEY=VALUE with KEY one of {allowed}")
        if key in _LAYOUT_INTS:
            try:
                out[key] = int(value)
            except ValueError:
                raise ValueError(f"--layout: {key} must be an integer, got {value!r}") from None
        elif key in ("sequence_parallel", "tied_embeddings"):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(f"--layout: {key} must be true or false, got {value!r}")
            out[key] = value.lower() in ("true", "1")
        else:
            out[key] = value
    return out
