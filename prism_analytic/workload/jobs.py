"""Jobs: a preset plus overrides (TOML file, text or mapping) becomes a validated JobConfig.

The config subpackage is the schema and its TOML reading; this module adds what needs the
presets: ``[job] preset = NAME`` and ``[job] hardware = NAME`` resolution, merging overrides
onto an existing job, and the ``--preset/--gpus/--config`` triple the commands take.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import presets
from .config import ConfigError, JobConfig, LayoutWarning, validate_layout
from .config.fields import _coerce
from .config.sections import HardwareConfig, ModelConfig, ParallelConfig, TrainingConfig
from .config.toml_io import (
    _JOB_KEYS,
    _STR_META,
    _TOP_KEYS,
    _build,
    _check_mapping,
    _deep_merge,
    _read_source,
    config_to_dict,
)
from .config.variability import VariabilityConfig

__all__ = ["load_config", "merge_config", "build_job", "apply_overlay"]


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
        preset = _coerce(job_tab["preset"], _STR_META, "job.preset")
        base = presets.preset_dict(preset, gpus)
    if "hardware" in job_tab:
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


def build_job(preset: str | None, gpus: int | None, config: str | Path | None = None) -> JobConfig:
    """The job that ``--preset NAME --gpus N [--config FILE]`` describes.

    Parameters
    ----------
    preset : str, optional
        Model preset name (``prism presets``); None when ``config`` holds a whole job.
    gpus : int, optional
        GPU count; required with ``preset``; with ``config`` alone it overrides ``[job] gpus``.
    config : str or Path, optional
        TOML file: overrides on top of the preset, or a whole job (``[job] preset, gpus``).

    Returns
    -------
    JobConfig

    Raises
    ------
    ConfigError
        For an unknown preset, a GPU count the preset's layout cannot use, or a bad config
        file, naming the offending key and what is allowed.
    """
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise ConfigError("--config", f"no such config file: {str(path)!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("default", LayoutWarning)
        if preset is None:
            if config is None:
                raise ConfigError(
                    "--preset",
                    "give --preset NAME --gpus N, or --config FILE with [job] preset and gpus",
                )
            job = load_config(path)
            if gpus is not None and job.gpus != gpus:
                job = merge_config(job, {"job": {"gpus": gpus}})
            return job
        if preset not in presets.MODELS:
            raise ConfigError(
                "--preset",
                f"unknown model preset {preset!r}; available: "
                f"{', '.join(sorted(presets.MODELS))} (see `prism presets`)",
            )
        if gpus is None:
            raise ConfigError("--gpus", f"required with --preset {preset}")
        from .config.sections import MAX_GPUS

        if gpus > MAX_GPUS:
            raise ConfigError("--gpus", f"at most {MAX_GPUS:.0e} GPUs, got {gpus:.3g}")
        job = presets.preset_job(preset, gpus)
        if config is not None:
            job = merge_config(job, path)
        return job


def apply_overlay(job: JobConfig, path: str | Path) -> JobConfig:
    """``job`` with a TOML overlay file (e.g. written by ``prism calibrate``) merged on top."""
    if not Path(path).is_file():
        raise ConfigError("--config", f"no such config file: {str(path)!r}")
    return merge_config(job, Path(path))
