"""Tests of the engine's built-in callbacks, driven by a fake trainer that builds them the way
``HyperTrainer`` does (its components from a ``HyperTrainer.Config``, then
``HyperTrainer._init_callbacks``) and a training loop shaped like the legacy one.
"""

from __future__ import annotations

import gc
import glob
import json
import logging
import math
import os
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torchdata.stateful_dataloader import StatefulDataLoader

from hyper_parallel.components import CheckpointManager, MetricsProcessor, Profiler
from hyper_parallel.config.configs import DebugConfig, TrainingConfig, ValidationConfig
from hyper_parallel.runtime import checkpoint as ck
from hyper_parallel.runtime.callbacks import (
    BUILTIN_NAMES,
    DISPATCH_ORDER,
    Callback,
    CallbackHandler,
    CheckpointManagerCallback,
    EvalCallback,
    GCCallback,
    GradientHealthCallback,
    MetricsCallback,
    ProfilerComponentCallback,
    ProgressCallback,
)
from hyper_parallel.trainer.base import TrainerState
from hyper_parallel.trainer.hyper_trainer import HyperTrainer, build_state_dict_adapter

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TOKENS_PER_STEP = 32


# ---------------------------------------------------------------------------------------------
# fake trainer
# ---------------------------------------------------------------------------------------------


def make_config(
    tmp_path,
    *,
    steps: int = 6,
    metrics: dict | None = None,
    checkpoint: dict | None = None,
    profiler: dict | None = None,
    eval_every: int = 0,
    gc_every: int = 0,
    check_nan_inf: bool = False,
) -> HyperTrainer.Config:
    """A ``HyperTrainer.Config`` with test-friendly component settings (log every step, no
    checkpoints, no HF export; outputs ``out``, ``tb`` and ``prof`` under ``tmp_path``, the
    ``dump_folder``). ``metrics`` / ``checkpoint`` / ``profiler`` override fields of the
    ``MetricsProcessor`` / ``CheckpointManager`` / ``Profiler`` Configs."""
    return HyperTrainer.Config(
        dump_folder=str(tmp_path),
        metrics=MetricsProcessor.Config(
            **{"log_freq": 1, "save_tb_folder": "tb", **(metrics or {})}
        ),
        checkpoint=CheckpointManager.Config(
            **{"folder": "out", "interval": 0, "export_hf": False, **(checkpoint or {})}
        ),
        profiler=Profiler.Config(**{"save_traces_folder": "prof", "active": 2, **(profiler or {})}),
        training=TrainingConfig(steps=steps, gc_freq=gc_every),
        validation=ValidationConfig(freq=eval_every, dataset_path="unused" if eval_every else None),
        debug=DebugConfig(check_nan_inf=check_nan_inf),
    )


class PrefixAdapter:
    @staticmethod
    def to_hf(state_dict, config):
        return {f"model.{k}": v for k, v in state_dict.items()}


