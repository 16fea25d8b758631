"""The fault-injection test hook: ``HYPER_PARALLEL_FAULT_INJECT``, parsed in one place.

The fault suites prove that a fault ends the whole job fast, costs at most the steps since the
last checkpoint, never leaves a half-written checkpoint behind, and that a restarted job forms
its process group again. They trigger the faults through one environment variable, read by
three places: the process-group join (before it), the training loop (at the start of a step)
and the checkpoint writer (in the middle of a save). All read it through
:func:`fault_injections_from_env`, so a value one of them accepts is never rejected or misread
by another. Its value is one fault or several, separated by commas:

* ``<kind>_at_step:<step>[:<rank>[:<attempt>]]`` with ``kind`` one of :data:`STEP_FAULT_KINDS`:
  that rank (every rank without one) fails at the start of optimizer step ``step``: ``exit``
  (exit code :data:`STEP_EXIT_CODE`), ``raise`` (a ``RuntimeError``), ``sigkill`` or ``sigterm``
  (the signal sent to itself), or ``hold``: wait there until the job is asked to stop (a
  SIGTERM, or the launcher's death), then train the step -- so a test that signals the job from
  outside knows the step it lands on, however fast the steps run (at most
  :data:`HOLD_LIMIT_SECONDS`);
* ``late_join:<seconds>[:<rank>[:<attempt>]]``: that rank (every rank without one) waits
  ``seconds`` before it joins the job's process group -- so a test can make one rank of a
  restarted job arrive after the others, the order in which a rank once read the failed
  attempt's addresses from torchrun's store;
* ``kill_during_save:<step>``: the process calls ``os._exit(SAVE_KILL_EXIT_CODE)`` while saving
  the checkpoint of ``step``, after every file was written into the temporary directory and
  before the rename that publishes it.

``<attempt>`` limits a fault to one attempt of the job: torchrun's restart count
(``TORCHELASTIC_RESTART_COUNT``, 0 for the first attempt and for a job started without
torchrun). ``sigkill_at_step:3:1:0,late_join:5:1:1`` kills rank 1 at step 3 of the first attempt,
and makes it join the restarted one 5 s late. Any other non-empty value is a ``ValueError``
naming the accepted forms. This module imports no framework.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

#: The environment variable of the hook.
FAULT_INJECT_ENV = "HYPER_PARALLEL_FAULT_INJECT"

#: Which attempt of the job a worker belongs to: torchrun sets it to the number of times it
#: restarted the workers of this node (0 in the first attempt).
RESTART_COUNT_ENV = "TORCHELASTIC_RESTART_COUNT"

#: The faults the training loop injects at the start of a step (``<kind>_at_step:...``).
STEP_FAULT_KINDS: tuple[str, ...] = ("exit", "raise", "sigkill", "sigterm", "hold")

#: The longest ``hold_at_step`` waits for the stop request before it trains on regardless.
HOLD_LIMIT_SECONDS = 120.0

_AT_STEP = "_at_step"

#: The fault the checkpoint writer injects in the middle of a save.
SAVE_FAULT_KIND = "kill_during_save"

#: The fault the process-group join injects before it joins.
JOIN_FAULT_KIND = "late_join"

#: Exit status of ``exit_at_step``.
STEP_EXIT_CODE = 13

#: Exit status of ``kill_during_save``.
SAVE_KILL_EXIT_CODE = 17


@dataclass(frozen=True)
class FaultInjection:
    """One parsed value of :data:`FAULT_INJECT_ENV`."""

    kind: str
    """One of :data:`STEP_FAULT_KINDS`, :data:`JOIN_FAULT_KIND` or :data:`SAVE_FAULT_KIND`."""

    step: int
    """The optimizer step (``*_at_step``), the checkpoint's step (``kill_during_save``), or the
    seconds the join waits (``late_join``)."""

    rank: int | None = None
    """The only rank that fails (not ``kill_during_save``); None: every rank."""

    attempt: int | None = None
    """The only attempt of the job that fails (not ``kill_during_save``, :func:`job_attempt`);
    None: every attempt."""

    def meant_for(self, rank: int) -> bool:
        """Whether this fault is meant for ``rank`` in this attempt of the job."""
        return self.rank in (None, rank) and self.attempt in (None, job_attempt())


def _bad_value(text: str) -> ValueError:
    return ValueError(
        f"{FAULT_INJECT_ENV}={text!r} is not understood; write {SAVE_FAULT_KIND}:<step> "
        f"(checkpointing), <kind>_at_step:<step>[:<rank>[:<attempt>]] with <kind> one of "
        f"{', '.join(STEP_FAULT_KINDS)} (the training loop) or {JOIN_FAULT_KIND}:<seconds>"
        f"[:<rank>[:<attempt>]] (the process-group join), several separated by commas, or "
        f"unset the variable."
    )


def _non_negative_int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def parse_fault_injection(text: str) -> FaultInjection | None:
    """The one fault ``text`` asks for (None for an empty value); ``ValueError`` when
    malformed."""
    text = text.strip()
    if not text:
        return None
    head, _, rest = text.partition(":")
    if head == SAVE_FAULT_KIND:
        step = _non_negative_int(rest)
        if step is None:
            raise _bad_value(text)
        return FaultInjection(SAVE_FAULT_KIND, step)
    kind = head.removesuffix(_AT_STEP)
    if (head.endswith(_AT_STEP) and kind in STEP_FAULT_KINDS) or head == JOIN_FAULT_KIND:
        kind = kind if head.endswith(_AT_STEP) else JOIN_FAULT_KIND
        fields = rest.split(":")
        numbers = [_non_negative_int(field) for field in fields]
        if len(fields) <= 3 and None not in numbers:
            step, rank, attempt = numbers + [None] * (3 - len(numbers))
            return FaultInjection(kind, step, rank, attempt)
    raise _bad_value(text)


def parse_fault_injections(text: str) -> tuple[FaultInjection, ...]:
    """The faults ``text`` asks for, separated by commas (none for an empty value);
    ``ValueError`` naming the accepted forms when one is malformed."""
    faults = [parse_fault_injection(part) for part in text.split(",")]
    if None in faults and text.strip():  # an empty item: "a,,b" or a trailing comma
        raise _bad_value(text.strip())
    return tuple(fault for fault in faults if fault is not None)


def fault_injections_from_env() -> tuple[FaultInjection, ...]:
    """:func:`parse_fault_injections` of :data:`FAULT_INJECT_ENV` (none when unset)."""
    return parse_fault_injections(os.environ.get(FAULT_INJECT_ENV, ""))


def job_attempt() -> int:
    """This worker's attempt of the job: torchrun's restart count (0 without torchrun)."""
    return int(os.environ.get(RESTART_COUNT_ENV, "0") or 0)


def save_kill_step() -> int | None:
    """The step whose save ``kill_during_save`` interrupts (None: no such fault requested).

    Raises ``ValueError`` for a malformed value, so a save can check it before writing."""
    steps = [fault.step for fault in fault_injections_from_env() if fault.kind == SAVE_FAULT_KIND]
    return steps[0] if steps else None


def maybe_kill_during_save(step: int) -> None:
    """Exit at once when ``kill_during_save:<step>`` asks for it (call mid-save)."""
    if save_kill_step() == step:
        logger.error(
            "%s: killing the process in the middle of saving step %d", FAULT_INJECT_ENV, step
        )
        logging.shutdown()
        os._exit(SAVE_KILL_EXIT_CODE)


def maybe_join_late(rank: int) -> None:
    """Wait before joining the process group when ``late_join`` asks it of ``rank``."""
    for fault in fault_injections_from_env():
        if fault.kind == JOIN_FAULT_KIND and fault.meant_for(rank):
            logger.warning("fault injection: %s on rank %d: joining the process group %d s late "
                           "(attempt %d)", JOIN_FAULT_KIND, rank, fault.step, job_attempt())
            time.sleep(fault.step)
            return


def _hold(stop_requested: Callable[[], bool] | None) -> None:
    deadline = time.monotonic() + HOLD_LIMIT_SECONDS
    while not (stop_requested is not None and stop_requested()):
        if time.monotonic() > deadline:
            logger.warning("fault injection: no stop request in %.0f s; training on",
                           HOLD_LIMIT_SECONDS)
            return
        time.sleep(0.02)  # the signal handler runs between two of these


def maybe_fail_at_step(step: int, rank: int,
                       stop_requested: Callable[[], bool] | None = None) -> None:
    """Inject the ``<kind>_at_step`` fault asked for ``step`` on ``rank``, if any.
    ``stop_requested`` says whether this rank was asked to stop (what ``hold`` waits for)."""
    fault = next((f for f in fault_injections_from_env()
                  if f.kind in STEP_FAULT_KINDS and f.step == step and f.meant_for(rank)), None)
    if fault is None:
        return
    # The epoch time lets the fault suite measure how fast the job ends after the fault.
    logger.error(
        "fault injection: %s on rank %d at step %s (t=%.3f) in attempt %d", fault.kind, rank,
        step, time.time(), job_attempt()
    )
    if fault.kind == "exit":
        os._exit(STEP_EXIT_CODE)
    if fault.kind == "raise":
        raise RuntimeError(f"injected fault at step {step}")
    if fault.kind == "hold":
        _hold(stop_requested)
        return
    os.kill(os.getpid(), signal.SIGKILL if fault.kind == "sigkill" else signal.SIGTERM)


__all__ = [
    "FAULT_INJECT_ENV",
    "HOLD_LIMIT_SECONDS",
    "JOIN_FAULT_KIND",
    "RESTART_COUNT_ENV",
    "SAVE_FAULT_KIND",
    "SAVE_KILL_EXIT_CODE",
    "STEP_EXIT_CODE",
    "STEP_FAULT_KINDS",
    "FaultInjection",
    "fault_injections_from_env",
    "job_attempt",
    "maybe_fail_at_step",
    "maybe_join_late",
    "maybe_kill_during_save",
    "parse_fault_injection",
    "parse_fault_injections",
    "save_kill_step",
]
