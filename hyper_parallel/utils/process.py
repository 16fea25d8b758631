"""Process exit for distributed entry points.

Interpreter finalization after ``destroy_process_group`` can abort with "terminate called
without an active exception" when a gloo/c10d background thread is still joinable while C++
static objects are destroyed (seen intermittently on CPU with gloo subgroups). A successful run
must not turn into a failed torchrun job at the very end, so entry points flush everything and
leave with ``os._exit`` once all their work, including the process-group teardown, is done.
"""

from __future__ import annotations

import logging
import os
import sys


def exit_now(code: int = 0) -> None:
    """Flush logging and stdio, then end the process with ``code`` without finalization."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed stream must not change the exit code
            pass
    os._exit(code)
