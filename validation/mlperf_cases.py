"""The public MLPerf Training cases: one per system x benchmark x size, with its measurements.

Two shared folders (each with a ``SOURCE.md``): ``mlperf_training_set`` (MLPerf v5.0/v5.1 on
Tyche GB200, Theia GB300, HiPerGator B200; Llama 3.1 405B and 8B) and ``mlperf_llama405b``
(v5.0 on Carina GB200, 512-2,496 GPUs). Each case names the job TOML in
``validation/configs/`` that expresses it (its header comment names the ``config_*.sh`` and
the log it came from) and the step logs it is measured by.

Measured numbers follow the SOURCE.md convention: runs pooled, the first two logged steps of
each run dropped (warm-up), numpy's default quantiles. ``p90_over_p50`` is of the pooled steps.

Use::

    from validation.mlperf_cases import cases, case_specs
    for c in cases():            # reads the logs (FileNotFoundError when the data are absent)
        print(c.name, c.system, c.gpus, c.median_s, c.p90_over_p50, c.config)

``case_specs()`` is the same list without reading any log (no data needed).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from prism_analytic.calibration import read_step_log
from prism_analytic.datasets import data_root

__all__ = ["Case", "case_specs", "cases", "SYSTEMS", "CONFIGS"]

CONFIGS = Path(__file__).resolve().parent / "configs"

#: system -> GPU type (system.json of each submission).
SYSTEMS = {"Tyche": "GB200", "Carina": "GB200", "Theia": "GB300", "HiPerGator": "B200"}


@dataclass(frozen=True)
class Case:
    """One measured MLPerf job.

    Attributes
    ----------
    name : str
        The config's stem, e.g. ``mlperf51_theia_gb300_405b_512``.
    system, gpu : str
        Submission system (``Tyche``, ``Carina``, ``Theia``, ``HiPerGator``) and GPU type.
    mlperf_round : str
        ``v5.0`` or ``v5.1``.
    benchmark : str
        ``llama31_405b`` or ``llama31_8b``.
    gpus : int
    config : Path
        The job TOML in ``validation/configs/``.
    logs : tuple of str
        Step-log paths relative to the shared data folder.
    median_s, p90_over_p50 : float
        Measured (``nan`` in :func:`case_specs`).
    steps : int
        Step records pooled (0 in :func:`case_specs`).
    log_every : int
        Optimizer steps per record: 32 for Llama 3.1 8B (``config_common_8b.sh``:
        ``LOG_EVERY_N_STEPS=32``; ``metadata.step`` advances by 32), 1 for 405B. An 8B record
        is most likely one step, not the interval's mean: records scatter around the
        interval's mean wall time (time_ms difference / 32) about as widely as among
        themselves (p10-p90 of the ratio +-0.3% to +-1%, i.e. 8-55 ms of a 2.7-11 s interval,
        more than log-timestamp jitter). So the 8B medians and p90/p50 are of a 1-in-32
        sample of steps (if records were 32-step means, their spread would understate a
        step's), and ``steps`` counts records.
    """

    name: str
    system: str
    gpu: str
    mlperf_round: str
    benchmark: str
    gpus: int
    config: Path
    logs: tuple[str, ...]
    median_s: float = float("nan")
    p90_over_p50: float = float("nan")
    steps: int = 0
    log_every: int = 1


def _runs(folder: str, n: int = 3) -> tuple[str, ...]:
    return tuple(f"{folder}/result_{i}.txt" for i in range(n))


def _spec(name: str, system: str, rnd: str, bench: str, gpus: int, folder: str) -> Case:
    return Case(
        name=name,
        system=system,
        gpu=SYSTEMS[system],
        mlperf_round=rnd,
        benchmark=bench,
        gpus=gpus,
        config=CONFIGS / f"{name}.toml",
        logs=_runs(folder),
        log_every=32 if bench == "llama31_8b" else 1,
    )


def case_specs() -> list[Case]:
    """Every case without its measurements (no data needed), in a fixed order."""
    ts = "mlperf_training_set"
    out = [
        _spec(
            f"mlperf50_tyche_gb200_405b_{g}",
            "Tyche",
            "v5.0",
            "llama31_405b",
            g,
            f"{ts}/v5.0/NVIDIA/tyche_ngpu{g}_ngc25.04_nemo/llama31_405b/results",
        )
        for g in (256, 512)
    ]
    for system in ("tyche", "theia"):
        gpu = SYSTEMS[system.title()].lower()
        out.append(
            _spec(
                f"mlperf51_{system}_{gpu}_405b_512",
                system.title(),
                "v5.1",
                "llama31_405b",
                512,
                f"{ts}/v5.1/NVIDIA/{system}_ngpu512_ngc25.09_nemo/llama31_405b/results",
            )
        )
    for gpus, nodes in ((256, 32), (448, 56)):
        out.append(
            _spec(
                f"mlperf51_hipergator_b200_405b_{gpus}",
                "HiPerGator",
                "v5.1",
                "llama31_405b",
                gpus,
                f"{ts}/v5.1/University-of-Florida/hpg.dgxb200x8.n{nodes}/llama31_405b/results",
            )
        )
    for system in ("tyche", "theia"):
        gpu = SYSTEMS[system.title()].lower()
        for gpus in (8, 72, 512):
            out.append(
                _spec(
                    f"mlperf51_{system}_{gpu}_8b_{gpus}",
                    system.title(),
                    "v5.1",
                    "llama31_8b",
                    gpus,
                    f"{ts}/v5.1/NVIDIA/{system}_ngpu{gpus}_ngc25.09_nemo/llama31_8b/results",
                )
            )
    for gpus in (512, 1024, 1536, 2048, 2496):
        out.append(
            _spec(
                f"mlperf_gb200_{gpus}",
                "Carina",
                "v5.0",
                "llama31_405b",
                gpus,
                f"mlperf_llama405b/carina_gb200_ngpu{gpus}",
            )
        )
    return out


def measured(case: Case, data_dir: str | Path | None = None) -> Case:
    """``case`` with its measured median, pooled p90/p50 and step count, from its logs.

    Raises
    ------
    FileNotFoundError
        The shared data folder or one of the case's logs is absent.
    """
    root = data_root(data_dir)
    times = np.concatenate([read_step_log(root / rel, drop_first=2).times_s for rel in case.logs])
    p50, p90 = np.quantile(times, [0.5, 0.9])
    return replace(case, median_s=float(p50), p90_over_p50=float(p90 / p50), steps=int(times.size))


def cases(data_dir: str | Path | None = None) -> list[Case]:
    """Every case with its measurements (see :func:`measured`)."""
    return [measured(c, data_dir) for c in case_specs()]


def main(argv: list[str] | None = None) -> int:
    """Print the cases and their measured numbers (``python -m validation.mlperf_cases``)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None, help="shared data folder (default ../shared/data)")
    args = ap.parse_args(argv)
    head = f"{'case':38s} {'system':10s} {'gpu':5s} {'gpus':>5s} {'steps':>5s} {'median s':>9s}"
    print(head + " p90/p50")
    for c in cases(args.data_dir):
        print(
            f"{c.name:38s} {c.system:10s} {c.gpu:5s} {c.gpus:5d} {c.steps:5d}"
            f" {c.median_s:9.4f} {c.p90_over_p50:.4f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
