"""What a real training step of a layout holds, on CPU ranks with gloo: the ground truth that
preflight's figures are held against (``bench/bench_preflight.py``, ``tests/torch/st/preflight``).

    torchrun --nproc_per_node N bench/_preflight_truth.py OUT.json --module M --config C [...] \
        [--next --module M --config C [...] ...]

Each rank builds the run with the engine's own build steps on real tensors (preflight's
``RoleBuild``, on ``cpu``) and takes a warm-up step, then two steps under ``torch.profiler``
with ``profile_memory=True``, each step all of the run's gradient-accumulation micro-batches
(random tokens, each its own, as the data loader gives them): the bytes live at once, from
every allocation and free the profiler records, an independent measure of the step's peak
(the lower of the two) -- the step's own tensors, without gloo's (:func:`step_peak_of_trace`:
what NCCL would not allocate, and frees the profiler misses). Rank 0 writes, for every rank:
its parameters', gradients' and optimizer state's bytes (after the steps), the step's peak
above what the rank held before it (and, for the record, the peak of the profiler's running
total, which counts gloo's buffers and misses some of their frees) and its micro-batches;
one list per layout (``--next`` separates them: one launch measures several layouts of its
world size, in one process group).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import os
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("HYPER_PARALLEL_PLATFORM", "torch")


#: The process group's own operators (``c10d::_reduce_scatter_base_``, ``c10d::allreduce_``,
#: ...): they work in place on the caller's tensors, so what they allocate is the backend's.
BACKEND_OPERATOR = "c10d::"


#: How long a functional collective's waiter lets gloo's worker drop the work's tensors first
#: (2 ms sufficed on an idle machine; a loaded one may take a scheduler slice longer).
RELEASE_S = 0.01


@contextlib.contextmanager
def _collectives_released_first():
    """Until the block ends, each wait on a functional collective (tensor and context
    parallelism's: ``_functional_collectives.wait_tensor``, which torch's own code looks up
    by name) sleeps :data:`RELEASE_S` after the real wait, so that gloo's worker thread drops
    its reference to the work's tensors before the step's thread drops its own: the free is
    then the step's thread's, which the profiler records (see :func:`step_peak_of_trace`).
    Without it, TP 2's full-vocabulary logits, gathered for the loss, were held to the next
    use of their address in some profiled steps and not in others: 2 MB above the step's peak
    on the tiny flavor (preflight / it 0.83 where the clean steps give 1.000)."""
    from torch.distributed import _functional_collectives as funcol

    wait = funcol.wait_tensor

    def wait_then_yield(tensor):
        out = wait(tensor)
        time.sleep(RELEASE_S)
        return out

    funcol.wait_tensor = wait_then_yield
    try:
        yield
    finally:
        funcol.wait_tensor = wait


def _profiled_peak(step) -> tuple[int, int]:
    """The step's peak (:func:`step_peak_of_trace`) and, for the record, the peak of the
    profiler's running allocator total above its start, which it overstates (see there)."""
    import threading

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof, \
            _collectives_released_first():
        step()
    with tempfile.NamedTemporaryFile(suffix=".json") as trace:
        prof.export_chrome_trace(trace.name)
        with open(trace.name) as f:
            events = json.load(f)["traceEvents"]
    memory = [e for e in events if e.get("name") == "[memory]"]
    memory.sort(key=lambda e: (e["ts"], e.get("id", 0)))
    totals = [int(e["args"]["Total Allocated"]) - int(e["args"]["Bytes"]) for e in memory[:1]]
    totals += [int(e["args"]["Total Allocated"]) for e in memory]
    total_peak = max(totals) - totals[0] if totals else 0
    return step_peak_of_trace(events, threading.get_native_id()), total_peak


