"""The stand-ins of ``tests/helpers/cluster_standins.py`` (the 2-node test of the batch script in
``make test``) against the real Slurm: the same batch script starts ``srun`` with a probe task
(``signal_probe.py``: a process and a child, recording each signal they get), and each way
the generated script (or a user) signals a step gives the same outcome on both: srun's exit
status, its "forcing job termination", and which signals reached the task and its child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cluster_standins
from tests.slurm.conftest import REPO, job_fields, needs_slurm, slurm_command, wait_until

pytestmark = needs_slurm

PROBE = Path(__file__).with_name("signal_probe.py")

SCRIPT = """#!/bin/bash
srun --nodes=1 --ntasks-per-node=1 --cpus-per-task=1 {python} {probe} {folder} &
echo $! > {folder}/srun.pid
wait $!
echo $? > {folder}/srun.status
"""


def _outcome(folder: Path, output: str) -> tuple:
    return (int((folder / "srun.status").read_text()),
            "forcing job termination" in output,
            sorted(p.name for p in folder.iterdir()
                   if p.name.startswith(("task.SIG", "child.SIG"))))


def _signal(action: str, folder: Path, env: dict[str, str], job: str) -> None:
    if action == "SIGTERM to srun":
        os.kill(int((folder / "srun.pid").read_text()), signal.SIGTERM)
    else:  # what the generated script does at the time limit
        subprocess.run(["scancel", "--signal=TERM", job], env=env, check=True, timeout=60)


def _ready(folder: Path) -> bool:
    return all((folder / name).exists() for name in ("task.ready", "child.ready", "srun.pid"))


def _real(slurm: dict[str, str], folder: Path, action: str, python: str) -> tuple:
    folder.mkdir()
    script = folder / "job.sh"
    script.write_text(SCRIPT.format(python=python, probe=PROBE, folder=folder))
    out = folder / "job.out"
    job = slurm_command(slurm, "sbatch", "--parsable", f"--output={out}", f"--chdir={REPO}",
                        str(script)).strip()
    env = {**os.environ, **slurm}
    wait_until(lambda: _ready(folder), 120, "the probe running", lambda: out.read_text())
    _signal(action, folder, env, job)
    wait_until(lambda: job_fields(slurm, job)["JobState"] in ("COMPLETED", "FAILED"), 120,
               "the probe job ended", lambda: out.read_text())
    return _outcome(folder, out.read_text())


def _standin(tmp_path: Path, folder: Path, action: str, python: str) -> tuple:
    folder.mkdir()
    standins = cluster_standins.install(tmp_path / "bin")
    script = folder / "job.sh"
    script.write_text(SCRIPT.format(python=python, probe=PROBE, folder=folder))
    env = {**os.environ, **cluster_standins.slurm_env(standins, nodes=1)}
    proc = subprocess.Popen(["bash", str(script)], env=env, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: _ready(folder), 120, "the probe running")
    _signal(action, folder, env, "4242")
    _, err = proc.communicate(timeout=120)
    return _outcome(folder, err)


@pytest.mark.parametrize("action", ["SIGTERM to srun", "scancel --signal=TERM JOB"])
def test_the_standins_answer_a_signal_as_slurm_does(slurm, tmp_path, action):
    python = sys.executable
    real = _real(slurm, tmp_path / "real", action, python)
    standin = _standin(tmp_path, tmp_path / "standin", action, python)
    assert standin == real
    if action == "SIGTERM to srun":
        # The trap the batch script must not fall into: the tasks are killed.
        assert real == (137, True, [])
    else:
        # The step's tasks, all of their processes, get SIGTERM; srun is left alone.
        assert real == (0, False, ["child.SIGTERM", "task.SIGTERM"])
