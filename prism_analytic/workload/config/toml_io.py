"""TOML loading, merging and dumping of job configurations."""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .fields import ConfigError, _allowed, _coerce
from .job import JobConfig
from .layout import validate_layout
from .sections import HardwareConfig, ModelConfig, ParallelConfig, TrainingConfig
from .variability import VariabilityConfig

# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------
_TOP_KEYS = ("job", "model", "parallelism", "hardware", "training", "variability")
_JOB_KEYS = ("name", "preset", "hardware", "gpus")


def _section_fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls) if "kind" in f.metadata}


def _check_mapping(value: Any, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"must be a table of keys, got {type(value).__name__} {value!r}")
    return value


def _build(cls: type, data: Any, path: str) -> Any:
    """Construct section ``cls`` from a mapping, naming every problem by its full key."""
    data = _check_mapping(data, path)
    fields = _section_fields(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{path}.{unknown[0]}",
            f"unknown key; allowed keys in [{path}]: {', '.join(sorted(fields))}",
        )
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        key = f"{path}.{name}"
        if name in data:
            value = data[name]
            if f.metadata["kind"] == "section":
                if value is None and f.metadata["optional"]:
                    kwargs[name] = None
                    continue
                # a partial table keeps this field's own defaults for the keys it omits
                # (e.g. variability.network.inter_node keeps its 10x tail)
                if f.default_factory is not dataclasses.MISSING:
                    value = _deep_merge(
                        config_to_dict(f.default_factory()), _check_mapping(value, key)
                    )
                kwargs[name] = _build(f.metadata["section"], value, key)
            else:
                # type-check now so the error names the TOML key, not the class default
                kwargs[name] = _coerce(value, f.metadata, key)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(key, f"is required ({f.metadata['kind']}, {_allowed(f.metadata)})")
    try:
        return cls(**kwargs)
    except ConfigError as err:
        # a reused section (TierNoise) knows only a generic path: rewrite it
        if err.key.startswith(cls._SECTION + ".") and cls._SECTION != path:
            raise ConfigError(path + err.key[len(cls._SECTION) :], err.detail) from None
        raise


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _read_source(source: str | Path | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(source, Mapping):
        return source
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and "=" not in source
    ):
        path = Path(source)
        if not path.is_file():
            raise ConfigError("<file>", f"no such config file: {str(path)!r}")
        text = path.read_text(encoding="utf-8")
        where = str(path)
    elif isinstance(source, str):
        text, where = source, "<string>"
    else:
        raise ConfigError(
            "<source>", f"must be a TOML path, TOML text or a mapping, got {type(source).__name__}"
        )
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError("<toml>", f"{where} is not valid TOML: {err}") from None


def load_config(source: str | Path | Mapping[str, Any], *, check_layout: bool = True) -> JobConfig:
    """Read and validate a job configuration.

    Parameters
    ----------
    source : str, Path or Mapping
        A TOML file path, TOML text, or an already-parsed mapping of the same shape.
    check_layout : bool
        Also run :func:`validate_layout` (errors raise; warnings are emitted as
        :class:`LayoutWarning`).

    Returns
    -------
    JobConfig

    Raises
    ------
    ConfigError
        Naming the full key (``parallelism.tp``) and what is allowed.

    Notes
    -----
    ``[job] preset = NAME`` starts from that model preset and, when ``job.gpus`` is set,
    its :func:`~prism_analytic.workload.presets.default_layout`; ``[job] hardware = NAME``
    starts from a hardware preset. Everything else in the file overrides key by key. When
    ``job.gpus`` is set and ``parallelism.dp`` is not, dp = gpus / (tp * pp * cp).

    Examples
    --------
    >>> job = load_config('''
    ... [job]
    ... preset = "llama3-8b"
    ... gpus = 64
    ... ''')
    >>> job.parallelism.dp, job.gpus
    (64, 64)
    """
    raw = dict(_check_mapping(_read_source(source), "<config>"))
    unknown = sorted(set(raw) - set(_TOP_KEYS))
    if unknown:
        raise ConfigError(unknown[0], f"unknown section; allowed: {', '.join(_TOP_KEYS)}")
    for sec, value in raw.items():
        _check_mapping(value, sec)
    job_tab = dict(_check_mapping(raw.pop("job", {}), "job"))
    bad = sorted(set(job_tab) - set(_JOB_KEYS))
    if bad:
        raise ConfigError(
            f"job.{bad[0]}", f"unknown key; allowed keys in [job]: {', '.join(_JOB_KEYS)}"
        )
    gpus = job_tab.get("gpus")
    if gpus is not None:
        gpus = _coerce(gpus, {**_STR_META, "kind": "int", "ge": 1}, "job.gpus")
    default_name = f"{job_tab['preset']}@{gpus}" if "preset" in job_tab else "job"
    name = _coerce(job_tab.get("name", default_name), _STR_META, "job.name")

    base: dict[str, Any] = {}
    user_par = raw.get("parallelism", {})
    if "preset" in job_tab:
        from .. import presets  # lazy: presets imports this package

        preset = _coerce(job_tab["preset"], _STR_META, "job.preset")
        base = presets.preset_dict(preset, gpus)
    if "hardware" in job_tab:
        from .. import presets

        hw_name = _coerce(job_tab["hardware"], _STR_META, "job.hardware")
        base["hardware"] = config_to_dict(presets.hardware_preset(hw_name))
    merged = _deep_merge(base, raw)
    how = {
        "model": "or set job.preset",
        "parallelism": "or set job.preset and job.gpus",
        "hardware": "or set job.hardware or job.preset",
    }
    for sec in ("model", "parallelism", "hardware"):
        if sec not in merged:
            raise ConfigError(sec, f"section is required ({how[sec]})")

    par = dict(_check_mapping(merged["parallelism"], "parallelism"))
    if gpus is not None and "dp" not in _check_mapping(user_par, "parallelism"):
        # derive dp so that overriding tp/pp/cp keeps the GPU count
        for k in ("tp", "pp", "cp"):
            _coerce(par.get(k, 1), {**_STR_META, "kind": "int", "ge": 1}, f"parallelism.{k}")
        mp = par.get("tp", 1) * par.get("pp", 1) * par.get("cp", 1)
        if gpus % mp:
            raise ConfigError(
                "job.gpus",
                f"{gpus} is not a multiple of tp*pp*cp = {mp}; allowed: multiples of {mp}",
            )
        par["dp"] = gpus // mp
    merged["parallelism"] = par

    job = JobConfig(
        name=name,
        model=_build(ModelConfig, merged["model"], "model"),
        parallelism=_build(ParallelConfig, merged["parallelism"], "parallelism"),
        hardware=_build(HardwareConfig, merged["hardware"], "hardware"),
        training=_build(TrainingConfig, merged.get("training", {}), "training"),
        variability=_build(VariabilityConfig, merged.get("variability", {}), "variability"),
    )
    if check_layout:
        validate_layout(job, gpus)
    return job


