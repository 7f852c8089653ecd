"""Real traces: readers, latency fitting, structure recovery, step model and validation.

Readers turn per-op tables (parquet/CSV), Kineto JSON and step-time lists into one canonical
event table (seconds). :func:`recover_structure` learns a step's dependency graph from the
timing; :func:`fit_trace_model` fits per-op latency laws and the shared factors on some steps;
:func:`predict_trace` predicts the other steps and compares them with the measurement.
pandas and pyarrow are needed (``pip install 'prism_analytic[traces]'``).
"""

from prism_analytic.traces.errors import TraceFormatError
from prism_analytic.traces.fitting import FAMILIES, LatencyFit, fit_latency, ljung_box
from prism_analytic.traces.kineto import read_kineto
from prism_analytic.traces.model import TraceModel, fit_trace_model
from prism_analytic.traces.readers import read_op_table, read_step_times, read_trace
from prism_analytic.traces.structure import StepStructure, recover_structure, replay, unit_values
from prism_analytic.traces.table import COLUMNS, EventTable

__all__ = [
    "COLUMNS",
    "EventTable",
    "FAMILIES",
    "LatencyFit",
    "StepStructure",
    "TraceFormatError",
    "TraceModel",
    "fit_latency",
    "fit_trace_model",
    "ljung_box",
    "read_kineto",
    "read_op_table",
    "read_step_times",
    "read_trace",
    "recover_structure",
    "replay",
    "unit_values",
]
