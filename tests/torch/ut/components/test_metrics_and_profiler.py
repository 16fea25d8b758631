"""``MetricsProcessor`` and ``Profiler``: their outputs (records, metrics.jsonl, log lines,
TensorBoard scalars, memory samples, traces) against the plain helpers they are built on
(:mod:`hyper_parallel.runtime.callbacks.logging` / ``.tensorboard`` / ``.memory`` /
``.profiler``), applied at the documented cadences."""

from __future__ import annotations

import glob
import itertools
import json
import logging
import math
import os
from types import SimpleNamespace

import pytest
import torch

from hyper_parallel.components import MetricsProcessor, Profiler
from hyper_parallel.components import metrics as metrics_module
from hyper_parallel.runtime.callbacks import profiler as profiler_helpers
from hyper_parallel.runtime.callbacks import tensorboard as tensorboard_helpers
from hyper_parallel.runtime.callbacks.logging import (
    METRICS_FILE,
    JsonlWriter,
    format_eval_metrics,
    format_step_record,
    step_metrics_record,
)
from hyper_parallel.runtime.callbacks.memory import sample_memory
from hyper_parallel.runtime.callbacks.tensorboard import add_eval_scalars, add_step_scalars
from tests.torch.ut.components._common import tiny_model

STEPS = 12
WORLD_SIZE = 2
STEP_TIME = 0.25  # the fake clock advances this much per perf_counter call
LOSSES = [2.5 - 0.125 * i for i in range(STEPS)]
LOSSES[2] = float("nan")  # written as NaN (a JSON extension Python reads back)
EVAL = {"eval_loss": 1.5}


class RecordingWriter:
    """Stands in for a TensorBoard ``SummaryWriter``."""

    def __init__(self, output_dir, field_name=None):
        self.output_dir, self.field_name = output_dir, field_name
        self.scalars = []
        self.closed = False

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, value, step))

    def flush(self):
        pass

    def close(self):
        self.closed = True


@pytest.fixture
def writers(monkeypatch):
    """A deterministic step timer (every perf_counter call advances STEP_TIME) and the
    TensorBoard writers the component opens (recorded, not written)."""
    ticks = itertools.count()
    monkeypatch.setattr("time.perf_counter", lambda: STEP_TIME * next(ticks))
    opened: list[RecordingWriter] = []

    def open_writer(output_dir, field_name=None):
        opened.append(RecordingWriter(output_dir, field_name))
        return opened[-1]

    # The component imports its runtime helpers when it uses them: patch them at their home.
    monkeypatch.setattr(tensorboard_helpers, "open_summary_writer", open_writer)
    return opened


def run_component(tmp_path, config: MetricsProcessor.Config):
    trainer = SimpleNamespace(rank=0, world_size=WORLD_SIZE, device=torch.device("cpu"))
    metrics = config.build(trainer=trainer, output_dir=str(tmp_path / "new"), max_steps=STEPS)
    metrics.begin()
    for step, loss in enumerate(LOSSES, start=1):
        metrics.step_begin()
        metrics.log(
            step, loss=loss, grad_norm=0.5 * step, lr=1e-4 * step, tokens=100 * step, epoch=0
        )
    metrics.log_eval(STEPS, EVAL)
    metrics.close(STEPS)
    return metrics


