"""Kernel-launch cost and CUDA graphs in the mean model (``training.kernel_launch_s``)."""

from __future__ import annotations

import math

import pytest

from prism_analytic.workload.config import ConfigError
from prism_analytic.workload.jobs import merge_config
from prism_analytic.workload.mean_model import launch_gap_s, op_means, total_seconds
from prism_analytic.workload.presets import preset_job
from prism_analytic.workload.step_estimate import step_time


def _job(**training):
    # one GPU, no communication: the step is a chain of layer passes (hand-computable)
    base = merge_config(
        preset_job("llama3-8b", 8),
        {"parallelism": {"dp": 1, "sharding": "none"}, "model": {"seq_len": 512}},
    )
    return merge_config(base, {"training": training}) if training else base


def test_default_is_off_and_keeps_answers():
    base = _job()
    assert base.training.kernel_launch_s == 0.0 and not base.training.cuda_graphs
    assert base.training.launch_s_per_kernel == 0.0
    graphs = _job(cuda_graphs=True)  # nothing to save while launches are not modelled
    assert op_means(graphs) == op_means(base)
    assert step_time(graphs).step_s == step_time(base).step_s


def test_cpu_bound_pass_lasts_its_launches():
    base, launch = _job(), 1e-3  # 1 ms a launch: every pass is CPU-bound
    slow = _job(kernel_launch_s=launch)
    om0, om1 = op_means(base), op_means(slow)
    for a, b in ((om0.layer_fwd, om1.layer_fwd), (om0.layer_bwd, om1.layer_bwd)):
        kernels = sum(o.count for o in a)
        assert total_seconds(a) < kernels * launch
        assert total_seconds(b) == pytest.approx(kernels * launch, rel=1e-12)
        assert launch_gap_s(slow, a) == pytest.approx(kernels * launch - total_seconds(a))
        # the gap goes to the compute kernels; communication keeps its time
        assert [o.seconds for o in a if o.kind != "compute"] == [
            o.seconds for o in b if o.kind != "compute"
        ]


def test_step_grows_by_the_hand_computed_gaps_and_graphs_remove_them():
    base = _job()
    slow = _job(kernel_launch_s=1e-3)
    om = op_means(base)
    m, layers = base.parallelism.microbatches, base.model.layers
    gaps = layers * (launch_gap_s(slow, om.layer_fwd) + launch_gap_s(slow, om.layer_bwd))
    for passes in (om.embedding_fwd, om.embedding_bwd, om.head_fwd, om.head_bwd):
        gaps += launch_gap_s(slow, passes)
    delta = step_time(slow).step_s - step_time(base).step_s
    assert delta == pytest.approx(m * gaps, rel=1e-9)
    # replayed from a graph at 1 us a kernel, every pass is GPU-bound again
    graphs = _job(kernel_launch_s=1e-3, cuda_graphs=True, cuda_graph_kernel_s=1e-6)
    assert step_time(graphs).step_s == pytest.approx(step_time(base).step_s, rel=1e-12)
    # partly launch-bound in the graph: the remaining gap is the graph's own launches
    partial = _job(kernel_launch_s=1e-3, cuda_graphs=True, cuda_graph_kernel_s=5e-4)
    assert step_time(base).step_s < step_time(partial).step_s < step_time(slow).step_s


def test_measured_launch_size_does_not_bind_on_presets():
    # 3.25 us a launch (CUDA.jl's measurement): the README job's passes stay GPU-bound
    job = merge_config(preset_job("llama3-405b", 16384), {"training": {"kernel_launch_s": 3.25e-6}})
    assert step_time(job).step_s == step_time(preset_job("llama3-405b", 16384)).step_s


@pytest.mark.parametrize(
    ("training", "key"),
    [
        ({"kernel_launch_s": -1e-6}, "training.kernel_launch_s"),
        ({"kernel_launch_s": math.inf}, "training.kernel_launch_s"),
        ({"cuda_graphs": "yes"}, "training.cuda_graphs"),
        ({"cuda_graph_kernel_s": -1.0}, "training.cuda_graph_kernel_s"),
        ({"kernel_launch_s": 1e-6, "cuda_graph_kernel_s": 2e-6}, "training.cuda_graph_kernel_s"),
    ],
)
def test_bad_values_name_the_key(training, key):
    with pytest.raises(ConfigError) as err:
        _job(**training)
    assert err.value.key == key
