"""Calibrate at each multi-size system's smallest size, predict its other sizes (issue #24).

For every system with public step logs at several sizes (``shared/data/mlperf_llama405b``:
Carina GB200 512-2,496; ``shared/data/mlperf_training_set`` through
``validation/mlperf_cases.py`` when it is there), ``prism calibrate`` is run at the smallest
size (:func:`~prism_analytic.calibration.calibrate_to_logs`, the overlay it writes merged
into the job files of the other sizes, as ``prism predict --config JOB --config fit.toml``
does) and the prediction at each other size is compared with its logs, beside ratio scaling
(the uncalibrated prediction times measured / predicted at the calibration size):
:func:`~prism_analytic.calibration.transfer.transfer_table`.

Run: ``python validation/calibration_transfer.py --out
validation/results/calibration_transfer.md`` (a few minutes on one core). Needs ``../shared/data``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "validation"))

from prism_analytic.calibration import calibrate_to_logs, read_step_log  # noqa: E402
from prism_analytic.calibration.transfer import (  # noqa: E402
    SizeCase,
    transfer_table,
    transfer_text,
)
from prism_analytic.workload.jobs import build_job, merge_config  # noqa: E402


@dataclass(frozen=True)
class Size:
    """One logged size of a system: its job file and step logs."""

    gpus: int
    config: Path
    logs: tuple[Path, ...]


def multi_size_systems() -> dict[str, list[Size]]:
    """The multi-size systems of ``validation/mlperf_cases.py``, one per system, round and model.

    Carina's five sizes (``mlperf_llama405b``) when that loader is absent. Rounds are not
    mixed: Tyche's v5.1 405B job (another software stack, batch and precision) is not a
    size of its v5.0 one.
    """
    try:
        from mlperf_cases import case_specs
    except ImportError:
        return _carina()
    groups: dict[str, list[Size]] = {}
    for c in case_specs():
        key = f"{c.system} {c.gpu} {c.benchmark} ({c.mlperf_round})"
        logs = tuple(DATA / rel for rel in c.logs)
        groups.setdefault(key, []).append(Size(c.gpus, Path(c.config), logs))
    return {k: sorted(v, key=lambda s: s.gpus) for k, v in groups.items() if len(v) > 1}


def _carina() -> dict[str, list[Size]]:
    """Carina GB200 NVL72, Llama 3.1 405B FP8, 512-2,496 GPUs (``mlperf_llama405b``)."""
    sizes = []
    for g in (512, 1024, 1536, 2048, 2496):
        logs = sorted((DATA / "mlperf_llama405b" / f"carina_gb200_ngpu{g}").glob("result_*.txt"))
        cfg = ROOT / "validation" / "configs" / f"mlperf_gb200_{g}.toml"
        if logs and cfg.exists():
            sizes.append(Size(g, cfg, tuple(logs)))
    return {"Carina GB200 llama31_405b (v5.0)": sizes} if len(sizes) > 1 else {}


def system_table(sizes: list[Size], *, drop_first: int = 2, seed: int = 0) -> dict:
    """Calibrate at the smallest size, the transfer table at the others."""
    sizes = sorted(sizes, key=lambda s: s.gpus)
    cases = []
    fit = None
    for s in sizes:
        job = build_job(None, None, s.config)
        logs = [read_step_log(p, drop_first=drop_first) for p in s.logs]
        if fit is None:  # what `prism calibrate --config JOB --steps LOG... --out fit.toml` does
            fit = calibrate_to_logs(job, logs, n_resamples=400, seed=seed, check_body=False)
        cases.append(SizeCase(merge_config(job, fit.overlay()), job, logs))
    table = transfer_table(cases[0], cases[1:])
    table["overlay"] = fit.overlay()
    return table


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write the tables as markdown here")
    ap.add_argument("--only", help="only systems whose name contains this text")
    args = ap.parse_args(argv)
    if not DATA.is_dir():
        print(f"no shared data at {DATA}: nothing to measure", file=sys.stderr)
        return 2
    systems = multi_size_systems()
    if args.only:
        systems = {k: v for k, v in systems.items() if args.only.lower() in k.lower()}
    parts = []
    passes = []
    for name, sizes in systems.items():
        table = system_table(sizes)
        text = f"{name}\n{transfer_text(table)}\noverlay: {table['overlay']}"
        print(text + "\n", flush=True)
        parts.append((name, sizes, table))
        passes.append(table["all_pass"])
    print(f"all out-of-sample sizes pass: {all(passes)}")
    if args.out:
        args.out.write_text(_markdown(parts, _commit()))
    return 0


def _markdown(parts: list, commit: str) -> str:
    lines = [
        "# Calibration transfer across sizes (issue #24)",
        "",
        "`python validation/calibration_transfer.py --out"
        f" validation/results/calibration_transfer.md` at commit {commit}.",
        "",
    ]
    for name, sizes, table in parts:
        lines += [f"## {name}", "", "```", transfer_text(table), "```", ""]
        lines += [f"Overlay fitted at {sizes[0].gpus} GPUs: `{table['overlay']}`", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
