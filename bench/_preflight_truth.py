"""What a real training step of a layout holds, on CPU ranks with gloo: the ground truth that
preflight's figures are held against (``bench/bench_preflight.py``, ``tests/torch/st/preflight``).

    torchrun --nproc_per_node N bench/_preflight_truth.py OUT.json --module M --config C [...] \
        [--next --module M --config C [...] ...]

Each rank builds the run with the engine's own build steps on real tensors (preflight's
``RoleBuild``, on ``cpu``) and takes a warm-up step, then two steps under ``torch.profiler``
with ``profile_memory=True``, each step all of the run's gradient-accumulation micro-batches
(random tokens, each its own, as the data loader gives them): the allocator's total at every
allocation and free it records ("Total Allocated"), an independent measure of the step's
peak (the lower of the two). Rank 0 writes, for every rank: its parameters', gradients' and
optimizer state's bytes (after the steps), the step's peak above what the rank held before
it and its micro-batches; one list per layout (``--next`` separates them: one launch
measures several layouts of its world size, in one process group).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile

os.environ.setdefault("HYPER_PARALLEL_PLATFORM", "torch")


def _profiled_peak(step) -> int:
    """The highest allocator total the profiler recorded during ``step()``, above the total
    at its start."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    with tempfile.NamedTemporaryFile(suffix=".json") as trace:
        prof.export_chrome_trace(trace.name)
        with open(trace.name) as f:
            events = json.load(f)["traceEvents"]
    memory = [e for e in events if e.get("name") == "[memory]"]
    memory.sort(key=lambda e: (e["ts"], e.get("id", 0)))
    totals = [int(e["args"]["Total Allocated"]) - int(e["args"]["Bytes"]) for e in memory[:1]]
    totals += [int(e["args"]["Total Allocated"]) for e in memory]
    return max(totals) - totals[0] if totals else 0


def measure(args: list[str]) -> list[dict]:
    """Every rank's figures for one layout (see the module docstring)."""
    import torch
    import torch.distributed as dist

    from hyper_parallel.config.manager import ConfigManager
    from hyper_parallel.preflight.simulate import (
        RoleBuild,
        _micro_batch,
        optimizer_bytes,
        parameter_bytes,
    )
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    config = ConfigManager(root_type=HyperTrainer.Config).parse_args(args)
    config = dataclasses.replace(
        config, training=dataclasses.replace(config.training, init_device="meta"))
    build = RoleBuild(config)
    build.parallelize()
    torch.manual_seed(1234 + dist.get_rank())
    vocab = build.model_config.vocab_size

    def batch() -> dict:
        mb = _micro_batch(build)
        ids = torch.randint(0, vocab, mb["input_ids"].shape)
        return {**mb, "input_ids": ids, "labels": ids.clone()}

    # The warm-up step runs the run's micro-batches too: a pipeline's stages fix the shapes
    # of their first step.
    build.train_step([batch() for _ in range(build.grad_accum)])
    build.optimizer.zero_grad(set_to_none=True)
    real = [batch() for _ in range(build.grad_accum)]
    # The lower of two profiled steps: an asynchronous gloo collective's buffers are freed
    # when its work is waited on, which moves a step's peak by a few percent from run to run.
    peak = min(_profiled_peak(lambda: build.train_step(real)) for _ in range(2))
    params, grads = parameter_bytes(build)
    mine = {"rank": dist.get_rank(), "params_bytes": params, "grads_bytes": grads,
            "optimizer_bytes": optimizer_bytes(build), "step_peak_bytes": peak,
            "micro_batches": len(real)}
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    return everyone


def main(argv: list[str]) -> int:
    out, rest = argv[0], argv[1:]
    layouts: list[list[str]] = [[]]
    for arg in rest:
        if arg == "--next":
            layouts.append([])
        else:
            layouts[-1].append(arg)
    results = [measure(args) for args in layouts]
    import torch.distributed as dist

    dist.destroy_process_group()
    if int(os.environ.get("RANK", "0")) == 0:
        with open(out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    from hyper_parallel.utils.process import exit_now

    # Finalization after destroy_process_group can abort with "terminate called without an
    # active exception" (gloo and the profiler's threads) and turn a finished measurement into
    # a failed torchrun job: seen under a loaded suite (2 runs of 6 here).
    exit_now(code)
