"""How a run ends when it cannot go on: a stop request (SIGTERM, the launcher gone) or a failure.

**Stop requests.** Schedulers send SIGTERM some time before they kill a job, and torchrun
forwards it to every worker. :class:`StopSignal` turns it into a request the loop acts on at the
next step boundary: the current step finishes, every rank agrees (one tiny all-reduce per step in
a multi-rank job: the ranks see the signal at different moments, and they must stop after the
same step or their collectives would no longer match), the trainer writes a checkpoint when
checkpointing is on, and :class:`TrainingStopped` ends the run with :data:`STOPPED_EXIT_CODE`.
A launcher that dies without forwarding anything (SIGKILL) leaves its workers orphaned; a
watcher thread notices the parent change and raises the same request, so they stop the same way
instead of training on unobserved. A second SIGTERM exits at once -- unless it comes within
:data:`DUPLICATE_SIGNAL_SECONDS` of the first: a scheduler that stops a job signals every
process of it (Slurm at a preemption or ``scancel``, Kubernetes at a pod's deletion) while
torchrun forwards the same signal to its workers, so a worker sees one request twice, and must
still finish its step and write its checkpoint.

**Failures.** :func:`report_failure` writes the real error once, with its rank and step, and
records it for torchrun's summary ("Root Cause (first observed failure)"). The entry point then
leaves without any further collective: a rank that fails must exit at once so that its peers'
collectives fail too (gloo reports "Connection closed by peer" immediately) instead of all ranks
waiting out the collective timeout in mismatched collectives.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import traceback
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist

from hyper_parallel.platform.collectives import all_reduce, comm_tensor

logger = logging.getLogger(__name__)

#: Exit status of a run stopped by a signal: 128 + SIGTERM, as a shell reports a killed command.
STOPPED_EXIT_CODE = 128 + signal.SIGTERM

#: Exit status of a failed run (torchrun reports it, and the failing rank's message, first).
FAILED_EXIT_CODE = 1

#: A second SIGTERM this soon after the first is the same stop request delivered twice (see the
#: module docstring), not a request to exit at once.
DUPLICATE_SIGNAL_SECONDS = 5.0

#: How often the orphan watcher checks that the launcher is still there.
PARENT_POLL_SECONDS = 0.5

#: Error messages of a collective whose peer went away, the symptom on the surviving ranks.
_PEER_LOST_MARKERS = (
    "Connection closed by peer",
    "Connection reset by peer",
    "Broken pipe",
    "NCCL communicator was aborted",
)


class TrainingStopped(Exception):
    """The run stopped early on request, after ``step``, with ``checkpoint`` written (or None)."""

    def __init__(self, reason: str, step: int, checkpoint: str | None) -> None:
        self.reason = reason
        self.step = step
        self.checkpoint = checkpoint
        saved = (
            f"checkpoint saved to {checkpoint}; resume with checkpoint.load_path={checkpoint} "
            "or 'latest' (legacy: train.checkpoint.load_path)"
            if checkpoint
            else "no checkpoint written (checkpointing is off)"
        )
        super().__init__(f"training stopped by {reason} after step {step}: {saved}")


class StopSignal:
    """SIGTERM and launcher death as a stop request, agreed by all ranks at a step boundary.

    Use as a context manager around the loop (it installs its handler only in the main thread
    and restores the previous one on exit) and call :meth:`should_stop` after every step.
    """

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.reason: str | None = None
        self._signum = 0
        self._first_signal = 0.0
        self._previous: Any = None
        self._installed = False
        self._watcher: threading.Thread | None = None
        self._done = threading.Event()
        # Where the default group's backend reduces (NCCL: the GPU; platform.collectives).
        self._flag = comm_tensor([0], dtype=torch.int32)

    # ------------------------------------------------------------------ requests

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._signum:
            if time.monotonic() - self._first_signal < DUPLICATE_SIGNAL_SECONDS:
                logger.info("%s again: the same stop request (the scheduler and the launcher "
                            "both sent it); still stopping after the current step", name)
                return
            # A second request: the user (or the scheduler) does not want to wait.
            logger.error("second %s: exiting now", name)
            os._exit(STOPPED_EXIT_CODE)
        self._signum = signum
        self._first_signal = time.monotonic()
        self.reason = name
        logger.warning("%s: stopping after the current step", name)

    def _watch_parent(self, parent: int) -> None:
        while not self._done.wait(PARENT_POLL_SECONDS):
            if os.getppid() != parent:
                # The signal handler runs in the main thread at the next bytecode boundary, so
                # the request goes through the same path as a forwarded SIGTERM.
                logger.warning("the launcher (pid %d) is gone", parent)
                os.kill(os.getpid(), signal.SIGTERM)
                return

    def __enter__(self) -> StopSignal:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
            self._installed = True
            if "TORCHELASTIC_RUN_ID" in os.environ or "LOCAL_RANK" in os.environ:
                self._watcher = threading.Thread(
                    target=self._watch_parent, args=(os.getppid(),), name="launcher-watch",
                    daemon=True,
                )
                self._watcher.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False

    # ------------------------------------------------------------------ the decision

    def requested(self) -> bool:
        """Whether this rank was asked to stop (no collective; :meth:`should_stop` decides)."""
        return self.reason is not None

    def should_stop(self) -> bool:
        """Whether any rank was asked to stop (collective in a multi-rank job: call it on every
        rank after every step). Every rank then knows the reason by the signal's name."""
        if self.world_size > 1 and dist.is_initialized():
            self._flag.fill_(self._signum)
            # Over every rank: one that stops alone would wait in the stop's checkpoint while its
            # peers start the next step (mismatched collectives: a hang, and no checkpoint).
            signum = int(all_reduce(self._flag, dist.group.WORLD, dist.ReduceOp.MAX).item())
            if signum and self.reason is None:
                self.reason = f"{signal.Signals(signum).name} (received by another rank)"
            return bool(signum)
        return self.reason is not None


def current_rank() -> int:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def is_peer_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective failing because another rank went away."""
    text = str(exc)
    return any(marker in text for marker in _PEER_LOST_MARKERS)


def report_failure(exc: BaseException, *, step: int | None = None) -> None:
    """Log why this rank failed (once, with rank and step) and record it for torchrun.

    A rank that only lost a peer says so in one line: the root cause is the peer's own error,
    which torchrun's summary shows first.
    """
    rank = current_rank()
    where = f"rank {rank}" + (f", step {step}" if step is not None else "")
    if is_peer_lost(exc):
        logger.error(
            "%s: another rank left the job during a collective (%s: %s); its own error is the "
            "cause", where, type(exc).__name__, str(exc).splitlines()[0][:300],
        )
        return  # no error file: torchrun's summary shows the peer's error as the root cause
    logger.error(
        "%s: training failed: %s: %s\n%s", where, type(exc).__name__, exc,
        "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip(),
    )
    _record_for_torchrun(exc)


def _record_for_torchrun(exc: BaseException) -> None:
    """Write torchelastic's error file (its summary then names this rank and message)."""
    if "TORCHELASTIC_ERROR_FILE" not in os.environ:
        return
    try:
        from torch.distributed.elastic.multiprocessing.errors import get_error_handler

        handler = get_error_handler()
        handler.initialize()
        handler.record_exception(exc)
    except Exception:  # reporting must never hide the original failure
        logger.debug("could not write the torchelastic error file", exc_info=True)


__all__ = [
    "FAILED_EXIT_CODE",
    "STOPPED_EXIT_CODE",
    "StopSignal",
    "TrainingStopped",
    "current_rank",
    "is_peer_lost",
    "report_failure",
]