class FakeTrainer:
    """Just enough of ``HyperTrainer`` for the callbacks: a small model, optimizer, scheduler and
    data of its own, then the engine's steps for the callbacks - outputs resolved under
    ``dump_folder``, the checkpoint manager, the metrics processor and the profiler built from
    the Config with the engine's runtime arguments, and ``HyperTrainer._init_callbacks``."""

    def __init__(
        self, config, *, seed=0, nan_at_step=None, eval_losses=None, sd_adapter=PrefixAdapter
    ):
        torch.manual_seed(seed)
        self.config = config
        self.state = TrainerState(max_steps=config.training.steps)
        self.model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.1), nn.Linear(8, 1))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: 1.0 / (1 + s)
        )
        g = torch.Generator().manual_seed(3)
        x = torch.randn(80, 4, generator=g)
        ds = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
        self.train_dataloader = StatefulDataLoader(
            ds, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(5)
        )
        self.rank, self.world_size, self.is_rank0 = 0, 1, True
        self.device = torch.device("cpu")
        self.last_global_tokens = None
        self.model_config = {"fake": "config"}
        self.sd_adapter = build_state_dict_adapter(
            sd_adapter, self.model_config, config.hf_assets_path
        )
        self.nan_at_step = nan_at_step
        self.eval_losses = list(eval_losses or [])
        self.eval_calls: list[int] = []

        # HyperTrainer.__init__, steps 2, 9 and 10.
        HyperTrainer._resolve_paths(self)
        c = self.config
        self.checkpointer = c.checkpoint.build(
            model_parts=[self.model],
            optimizers=self.optimizer,
            lr_schedulers=self.lr_scheduler,
            dataloader=self.train_dataloader,
            sd_adapter=self.sd_adapter,
            model_config=self.model_config,
        )
        self.metrics = c.metrics.build(
            trainer=self, output_dir=c.checkpoint.folder, max_steps=c.training.steps
        )
        self.profiler = c.profiler.build(rank=self.rank)
        HyperTrainer._init_callbacks(self)
        self.callbacks.on_init_end()

    def evaluate(self) -> float:
        self.eval_calls.append(self.state.global_step)
        return self.eval_losses.pop(0) if self.eval_losses else 0.5

    def train(self) -> None:
        cb = self.callbacks
        cb.on_train_begin()
        while self.state.global_step < self.state.max_steps:
            cb.on_epoch_begin()
            it = iter(self.train_dataloader)
            while self.state.global_step < self.state.max_steps:
                cb.on_step_begin()
                try:
                    x, y = next(it)
                except StopIteration:
                    break
                self.state.global_step += 1
                self.last_global_tokens = TOKENS_PER_STEP
                loss = nn.functional.mse_loss(self.model(x), y)
                if self.state.global_step == self.nan_at_step:
                    loss = loss * float("nan")
                loss.backward()
                cb.on_substep_end()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1e9).item()
                cb.on_pre_optimizer_step(grad_norm)
                self.optimizer.step()
                self.lr_scheduler.step()
                self.optimizer.zero_grad()
                self.state.loss_history.append((self.state.global_step, loss.item()))
                cb.on_step_end(loss.item(), grad_norm)
            cb.on_epoch_end()
            self.state.epoch += 1
        cb.on_train_end()


@pytest.fixture(autouse=True)
def _quiet_tqdm(monkeypatch):
    monkeypatch.setenv("HYPER_PARALLEL_DISABLE_TQDM", "1")
    yield
    ck.wait_async_save()


def losses(trainer) -> list[float]:
    return [loss for _, loss in trainer.state.loss_history]


def fake_config_writer(path, config, dtype):
    """The HF export's ``config.json`` writer for a model without a Qwen3.5 config (the
    weights are the export's own files)."""
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"dtype": dtype}, f)


# ---------------------------------------------------------------------------------------------
# dispatch, construction
# ---------------------------------------------------------------------------------------------


class Recorder(Callback):
    """Records (name, hook) for every hook call into a shared list."""

    def __init__(self, trainer, name, calls):
        super().__init__(trainer)
        self.name, self.calls = name, calls
        for hook in (
            "on_init_end",
            "on_train_begin",
            "on_train_end",
            "on_epoch_begin",
            "on_epoch_end",
            "on_step_begin",
            "on_step_end",
            "on_substep_end",
            "on_pre_optimizer_step",
            "on_log",
            "on_save",
            "on_load",
            "on_evaluate",
        ):
            setattr(self, hook, lambda *a, _h=hook: self.calls.append((self.name, _h)))


