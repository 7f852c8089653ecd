"""Fuzz corpus (small CI sample): hostile inputs get the package's own errors, never hang, and
whatever runs keeps its stated guarantees. ``validation/fuzz_long.py`` runs the same
strategies for minutes and prints the counts.
"""

from __future__ import annotations

import pytest
from fuzz_strategies import TARGETS, run_case
from hypothesis import HealthCheck, given, settings

#: Per-input wall-clock limit (the machine running CI may be shared).
LIMIT_S = 30.0
EXAMPLES = {
    "closed_forms": 40,
    "hostile_api": 60,
    "graphs": 12,
    "group_closed_forms": 15,
    "toml_configs": 10,
    "cli": 10,
    "reliability": 40,
}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzz_target(target):
    @settings(
        max_examples=EXAMPLES[target],
        deadline=None,
        database=None,
        derandomize=True,  # the same inputs every run: CI is deterministic
        suppress_health_check=list(HealthCheck),
    )
    @given(TARGETS[target])
    def check(case):
        description, thunk = case
        outcome = run_case(thunk, LIMIT_S)
        assert outcome.kind in ("ok", "refused"), f"{outcome.kind}: {description}: {outcome.detail}"

    check()
