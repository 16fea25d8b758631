"""torchrun worker: many training cases in one job, one process group.

    torchrun --nproc_per_node N tests/helpers/case_worker.py PLAN.json

``PLAN.json`` is ``{"cases": [{"argv": [...], "out": DIR, "params": true, "degrees": [...],
"pythonpath": [...]}, ...]}``. Each case
is a command line of either world -- a legacy YAML and its overrides, or ``--module M --config
F ...`` -- built with :func:`hyper_parallel.train.build_trainer`, the function the entries
call, trained, and recorded in ``DIR/case.json`` by rank 0: the loss and the gradient norm of
every step, the run's checkpoint folder, the parallel degrees it ran on, and (``params``) the final parameters gathered to full
tensors in ``DIR/params.safetensors``. A case refused while it is built (a ``ConfigError`` or a
``RecipeError``, the same on every rank) records its message and the job goes on; any other
error ends the job, as it would end a training run.

The process group is formed once and kept: every trainer of the job builds its mesh on it, and
is dropped before the next one is built. The start-up of a torchrun job (seconds of imports and
rendezvous on the CI machine) is paid once per job instead of once per case.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path


class _StepRecorder:
    """A trainer callback keeping ``(step, loss, grad_norm)`` of every optimizer step."""

    def __init__(self, trainer) -> None:
        from hyper_parallel.runtime.callbacks.base import Callback

        self.steps: list[tuple[int, float, float | None]] = []
        recorder = self

        class Record(Callback):
            def on_step_end(self, loss: float, grad_norm: float | None) -> None:
                norm = None if grad_norm is None else float(grad_norm)
                recorder.steps.append((self.trainer.state.global_step, float(loss), norm))

        trainer.add_callback(Record(trainer))


def _gather_stage_states(state: dict, group) -> dict:
    """The pipeline stages' full state dicts merged on the first rank of ``group`` (empty
    elsewhere; collective). For comparing small test models only: it pickles every tensor of a
    stage through ``gather_object``, so the first rank holds the whole model."""
    import torch.distributed as dist

    local = {k: v.detach().cpu() for k, v in state.items()}
    first = dist.get_group_rank(group, dist.get_rank()) == 0
    gathered = [None] * dist.get_world_size(group) if first else None
    dist.gather_object(local, gathered, group=group, group_dst=0)
    merged: dict = {}
    for stage_state in gathered or []:
        merged.update(stage_state)
    return merged


def _full_parameters(trainer) -> dict:
    """Every parameter and buffer of the model as a full tensor on the CPU (DTensor shards
    gathered; under pipeline parallelism every stage's, on the first rank of each pipeline);
    the names are the checkpoint's (no wrapper prefixes)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    pipeline = trainer.pipeline
    state = {}
    for part in trainer.model_parts:
        state.update(get_model_state_dict(part, options=StateDictOptions(
            full_state_dict=True, cpu_offload=pipeline is None)))
    if pipeline is not None:
        state = _gather_stage_states(state, pipeline.group)
    # A copy of each: tied weights share storage, which safetensors refuses to write twice.
    return {name: tensor.detach().clone().contiguous() for name, tensor in state.items()}


def _collect_and_freeze() -> None:
    """Free what the last case left, then move every object still alive (the imported modules,
    their caches) to the collector's permanent generation: a full collection -- this worker's
    after each case, a trainer's ``GCCallback`` every ``gc_freq`` steps -- then walks only what
    the next case makes, not the ~300k objects of torch and the imports (0.2 CPU seconds a
    collection). What is frozen stays alive as it would have; no tensor value changes."""
    gc.collect()
    gc.freeze()


def run_case(case: dict, rank: int) -> None:
    import torch

    from hyper_parallel.config.recipes import RecipeError
    from hyper_parallel.train import build_trainer
    from hyper_parallel.utils.errors import ConfigError

    out = Path(case["out"])
    started, cpu_started = time.perf_counter(), time.process_time()
    result: dict = {"error": None, "steps": [], "losses": [], "grad_norms": [],
                    "checkpoint_folder": None, "degrees": None}
    sys.path[:0] = case["pythonpath"]  # where the case's recipe module lives
    try:
        trainer = build_trainer(case["argv"])
    except (ConfigError, RecipeError) as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        trainer = None
    finally:
        del sys.path[:len(case["pythonpath"])]
    if trainer is not None:
        dims = trainer.parallel_dims
        result["degrees"] = {name: getattr(dims, name) for name in case["degrees"]}
        recorder = _StepRecorder(trainer)
        trainer.train()
        result["steps"] = [step for step, _, _ in recorder.steps]
        result["losses"] = [loss for _, loss, _ in recorder.steps]
        result["grad_norms"] = [norm for _, _, norm in recorder.steps]
        result["checkpoint_folder"] = str(Path(trainer.config.checkpoint.folder).resolve())
        if case.get("params"):
            from safetensors.torch import save_file

            tensors = _full_parameters(trainer)
            if rank == 0:
                out.mkdir(parents=True, exist_ok=True)
                save_file(tensors, str(out / "params.safetensors"))
        del trainer, recorder
    # What a case set globally must not reach the next one.
    torch.use_deterministic_algorithms(False)
    _collect_and_freeze()
    # What the case cost (rank 0's wall and CPU seconds): a slow suite is read from these.
    result["seconds"] = time.perf_counter() - started
    result["cpu_seconds"] = time.process_time() - cpu_started
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        (out / "case.json").write_text(json.dumps(result))


def main(plan_file: str) -> None:
    import torch.distributed as dist

    from hyper_parallel.utils.logging import init_logger
    from tests.helpers.numerics import apply_in_process

    apply_in_process()  # a golden case's pinned numerics, before its first tensor operation
    init_logger()
    gc.freeze()  # the imports (the fork server's and this job's) are never garbage
    plan = json.loads(Path(plan_file).read_text())
    rank = int(os.environ.get("RANK", "0"))  # torchrun's; the group forms with the first trainer
    for case in plan["cases"]:
        run_case(case, rank)
        if dist.is_initialized():
            dist.barrier()  # rank 0's files are written before any rank builds the next case
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    main(sys.argv[1])
    exit_now(0)
