"""Run the legacy trainer under torchrun and read back its per-step losses.

Runs are memoised per (yaml, overrides, nproc) for the test session, so tests that need the same
run (the golden file and the layout comparison, say) pay for it once.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

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


_CACHE: dict[tuple, Run] = {}


@pytest.fixture(scope="session")
def cached_train():
    """``cached_train(yaml_name, *overrides, nproc=N)`` — one torchrun per distinct call."""

    def run(yaml_name: str, *overrides: str, nproc: int = 1) -> Run:
        key = (yaml_name, overrides, nproc)
        if key not in _CACHE:
            _CACHE[key] = train(yaml_name, *overrides, nproc=nproc)
        return _CACHE[key]

    yield run
    for result in _CACHE.values():
        shutil.rmtree(result.output_dir, ignore_errors=True)
    _CACHE.clear()
