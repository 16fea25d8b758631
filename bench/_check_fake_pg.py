"""Check (e): one real trainer step of a many-rank layout on this one device, the other ranks a
fake process group -- the memory one rank of that job really uses.

``torch.distributed.init_process_group("fake", rank=0, world_size=8, store=FakeStore())``
before the trainer is built (the trainer then keeps that group: ``runtime/distributed.
init_process_group``): the device mesh, FSDP's sharding and the expert-parallel split are
those of rank 0 of 8, every collective returns at once without moving data. So the rank's
parameters, gradients, optimizer state, all-gathered layers and activations are the real
sizes, on the real device, through ``build_trainer`` (the entry points' own function) and
``HyperTrainer.train_step``; the values are not (an all-gather's output is whatever its buffer
held), so the losses are printed, never compared.

One exchange carries data the trainer needs: expert parallelism's per-expert row counts (the
all-to-all sizes the token exchange). Under the fake group it is replaced for this process by
a copy of what this rank sends (:func:`_balanced_counts`): every rank receives as many rows for
its experts as it sends to each -- a balanced router's traffic.

Reported per layout, after the build and after each of 2 steps (the second has the optimizer
state): ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` (GiB, peaks since the
previous mark) and the parameter bytes of the rank; and preflight's prediction for the same
rank (:mod:`hyper_parallel.preflight`, computed first, on the CPU), which the second step's
allocated peak must be within :data:`PREFLIGHT_BOUND` of. On the CPU (the dry run) the layouts'
debug-sized versions run the same code and report the process's peak RSS instead.
"""

from __future__ import annotations

import contextlib
import resource
import shutil
import tempfile

from _check_common import Report

WORLD = 8
#: name -> (module, recipe, overrides) on CUDA, and the CPU form's overrides.
LAYOUTS = {
    "fsdp8_0_8b": ("qwen3_5_v2", "qwen3_5_v2_0_8b",
                   ["--parallelism.data_parallel_shard_degree", "8",
                    "--dataloader.dataset", "dummy"]),
    "ep8_moe_debugmodel": ("qwen3_5_moe", "qwen3_5_moe_debugmodel",
                           ["--parallelism.expert_parallel_degree", "8",
                            "--training.local_batch_size", "8",
                            "--training.global_batch_size", "8"]),
}
#: On the CPU: the FSDP 8 layout on the debug flavor (the 0.8b's 3 GB of weights would be
#: most of the dry run), both at 32 tokens.
CPU_FORM = {
    "fsdp8_0_8b": ("qwen3_5_v2", "qwen3_5_v2_debugmodel",
                   ["--parallelism.data_parallel_shard_degree", "8",
                    "--training.local_batch_size", "1", "--training.global_batch_size", "8",
                    "--dataloader.dataset", "dummy", "--training.seq_len", "32"]),
    "ep8_moe_debugmodel": ("qwen3_5_moe", "qwen3_5_moe_debugmodel",
                           [*LAYOUTS["ep8_moe_debugmodel"][2], "--training.seq_len", "32"]),
}
STEPS = 2
GIB = 2**30
#: How far the step's real allocated peak on the GPU may be from preflight's (which steps the
#: torch kernel path on the CPU: the fla kernels' own workspaces are not in it).
PREFLIGHT_BOUND = 0.2


@contextlib.contextmanager
def _balanced_counts():
    """``dist.all_to_all_single`` on a fake group copies its input into its output (same
    sizes): the per-expert counts a balanced exchange would bring back."""
    import torch.distributed as dist

    original = dist.all_to_all_single

    def all_to_all_single(output, input, *args, group=None, **kwargs):
        backend = dist.get_backend(group)
        if backend == "fake" and output.shape == input.shape:
            output.copy_(input)
            return None
        return original(output, input, *args, group=group, **kwargs)

    dist.all_to_all_single = all_to_all_single
    try:
        yield
    finally:
        dist.all_to_all_single = original


