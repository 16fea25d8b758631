"""Stop requests and failure reports in one process (the 2-rank fault suite is
tests/torch/st/qwen3_5/test_faults.py)."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path

import pytest

from hyper_parallel.runtime import fault_injection, faults
from hyper_parallel.runtime.fault_injection import FAULT_INJECT_ENV as FAULT_ENV

from .test_field_probes import base_config


def _engine(tmp_path: Path, steps: int, **checkpoint):
    import dataclasses

    config = base_config()
    config.training = dataclasses.replace(config.training, steps=steps)
    config.checkpoint = dataclasses.replace(
        config.checkpoint, folder=str(tmp_path / "out"), **checkpoint
    )
    return config.build()


def _losses(tmp_path: Path) -> dict[int, float]:
    lines = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return {r["step"]: r["loss"] for r in records if "loss" in r}


def test_sigterm_stops_after_the_step_with_a_checkpoint_and_resumes_bit_identically(
    tmp_path, monkeypatch
):
    straight = _engine(tmp_path / "straight", 4)
    straight.train()
    straight.close()
    reference = _losses(tmp_path / "straight")

    monkeypatch.setenv(FAULT_ENV, "sigterm_at_step:2")
    handler_before = signal.getsignal(signal.SIGTERM)
    trainer = _engine(tmp_path, 4, interval=3)
    with pytest.raises(faults.TrainingStopped) as stopped:
        trainer.train()
    trainer.close()
    assert stopped.value.step == 2 and stopped.value.reason == "SIGTERM"
    assert stopped.value.checkpoint == str(tmp_path / "out" / "step_2")
    assert f"resume with checkpoint.load_path={tmp_path / 'out' / 'step_2'}" in str(stopped.value)
    assert signal.getsignal(signal.SIGTERM) == handler_before  # restored after the loop

    monkeypatch.delenv(FAULT_ENV)
    resumed = _engine(tmp_path, 4, interval=3, load_path="latest")
    resumed.train()
    resumed.close()
    assert _losses(tmp_path) == reference


def test_a_stop_without_checkpointing_says_nothing_was_saved(tmp_path, monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "sigterm_at_step:1")
    trainer = _engine(tmp_path, 3)
    with pytest.raises(faults.TrainingStopped, match="no checkpoint written") as stopped:
        trainer.train()
    trainer.close()
    assert stopped.value.checkpoint is None and stopped.value.step == 1


def test_the_first_step_tightens_the_collective_timeout(tmp_path):
    import dataclasses

    config = base_config()
    config.checkpoint = dataclasses.replace(config.checkpoint, folder=str(tmp_path / "out"))
    config.comm.init_timeout_seconds, config.comm.train_timeout_seconds = 40, 9
    trainer = config.build()
    try:
        assert trainer.dist.collective_timeout_seconds == 40
        trainer.train()
        assert trainer.dist.collective_timeout_seconds == 9
        import torch
        import torch.distributed as dist

        backend = dist.group.WORLD._get_backend(torch.device("cpu"))
        assert backend.options._timeout.total_seconds() == 9  # the group itself, not a record
    finally:
        trainer.close()


def test_the_handler_is_installed_only_around_the_loop():
    before = signal.getsignal(signal.SIGTERM)
    with faults.StopSignal(world_size=1) as stop:
        assert signal.getsignal(signal.SIGTERM) == stop._on_sigterm
        assert not stop.should_stop()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.should_stop() and stop.reason == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_duplicate_sigterm_still_stops_after_the_step_and_a_later_one_exits(monkeypatch):
    """The scheduler signals every process of a job while torchrun forwards the same signal: a
    second SIGTERM within the duplicate window changes nothing; one after it exits at once."""
    exits = []
    monkeypatch.setattr(faults.os, "_exit", exits.append)
    clock = [100.0]
    monkeypatch.setattr(faults.time, "monotonic", lambda: clock[0])
    with faults.StopSignal(world_size=1) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        clock[0] += faults.DUPLICATE_SIGNAL_SECONDS / 2
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.should_stop() and stop.reason == "SIGTERM" and exits == []
        clock[0] += faults.DUPLICATE_SIGNAL_SECONDS
        os.kill(os.getpid(), signal.SIGTERM)
        assert exits == [faults.STOPPED_EXIT_CODE]


def test_a_failure_is_reported_once_with_rank_and_step(caplog):
    with caplog.at_level(logging.ERROR):
        try:
            raise OSError("disk full")
        except OSError as exc:
            faults.report_failure(exc, step=7)
    assert "rank 0, step 7: training failed: OSError: disk full" in caplog.text
    assert "Traceback" in caplog.text  # the real cause, with where it happened


def test_a_lost_peer_is_one_line_pointing_at_the_peer(caplog):
    lost = RuntimeError("[pair.cc:553] Connection closed by peer [127.0.0.1]:1234. More text")
    assert faults.is_peer_lost(lost) and not faults.is_peer_lost(RuntimeError("shape mismatch"))
    with caplog.at_level(logging.ERROR):
        faults.report_failure(lost, step=3)
    assert "another rank left the job" in caplog.text and "Traceback" not in caplog.text


# ------------------------------------------------------------------ the fault-injection hook


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("exit_at_step:3", ("exit", 3, None)),
        ("raise_at_step:3:1", ("raise", 3, 1)),
        ("sigterm_at_step:6:1", ("sigterm", 6, 1)),
        ("hold_at_step:5", ("hold", 5, None)),
        (" kill_during_save:8 ", ("kill_during_save", 8, None)),
    ],
)
def test_one_parser_reads_the_loop_and_the_checkpoint_faults(text, expected):
    fault = fault_injection.parse_fault_injection(text)
    assert (None if fault is None else (fault.kind, fault.step, fault.rank)) == expected


@pytest.mark.parametrize(
    "text",
    ["explode:3", "kill_during_save:x", "kill_during_save:4:1", "exit_at_step:x",
     "exit_at_step:3:", "boom_at_step:3", "exit_at_step"],
)
def test_a_malformed_fault_is_an_error_naming_both_forms(text):
    with pytest.raises(ValueError, match=r"kill_during_save:<step>.*<kind>_at_step"):
        fault_injection.parse_fault_injection(text)


def test_the_loop_fails_only_at_its_step_and_rank(monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "raise_at_step:3:1")
    fault_injection.maybe_fail_at_step(2, 1)  # another step
    fault_injection.maybe_fail_at_step(3, 0)  # another rank
    with pytest.raises(RuntimeError, match="injected fault at step 3"):
        fault_injection.maybe_fail_at_step(3, 1)
    monkeypatch.setenv(FAULT_ENV, "hold_at_step:3")  # holds until the stop request comes
    asked = iter([False, False, True])
    fault_injection.maybe_fail_at_step(3, 0, stop_requested=lambda: next(asked))
    assert next(asked, "drained") == "drained"
    monkeypatch.setenv(FAULT_ENV, "kill_during_save:3")  # the checkpoint's fault, not the loop's
    fault_injection.maybe_fail_at_step(3, 1)
    assert fault_injection.save_kill_step() == 3