def expected_outputs(tmp_path, c: MetricsProcessor.Config) -> SimpleNamespace:
    """What :func:`run_component` must produce, from the plain helpers: the record of every step
    (step time = one clock tick); every ``log_freq`` steps its log line, history entry and
    metrics.jsonl line; every ``tb_log_freq`` steps its ``train/*`` scalars; every
    ``memory_log_freq`` steps a memory sample (plus one at train begin and one at train end);
    the evaluation logged, stored and written to TensorBoard."""
    out = SimpleNamespace(
        history=[],
        lines=[],
        memory_steps=[],
        tb=RecordingWriter(None),
        metrics_path=str(tmp_path / "ref" / METRICS_FILE),
        last=None,
    )
    jsonl = JsonlWriter(out.metrics_path)

    def memory(label: str, step: int) -> None:
        if c.enable_memory_monitor:
            out.memory_steps.append(step)
            out.lines.append(f"memory ({label}, step {step}, rank 0)")

    memory("train begin", 0)
    for step, loss in enumerate(LOSSES, start=1):
        rec = step_metrics_record(
            step=step,
            epoch=0,
            loss=loss,
            grad_norm=0.5 * step,
            lr=1e-4 * step,
            step_time=STEP_TIME,
            tokens=100 * step,
            report_throughput=c.report_throughput,
            flops_per_token=c.model_flops_per_token,
            peak_tflops=c.peak_tflops,
            world_size=WORLD_SIZE,
        )
        out.last = rec
        if step % c.log_freq == 0:
            out.lines.append(format_step_record(rec, STEPS))
            out.history.append(rec)
            jsonl.write(rec)
        if c.enable_tensorboard and step % c.tb_log_freq == 0:
            add_step_scalars(out.tb, rec, step)
        if step % c.memory_log_freq == 0:
            memory("step", step)
    out.lines.append(f"step {STEPS} | {format_eval_metrics(EVAL)}")
    out.history.append({"step": STEPS, **EVAL})
    jsonl.write({"step": STEPS, **EVAL})
    if c.enable_tensorboard:
        add_eval_scalars(out.tb, EVAL, STEPS)
    memory("train end", STEPS)
    jsonl.close()
    return out


def log_lines(caplog) -> list[str]:
    """The component's messages; memory lines cut before their (live) figures."""
    lines = [r.getMessage() for r in caplog.records if r.name == metrics_module.logger.name]
    return [m.split(":")[0] if m.startswith("memory (") else m for m in lines]


def comparable(scalars):
    """TensorBoard scalars with NaN made comparable."""
    return [(tag, "nan" if math.isnan(v) else v, step) for tag, v, step in scalars]


@pytest.mark.parametrize(
    "config",
    [
        MetricsProcessor.Config(),  # the defaults
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
        MetricsProcessor.Config(
            log_freq=1, report_throughput=False, enable_tensorboard=True, save_tb_folder="tb"
        ),
    ],
    ids=["defaults", "everything-on", "every-step-no-throughput"],
)
def test_metrics_equal_the_plain_helpers(tmp_path, caplog, writers, config):
    with caplog.at_level(logging.INFO):
        metrics = run_component(tmp_path, config)
    want = expected_outputs(tmp_path, config)

    # The logged records (history and metrics.jsonl), throughput / TFLOPS / MFU included.
    assert metrics.history == want.history
    assert metrics.last_metrics == want.last
    with open(want.metrics_path) as f, open(metrics.metrics_path) as g:
        assert g.read() == f.read()
    assert metrics.metrics_path == str(tmp_path / "new" / METRICS_FILE)
    # The log lines, word for word (memory lines up to their live RSS figures), in order.
    assert log_lines(caplog) == want.lines
    # TensorBoard: one writer at save_tb_folder, closed at the end, with these scalars.
    if config.enable_tensorboard:
        assert [(w.output_dir, w.closed) for w in writers] == [("tb", True)]
        assert writers[0].field_name == "MetricsProcessor.Config.enable_tensorboard"
        assert comparable(writers[0].scalars) == comparable(want.tb.scalars)
    else:
        assert writers == []
    # Memory samples: taken at these steps, with the fields of sample_memory.
    assert [m["step"] for m in metrics.memory_history] == want.memory_steps
    fields = sorted(sample_memory(torch.device("cpu"), 0))
    assert all(sorted(m) == fields for m in metrics.memory_history)

    # The same outputs, spelled out.
    logged = [r["step"] for r in metrics.history]  # the last one is the evaluation record
    tb_loss = [s for s in (writers[0].scalars if writers else []) if s[0] == "train/loss"]
    if config.log_freq == 10:
        assert logged == [10, STEPS] and "tokens_per_sec" in metrics.history[0]
        assert metrics.memory_history == []
    elif config.log_freq == 2:
        assert logged == [2, 4, 6, 8, 10, 12, STEPS]
        assert metrics.history[0]["tokens_per_sec"] == pytest.approx(200 / STEP_TIME)
        assert metrics.history[0]["mfu"] == pytest.approx(
            (200 / STEP_TIME) * 600 / 1e12 / (1e-9 * WORLD_SIZE)
        )
        assert [s[2] for s in tb_loss] == [3, 6, 9, 12]
        assert [m["step"] for m in metrics.memory_history] == [0, 2, 4, 6, 8, 10, 12, STEPS]
    else:
        assert logged == [*range(1, STEPS + 1), STEPS]
        assert not any("tokens_per_sec" in r or "mfu" in r for r in metrics.history)
        assert [s[2] for s in tb_loss] == list(range(1, STEPS + 1))
        with open(metrics.metrics_path) as f:
            third = json.loads(f.read().splitlines()[2])
        assert third["step"] == 3 and math.isnan(third["loss"])
    assert metrics.history[-1] == {"step": STEPS, **EVAL}
    if writers:
        assert writers[0].scalars[-1] == ("eval/loss", 1.5, STEPS)


