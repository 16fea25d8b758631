"""The real Slurm of ``make test-slurm``: a one-node cluster on this machine (slurmctld,
slurmd, munged; ``scripts/slurm_cluster.sh``), started for the session and stopped after it.

These tests run only when ``HYPER_PARALLEL_TEST_SLURM=1`` (``make test-slurm`` sets it: it
needs root, and apt where Slurm is not installed); ``make test`` skips them.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENABLED = os.environ.get("HYPER_PARALLEL_TEST_SLURM") == "1"
#: Every module here: skipped unless asked for.
needs_slurm = pytest.mark.skipif(
    not ENABLED, reason="the real one-node Slurm cluster: run `make test-slurm` (root, apt)")


@pytest.fixture(scope="session")
def slurm(tmp_path_factory) -> dict[str, str]:
    """The cluster's environment for its clients (``SLURM_CONF``); its daemons stop after the
    session, whatever the tests did."""
    if os.geteuid() != 0:
        pytest.fail("make test-slurm needs root: it installs slurm-wlm and runs slurmd")
    folder = tmp_path_factory.mktemp("slurm")
    script = REPO / "scripts" / "slurm_cluster.sh"
    started = subprocess.run([str(script), "start", str(folder)], capture_output=True, text=True,
                             timeout=600, check=False)
    try:
        assert started.returncode == 0, f"the cluster did not start:\n{started.stderr}"
        yield {"SLURM_CONF": str(folder / "slurm.conf")}
    finally:
        subprocess.run([str(script), "stop", str(folder)], timeout=120, check=False)


def slurm_command(env: dict[str, str], *argv: str) -> str:
    """A Slurm client's output (``scontrol ...``), with the cluster's configuration."""
    done = subprocess.run(list(argv), env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr}"
    return done.stdout


def job_fields(env: dict[str, str], job: str) -> dict[str, str]:
    """``scontrol show job`` as a dict (JobState, Restarts, Reason, ...)."""
    text = slurm_command(env, "scontrol", "show", "job", "-o", job)
    return dict(re.findall(r"(\w+)=(\S*)", text))


def wait_until(condition: Callable[[], bool], seconds: float, what: str,
               show: Callable[[], str] = lambda: "") -> None:
    """Poll ``condition`` until it holds; after ``seconds`` (a hang, not a timing) fail with
    ``what`` and ``show()``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not in {seconds:.0f} s\n{show()}")
        time.sleep(0.5)
