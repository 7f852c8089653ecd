"""Job configuration: model, parallelism, hardware/cluster, training and variability.

Every section is a frozen dataclass that validates itself on construction, so a
configuration built in Python is held to the same rules as one read from TOML.
:func:`~prism_analytic.workload.jobs.load_config` reads TOML (or a mapping), rejects unknown
keys, wrong types, non-finite numbers and out-of-range values with a :class:`ConfigError`
whose message names the full key (``parallelism.tp``) and what is allowed.
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
    [training]                  # keys of TrainingConfig; [training.evaluation]
    [variability.spatial]       # and .temporal, .network.{intra_node,inter_node,cross_dc},
                                # .regimes, .hiccups

Units: seconds (``*_s``), bytes, bytes/s, FLOP/s.
"""

# Subpackage layout: ``fields`` (ConfigError, LayoutWarning, the field/section machinery),
# ``sections`` (model, parallelism, hardware, training), ``variability`` (noise sections
# and their documented defaults), ``job`` (JobConfig), ``layout`` (validate_layout) and
# ``toml_io`` (reading and dumping TOML). Preset resolution, :func:`load_config` and
# :func:`merge_config` live in :mod:`prism_analytic.workload.jobs` (they need the presets).

from __future__ import annotations

from .evaluation import EvaluationConfig
from .fields import ConfigError, LayoutWarning
from .job import JobConfig
from .layout import Layout, validate_layout
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
from .toml_io import config_to_dict, dump_toml
from .variability import (
    JITTER_MEAN_OVER_STD,
    HiccupConfig,
    NetworkVariability,
    RegimeConfig,
    ScaleVariability,
    SpatialVariability,
    TemporalVariability,
    TierNoise,
    VariabilityConfig,
)

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
    "EvaluationConfig",
    "SpatialVariability",
    "TemporalVariability",
    "TierNoise",
    "NetworkVariability",
    "RegimeConfig",
    "HiccupConfig",
    "ScaleVariability",
    "JITTER_MEAN_OVER_STD",
    "VariabilityConfig",
    "JobConfig",
    "Layout",
    "validate_layout",
    "config_to_dict",
    "dump_toml",
]
