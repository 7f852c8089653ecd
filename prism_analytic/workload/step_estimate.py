"""The deterministic step time of a job from its op means: pipeline, bubble, dp tail, MFU.

* :func:`step_time`: a closed-form step time from :func:`~.mean_model.op_means`, and MFU;
* :class:`StepEstimate`: the estimate and its parts, with ``summary``, ``to_dict``, ``plot``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .config import JobConfig, Layout
from .flops import model_flops_per_token
from .mean_model import OpMeans, op_means, total_seconds

__all__ = ["StepEstimate", "step_time", "mfu"]


@dataclass(frozen=True)
class StepEstimate:
    """Deterministic step-time estimate and its parts (seconds).

    Attributes
    ----------
    step_s : float
        Total.
    pipeline_s : float
        Forward/backward of all microbatches including bubble and exposed p2p.
    stage_fwd_s, stage_bwd_s : float
        Slowest stage's forward / backward per microbatch (all chunks, exposed comm).
    bubble_s : float
        ``(p - 1) / v * t_stage``.
    pp_fill_drain_s : float
        Unhidden p2p hops while the pipeline fills and drains.
    dp_exposed_s : float
        Exposed once-per-step data-parallel communication.
    optimizer_s, overhead_s : float
    tokens_per_step : int
    model_flops_per_step : float
    mfu : float
        Model FLOPs utilisation against the BF16 peak.
    tflops_per_gpu : float
        Achieved model TFLOP/s per GPU.
    """

    step_s: float
    pipeline_s: float
    stage_fwd_s: float
    stage_bwd_s: float
    bubble_s: float
    pp_fill_drain_s: float
    dp_exposed_s: float
    optimizer_s: float
    overhead_s: float
    tokens_per_step: int
    model_flops_per_step: float
    mfu: float
    tflops_per_gpu: float

    def summary(self) -> str:
        """One line."""
        return (
            f"step {self.step_s:.3f} s (pipeline {self.pipeline_s:.3f}, bubble"
            f" {self.bubble_s:.3f}, dp {self.dp_exposed_s:.3f}, optimizer"
            f" {self.optimizer_s:.3f}); MFU {self.mfu:.1%}, {self.tflops_per_gpu:.0f} TFLOP/s/GPU"
        )

    def to_dict(self) -> dict:
        """Plain dict."""
        return asdict(self)

    def plot(self, ax=None):
        """Horizontal stacked bar of where the step's time goes; returns the Axes."""
        if ax is None:
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=(7, 1.8))
        parts = [
            ("forward/backward", self.pipeline_s - self.bubble_s - self.pp_fill_drain_s),
            ("bubble", self.bubble_s),
            ("pp fill/drain", self.pp_fill_drain_s),
            ("dp exposed", self.dp_exposed_s),
            ("optimizer", self.optimizer_s),
            ("overhead", self.overhead_s),
        ]
        left = 0.0
        for label, width in parts:
            ax.barh(0, width, left=left, label=label)
            left += width
        ax.set_yticks([])
        ax.set_xlabel("seconds")
        ax.set_title(f"mean step {self.step_s:.3f} s, MFU {self.mfu:.1%}")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.45), ncol=3, fontsize="small")
        return ax


def step_time(job: JobConfig, means: OpMeans | None = None) -> StepEstimate:
    """Closed-form mean step time and MFU of ``job``.

    Parameters
    ----------
    job : JobConfig
    means : OpMeans, optional
        Reuse a previous :func:`op_means` result.

    Returns
    -------
    StepEstimate
    """
    om = means if means is not None else op_means(job)
    p, m, hw = job.parallelism, job.model, job.hardware
    lf, lb = om.layer_fwd_s, om.layer_bwd_s
    mid_layers = om.layers_per_chunk * om.chunks_per_stage if p.pp > 1 else m.layers
    ef, eb = total_seconds(om.embedding_fwd), total_seconds(om.embedding_bwd)
    hf, hb = total_seconds(om.head_fwd), total_seconds(om.head_bwd)
    if p.pp == 1:
        stages = [(m.layers * lf + ef + hf, m.layers * lb + eb + hb)]
    else:
        stages = [
            (mid_layers * lf, mid_layers * lb),
            (om.first_stage_layers * lf + ef, om.first_stage_layers * lb + eb),
            (om.last_stage_layers * lf + hf, om.last_stage_layers * lb + hb),
        ]
    mb_f = sum(o.exposed_s for o in om.dp_microbatch if o.phase == "fwd")
    mb_b = sum(o.exposed_s for o in om.dp_microbatch if o.phase == "bwd")
    p2p = 0.0
    if om.pp_send is not None:
        p2p = om.chunks_per_stage * om.pp_send.exposed_s  # per direction per microbatch
    fwd_s, bwd_s = max(stages, key=lambda fb: fb[0] + fb[1])
    fwd_s += mb_f + p2p
    bwd_s += mb_b + p2p
    t_stage = fwd_s + bwd_s
    bubble = (p.pp - 1) / Layout.of(job).pipeline_vpp * t_stage
    fill = 2 * (p.pp - 1) * om.pp_send.seconds if om.pp_send is not None else 0.0
    pipeline = p.microbatches * t_stage + bubble + fill
    dp_exposed = sum(o.exposed_s for o in om.dp_step)
    overhead = job.training.step_overhead_s
    step = pipeline + dp_exposed + om.optimizer.seconds + overhead
    tokens = p.global_batch * m.seq_len
    flops = model_flops_per_token(m) * tokens
    achieved = flops / (step * job.gpus)
    return StepEstimate(
        step_s=step,
        pipeline_s=pipeline,
        stage_fwd_s=fwd_s,
        stage_bwd_s=bwd_s,
        bubble_s=bubble,
        pp_fill_drain_s=fill,
        dp_exposed_s=dp_exposed,
        optimizer_s=om.optimizer.seconds,
        overhead_s=overhead,
        tokens_per_step=tokens,
        model_flops_per_step=flops,
        mfu=achieved / hw.peak_flops.bf16,
        tflops_per_gpu=achieved / 1e12,
    )


def mfu(job: JobConfig) -> float:
    """Model FLOPs utilisation of ``job`` predicted by :func:`step_time`."""
    return step_time(job).mfu