def test_dispatch_orders_builtins_then_users(tmp_path):
    trainer = FakeTrainer(make_config(tmp_path, steps=1))
    calls: list = []
    handler = CallbackHandler(
        trainer, builtins={n: Recorder(trainer, n, calls) for n in BUILTIN_NAMES}
    )
    handler.add_callback(Recorder(trainer, "user1", calls))
    handler.add_callback(Recorder(trainer, "user2", calls))
    assert handler.logging_callback.name == "logging" and handler.gc_callback.name == "gc"

    def order(hook, *args):
        calls.clear()
        getattr(handler, hook)(*args)
        return [n for n, h in calls if h == hook]

    users = ["user1", "user2"]
    assert (
        order("on_step_end", 1.0, 0.5)
        == ["logging", "eval", "profiler", "progress", "checkpoint", "gradient_health", "gc"]
        + users
    )
    # Checkpoint resumes before the progress bar is created (it shows the resumed step).
    assert order("on_train_begin") == ["logging", "profiler", "checkpoint", "progress"] + users
    # The final save first; the metrics files closed and GC re-enabled last.
    assert order("on_train_end") == ["checkpoint", "progress", "profiler", "logging", "gc"] + users
    assert order("on_step_begin") == ["logging"] + users
    assert order("on_substep_end") == users
    # NaN check before logging, so a bad step aborts before anything else sees it.
    assert order("on_pre_optimizer_step", 0.1) == ["gradient_health", "logging"] + users
    for hook, args in (
        ("on_log", ({},)),
        ("on_save", ("d",)),
        ("on_load", ("d",)),
        ("on_evaluate", ({},)),
        ("on_epoch_begin", ()),
        ("on_init_end", ()),
    ):
        assert order(hook, *args) == list(BUILTIN_NAMES) + users
    assert set(DISPATCH_ORDER["on_step_end"]) == set(BUILTIN_NAMES)
    # The removed twins are no built-ins any more.
    for name in ("tensorboard", "memory_monitor", "hf_export"):
        with pytest.raises(ValueError, match="unknown built-in callback names"):
            CallbackHandler(trainer, builtins={name: Recorder(trainer, name, calls)})


def test_add_callback_rejects_non_callbacks(tmp_path):
    trainer = FakeTrainer(make_config(tmp_path))
    with pytest.raises(TypeError, match="Callback instance"):
        trainer.callbacks.add_callback(object())


def test_builtins_are_built_from_the_components_and_settings(tmp_path):
    trainer = FakeTrainer(make_config(tmp_path, eval_every=2, gc_every=3, check_nan_inf=True))
    h = trainer.callbacks
    try:
        assert [type(cb) for cb in h.callbacks] == [
            MetricsCallback,
            CheckpointManagerCallback,
            EvalCallback,
            ProfilerComponentCallback,
            ProgressCallback,
            GradientHealthCallback,
            GCCallback,
        ]
        assert all(cb.handler is h and cb.trainer is trainer for cb in h.callbacks)
        assert h.logging_callback.metrics is trainer.metrics
        assert h.checkpoint_callback.checkpointer is trainer.checkpointer
        assert h.profiler_callback.profiler is trainer.profiler
        assert h.eval_callback.eval_steps == 2
        assert h.gc_callback.gc_steps == 3 and not gc.isenabled()  # disabled at on_init_end
        assert h.gradient_health_callback.enabled
        # Relative output folders resolve under dump_folder; metrics.jsonl sits with the checkpoints.
        assert trainer.checkpointer.config.folder == str(tmp_path / "out")
        assert trainer.metrics.metrics_path == str(tmp_path / "out" / "metrics.jsonl")
        assert trainer.metrics.config.save_tb_folder == str(tmp_path / "tb")
        assert trainer.profiler.config.save_traces_folder == str(tmp_path / "prof")
    finally:
        h.gc_callback.on_train_end()
    assert gc.isenabled()
    off = FakeTrainer(make_config(tmp_path / "off")).callbacks
    assert off.eval_callback.eval_steps == 0 and not off.gc_callback.enabled
    assert not off.gradient_health_callback.enabled


