"""A ``python`` whose processes start warm: for a script under test that starts Python processes
of its own (a bench that launches ``torchrun`` and trainers, a shell script whose steps are
Python), each of them forked from the pytest worker's fork server (:mod:`tests.helpers.torchrun`:
torch already imported) instead of a fresh interpreter that spends 2-3 CPU seconds importing it.

:func:`warm_python` returns the path of an executable stand-in for ``python``: give it where a
script takes its interpreter (``PYTHON=...``, or run the script with it: the processes it starts
get it as their ``sys.executable``, so their own Python processes start warm too). Each
``warm-python ARGS`` process asks this worker's server (a thread of the pytest worker, over a
Unix socket) to fork a process that becomes ``python ARGS`` -- ``SCRIPT``, ``-m MODULE`` or
``-c CODE``, with ``-u`` / ``-B`` -- with the stand-in's own standard input, output and error
(the same open files, passed over the socket), environment and working directory, and waits
for it: its exit status is the forked process's (a signal that killed it kills the stand-in
too), and a signal the stand-in receives is passed on to it (``timeout`` stops it as it would
stop a fresh interpreter). Where a fork cannot be the same process it execs the real
interpreter instead: any other option, a file descriptor inherited beyond 0-2 (multiprocessing's
own helpers are started that way), or no server.

As with :func:`tests.helpers.torchrun.run_python`, only the imports are shared: what the forked
process imports beyond the fork server's preload, reads from its environment and writes is its
own; it does not run ``atexit`` handlers (a forked process ends as multiprocessing ends it, non-
daemon threads joined, output flushed).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import sys
import tempfile
import threading
from pathlib import Path

from tests.helpers.torchrun import _forkserver

#: The stand-in: ``python -S -E`` (no site, no PYTHON* variables: a few milliseconds) running
#: :data:`_CLIENT_CODE` with the real interpreter and the server's socket filled in.
_CLIENT_CODE = r'''
import os, signal, socket, struct, sys, json
REAL, SOCKET = {real!r}, {socket!r}
def fresh():
    os.execv(REAL, [REAL, *sys.argv[1:]])
# A descriptor inherited beyond 0-2 (multiprocessing's helpers get their pipes that way) is not
# passed on: such a process must be a fresh interpreter.
for fd in range(3, 256):
    try:
        os.fstat(fd)
    except OSError:
        continue
    fresh()
try:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(SOCKET)
except OSError:
    fresh()
request = json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ),
                      "cwd": os.getcwd()}}).encode()
socket.send_fds(conn, [struct.pack("!Q", len(request)) + request], [0, 1, 2])
def forward(signum, frame):
    conn.sendall(b"S%d\n" % signum)
for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"):
    signal.signal(getattr(signal, name), forward)
reply = b""
while not reply.endswith(b"\n"):
    chunk = conn.recv(64)
    if not chunk:
        sys.exit(f"warm-python: the server went away")
    reply += chunk
if reply == b"F\n":
    conn.close()
    fresh()
code = int(reply[1:])
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
'''

_LOCK = threading.Lock()
_PATH: Path | None = None


def warm_python() -> str:
    """The path of this pytest worker's ``python`` stand-in (its server started on first use)."""
    global _PATH
    with _LOCK:
        if _PATH is None:
            folder = Path(tempfile.mkdtemp(prefix="hp_warm_python_"))
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(folder / "socket"))
            listener.listen(64)
            threading.Thread(target=_accept, args=(listener,), daemon=True,
                             name="warm-python").start()
            path = folder / "python"
            code = _CLIENT_CODE.format(real=sys.executable, socket=str(folder / "socket"))
            path.write_text(f"#!{sys.executable} -SE\n{code}")
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
            _PATH = path
    return str(_PATH)


def _accept(listener: socket.socket) -> None:
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve, args=(conn,), daemon=True).start()


def plan(argv: list[str]) -> tuple[str, str, list[str], bool] | None:
    """``(kind, what, args, unbuffered)`` for ``python argv`` -- kind ``script``, ``module`` or
    ``code`` -- or None where a forked process would not be that interpreter (an option other
    than ``-u`` / ``-B``, a script read from standard input, no script)."""
    unbuffered = False
    for i, arg in enumerate(argv):
        if arg in ("-u", "-B"):
            unbuffered |= arg == "-u"
        elif arg in ("-m", "-c"):
            if i + 1 >= len(argv):
                return None
            return ("module" if arg == "-m" else "code"), argv[i + 1], argv[i + 2:], unbuffered
        elif arg.startswith("-"):
            return None
        else:
            return "script", arg, argv[i + 1:], unbuffered
    return None


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    (size,) = struct.unpack("!Q", data[:8])
    data = data[8:]
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the stand-in went away mid-request")
        data += chunk
    return json.loads(data), fds


class _Fd:
    """A descriptor handed to the forked process: pickled while the fork server's popen is
    spawning, it travels with the process (``multiprocessing.reduction.DupFd``)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self):
        from multiprocessing import reduction

        return _detach, (reduction.DupFd(self.fd),)


def _detach(dup) -> int:
    return dup.detach()


def _serve(conn: socket.socket) -> None:
    from multiprocessing.connection import wait

    fds: list[int] = []
    with conn:
        try:
            request, fds = _receive(conn)
            how = plan(request["argv"]) if len(fds) == 3 else None
            if how is None:
                conn.sendall(b"F\n")
                return
            proc = _forkserver().Process(
                target=_become, args=(how, request["env"], request["cwd"],
                                      [_Fd(fd) for fd in fds], str(_PATH)), daemon=False)
            with _LOCK:
                proc.start()
        finally:
            for fd in fds:
                os.close(fd)
        try:
            while proc.sentinel not in wait([conn, proc.sentinel]):
                data = conn.recv(64)
                if not data:  # the stand-in was killed: so is its process
                    proc.kill()
                    break
                for line in data.split(b"\n"):
                    if line.startswith(b"S"):
                        os.kill(proc.pid, int(line[1:]))
        finally:
            proc.join()
        try:
            conn.sendall(b"X%d\n" % proc.exitcode)
        except OSError:
            pass


def _become(how: tuple[str, str, list[str], bool], env: dict[str, str], cwd: str,
            fds: list[int], executable: str) -> None:
    """In the forked process: become ``python`` as :func:`plan` read its arguments."""
    import io
    import runpy
    import types

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    kind, what, args, unbuffered = how
    if unbuffered or env.get("PYTHONUNBUFFERED"):
        sys.stdout.reconfigure(write_through=True)
        sys.stderr.reconfigure(write_through=True)
    # The processes this one starts are warm too (it is what they would run as python).
    sys.executable = executable
    first = {"script": os.path.dirname(os.path.abspath(what)), "module": os.getcwd(),
             "code": ""}[kind]
    sys.path[:0] = [first, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    if kind == "script":
        sys.argv = [what, *args]
        runpy.run_path(what, run_name="__main__")
    elif kind == "module":
        sys.modules["__main__"] = types.ModuleType("__main__")
        sys.argv = ["-m", *args]
        runpy._run_module_as_main(what, alter_argv=True)
    else:
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        sys.argv = ["-c", *args]
        exec(compile(what, "<string>", "exec"), main.__dict__)  # noqa: S102 - python -c CODE
