"""Writing a file atomically, with the mode a new file gets, or not at all.

Every file the generator and the converter write goes through :func:`atomic_write`: a temporary
file in the same folder, renamed into place, so that a reader never sees half a file and a
failure leaves nothing behind; a path that cannot be written is one :class:`WriteError` line
saying which path and why.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import threading
from pathlib import Path

from hyper_parallel.codegen.errors import CodegenError


def read_text(path: Path) -> str | None:
    """The file's text; None when it cannot be read or is not UTF-8 (a broken file)."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


class WriteError(CodegenError):
    """An output path that cannot be written: a read-only folder, a folder in the way, a file
    where a folder should be. One line naming the path and why; nothing was left behind."""


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where the system tells (Linux:
    ``/proc/self/status``); elsewhere set and restored at once under a lock, with a restrictive
    mask in between so that a file another thread creates meanwhile is never too open."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def _why(path: Path, exc: OSError) -> str:
    """One line: which output cannot be written and why."""
    folder = path.parent
    if isinstance(exc, IsADirectoryError) or path.is_dir():
        return f"cannot write {path}: it is a folder (give a file path)"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (f"cannot write {path}: the folder {folder} is not writable "
                f"({exc.strerror or exc})")
    if isinstance(exc, NotADirectoryError):
        return f"cannot write {path}: a part of {folder} is a file, not a folder"
    return f"cannot write {path}: {exc.strerror or exc}"


def _make_parents(path: Path) -> list[Path]:
    """Create the missing folders above ``path`` (``mkdir -p``); returns those created,
    deepest last. A file where a folder should be is a :class:`WriteError`."""
    missing = []
    folder = path.parent
    while not folder.exists() and not folder.is_symlink():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    if folder.exists() and not folder.is_dir():
        raise WriteError(f"cannot write {path}: {folder} is a file, not a folder")
    created = []
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            if not folder.is_dir():
                _remove_folders(created)
                raise WriteError(f"cannot write {path}: {folder} is a file, not a folder") \
                    from None
            continue  # made meanwhile by someone else: not ours to remove
        except OSError as exc:
            _remove_folders(created)
            raise WriteError(_why(folder / path.name, exc)) from None
        created.append(folder)
    return created


def _remove_folders(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


#: ``os.link`` errors meaning "this file system has no hard links": fall back to O_EXCL.
_NO_HARD_LINKS = {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOSYS,
                  getattr(errno, "ENOTSUP", errno.EOPNOTSUPP), errno.EOPNOTSUPP}


def _place_exclusively(tmp: str, path: Path, data: bytes, mode: int) -> None:
    """Put the written ``tmp`` at ``path`` only if nothing is there, with no window between
    the check and the write: a hard link (``FileExistsError`` when ``path`` exists), or where
    the file system has none, an ``O_EXCL`` create of ``path`` written in place."""
    try:
        os.link(tmp, path)
        return
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(path, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def atomic_write(path: Path, text: str, *, exclusive: bool = False) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder, then rename it
    into place (``exclusive``: only if ``path`` does not exist, else ``FileExistsError``,
    decided atomically by :func:`_place_exclusively`).

    The file gets the mode a new file gets under the umask (``0o666 & ~umask``), also when it
    replaces an existing one. Missing parent folders are created. Any failure leaves nothing
    behind -- no temporary file, no folder this call created -- and a path problem (read-only
    folder, a folder in the way, a file where a folder should be) is a :class:`WriteError`
    with one line saying which and why.
    """
    path = Path(path)
    if path.is_dir():
        raise WriteError(f"cannot write {path}: it is a folder (give a file path)")
    created = _make_parents(path)
    data = text.encode("utf-8")
    mode = 0o666 & ~current_umask()
    tmp = None
    done = False
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        if exclusive:
            _place_exclusively(tmp, path, data, mode)
        else:
            os.replace(tmp, path)
            tmp = None
        done = True
    except FileExistsError:
        raise
    except OSError as exc:
        raise WriteError(_why(path, exc)) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if not done:
            _remove_folders(created)
