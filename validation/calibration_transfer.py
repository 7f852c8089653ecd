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
        logs = [read_step_log(p, drop_first=drop_first) for p in s.logs]
        # steps after an evaluation pause are left out of every figure, but kept in place so
        # that the gaps between slow steps count the steps as they ran
        steady = [~lg.after_pause for lg in logs]
        meds = [float(np.median(lg.times_s[k])) for lg, k in zip(logs, steady)]
        norm = [lg.times_s / m for lg, m in zip(logs, meds)]
        jit = float(
            np.median([1.4826 * np.median(np.abs(x[k] - 1.0)) for x, k in zip(norm, steady)])
        )
        n = sum(int(k.sum()) for k in steady)
        stall = [(x > STALL) & k for x, k in zip(norm, steady)]
        stall_rel = np.concatenate([x[st] - 1.0 for x, st in zip(norm, stall)])
        stall_s = np.concatenate([(x[st] - 1.0) * m for x, st, m in zip(norm, stall, meds)])
        slow = [(x > SLOW) & (x <= STALL) & k for x, k in zip(norm, steady)]
        gaps = np.concatenate([np.diff(np.flatnonzero(sl)) for sl in slow])
        slow_rel = np.concatenate([x[sl] - 1.0 for x, sl in zip(norm, slow)])
        if base_rate is None:
            base_rate, base_gpus = stall_rel.size / n, s.gpus
        median = float(np.median(np.concatenate([lg.times_s[k] for lg, k in zip(logs, steady)])))
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
                "slow_share": sum(int(sl.sum()) for sl in slow) / n,
                "slow_rel": float(np.median(slow_rel)) if slow_rel.size else None,
                "slow_ms": 1e3 * float(np.median(slow_rel)) * median if slow_rel.size else None,
                "slow_gap": int(np.bincount(gaps).argmax()) if gaps.size else None,
            }
        )
    return rows


def stall_loglik(rows: list[dict]) -> tuple[float, float]:
    """Poisson log-likelihood of the larger sizes' stall counts: (per step, per GPU) rule.

    The rate comes from the smallest size (the first row), as a calibration there would
    carry it; a size where the rule expects 0 stalls and saw none adds 0.
    """
    from scipy import stats

    out = []
    for key in ("expected_per_step", "expected_per_gpu"):
        ll = 0.0
        for r in rows[1:]:
            ll += float(stats.poisson.logpmf(r["stalls"], r[key])) if r[key] > 0 else 0.0
        out.append(ll)
    return out[0], out[1]


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
    if len(rows) > 1 and rows[0]["stalls"]:
        ll_step, ll_gpu = stall_loglik(rows)
        out += [
            "",
            f"Stall counts at the larger sizes, Poisson log-likelihood of the smallest size's"
            f" rate carried per step: {ll_step:.1f}, per GPU: {ll_gpu:.1f}.",
        ]
    return out


def _within_run_table(table: dict) -> list[str]:
    """p90/p50 within runs: per-run-normalised steps against the law of one allocation."""
    out = [
        "| GPUs | p90/p50 within runs: measured | calibrated | uncalibrated |",
        "|---|---|---|---|",
    ]
    for r in table["rows"]:
        out.append(
            f"| {r['gpus']} | {r['measured_within_run_p90_over_p50']:.4f} |"
            f" {r['predicted_within_run_p90_over_p50']:.4f} |"
            f" {r['uncalibrated_within_run_p90_over_p50']:.4f} |"
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
        "Beside each table, p90/p50 within runs (steps over their run's median against the"
        " law of one allocation, what `prism calibrate --check` compares; the calibration"
        " fits its jitter there, under the shape the steps choose, so the in-sample row can"
        " differ from the pooled one), then model-free facts of the steps (what could carry"
        " from the smallest size): within-run jitter (1.4826 MAD of step / run median),"
        f" stalls (> {STALL}x the run median; the count the smallest size's rate predicts"
        " per step and per GPU), and a slow mode"
        f" (steps {SLOW}x-{STALL}x their run median; the commonest gap between"
        " them, 1 = consecutive).",
        "",
    ]
    for name, sizes, table, facts in parts:
        lines += [f"## {name}", "", "```", transfer_text(table), "```", ""]
        lines += [f"Overlay fitted at {sizes[0].gpus} GPUs: `{_overlay_text(table['overlay'])}`"]
        lines += ["", *_within_run_table(table), "", *_facts_table(facts), ""]
    lines += FINDINGS
    return "\n".join(lines) + "\n"