def test_settings_are_validated_where_they_are_given(tmp_path):
    # The component Configs reject bad values when they are built, naming the field.
    with pytest.raises(ValueError, match=r"MetricsProcessor\.Config\.log_freq"):
        make_config(tmp_path, metrics={"log_freq": 0})
    with pytest.raises(ValueError, match=r"CheckpointManager\.Config\.interval"):
        make_config(tmp_path, checkpoint={"interval": -1})
    with pytest.raises(ValueError, match=r"Profiler\.Config\.active"):
        make_config(tmp_path, profiler={"enable_profiling": True, "active": 0})
    with pytest.raises(ValueError, match=r"TrainingConfig\.gc_freq"):
        make_config(tmp_path, gc_every=-2)
    # The callbacks check their own arguments, for direct use.
    trainer = SimpleNamespace(state=TrainerState(max_steps=1), evaluate=lambda: 0.0)
    with pytest.raises(ValueError, match="GCCallback: every must be >= 0"):
        GCCallback(trainer, every=-2)
    with pytest.raises(ValueError, match="EvalCallback: every must be >= 0"):
        EvalCallback(trainer, every=-1)
    with pytest.raises(ValueError, match="has no evaluate"):
        EvalCallback(SimpleNamespace(state=trainer.state), every=2)
    assert EvalCallback(SimpleNamespace(state=trainer.state), every=0).eval_steps == 0


# ---------------------------------------------------------------------------------------------
# metrics (log line, metrics.jsonl, TensorBoard, memory) / progress / profiler
# ---------------------------------------------------------------------------------------------


class LogSink(Callback):
    def __init__(self, trainer):
        super().__init__(trainer)
        self.logged = []

    def on_log(self, metrics):
        self.logged.append(metrics)


def test_logging_writes_metrics_jsonl_log_history_and_fans_out(tmp_path, caplog):
    config = make_config(
        tmp_path, metrics={"log_freq": 2, "model_flops_per_token": 6_000_000, "peak_tflops": 0.5}
    )
    trainer = FakeTrainer(config)
    sink = trainer.callbacks.add_callback(LogSink(trainer))
    with caplog.at_level(logging.INFO, logger="hyper_parallel.components.metrics"):
        trainer.train()

    assert len(losses(trainer)) == 6
    lines = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["step"] for r in records] == [2, 4, 6]
    assert [r["step"] for r in trainer.state.log_history] == [2, 4, 6]
    assert [r["step"] for r in sink.logged] == [2, 4, 6]
    assert trainer.state.log_history == trainer.metrics.history == records
    # Every step's record is kept for the other callbacks, logged or not.
    assert trainer.callbacks.last_step_metrics["step"] == 6
    for rec in records:
        assert rec["loss"] == losses(trainer)[rec["step"] - 1]
        assert rec["lr"] == pytest.approx(1e-2 / (1 + rec["step"]))
        assert rec["epoch"] == 0
        assert rec["step_time"] > 0
        assert rec["tokens_per_sec"] == pytest.approx(TOKENS_PER_STEP / rec["step_time"])
        assert rec["tflops"] == pytest.approx(rec["tokens_per_sec"] * 6e6 / 1e12)
        assert rec["mfu"] == pytest.approx(rec["tflops"] / 0.5)
        assert math.isfinite(rec["grad_norm"])
    text = caplog.text
    assert "step 4/6" in text and f"loss {records[1]['loss']:.8f}" in text and "MFU" in text
    assert "step 3/6" not in text


def test_logging_without_throughput_has_no_rate_fields(tmp_path):
    trainer = FakeTrainer(make_config(tmp_path, steps=2, metrics={"report_throughput": False}))
    trainer.train()
    rec = trainer.state.log_history[-1]
    assert rec["step"] == 2 and rec["step_time"] > 0
    assert "tokens_per_sec" not in rec and "mfu" not in rec


