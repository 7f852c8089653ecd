"""Field and section machinery shared by every configuration section.

:class:`ConfigError` and :class:`LayoutWarning`, the ``_f`` field helper that records a
field's kind and range in its metadata, the checker ``_coerce`` and the ``_Section``
mixin that runs it on construction.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import field
from typing import Any, ClassVar


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range.

    Attributes
    ----------
    key : str
        Full dotted key of the offending value, e.g. ``"parallelism.tp"``.
    """

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.detail = message
        super().__init__(f"{key}: {message}")


class LayoutWarning(UserWarning):
    """A layout that is valid but likely slow (e.g. tp spanning NVLink domains)."""


# --------------------------------------------------------------------------------------
# Field rules. Each field carries its kind and range in `metadata`, so one checker serves
# both Python construction (__post_init__) and TOML loading (which adds unknown-key checks).
# --------------------------------------------------------------------------------------
def _f(
    default: Any = dataclasses.MISSING,
    *,
    kind: str,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: tuple[Any, ...] | None = None,
    optional: bool = False,
    section: type | None = None,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    meta = {
        "kind": kind,
        "gt": gt,
        "ge": ge,
        "le": le,
        "lt": lt,
        "choices": choices,
        "optional": optional,
        "section": section,
    }
    if default_factory is not dataclasses.MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


#: Boundary guards for every numeric config value: finite times need finite, non-extreme inputs.
MIN_MAGNITUDE, MAX_MAGNITUDE = 1e-30, 1e30
MAX_INT = 10**15


def _allowed(meta: Mapping[str, Any]) -> str:
    parts = []
    if meta["choices"] is not None:
        return "one of " + ", ".join(repr(c) for c in meta["choices"])
    if meta["gt"] is not None:
        parts.append(f"> {meta['gt']:g}")
    if meta["ge"] is not None:
        parts.append(f">= {meta['ge']:g}")
    if meta["lt"] is not None:
        parts.append(f"< {meta['lt']:g}")
    if meta["le"] is not None:
        parts.append(f"<= {meta['le']:g}")
    return " and ".join(parts) if parts else "any value"


def _coerce(value: Any, meta: Mapping[str, Any], key: str) -> Any:
    """Check one value's type and range; return it normalised (int -> float for floats)."""
    kind = meta["kind"]
    if value is None:
        if meta["optional"]:
            return None
        raise ConfigError(key, f"is required ({kind}, {_allowed(meta)})")
    if kind == "section":
        cls = meta["section"]
        if not isinstance(value, cls):
            raise ConfigError(key, f"must be a {cls.__name__}, got {type(value).__name__}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(key, f"must be true or false, got {type(value).__name__} {value!r}")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(key, f"must be a string, got {type(value).__name__} {value!r}")
        if meta["choices"] is not None and value not in meta["choices"]:
            raise ConfigError(key, f"got {value!r}; allowed: {_allowed(meta)}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ConfigError(
                key, f"must be an integer ({_allowed(meta)}), got {type(value).__name__} {value!r}"
            )
        out: Any = int(value)
        if abs(out) > MAX_INT:
            raise ConfigError(key, f"must be {_allowed(meta)} and at most {MAX_INT:.0e}, got {out}")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ConfigError(
                key, f"must be a number ({_allowed(meta)}), got {type(value).__name__} {value!r}"
            )
        out = float(value)
        if not math.isfinite(out):
            raise ConfigError(key, f"must be finite ({_allowed(meta)}), got {out!r}")
        if out != 0 and not MIN_MAGNITUDE <= abs(out) <= MAX_MAGNITUDE:
            # a rate of 1e-300 or 1e300 overflows the step model's times and variances
            raise ConfigError(
                key,
                f"must be {_allowed(meta)}, with magnitude 0 or between {MIN_MAGNITUDE:g} and "
                f"{MAX_MAGNITUDE:g}, got {out!r}",
            )
    elif kind == "floats":
        if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
            raise ConfigError(key, f"must be a list of numbers, got {type(value).__name__}")
        items = list(value)
        if not items:
            raise ConfigError(key, "must be a non-empty list of numbers")
        sub = dict(meta, kind="float")
        return tuple(_coerce(v, sub, f"{key}[{i}]") for i, v in enumerate(items))
    else:  # pragma: no cover - programming error
        raise AssertionError(kind)
    if meta["choices"] is not None and out not in meta["choices"]:
        raise ConfigError(key, f"got {out!r}; allowed: {_allowed(meta)}")
    bad = (
        (meta["gt"] is not None and not out > meta["gt"])
        or (meta["ge"] is not None and not out >= meta["ge"])
        or (meta["lt"] is not None and not out < meta["lt"])
        or (meta["le"] is not None and not out <= meta["le"])
    )
    if bad:
        raise ConfigError(key, f"must be {_allowed(meta)}, got {out!r}")
    return out


class _Section:
    """Mixin: validates and normalises every rule-carrying field after construction."""

    _SECTION: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if "kind" not in f.metadata:
                continue
            value = _coerce(getattr(self, f.name), f.metadata, f"{self._SECTION}.{f.name}")
            object.__setattr__(self, f.name, value)
        self._check()

    def _check(self) -> None:
        """Cross-field rules inside one section (override)."""

    def _err(self, name: str, message: str) -> ConfigError:
        return ConfigError(f"{self._SECTION}.{name}", message)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (TOML-shaped; ``None`` values omitted)."""
        return section_to_dict(self)


def section_to_dict(obj: Any) -> Any:
    """Nested plain dict of a config section (tuples as lists, ``None`` omitted)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        res: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            if "kind" not in f.metadata:
                continue
            v = getattr(obj, f.name)
            if v is not None:
                res[f.name] = section_to_dict(v)
        return res
    if isinstance(obj, tuple):
        return [section_to_dict(v) for v in obj]
    return obj
