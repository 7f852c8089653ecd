"""A suite of synthetic jobs covering the layouts the trace tools must handle.

:func:`acceptance_jobs` returns 34 jobs: data parallel 1-64, pipeline 1-8 (1F1B and
interleaved with 2-4 chunks per stage), tensor parallel 1-8 (with and without sequence
parallelism), ring context parallel and Ulysses sequence parallel 2-4, expert parallel 2-8
(MoE layers), tied embeddings (an all-reduce between the first and last stage), from 2
to 512 ranks; some with slow ranks, shared per-step and per-microbatch
factors. Structure recovery, replay and prediction are checked on every one of them.

Examples
--------
>>> jobs = acceptance_jobs()
>>> len(jobs), min(j.world_size for j in jobs), max(j.world_size for j in jobs)
(34, 2, 512)
"""

from __future__ import annotations

from prism_analytic.traces.synth_job import Law, SynthJob

__all__ = ["acceptance_jobs", "ACCEPTANCE_LAYOUTS"]

_IL = {"schedule": "interleaved"}

#: (name, layout fields) of the suite.
ACCEPTANCE_LAYOUTS: tuple[tuple[str, dict], ...] = (
    ("dp2", dict(dp=2, microbatches=4)),
    ("pp2", dict(pp=2, microbatches=4)),
    ("dp4-pp2", dict(dp=4, pp=2, microbatches=4)),
    ("dp2-pp4", dict(dp=2, pp=4, microbatches=8)),
    ("dp8-pp2", dict(dp=8, pp=2, microbatches=4)),
    ("pp8", dict(pp=8, microbatches=8)),
    ("dp2-pp4-vpp2", dict(dp=2, pp=4, vpp=2, microbatches=8, **_IL)),
    ("pp4-vpp4", dict(pp=4, vpp=4, microbatches=8, **_IL)),
    ("dp2-pp2-vpp3", dict(dp=2, pp=2, vpp=3, microbatches=4, **_IL)),
    ("dp2-pp8-vpp2", dict(dp=2, pp=8, vpp=2, microbatches=16, **_IL)),
    ("dp2-pp2-tp2", dict(dp=2, pp=2, tp=2, microbatches=4)),
    ("dp2-pp2-tp4", dict(dp=2, pp=2, tp=4, microbatches=4)),
    ("pp2-tp8", dict(pp=2, tp=8, microbatches=4)),
    ("dp4-pp2-tp8-seqpar", dict(dp=4, pp=2, tp=8, sequence_parallel=True, microbatches=4)),
    ("dp2-pp2-cp2", dict(dp=2, pp=2, cp=2, microbatches=4)),
    ("dp2-pp2-tp2-cp4", dict(dp=2, pp=2, tp=2, cp=4, microbatches=4)),
    ("dp32-pp2-sp2", dict(dp=32, pp=2, sp=2, microbatches=4)),
    ("dp4-pp2-sp4", dict(dp=4, pp=2, sp=4, microbatches=4)),
    ("dp2-ep2", dict(dp=2, ep=2, microbatches=4)),
    ("dp4-pp2-ep4", dict(dp=4, pp=2, ep=4, microbatches=4)),
    ("dp8-pp2-tp2-ep8", dict(dp=8, pp=2, tp=2, ep=8, microbatches=4)),
    ("dp4-pp2-sp2-ep8", dict(dp=4, pp=2, sp=2, ep=8, microbatches=4)),
    ("dp2-pp2-tp2-cp2-ep4", dict(dp=2, pp=2, tp=2, cp=2, ep=4, microbatches=4)),
    ("dp64-pp2", dict(dp=64, pp=2, microbatches=4)),
    ("dp64-pp8", dict(dp=64, pp=8, microbatches=8)),
    ("dp16-pp4-tp8", dict(dp=16, pp=4, tp=8, microbatches=8)),
    ("dp8-pp8-tp2-cp4-vpp2", dict(dp=8, pp=8, tp=2, cp=4, vpp=2, microbatches=8, **_IL)),
    ("dp8-pp4-tp4-sp4-ep8", dict(dp=8, pp=4, tp=4, sp=4, ep=8, microbatches=4)),
    ("dp4-pp4-tp2-vpp2", dict(dp=4, pp=4, tp=2, vpp=2, microbatches=8, **_IL)),
    ("dp16-pp2-tp2-ep8-l2", dict(dp=16, pp=2, tp=2, ep=8, layers=2, microbatches=4)),
    ("dp2-pp8-tp2-vpp4", dict(dp=2, pp=8, tp=2, vpp=4, microbatches=8, **_IL)),
    ("dp32-pp4-tp4", dict(dp=32, pp=4, tp=4, microbatches=4)),
    # tied embeddings, and a last stage with the loss and output layer (1.2x compute)
    ("dp4-pp4-tied", dict(dp=4, pp=4, tied_embeddings=True, stage_scale={3: 1.2}, microbatches=4)),
    (
        "dp2-pp2-tp2-vpp2-tied",
        dict(
            dp=2,
            pp=2,
            tp=2,
            vpp=2,
            tied_embeddings=True,
            stage_scale={1: 1.2},
            microbatches=4,
            **_IL,
        ),
    ),
)


def acceptance_jobs() -> list[SynthJob]:
    """The suite's jobs, with noisy laws and, in turn, slow ranks and shared factors.

    Every third job has one slow rank (its last rank, 1.3x compute); every other job has a
    per-step factor (cv 2%) and a per-microbatch factor (cv 3%).
    """
    jobs = []
    for i, (name, layout) in enumerate(ACCEPTANCE_LAYOUTS):
        fields = dict(layout, name=name)
        world = SynthJob(**layout).world_size
        if i % 3 == 0:
            fields["slow_ranks"] = {world - 1: 1.3}
        if i % 2 == 1:
            fields["step_factor"] = Law(1.0, 0.02)
            fields["mb_factor"] = Law(1.0, 0.03)
        jobs.append(SynthJob(**fields))
    return jobs
