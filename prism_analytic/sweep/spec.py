"""Sweep specifications: which configurations a sweep evaluates, checked before any work.

A sweep is the cartesian product of model presets x GPU counts x hardware presets x a grid of
override values, optionally crossed with an explicit list of override points. Keys are the
dotted TOML keys of a job (``parallelism.tp``, ``variability.spatial.cv``); every key and every
value is checked against the configuration schema (:mod:`prism_analytic.workload.config`)
when the spec is built, so an unknown key, an empty list or a non-numeric value is reported
before a single configuration runs. Whether a *combination* is a valid layout (tp dividing the
heads, layers splitting over pp * vpp) is only known per configuration: those become rows
with ``status = "invalid"``.

Sweep file (TOML)::

    [sweep]
    preset = ["llama3-70b", "llama3-405b"]   # or one string
    gpus = [16384, 65536]
    hardware = ["h100-sxm-80gb"]             # optional; default: each preset's own

    [grid]                                   # every combination of these values
    "parallelism.tp" = [4, 8]
    parallelism.pp = [8, 16]                 # dotted TOML keys and nested tables both work

    [[points]]                               # optional explicit list, crossed with the grid
    parallelism = {schedule = "1f1b", vpp = 1}

    [base]                                   # optional overrides applied to every configuration
    variability.spatial.cv = 0.03
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..workload.config import (
    ConfigError,
    HardwareConfig,
    ModelConfig,
    ParallelConfig,
    TrainingConfig,
    VariabilityConfig,
)
from ..workload.config.fields import _allowed, _coerce

__all__ = [
    "SweepError",
    "SweepPoint",
    "SweepSpec",
    "parse_set",
    "load_sweep_file",
    "check_key",
    "flatten",
    "unflatten",
]

_SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "parallelism": ParallelConfig,
    "hardware": HardwareConfig,
    "training": TrainingConfig,
    "variability": VariabilityConfig,
}
_AXES = ("preset", "gpus", "hardware")


class SweepError(ValueError):
    """A sweep specification is malformed (raised before any configuration runs)."""


def _rule_fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls) if "kind" in f.metadata}


def check_key(key: str, *, allow_list: bool = False) -> Mapping[str, Any]:
    """The schema metadata of a dotted job key, or a :class:`SweepError` naming what exists.

    Parameters
    ----------
    key : str
        E.g. ``"parallelism.tp"`` or ``"variability.network.inter_node.sigma"``.
    allow_list : bool
        Accept list-valued keys (``variability.regimes.probabilities``): a fixed value in a
        point or the base, never a grid axis.

    Returns
    -------
    Mapping
        The field's rule metadata (``kind``, ranges, ``choices``).
    """
    parts = key.split(".")
    if parts[0] not in _SECTIONS:
        where = (
            "use --preset/--gpus/--hardware (or [sweep] preset/gpus/hardware) for job keys"
            if parts[0] == "job"
            else f"the first part must be one of {', '.join(_SECTIONS)}"
        )
        raise SweepError(f"sweep key {key!r}: unknown section; {where}")
    cls, path = _SECTIONS[parts[0]], parts[0]
    for i, name in enumerate(parts[1:], start=1):
        fields = _rule_fields(cls)
        if name not in fields:
            raise SweepError(
                f"sweep key {key!r}: unknown key {name!r}; allowed keys in [{path}]:"
                f" {', '.join(sorted(fields))}"
            )
        meta = fields[name].metadata
        path = f"{path}.{name}"
        if meta["kind"] == "section":
            if i == len(parts) - 1:
                raise SweepError(
                    f"sweep key {key!r} is a table; sweep one of its keys:"
                    f" {', '.join(sorted(_rule_fields(meta['section'])))}"
                )
            cls = meta["section"]
            continue
        if i != len(parts) - 1:
            raise SweepError(f"sweep key {key!r}: {path} is a value, not a table")
        if meta["kind"] == "floats" and not allow_list:
            raise SweepError(f"sweep key {key!r}: list-valued keys cannot be swept")
        return meta
    raise SweepError(f"sweep key {key!r}: name a key inside [{path}]")


def _from_text(text: str, meta: Mapping[str, Any], key: str) -> Any:
    """One value of ``--set KEY=V1,V2`` typed by the schema (``"8"`` -> 8 for an int key)."""
    kind, allowed = meta["kind"], _allowed(meta)
    try:
        if kind == "int":
            number = float(text) if any(c in text for c in ".eE") else int(text)
            if number != int(number):
                raise ValueError
            return int(number)
        if kind == "float":
            return float(text)
    except ValueError:
        noun = "an integer" if kind == "int" else "a number"
        raise SweepError(f"sweep key {key!r}: {text!r} is not {noun} ({allowed})") from None
    if kind == "bool":
        if text.lower() not in ("true", "false"):
            raise SweepError(f"sweep key {key!r}: {text!r} is not true or false")
        return text.lower() == "true"
    return text


def _check_values(key: str, values: Any) -> tuple[Any, ...]:
    """Values of one grid axis, each checked against the key's type and range."""
    meta = check_key(key)
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        values = [values]
    values = list(values)
    if not values:
        raise SweepError(f"sweep key {key!r}: empty list of values; give at least one")
    out = []
    for v in values:
        if isinstance(v, str) and meta["kind"] != "str":
            v = _from_text(v.strip(), meta, key)
        try:
            out.append(_coerce(v, meta, key))
        except ConfigError as exc:
            raise SweepError(f"sweep key {exc}") from None
    if len(set(map(repr, out))) != len(out):
        raise SweepError(f"sweep key {key!r}: repeated values in {out}")
    return tuple(out)


