"""A small discrete-event simulator of a GPipe step, independent of the library's replay.

Each (dp rank, stage) runs its ops in order; compute ops start when the rank is free;
a pipeline send/recv pair is a rendezvous (starts when both sides are there, one shared
transfer time); the grads reduce-scatter of one stage waits for all its data-parallel ranks.
It writes the per-op schema of the straggler traces, so the readers and the structure
recovery can be tested against a known truth.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def make_trace(
    *,
    dp=2,
    pp=3,
    microbatches=4,
    steps=30,
    slow=None,
    mb_sd=0.0,
    noise_sd=0.01,
    seed=0,
    gap=1e-4,
    hidden=None,
):
    """Simulate ``steps`` steps; returns (frame, step_times).

    ``hidden=(waiter, anchor, lag)``: the optimizer of rank ``waiter`` (dp, stage) cannot start
    before rank ``anchor`` finished its last backward compute plus ``lag`` seconds: a wait on
    an event the trace does not record.
    """
    rng = np.random.default_rng(seed)
    rows, times = [], []
    for step in range(steps):
        mb = (
            rng.normal(0.0, mb_sd, size=(dp, microbatches))
            if mb_sd
            else np.zeros((dp, microbatches))
        )
        ops = {}
        for d in range(dp):
            for s in range(pp):
                seq = []
                for m in range(microbatches):
                    if s > 0:
                        seq.append(("forward-recv", m, None))
                    seq.append(("forward-compute", m, 0.010 * (1 + 0.5 * (s == pp - 1))))
                    if s < pp - 1:
                        seq.append(("forward-send", m, None))
                for m in range(microbatches):
                    if s < pp - 1:
                        seq.append(("backward-recv", m, None))
                    seq.append(("backward-compute", m, 0.020 * (1 + 0.5 * (s == pp - 1))))
                    if s > 0:
                        seq.append(("backward-send", m, None))
                seq.append(("grads-reduce-scatter", -1, None))
                seq.append(("optimizer", -1, 0.005))
                ops[(d, s)] = seq
        clock = {k: 0.0 for k in ops}
        ptr = {k: 0 for k in ops}
        counters = {}
        released = {}
        done = False
        while not done:
            progressed = False
            for key, seq in ops.items():
                if ptr[key] >= len(seq):
                    continue
                d, s = key
                name, m, base = seq[ptr[key]]
                if base is not None:
                    floor = 0.0
                    if hidden is not None and key == hidden[0] and name == "optimizer":
                        if "t" not in released:
                            continue
                        floor = released["t"] + hidden[2]
                    factor = 1.0
                    if slow is not None and slow[0] == key:
                        factor = slow[1]
                    dur = base * factor * np.exp(mb[d, m] * (m >= 0) + rng.normal(0, noise_sd))
                    start = max(clock[key] + gap, floor)
                    rows.append((d, s, step, name, start, dur, m, key, counters))
                    clock[key] = start + dur
                    last_b = name == "backward-compute" and m == microbatches - 1
                    if hidden is not None and key == hidden[1] and last_b:
                        released["t"] = clock[key]
                    ptr[key] += 1
                    progressed = True
                    continue
                peers = _peers(name, m, d, s, pp, dp)
                if all(ptr[p] < len(ops[p]) and ops[p][ptr[p]][:2] == pn for p, pn in peers):
                    members = [(key, (name, m))] + peers
                    start = max(clock[k] + gap for k, _ in members)
                    t = 0.002 if name == "grads-reduce-scatter" else 0.0005
                    t *= np.exp(rng.normal(0, noise_sd))
                    for k, (nm, mm) in members:
                        rows.append(
                            (
                                k[0],
                                k[1],
                                step,
                                nm,
                                clock[k] + gap,
                                start + t - clock[k] - gap,
                                mm,
                                k,
                                counters,
                            )
                        )
                        clock[k] = start + t
                        ptr[k] += 1
                    progressed = True
            done = all(ptr[k] >= len(ops[k]) for k in ops)
            if not progressed and not done:
                raise RuntimeError("synthetic schedule deadlocked")
        times.append(max(clock.values()))
    frame = pd.DataFrame(
        [r[:7] for r in rows],
        columns=["dp_rank", "stage", "step", "optype", "start_ts", "duration", "mb_id"],
    )
    frame["rank"] = frame["dp_rank"] * pp + frame["stage"]
    frame["seq_id"] = frame.sort_values("start_ts").groupby(["rank", "step", "optype"]).cumcount()
    frame["mc"] = np.where(frame["optype"].str.endswith("compute"), 0, -1)
    frame["gmc"] = np.where(frame["optype"].str.endswith("compute"), frame["stage"], -1)
    frame.loc[~frame["optype"].str.endswith("compute"), "mb_id"] = -1
    offsets = np.arange(steps) * 10.0
    frame["start_ts"] = frame["start_ts"] + offsets[frame["step"].to_numpy()]
    return frame, np.array(times)


def _peers(name, m, d, s, pp, dp):
    if name == "forward-send":
        return [((d, s + 1), ("forward-recv", m))]
    if name == "forward-recv":
        return [((d, s - 1), ("forward-send", m))]
    if name == "backward-send":
        return [((d, s - 1), ("backward-recv", m))]
    if name == "backward-recv":
        return [((d, s + 1), ("backward-send", m))]
    return [((o, s), ("grads-reduce-scatter", -1)) for o in range(dp) if o != d]