def test_metrics_file_only_on_rank0_and_only_with_an_output_dir(tmp_path):
    other = MetricsProcessor.Config(log_freq=1).build(
        rank=1, world_size=2, output_dir=str(tmp_path)
    )
    other.log(1, loss=1.0, grad_norm=None, lr=None, tokens=None)
    other.close()
    assert not os.path.exists(tmp_path / "metrics.jsonl")
    assert other.history[0]["loss"] == 1.0  # every rank keeps the history
    none = MetricsProcessor.Config(log_freq=1).build()
    assert none.metrics_path is None and none.rank == 0 and none.world_size == 1
    none.log(1, loss=1.0, grad_norm=None, lr=None, tokens=None)
    assert none.history[0]["step_time"] is None  # no step_begin: no step time, no throughput
    assert "tokens_per_sec" not in none.history[0]


def _rows(path):
    return [json.loads(line) for line in open(path, encoding="utf-8").read().splitlines()]


def _run_steps(metrics, steps, eval_at=()):
    for step in steps:
        metrics.step_begin()
        metrics.log(step, loss=float(step), grad_norm=None, lr=None, tokens=None)
        if step in eval_at:
            metrics.log_eval(step, {"eval_loss": step / 10})


def test_resume_replaces_the_rows_of_the_repeated_steps(tmp_path):
    """4 steps (eval at 2 and 4), killed, resumed at step 2: the file holds steps 1..4 once,
    the resumed run's 3 and 4, and the eval row of step 2; mode bits survive the rewrite."""
    config = MetricsProcessor.Config(log_freq=1)
    first = config.build(rank=0, world_size=1, output_dir=str(tmp_path))
    first.begin()
    _run_steps(first, [1, 2, 3, 4], eval_at={2, 4})
    first.close(4)
    path = first.metrics_path
    os.chmod(path, 0o640)
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"step": 5, "loss": 9')  # a torn line: killed while writing step 5

    resumed = config.build(rank=0, world_size=1, output_dir=str(tmp_path))
    resumed.begin(0)
    resumed.resume(2)  # what MetricsCallback.on_load does after the checkpoint of step 2
    assert [(r["step"], "loss" in r) for r in _rows(path)] == [(1, True), (2, True), (2, False)]
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    _run_steps(resumed, [3, 4], eval_at={4})
    resumed.close(4)
    rows = _rows(path)
    assert [(r["step"], "loss" in r) for r in rows] == [
        (1, True), (2, True), (2, False), (3, True), (4, True), (4, False)
    ]
    assert rows[-1] == {"step": 4, "eval_loss": 0.4}