def test_progress_bar_on_rank0_starts_at_resumed_step(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HYPER_PARALLEL_DISABLE_TQDM", "0")
    trainer = FakeTrainer(make_config(tmp_path, steps=4))
    bars = []
    progress = trainer.callbacks.progress_callback
    orig = type(progress).on_step_end

    def spy(self, loss, gn):
        orig(self, loss, gn)
        bars.append((self.bar.n, self.bar.total, self.bar.postfix))

    monkeypatch.setattr(type(progress), "on_step_end", spy)
    trainer.state.global_step = 1  # as if resumed at step 1
    trainer.train()
    assert [b[0] for b in bars] == [2, 3, 4] and bars[0][1] == 4
    assert "loss=" in bars[-1][2] and "gnorm=" in bars[-1][2]
    assert "4/4" in capsys.readouterr().err
    assert progress.bar is None  # closed at train end

    monkeypatch.setenv("HYPER_PARALLEL_DISABLE_TQDM", "1")
    t2 = FakeTrainer(make_config(tmp_path / "t2", steps=1))
    t2.callbacks.on_train_begin()
    assert t2.callbacks.progress_callback.bar is None


def test_tensorboard_writes_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = make_config(
        tmp_path, metrics={"enable_tensorboard": True, "tb_log_freq": 2}, eval_every=3
    )
    trainer = FakeTrainer(config, eval_losses=[0.75, 0.25])
    trainer.train()
    files = glob.glob(str(tmp_path / "tb" / "events.out.tfevents.*"))
    assert len(files) == 1
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {
        "train/loss",
        "train/grad_norm",
        "train/lr",
        "train/tokens_per_sec",
        "eval/loss",
    } <= tags
    events = acc.Scalars("train/loss")
    assert [e.step for e in events] == [2, 4, 6]
    assert [e.value for e in events] == pytest.approx([losses(trainer)[i] for i in (1, 3, 5)])
    assert [(e.step, e.value) for e in acc.Scalars("eval/loss")] == [(3, 0.75), (6, 0.25)]


def test_tensorboard_disabled_writes_nothing(tmp_path):
    FakeTrainer(make_config(tmp_path, steps=2)).train()
    assert not (tmp_path / "tb").exists()


def test_profiler_writes_trace_per_rank(tmp_path):
    config = make_config(
        tmp_path, steps=5, profiler={"enable_profiling": True, "wait": 1, "warmup": 1, "active": 2}
    )
    trainer = FakeTrainer(config)
    trainer.train()
    traces = glob.glob(str(tmp_path / "prof" / "rank0*.pt.trace.json*"))
    assert len(traces) == 1
    with open(traces[0]) as f:
        trace = json.load(f)
    assert any("ProfilerStep#" in ev.get("name", "") for ev in trace["traceEvents"])
    assert trainer.callbacks.profiler_callback.profiler.profiler is None  # stopped at train end


def test_profiler_disabled_writes_nothing(tmp_path):
    trainer = FakeTrainer(make_config(tmp_path, steps=2))
    trainer.train()
    assert trainer.profiler.profiler is None and not (tmp_path / "prof").exists()


def test_memory_monitor_samples_every_log_steps(tmp_path):
    config = make_config(
        tmp_path,
        steps=5,
        metrics={"enable_memory_monitor": True, "memory_log_freq": 2},
    )
    trainer = FakeTrainer(config)
    trainer.train()
    history = trainer.metrics.memory_history
    assert [m["step"] for m in history] == [0, 2, 4, 5]  # train begin, steps 2 and 4, train end
    for m in history:
        assert 0 < m["rss_gib"] <= m["peak_rss_gib"]
        assert "device_allocated_gib" not in m  # CPU device


def test_resetting_a_peak_that_cannot_be_reset_is_refused(tmp_path):
    """On a CPU there is no device peak counter, and without the monitor no peak is sampled:
    either way the setting would do nothing, so it is an error naming the reason."""
    with pytest.raises(ValueError, match="needs a device peak-memory counter"):
        FakeTrainer(make_config(tmp_path, metrics={"enable_memory_monitor": True,
                                                   "reset_peak_memory_each_step": True}))
    with pytest.raises(ValueError, match="enable_memory_monitor is off"):
        FakeTrainer(make_config(tmp_path, metrics={"reset_peak_memory_each_step": True}))


def test_memory_monitor_off_by_default(tmp_path):
    trainer = FakeTrainer(make_config(tmp_path, steps=2))
    trainer.train()
    assert trainer.metrics.memory_history == []


# ---------------------------------------------------------------------------------------------
# debug guards, eval
# ---------------------------------------------------------------------------------------------


def test_nan_aborts_before_the_optimizer_step(tmp_path, caplog):
    trainer = FakeTrainer(make_config(tmp_path, check_nan_inf=True), nan_at_step=3)
    seen = []
    orig_step = trainer.optimizer.step

    def counting_step(*a, **k):
        seen.append(trainer.state.global_step)
        return orig_step(*a, **k)

    trainer.optimizer.step = counting_step
    with caplog.at_level(logging.ERROR), pytest.raises(RuntimeError, match="step 3"):
        trainer.train()
    assert seen == [1, 2]  # the poisoned step never updated the weights
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert "non-finite gradient norm" in caplog.text


def test_nan_passes_when_check_disabled(tmp_path):
    trainer = FakeTrainer(make_config(tmp_path, steps=4), nan_at_step=3)
    trainer.train()
    assert math.isnan(losses(trainer)[2])


def test_gc_disabled_during_training_and_collected_every_n_steps(tmp_path):
    assert gc.isenabled()
    counts = []
    gc.callbacks.append(
        lambda phase, info: counts.append(info["generation"]) if phase == "start" else None
    )
    try:
        trainer = FakeTrainer(make_config(tmp_path, steps=5, gc_every=2))
        states = []

        class Probe(Callback):
            def on_step_end(self, loss, grad_norm):
                states.append(gc.isenabled())

        trainer.callbacks.add_callback(Probe(trainer))
        trainer.train()
    finally:
        gc.callbacks.pop()
    assert states == [False] * 5
    assert trainer.callbacks.gc_callback.collections == 2  # steps 2 and 4
    assert counts.count(2) >= 3  # the initial clean-up + 2 periodic full collections
    assert gc.isenabled()


def test_gc_untouched_when_gc_steps_zero(tmp_path):
    trainer = FakeTrainer(make_config(tmp_path, steps=2))
    states = []

    class Probe(Callback):
        def on_step_end(self, loss, grad_norm):
            states.append(gc.isenabled())

    trainer.callbacks.add_callback(Probe(trainer))
    trainer.train()
    assert states == [True, True]
    assert trainer.callbacks.gc_callback.collections == 0


def test_eval_every_eval_steps_dispatches_on_evaluate(tmp_path):
    config = make_config(tmp_path, steps=5, eval_every=2, metrics={"log_freq": 3})
    trainer = FakeTrainer(config, eval_losses=[1.5, 1.25])
    got = []

    class Sink(Callback):
        def on_evaluate(self, metrics):
            got.append((self.trainer.state.global_step, metrics))

    trainer.callbacks.add_callback(Sink(trainer))
    trainer.train()
    assert trainer.eval_calls == [2, 4]
    assert trainer.callbacks.eval_callback.last_eval_step == 4
    assert got == [(2, {"eval_loss": 1.5}), (4, {"eval_loss": 1.25})]
    records = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r.get("eval_loss")) for r in records] == [(2, 1.5), (3, None), (4, 1.25)]
    assert {"step": 4, "eval_loss": 1.25} in trainer.metrics.history


