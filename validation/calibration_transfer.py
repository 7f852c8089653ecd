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
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "validation"))

import numpy as np  # noqa: E402

from prism_analytic.calibration import calibrate_to_logs, read_step_log  # noqa: E402
from prism_analytic.calibration.logs import without_pauses  # noqa: E402
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


#: A step above this multiple of its run's median is a stall (``prism calibrate``'s default).
STALL = 1.1
#: A step above this multiple of its run's median (and not a stall) is in the slow mode.
SLOW = 1.008


def step_facts(sizes: list[Size], *, drop_first: int = 2) -> list[dict]:
    """Model-free facts of each size's steps: what could carry from the smallest size.

    Per size: the within-run jitter (1.4826 MAD of step / run median, median over runs) as a
    fraction and in ms; stalls (> :data:`STALL` x run median) with their median excess as a
    fraction of the run median and in seconds, beside the count the smallest size's rate
    predicts per step and per GPU; the share of steps in a slow mode (> :data:`SLOW` x run
    median, not stalls), its median excess and the most common gap between its steps.
    """
    rows, base_rate, base_gpus = [], None, None
    for s in sorted(sizes, key=lambda x: x.gpus):
        logs = without_pauses([read_step_log(p, drop_first=drop_first) for p in s.logs])
        meds = [float(np.median(lg.times_s)) for lg in logs]
        norm = [lg.times_s / m for lg, m in zip(logs, meds)]
        jit = float(np.median([1.4826 * np.median(np.abs(x - 1.0)) for x in norm]))
        n = sum(x.size for x in norm)
        stall_rel = np.concatenate([x[x > STALL] - 1.0 for x in norm])
        stall_s = np.concatenate([(x[x > STALL] - 1.0) * m for x, m in zip(norm, meds)])
        slow = [(x > SLOW) & (x <= STALL) for x in norm]
        gaps = np.concatenate([np.diff(np.flatnonzero(sl)) for sl in slow])
        slow_rel = np.concatenate([x[sl] - 1.0 for x, sl in zip(norm, slow)])
        if base_rate is None:
            base_rate, base_gpus = stall_rel.size / n, s.gpus
        median = float(np.median(np.concatenate([lg.times_s for lg in logs])))
        rows.append(
            {
                "gpus": s.gpus,
                "steps": int(n),
                "median_s": median,
                "jitter_rel": jit,
                "jitter_ms": 1e3 * jit * median,
                "stalls": int(stall_rel.size),
                "stall_rel": float(np.median(stall_rel)) if stall_rel.size else None,
                "stall_s": float(np.median(stall_s)) if stall_s.size else None,
                "expected_per_step": base_rate * n,
                "expected_per_gpu": base_rate * n * s.gpus / base_gpus,
                "slow_share": float(np.mean(np.concatenate(slow))),
                "slow_rel": float(np.median(slow_rel)) if slow_rel.size else None,
                "slow_ms": 1e3 * float(np.median(slow_rel)) * median if slow_rel.size else None,
                "slow_gap": int(np.bincount(gaps).argmax()) if gaps.size else None,
            }
        )
    return rows


def _facts_table(rows: list[dict]) -> list[str]:
    def f(x, fmt):
        return "-" if x is None else format(x, fmt)

    out = [
        "| GPUs | steps | median s | jitter sd (ms) | stalls | stall size (s) |"
        " stalls expected: per step / per GPU | slow mode share | its excess (ms) |"
        " commonest gap |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['gpus']} | {r['steps']} | {r['median_s']:.4f} |"
            f" {r['jitter_rel']:.2%} ({r['jitter_ms']:.3g}) | {r['stalls']} |"
            f" {f(r['stall_rel'], '.1%')} ({f(r['stall_s'], '.3g')}) |"
            f" {r['expected_per_step']:.1f} / {r['expected_per_gpu']:.1f} |"
            f" {r['slow_share']:.1%} | {f(r['slow_rel'], '.1%')} ({f(r['slow_ms'], '.3g')}) |"
            f" {f(r['slow_gap'], 'd')} |"
        )
    return out


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
    for name, sizes in systems.items():
        table = system_table(sizes)
        facts = step_facts(sizes)
        text = f"{name}\n{transfer_text(table)}\noverlay: {_overlay_text(table['overlay'])}"
        print(text + "\n" + "\n".join(_facts_table(facts)) + "\n", flush=True)
        parts.append((name, sizes, table, facts))
    print(f"all out-of-sample sizes pass: {all(t['all_pass'] for _, _, t, _ in parts)}")
    if args.out:
        args.out.write_text(_markdown(parts, _commit()))
    return 0


