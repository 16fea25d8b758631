"""Launch a script under torchrun (CPU, gloo), or alone for one rank, from a test; fail loudly on
a hang."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


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
    if check and proc.returncode != 0:
        raise AssertionError(
            f"exit {proc.returncode}: {' '.join(cmd)}\n--- stdout ---\n"
            f"{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
        )
    return proc


def run_python(script: str | Path, args: Sequence[str] = (), *, timeout: float = 180,
               env: dict[str, str] | None = None, check: bool = True,
               ) -> subprocess.CompletedProcess:
    """``python script args`` with the environment of :func:`torchrun`'s workers: one rank,
    no launcher (the engine then forms a private 1-rank process group)."""
    return _run([sys.executable, str(script), *args], timeout, env, check)


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
            log = open(Path(folder) / f"rank{rank}.log", "w+")  # noqa: SIM115 - closed below
            logs.append(log)
            procs.append(subprocess.Popen([sys.executable, str(script), *args], cwd=REPO,
                                          env=_test_env(rank_env), stdout=log,
                                          stderr=subprocess.STDOUT))
        deadline, failed_at = time.monotonic() + timeout, None
        try:
            while any(p.poll() is None for p in procs):
                now = time.monotonic()
                if failed_at is None and any(p.returncode not in (None, 0) for p in procs):
                    failed_at = now
                if now > deadline or (failed_at is not None and now - failed_at > 10):
                    break
                time.sleep(0.05)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        codes = [p.returncode for p in procs]
        texts = []
        for log in logs:
            log.seek(0)
            texts.append(log.read())
            log.close()
    if failed_at is None and time.monotonic() > deadline:
        raise subprocess.TimeoutExpired([str(script), *args], timeout, output="".join(texts))
    if any(codes):
        tails = "\n".join(f"--- rank {r} (exit {c}) ---\n{t[-4000:]}"
                          for r, (c, t) in enumerate(zip(codes, texts)))
        raise AssertionError(f"ranks exited {codes}: {script} {' '.join(args)}\n{tails}")