def test_eval_disabled_never_evaluates(tmp_path):
    trainer = FakeTrainer(make_config(tmp_path, steps=3))
    trainer.train()
    assert trainer.eval_calls == [] and trainer.callbacks.eval_callback.last_eval_step is None


# ---------------------------------------------------------------------------------------------
# checkpoint + HF export
# ---------------------------------------------------------------------------------------------


def test_checkpoint_cadence_final_save_and_exact_resume(tmp_path):
    full = FakeTrainer(make_config(tmp_path, steps=7, checkpoint={"interval": 3}))
    saves = []

    class SaveSink(Callback):
        def on_save(self, d):
            saves.append(d)

    full.callbacks.add_callback(SaveSink(full))
    full.train()
    out = tmp_path / "out"
    assert saves == [str(out / f"step_{s}") for s in (3, 6, 7)]  # cadence + final
    assert sorted(n for n in os.listdir(out) if n.startswith("step_")) == [
        "step_3",
        "step_6",
        "step_7",
    ]
    with open(out / "step_6" / ck.EXTRA_STATE_FILE) as f:
        assert json.load(f)["epoch"] == 0

    # Resume from step 3 in a fresh "process": other init, other RNG. Steps 4..7 must be identical.
    resume_config = make_config(
        tmp_path,
        steps=7,
        checkpoint={"interval": 3, "load_path": str(out / "step_3"), "folder": "r"},
    )
    torch.manual_seed(1234)
    resumed = FakeTrainer(resume_config, seed=99)
    loads = []

    class LoadSink(Callback):
        def on_load(self, d):
            loads.append((d, self.trainer.state.global_step))

    resumed.callbacks.add_callback(LoadSink(resumed))
    resumed.train()
    assert loads == [(str(out / "step_3"), 3)]
    assert resumed.state.loss_history == full.state.loss_history[3:]  # (step, loss) pairs
    assert sorted(os.listdir(tmp_path / "r")) == ["metrics.jsonl", "step_6", "step_7"]


