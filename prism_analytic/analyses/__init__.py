"""The questions users ask of a job, each a module with a function and a ``prism`` command.

* :mod:`.runtime` (with :mod:`.interruptions`, :mod:`.allocation`): the time of a run of M steps
  and its guarantee, with failures, checkpoints and fail-slow episodes;
* :mod:`.slowdown`: P(step slower than the no-variability step by a threshold) vs scale;
* :mod:`.placement`: where K slow GPUs hurt least;
* :mod:`.sensitivity` (with :mod:`.symbolic`, :mod:`.perturb`): derivatives of the step's mean,
  p95 and std per kernel class, symbolic where a closed form exists;
* :mod:`.crossdc`: p95 step time vs inter-datacenter bandwidth and jitter.

:mod:`.decompose` splits a built step into replica body, allocation and tail for all of them.
"""