_STR_META: dict[str, Any] = {
    "kind": "str",
    "gt": None,
    "ge": None,
    "le": None,
    "lt": None,
    "choices": None,
    "optional": False,
    "section": None,
}


def merge_config(
    base: JobConfig | Mapping[str, Any],
    overrides: str | Path | Mapping[str, Any],
    *,
    check_layout: bool = True,
) -> JobConfig:
    """Apply user overrides (TOML path/text or mapping) on top of a job or mapping.

    Keys are merged table by table: ``{"parallelism": {"tp": 4}}`` changes only tp.
    Overrides may not contain ``[job] preset/hardware``; put those in ``base`` or use
    :func:`load_config`. If the override changes tp/pp/cp but not dp, dp is re-derived
    to keep the base's GPU count; an explicit dp instead changes the GPU count.
    """
    base_map = config_to_dict(base) if isinstance(base, JobConfig) else dict(base)
    over = dict(_check_mapping(_read_source(overrides), "<overrides>"))
    gpus = base.gpus if isinstance(base, JobConfig) else None
    job_over = dict(_check_mapping(over.pop("job", {}), "job"))
    if "dp" in _check_mapping(over.get("parallelism", {}), "parallelism"):
        gpus = None  # an explicit dp sets the GPU count
        if isinstance(base_map.get("job"), Mapping):
            base_map["job"] = {k: v for k, v in base_map["job"].items() if k != "gpus"}
    for k in ("preset", "hardware"):
        if k in job_over:
            raise ConfigError(
                f"job.{k}", "cannot be overridden onto an existing job; use load_config"
            )
    if "gpus" in job_over:
        gpus = job_over["gpus"]
    merged = _deep_merge(base_map, over)
    merged["job"] = {**dict(merged.get("job", {})), **job_over}
    if isinstance(base, JobConfig):
        merged["job"].setdefault("name", base.name)
    if gpus is not None:
        merged["job"]["gpus"] = gpus
        if "dp" not in over.get("parallelism", {}):
            merged["parallelism"] = {k: v for k, v in merged["parallelism"].items() if k != "dp"}
    return load_config(merged, check_layout=check_layout)


def config_to_dict(obj: Any) -> Any:
    """Nested plain dict of a config dataclass (tuples as lists, ``None`` omitted).

    A :class:`JobConfig` gives the TOML shape ``{"job": {...}, "model": {...}, ...}``.
    """
    if isinstance(obj, JobConfig):
        out: dict[str, Any] = {"job": {"name": obj.name, "gpus": obj.gpus}}
        for sec in ("model", "parallelism", "hardware", "training", "variability"):
            out[sec] = config_to_dict(getattr(obj, sec))
        return out
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        res: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            if "kind" not in f.metadata:
                continue
            v = getattr(obj, f.name)
            if v is None:
                continue
            res[f.name] = config_to_dict(v)
        return res
    if isinstance(obj, tuple):
        return [config_to_dict(v) for v in obj]
    return obj


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(type(v))  # pragma: no cover


def dump_toml(job: JobConfig) -> str:
    """TOML text that :func:`load_config` reads back into an equal :class:`JobConfig`."""
    lines: list[str] = []

    def emit(table: Mapping[str, Any], path: str) -> None:
        scalars = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
        subs = {k: v for k, v in table.items() if isinstance(v, Mapping)}
        if scalars or not subs:
            lines.append(f"[{path}]")
            lines.extend(f"{k} = {_toml_value(v)}" for k, v in scalars.items())
            lines.append("")
        for k, v in subs.items():
            emit(v, f"{path}.{k}")

    for sec, table in config_to_dict(job).items():
        emit(table, sec)
    return "\n".join(lines)
