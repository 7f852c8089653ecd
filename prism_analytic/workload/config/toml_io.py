"""TOML reading and dumping of job configurations (presets are resolved in ``workload.jobs``)."""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .fields import ConfigError, _allowed, _coerce, section_to_dict
from .job import JobConfig

# --------------------------------------------------------------------------------------
# Reading
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


#: A config file larger than this is refused before reading (a job is a few kB of TOML).
MAX_CONFIG_BYTES = 1 << 20


def _read_source(source: str | Path | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(source, Mapping):
        return source
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and "=" not in source
    ):
        path = Path(source)
        if not path.is_file():
            raise ConfigError("<file>", f"no such config file: {str(path)!r}")
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(
                "<file>", f"{str(path)!r} is larger than {MAX_CONFIG_BYTES:,} bytes: not a config"
            )
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ConfigError(
                "<file>", f"{str(path)!r} is not UTF-8 text (a TOML file is): {err.reason}"
            ) from None
        except OSError as err:
            raise ConfigError("<file>", f"cannot read {str(path)!r}: {err.strerror}") from None
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


def config_to_dict(obj: Any) -> Any:
    """Nested plain dict of a config dataclass (tuples as lists, ``None`` omitted).

    A :class:`JobConfig` gives the TOML shape ``{"job": {...}, "model": {...}, ...}``.
    """
    return obj.to_dict() if isinstance(obj, JobConfig) else section_to_dict(obj)


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
    """TOML text that :func:`~prism_analytic.workload.jobs.load_config` reads back unchanged."""
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
