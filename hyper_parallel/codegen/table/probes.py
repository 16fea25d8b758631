"""The observables a field-table probe may name (framework-free; one home for the list).

Every mapping row of ``codegen/field_table.yaml`` carries a ``probe``: a non-default setting and
the observable it must move. ``tests/torch/ut/trainer/test_field_probes.py`` trains a tiny model
through the engine with and without the setting and asserts that the observable differs (for a
mapped row, also that the same setting through the legacy YAML gives the identical result). The
generator refuses a row without a valid probe, so a field that is accepted and ignored cannot
land.

A probe::

    probe: {observe: <name>, set: {<path>: <value>, ...}, base: {...}, path: <dotted>,
            expect: <text>, ranks: 1 | 2, steps: <n>}

* ``set``: the probed setting, new-tree paths (legacy paths for an ``unsupported`` row); it must
  set the row's own field. Values may name a test fixture as ``'{name}'`` (a file, a checkpoint,
  a spec the test makes).
* ``base``: settings both runs share (a field that only acts together with another).
* ``path``: the attribute of the built trainer that ``attribute`` reads.
* ``expect``: the text the error of a ``refused`` setting (a ``ConfigError``) or the ``outcome``
  of a probed run must contain.
* ``ranks``: 2 for layout fields (run under torchrun, gloo) and for what needs a peer
  (:data:`TWO_RANK_OBSERVABLES`); ``steps``: 0 builds only.

A probe cannot pass by accident: every run it observes must build and train to its end (a crash
would move nearly any observable), unless it observes that failure (``refused``, ``outcome``),
which must then be the one ``expect`` names. An observable reads what the setting does (what
torch built or ran, what the run wrote), never the configured value back.
"""

from __future__ import annotations

OBSERVABLES: dict[str, str] = {
    "loss": "the per-step losses",
    "lr": "the learning rate of every step",
    "steps": "the steps that ran",
    "requires_grad": "the names of the trainable parameters",
    "params": "the model's parameter names and shapes",
    "modules": "the module types of the model (wrappers included)",
    "optimizer": "the optimizer class and its parameter groups (hyperparameters, members)",
    "files": "the files the run wrote (names with digits masked)",
    "jsonl": "the records of metrics.jsonl (steps and keys)",
    "eval_loss": "the validation losses in metrics.jsonl",
    "tensorboard": "the steps of the TensorBoard scalars",
    "trace_steps": "the profiler steps recorded in the trace",
    "log": "the log messages (numbers masked)",
    "attribute": "an attribute of the built trainer (probe.path)",
    "refused": "building or training stops with a ConfigError containing probe.expect",
    "outcome": "the error training ends with (or none); the probed one contains probe.expect",
    "fsdp": "the FSDP settings of the wrapped modules (resharding, mixed precision, offload, "
            "prefetching)",
    "checkpointed": "which decoder layers are wrapped for activation checkpointing",
    "determinism": "torch's deterministic-algorithms switches while training",
    "compiled": "which parts were compiled (decoder layers, the loss)",
    "mesh": "the device mesh and the parameters' placements (2 ranks)",
    "backend": "per device type, the backend class of the job's default process group, as "
               "torch holds it",
    "timeout": "how long a collective that a peer never joins takes to fail (2 ranks)",
    "forwards": "the rows of every forward call of each model part",
    "schedule": "the pipeline schedule torch built: its class, its micro-batches, its stages",
    "stages": "the pipeline units each of this rank's stage modules holds",
    "collectives": "the functional collectives issued while training, by kind",
    "fsdp_reductions": "how many gradient reduce-scatters torch.distributed ran while training "
                       "(FSDP reduces each unit's gradients with one)",
    "flops_per_token": "the FLOPs per token the records' TFLOPS stand for",
}

#: The observables that need a peer that does something else (run by the two-rank job only).
TWO_RANK_OBSERVABLES = ("timeout",)

#: The observables that are a failure, so the probe names it (``expect``).
EXPECTING_OBSERVABLES = ("refused", "outcome")

PROBE_KEYS = ("observe", "set", "base", "path", "expect", "ranks", "steps")

__all__ = ["EXPECTING_OBSERVABLES", "OBSERVABLES", "PROBE_KEYS", "TWO_RANK_OBSERVABLES"]
