"""Tests of the legacy trainer's callbacks, driven by a fake trainer that follows the trainer contract
(``args.train.<section>``, ``state``, model/optimizer/scheduler/dataloader, ``evaluate()``) and a
training loop shaped like §C.9/C.10.
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

from hyper_parallel.trainer import checkpoint as ck
from hyper_parallel.trainer.callbacks import (
    BUILTIN_NAMES,
    DISPATCH_ORDER,
    Callback,
    CallbackHandler,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TOKENS_PER_STEP = 32


# ---------------------------------------------------------------------------------------------
# fake trainer
# ---------------------------------------------------------------------------------------------


def make_args(tmp_path, **sections) -> SimpleNamespace:
    """Legacy config shape with test-friendly defaults; ``sections`` override fields per section."""
    defaults = {
        "checkpoint": {
            "output_dir": str(tmp_path / "out"),
            "save_steps": 0,
            "save_hf_weights": False,
            "load_path": None,
            "save_async": False,
        },
        "logging": {
            "log_steps": 1,
            "report_throughput": True,
            "model_flops_per_token": None,
            "peak_tflops": None,
        },
        "tensorboard": {"enabled": False, "output_dir": str(tmp_path / "tb"), "log_steps": 1},
        "profile": {
            "enabled": False,
            "output_dir": str(tmp_path / "prof"),
            "wait_steps": 1,
            "warmup_steps": 1,
            "active_steps": 2,
        },
        "memory_monitor": {"enabled": False, "log_steps": 50, "reset_peak_each_step": False},
        "eval": {"eval_steps": 0, "eval_dataset": None},
        "debug": {
            "deterministic": False,
            "deterministic_warn_only": False,
            "check_nan_inf": False,
            "gc_steps": 0,
        },
    }
    for name, fields in sections.items():
        unknown = set(fields) - set(defaults[name])
        assert not unknown, unknown
        defaults[name].update(fields)
    train = SimpleNamespace(**{k: SimpleNamespace(**v) for k, v in defaults.items()})
    return SimpleNamespace(train=train)


class PrefixAdapter:
    @staticmethod
    def to_hf(state_dict, config):
        return {f"model.{k}": v for k, v in state_dict.items()}


class FakeTrainer:
    """Just enough of the legacy trainer for the callbacks."""

    def __init__(self, args, *, max_steps=6, seed=0, nan_at_step=None, eval_losses=None):
        torch.manual_seed(seed)
        self.args = args
        self.state = SimpleNamespace(
            global_step=0, epoch=0, max_steps=max_steps, log_history=[], loss_history=[]
        )
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
        self.spec = SimpleNamespace(state_dict_adapter=PrefixAdapter)
        self.model_config = {"fake": "config"}
        self.nan_at_step = nan_at_step
        self.eval_losses = list(eval_losses or [])
        self.eval_calls: list[int] = []
        self.callbacks = CallbackHandler(self)

    def evaluate(self) -> float:
        self.eval_calls.append(self.state.global_step)
        return self.eval_losses.pop(0) if self.eval_losses else 0.5

    def train(self) -> None:
        cb = self.callbacks
        cb.on_init_end()
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


def fake_hf_writer(state_dict, path, config):
    from safetensors.torch import save_file

    os.makedirs(path)
    save_file(
        {k: v.contiguous() for k, v in state_dict.items()}, os.path.join(path, "model.safetensors")
    )


# ---------------------------------------------------------------------------------------------
# dispatch
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
    trainer = FakeTrainer(make_args(tmp_path), max_steps=1)
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
        == [
            "logging",
            "eval",
            "profiler",
            "tensorboard",
            "progress",
            "checkpoint",
            "hf_export",
            "gradient_health",
            "memory_monitor",
            "gc",
        ]
        + users
    )
    # Checkpoint resumes before the progress bar is created (it shows the resumed step).
    assert (
        order("on_train_begin")
        == ["memory_monitor", "profiler", "tensorboard", "checkpoint", "progress"] + users
    )
    assert order("on_train_end")[:5] == [
        "checkpoint",
        "hf_export",
        "progress",
        "tensorboard",
        "profiler",
    ]
    assert order("on_train_end")[-2:] == users
    assert order("on_step_begin") == ["logging"] + users
    assert order("on_substep_end") == users
    # NaN check before logging, so a bad step aborts before anything else sees it.
    assert (
        order("on_pre_optimizer_step", 0.1) == ["gradient_health", "logging", "tensorboard"] + users
    )
    for hook, args in (
        ("on_log", ({},)),
        ("on_save", ("d",)),
        ("on_evaluate", ({},)),
        ("on_epoch_begin", ()),
    ):
        assert order(hook, *args) == list(BUILTIN_NAMES) + users
    assert set(DISPATCH_ORDER["on_step_end"]) == set(BUILTIN_NAMES)


def test_add_callback_rejects_non_callbacks(tmp_path):
    trainer = FakeTrainer(make_args(tmp_path))
    with pytest.raises(TypeError, match="Callback instance"):
        trainer.callbacks.add_callback(object())


def test_config_is_read_from_train_sections(tmp_path):
    with pytest.raises(ValueError, match=r"train\.logging\.log_steps"):
        FakeTrainer(make_args(tmp_path, logging={"log_steps": 0}))
    with pytest.raises(ValueError, match=r"train\.checkpoint\.save_steps"):
        FakeTrainer(make_args(tmp_path, checkpoint={"save_steps": -1}))
    with pytest.raises(ValueError, match=r"train\.debug\.gc_steps"):
        FakeTrainer(make_args(tmp_path, debug={"gc_steps": -2}))
    with pytest.raises(ValueError, match=r"train\.profile\.active_steps"):
        FakeTrainer(make_args(tmp_path, profile={"enabled": True, "active_steps": 0}))
    args = make_args(tmp_path)
    del args.train.tensorboard
    with pytest.raises(AttributeError, match="'tensorboard' section"):
        FakeTrainer(args)


# ---------------------------------------------------------------------------------------------
# logging / progress / tensorboard / profiler / memory
# ---------------------------------------------------------------------------------------------


class LogSink(Callback):
    def __init__(self, trainer):
        super().__init__(trainer)
        self.logged = []

    def on_log(self, metrics):
        self.logged.append(metrics)


def test_logging_writes_metrics_jsonl_log_history_and_fans_out(tmp_path, caplog):
    args = make_args(
        tmp_path, logging={"log_steps": 2, "model_flops_per_token": 6_000_000, "peak_tflops": 0.5}
    )
    trainer = FakeTrainer(args, max_steps=6)
    sink = trainer.callbacks.add_callback(LogSink(trainer))
    with caplog.at_level(logging.INFO, logger="hyper_parallel.trainer.callbacks.logging"):
        trainer.train()

    assert len(losses(trainer)) == 6
    lines = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["step"] for r in records] == [2, 4, 6]
    assert [r["step"] for r in trainer.state.log_history] == [2, 4, 6]
    assert [r["step"] for r in sink.logged] == [2, 4, 6]
    for rec in records:
        assert rec["loss"] == losses(trainer)[rec["step"] - 1]
        assert rec["lr"] == pytest.approx(1e-2 / (1 + rec["step"]))
        assert rec["step_time"] > 0
        assert rec["tokens_per_sec"] == pytest.approx(TOKENS_PER_STEP / rec["step_time"])
        assert rec["tflops"] == pytest.approx(rec["tokens_per_sec"] * 6e6 / 1e12)
        assert rec["mfu"] == pytest.approx(rec["tflops"] / 0.5)
        assert math.isfinite(rec["grad_norm"])
    text = caplog.text
    assert "step 4/6" in text and f"loss {records[1]['loss']:.8f}" in text and "MFU" in text


def test_logging_without_throughput_has_no_rate_fields(tmp_path):
    trainer = FakeTrainer(make_args(tmp_path, logging={"report_throughput": False}), max_steps=2)
    trainer.train()
    rec = trainer.state.log_history[-1]
    assert "tokens_per_sec" not in rec and "mfu" not in rec


def test_progress_bar_on_rank0_starts_at_resumed_step(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HYPER_PARALLEL_DISABLE_TQDM", "0")
    trainer = FakeTrainer(make_args(tmp_path), max_steps=4)
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

    monkeypatch.setenv("HYPER_PARALLEL_DISABLE_TQDM", "1")
    t2 = FakeTrainer(make_args(tmp_path), max_steps=1)
    t2.callbacks.on_train_begin()
    assert t2.callbacks.progress_callback.bar is None


def test_tensorboard_writes_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    args = make_args(
        tmp_path, tensorboard={"enabled": True, "log_steps": 2}, eval={"eval_steps": 3}
    )
    trainer = FakeTrainer(args, max_steps=6, eval_losses=[0.75, 0.25])
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
    FakeTrainer(make_args(tmp_path), max_steps=2).train()
    assert not (tmp_path / "tb").exists()


def test_profiler_writes_trace_per_rank(tmp_path):
    args = make_args(
        tmp_path, profile={"enabled": True, "wait_steps": 1, "warmup_steps": 1, "active_steps": 2}
    )
    trainer = FakeTrainer(args, max_steps=5)
    trainer.train()
    traces = glob.glob(str(tmp_path / "prof" / "rank0*.pt.trace.json*"))
    assert len(traces) == 1
    with open(traces[0]) as f:
        trace = json.load(f)
    assert any("ProfilerStep#" in ev.get("name", "") for ev in trace["traceEvents"])
    assert trainer.callbacks.profiler_callback.profiler is None


def test_memory_monitor_samples_every_log_steps(tmp_path):
    args = make_args(
        tmp_path, memory_monitor={"enabled": True, "log_steps": 2, "reset_peak_each_step": True}
    )
    trainer = FakeTrainer(args, max_steps=5)
    trainer.train()
    mon = trainer.callbacks.memory_monitor_callback
    assert [m["step"] for m in mon.history] == [0, 2, 4, 5]  # train begin, steps 2 and 4, train end
    for m in mon.history:
        assert 0 < m["rss_gib"] <= m["peak_rss_gib"]
        assert "device_allocated_gib" not in m  # CPU device


# ---------------------------------------------------------------------------------------------
# debug guards, eval
# ---------------------------------------------------------------------------------------------


def test_nan_aborts_before_the_optimizer_step(tmp_path, caplog):
    trainer = FakeTrainer(
        make_args(tmp_path, debug={"check_nan_inf": True}), max_steps=6, nan_at_step=3
    )
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
    trainer = FakeTrainer(make_args(tmp_path), max_steps=4, nan_at_step=3)
    trainer.train()
    assert math.isnan(losses(trainer)[2])


def test_gc_disabled_during_training_and_collected_every_n_steps(tmp_path):
    assert gc.isenabled()
    trainer = FakeTrainer(make_args(tmp_path, debug={"gc_steps": 2}), max_steps=5)
    states = []

    class Probe(Callback):
        def on_step_end(self, loss, grad_norm):
            states.append(gc.isenabled())

    trainer.callbacks.add_callback(Probe(trainer))
    counts = []
    gc.callbacks.append(
        lambda phase, info: counts.append(info["generation"]) if phase == "start" else None
    )
    try:
        trainer.train()
    finally:
        gc.callbacks.pop()
    assert states == [False] * 5
    assert trainer.callbacks.gc_callback.collections == 2  # steps 2 and 4
    assert counts.count(2) >= 3  # the initial clean-up + 2 periodic full collections
    assert gc.isenabled()


def test_gc_untouched_when_gc_steps_zero(tmp_path):
    trainer = FakeTrainer(make_args(tmp_path), max_steps=2)
    states = []

    class Probe(Callback):
        def on_step_end(self, loss, grad_norm):
            states.append(gc.isenabled())

    trainer.callbacks.add_callback(Probe(trainer))
    trainer.train()
    assert states == [True, True]


def test_eval_every_eval_steps_dispatches_on_evaluate(tmp_path):
    args = make_args(tmp_path, eval={"eval_steps": 2}, logging={"log_steps": 3})
    trainer = FakeTrainer(args, max_steps=5, eval_losses=[1.5, 1.25])
    got = []

    class Sink(Callback):
        def on_evaluate(self, metrics):
            got.append((self.trainer.state.global_step, metrics))

    trainer.callbacks.add_callback(Sink(trainer))
    trainer.train()
    assert trainer.eval_calls == [2, 4]
    assert got == [(2, {"eval_loss": 1.5}), (4, {"eval_loss": 1.25})]
    records = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r.get("eval_loss")) for r in records] == [(2, 1.5), (3, None), (4, 1.25)]
    assert {"step": 4, "eval_loss": 1.25} in trainer.state.log_history


# ---------------------------------------------------------------------------------------------
# checkpoint + HF export
# ---------------------------------------------------------------------------------------------


def test_checkpoint_cadence_final_save_and_exact_resume(tmp_path):
    args = make_args(tmp_path, checkpoint={"save_steps": 3})
    full = FakeTrainer(args, max_steps=7)
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

    # Resume from step 3 in a fresh "process": other init, other RNG. Steps 4..7 must be identical.
    resume_args = make_args(
        tmp_path,
        checkpoint={
            "save_steps": 3,
            "load_path": str(out / "step_3"),
            "output_dir": str(tmp_path / "r"),
        },
    )
    torch.manual_seed(1234)
    resumed = FakeTrainer(resume_args, max_steps=7, seed=99)
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
    trainer = FakeTrainer(make_args(tmp_path, checkpoint={"save_steps": 2}), max_steps=4)
    trainer.train()
    assert trainer.callbacks.checkpoint_callback.saved == [
        str(tmp_path / "out" / f"step_{s}") for s in (2, 4)
    ]


def test_save_steps_zero_saves_nothing(tmp_path):
    trainer = FakeTrainer(make_args(tmp_path), max_steps=3)
    trainer.train()
    assert not glob.glob(str(tmp_path / "out" / "step_*"))


def test_resume_latest_and_resume_at_max_steps(tmp_path):
    # "latest" with nothing saved yet: fresh start.
    args = make_args(tmp_path, checkpoint={"save_steps": 2, "load_path": "latest"})
    first = FakeTrainer(args, max_steps=4)
    first.train()
    assert len(losses(first)) == 4
    # Relaunch with the same config and a longer horizon: continues from step_4.
    second = FakeTrainer(args, max_steps=6, seed=5)
    second.train()
    assert second.callbacks.checkpoint_callback.loaded_from == str(tmp_path / "out" / "step_4")
    assert len(losses(second)) == 2
    # Relaunch once more at the same horizon: nothing to train, nothing re-saved.
    third = FakeTrainer(args, max_steps=6, seed=6)
    third.train()
    assert third.state.global_step == 6 and third.state.loss_history == []
    assert third.callbacks.checkpoint_callback.saved == []


def test_missing_load_path_is_an_error(tmp_path):
    args = make_args(tmp_path, checkpoint={"load_path": str(tmp_path / "nowhere")})
    with pytest.raises(ck.CheckpointError, match="load_path"):
        FakeTrainer(args).train()


def test_async_checkpointing_via_callback(tmp_path):
    args = make_args(tmp_path, checkpoint={"save_steps": 2, "save_async": True})
    trainer = FakeTrainer(args, max_steps=5)
    trainer.train()
    assert not ck.async_save_in_flight()  # train end waited
    out = tmp_path / "out"
    assert sorted(n for n in os.listdir(out) if n.startswith(("step_", ".step_"))) == [
        "step_2",
        "step_4",
        "step_5",
    ]
    assert ck.latest_checkpoint(str(out)) == str(out / "step_5")


@pytest.mark.parametrize("save_async", [False, True])
def test_hf_export_after_every_save(tmp_path, monkeypatch, save_async):
    from safetensors.torch import load_file

    monkeypatch.setattr(ck, "_hf_writer", lambda: fake_hf_writer)
    args = make_args(
        tmp_path, checkpoint={"save_steps": 2, "save_hf_weights": True, "save_async": save_async}
    )
    trainer = FakeTrainer(args, max_steps=3)
    trainer.train()
    out = tmp_path / "out"
    for step in (2, 3):
        hf = load_file(str(out / f"step_{step}" / "hf_ckpt" / "model.safetensors"))
        assert sorted(hf) == ["model.0.bias", "model.0.weight", "model.3.bias", "model.3.weight"]
        assert ck.is_complete_checkpoint(str(out / f"step_{step}"))
    final = load_file(str(out / "step_3" / "hf_ckpt" / "model.safetensors"))
    assert torch.equal(final["model.0.weight"], trainer.model[0].weight.detach())
    assert not glob.glob(str(out / "**" / ".*.tmp"), recursive=True)


def test_hf_export_requires_adapter_at_init(tmp_path):
    trainer = FakeTrainer(
        make_args(tmp_path, checkpoint={"save_steps": 1, "save_hf_weights": True})
    )
    trainer.spec = SimpleNamespace(state_dict_adapter=None)
    with pytest.raises(ValueError, match="save_hf_weights"):
        trainer.train()
    assert not (tmp_path / "out").exists()  # failed before training
