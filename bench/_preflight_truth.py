"""What a real training step of a layout holds, on CPU ranks with gloo: the ground truth that
preflight's figures are held against (``bench/bench_preflight.py``, ``tests/preflight``).

    torchrun --nproc_per_node N bench/_preflight_truth.py OUT.json --module M --config C [...]

Each rank builds the run with the engine's own build steps on real tensors (preflight's
``RoleBuild``, on ``cpu``), takes one warm-up step on its real micro-batch (random tokens),
then a second step under ``torch.profiler`` with ``profile_memory=True``: the allocator's total
at every allocation and free it records ("Total Allocated"), an independent measure of the
step's peak. Rank 0 writes, for every rank: its parameters', gradients' and optimizer state's
bytes (after the steps) and the step's peak above what the rank held before it.
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
    import torch
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
    del torch
    return max(totals) - totals[0] if totals else 0


def main(argv: list[str]) -> int:
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

    out, args = argv[0], argv[1:]
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

    build.train_step([batch()])
    build.optimizer.zero_grad(set_to_none=True)
    real = batch()
    peak = _profiled_peak(lambda: build.train_step([real]))
    params, grads = parameter_bytes(build)
    mine = {"rank": dist.get_rank(), "params_bytes": params, "grads_bytes": grads,
            "optimizer_bytes": optimizer_bytes(build), "step_peak_bytes": peak}
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump(everyone, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