def test_final_save_not_repeated_when_already_saved(tmp_path):
    trainer = FakeTrainer(make_config(tmp_path, steps=4, checkpoint={"interval": 2}))
    trainer.train()
    assert trainer.callbacks.checkpoint_callback.checkpointer.saved == [
        str(tmp_path / "out" / f"step_{s}") for s in (2, 4)
    ]


def test_save_steps_zero_saves_nothing(tmp_path):
    trainer = FakeTrainer(make_config(tmp_path, steps=3))
    trainer.train()
    assert not glob.glob(str(tmp_path / "out" / "step_*"))
    assert trainer.checkpointer.saved == []


def test_resume_latest_and_resume_at_max_steps(tmp_path):
    def config(steps):
        return make_config(tmp_path, steps=steps, checkpoint={"interval": 2, "load_path": "latest"})

    # "latest" with nothing saved yet: fresh start.
    first = FakeTrainer(config(4))
    first.train()
    assert len(losses(first)) == 4 and first.checkpointer.loaded_from is None
    # Relaunch with the same settings and a longer horizon: continues from step_4.
    second = FakeTrainer(config(6), seed=5)
    second.train()
    assert second.callbacks.checkpoint_callback.checkpointer.loaded_from == str(
        tmp_path / "out" / "step_4"
    )
    assert len(losses(second)) == 2
    # Relaunch once more at the same horizon: nothing to train, nothing re-saved.
    third = FakeTrainer(config(6), seed=6)
    third.train()
    assert third.state.global_step == 6 and third.state.loss_history == []
    assert third.callbacks.checkpoint_callback.checkpointer.saved == []


def test_missing_load_path_is_an_error(tmp_path):
    config = make_config(tmp_path, checkpoint={"load_path": str(tmp_path / "nowhere")})
    with pytest.raises(ck.CheckpointError, match="load_path.*does not exist"):
        FakeTrainer(config).train()


def test_async_checkpointing_via_callback(tmp_path):
    config = make_config(tmp_path, steps=5, checkpoint={"interval": 2, "async_mode": "async"})
    trainer = FakeTrainer(config)
    trainer.train()
    assert not ck.async_save_in_flight()  # train end waited
    out = tmp_path / "out"
    assert sorted(n for n in os.listdir(out) if n.startswith(("step_", ".step_"))) == [
        "step_2",
        "step_4",
        "step_5",
    ]
    assert ck.latest_checkpoint(str(out)) == str(out / "step_5")