#: The conclusions (read from the tables above; rerun and reread when they change).
FINDINGS = [
    "## What transfers and what does not",
    "",
    "* **Jitter: as a fraction of the step.** Within-run sd stays 0.3-0.7% of the step from 8"
    " to 2,496 GPUs while its milliseconds follow the step (Theia 8B: 0.31%, 0.30%, 0.29% at"
    " 8, 72, 512 GPUs, i.e. 1.06, 0.45, 0.25 ms; Carina 0.46-0.59%, 107 to 28 ms). The"
    " overlay writes `step_jitter_rel`; a jitter the steps do not need is written as 0, so"
    " that the default relative jitter does not widen them.",
    "* **Stalls: a rate per step, a size relative to the step.** The smallest size's rate per"
    " step predicts the stall counts at the larger sizes (8B: 0.9-1.4 expected, 0 seen);"
    " a rate per GPU expects 12 and 60 on 8B at 72 and 512 GPUs, where none occurred (log-"
    "likelihood -2.3 per step against -72 per GPU on each 8B system). On 405B the per-GPU"
    " rule fits Carina a little better (-12.7 per step, -10.0 per GPU, from one 1,536-GPU"
    " run holding 6 stalls) and Tyche a little worse (-1.4 against -1.5): weak evidence of"
    " growth there against strong evidence on 8B, so the overlay keeps the rate per step."
    " Stall sizes are 0.14-0.16 of the step on 8B (0.06 s) and 0.12-0.6 on 405B (0.7-8 s):"
    " seconds do not carry across step lengths. The overlay writes"
    " `variability.hiccups.size_rel` (the seconds are reported). Stalls are"
    " rare (< 0.4% of steps), so on these logs they move neither the median nor p90; with"
    " frequent stalls the seconds form misses p90/p50 at another size"
    " (`tests/calibration/test_calibration_transfer.py`).",
    "* **A slow mode that appears with size cannot be calibrated at the smallest size.** On"
    " 8B at 512 GPUs, 17-18% of steps are about 1.4% slow (1.2 ms), every 7th step on Tyche"
    " and Theia alike; at 8 GPUs 6.3% (Tyche) and 0.7% (Theia), without that period. On"
    " Carina the share grows from 0.1% at 512 GPUs to 9% at 2,048"
    " and 22% at 2,496, in runs of consecutive steps (1.4-2.2%, about 0.1 s). Neither the"
    " calibration nor ratio scaling predicts it: Carina at 2,496 GPUs misses p90/p50 by"
    " 0.016-0.018 with both.",
    "* **The median beyond the GEMMs.** One size cannot separate the GEMM efficiency from the"
    " fixed per-step cost and the other non-GEMM parts; the overlay puts the whole miss on"
    " the GEMMs, ratio scaling on the whole step. Where the uncalibrated model scales the"
    " step right (ratio scaling within 3%: Carina, Tyche 405B, HiPerGator) the two agree"
    " within 0.1 point. On 8B the uncalibrated model errs in opposite directions at 8, 72"
    " and 512 GPUs, so both miss 72 GPUs by 13-20%, and at 512 the calibration is closer on"
    " Theia and farther on Tyche (see the tables): the uncalibrated model's error (the"
    " defaults, issue #24 part 1), which no fit at one size can know.",
]


if __name__ == "__main__":
    raise SystemExit(main())