def _overlay_text(overlay: dict) -> str:
    return json.dumps(overlay, default=float)


def _markdown(parts: list, commit: str) -> str:
    lines = [
        "# Calibration transfer across sizes (issue #24)",
        "",
        "Written by `python validation/calibration_transfer.py --out"
        f" validation/results/calibration_transfer.md` at commit {commit} (plus the working"
        " tree's uncommitted changes of that moment, if any).",
        "",
        "Per multi-size system: `prism calibrate` at the smallest size (its overlay merged into"
        " each other size's job file, as `prism predict --config JOB --config fit.toml`"
        " does), against **ratio scaling** (the uncalibrated prediction times measured /"
        " predicted at the calibration size). Medians and p90/p50 of the pooled steps (steps"
        " after an evaluation pause left out) against `prism predict`'s law. Target per size:"
        " |median| <= 3%, |p90/p50| <= 0.01, median error at most 0.5 points above ratio"
        " scaling's. The same table: `prism calibrate --check --config JOB --overlay fit.toml"
        " --steps LOG... --size JOB2 LOG2...`.",
        "",
        "Below each table, model-free facts of the steps (what could carry from the smallest"
        f" size): within-run jitter (1.4826 MAD of step / run median), stalls (> {STALL}x the"
        " run median; the count the smallest size's rate predicts per step and per GPU), and"
        f" a slow mode (steps {SLOW}x-{STALL}x their run median; the commonest gap between"
        " them, 1 = consecutive).",
        "",
    ]
    for name, sizes, table, facts in parts:
        lines += [f"## {name}", "", "```", transfer_text(table), "```", ""]
        lines += [f"Overlay fitted at {sizes[0].gpus} GPUs: `{_overlay_text(table['overlay'])}`"]
        lines += ["", *_facts_table(facts), ""]
    lines += FINDINGS
    return "\n".join(lines) + "\n"


#: The conclusions (read from the tables above; rerun and reread when they change).
FINDINGS = [
    "## What transfers and what does not",
    "",
    "* **Jitter: as a fraction of the step.** Within-run sd stays 0.3-0.7% of the step from 8"
    " to 2,496 GPUs while its milliseconds change with the step (8B: 0.3-0.4 s steps at 8"
    " GPUs, 0.09 s at 512). The overlay writes `step_jitter_rel`.",
    "* **Stalls: a rate per step, a size relative to the step.** The smallest size's rate per"
    " step predicts the stall counts at the larger sizes; a rate per GPU predicts 9-64x more"
    " than observed on 8B. Stall sizes are 0.14-0.16 of the step on 8B (0.06 s) and 0.2-0.4"
    " on 405B (4-8 s): seconds do not carry across step lengths. Stalls are rare (< 0.4% of"
    " steps), so they move neither the median nor p90.",
    "* **A slow mode that appears with size cannot be calibrated at the smallest size.** On"
    " 8B at 512 GPUs, 14-18% of steps are 1.2-1.5% slow (about 1.2 ms), every 7th step,"
    " on both Tyche and Theia; at 8 GPUs that share is 5-9% without the period. On Carina,"
    " the share grows from 0 at 512-1,024 GPUs to 7-13% at 2,048 and 17-28% at 2,496, in"
    " runs of consecutive steps (1.3-2.4%, about 0.1 s). Neither the calibration nor ratio"
    " scaling predicts it: Carina at 2,496 misses p90/p50 by about 0.015 with both.",
    "* **The median beyond the GEMMs.** One size cannot separate the GEMM efficiency from the"
    " fixed per-step cost and the other non-GEMM parts. Where the uncalibrated model misses"
    " the size scaling itself (8B from 8 to 72 GPUs), the calibration and ratio scaling miss"
    " alike: that is the uncalibrated model's error (defaults, issue #24 part 1), not the"
    " overlay's.",
]


if __name__ == "__main__":
    raise SystemExit(main())