def _spans(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """``intervals`` sorted and merged where they overlap (nested operators)."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def step_peak_of_trace(events: list[dict], thread: int) -> int:
    """The highest bytes live at once during a profiled step, above what was live at its
    start: the tensors the step's thread (``thread``, the trace's ``tid``) allocates and frees,
    paired by address from the profiler's ``[memory]`` events -- less the collective
    backend's own memory. Not the profiler's running total ("Total Allocated"), for two
    reasons, both measured on gloo (FSDP 2, 4 accumulation micro-batches: the total 18 MB
    higher a micro-batch, 40 % at the step's peak):

    * The profiler records a free only on a thread that is profiling. gloo's reduce-scatter
      copies its input whole (``aten::clone`` in ``c10d::_reduce_scatter_base_``, on the
      step's thread) and whichever of the step's thread and gloo's worker drops the copy last
      frees it; when it is the worker, no free is recorded and the running total keeps the
      bytes to the end of the profile (the address is soon reused: they were freed). Every
      reduce-scatter of the step may leave one, so the error grew with the micro-batches.
    * The same race for a functional collective's tensors (tensor and context parallelism):
      the step's thread waits on the work, and gloo's worker may drop its reference after
      the step's thread drops its own. :func:`_collectives_released_first` makes the step's
      thread the last to let go, so the free is recorded.
    * Those copies, gloo's all-gather staging and what its worker threads allocate are gloo's
      own: NCCL reduce-scatters and all-gathers in place in the caller's tensors (which FSDP
      allocates outside these operators and which are counted), in memory of its own that
      preflight states as an allowance. So the allocations made inside a process group's
      operator (:data:`BACKEND_OPERATOR`) and on other threads are left out.

    A block whose free is not recorded is held until its address is allocated again, else to
    the end; a free of a block allocated before the step lowers the figure (the profiler
    records those whose size it knows: blocks of an earlier profiled step)."""
    memory = [e for e in events if e.get("name") == "[memory]"]
    if not any(e.get("tid") == thread for e in memory):
        raise RuntimeError(f"the profile has no memory event of the step's thread {thread}")
    backend = _spans([(e["ts"], e["ts"] + e["dur"]) for e in events
                      if e.get("ph") == "X" and e.get("tid") == thread
                      and str(e.get("name", "")).startswith(BACKEND_OPERATOR)])
    starts = [start for start, _ in backend]

    def backends(ts: float) -> bool:
        i = bisect.bisect_right(starts, ts) - 1
        return i >= 0 and ts <= backend[i][1]

    # At one instant a free comes before an allocation (which may reuse its address).
    memory.sort(key=lambda e: (e["ts"], int(e["args"]["Bytes"]) > 0, e.get("id", 0)))
    live: dict[Any, tuple[int, bool]] = {}  # address -> (bytes, counted)
    changes: list[tuple[float, int]] = []
    for e in memory:
        nbytes, address = int(e["args"]["Bytes"]), e["args"].get("Addr")
        if nbytes > 0:
            if address in live:  # its free went unrecorded: freed before this reuse
                held, counted = live.pop(address)
                changes += [(e["ts"], -held)] if counted else []
            counted = e.get("tid") == thread and not backends(e["ts"])
            live[address] = (nbytes, counted)
            changes += [(e["ts"], nbytes)] if counted else []
        elif address in live:
            held, counted = live.pop(address)
            changes += [(e["ts"], -held)] if counted else []
        else:  # allocated before the step
            changes.append((e["ts"], nbytes))
    level = peak = 0
    for _, change in changes:
        level += change
        peak = max(peak, level)
    return peak


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
    # The lower of two profiled steps: gloo's timing moves what is live at once a little.
    peak, total_peak = min(_profiled_peak(lambda: build.train_step(real)) for _ in range(2))
    params, grads = parameter_bytes(build)
    mine = {"rank": dist.get_rank(), "params_bytes": params, "grads_bytes": grads,
            "optimizer_bytes": optimizer_bytes(build), "step_peak_bytes": peak,
            "profiler_total_peak_bytes": total_peak, "micro_batches": len(real)}
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
