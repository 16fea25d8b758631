"""Role measurements kept on disk, so that no process simulates what another already has.

A role's measurement is a function of what is simulated (:func:`~.simulate.simulation_key`,
the rank, the world, the imbalance) and of the code that simulates it. The plan, preflight,
``--from-yaml --preflight`` and ``launch`` each simulate the roles of the same recipes; kept
here, the second of them reads the first's figures instead of spending tens of seconds of CPU
on each role again (a plan run again with another ``--budget`` or ``--write``, the launch of a
layout the plan just measured).

An entry's file is named by a hash of everything it depends on: the simulation key, the role,
this package's source (every ``.py`` file's bytes), the torch and Python versions and
:data:`FORMAT`. So an edit of the code, an upgrade of torch or another recipe is another
entry, never a stale one. A key of the process's own (:data:`~.simulate.PROCESS_LOCAL`: a
recipe holding a lambda) is never kept. The figures are JSON (no code runs when an entry is
read), written atomically under the umask; an unreadable entry is simulated again.

The folder: :data:`CACHE_ENV` (``off`` for none), else ``$XDG_CACHE_HOME/hyper_parallel/
preflight`` (``~/.cache/...``), holding at most :data:`KEPT_ENTRIES` entries, the least
recently used dropped first.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from hyper_parallel.preflight.simulate import PROCESS_LOCAL, RoleMemory
from hyper_parallel.preflight.work import Collective, RoleWork

logger = logging.getLogger(__name__)

#: Where the entries go: a folder, or ``off`` (also ``0``, ``no``, ``false``) for none.
CACHE_ENV = "HYPER_PARALLEL_PREFLIGHT_CACHE"
#: The entries' layout; bumped when what an entry holds changes meaning.
FORMAT = 1
#: Entries kept at most (a few KiB each; a 397B plan makes tens).
KEPT_ENTRIES = 2048
_OFF = {"off", "0", "no", "false"}
#: A folder this process could not write to: said once, then no more entries written.
_UNWRITABLE: set[Path] = set()


def cache_folder() -> Path | None:
    """The folder entries are kept in, None when :data:`CACHE_ENV` turns them off."""
    value = os.environ.get(CACHE_ENV)
    if value is not None:
        value = value.strip()
        return None if value.lower() in _OFF or not value else Path(value).expanduser()
    home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(home) / "hyper_parallel" / "preflight"


@functools.cache
def code_fingerprint() -> str:
    """A hash of what a measurement's figures depend on besides the configuration: this
    package's source, torch's version, Python's and :data:`FORMAT`."""
    import torch

    return source_fingerprint(Path(__file__).resolve().parents[1],
                              f"{FORMAT} {torch.__version__} {sys.version}")


def source_fingerprint(package: Path, versions: str) -> str:
    """A hash of ``versions`` and of every ``.py`` file under ``package``, by its path and
    bytes: an edit anywhere is another fingerprint."""
    digest = hashlib.sha256(versions.encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _path(folder: Path, entry: tuple) -> Path | None:
    key = entry[0]
    if key.startswith(PROCESS_LOCAL):
        return None
    text = json.dumps([code_fingerprint(), *entry])
    return folder / f"{hashlib.sha256(text.encode()).hexdigest()[:40]}.json"


def load(entry: tuple, work: bool) -> tuple[RoleMemory, float, RoleWork | None] | None:
    """The measurement kept for ``entry`` (``(simulation key, rank, world, imbalance)``),
    with its work when ``work``; None when none is kept (or it is unreadable)."""
    folder = cache_folder()
    path = None if folder is None else _path(folder, entry)
    if path is None:
        return None
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if kept["entry"] != list(entry) or (work and kept["work"] is None):
            return None
        memory = RoleMemory(**kept["memory"])
        role_work = None if kept["work"] is None else _role_work(kept["work"])
        flops = float(kept["flops"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.debug("preflight: the kept measurement %s is unreadable (%s); simulating",
                     path, exc)
        return None
    try:
        os.utime(path)  # recently used: pruned last
    except OSError:
        pass
    return memory, flops, role_work


def store(entry: tuple, memory: RoleMemory, flops: float, role_work: RoleWork | None) -> None:
    """Keep ``entry``'s measurement (an entry with its work is not replaced by one
    without)."""
    from hyper_parallel.codegen.rendering.writing import WriteError, atomic_write

    folder = cache_folder()
    path = None if folder is None or folder in _UNWRITABLE else _path(folder, entry)
    if path is None or (role_work is None and path.exists()):
        return
    text = json.dumps({"entry": list(entry), "memory": dataclasses.asdict(memory),
                       "flops": flops,
                       "work": None if role_work is None else dataclasses.asdict(role_work)})
    try:
        atomic_write(path, text)
    except (WriteError, OSError) as exc:
        _UNWRITABLE.add(folder)
        logger.warning("preflight: cannot keep measurements in %s (%s); every process "
                       "simulates its own (set %s to a writable folder, or to off)",
                       folder, exc, CACHE_ENV)
        return
    _prune(folder)


def _prune(folder: Path) -> None:
    """Drop the least recently used entries beyond :data:`KEPT_ENTRIES`."""
    try:
        entries = [(p.stat().st_mtime, p) for p in folder.glob("*.json")]
    except OSError:
        return
    if len(entries) <= KEPT_ENTRIES:
        return
    for _, path in sorted(entries)[:len(entries) - KEPT_ENTRIES]:
        try:
            path.unlink()
        except OSError:
            pass  # another process pruned it first


def _role_work(kept: dict[str, Any]) -> RoleWork:
    collectives = [Collective(**{**c, "group_ranks": tuple(c["group_ranks"])})
                   for c in kept["collectives"]]
    return RoleWork(**{**kept, "collectives": collectives})


__all__ = ["CACHE_ENV", "FORMAT", "KEPT_ENTRIES", "cache_folder", "code_fingerprint", "load",
           "source_fingerprint", "store"]
