"""Run the legacy trainer under torchrun and read back its per-step losses.

Runs are memoised per (yaml, overrides, nproc) for the test session -- across its xdist workers
too -- so tests that need the same run (the golden file and the layout comparison, say) pay for
it once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
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


@pytest.fixture(scope="session")
def cached_train(tmp_path_factory, worker_id):
    """``cached_train(yaml_name, *overrides, nproc=N)`` — one torchrun per distinct call and
    test session, shared by the xdist workers of the session: the first to ask for a run makes
    it (holding a file lock) and records it; the others wait and read it."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker's basetemp is a folder of the session's own; its parent is shared
    # by the session's workers and by nothing else.
    root = (base if worker_id == "master" else base.parent) / "cached_train"
    root.mkdir(exist_ok=True)

    def run(yaml_name: str, *overrides: str, nproc: int = 1) -> Run:
        key = hashlib.sha256(repr((yaml_name, overrides, nproc)).encode()).hexdigest()[:16]
        folder, record = root / key, root / f"{key}.json"
        with FileLock(str(root / f"{key}.lock")):
            if not record.exists():
                result = train(yaml_name, *overrides, nproc=nproc, output_dir=folder)
                record.write_text(json.dumps({**dataclasses.asdict(result),
                                              "output_dir": str(result.output_dir)}))
        data = json.loads(record.read_text())
        return Run(**{**data, "output_dir": Path(data["output_dir"])})

    return run