@contextlib.contextmanager
def fake_world(world: int):
    """This process as rank 0 of ``world`` ranks, the others a fake process group (every
    collective returns at once; expert parallelism's counts a balanced exchange's), the group
    destroyed at the end. A trainer built inside keeps that group."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())
    try:
        with _balanced_counts():
            yield
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _memory(device: str) -> dict:
    """The peaks since the last mark (CUDA), or the process's peak RSS (CPU)."""
    import torch

    if device != "cuda":
        return {"peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                      * 1024 / GIB, 3)}
    torch.cuda.synchronize()
    out = {"max_memory_allocated_gib": round(torch.cuda.max_memory_allocated() / GIB, 3),
           "max_memory_reserved_gib": round(torch.cuda.max_memory_reserved() / GIB, 3),
           "memory_allocated_gib": round(torch.cuda.memory_allocated() / GIB, 3)}
    torch.cuda.reset_peak_memory_stats()
    return out


def _param_bytes(model) -> int:
    """Bytes of the parameters this rank holds (an FSDP / EP shard: its local tensor)."""
    total = 0
    for p in model.parameters():
        local = p.to_local() if hasattr(p, "to_local") else p
        total += local.numel() * local.element_size()
    return total


def check_fake_pg(report: Report, device: str, layout: str | None = None) -> None:
    import torch

    from hyper_parallel.train import build_trainer

    if layout is None:
        raise ValueError(f"fake_pg needs --layout, one of {', '.join(LAYOUTS)}")
    module, recipe, overrides = (LAYOUTS if device == "cuda" else CPU_FORM)[layout]
    part = f"{layout} (rank 0 of {WORLD})"
    report.notes.append("a fake process group: the memory is real, the values are not "
                        "(losses printed, never compared)")
    figures = report.part(part)
    figures["recipe"] = f"--module {module} --config {recipe} {' '.join(overrides)}"
    folder = tempfile.mkdtemp(prefix="gpu-check-fake-pg-")
    argv = ["--module", module, "--config", recipe, *overrides, "--training.steps", str(STEPS),
            "--checkpoint.interval", "0", "--checkpoint.folder", folder,
            "--metrics.log_freq", "1000000"]
    predicted = _preflight(argv, figures)  # before this process joins the fake group
    try:
        with fake_world(WORLD):
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            trainer = build_trainer(argv)
            dims = trainer.dist.parallel_dims
            figures["layout"] = dims.summary()
            report.require(part, f"a {WORLD}-rank layout", dims.world_size == WORLD,
                           dims.summary())
            figures["device"] = str(trainer.device)
            figures["param_bytes_rank"] = _param_bytes(trainer.model)
            figures["after_build"] = _memory(device)
            batches = trainer._micro_batch_iterator()
            figures["losses_not_compared"] = []
            for step in range(1, STEPS + 1):
                trainer.state.global_step += 1
                result = trainer.train_step(next(batches))
                figures["losses_not_compared"].append(result.loss)
                figures[f"after_step_{step}"] = _memory(device)
        if device == "cuda":
            # The second step holds the optimizer state: the step preflight predicts.
            measured = figures[f"after_step_{STEPS}"]["max_memory_allocated_gib"]
            ratio = measured / predicted
            figures["measured_over_preflight"] = round(ratio, 3)
            report.require(part, f"the step's allocated peak within {PREFLIGHT_BOUND:.0%} of "
                           "preflight's prediction", abs(ratio - 1) <= PREFLIGHT_BOUND,
                           f"{measured:.3f} GiB measured, {predicted:.3f} GiB predicted")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _preflight(argv: list[str], figures: dict) -> float:
    """Preflight's prediction for rank 0 of the same run (GiB allocated at the step's peak:
    its parameters, gradients, optimizer state, buffers and activations, no allowances), and
    its figures into ``figures``."""
    from hyper_parallel.preflight.gpus import GPUS
    from hyper_parallel.preflight.run import preflight
    from hyper_parallel.train import parse_run

    report = preflight(parse_run(argv).config, GPUS["h200"], world=WORLD)
    memory = report.roles[0].memory
    figures["preflight"] = {
        "allocated_gib": round(memory.allocated_bytes / GIB, 3),
        "with_allowances_gib": round(report.roles[0].total_bytes / GIB, 3),
        "depth": memory.depth, "seconds": round(report.seconds, 1)}
    return memory.allocated_bytes / GIB


__all__ = ["LAYOUTS", "check_fake_pg", "fake_world"]
