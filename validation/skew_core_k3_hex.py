"""Record ``float.hex`` of the skew / kurtosis / cumulant cores where no bit may move.

Where carrying the ops' third cumulants into the skew core's maxima must change nothing.
The skew core's maxima carry the ops' third cumulants (``skew_core._FullEngine._op_skew_max``);
with symmetric ops that is Clark's max, unchanged, and the kurtosis and cumulant cores, which
share the op-skew terms, must not move for any op law. Recorded (predict, analytic, caches
cleared): ``core_shape="skew"`` on normal-op pipelines (compact and op-by-op, 1F1B and
interleaved) and an FSDP body; ``core_shape="kurtosis"`` and ``"cumulant"`` on the same graphs
with lognormal ops (CV 5% and 20%) and on the agreement suite's ``fsdp_overlap``. Run once with
the old code first on ``PYTHONPATH`` and once with the new, then ``--compare``.

Usage::

    python validation/skew_core_k3_hex.py --out FILE
    python validation/skew_core_k3_hex.py --compare OLD NEW
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from core_shape_choice import fsdp, pipe  # noqa: E402

import prism_analytic as pa  # noqa: E402
from prism_analytic.engines.pipeline_core import clear_caches  # noqa: E402
from prism_analytic.engines.skew_core import clear_cache  # noqa: E402
from prism_analytic.validation.scenarios import SCENARIOS  # noqa: E402

LEVELS = (0.01, 0.5, 0.99)


def graphs(family: str, cv: float) -> dict[str, Callable[[], pa.StepGraph]]:
    """The graphs with ops of ``family`` at ``cv``."""
    return {
        f"compact 1f1b 8x32 {family} {cv:g}": lambda: pipe(8, 32, "1f1b", family, cv),
        f"compact interleaved 4x16 {family} {cv:g}": lambda: pipe(4, 16, "interleaved", family, cv),
        f"op-by-op 1f1b 6x16 {family} {cv:g}": lambda: pipe(
            6, 16, "1f1b", family, cv, compact=False
        ),
        f"op-by-op interleaved 4x8 {family} {cv:g}": lambda: pipe(
            4, 8, "interleaved", family, cv, compact=False
        ),
        f"fsdp 8 layers {family} {cv:g}": lambda: fsdp(8, family, cv),
    }


def cases() -> list[tuple[str, str, Callable[[], pa.StepGraph]]]:
    """``(name, core_shape, build)`` of every recorded evaluation."""
    out = []
    for cv in (0.05, 0.2):
        out += [(f"skew | {n}", "skew", b) for n, b in graphs("normal", cv).items()]
        for shape in ("kurtosis", "cumulant"):
            out += [(f"{shape} | {n}", shape, b) for n, b in graphs("lognormal", cv).items()]
    for shape in ("kurtosis", "cumulant"):
        out.append((f"{shape} | fsdp_overlap", shape, SCENARIOS["fsdp_overlap"].build))
    return out


def record() -> dict[str, list[str]]:
    """``float.hex`` of the mean, std and quantiles of every case."""
    out = {}
    for name, shape, build in cases():
        clear_caches()
        clear_cache()
        res = pa.predict(build(), "analytic", core_shape=shape)
        vals = [res.mean(), res.std(), *(float(res.quantile(q)) for q in LEVELS)]
        out[name] = [float(v).hex() for v in vals]
        print(name, res.mean(), res.std(), flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Record (``--out``) or compare (``--compare OLD NEW``; exit 1 if any entry differs)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    args = ap.parse_args(argv)
    if args.compare:
        old, new = (json.loads(p.read_text()) for p in args.compare)
        diff = [k for k in old if old[k] != new.get(k)]
        for k in diff:
            print("DIFF", k, old[k], new.get(k))
        print(f"{len(old)} recorded entries, {len(diff)} differ")
        return 1 if diff else 0
    if args.out is None:
        ap.error("give --out FILE or --compare OLD NEW")
    args.out.write_text(json.dumps(record(), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
