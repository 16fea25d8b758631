"""Weights & Biases through ``MetricsProcessor`` (``metrics.enable_wandb``): what the offline run
holds, read back from its own files (:mod:`tests.helpers.wandb_files`), against metrics.jsonl;
where it goes and what the log says; the refusals; how the mode is chosen.

Every run here is offline (``tests/conftest.py`` sets ``WANDB_MODE=offline``); the mode tests
call :func:`choose_mode` with an environment of their own and never open a connection.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from hyper_parallel.components import MetricsProcessor
from hyper_parallel.components import metrics as metrics_module
from hyper_parallel.runtime.callbacks import wandb_logger
from hyper_parallel.runtime.callbacks.logging import METRICS_FILE
from hyper_parallel.utils.errors import ConfigError
from tests.helpers.wandb_files import offline_runs, read_offline_run

STEPS = 5


def run_component(output_dir: Path, config: MetricsProcessor.Config, *, rank: int = 0):
    """Five steps, an evaluation at the last, through the component as the trainer drives it."""
    trainer = SimpleNamespace(rank=rank, world_size=1, device=torch.device("cpu"),
                              run_configuration={"training.steps": "5", "optimizer.lr": "0.001"})
    metrics = config.build(trainer=trainer, output_dir=str(output_dir), max_steps=STEPS)
    metrics.begin()
    for step in range(1, STEPS + 1):
        metrics.step_begin()
        metrics.log(step, loss=3.0 - 0.25 * step, grad_norm=0.5 * step, lr=1e-3 / step,
                    tokens=64 * step, epoch=0, extra={"moe_aux_loss": 0.01 * step})
    metrics.log_eval(STEPS, {"eval_loss": 2.25})
    metrics.close(STEPS)
    return metrics


def jsonl(output_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (output_dir / METRICS_FILE).read_text().splitlines()]


def test_the_offline_run_holds_every_logged_record(tmp_path, caplog, monkeypatch):
    monkeypatch.delenv("WANDB_DIR", raising=False)
    config = MetricsProcessor.Config(
        log_freq=1, enable_wandb=True, wandb_project="hp-tests", wandb_run_name="component",
        wandb_log_freq=2, enable_memory_monitor=True, memory_log_freq=3,
    )
    out = tmp_path / "out"
    with caplog.at_level(logging.INFO, logger=metrics_module.logger.name):
        metrics = run_component(out, config)

    (folder,) = offline_runs(out)  # under the output folder, next to metrics.jsonl
    run = read_offline_run(folder)
    assert (run.project, run.name, run.exit_code) == ("hp-tests", "component", 0)
    assert run.config == {"training.steps": "5", "optimizer.lr": "0.001"}
    assert metrics.wandb_steps == [2, 4]
    info = metrics.wandb_info
    assert (info.project, info.name, info.mode, info.folder) == (
        "hp-tests", "component", "offline", str(folder))

    # Every number of each logged step's metrics.jsonl record, as train/<key>, at its step.
    records = {r["step"]: r for r in jsonl(out) if "loss" in r}
    for step in (2, 4):
        want = {f"train/{k}": v for k, v in records[step].items()
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)}
        assert set(want) >= {"train/loss", "train/grad_norm", "train/lr", "train/step_time",
                             "train/tokens_per_sec", "train/epoch", "train/moe_aux_loss"}
        got = {k: v for k, v in run.history[step].items() if k.startswith("train/")}
        assert got == pytest.approx(want, rel=1e-12)
    assert not any(k.startswith("train/") for s in (1, 3, 5) for k in run.history.get(s, {}))
    # The evaluation at its step, and every memory sample (train begin, every 3 steps, end).
    assert run.history[STEPS]["eval/loss"] == 2.25
    assert sorted(s for s, row in run.history.items() if "memory/rss_gib" in row) == [0, 3, 5]
    for sample in metrics.memory_history:
        assert run.history[sample["step"]]["memory/peak_rss_gib"] > 0

    # One line says where the run is and how to upload it.
    lines = [r.getMessage() for r in caplog.records if "W&B" in r.getMessage()]
    assert lines == [(f"W&B run offline (WANDB_MODE=offline): written to {folder}; "
                      f"upload it with `wandb sync {folder}`")]


def test_wandb_dir_is_respected_and_other_ranks_log_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "elsewhere"))
    config = MetricsProcessor.Config(enable_wandb=True)
    metrics = run_component(tmp_path / "out1", config, rank=1)
    assert metrics.wandb_info is None and metrics.wandb_steps == []
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "out1" / "wandb").exists()

    metrics = run_component(tmp_path / "out0", config)
    (folder,) = offline_runs(tmp_path / "elsewhere")
    assert not (tmp_path / "out0" / "wandb").exists()
    run = read_offline_run(folder)
    assert run.project == "hyper-parallel" and sorted(run.history) == [1, 2, 3, 4, 5]
    assert metrics.wandb_steps == [1, 2, 3, 4, 5]


def test_wandb_mode_disabled_logs_nothing_and_says_so(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    with caplog.at_level(logging.INFO, logger=metrics_module.logger.name):
        metrics = run_component(tmp_path / "out", MetricsProcessor.Config(enable_wandb=True))
    assert metrics.wandb_info.mode == "disabled" and not (tmp_path / "out" / "wandb").exists()
    lines = [r.getMessage() for r in caplog.records if "W&B" in r.getMessage()]
    assert lines == ["W&B run disabled (WANDB_MODE=disabled): nothing is logged to it"]


def test_without_the_package_the_switch_is_refused_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # find_spec("wandb") -> None
    with pytest.raises(ConfigError) as info:
        MetricsProcessor.Config(enable_wandb=True).build(rank=0, world_size=1)
    assert info.value.path == "metrics.enable_wandb"
    assert "pip install hyper_parallel[wandb]" in str(info.value)
    MetricsProcessor.Config().build(rank=0, world_size=1)  # off: the package is not needed


@pytest.mark.parametrize("project", ["team/project", "what?"])
def test_a_project_name_wandb_refuses_is_refused_when_built(project):
    with pytest.raises(ConfigError, match="a W&B project name cannot contain") as info:
        MetricsProcessor.Config(enable_wandb=True, wandb_project=project).build(
            rank=0, world_size=1)
    assert info.value.path == "metrics.wandb_project"


@pytest.mark.parametrize("fields", [{"wandb_log_freq": 0}, {"wandb_project": ""},
                                    {"wandb_run_name": ""}])
def test_the_config_checks_its_wandb_fields(fields):
    with pytest.raises(ValueError, match=next(iter(fields))):
        MetricsProcessor.Config(**fields)


# ------------------------------------------------------------------------------- the mode


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("choose_mode tried the network")

    monkeypatch.setattr(socket, "create_connection", refuse)


def test_wandb_mode_set_is_respected(no_network):
    assert wandb_logger.choose_mode({"WANDB_MODE": "online"}) == ("online", "WANDB_MODE=online")


def test_without_an_api_key_the_run_is_offline_and_nothing_is_tried(tmp_path, no_network):
    env = {"NETRC": str(tmp_path / "no-netrc")}
    mode, why = wandb_logger.choose_mode(env)
    assert mode == "offline" and "no W&B API key" in why


def test_with_a_key_the_server_must_answer(tmp_path, monkeypatch):
    netrc = tmp_path / "netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password " + "k" * 40 + "\n")
    asked = []
    monkeypatch.setattr(wandb_logger, "reachable", lambda url: asked.append(url) or False)
    mode, why = wandb_logger.choose_mode({"NETRC": str(netrc)})
    assert (mode, why, asked) == ("offline", "api.wandb.ai cannot be reached",
                                  ["https://api.wandb.ai"])
    monkeypatch.setattr(wandb_logger, "reachable", lambda url: True)
    assert wandb_logger.choose_mode({"WANDB_API_KEY": "k" * 40}) == ("online", None)
    # Another server's key is not this server's.
    assert wandb_logger.choose_mode({"NETRC": str(netrc),
                                     "WANDB_BASE_URL": "https://wandb.example.com"})[0] == "offline"


def test_reachable_is_bounded(monkeypatch):
    release = threading.Event()

    def hang(*args, **kwargs):  # a name lookup or a connection that does not answer
        release.wait(10)
        raise OSError("timed out")

    monkeypatch.setattr(socket, "create_connection", hang)
    start = time.perf_counter()
    try:
        assert not wandb_logger.reachable("https://api.wandb.ai", timeout=0.2)
        assert time.perf_counter() - start < 2
    finally:
        release.set()
