"""Reference for tests/engines/test_factor_anchors.py: the Clark-Mehler core at every design point.

The anchor line of :func:`prism_analytic.engines.pipeline_factors.anchored_laws` stands in for
the core at every quasi-Monte-Carlo condition of the factors. Its exact counterpart is the core
evaluated at all of them: on a 1F1B 6x16 pipeline with per-microbatch factors lognormal(1,
0.15) (the agreement's r90 factors; ops normal with CV 5%) and a 1,024-point design, ~10 s of
CPU, too slow for a unit test. This script computes it once and stores the conditional means
and variances, with the design's factors' checksum (the test checks it recomputes the same
design, and re-evaluates a few points with the live core to see the file is current).

Run (from the repository root)::

    nice python validation/factor_anchor_reference.py [--out tests/data/factor_anchor_6x16.npz]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

import prism_analytic as pa
from prism_analytic.engines import pipeline_core as pc
from prism_analytic.engines import pipeline_factors as pf
from prism_analytic.graph.pipeline_spec import PipelineSpec, law_key

STAGES, MICROBATCHES, FACTOR_CV, OP_CV, POINTS = 6, 16, 0.15, 0.05, 1024
OUT = Path("tests/data/factor_anchor_6x16.npz")


def spec() -> PipelineSpec:
    """The reference pipeline: 1F1B, F ops mean 1, B ops mean 2, both CV :data:`OP_CV`."""
    laws = {
        law_key(ph, s): pa.normal(mean, OP_CV * mean)
        for ph, mean in (("F", 1.0), ("B", 2.0))
        for s in range(STAGES)
    }
    return PipelineSpec(STAGES, MICROBATCHES, laws, microbatch_factor=pa.lognormal(1.0, FACTOR_CV))


def design() -> dict[str, Any]:
    """The engine's tail-stratified design with :data:`POINTS` points (deterministic)."""
    return pf.factor_design(spec(), POINTS)


def core() -> Any:
    """The Clark-Mehler core with the factors fixed (the engine's)."""
    return pc._conditioned_core(spec(), "clark-mehler", None)


def main() -> None:
    """Compute the core at every design point and write the ``.npz`` file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    d, f = design(), core()
    t = time.process_time()
    ex = np.array([f(row, None) for row in d["w"]])
    print(f"{len(ex)} points, {time.process_time() - t:.1f} s CPU")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.out, mean=ex[:, 0], var=ex[:, 1], w_sum=d["w"].sum(axis=1), weight=d["weight"]
    )


if __name__ == "__main__":
    main()
