"""Preflight several configurations at once: a converted fleet, the shipped recipes.

Configurations whose simulations are the same (:func:`~.simulate.simulation_key`: variants that
differ only in data, checkpoints, metrics, paths, learning rate, seed or length) at the same
world are preflighted once. The distinct ones run side by side, one process each (a process
holds one process group, and each simulation makes its own), as many as the machine has cores:
this one and spawned workers. The workers are kept while this process lives (:func:`_pool`):
a fresh interpreter spends seconds importing torch and the engine, and a caller that
preflights in rounds (the planner, the shipped-recipes test) would pay that every round.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import multiprocessing
import os
import threading
from collections.abc import Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from hyper_parallel.preflight.check import preflight_config
from hyper_parallel.preflight.gpus import Gpu
from hyper_parallel.preflight.run import (
    Preflight,
    as_pool_worker,
    mark_pool_worker,
    quiet,
    share_helper,
)
from hyper_parallel.preflight.simulate import simulation_key
from hyper_parallel.utils.errors import ConfigError


def preflight_many(configs: Sequence[Any], gpu: Gpu, *, worlds: Sequence[int | None] = (),
                   imbalance: float | None = None, suggest: bool = True,
                   workers: int | None = None, work: bool = False, quiet: bool = False
                   ) -> list[Preflight | ConfigError]:
    """The preflight of each ``HyperTrainer.Config`` of ``configs``, in order, at its world in
    ``worlds`` (None or missing: its degrees'); a configuration error is that configuration's
    result (the others still run: every problem at once). ``work``: each role also records
    its step's work (``Role.work``, for the planner). ``quiet``: the engine's and torch's
    warnings while they simulate are not printed (:func:`~.run.quiet`)."""
    worlds = list(worlds) + [None] * (len(configs) - len(worlds))
    keys = [(simulation_key(config), world) for config, world in zip(configs, worlds)]
    distinct: dict[tuple[str, int | None], int] = {}
    for index, key in enumerate(keys):
        distinct.setdefault(key, index)
    jobs = list(distinct.values())
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    done = _run_jobs(jobs, workers, lambda index: (configs[index], worlds[index], gpu,
                                                   imbalance, suggest, work, quiet))
    return [done[distinct[key]] for key in keys]


def _run_jobs(jobs: list[int], workers: int, arguments: Any) -> dict[int, Any]:
    """``{job: _one(*arguments(job))}``, ``workers`` at a time: this process is one of them
    (it has imported everything already; a spawned worker spends seconds importing torch and
    the engine), the others a pool of spawned processes, each taking the next job as it ends
    one."""
    pending = list(reversed(jobs))
    done: dict[int, Any] = {}
    if workers == 1:
        while pending:
            index = pending.pop()
            done[index] = _one(*arguments(index))
        return done
    lock = threading.Lock()
    submitted: list[tuple[int, concurrent.futures.Future]] = []

    def next_job() -> int | None:
        with lock:
            return pending.pop() if pending else None

    pool = _pool(workers - 1)

    def submit_next(_: Any = None) -> None:
        with lock:  # taken and submitted at once: no job is out of both lists
            if not pending:
                return
            index = pending.pop()
            try:
                future = pool.submit(_one, *arguments(index))
            except BrokenProcessPool:  # a worker died: this process runs it instead
                pending.append(index)
                return
            submitted.append((index, future))
        future.add_done_callback(submit_next)

    for _ in range(workers - 1):
        submit_next()
    with as_pool_worker():  # the pool takes the other cores: no helper of its own
        while (index := next_job()) is not None:
            done[index] = _one(*arguments(index))
    with lock:
        listed = list(submitted)  # every job the pool took: none is left to take
    for index, future in listed:
        done[index] = future.result()
    return done


#: The spawned workers, kept across calls (``(size, executor)``; None before the first).
_POOL: tuple[int, concurrent.futures.ProcessPoolExecutor] | None = None


def _pool(size: int) -> concurrent.futures.ProcessPoolExecutor:
    """A pool of at least ``size`` spawned workers: the one of the last call when it is as
    large and alive (one whose worker died, or a smaller one, is shut down and replaced; a
    larger one starts no more workers than a call keeps busy); shut down when this process
    exits. A worker keeps what it imported and the roles it measured (``run._measured``) for
    the next call's jobs."""
    global _POOL
    if _POOL is not None:
        held, executor = _POOL
        if held >= size and not getattr(executor, "_broken", False):
            return executor
        executor.shutdown(wait=True, cancel_futures=True)
        _POOL = None
    executor = concurrent.futures.ProcessPoolExecutor(
        max_workers=size, mp_context=multiprocessing.get_context("spawn"),
        initializer=mark_pool_worker)
    _POOL = (size, executor)
    share_helper(executor)  # a lone simulation's deeper short build runs in a warm worker
    return executor


def start_workers(workers: int | None = None) -> None:
    """Start the pool :func:`preflight_many` will use with ``workers`` (default: every core)
    now, each worker importing what a simulation imports, while this process does other
    work (the planner builds its space meanwhile): a spawned worker spends seconds on its
    imports before its first simulation."""
    size = (workers or os.cpu_count() or 1) - 1
    if size < 1:
        return
    pool = _pool(size)
    for _ in range(size):
        pool.submit(_import_simulation)


def _import_simulation() -> None:
    import hyper_parallel.preflight.run
    import hyper_parallel.preflight.simulate  # noqa: F401 - the engine, torch, the fake world


def _shutdown() -> None:
    """Stop the kept workers (at exit; also for a caller that wants them gone now)."""
    global _POOL
    if _POOL is not None:
        share_helper(None)
        _POOL[1].shutdown(wait=True, cancel_futures=True)
        _POOL = None


atexit.register(_shutdown)


def _one(config: Any, world: int | None, gpu: Gpu, imbalance: float | None, suggest: bool,
         work: bool = False, silent: bool = False) -> Preflight | ConfigError:
    try:
        with quiet() if silent else contextlib.nullcontext():
            return preflight_config(config, gpu, world=world, imbalance=imbalance,
                                    suggest=suggest, work=work)
    except ConfigError as exc:
        return exc


__all__ = ["preflight_many", "quiet", "start_workers"]
