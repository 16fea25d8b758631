"""Distributed setup shared by every trainer: process group, device, mesh, DP group, seeds."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import socket
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Iterator, Optional

import torch
import torch.distributed as dist

from hyper_parallel.platform import get_platform
from hyper_parallel.runtime.parallel_dims import ParallelDims

logger = logging.getLogger(__name__)



@dataclass
class DistributedContext:
    """What a trainer knows about the job after :func:`setup_distributed`."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    parallel_dims: ParallelDims
    mesh: Any
    dp_group: Optional[dist.ProcessGroup]
    """Group over which tokens and losses are summed (the ``loss`` alias: dp + cp); None when
    the job has no data parallelism (every rank then sees the same batch)."""
    dp_rank: int
    dp_size: int
    split_group: Optional[dist.ProcessGroup] = None
    """The ranks that share one data-parallel rank's batch, each training on a part of it: the
    expert-parallel axis (its rows, ``ParallelDims.batch_split``) or the context-parallel one
    (its positions, ``ParallelDims.seq_split``); None when nothing splits it."""
    split_rank: int = 0
    """This rank's place on the expert-parallel axis: it trains on rows
    ``[split_rank * n / ep, ...)`` of each micro-batch of ``n`` rows."""
    cp_rank: int = 0
    """This rank's place on the context-parallel axis: it trains on positions
    ``[cp_rank * S / cp, ...)`` of each sequence of ``S`` positions."""
    collective_timeout_seconds: float = 300
    """The collective timeout in force (``comm.init_timeout_seconds`` until the first step is
    done, ``comm.train_timeout_seconds`` after it); change it with :meth:`set_timeout`."""

    @property
    def is_rank0(self) -> bool:
        return self.rank == 0

    @property
    def batch_split(self) -> int:
        return self.parallel_dims.batch_split

    @property
    def seq_split(self) -> int:
        return self.parallel_dims.seq_split

    @property
    def grad_average_size(self) -> int:
        """Ranks FSDP averages a dense gradient over (``ParallelDims.grad_average_size``)."""
        return self.parallel_dims.grad_average_size

    def set_timeout(self, seconds: float) -> None:
        set_collective_timeout(seconds)
        self.collective_timeout_seconds = seconds


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def init_process_group(
    comm_backend: Optional[str], device: torch.device, timeout_seconds: float = 300
) -> None:
    """Join the job started by torchrun, or form a 1-process group when run directly.

    FSDP and DTensor need a process group even on one rank; running ``python script.py``
    without torchrun therefore creates a private 1-rank group on a free local port.
    ``timeout_seconds`` bounds every collective (a group that already exists gets it too).
    """
    timeout = timedelta(seconds=timeout_seconds)
    if dist.is_initialized():
        set_collective_timeout(timeout_seconds)
        return
    backend = comm_backend or get_platform().default_comm_backend()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        dist.init_process_group(backend=backend, timeout=timeout)
    else:
        dist.init_process_group(
            backend=backend,
            init_method=f"tcp://127.0.0.1:{_free_port()}",
            world_size=1,
            rank=0,
            timeout=timeout,
        )


@contextlib.contextmanager
def group_released_if_build_fails() -> Iterator[None]:
    """A build that fails after forming its own 1-process group takes the group down again, so
    the next build in this process (a notebook, a test, preflight) forms its own instead of
    joining one with this build's backend and timeouts. A multi-rank group stays: the process
    is about to end and the launcher tears the job down, while destroying a group whose peers
    may sit in a collective can block."""
    existed = dist.is_initialized()
    try:
        yield
    except BaseException:
        if not existed and dist.is_initialized() and dist.get_world_size() == 1:
            dist.destroy_process_group()
        raise


def set_collective_timeout(seconds: float) -> None:
    """Bound every collective of every process group of this job by ``seconds`` from now on.

    A collective still waiting after that long fails (gloo raises, NCCL's watchdog aborts), so
    a peer that hangs ends the job instead of stalling it.
    """
    if not dist.is_initialized():
        return
    timeout = timedelta(seconds=seconds)
    groups = list(getattr(dist.distributed_c10d._world, "pg_map", {}) or [None])
    for group in groups:
        dist.distributed_c10d._set_pg_timeout(timeout, group)


def seed_everything(seed: int) -> None:
    """Seed Python's and the framework's RNGs (the same seed on every rank)."""
    random.seed(seed)
    get_platform().manual_seed(seed)


def set_determinism(enabled: bool, warn_only: bool) -> None:
    if not enabled:
        if torch.are_deterministic_algorithms_enabled():
            # Off means off, also when an earlier run in this process turned it on.
            torch.use_deterministic_algorithms(False)
        return
    torch.use_deterministic_algorithms(True, warn_only=warn_only)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def setup_distributed(
    *,
    parallelism: Any,
    comm_backend: Optional[str],
    local_rank: int,
    seed: int,
    timeout_seconds: float = 300,
    deterministic: bool = False,
    deterministic_warn_only: bool = False,
) -> DistributedContext:
    """Process group, device, ParallelDims + mesh, DP group, seeds and determinism.

    ``parallelism`` is the new tree's ``ParallelismConfig`` (any object with its attributes)."""
    platform = get_platform()
    device = platform.device(local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    set_determinism(deterministic, deterministic_warn_only)
    init_process_group(comm_backend, device, timeout_seconds)
    world_size = dist.get_world_size()
    parallel_dims = ParallelDims.from_parallelism(parallelism, world_size=world_size)
    mesh = parallel_dims.build_mesh(device.type)
    # The mesh's groups are new: they get torch's default timeout unless told the job's.
    set_collective_timeout(timeout_seconds)
    dp_group, dp_rank = None, 0
    if parallel_dims.has_mesh("dp"):
        dp_rank = parallel_dims.get_mesh("dp").get_local_rank()
    for alias in ("loss", "dp"):
        if parallel_dims.has_mesh(alias):
            dp_group = parallel_dims.get_mesh(alias).get_group()
            break
    split_group, split_rank, cp_rank = None, 0, 0
    if parallel_dims.batch_split > 1:
        split_mesh = parallel_dims.get_mesh("ep")
        split_group, split_rank = split_mesh.get_group(), split_mesh.get_local_rank()
    if parallel_dims.seq_split > 1:  # never with ep (ParallelDims refuses the pair)
        cp_mesh = parallel_dims.get_mesh("cp")
        split_group, cp_rank = cp_mesh.get_group(), cp_mesh.get_local_rank()
    seed_everything(seed)
    ctx = DistributedContext(
        rank=dist.get_rank(),
        world_size=world_size,
        local_rank=local_rank,
        device=device,
        parallel_dims=parallel_dims,
        mesh=mesh,
        dp_group=dp_group,
        dp_rank=dp_rank,
        dp_size=parallel_dims.dp_size,
        split_group=split_group,
        split_rank=split_rank,
        cp_rank=cp_rank,
        collective_timeout_seconds=timeout_seconds,
    )
    if ctx.is_rank0:
        logger.info(
            "parallel dims: %s (device %s, backend %s)",
            parallel_dims.summary(),
            device,
            comm_backend or dist.get_backend(),
        )
    return ctx
