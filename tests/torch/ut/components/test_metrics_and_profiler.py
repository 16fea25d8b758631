"""``MetricsProcessor`` and ``Profiler`` against the legacy logging / TensorBoard / memory /
profiler callbacks."""

from __future__ import annotations

import glob
import itertools
import logging
import os
from types import SimpleNamespace
from typing import ClassVar

import pytest
import torch

from hyper_parallel.components import MetricsProcessor, Profiler
from hyper_parallel.components import metrics as metrics_module
from hyper_parallel.components import profiler as profiler_module
from hyper_parallel.trainer.callbacks import (
    CallbackHandler,
    LoggingCallback,
    MemoryMonitorCallback,
    ProfilerCallback,
    TensorBoardCallback,
)
from hyper_parallel.trainer.callbacks import profiler as profiler_callback_module
from hyper_parallel.trainer.callbacks import tensorboard as tensorboard_module
from hyper_parallel.trainer.config import (
    LoggingConfig,
    MemoryMonitorConfig,
    ProfileConfig,
    TensorBoardConfig,
)
from tests.torch.ut.components._common import legacy_config, tiny_model

STEPS = 12
LOSSES = [2.5 - 0.125 * i for i in range(STEPS)]
LOSSES[2] = float("nan")  # written as NaN, like the legacy


class RecordingWriter:
    """Stands in for a TensorBoard ``SummaryWriter``; ``writers`` collects every instance."""

    writers: ClassVar[list[RecordingWriter]] = []

    def __init__(self, output_dir, field_name=None):
        self.output_dir = output_dir
        self.scalars = []
        RecordingWriter.writers.append(self)

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, value, step))

    def flush(self):
        pass

    def close(self):
        pass


@pytest.fixture
def fake_clock_and_writer(monkeypatch):
    """A deterministic step timer (every perf_counter call advances 0.25 s) and recorded TB
    writers, for both the legacy callbacks and the component."""
    ticks = itertools.count()
    monkeypatch.setattr("time.perf_counter", lambda: 0.25 * next(ticks))
    RecordingWriter.writers = []
    monkeypatch.setattr(tensorboard_module, "open_summary_writer", RecordingWriter)
    monkeypatch.setattr(metrics_module, "open_summary_writer", RecordingWriter)


def run_legacy(tmp_path, sections: dict):
    args = legacy_config(checkpoint={"output_dir": str(tmp_path / "legacy")}, max_steps=STEPS, **sections)
    lrs = iter([1e-4 * s for s in range(1, STEPS + 1)])
    trainer = SimpleNamespace(
        args=args,
        state=SimpleNamespace(global_step=0, epoch=0, max_steps=STEPS, log_history=[]),
        lr_scheduler=None,
        last_global_tokens=None,
        rank=0,
        world_size=2,
        is_rank0=True,
        device=torch.device("cpu"),
    )
    handler = CallbackHandler(
        trainer,
        builtins={
            "logging": LoggingCallback(trainer),
            "tensorboard": TensorBoardCallback(trainer),
            "memory_monitor": MemoryMonitorCallback(trainer),
        },
    )
    handler.on_train_begin()
    for step, loss in enumerate(LOSSES, start=1):
        trainer.state.global_step = step
        lr = next(lrs)
        trainer.lr_scheduler = SimpleNamespace(get_last_lr=lambda lr=lr: [lr])
        handler.on_step_begin()
        trainer.last_global_tokens = 100 * step
        handler.on_step_end(loss, 0.5 * step)
    handler.on_evaluate({"eval_loss": 1.5})
    handler.on_train_end()
    return trainer, handler


def run_component(tmp_path, config: MetricsProcessor.Config):
    trainer = SimpleNamespace(rank=0, world_size=2, device=torch.device("cpu"))
    metrics = config.build(trainer=trainer, output_dir=str(tmp_path / "new"), max_steps=STEPS)
    metrics.begin()
    for step, loss in enumerate(LOSSES, start=1):
        metrics.step_begin()
        metrics.log(step, loss=loss, grad_norm=0.5 * step, lr=1e-4 * step, tokens=100 * step, epoch=0)
    metrics.log_eval(STEPS, {"eval_loss": 1.5})
    metrics.close(STEPS)
    return metrics


def log_lines(caplog, *logger_names: str) -> list[str]:
    """Messages of these loggers; memory lines cut before their (live) figures."""
    lines = [r.getMessage() for r in caplog.records if r.name in logger_names]
    return [m.split(":")[0] if m.startswith("memory (") else m for m in lines]