def _check_fixed(key: str, value: Any, where: str) -> Any:
    """One fixed value (a point's or the base's), lists allowed for list-valued keys."""
    meta = check_key(key, allow_list=True)
    if meta["kind"] != "floats":
        (value,) = _check_values(key, [value])
        return value
    try:
        return _coerce(value, meta, key)
    except ConfigError as exc:
        raise SweepError(f"{where}: {exc}") from None


def parse_set(items: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """The grid of ``--set KEY=V1,V2 ...`` arguments.

    Raises
    ------
    SweepError
        For text without ``=``, a key given twice, an unknown key, an empty list, or a value
        of the wrong type or out of range.
    """
    grid: dict[str, tuple[Any, ...]] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SweepError(f"--set {item!r}: expected KEY=V1,V2,... e.g. parallelism.tp=4,8")
        if key in grid:
            raise SweepError(f"--set: key {key!r} given twice; list all its values once")
        parts = [p.strip() for p in text.split(",")]
        if not text.strip() or any(not p for p in parts):
            raise SweepError(f"--set {key}: empty value in {text!r}; give V1,V2,...")
        grid[key] = _check_values(key, parts)
    return grid


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"parallelism": {"tp": 4}}`` -> ``{"parallelism.tp": 4}`` (lists are leaves)."""
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"parallelism.tp": 4}`` -> ``{"parallelism": {"tp": 4}}``."""
    out: dict[str, Any] = {}
    for key, v in flat.items():
        *head, last = key.split(".")
        node = out
        for h in head:
            node = node.setdefault(h, {})
        node[last] = v
    return out


