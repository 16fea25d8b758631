"""A stand-in for a training task, to see which signals a launcher delivers where: run as
``python signal_probe.py FOLDER``, it starts a child like itself (torchrun's workers), and
each of them records every signal it gets as an empty file ``FOLDER/<task|child>.<SIGNAME>``.
SIGTERM ends each after a short "checkpoint" with status 0; it waits at most a minute.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

CAUGHT = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP,
          signal.SIGCONT)


def main() -> int:
    folder, role = Path(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else "task")
    stopping = []

    def record(signum, frame):
        (folder / f"{role}.{signal.Signals(signum).name}").touch()
        if signum == signal.SIGTERM:
            stopping.append(time.monotonic())

    for signum in CAUGHT:
        signal.signal(signum, record)
    child = None
    if role == "task":
        child = subprocess.Popen([sys.executable, __file__, str(folder), "child"])
    (folder / f"{role}.ready").touch()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if stopping and time.monotonic() - stopping[0] > 0.5:
            break
        time.sleep(0.05)
    if child is not None:
        child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
