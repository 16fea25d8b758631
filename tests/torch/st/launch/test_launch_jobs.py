"""The generated jobs, run for real on this machine (CPU, gloo over loopback), each training
the losses of the same recipe's run without any launcher, bit for bit (the reference: the layout
harness's run of the recipe on 2 ranks, ``tests/helpers/layout.py``, which also serves
``tests/torch/st/qwen3_5/test_worker_restart.py``, where the generated torchrun script of one
node runs, is killed and restarted):

* the Slurm batch script, its ``srun`` / ``scancel`` / ``scontrol`` stand-ins (which answer
  signals as the real ones do, see ``tests/helpers/cluster_standins.py``) starting 2 "nodes" x
  1 rank here: the time limit's USR1 reaches the batch shell in the middle of the run (both
  ranks hold at the start of step 3 until the stop request does), the script has SIGTERM sent
  to the step's tasks, the training writes its checkpoint and stops, the script asks to be
  requeued; the same script run again resumes from that checkpoint
  (``checkpoint.resume_latest``) and the two runs' losses are the reference's, bit for bit;
  each start logs to its own file beside the checkpoints (the real one-node Slurm runs the same
  script in ``tests/slurm/``);
* the Kubernetes TrainJob's pod command, run twice with the variables the Kubeflow Trainer
  torch runtime sets (``PET_*``), its checkpoints on the "volume": the reference losses again.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import cluster_standins
from tests.helpers.layout import Case, Layout
from tests.helpers.torchrun import REPO, free_port
from tests.helpers.warm_python import warm_python

pytestmark = pytest.mark.slow

STEPS = 4
#: The FSDP 2 debug recipe on the tiny flavor (every layer kind): what these jobs check is the
#: launch -- the scheduler's environment, the stop, the requeue, the restart, the resume --
#: and the losses of one run bit for bit; the debug model's 8 wide layers would only make each
#: of the suite's runs of it cost several CPU seconds more.
RECIPE = ("--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_fsdp2",
          "--model.config_overrides={flavor: tiny}", f"--training.steps={STEPS}",
          "--checkpoint.interval=100")
FAULT = "HYPER_PARALLEL_FAULT_INJECT"


def launch(tmp_path: Path, name: str, *options: str, recipe=RECIPE) -> Path:
    """``python -m hyper_parallel.launch`` writing the job to ``tmp_path/name`` (dry run; the
    process forked warm, torch imported: the script it writes is what a fresh one writes)."""
    out = tmp_path / name
    done = subprocess.run(
        [warm_python(), "-m", "hyper_parallel.launch", *recipe, "--dry-run", "--no-preflight",
         "--omp-threads=1", "--workdir", str(REPO), "-o", str(out), *options],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return out


def losses(folder: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records if "loss" in r}


def run_env(extra: dict | None = None) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYPER_PARALLEL_DISABLE_TQDM": "1",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    env.pop(FAULT, None)
    env.update(extra or {})
    return env


def finish(proc: subprocess.Popen, log: Path, timeout: float = 240) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"the job hung:\n{log.read_text()[-6000:]}") from None


def standalone_losses(tmp: Path) -> dict[int, float]:
    """The losses of the torchrun script of one node of 2 ranks, run here (``tests/slurm``'s
    reference)."""
    tmp.mkdir(parents=True)
    script = launch(tmp, "run.sh", "--scheduler=torchrun", "--gpus-per-node=2",
                    recipe=RECIPE + (f"--dump_folder={tmp / 'run'}",))
    assert "--standalone" in script.read_text()
    log = tmp / "run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", str(script)], env=run_env(), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    assert finish(proc, log) == 0, log.read_text()[-4000:]
    found = losses(tmp / "run" / "checkpoint")
    assert sorted(found) == list(range(1, STEPS + 1))
    return found


@pytest.fixture
def reference(layouts) -> dict[int, float]:
    """The losses of the recipe's run on 2 ranks (FSDP 2) without a launcher: the layout
    harness's, made once per session and shared by the xdist workers. The same figures as the
    generated torchrun script's (``standalone_losses``), to the bit, at a fraction of the cost:
    forked ranks, no launcher, no fresh interpreters."""
    run = layouts.run_cases({"reference": Case(RECIPE, Layout(dp_shard=2),
                                               argv_sets_layout=True)}, params=False)["reference"]
    assert run.error is None and run.steps == list(range(1, STEPS + 1)), (run.error, run.steps)
    return dict(zip(run.steps, run.losses))


def test_the_slurm_script_trains_stops_at_the_limit_requeues_and_resumes(tmp_path, reference):
    standins = cluster_standins.install(tmp_path / "bin")
    run = tmp_path / "run"
    folder = run / "checkpoint"
    script = launch(tmp_path, "job.sbatch", "--scheduler=slurm", "--gpus-per-node=1",
                    f"--rdzv-port={free_port()}", "--stop-grace=60",
                    recipe=RECIPE + (f"--dump_folder={run}",))
    text = script.read_text()
    assert "#SBATCH --nodes=2" in text and "#SBATCH --signal=B:USR1@60" in text
    assert "#SBATCH --cpus-per-task=1" in text  # --omp-threads 1, no loader workers
    assert "--checkpoint.resume_latest=true" in text

    # The first start: the time limit's USR1 to the batch shell while both ranks wait at step 3.
    env = {**run_env(), **cluster_standins.slurm_env(standins, nodes=2)}
    out = tmp_path / "first.out"
    with open(out, "w") as stdout:
        proc = subprocess.Popen(["bash", str(script)], env={**env, FAULT: "hold_at_step:3"},
                                stdout=stdout, stderr=subprocess.STDOUT, start_new_session=True)
    log = folder / "slurm-4242-0.log"
    _wait_for(log, proc, lambda: _held(log, 3))
    proc.send_signal(signal.SIGUSR1)
    assert finish(proc, log) != 0
    first = log.read_text()
    assert "training stopped by SIGTERM after step 3" in first, first[-4000:]
    assert "requeueing it to resume from its newest checkpoint" in first
    # SIGTERM went to the step's tasks (from "slurmd"), not to srun, which would kill them.
    assert "forcing job termination" not in first
    assert cluster_standins.calls(standins)[-2:] == ["scancel --signal=TERM 4242",
                                                     "scontrol requeue 4242"]
    assert (folder / "step_3").is_dir()
    srun = next(c for c in cluster_standins.calls(standins) if c.startswith("srun"))
    assert srun.startswith("srun --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 ")
    # The batch shell's own output names the start's log; nothing else goes there.
    assert out.read_text() == f"job 4242, start 0: logging to {log}\n"

    # The requeued start: the same script, nothing edited; its own log.
    env = {**run_env(), **cluster_standins.slurm_env(standins, nodes=2, restarts=1)}
    with open(tmp_path / "second.out", "w") as stdout:
        proc = subprocess.Popen(["bash", str(script)], env=env, stdout=stdout,
                                stderr=subprocess.STDOUT, start_new_session=True)
    log = folder / "slurm-4242-1.log"
    assert finish(proc, log) == 0, log.read_text()[-4000:]
    second = log.read_text()
    assert f"resuming from {folder / 'step_3'}" in second, second[-4000:]
    assert losses(folder) == reference


def test_a_stopped_srun_kills_its_tasks_as_the_real_one_does(tmp_path):
    """What the script must not rely on: SIGTERM to srun is SIGKILL to its tasks (the real
    srun's _forward_signal; tests/slurm/ shows it on the real one)."""
    standins = cluster_standins.install(tmp_path / "bin")
    env = {**os.environ, **cluster_standins.slurm_env(standins, nodes=2)}
    ready = tmp_path / "ready"
    task = ("import os, pathlib, signal, time; signal.signal(signal.SIGTERM, lambda *a: None); "
            f"pathlib.Path({str(ready)!r}, os.environ['SLURM_PROCID']).touch(); time.sleep(60)")
    ready.mkdir()
    proc = subprocess.Popen(["srun", "--nodes=2", sys.executable, "-c", task], env=env,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while len(list(ready.iterdir())) < 2 and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 137 and "srun: forcing job termination" in err, err
    assert "task 0: Killed" in err


def _held(log: Path, step: int, ranks: int = 2) -> bool:
    text = log.read_text(errors="replace") if log.exists() else ""
    return len(set(re.findall(rf"fault injection: hold on rank (\d) at step {step} ", text))) \
        == ranks


def _wait_for(log: Path, proc: subprocess.Popen, condition) -> None:
    deadline = time.time() + 180
    while time.time() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text() if log.exists() else "(no log)"
    raise AssertionError(f"the job never got there:\n{text[-6000:]}")


def test_the_kubernetes_pods_command_trains_with_the_operators_environment(tmp_path, reference):
    volume = tmp_path / "volume"
    manifest = launch(tmp_path, "job.yaml", "--scheduler=kubernetes", "--gpus-per-node=1",
                      "--image=registry.example/hyper-parallel:1", "--volume-claim=ckpt",
                      f"--volume-mount={volume}")
    document = yaml.safe_load(manifest.read_text())
    from hyper_parallel.launch.kubernetes import validate

    validate(document)  # Kubeflow Trainer's own models read it whole
    trainer = document["spec"]["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 1)
    assert trainer["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": "1"}
    port = str(free_port())
    pod_env = {item["name"]: item["value"] for item in trainer["env"]}
    pods = []
    for node in range(2):
        # What the torch runtime sets in each node's pod; the image's working directory is the
        # project (here: the repository).
        env = run_env({**pod_env, "OMP_NUM_THREADS": "1", "PET_NNODES": "2",
                       "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": str(node),
                       "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": port})
        log = tmp_path / f"pod{node}.log"
        with open(log, "w") as out:
            pods.append((subprocess.Popen(trainer["command"], cwd=REPO, env=env, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True),
                         log))
    for proc, log in pods:
        assert finish(proc, log) == 0, log.read_text()[-4000:]
    folder = volume / "outputs" / "qwen3_5_v2_debugmodel_fsdp2" / "checkpoint"
    assert losses(folder) == reference
