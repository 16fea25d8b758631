"""What the end-to-end tests share: the example YAMLs, the legacy entry script, a run's metrics,
and ``run_once`` for a module's own torchrun jobs.

Training runs that compare layouts or entries go through the layout harness
(:mod:`tests.helpers.layout`, fixture ``layouts``); tests that drive the command line itself
(faults, resumes across entries) launch it with :mod:`tests.helpers.torchrun`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.session_cache import SessionCache, session_cache
from tests.helpers.torchrun import REPO

TRAIN_SCRIPT = REPO / "scripts" / "train_lm.py"
EXAMPLES = REPO / "examples" / "yaml"


def read_metrics(output_dir: Path) -> list[dict]:
    path = output_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def run_once(request, tmp_path_factory) -> SessionCache:
    """``run_once.get(key, make)`` — ``make(folder)``'s JSON result, made once per test session
    and shared by its xdist workers (see :mod:`tests.helpers.session_cache`): for a module's
    torchrun jobs that tests on either worker read."""
    return session_cache(request.config, tmp_path_factory, "run_once")
