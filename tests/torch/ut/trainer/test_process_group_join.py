"""Joining the job's process group, in one process: a restarted torchrun job's keys stay apart
from the failed attempt's in the launcher's store, the join has a bound that ends the worker
with a line saying what it waited for, and the fault hook aims at one attempt (the restarts
themselves run under torchrun in tests/torch/st/qwen3_5/test_worker_restart.py)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from hyper_parallel.runtime import distributed, fault_injection
from hyper_parallel.runtime.fault_injection import FAULT_INJECT_ENV, RESTART_COUNT_ENV


@pytest.fixture
def launched(monkeypatch):
    """The environment torchrun gives rank 0 of 2 in the second attempt of a job."""
    for key, value in {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1",
                       "MASTER_PORT": "29500", RESTART_COUNT_ENV: "1"}.items():
        monkeypatch.setenv(key, value)


# ------------------------------------------------------------------ the fault hook's new forms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sigkill_at_step:3:1:0", [("sigkill", 3, 1, 0)]),
        ("late_join:5", [("late_join", 5, None, None)]),
        ("late_join:5:1:1", [("late_join", 5, 1, 1)]),
        ("sigkill_at_step:3:1:0, late_join:5:1:1",
         [("sigkill", 3, 1, 0), ("late_join", 5, 1, 1)]),
    ],
)
def test_a_fault_may_name_its_attempt_and_several_go_together(text, expected):
    faults = fault_injection.parse_fault_injections(text)
    assert [(f.kind, f.step, f.rank, f.attempt) for f in faults] == expected


@pytest.mark.parametrize(
    "text", ["late_join", "late_join:x", "exit_at_step:3:1:0:2", "late_join:5,", "a,,b",
             "exit_at_step:3,explode:1"])
def test_a_malformed_list_or_item_is_an_error_naming_every_form(text):
    with pytest.raises(ValueError, match=r"kill_during_save:<step>.*<kind>_at_step.*late_join"):
        fault_injection.parse_fault_injections(text)


def test_a_step_fault_with_an_attempt_fires_in_that_attempt_only(monkeypatch):
    monkeypatch.setenv(FAULT_INJECT_ENV, "raise_at_step:3:1:0,late_join:0:1:1")
    monkeypatch.setenv(RESTART_COUNT_ENV, "1")  # the restarted attempt: trains on
    fault_injection.maybe_fail_at_step(3, 1)
    monkeypatch.delenv(RESTART_COUNT_ENV)  # no torchrun: the first attempt
    with pytest.raises(RuntimeError, match="injected fault at step 3"):
        fault_injection.maybe_fail_at_step(3, 1)


# ------------------------------------------------------------------ the store of one attempt


def test_a_worker_in_the_launchers_store_keeps_its_keys_under_its_attempt(monkeypatch):
    """torchrun's agent store outlives the workers: what an attempt writes there must not be
    read as the next attempt's (gloo's addresses, NCCL's unique id)."""
    assert not dist.is_initialized()
    agent = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=30),
                          wait_for_workers=False)
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(agent.port), RESTART_COUNT_ENV: "3",
                       distributed.AGENT_STORE_ENV: "True"}.items():
        monkeypatch.setenv(key, value)
    distributed.init_process_group("gloo", torch.device("cpu"), timeout_seconds=30)
    try:
        keys = agent.list_keys()
    finally:
        dist.destroy_process_group()
    assert keys and all(key.startswith("hyper_parallel/attempt_3/") for key in keys), keys


# ------------------------------------------------------------------ the bound on the join


def test_a_join_that_outlasts_its_bound_ends_the_worker_naming_the_wait(launched, monkeypatch):
    ended = []
    fired = threading.Event()

    def end_worker(message: str) -> None:  # the real one logs, records and exits the process
        ended.append(message)
        fired.set()

    monkeypatch.setattr(distributed, "_end_worker", end_worker)
    with distributed.join_deadline(0.05, "joining the job's process group"):
        assert fired.wait(60), "the watchdog never fired"  # a join stuck in gloo's connect
    assert len(ended) == 1
    assert ended[0].startswith(
        "joining the job's process group (2 ranks meeting at 10.0.0.1:29500, attempt 1) did not "
        "complete within 0.05 s (comm.init_timeout_seconds"), ended[0]


def test_a_join_that_fails_says_which_wait_failed(launched, monkeypatch):
    ended = []
    monkeypatch.setattr(distributed, "_end_worker", ended.append)
    with (pytest.raises(distributed.ProcessGroupJoinError) as caught,
          distributed.join_deadline(600, "forming the mesh's process groups")):
        raise RuntimeError("Connection refused")
    assert str(caught.value) == (
        "forming the mesh's process groups (2 ranks meeting at 10.0.0.1:29500, attempt 1) "
        "failed: RuntimeError: Connection refused")
    assert ended == []


def test_a_private_one_rank_group_has_no_bound_and_its_errors_pass_unchanged(monkeypatch):
    for key in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    with (pytest.raises(RuntimeError, match="^boom$") as caught,
          distributed.join_deadline(600, "joining the job's process group")):
        raise RuntimeError("boom")
    assert type(caught.value) is RuntimeError
