"""Run the legacy trainer under torchrun and read back its per-step losses.

Runs are memoised per (yaml, overrides, nproc) for the test session -- across its xdist workers
too -- so tests that need the same run (the golden file and the layout comparison, say) pay for
it once; ``run_once`` does the same for a module's own torchrun jobs.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.session_cache import SessionCache, session_cache
from tests.helpers.torchrun import REPO, torchrun

TRAIN_SCRIPT = REPO / "scripts" / "train_lm.py"
EXAMPLES = REPO / "examples" / "yaml"


@dataclass
class Run:
    output_dir: Path
    losses: list[float]
    grad_norms: list[float]
    stdout: str
    stderr: str


def read_metrics(output_dir: Path) -> list[dict]:
    path = output_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def train(yaml_name: str, *overrides: str, nproc: int = 1, output_dir: Path | None = None,
          env: dict | None = None, timeout: float = 300) -> Run:
    """``torchrun scripts/train_lm.py examples/yaml/<yaml_name> --train.logging.log_steps=1 ...``."""
    output_dir = output_dir or Path(tempfile.mkdtemp(prefix="hp_st_"))
    args = [str(EXAMPLES / yaml_name), f"--train.checkpoint.output_dir={output_dir}",
            "--train.logging.log_steps=1", *overrides]
    proc = torchrun(TRAIN_SCRIPT, args, nproc=nproc, timeout=timeout, env=env)
    records = [r for r in read_metrics(output_dir) if "loss" in r]
    return Run(output_dir, [r["loss"] for r in records], [r["grad_norm"] for r in records],
               proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def run_once(request, tmp_path_factory) -> SessionCache:
    """``run_once.get(key, make)`` — ``make(folder)``'s JSON result, made once per test session
    and shared by its xdist workers (see :mod:`tests.helpers.session_cache`): for a module's
    torchrun jobs that tests on either worker read."""
    return session_cache(request.config, tmp_path_factory, "run_once")


@pytest.fixture(scope="session")
def cached_train(run_once):
    """``cached_train(yaml_name, *overrides, nproc=N)`` — one torchrun per distinct call and
    test session, shared by the xdist workers of the session: the first to ask for a run makes
    it and records it; the others wait and read it."""

    def make(yaml_name: str, overrides: tuple, nproc: int, folder: Path) -> dict:
        result = train(yaml_name, *overrides, nproc=nproc, output_dir=folder)
        return {**dataclasses.asdict(result), "output_dir": str(result.output_dir)}

    def run(yaml_name: str, *overrides: str, nproc: int = 1) -> Run:
        data = run_once.get(("train", yaml_name, overrides, nproc),
                            lambda folder: make(yaml_name, overrides, nproc, folder))
        return Run(**{**data, "output_dir": Path(data["output_dir"])})

    return run
