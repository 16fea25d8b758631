"""Preflight several configurations at once: a converted fleet, the shipped recipes.

Configurations whose simulations are the same (:func:`~.simulate.simulation_key`: variants that
differ only in data, checkpoints, metrics, paths, learning rate, seed or length) at the same
world are preflighted once. The distinct ones run side by side, one process each (a process
holds one process group, and each simulation makes its own), as many as this process may use
(:func:`~.run.processes`: its cores, or ``HYPER_PARALLEL_PREFLIGHT_PROCESSES``): this one and
spawned workers. The workers are kept while this process lives (:func:`_pool`):
a fresh interpreter spends seconds importing torch and the engine, and a caller that
preflights in rounds (the planner, the shipped-recipes test) would pay that every round. A
caller may start them early (:func:`start_workers`); at exit imports still running are
stopped, not awaited (:func:`_stop_at_exit`).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import multiprocessing
import threading
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from hyper_parallel.preflight.check import preflight_config
from hyper_parallel.preflight.gpus import Gpu
from hyper_parallel.preflight.run import (
    DEFAULT_IMBALANCE,
    Preflight,
    already_measured,
    as_pool_worker,
    depth_parts,
    mark_pool_worker,
    measure_one_role,
    measure_part,
    processes,
    quiet,
    remember,
    remember_parts,
    role_ranks,
    share_helper,
    world_size_of,
)
from hyper_parallel.preflight.simulate import resolved_model_config, simulation_key
from hyper_parallel.utils.errors import ConfigError


def preflight_many(configs: Sequence[Any], gpu: Gpu, *, worlds: Sequence[int | None] = (),
                   imbalance: float | None = None, suggest: bool = True,
                   workers: int | None = None, work: bool = False, quiet: bool = False
                   ) -> list[Preflight | ConfigError]:
    """The preflight of each ``HyperTrainer.Config`` of ``configs``, in order, at its world in
    ``worlds`` (None or missing: its degrees'); a configuration error is that configuration's
    result (the others still run: every problem at once). ``work``: each role also records
    its step's work (``Role.work``, for the planner). ``quiet``: the engine's and torch's
    warnings while they simulate are not printed (:func:`~.run.quiet`).

    The grain is finer than a configuration, so that the processes end together: a pipeline's
    roles (one per stage position, each stepped at its whole depth) are measured side by side,
    one process each; a role extrapolated over its depth in its three parts (stepped two
    periods deep and one, and its whole build on ``meta``: :func:`~.run.depth_parts`), the
    dearest first. The preflight is then put together here from their measurements."""
    worlds = list(worlds) + [None] * (len(configs) - len(worlds))
    keys = [(simulation_key(config), world) for config, world in zip(configs, worlds)]
    distinct: dict[tuple[str, int | None], int] = {}
    for index, key in enumerate(keys):
        distinct.setdefault(key, index)
    jobs = list(distinct.values())
    cores = max(1, workers or processes())
    level = DEFAULT_IMBALANCE if imbalance is None else imbalance

    def whole(index: int) -> tuple:
        return (_one, configs[index], worlds[index], gpu, imbalance, suggest, work, quiet)

    tasks: list[tuple] = []
    layers: list[int] = []  # the layers each task steps, where known (its cost, to order them)
    whole_task: dict[int, int] = {}  # task -> the job it preflights whole
    split: list[int] = []  # the jobs measured a role or a part a task, put together afterwards
    parts: dict[int, dict[int, int]] = {}  # job -> its depth parts' layers -> their tasks
    # Jobs whose every role is measured already (here, or kept on disk by another process)
    # are put together here, in milliseconds: no worker to wait for.
    kept = [index for index in jobs
            if already_measured(configs[index], worlds[index], level, work)]
    for index in (index for index in jobs if index not in kept):
        config, world = configs[index], worlds[index]
        ranks = _role_representatives(config, world) if cores > 1 and level >= 1 else []
        depth = depth_parts(config) if len(ranks) == 1 else ()
        if depth:
            split.append(index)
            parts[index] = {}
            for deep in depth:
                parts[index][deep] = len(tasks)
                layers.append(deep)
                tasks.append((_part, config, world, ranks[0], level, deep, work, quiet))
        elif len(ranks) > 1:
            split.append(index)
            depth_of = _depth(config)
            for rank in ranks:
                layers.append(depth_of // len(ranks))
                tasks.append((_role, config, world, rank, level, work, quiet))
        else:
            whole_task[len(tasks)] = index
            layers.append(_depth(config))
            tasks.append(whole(index))
    # The dearest first: the last to start are the short ones, which fill the gaps.
    order = sorted(range(len(tasks)), key=lambda task: -layers[task])
    results = _run_tasks(tasks, min(cores, len(tasks)), order) if tasks else []
    done = {index: results[task] for task, index in whole_task.items()}
    done.update({index: _one(*whole(index)[1:]) for index in kept})
    for task, measured in enumerate(results):
        if task not in whole_task and tasks[task][0] is _role and measured is not None:
            _, config, world, rank, _, _, _ = tasks[task]
            remember(config, rank, world, level, *measured)
    for index, tasks_of in parts.items():
        measured = {deep: results[task] for deep, task in tasks_of.items()}
        if all(part is not None for part in measured.values()):
            remember_parts(configs[index], tasks[tasks_of[0]][3], worlds[index], level,
                           measured)
    for index in split:  # every role is measured here now (a failed one: measured again)
        done[index] = _one(*whole(index)[1:])
    return [done[distinct[key]] for key in keys]


def _depth(config: Any) -> int:
    """The layers of ``config``'s model (0 when preflight refuses it: its preflight says why),
    the cost of stepping it whole, to order the tasks by."""
    try:
        return resolved_model_config(config).num_hidden_layers
    except ConfigError:
        return 0


def _role_representatives(config: Any, world: int | None) -> list[int]:
    """The representative rank of each of ``config``'s roles at ``world`` (none when its
    world is not valid: its preflight reports that)."""
    try:
        return [ranks[0] for ranks in role_ranks(config, world_size_of(config, world))]
    except ConfigError:
        return []


def _role(config: Any, world: int | None, rank: int, imbalance: float, work: bool,
          silent: bool) -> tuple | None:
    """One role of a preflight, measured (:func:`~.run.measure_one_role`); None when it
    fails: the preflight put together from it measures it again and reports why."""
    try:
        with quiet() if silent else contextlib.nullcontext():
            return measure_one_role(config, rank, world, imbalance, work)
    except Exception:  # noqa: BLE001 - reported by the preflight that measures it again
        return None


def _part(config: Any, world: int | None, rank: int, imbalance: float, layers: int, work: bool,
          silent: bool) -> Any:
    """One of the depth parts of a role (:func:`~.run.measure_part`); None when it fails: the
    preflight put together from it measures it again and reports why."""
    try:
        with quiet() if silent else contextlib.nullcontext():
            return measure_part(config, rank, world, imbalance, layers, work)
    except Exception:  # noqa: BLE001 - reported by the preflight that measures it again
        return None


def _run_tasks(tasks: list[tuple], workers: int, order: Sequence[int] | None = None
               ) -> list[Any]:
    """``[fn(*args) for fn, *args in tasks]``, ``workers`` at a time, started in ``order``
    (default: as listed): this process is one of them (it has imported everything already; a
    spawned worker spends seconds importing torch and the engine), the others a pool of
    spawned processes, each taking the next task as it ends one."""
    pending = list(reversed(order if order is not None else range(len(tasks))))
    done: dict[int, Any] = {}
    if workers <= 1:
        return [fn(*args) for fn, *args in tasks]
    lock = threading.Lock()
    submitted: list[tuple[int, concurrent.futures.Future]] = []

    def next_task() -> int | None:
        with lock:
            return pending.pop() if pending else None

    pool = _pool(workers - 1)

    def submit_next(_: Any = None) -> None:
        with lock:  # taken and submitted at once: no task is out of both lists
            if not pending:
                return
            index = pending.pop()
            try:
                future = pool.submit(*tasks[index])
            except BrokenProcessPool:  # a worker died: this process runs it instead
                pending.append(index)
                return
            submitted.append((index, future))
        future.add_done_callback(submit_next)

    for _ in range(workers - 1):
        submit_next()
    with as_pool_worker():  # the pool takes the other cores: no helper of its own
        while (index := next_task()) is not None:
            fn, *args = tasks[index]
            done[index] = fn(*args)
    with lock:
        listed = list(submitted)  # every task the pool took: none is left to take
    for index, future in listed:
        done[index] = future.result()
    return [done[index] for index in range(len(tasks))]


#: The spawned workers, kept across calls (``(size, executor)``; None before the first).
_POOL: tuple[int, concurrent.futures.ProcessPoolExecutor] | None = None
#: The workers' imports (:func:`start_workers`) not finished yet: no result waits for them,
#: so at exit they are stopped (:func:`_stop_at_exit`).
_IMPORTING: set[concurrent.futures.Future] = set()


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
    """Start the pool :func:`preflight_many` will use with ``workers`` (default:
    :func:`~.run.processes`) now, each worker importing what a simulation imports, while this
    process does other work (the planner builds its space meanwhile): a spawned worker spends
    seconds on its imports before its first simulation. A caller that ends before its first
    preflight (a configuration error) does not wait for them at exit."""
    size = (workers or processes()) - 1
    if size < 1:
        return
    pool = _pool(size)
    for _ in range(size):
        future = pool.submit(_import_simulation)
        _IMPORTING.add(future)
        future.add_done_callback(_IMPORTING.discard)


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


def _stop_at_exit() -> None:
    """Stop the pool's workers while their imports still run (a plan that ended at a
    configuration error): nothing will read what they import, and they would hold the exit
    for seconds. A pool whose imports are done is left to :func:`_shutdown`."""
    global _POOL
    if _POOL is None or not _IMPORTING:
        return
    executor = _POOL[1]
    share_helper(None)
    _POOL = None
    _IMPORTING.clear()
    stop = getattr(executor, "terminate_workers", None)  # Python 3.14
    if stop is not None:
        stop()
        return
    for process in list((getattr(executor, "_processes", None) or {}).values()):
        process.terminate()
    executor.shutdown(wait=False, cancel_futures=True)


# Among the calls ``threading`` makes at exit, where ``concurrent.futures`` waits for its pools'
# running tasks (an ``atexit`` call would come after that wait); registered after that module's
# own (imported above), so it runs before it.
_register_atexit: Callable[[Callable[[], None]], None] | None = getattr(
    threading, "_register_atexit", None)
if _register_atexit is not None:
    _register_atexit(_stop_at_exit)


def _one(config: Any, world: int | None, gpu: Gpu, imbalance: float | None, suggest: bool,
         work: bool = False, silent: bool = False) -> Preflight | ConfigError:
    try:
        with quiet() if silent else contextlib.nullcontext():
            return preflight_config(config, gpu, world=world, imbalance=imbalance,
                                    suggest=suggest, work=work)
    except ConfigError as exc:
        return exc


__all__ = ["preflight_many", "quiet", "start_workers"]
