"""One trainer run under ``torchrun`` for the benchmarks: its ``metrics.jsonl`` rows, its wall
time, or the line that says why it failed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 600


def error_line(text: str) -> str:
    """The last line that says why a run failed: the trainer's ``training failed:`` log line,
    a command-line ``error:``, else the last exception line of a traceback; else the root cause
    of torchrun's report of a failed worker (a rank killed by a signal prints nothing else);
    else the last line. torchrun's report itself (its ``ChildFailedError`` and what follows)
    is never the reason: the worker's own lines come before it."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cut = next((i for i, line in enumerate(lines) if "ChildFailedError" in line), len(lines))
    lines, report = lines[:cut], lines[cut:]
    for pattern in (r"training failed: (.*)", r"^error: (.*)",
                    r"^((?:[\w.]+\.)?\w*(?:Error|Exception|Interrupt)\b.*)"):
        hits = [m.group(1) for m in map(re.compile(pattern).search, lines) if m]
        if hits:
            return hits[-1][:500]
    exits = [line for line in report if line.startswith("exitcode")]
    if exits:
        return f"a rank failed: {exits[-1]}"[:500]
    return (lines or report)[-1][:500] if lines or report else "(no output)"


def torchrun_command(nproc: int) -> list[str]:
    """``torchrun --standalone --nproc_per_node nproc``, to be followed by what it runs."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node", str(nproc)]


def launcher_command(nproc: int) -> list[str]:
    """What starts ``nproc`` ranks: torchrun, or for one rank plain ``python`` (the trainer
    then forms its private 1-rank process group), which spares the launcher process and its
    1-2 CPU seconds of imports and changes nothing a step measures."""
    return torchrun_command(nproc) if nproc > 1 else [sys.executable]


def launch_env(threads: int = 1) -> dict[str, str]:
    """The environment of a benchmarked process: ``threads`` intra-op threads, no progress
    bars, the repository importable."""
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "HYPER_PARALLEL_DISABLE_TQDM": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def run_trainer(args: list[str], nproc: int, metrics: Path, *, threads: int = 1) -> dict:
    """``torchrun --standalone --nproc_per_node nproc -m hyper_parallel.train args`` (one rank:
    ``python -m ...``, :func:`launcher_command`) with ``threads`` intra-op threads a rank:
    ``{"rows": the metrics rows of the steps, "process_wall_s": ...}``, or ``{"error": ...,
    "returncode": ...}``."""
    cmd = [*launcher_command(nproc), "-m", "hyper_parallel.train", *args]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=launch_env(threads), capture_output=True,
                              text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {TIMEOUT_S} s"}
    wall = time.perf_counter() - start
    if proc.returncode != 0 or not metrics.exists():
        return {"error": error_line(proc.stderr + proc.stdout), "returncode": proc.returncode}
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return {"rows": [r for r in rows if "step_time" in r], "process_wall_s": round(wall, 2)}


__all__ = ["REPO", "TIMEOUT_S", "error_line", "launch_env", "launcher_command", "run_trainer",
           "torchrun_command"]
