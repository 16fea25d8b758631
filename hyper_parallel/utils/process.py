"""Process exit for distributed entry points.

Interpreter finalization after ``destroy_process_group`` can abort with "terminate called
without an active exception" when a gloo/c10d background thread is still joinable while C++
static objects are destroyed (seen intermittently on CPU with gloo subgroups). A successful run
must not turn into a failed torchrun job at the very end, so entry points flush everything and
leave with ``os._exit`` once all their work, including the process-group teardown, is done:
their last statement is ``exit_now(code)``, and so is that of every script the tests and the
benchmarks run as torchrun's ranks (``tests/test_torchrun_exits.py`` finds them and checks it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys


def exit_now(code: int = 0) -> None:
    """Flush logging and stdio, then end the process with ``code`` without finalization."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        # No stream (None), a closed one or a reader gone must not change the exit code.
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    os._exit(code)