@pytest.mark.parametrize("async_mode", ["disabled", "async"])
def test_hf_export_after_every_save(tmp_path, monkeypatch, async_mode):
    from safetensors.torch import load_file

    monkeypatch.setattr(ck.hf_export, "_hf_config_writer", lambda: fake_config_writer)
    config = make_config(
        tmp_path,
        steps=3,
        checkpoint={"interval": 2, "export_hf": True, "async_mode": async_mode,
                    "export_hf_policy": "every_save"},
    )
    trainer = FakeTrainer(config)
    trainer.train()
    out = tmp_path / "out"
    assert trainer.checkpointer.exported == [str(out / f"step_{s}" / "hf_ckpt") for s in (2, 3)]
    for step in (2, 3):
        hf = load_file(str(out / f"step_{step}" / "hf_ckpt" / "model.safetensors"))
        assert sorted(hf) == ["model.0.bias", "model.0.weight", "model.3.bias", "model.3.weight"]
        assert ck.is_complete_checkpoint(str(out / f"step_{step}"))
    final = load_file(str(out / "step_3" / "hf_ckpt" / "model.safetensors"))
    assert torch.equal(final["model.0.weight"], trainer.model[0].weight.detach())
    assert not glob.glob(str(out / "**" / ".*.tmp"), recursive=True)


@pytest.mark.parametrize("steps", [3, 4])
@pytest.mark.parametrize("async_mode", ["disabled", "async"])
def test_hf_export_final_exports_the_end_of_training_only(tmp_path, monkeypatch, steps,
                                                          async_mode):
    """The default policy: saves at 2 (and 4), one export, of the last step's checkpoint --
    saved at the end (3 steps) or by the cadence at that very step, maybe asynchronously
    (4 steps), when the end of training finds it saved and exports it."""
    from safetensors.torch import load_file

    monkeypatch.setattr(ck.hf_export, "_hf_config_writer", lambda: fake_config_writer)
    config = make_config(tmp_path, steps=steps, checkpoint={
        "interval": 2, "export_hf": True, "async_mode": async_mode})
    assert config.checkpoint.export_hf_policy == "final"
    trainer = FakeTrainer(config)
    trainer.train()
    out = tmp_path / "out"
    assert trainer.checkpointer.exported == [str(out / f"step_{steps}" / "hf_ckpt")]
    assert sorted(p.name for p in out.glob("step_*/hf_ckpt")) == ["hf_ckpt"]
    final = load_file(str(out / f"step_{steps}" / "hf_ckpt" / "model.safetensors"))
    assert torch.equal(final["model.0.weight"], trainer.model[0].weight.detach())
    assert json.loads((out / f"step_{steps}" / "hf_ckpt" / "config.json").read_text()) == {
        "dtype": "float32"}


def test_hf_export_final_skips_a_stop_requests_save(tmp_path, monkeypatch):
    """A stop request's save (``last_step`` without ``end_of_training``) writes the checkpoint
    the run resumes from, without the export: the grace period is for that."""
    monkeypatch.setattr(ck.hf_export, "_hf_config_writer", lambda: fake_config_writer)
    trainer = FakeTrainer(make_config(tmp_path, steps=1, checkpoint={
        "interval": 5, "export_hf": True}))
    trainer.train()  # step 1, the end of training: saved and exported
    manager = trainer.checkpointer
    assert manager.maybe_save(2, {"epoch": 0}, last_step=True) == str(tmp_path / "out" / "step_2")
    assert manager.exported == [str(tmp_path / "out" / "step_1" / "hf_ckpt")]


def test_hf_export_requires_adapter_at_init(tmp_path):
    config = make_config(tmp_path, checkpoint={"interval": 1, "export_hf": True})
    with pytest.raises(ValueError, match="checkpoint.export_hf: True, but no sd_adapter"):
        FakeTrainer(config, sd_adapter=None)
    assert not (tmp_path / "out").exists()  # failed before training


def test_resume_needs_a_checkpoint_written_by_a_trainer(tmp_path):
    source = FakeTrainer(make_config(tmp_path / "src", steps=1))
    source.train()
    path = source.checkpointer.save(1)  # no {"epoch": ...}: not what the callback writes
    trainer = FakeTrainer(make_config(tmp_path, checkpoint={"load_path": path}))
    with pytest.raises(ck.CheckpointError, match="has no 'epoch'"):
        trainer.train()
