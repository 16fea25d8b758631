"""Preflight: will a run fit the cluster it names? Answered on one CPU machine.

One process simulates one rank of each distinct *role* of the job at its real world size:
torch's fake process group, the real ``ParallelDims`` and mesh, the model built on ``meta``
and passed through the real parallelize / pipelining / expert- and context-parallel code, the
real optimizer, and one training step on fake tensors of the real micro-batch shape, measured
by torch's memory tracker. The parts:

* :mod:`.fake_world` -- the fake process group and tensor mode, and what they must answer;
* :mod:`.simulate` -- a role built by the engine's own methods, and measured;
* :mod:`.delta_rule` -- the Gated DeltaNet recurrence as the simulation steps it (the model's
  bytes, a fraction of its fake operators);
* :mod:`.run` -- the roles of a job, each measured and judged;
* :mod:`.gpus` -- the GPUs and the stated allowances (CUDA context, NCCL, fragmentation);
* :mod:`.flops` -- training FLOPs per token and the step-time range;
* :mod:`.suggest` -- changes that would make a role fit, each preflighted;
* :mod:`.report` -- the table and the JSON object;
* :mod:`.check` and ``__main__`` -- the command line.

``docs/preflight.md`` says what the figures include and what they cannot.
"""
