"""A worker that dies mid-run is survived: torchrun restarts the job's workers, they form their
process group again, resume from the newest checkpoint, and the run's losses are the
uninterrupted run's, bit for bit.

* The generated torchrun job (``python -m hyper_parallel.launch --scheduler torchrun``: one node
  of 2 CPU ranks, the launch suite's fsdp2 debug recipe on the tiny flavor, a checkpoint every
  2 steps, ``--max-restarts 1``): rank 1 SIGKILLs itself at the start of step 3 of the first
  attempt and joins the restarted attempt 3 s after rank 0. Before the fix rank 0 could then read rank 1's dead address from torchrun's
  store: "connection refused" lost the restart, or gloo's connect waited five times the timeout
  in silence. The job resumes from step_2 and ends with the losses of the launch suite's
  uninterrupted run of the same recipe (shared through the session cache).
* A plain torchrun of 4 ranks with either rendezvous that keeps its store across restarts
  (``--standalone`` without the job's environment, and the static rendezvous of
  ``--master-addr/--master-port``, which the Kubernetes job runs): rank 1 is killed, and the
  restarted ranks 1-3 join one after another, each after ranks that read its dead address
  before the fix. The group forms again in the restarted attempt.
* A rank whose peer does not join within the bound ends, naming what it waited for.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.torchrun import REPO, free_port
from tests.torch.st.launch import test_launch_jobs as launch_jobs
from tests.torch.st.launch.test_launch_jobs import FAULT, RECIPE, finish, launch, losses, run_env

pytestmark = pytest.mark.slow

WORKER = Path(__file__).parent / "workers" / "rejoin_worker.py"
#: What the generated jobs set for torchrun; the plain runs go without it.
FRESH_STORE_ENV = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"

#: The launch suite's fixture: the losses of the uninterrupted run of the same recipe (the layout
#: harness's, without a launcher), made once per session for both modules.
reference = launch_jobs.reference


def test_a_killed_worker_is_restarted_from_the_newest_checkpoint_with_the_same_losses(
        tmp_path, reference):
    run = tmp_path / "run"
    script = launch(tmp_path, "run.sh", "--scheduler=torchrun", "--gpus-per-node=2",
                    "--max-restarts=1",
                    recipe=RECIPE + ("--checkpoint.interval=2", f"--dump_folder={run}"))
    assert "--standalone" in script.read_text() and "--max-restarts=1" in script.read_text()
    log = tmp_path / "run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            ["bash", str(script)], env=run_env({FAULT: "sigkill_at_step:3:1:0,late_join:3:1:1"}),
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    code = finish(proc, log, timeout=300)
    text = log.read_text(errors="replace")
    assert code == 0, text[-6000:]
    assert "fault injection: sigkill on rank 1 at step 3" in text
    assert f"resuming from {run / 'checkpoint' / 'step_2'}" in text, text[-6000:]
    steps = [int(step) for step in re.findall(r"step (\d+)/4 \| loss", text)]
    assert steps == [1, 2, 3, 4], steps  # step 3 trained once: in the restarted attempt
    assert losses(run / "checkpoint") == reference


def _plain_torchrun(rendezvous: list[str], nproc: int, fault: str, timeout_s: int,
                    *, max_restarts: int) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
           f"--max-restarts={max_restarts}", *rendezvous, str(WORKER), str(timeout_s)]
    env = run_env({FAULT: fault, "PYTHONPATH": str(REPO)})
    env.pop(FRESH_STORE_ENV, None)
    try:
        return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=240, check=False)
    except subprocess.TimeoutExpired as hung:
        raise AssertionError(f"the job hung:\n{str(hung.stdout)[-6000:]}") from None


@pytest.mark.parametrize("rendezvous", ["standalone", "static"])
def test_a_plain_torchrun_restart_forms_the_group_again_whoever_joins_first(rendezvous):
    args = (["--standalone"] if rendezvous == "standalone" else
            ["--master-addr=127.0.0.1", f"--master-port={free_port()}"])
    fault = "sigkill_at_step:1:1:0," + ",".join(f"late_join:{2 * r}:{r}:1" for r in (1, 2, 3))
    done = _plain_torchrun(args, 4, fault, 30, max_restarts=1)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-6000:]
    assert "fault injection: sigkill on rank 1 at step 1" in text
    joined = set(re.findall(r"rank (\d) attempt 1: joined, sum 4", text))
    assert joined == {"0", "1", "2", "3"}, text[-6000:]


def test_a_rank_whose_peer_never_joins_ends_within_the_bound_saying_what_it_waited_for():
    # Rank 1 joins 120 s late; the bound is 5 s, so rank 0 (or rank 1 itself) ends the job.
    done = _plain_torchrun(["--standalone"], 2, "late_join:120:1", 5, max_restarts=0)
    text = done.stdout + done.stderr
    assert done.returncode != 0
    assert re.search(r"rank \d: training failed: ProcessGroupJoinError: joining the job's "
                     r"process group \(2 ranks meeting at \S+, attempt 0\)", text), text[-6000:]
