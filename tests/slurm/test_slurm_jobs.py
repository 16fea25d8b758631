"""The generated Slurm script on the real Slurm (22.05, one node, ``make test-slurm``), as a user
submits it: ``python -m hyper_parallel.launch ... --scheduler slurm`` writes and ``sbatch``-es
it; 2 ranks (one node's two "GPUs") over gloo, the fsdp2 debug recipe on the tiny flavor.

* The time limit: ``--time=2 --stop-grace=20``, so Slurm itself sends the batch shell USR1
  (``--signal=B:USR1@20``) while both ranks (each with a loader worker, which Slurm signals
  too) wait at the start of step 3; the training finishes
  the step, writes its checkpoint and stops, the job is requeued, and once started again (the
  test cluster holds a requeued job 11 s, its ``cred_expire`` plus one) resumes from step 3; the losses
  are a one-node torchrun run's, bit for bit. Each start logged to its own file beside the
  checkpoints.
* A user's plain ``scancel`` while the ranks wait at step 2: the training writes its checkpoint
  within KillWait, and the job ends, cancelled, never requeued.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.slurm.conftest import REPO, job_fields, needs_slurm, slurm_command, wait_until
from tests.torch.st.launch.test_launch_jobs import (
    FAULT,
    RECIPE,
    losses,
    run_env,
    standalone_losses,
)

pytestmark = needs_slurm

#: The job's name (``%x``), from the recipe's.
NAME = "qwen3-5-v2-debugmodel-fsdp2"


def submit(slurm: dict[str, str], tmp_path: Path, *options: str,
           fault: str | None = None) -> tuple[str, Path]:
    """The launch without ``--dry-run``: the job written to ``tmp_path/job.sbatch`` and submitted
    (running in ``tmp_path``); its id and its checkpoint folder."""
    run = tmp_path / "run"
    env = {**run_env(), **slurm, **({FAULT: fault} if fault else {})}
    done = subprocess.run(
        [sys.executable, "-m", "hyper_parallel.launch", *RECIPE, f"--dump_folder={run}",
         "--scheduler=slurm", "--gpus-per-node=2", "--no-preflight", "--omp-threads=1",
         f"--workdir={tmp_path}", "-o", str(tmp_path / "job.sbatch"), *options],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return re.search(r"Submitted batch job (\d+)", done.stdout).group(1), run / "checkpoint"


def held(log: Path, step: int) -> bool:
    """Both ranks wait at the start of ``step`` (``hold_at_step``) for a stop request."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return len(set(re.findall(rf"fault injection: hold on rank (\d) at step {step} ", text))) == 2


def tail(path: Path) -> str:
    return path.read_text(errors="replace")[-6000:] if path.exists() else f"(no {path})"


def test_the_time_limit_stops_the_training_at_a_step_and_the_requeued_job_resumes(slurm,
                                                                                 tmp_path):
    # A loader worker a rank: Slurm signals it too (it must not take the rank down with it).
    job, folder = submit(slurm, tmp_path, "--time=2", "--stop-grace=20", "--cpus-per-gpu=1",
                         "--dataloader.num_workers=1", fault="hold_at_step:3")
    text = (tmp_path / "job.sbatch").read_text()
    assert "#SBATCH --signal=B:USR1@20" in text and "#SBATCH --cpus-per-task=2" in text
    first = folder / f"slurm-{job}-0.log"
    wait_until(lambda: held(first, 3), 240, "both ranks at step 3", lambda: tail(first))
    # The reference, while the job's ranks wait for the time limit's signal (70-100 s in).
    reference = standalone_losses(tmp_path / "reference")

    def requeued() -> bool:
        fields = job_fields(slurm, job)
        return fields["JobState"] == "PENDING" and fields["Restarts"] == "1"

    wait_until(requeued, 240, "the job stopped and requeued",
               lambda: f"{job_fields(slurm, job)}\n{tail(first)}")
    log = first.read_text()
    assert "the time limit is 20 s away (USR1)" in log, log[-6000:]
    assert "training stopped by SIGTERM after step 3" in log, log[-6000:]
    # SIGTERM reached the tasks from slurmd: srun did not turn it into SIGKILL.
    assert "forcing job termination" not in log and "Killed" not in log, log[-6000:]
    assert "requeueing it to resume from its newest checkpoint" in log
    assert (folder / "step_3").is_dir()

    second = folder / f"slurm-{job}-1.log"
    wait_until(lambda: job_fields(slurm, job)["JobState"] == "COMPLETED", 300,
               "the requeued job finished",
               lambda: f"{job_fields(slurm, job)}\n{tail(second)}\n"
                       f"{tail(tmp_path / f'slurm-{NAME}-{job}.out')}")
    assert f"resuming from {folder / 'step_3'}" in second.read_text(), tail(second)
    assert losses(folder) == reference
    # One log a start beside the checkpoints; Slurm's own file in the working directory
    # names them and holds no training output.
    assert sorted(p.name for p in folder.glob("slurm-*.log")) == [first.name, second.name]
    own = (tmp_path / f"slurm-{NAME}-{job}.out").read_text()
    assert f"logging to {first}" in own and f"logging to {second}" in own, own
    assert "step 1/4" not in own, own


def test_a_users_cancel_ends_the_job_after_its_checkpoint(slurm, tmp_path):
    job, folder = submit(slurm, tmp_path, fault="hold_at_step:2")
    log = folder / f"slurm-{job}-0.log"
    wait_until(lambda: held(log, 2), 240, "both ranks at step 2", lambda: tail(log))
    slurm_command(slurm, "scancel", job)
    # Ended: CANCELLED, no longer COMPLETING (the batch shell has exited); a requeue asked by
    # the script would have been recorded by then.
    wait_until(lambda: job_fields(slurm, job)["JobState"] == "CANCELLED", 120,
               "the cancelled job ended", lambda: f"{job_fields(slurm, job)}\n{tail(log)}")
    fields = job_fields(slurm, job)
    assert fields["Restarts"] == "0", fields
    text = log.read_text()
    assert "training stopped by SIGTERM after step 2" in text, text[-6000:]
    assert (folder / "step_2").is_dir()
    assert "SIGTERM from Slurm" in text and "requeueing" not in text, text[-6000:]
