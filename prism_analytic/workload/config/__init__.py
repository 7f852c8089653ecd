"""Job configuration: model, parallelism, hardware/cluster, training and variability.

Every section is a frozen dataclass that validates itself on construction, so a
configuration built in Python is held to the same rules as one read from TOML.
:func:`load_config` reads TOML (or a mapping), rejects unknown keys, wrong types,
non-finite numbers and out-of-range values with a :class:`ConfigError` whose
message names the full key (``parallelism.tp``) and what is allowed.
:func:`validate_layout` checks the cross-section rules (Megatron-LM's) that tie the
parallel layout to the model and the GPU count.

TOML layout (every section optional except what the job needs)::

    [job]
    name = "my-run"
    preset = "llama3-405b"      # start from a model preset and its default layout
    hardware = "h100-sxm-80gb"  # start from a hardware preset
    gpus = 16384                # derive dp (and the preset's layout) from this

    [model]                     # keys of ModelConfig; [model.moe] for MoE models
    [parallelism]               # keys of ParallelConfig; [parallelism.overlap]
    [hardware]                  # HardwareConfig; [hardware.peak_flops], [hardware.efficiency]
    [training]                  # keys of TrainingConfig
    [variability.spatial]       # and .temporal, .network.{intra_node,inter_node,cross_dc},
                                # .regimes, .hiccups

Units: seconds (``*_s``), bytes, bytes/s, FLOP/s.
"""

# Subpackage layout: ``fields`` (ConfigError, LayoutWarning, the field/section machinery),
# ``sections`` (model, parallelism, hardware, training), ``variability`` (noise sections
# and their documented defaults), ``job`` (JobConfig), ``layout`` (validate_layout) and
# ``toml_io`` (loading, merging, dumping).

from __future__ import annotations

from .fields import ConfigError, LayoutWarning
from .fields import _allowed as _allowed
from .fields import _coerce as _coerce
from .fields import _f as _f
from .fields import _Section as _Section
from .job import JobConfig
from .layout import validate_layout
from .sections import _SCHEDULES as _SCHEDULES
from .sections import _SHARDING as _SHARDING
from .sections import (
    Efficiency,
    HardwareConfig,
    ModelConfig,
    MoEConfig,
    OverlapConfig,
    ParallelConfig,
    PeakFlops,
    TrainingConfig,
)
from .toml_io import _JOB_KEYS as _JOB_KEYS
from .toml_io import _STR_META as _STR_META
from .toml_io import _TOP_KEYS as _TOP_KEYS
from .toml_io import _build as _build
from .toml_io import _check_mapping as _check_mapping
from .toml_io import _deep_merge as _deep_merge
from .toml_io import _read_source as _read_source
from .toml_io import _section_fields as _section_fields
from .toml_io import _toml_value as _toml_value
from .toml_io import config_to_dict, dump_toml, load_config, merge_config
from .variability import (
    HiccupConfig,
    NetworkVariability,
    RegimeConfig,
    SpatialVariability,
    TemporalVariability,
    TierNoise,
    VariabilityConfig,
)
from .variability import _cross_dc as _cross_dc
from .variability import _inter as _inter
from .variability import _intra as _intra

__all__ = [
    "ConfigError",
    "LayoutWarning",
    "ModelConfig",
    "MoEConfig",
    "OverlapConfig",
    "ParallelConfig",
    "PeakFlops",
    "Efficiency",
    "HardwareConfig",
    "TrainingConfig",
    "SpatialVariability",
    "TemporalVariability",
    "TierNoise",
    "NetworkVariability",
    "RegimeConfig",
    "HiccupConfig",
    "VariabilityConfig",
    "JobConfig",
    "load_config",
    "merge_config",
    "validate_layout",
    "config_to_dict",
    "dump_toml",
]