def test_resume_rewrite_keeps_rows_without_a_step_and_cleans_an_older_file(tmp_path):
    path = tmp_path / METRICS_FILE
    lines = [
        {"run": "header"},  # no step: always kept
        *({"step": s, "loss": 1.0 * s} for s in (1, 2, 3, 4)),
        {"step": 4, "eval_loss": 0.5},
        # an older file: a resume at step 2 appended 3 and 4 again, then 5
        *({"step": s, "loss": 10.0 * s} for s in (3, 4, 5)),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    metrics = MetricsProcessor.Config(log_freq=1).build(rank=0, output_dir=str(tmp_path))
    metrics.resume(4)
    assert _rows(path) == [
        {"run": "header"},
        {"step": 1, "loss": 1.0},
        {"step": 2, "loss": 2.0},
        {"step": 3, "loss": 30.0},  # the last attempt's rows of steps 3 and 4
        {"step": 4, "loss": 40.0},
    ]
    before = path.stat().st_mtime_ns
    metrics.resume(4)  # nothing to drop: the file is not rewritten
    assert path.stat().st_mtime_ns == before


def test_resume_touches_no_file_on_other_ranks_or_without_one(tmp_path):
    path = tmp_path / METRICS_FILE
    path.write_text('{"step": 1, "loss": 1.0}\n{"step": 2, "loss": 2.0}\n')
    other = MetricsProcessor.Config(log_freq=1).build(rank=1, output_dir=str(tmp_path))
    other.resume(1)
    assert len(_rows(path)) == 2  # only rank 0 owns the file
    fresh = MetricsProcessor.Config(log_freq=1).build(rank=0, output_dir=str(tmp_path / "new"))
    fresh.resume(3)  # no file yet: nothing to do, nothing created
    assert not (tmp_path / "new").exists()


def test_metrics_callback_resumes_the_file_on_load(tmp_path):
    from hyper_parallel.runtime.callbacks import CallbackHandler, MetricsCallback

    path = tmp_path / METRICS_FILE
    path.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in (1, 2, 3)))
    metrics = MetricsProcessor.Config(log_freq=1).build(rank=0, output_dir=str(tmp_path))
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0, epoch=0, log_history=[]))
    handler = CallbackHandler(trainer, builtins={"logging": MetricsCallback(trainer, metrics)})
    handler.on_train_begin()
    trainer.state.global_step = 2  # the checkpoint callback restored step 2, then on_load
    handler.on_load(str(tmp_path / "step_2"))
    assert [r["step"] for r in _rows(path)] == [1, 2]


def test_profiler_builds_one_step_window(tmp_path, monkeypatch):
    calls, events = [], []

    def record(**kw):
        calls.append(kw)
        return SimpleNamespace(
            start=lambda: events.append("start"),
            step=lambda: events.append("step"),
            stop=lambda: events.append("stop"),
        )

    monkeypatch.setattr(profiler_helpers, "make_step_profiler", record)
    folder = str(tmp_path / "traces")
    config = Profiler.Config(
        enable_profiling=True, save_traces_folder=folder, wait=2, warmup=0, active=4
    )
    with config.build(rank=3) as profiler:
        profiler.start()  # already started: no second profiler
        profiler.step()
        profiler.step()
    assert calls == [{"output_dir": folder, "wait": 2, "warmup": 0, "active": 4, "rank": 3}]
    assert events == ["start", "step", "step", "stop"]
    assert profiler.profiler is None
    # Without a process group the traces are named after rank 0.
    with config.build():
        pass
    assert calls[-1]["rank"] == 0


def test_profiler_writes_a_trace_per_rank(tmp_path):
    folder = str(tmp_path / "traces")
    model = tiny_model()
    config = Profiler.Config(
        enable_profiling=True, save_traces_folder=folder, wait=0, warmup=1, active=1
    )
    with config.build(rank=5) as profiler:
        for _ in range(3):
            model(torch.zeros(1, 3, dtype=torch.long)).sum().backward()
            profiler.step()
    assert profiler.profiler is None
    traces = glob.glob(os.path.join(folder, "rank5*.pt.trace.json"))
    assert len(traces) == 1
    with open(traces[0]) as f:
        trace = json.load(f)
    assert any("ProfilerStep#" in ev.get("name", "") for ev in trace["traceEvents"])


def test_disabled_profiler_does_nothing(tmp_path):
    folder = tmp_path / "traces"
    with Profiler.Config(save_traces_folder=str(folder)).build() as profiler:
        profiler.step()
        assert profiler.profiler is None
    assert not folder.exists()