@pytest.mark.parametrize(
    "legacy_sections, config",
    [
        ({}, MetricsProcessor.Config()),  # the defaults on both sides
        (
            {
                "logging": LoggingConfig(log_steps=2, model_flops_per_token=600, peak_tflops=1e-9),
                "tensorboard": TensorBoardConfig(enabled=True, output_dir="tb", log_steps=3),
                "memory_monitor": MemoryMonitorConfig(enabled=True, log_steps=2),
            },
            MetricsProcessor.Config(
                log_freq=2,
                model_flops_per_token=600,
                peak_tflops=1e-9,
                enable_tensorboard=True,
                save_tb_folder="tb",
                tb_log_freq=3,
                enable_memory_monitor=True,
                memory_log_freq=2,
            ),
        ),
    ],
    ids=["defaults", "everything-on"],
)
def test_metrics_equal_the_legacy_callbacks(
    tmp_path, caplog, fake_clock_and_writer, legacy_sections, config
):
    with caplog.at_level(logging.INFO):
        trainer, handler = run_legacy(tmp_path, legacy_sections)
        legacy_writers = list(RecordingWriter.writers)
        RecordingWriter.writers = []
        metrics = run_component(tmp_path, config)

    # The logged records (history and metrics.jsonl), throughput / TFLOPS / MFU included.
    assert [r["step"] for r in metrics.history] == (
        [10, STEPS] if config.log_freq == 10 else [2, 4, 6, 8, 10, 12, STEPS]
    )  # the last one is the evaluation record
    assert "tokens_per_sec" in metrics.history[0]
    assert metrics.history == trainer.state.log_history
    assert metrics.last_metrics == handler.last_step_metrics
    with open(tmp_path / "legacy" / "metrics.jsonl") as f, open(metrics.metrics_path) as g:
        assert g.read() == f.read()
    # The log lines, word for word (memory lines up to their live RSS figures), in order.
    assert log_lines(caplog, metrics_module.logger.name) == log_lines(
        caplog, "hyper_parallel.trainer.callbacks.logging", "hyper_parallel.trainer.callbacks.memory"
    )
    # TensorBoard scalars.
    assert [w.scalars for w in RecordingWriter.writers] == [w.scalars for w in legacy_writers]
    # Memory samples: taken at the same steps, with the same fields.
    legacy_memory = handler.memory_monitor_callback.history
    assert [(m["step"], sorted(m)) for m in metrics.memory_history] == [
        (m["step"], sorted(m)) for m in legacy_memory
    ]
    if config.log_freq == 2:
        assert metrics.history[0]["mfu"] == pytest.approx((200 / 0.25) * 600 / 1e12 / (1e-9 * 2))
        tb_loss_steps = [s[2] for s in RecordingWriter.writers[0].scalars if s[0] == "train/loss"]
        assert tb_loss_steps == [3, 6, 9, 12]
        assert [m["step"] for m in metrics.memory_history] == [0, 2, 4, 6, 8, 10, 12, STEPS]
    else:
        assert RecordingWriter.writers == [] and metrics.memory_history == []


def test_metrics_file_only_on_rank0_and_only_with_an_output_dir(tmp_path):
    other = MetricsProcessor.Config(log_freq=1).build(rank=1, world_size=2, output_dir=str(tmp_path))
    other.log(1, loss=1.0, grad_norm=None, lr=None, tokens=None)
    other.close()
    assert not os.path.exists(tmp_path / "metrics.jsonl")
    assert other.history[0]["loss"] == 1.0  # every rank keeps the history, like the legacy state
    none = MetricsProcessor.Config(log_freq=1).build()
    assert none.metrics_path is None and none.rank == 0 and none.world_size == 1
    none.log(1, loss=1.0, grad_norm=None, lr=None, tokens=None)


def test_profiler_is_built_like_the_legacy_callback(tmp_path, monkeypatch):
    calls = []

    def record(**kw):
        calls.append(kw)
        return SimpleNamespace(start=lambda: None, step=lambda: None, stop=lambda: None)

    monkeypatch.setattr(profiler_callback_module, "make_step_profiler", record)
    monkeypatch.setattr(profiler_module, "make_step_profiler", record)
    folder = str(tmp_path / "traces")
    args = legacy_config(
        profile=ProfileConfig(enabled=True, output_dir=folder, wait_steps=2, warmup_steps=0, active_steps=4)
    )
    ProfilerCallback(SimpleNamespace(args=args, rank=3)).on_train_begin()
    with Profiler.Config(
        enable_profiling=True, save_traces_folder=folder, wait=2, warmup=0, active=4
    ).build(rank=3):
        pass
    assert len(calls) == 2 and calls[0] == calls[1]


def test_profiler_writes_a_trace_per_rank(tmp_path):
    folder = str(tmp_path / "traces")
    model = tiny_model()
    config = Profiler.Config(enable_profiling=True, save_traces_folder=folder, wait=0, warmup=1, active=1)
    with config.build(rank=5) as profiler:
        for _ in range(3):
            model(torch.zeros(1, 3, dtype=torch.long)).sum().backward()
            profiler.step()
    assert profiler.profiler is None
    assert len(glob.glob(os.path.join(folder, "rank5*.pt.trace.json"))) == 1


def test_disabled_profiler_does_nothing(tmp_path):
    folder = tmp_path / "traces"
    with Profiler.Config(save_traces_folder=str(folder)).build() as profiler:
        profiler.step()
        assert profiler.profiler is None
    assert not folder.exists()
