"""Distributed setup shared by every trainer: process group, device, mesh, DP group, seeds.

**Joining a job that torchrun restarted.** torchrun's elastic agent hosts the TCPStore its
workers meet in (``TORCHELASTIC_USE_AGENT_STORE=True``), and that store outlives them: the
static rendezvous keeps it for the whole job, and torch 2.13's c10d rendezvous (``--standalone``
too) hands every restart the same one (pytorch/pytorch#135712). The keys the failed attempt's
workers wrote stay in it -- where each gloo rank listened, NCCL's unique id -- under the names the
next attempt uses. A rank that joins before its peer has overwritten its key connects to the dead
worker: "connection refused" (the restart is wasted) or, when a new process listens on the
reused port, a wait of five times the timeout inside gloo's connect, with no log line. So a
worker that meets in the agent's store keeps its attempt's keys under a prefix of their own
(:data:`ATTEMPT_PREFIX`, torchrun's restart count); the generated jobs also ask torchrun for a
fresh store each restart (``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``, :mod:`hyper_parallel.launch.
job`), the one way that also holds when nodes count their restarts differently.

**A bound on the join.** Forming the process groups (joining the job, then the mesh's groups)
takes at most the collective timeout the job starts with (``comm.init_timeout_seconds``): a rank
still waiting then logs why and what it waited for, and exits (:func:`join_deadline`), so
torchrun restarts the job or ends it instead of every rank waiting out gloo's or NCCL's own
longer waits in silence.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from hyper_parallel.platform import get_platform
from hyper_parallel.runtime.parallel_dims import ParallelDims

logger = logging.getLogger(__name__)

#: torchrun sets it to ``True`` when ``MASTER_ADDR:MASTER_PORT`` is its agent's own TCPStore,
#: which outlives the workers (see the module docstring).
AGENT_STORE_ENV = "TORCHELASTIC_USE_AGENT_STORE"

#: Where one attempt of the job keeps its keys in a store that several attempts share.
ATTEMPT_PREFIX = "hyper_parallel/attempt_{attempt}"


@dataclass
class DistributedContext:
    """What a trainer knows about the job after :func:`setup_distributed`."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    parallel_dims: ParallelDims
    mesh: Any
    dp_group: dist.ProcessGroup | None
    """Group over which tokens and losses are summed (the ``loss`` alias: dp + cp); None when
    the job has no data parallelism (every rank then sees the same batch)."""
    dp_rank: int
    dp_size: int
    split_group: dist.ProcessGroup | None = None
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


def _launched_job() -> tuple[int, int] | None:
    """This worker's rank and the job's world size when a launcher started it, else None."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return None


def _rendezvous_address() -> str:
    return f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"


def _join_launched_job(backend: str, rank: int, world_size: int, timeout: timedelta) -> None:
    from hyper_parallel.runtime.fault_injection import job_attempt, maybe_join_late

    maybe_join_late(rank)  # the test hook: one rank of a restarted job arriving late
    attempt = job_attempt()
    if os.environ.get(AGENT_STORE_ENV) != str(True):
        # A store of this attempt's own (rank 0 hosts it): nothing stale can be in it.
        dist.init_process_group(backend=backend, timeout=timeout)
        return
    # The agent's store, shared with the attempts before this one: this attempt's keys under
    # a prefix of their own (the module docstring says why). The client is what torch's env://
    # rendezvous would build for this store, with the prefix on top.
    agent_store = dist.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size,
        is_master=False, timeout=timeout,
    )
    store = dist.PrefixStore(ATTEMPT_PREFIX.format(attempt=attempt), agent_store)
    dist.init_process_group(
        backend=backend, store=store, rank=rank, world_size=world_size, timeout=timeout
    )


def init_process_group(
    comm_backend: str | None, device: torch.device, timeout_seconds: float = 300
) -> None:
    """Join the job started by torchrun, or form a 1-process group when run directly.

    FSDP and DTensor need a process group even on one rank; running ``python script.py``
    without torchrun therefore creates a private 1-rank group on a free local port.
    ``timeout_seconds`` bounds every collective (a group that already exists gets it too).
    A restarted torchrun job meets in the store of this attempt only (the module docstring).
    """
    timeout = timedelta(seconds=timeout_seconds)
    if dist.is_initialized():
        set_collective_timeout(timeout_seconds)
        return
    backend = comm_backend or get_platform().default_comm_backend()
    launched = _launched_job()
    if launched is not None:
        _join_launched_job(backend, *launched, timeout)
    else:
        dist.init_process_group(
            backend=backend,
            init_method=f"tcp://127.0.0.1:{_free_port()}",
            world_size=1,
            rank=0,
            timeout=timeout,
        )


def _end_worker(message: str) -> None:
    """Report ``message`` as this worker's failure (the log, torchrun's summary) and exit."""
    from hyper_parallel.runtime.faults import FAILED_EXIT_CODE, report_failure
    from hyper_parallel.utils.process import exit_now

    report_failure(ProcessGroupJoinError(message))
    exit_now(FAILED_EXIT_CODE)


class ProcessGroupJoinError(RuntimeError):
    """This rank could not form the job's process groups within the bound."""


@contextlib.contextmanager
def join_deadline(seconds: float, what: str) -> Iterator[None]:
    """End this worker when ``what`` (forming the job's process groups) is not done within
    ``seconds``. A rank blocked inside gloo's or NCCL's connect cannot be interrupted (gloo
    waits five times the group's timeout there), so a watchdog thread logs what it was waiting
    for and exits the process; its peers' collectives then fail, and torchrun restarts the job or
    ends it. An error raised inside the block is raised again naming the same wait."""
    launched = _launched_job()
    if launched is None:  # a private 1-rank group waits for no one
        yield
        return
    rank, world_size = launched
    from hyper_parallel.runtime.fault_injection import job_attempt

    where = (f"{what} ({world_size} ranks meeting at {_rendezvous_address()}, attempt "
             f"{job_attempt()})")
    if rank == 0:
        logger.info("%s: waiting at most %g s", where, seconds)
    done = threading.Event()

    def watch() -> None:
        if not done.wait(seconds):
            _end_worker(
                f"{where} did not complete within {seconds:g} s (comm.init_timeout_seconds, "
                f"train.init_timeout_seconds in a legacy YAML): a rank that did not start or "
                f"died starting, a node that did not restart, or an address this rank cannot "
                f"reach keeps it waiting; ending this worker so that the launcher restarts the "
                f"job or ends it"
            )

    watchdog = threading.Thread(target=watch, name="join-deadline", daemon=True)
    watchdog.start()
    try:
        yield
    except ProcessGroupJoinError:
        raise
    except (RuntimeError, OSError, TimeoutError) as exc:  # torch's DistError is a RuntimeError
        raise ProcessGroupJoinError(f"{where} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        done.set()


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
    comm_backend: str | None,
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
    started = time.monotonic()
    with join_deadline(timeout_seconds, "joining the job's process group"):
        init_process_group(comm_backend, device, timeout_seconds)
    world_size = dist.get_world_size()
    parallel_dims = ParallelDims.from_parallelism(parallelism, world_size=world_size)
    with join_deadline(timeout_seconds, "forming the mesh's process groups"):
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
            "parallel dims: %s (device %s, backend %s; process groups formed in %.1f s)",
            parallel_dims.summary(),
            device,
            comm_backend or dist.get_backend(),
            time.monotonic() - started,
        )
    return ctx
