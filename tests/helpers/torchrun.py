"""Launch a script under torchrun (CPU, gloo), or alone for one rank, from a test; fail loudly on
a hang.

:func:`torchrun` is the real launcher, for tests of the launch itself. :func:`spawn_ranks` and
:func:`run_python` start their processes from a fork server that has imported torch once per
pytest worker (:data:`PRELOAD`): a fresh interpreter spends 2-3 CPU seconds importing torch,
its distributed packages and the compiler's configuration before a test's first line, and the
suite starts about a hundred such processes on a 2-core machine. Each forked rank is still a
process of its own, with the environment, working directory, ``argv`` and output files it would
have had (:func:`_run_script`); only the imports are shared.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: What the fork server imports before it forks: every job's heavy imports. Only libraries
#: that start no thread when imported (a forked child keeps only the forking thread) and read
#: no per-job environment at import time; hyper_parallel itself is imported by each job.
PRELOAD = ("torch", "torch.distributed", "torch.distributed.fsdp", "torch.distributed.tensor",
           "torch.distributed.checkpoint", "torch._inductor.config", "safetensors.torch",
           "torchdata.stateful_dataloader", "yaml", "tyro")

_FORKSERVER = None

#: Whether the running test may start a multi-rank job: only a test marked ``slow`` may
#: (tests/conftest.py sets this before each test's setup), so that ``make test-fast``
#: (``-m "not slow"``) stays the quick inner loop it promises: no multi-rank job at all.
MULTI_RANK_ALLOWED = True


def _check_multi_rank(what: str) -> None:
    if not MULTI_RANK_ALLOWED:
        raise AssertionError(
            f"{what} from a test not marked slow: a multi-rank job takes seconds of CPU; mark "
            "the test (or its module) pytest.mark.slow, so `make test-fast` runs none")


def _forkserver():
    """The pytest worker's fork-server context (started on its first job; OMP_NUM_THREADS is
    already 1 there, read once when torch loads OpenMP)."""
    global _FORKSERVER
    if _FORKSERVER is None:
        _FORKSERVER = multiprocessing.get_context("forkserver")
        _FORKSERVER.set_forkserver_preload(list(PRELOAD))
    return _FORKSERVER


def _run_script(script: str, args: list[str], env: dict[str, str], stdout: str,
                stderr: str | None) -> None:
    """In the forked child: become ``python script args`` run from the repository with ``env``,
    its output in ``stdout`` (and ``stderr``, or the same file), as a fresh interpreter would
    be (``sys.path[0]`` the script's folder, then ``PYTHONPATH``). Its exit code is the
    script's: ``SystemExit``'s, 1 for an uncaught exception (multiprocessing prints it)."""
    import runpy

    os.environ.clear()
    os.environ.update(env)
    out = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = out if stderr is None else os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                                             0o644)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.chdir(REPO)
    sys.argv = [script, *args]
    sys.path[:0] = [os.path.dirname(os.path.abspath(script)),
                    *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    runpy.run_path(script, run_name="__main__")


def _start(script: str | Path, args: Sequence[str], env: dict[str, str], stdout: Path,
           stderr: Path | None = None):
    proc = _forkserver().Process(
        target=_run_script,
        args=(str(script), list(args), env, str(stdout), None if stderr is None else str(stderr)),
        daemon=False)
    proc.start()
    return proc


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _test_env(env: dict[str, str] | None) -> dict[str, str]:
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "HYPER_PARALLEL_DISABLE_TQDM": "1",
                "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    full_env.update(env or {})
    return full_env


def _run(cmd: list[str], timeout: float, env: dict[str, str] | None, check: bool,
         ) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=REPO, env=_test_env(env), capture_output=True, text=True,
                          timeout=timeout, check=False)
    return _checked(proc) if check else proc


def _checked(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """``proc``, or an AssertionError with its command and output tails if it failed."""
    if proc.returncode != 0:
        raise AssertionError(
            f"exit {proc.returncode}: {' '.join(proc.args)}\n--- stdout ---\n"
            f"{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
        )
    return proc


def run_python(script: str | Path, args: Sequence[str] = (), *, timeout: float = 180,
               env: dict[str, str] | None = None, check: bool = True,
               ) -> subprocess.CompletedProcess:
    """``python script args`` with the environment of :func:`torchrun`'s workers: one rank,
    no launcher (the engine then forms a private 1-rank process group), forked from the fork
    server. Returns what ``subprocess.run`` would: the exit code and the output as text."""
    import tempfile

    cmd = [sys.executable, str(script), *args]
    with tempfile.TemporaryDirectory(prefix="hp_run_") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        proc = _start(script, args, _test_env(env), out, err)
        proc.join(timeout)
        if proc.exitcode is None:
            proc.kill()
            proc.join()
            raise subprocess.TimeoutExpired(cmd, timeout, output=out.read_text(errors="replace"))
        done = subprocess.CompletedProcess(cmd, proc.exitcode, out.read_text(errors="replace"),
                                           err.read_text(errors="replace"))
    return _checked(done) if check else done


def torchrun(
    script: str | Path,
    args: Sequence[str] = (),
    *,
    nproc: int = 2,
    timeout: float = 180,
    env: dict[str, str] | None = None,
    module: bool = False,
    check: bool = True,
) -> subprocess.CompletedProcess:
    """Run ``torchrun --nproc_per_node nproc script args`` and return the completed process.

    With ``check`` a non-zero exit fails with the tail of the output; a run over ``timeout``
    seconds raises ``subprocess.TimeoutExpired`` (a hang is a failure, never a pass).
    """
    _check_multi_rank(f"torchrun --nproc_per_node {nproc} {script}")
    cmd = [
        sys.executable, "-m", "torch.distributed.run",
        "--nproc_per_node", str(nproc),
        "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
    ]
    cmd += ["-m", str(script)] if module else [str(script)]
    cmd += list(args)
    return _run(cmd, timeout, env, check)


#: What rank 0 reports when the rendezvous port it was given was taken before it could bind it.
_PORT_TAKEN = "EADDRINUSE"


def spawn_ranks(script: str | Path, args: Sequence[str] = (), *, nproc: int = 2,
                timeout: float = 180, env: dict[str, str] | None = None) -> None:
    """``nproc`` ranks of ``python script args``, with the environment torchrun gives its
    workers (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, the rendezvous address), but no launcher
    process: for test workers that only need the process group, this saves the launcher's
    seconds of start-up. A rank that fails ends the others (after a grace period for their own
    error); any failure raises with every rank's output tail; a hang raises
    ``subprocess.TimeoutExpired``. The free port is only free when it is picked: another process
    may take it before rank 0 binds it, seconds of imports later; then the job starts again on
    another port (at most twice)."""
    if nproc > 1:
        _check_multi_rank(f"{nproc} ranks of {script}")
    for attempt in range(3):
        try:
            return _spawn_ranks_once(script, args, nproc=nproc, timeout=timeout, env=env)
        except AssertionError as failure:
            if _PORT_TAKEN not in str(failure) or attempt == 2:
                raise


def _spawn_ranks_once(script: str | Path, args: Sequence[str], *, nproc: int, timeout: float,
                      env: dict[str, str] | None) -> None:
    import tempfile
    import time

    port = str(free_port())
    procs, logs = [], []
    with tempfile.TemporaryDirectory(prefix="hp_ranks_") as folder:
        for rank in range(nproc):
            rank_env = {**(env or {}), "RANK": str(rank), "LOCAL_RANK": str(rank),
                        "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc),
                        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
            logs.append(Path(folder) / f"rank{rank}.log")
            procs.append(_start(script, args, _test_env(rank_env), logs[-1]))
        deadline, failed_at = time.monotonic() + timeout, None
        try:
            while any(p.exitcode is None for p in procs):
                now = time.monotonic()
                if failed_at is None and any(p.exitcode not in (None, 0) for p in procs):
                    failed_at = now
                if now > deadline or (failed_at is not None and now - failed_at > 10):
                    break
                time.sleep(0.05)
        finally:
            for p in procs:
                if p.exitcode is None:
                    p.kill()
                    p.join()
        codes = [p.exitcode for p in procs]
        texts = [log.read_text(errors="replace") for log in logs]
    if failed_at is None and time.monotonic() > deadline:
        raise subprocess.TimeoutExpired([str(script), *args], timeout, output="".join(texts))
    if any(codes):
        tails = "\n".join(f"--- rank {r} (exit {c}) ---\n{t[-4000:]}"
                          for r, (c, t) in enumerate(zip(codes, texts)))
        raise AssertionError(f"ranks exited {codes}: {script} {' '.join(args)}\n{tails}")
