"""Compute an expensive, JSON-able result once per test session, shared by its xdist workers.

A module- or session-scoped fixture is computed once per *worker*: under ``pytest -n 2`` two
tests of one module that land on different workers each pay for the fixture's torchrun jobs.
:class:`SessionCache` keys each result by what produced it, lets the first worker to ask make
it (holding a file lock) and hands the others the recorded JSON.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest


class SessionCache:
    """``cache.get(key, make)``: ``make(folder)``'s result, made once for ``key`` per session.

    ``folder`` is a path of the key's own, not yet created (for the run's outputs, which stay
    for the session). The result goes through JSON: floats come back bit for bit, tuples come
    back as lists, dict keys as strings. A ``make`` that raises records nothing: the next asker
    tries again (and fails the same way, with its own traceback).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def get(self, key: object, make: Callable[[Path], Any]) -> Any:
        return self.get_many([key], lambda _, folders: [make(folders[0])])[0]

    def get_many(self, keys: Sequence[object],
                 make: Callable[[list[int], list[Path]], list[Any]], *,
                 wait: bool = True) -> list[Any] | None:
        """The results of ``keys``, the missing ones made together: ``make(indices,
        folders)`` returns the results of ``keys[i]`` for ``i`` in ``indices`` (one torchrun job
        serving several cases). The keys' locks are taken in a fixed order, so two workers
        asking for overlapping sets never wait on each other in a cycle. ``wait=False``: None
        at once when another worker holds one of the locks (it is making those results), so
        the caller can make something else first."""
        from filelock import FileLock, Timeout

        digests = [hashlib.sha256(repr(key).encode()).hexdigest()[:16] for key in keys]
        with contextlib.ExitStack() as locks:
            for digest in sorted(set(digests)):
                lock = FileLock(str(self.root / f"{digest}.lock"), timeout=-1 if wait else 0)
                try:
                    locks.enter_context(lock)
                except Timeout:
                    return None
            missing, seen = [], set()
            for i, digest in enumerate(digests):
                if digest not in seen and not (self.root / f"{digest}.json").exists():
                    seen.add(digest)
                    missing.append(i)
            if missing:
                folders = [self.root / digests[i] for i in missing]
                for folder in folders:
                    shutil.rmtree(folder, ignore_errors=True)  # what a failed attempt left
                results = make(missing, folders)
                assert len(results) == len(missing), (len(results), len(missing))
                for i, result in zip(missing, results):
                    (self.root / f"{digests[i]}.json").write_text(json.dumps(result))
        return [json.loads((self.root / f"{d}.json").read_text()) for d in digests]


def session_cache(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory,
                  name: str) -> SessionCache:
    """The session's cache ``name``. Under xdist each worker's basetemp is a folder of the
    session's own whose parent is shared by the session's workers and by nothing else; a run
    without xdist (``-p no:xdist`` too) keeps it in its own basetemp."""
    base = tmp_path_factory.getbasetemp()
    return SessionCache((base.parent if hasattr(config, "workerinput") else base) / name)