@dataclass(frozen=True)
class SweepPoint:
    """One configuration of a sweep.

    Attributes
    ----------
    index : int
        Position in the sweep (rows are written in this order).
    preset : str
    gpus : int
    hardware : str or None
        Hardware preset; None keeps the model preset's own.
    overrides : dict
        Flat dotted key -> value (grid values and point values).
    base : dict
        Nested overrides applied under ``overrides`` (``--config`` / ``[base]``).
    """

    index: int
    preset: str
    gpus: int
    hardware: str | None
    overrides: dict[str, Any]
    base: dict[str, Any] = field(default_factory=dict)

    def job_mapping(self) -> dict[str, Any]:
        """The mapping :func:`~prism_analytic.workload.jobs.load_config` turns into the job."""
        from ..workload.config.toml_io import _deep_merge

        job: dict[str, Any] = {"preset": self.preset, "gpus": self.gpus}
        if self.hardware is not None:
            job["hardware"] = self.hardware
        merged = _deep_merge(copy.deepcopy(self.base), unflatten(self.overrides))
        return {"job": job, **merged}

    def config_id(self, settings: Mapping[str, Any]) -> str:
        """A stable hash of what determines this row (resuming skips ids already written)."""
        ident = {
            "preset": self.preset,
            "gpus": self.gpus,
            "hardware": self.hardware,
            "overrides": self.overrides,
            "base": self.base,
            "settings": dict(settings),
        }
        text = json.dumps(ident, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SweepSpec:
    """Presets x GPU counts x hardware x grid (x explicit points), validated on construction.

    Parameters
    ----------
    presets : sequence of str
        Model presets (``prism presets``).
    gpus : sequence of int
    hardware : sequence of str or None
        Hardware presets; ``(None,)`` keeps each model preset's own.
    grid : mapping
        Dotted key -> values; every combination is evaluated.
    points : sequence of mapping
        Explicit override sets (flat dotted or nested); each is crossed with the grid.
    base : mapping
        Nested overrides applied to every configuration (below grid and points).
    """

    presets: tuple[str, ...]
    gpus: tuple[int, ...]
    hardware: tuple[str | None, ...] = (None,)
    grid: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    points: tuple[dict[str, Any], ...] = ({},)
    base: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from ..workload.presets import HARDWARE, MODELS

        _axis_check("preset", self.presets, lambda p: isinstance(p, str) and p in MODELS, MODELS)
        _axis_check(
            "gpus",
            self.gpus,
            lambda g: isinstance(g, int) and not isinstance(g, bool) and g >= 1,
            None,
        )
        _axis_check("hardware", self.hardware, lambda h: h is None or h in HARDWARE, HARDWARE)
        grid = {}
        for key, values in dict(self.grid).items():
            grid[key] = _check_values(key, values)
        object.__setattr__(self, "grid", grid)
        if not self.points:
            raise SweepError("sweep points: empty list; omit it or give at least one point")
        points = []
        for i, point in enumerate(self.points):
            if not isinstance(point, Mapping):
                raise SweepError(f"sweep point {i}: must be a table of overrides")
            flat = flatten(point)
            for key, v in flat.items():
                if key in grid:
                    raise SweepError(f"sweep point {i}: key {key!r} is also a grid axis")
                flat[key] = _check_fixed(key, v, f"sweep point {i}")
            points.append(flat)
        object.__setattr__(self, "points", tuple(points))
        if not isinstance(self.base, Mapping):
            raise SweepError("sweep base: must be a table of overrides")
        for key, v in flatten(self.base).items():
            _check_fixed(key, v, "sweep base")
        for name in ("presets", "gpus", "hardware"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def keys(self) -> list[str]:
        """Override keys in column order: grid axes, then keys of the explicit points."""
        keys = list(self.grid)
        for p in self.points:
            keys.extend(k for k in p if k not in keys)
        return keys

    def __len__(self) -> int:
        n = len(self.presets) * len(self.gpus) * len(self.hardware) * len(self.points)
        for values in self.grid.values():
            n *= len(values)
        return n

    def configurations(self) -> list[SweepPoint]:
        """Every configuration, in a fixed order (presets slowest, grid fastest)."""
        grid_keys = list(self.grid)
        out = []
        combos = itertools.product(
            self.presets,
            self.gpus,
            self.hardware,
            self.points,
            itertools.product(*self.grid.values()),
        )
        for i, (preset, gpus, hw, point, values) in enumerate(combos):
            overrides = {**point, **dict(zip(grid_keys, values))}
            out.append(SweepPoint(i, preset, gpus, hw, overrides, self.base))
        return out


def _axis_check(name: str, values: Any, ok: Any, known: Any) -> None:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise SweepError(f"sweep {name}: must be a list, got {values!r}")
    values = list(values)
    if not values:
        raise SweepError(f"sweep {name}: empty list; give at least one value")
    for v in values:
        if not ok(v):
            extra = f"; available: {', '.join(sorted(known))}" if known else ""
            what = "a positive integer" if name == "gpus" else f"a known {name}"
            raise SweepError(f"sweep {name}: {v!r} is not {what}{extra}")
    if len(set(values)) != len(values):
        raise SweepError(f"sweep {name}: repeated values in {values}")


_FILE_TABLES = ("sweep", "grid", "points", "base")
_SWEEP_KEYS = ("preset", "gpus", "hardware")


def load_sweep_file(path: str | Path) -> SweepSpec:
    """Read a TOML sweep file (format in the module docstring).

    Raises
    ------
    FileNotFoundError
        When the file does not exist.
    SweepError
        For invalid TOML, unknown tables or keys, empty lists and bad values.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such sweep file: {str(path)!r}")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"{path} is not valid TOML: {exc}") from None
    unknown = sorted(set(raw) - set(_FILE_TABLES))
    if unknown:
        raise SweepError(
            f"{path}: unknown table [{unknown[0]}]; allowed: {', '.join(_FILE_TABLES)}"
        )
    head = raw.get("sweep", {})
    bad = sorted(set(head) - set(_SWEEP_KEYS))
    if bad:
        raise SweepError(f"{path}: unknown key sweep.{bad[0]}; allowed: {', '.join(_SWEEP_KEYS)}")
    for key in ("preset", "gpus"):
        if key not in head:
            raise SweepError(f"{path}: [sweep] {key} is required")

    def as_list(v: Any) -> list:
        return list(v) if isinstance(v, list) else [v]

    grid_tab = raw.get("grid", {})
    if not isinstance(grid_tab, Mapping):
        raise SweepError(f"{path}: [grid] must be a table of key = [values]")
    points = raw.get("points", [{}])
    if not isinstance(points, list):
        raise SweepError(f"{path}: points must be an array of tables ([[points]])")
    return SweepSpec(
        presets=tuple(as_list(head["preset"])),
        gpus=tuple(as_list(head["gpus"])),
        hardware=tuple(as_list(head.get("hardware", [None]))),
        grid=flatten(grid_tab),
        points=tuple(points),
        base=dict(raw.get("base", {})),
    )
