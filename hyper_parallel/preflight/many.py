"""Preflight several configurations at once: a converted fleet, the shipped recipes.

Configurations whose simulations are the same (:func:`~.simulate.simulation_key`: variants that
differ only in data, checkpoints, metrics, paths, learning rate, seed or length) at the same
world are preflighted once. The distinct ones run side by side, one process each (a process
holds one process group, and each simulation makes its own), as many as the machine has cores.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from collections.abc import Sequence
from typing import Any

from hyper_parallel.preflight.check import preflight_config
from hyper_parallel.preflight.gpus import Gpu
from hyper_parallel.preflight.run import Preflight, mark_pool_worker
from hyper_parallel.preflight.simulate import simulation_key
from hyper_parallel.utils.errors import ConfigError


def preflight_many(configs: Sequence[Any], gpu: Gpu, *, worlds: Sequence[int | None] = (),
                   imbalance: float | None = None, suggest: bool = True,
                   workers: int | None = None) -> list[Preflight | ConfigError]:
    """The preflight of each ``HyperTrainer.Config`` of ``configs``, in order, at its world in
    ``worlds`` (None or missing: its degrees'); a configuration error is that configuration's
    result (the others still run: every problem at once)."""
    worlds = list(worlds) + [None] * (len(configs) - len(worlds))
    keys = [(simulation_key(config), world) for config, world in zip(configs, worlds)]
    distinct: dict[tuple[str, int | None], int] = {}
    for index, key in enumerate(keys):
        distinct.setdefault(key, index)
    jobs = list(distinct.values())
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    if workers == 1:
        done = {index: _one(configs[index], worlds[index], gpu, imbalance, suggest)
                for index in jobs}
    else:
        with concurrent.futures.ProcessPoolExecutor(
                max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=mark_pool_worker) as pool:
            futures = {index: pool.submit(_one, configs[index], worlds[index], gpu, imbalance,
                                          suggest)
                       for index in jobs}
            done = {index: future.result() for index, future in futures.items()}
    return [done[distinct[key]] for key in keys]


def _one(config: Any, world: int | None, gpu: Gpu, imbalance: float | None, suggest: bool
         ) -> Preflight | ConfigError:
    try:
        return preflight_config(config, gpu, world=world, imbalance=imbalance, suggest=suggest)
    except ConfigError as exc:
        return exc


__all__ = ["preflight_many"]
