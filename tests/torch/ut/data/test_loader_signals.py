"""A loader worker and a scheduler's stop: Slurm signals every process of a job step, loader
workers included (``tests/slurm/``); the rank decides when to stop, so its loader keeps
delivering after its workers got SIGTERM."""

from __future__ import annotations

import multiprocessing
import os
import signal

from hyper_parallel.data import DummyDataset
from hyper_parallel.data.loader import build_dataloader


def test_a_sigterm_to_the_loader_workers_leaves_the_loader_delivering():
    loader = build_dataloader(DummyDataset(16, 4, 50), dp_rank=0, dp_size=1, micro_batch_size=2,
                              shuffle=False, num_workers=1)
    # Only the loader's own: the test process may hold other children (a preflight pool kept
    # across calls, its depth helper), which no loader signal is about.
    others = {child.pid for child in multiprocessing.active_children()}
    batches = iter(loader)
    first = next(batches)
    workers = [w for w in multiprocessing.active_children() if w.pid not in others]
    assert workers, "no loader worker process"
    for worker in workers:
        os.kill(worker.pid, signal.SIGTERM)
    for worker in workers:
        worker.join(timeout=2)  # returns at once for a worker the signal killed
        assert worker.is_alive(), f"the loader worker ended: exit code {worker.exitcode}"
    rest = list(batches)
    assert len(rest) == 7 and not torch_equal(rest[0], first)


def torch_equal(a: dict, b: dict) -> bool:
    return all(bool((a[key] == b[key]).all()) for key in a)
