"""The fault-injection test hook: ``HYPER_PARALLEL_FAULT_INJECT``, parsed in one place.

The fault suites prove that a fault ends the whole job fast, costs at most the steps since the
last checkpoint, and never leaves a half-written checkpoint behind. They trigger the faults
through one environment variable, read by two places: the training loop (at the start of a
step) and the checkpoint writer (in the middle of a save). Both read it through
:func:`fault_injection_from_env`, so a value one of them accepts is never rejected or
misread by the other. The values:

* ``<kind>_at_step:<step>[:<rank>]`` with ``kind`` one of :data:`STEP_FAULT_KINDS`: that rank
  (every rank without one) fails at the start of optimizer step ``step``: ``exit`` (exit code
  :data:`STEP_EXIT_CODE`), ``raise`` (a ``RuntimeError``), ``sigkill`` or ``sigterm`` (the
  signal sent to itself), or ``hold``: wait there until the job is asked to stop (a SIGTERM,
  or the launcher's death), then train the step -- so a test that signals the job from outside
  knows the step it lands on, however fast the steps run (at most :data:`HOLD_LIMIT_SECONDS`);
* ``kill_during_save:<step>``: the process calls ``os._exit(SAVE_KILL_EXIT_CODE)`` while saving
  the checkpoint of ``step``, after every file was written into the temporary directory and
  before the rename that publishes it.

Any other non-empty value is a ``ValueError`` naming the accepted forms. This module imports
no framework.
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

#: The faults the training loop injects at the start of a step (``<kind>_at_step:...``).
STEP_FAULT_KINDS: tuple[str, ...] = ("exit", "raise", "sigkill", "sigterm", "hold")

#: The longest ``hold_at_step`` waits for the stop request before it trains on regardless.
HOLD_LIMIT_SECONDS = 120.0

_AT_STEP = "_at_step"

#: The fault the checkpoint writer injects in the middle of a save.
SAVE_FAULT_KIND = "kill_during_save"

#: Exit status of ``exit_at_step``.
STEP_EXIT_CODE = 13

#: Exit status of ``kill_during_save``.
SAVE_KILL_EXIT_CODE = 17


@dataclass(frozen=True)
class FaultInjection:
    """One parsed value of :data:`FAULT_INJECT_ENV`."""

    kind: str
    """One of :data:`STEP_FAULT_KINDS`, or :data:`SAVE_FAULT_KIND`."""

    step: int
    """The optimizer step (``*_at_step``) or the checkpoint's step (``kill_during_save``)."""

    rank: int | None = None
    """The only rank that fails (``*_at_step`` only); None: every rank."""


def _bad_value(text: str) -> ValueError:
    return ValueError(
        f"{FAULT_INJECT_ENV}={text!r} is not understood; write {SAVE_FAULT_KIND}:<step> "
        f"(checkpointing) or <kind>_at_step:<step>[:<rank>] with <kind> one of "
        f"{', '.join(STEP_FAULT_KINDS)} (the training loop), or unset the variable."
    )


def _non_negative_int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def parse_fault_injection(text: str) -> FaultInjection | None:
    """The fault ``text`` asks for (None for an empty value); ``ValueError`` when malformed."""
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
    if head.endswith(_AT_STEP) and kind in STEP_FAULT_KINDS:
        step_text, has_rank, rank_text = rest.partition(":")
        step = _non_negative_int(step_text)
        rank = _non_negative_int(rank_text) if has_rank else None
        if step is not None and (not has_rank or rank is not None):
            return FaultInjection(kind, step, rank)
    raise _bad_value(text)


def fault_injection_from_env() -> FaultInjection | None:
    """:func:`parse_fault_injection` of :data:`FAULT_INJECT_ENV` (None when unset)."""
    return parse_fault_injection(os.environ.get(FAULT_INJECT_ENV, ""))


def save_kill_step() -> int | None:
    """The step whose save ``kill_during_save`` interrupts (None: no such fault requested).

    Raises ``ValueError`` for a malformed value, so a save can check it before writing."""
    fault = fault_injection_from_env()
    return fault.step if fault is not None and fault.kind == SAVE_FAULT_KIND else None


def maybe_kill_during_save(step: int) -> None:
    """Exit at once when ``kill_during_save:<step>`` asks for it (call mid-save)."""
    if save_kill_step() == step:
        logger.error(
            "%s: killing the process in the middle of saving step %d", FAULT_INJECT_ENV, step
        )
        logging.shutdown()
        os._exit(SAVE_KILL_EXIT_CODE)


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
    fault = fault_injection_from_env()
    if fault is None or fault.kind not in STEP_FAULT_KINDS or fault.step != step:
        return
    if fault.rank is not None and fault.rank != rank:
        return
    # The epoch time lets the fault suite measure how fast the job ends after the fault.
    logger.error(
        "fault injection: %s on rank %d at step %s (t=%.3f)", fault.kind, rank, step, time.time()
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
    "SAVE_FAULT_KIND",
    "SAVE_KILL_EXIT_CODE",
    "STEP_EXIT_CODE",
    "STEP_FAULT_KINDS",
    "FaultInjection",
    "fault_injection_from_env",
    "maybe_fail_at_step",
    "maybe_kill_during_save",
    "parse_fault_injection",
    "save_kill_step",
]
