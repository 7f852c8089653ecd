"""Evaluation pauses: every k training steps the job evaluates, then resumes slower.

Real pretraining runs stop for a held-out evaluation at a fixed sample interval; the GPUs
do no training meanwhile, and the first training step after the pause is slower than the
rest (caches, allocator and NCCL state rebuilt). Both are run-time components: they add
to the wall time of a run (``prism runtime``), not to the law of an ordinary step.

Measured in the MLPerf Training v5.0 Llama 3.1 405B logs on GB200 NVL72
(``shared/data/mlperf_llama405b``, ``eval_start``/``eval_stop`` records, three runs per
size): an evaluation every 46,080-46,592 samples, i.e. every 52 / 60 / 40 / 36 / 37 steps
at 512 / 1,024 / 1,536 / 2,048 / 2,496 GPUs, lasting 45.6-46.9 / 23.2-24.8 / 16.2-17.7 /
14.8-16.3 / 12.8-13.8 s (the first of each run the longest). The first step after the
run's first pause is slower by +0.98 s at 512 GPUs (95% [0.88, 1.07]), after later pauses
by +0.11 s [0.06, 0.16] (``prism calibrate --events``, :mod:`prism_analytic.calibration.
step_events`). Off by default (``interval_steps = 0``): a job states its own schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .fields import _f, _Section


@dataclass(frozen=True)
class EvaluationConfig(_Section):
    """Periodic evaluation pauses of a training run.

    Parameters
    ----------
    interval_steps : int
        Training steps between evaluations (the pause follows step k, 2k, ...); 0 = no
        evaluation (default).
    pause_s : float
        Wall time of one evaluation, seconds (MLPerf GB200 at 512 GPUs: about 46 s).
    first_step_extra_s : float
        Extra time of the first training step after each pause, seconds (MLPerf GB200 at
        512 GPUs: +0.98 s after the first pause, +0.11 s after later ones).
    first_pause_extra_s : float, optional
        Extra time of the step after the run's *first* pause when it differs from the
        later ones; default: ``first_step_extra_s``.
    """

    _SECTION: ClassVar[str] = "training.evaluation"
    interval_steps: int = _f(0, kind="int", ge=0)
    pause_s: float = _f(0.0, kind="float", ge=0.0)
    first_step_extra_s: float = _f(0.0, kind="float", ge=0.0)
    first_pause_extra_s: float | None = _f(None, kind="float", ge=0.0, optional=True)

    def _check(self) -> None:
        timed = self.pause_s > 0 or self.first_step_extra_s > 0 or self.first_pause_extra_s
        if self.interval_steps == 0 and timed:
            raise self._err(
                "interval_steps",
                "must be >= 1 when training.evaluation.pause_s or a first-step extra is set"
                " (0 turns evaluation off)",
            )

    def pauses(self, steps: int) -> int:
        """Evaluations during a run of ``steps`` steps (one after every ``interval_steps``)."""
        return steps // self.interval_steps if self.interval_steps > 0 else 0

    def time_s(self, steps: int) -> float:
        """Wall time the evaluations of a ``steps``-step run add: pauses and slow steps.

        A pause after the last step is counted (the run evaluates its final state) while
        no training step follows it, so its slow step is not.

        Examples
        --------
        >>> ev = EvaluationConfig(interval_steps=52, pause_s=46.0, first_step_extra_s=0.11,
        ...                       first_pause_extra_s=0.98)
        >>> ev.pauses(520), round(ev.time_s(520), 2)  # 10 pauses, 9 slow steps after them
        (10, 461.86)
        """
        n = self.pauses(steps)
        if n == 0:
            return 0.0
        slow = n - 1 if n * self.interval_steps >= steps else n
        first = (
            self.first_step_extra_s
            if self.first_pause_extra_s is None
            else self.first_pause_extra_s
        )
        extra = (first + (slow - 1) * self.first_step_extra_s) if slow > 0 else 0.0
        return n * self.pause_s + extra
