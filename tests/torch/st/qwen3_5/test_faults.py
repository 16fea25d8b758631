"""The fault suite: a fault ends the job fast, says why, and costs at most the steps since the
last checkpoint.

One 10-step run of the debug YAML on the tiny flavor on 2 CPU ranks (FSDP 2, gloo, a checkpoint
every 2 steps) is interrupted by one fault after another; each launch resumes from what the previous one left and
is itself the next fault's victim. After every launch the test asserts how fast the job ended,
what it said first, which checkpoints exist, and that every step trained so far has the loss of
the uninterrupted run bit for bit. The last launch finishes the run: ``metrics.jsonl`` then holds
each of the 10 steps exactly once, with the uninterrupted run's losses.

    fault                                   left behind        resumed from
    rank 1 raises at step 3                 step_2             step_2
    rank 0 SIGKILLed at step 5              step_4             step_4
    rank 1 (only) gets SIGTERM at step 5    step_5 (on stop)   step_5
    killed while saving step 8              .step_8.tmp        step_6
    step_6's shard truncated                (clear error)      step_4 (load_path)
    the launcher gets SIGTERM at step 6     step_6 (on stop)   latest
    the launcher is SIGKILLed at step 7     step_7 (on stop)   latest -> finishes 10 steps

The launcher's signals land on a known step: the job holds at the start of it
(``hold_at_step``) until the stop request arrives, so the test never races the training.
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

from hyper_parallel.runtime.faults import STOPPED_EXIT_CODE
from tests.helpers.layout import Case, Layout
from tests.helpers.torchrun import REPO, free_port

from .conftest import EXAMPLES, TRAIN_SCRIPT, read_metrics

pytestmark = pytest.mark.slow

#: The debug YAML's 10 steps on the tiny flavor in FSDP 2.
STEPS = 10
YAML = EXAMPLES / "train_qwen3_5_debug.yaml"
COMMON = ("--model.config_overrides.flavor=tiny", "--train.accelerator.dp_shard=2",
          "--train.checkpoint.save_steps=2", "--train.logging.log_steps=1")
#: How long a job may take to end after its fault (the issue's bar).
EXIT_BAR_S = 30
FAULT = "HYPER_PARALLEL_FAULT_INJECT"


class Job:
    """One torchrun launch of the debug YAML, its output in files (workers may outlive it)."""

    def __init__(self, out: Path, tag: str, *extra: str, env: dict | None = None) -> None:
        self.out = out
        self.log = out.parent / f"{tag}.log"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
               "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
               str(TRAIN_SCRIPT), str(YAML),
               f"--train.checkpoint.output_dir={out}", *COMMON, *extra]
        full_env = {**os.environ, "OMP_NUM_THREADS": "1", "HYPER_PARALLEL_DISABLE_TQDM": "1",
                    "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
                    **(env or {})}
        full_env.pop(FAULT, None) if env is None or FAULT not in env else None
        self.start = time.time()
        with open(self.log, "w") as log:
            # A session of its own: the signals the test sends reach the launcher alone.
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=full_env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def wait(self, timeout: float = 240) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_all()
            raise AssertionError(f"the job hung:\n{self.text()[-6000:]}")
        self.end = time.time()
        return code

    def wait_for_hold(self, step: int, timeout: float = 180) -> None:
        """Until both ranks hold at the start of ``step`` (``hold_at_step``), waiting for a stop
        request, inside the training loop; polls the job's log."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            held = set(re.findall(rf"fault injection: hold on rank (\d) at step {step} ",
                                  self.text()))
            if len(held) == 2:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.kill_all()
        raise AssertionError(f"the job never held at step {step}:\n{self.text()[-6000:]}")

    def pids(self) -> list[int]:
        """The launcher and its workers: every process whose command line names this run's
        output folder (torchrun puts its workers in sessions of their own)."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if f"--train.checkpoint.output_dir={self.out}".encode() in cmdline:
                    found.append(int(entry.name))
        return found

    def alive(self) -> bool:
        return bool(self.pids())

    def kill_all(self) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def fault_time(self) -> float:
        """When the injected fault fired (the trainer logs it with the epoch time)."""
        match = re.search(r"fault injection: .* \(t=([0-9.]+)\)", self.text())
        assert match, self.text()[-4000:]
        return float(match.group(1))


def _records(out: Path) -> list[dict]:
    try:
        return [r for r in read_metrics(out) if "loss" in r]
    except (FileNotFoundError, json.JSONDecodeError):
        return []


def _losses(out: Path) -> dict[int, float]:
    records = _records(out)
    steps = [r["step"] for r in records]
    assert steps == sorted(set(steps)), f"metrics.jsonl repeats or reorders steps: {steps}"
    return {r["step"]: r["loss"] for r in records}


def _checkpoints(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith(("step_", ".step_")))


def _assert_losses_so_far(out: Path, reference: list[float]) -> dict[int, float]:
    losses = _losses(out)
    assert losses == {s: reference[s - 1] for s in losses}, (losses, reference)
    return losses


def _first_error(text: str) -> str:
    """The first error line of the job's output, the fault injection's own line left out."""
    return next(line for line in text.splitlines()
                if (" ERROR " in line or line.startswith("error:")) and "fault injection" not in line)


def test_faults_end_fast_and_lose_at_most_the_steps_since_the_last_checkpoint(tmp_path, layouts):
    # The uninterrupted run, through the layout harness (the same command line, one job).
    uninterrupted = layouts.run_cases(
        {"run": Case((str(YAML), *COMMON), Layout(dp_shard=2), argv_sets_layout=True)},
        params=False)["run"]
    reference = uninterrupted.losses
    assert uninterrupted.steps == list(range(1, STEPS + 1))
    out = tmp_path / "run"
    resume = (f"--train.checkpoint.load_path={out}",)

    # 1. One rank raises: the job ends within the bar, and the real error (with its rank) is
    #    the first error the user reads; its peer only says that it lost a peer.
    timings = {}  # seconds from the fault to the end of the job, printed for the closing note
    job = Job(out, "raise", env={FAULT: "raise_at_step:3:1"})
    assert job.wait() != 0
    timings["rank raises"] = job.end - job.fault_time()
    assert timings["rank raises"] < EXIT_BAR_S, job.text()[-4000:]
    first = _first_error(job.text())
    assert "rank 1, step 3: training failed: RuntimeError: injected fault" in first, job.text()[-4000:]
    assert _checkpoints(out) == ["step_2"]
    assert sorted(_assert_losses_so_far(out, reference)) == [1, 2]

    # 2. A rank is SIGKILLed: nothing to say for itself, the job still ends fast.
    job = Job(out, "sigkill", *resume, env={FAULT: "sigkill_at_step:5:0"})
    assert job.wait() != 0
    timings["rank SIGKILL"] = job.end - job.fault_time()
    assert timings["rank SIGKILL"] < EXIT_BAR_S, job.text()[-4000:]
    assert "Resumed from" in job.text() and _checkpoints(out) == ["step_2", "step_4"]
    assert sorted(_assert_losses_so_far(out, reference)) == [1, 2, 3, 4]

    # 3. SIGTERM to one rank only, at a step without a scheduled save: its peer learns of it at
    #    the step's end, both stop after step 5, write its checkpoint together and exit with
    #    STOPPED_EXIT_CODE. (A rank that stopped on its own signal would wait in the stop's save
    #    while its peer trains step 6: a hang until the timeout, and no checkpoint.)
    job = Job(out, "sigterm", *resume, env={FAULT: "sigterm_at_step:5:1"})
    assert job.wait() != 0
    timings["rank SIGTERM (step + checkpoint)"] = job.end - job.fault_time()
    text = job.text()
    assert timings["rank SIGTERM (step + checkpoint)"] < EXIT_BAR_S, text[-4000:]
    for rank, reason in ((0, "SIGTERM (received by another rank)"), (1, "SIGTERM")):
        assert re.search(rf"rank{rank}\] WARNING \S+: training stopped by {re.escape(reason)} "
                         rf"after step 5: checkpoint saved to \S+step_5\b", text), text[-4000:]
    # torchrun's summary: the rank it saw leave first left with the stop's status.
    assert re.search(rf"exitcode\s*:\s*{STOPPED_EXIT_CODE}\b", text), text[-4000:]
    assert _checkpoints(out) == ["step_2", "step_4", "step_5"]
    assert sorted(_assert_losses_so_far(out, reference)) == list(range(1, 6))

    # 4. Killed while saving step 8: the interrupted save is never mistaken for a checkpoint.
    job = Job(out, "save", *resume, env={FAULT: "kill_during_save:8"})
    assert job.wait() != 0
    assert "step_8" not in _checkpoints(out) and "step_6" in _checkpoints(out)

    # 5. A truncated shard of step_6: a clear error naming the folder and the file, and the
    #    earlier step that can be loaded instead (step_5, the stop's).
    shard = min((out / "step_6").glob("*.distcp"))
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    job = Job(out, "corrupt", *resume)
    assert job.wait() != 0
    text = job.text()
    # One line per rank that got to print it (every rank finds the damage; the launcher stops
    # the others once the first exits), no worker traceback (torchrun prints its own summary).
    assert "training failed" not in text and "]: Traceback" not in text, text[-4000:]
    assert re.search(r"error: rank \d: checkpoint \S+step_6 is damaged", text), text[-4000:]
    assert "step_6" in text and shard.name in text and "step_5" in text, text[-4000:]

    # 6. SIGTERM to the launcher (what a scheduler does) at step 6: the workers stop after it.
    job = Job(out, "launcher-term", f"--train.checkpoint.load_path={out / 'step_4'}",
              env={FAULT: "hold_at_step:6"})
    job.wait_for_hold(6)
    job.proc.send_signal(signal.SIGTERM)
    sent = time.time()
    assert job.wait() != 0
    timings["launcher SIGTERM (step + checkpoint)"] = job.end - sent
    assert job.end - sent < EXIT_BAR_S and not job.alive()
    assert "training stopped by SIGTERM after step" in job.text(), job.text()[-4000:]
    assert max(_losses(out)) == 6 and "step_6" in _checkpoints(out)  # the damaged one replaced
    _assert_losses_so_far(out, reference)

    # 7. The launcher is SIGKILLed at step 7: its orphaned workers notice, checkpoint and exit.
    job = Job(out, "launcher-kill", *resume, env={FAULT: "hold_at_step:7"})
    job.wait_for_hold(7)
    job.proc.send_signal(signal.SIGKILL)
    sent = time.time()
    job.wait()
    while job.alive() and time.time() - sent < EXIT_BAR_S + 30:
        time.sleep(0.2)
    assert not job.alive(), "the workers outlived their launcher"
    timings["launcher SIGKILL (workers step + checkpoint)"] = time.time() - sent
    assert time.time() - sent < EXIT_BAR_S, job.text()[-4000:]
    assert "the launcher" in job.text() and "is gone" in job.text(), job.text()[-4000:]
    assert max(_losses(out)) == 7 and "step_7" in _checkpoints(out)
    _assert_losses_so_far(out, reference)

    # 8. The last launch finishes the run: every step once, the uninterrupted run's losses.
    job = Job(out, "finish", *resume)
    assert job.wait() == 0, job.text()[-4000:]
    assert _losses(out) == dict(enumerate(reference, start=1))
    print("\nfault -> job ended (s):", {k: round(v, 1) for k, v in timings.items()})


def test_a_file_one_rank_cannot_write_ends_the_job_at_once(tmp_path):
    """The issue's own example: rank 0 cannot write metrics.jsonl (a folder of that name is in
    the way) while rank 1 waits in a collective; once this hung for the 600 s timeout."""
    out = tmp_path / "run"
    (out / "metrics.jsonl").mkdir(parents=True)
    job = Job(out, "blocked")
    assert job.wait(timeout=120) != 0
    assert job.end - job.start < 60, job.text()[-4000:]  # start-up included
    first = _first_error(job.text())
    assert "rank 0" in first and "IsADirectoryError" in first and "metrics.jsonl" in first, first
