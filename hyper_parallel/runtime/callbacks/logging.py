"""The step-metrics record, its log line and the ``metrics.jsonl`` writer (the
``MetricsProcessor``'s helpers).

Throughput (``report_throughput``): tokens/s = tokens of the last optimizer step over all DP ranks
/ step time; with ``model_flops_per_token`` and ``peak_tflops`` also TFLOPS = tokens/s *
flops_per_token / 1e12 (whole job) and MFU = TFLOPS / (peak_tflops * world_size). The log line
shows the loss with 8 decimals, as the legacy trainer did.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from typing import Any

METRICS_FILE = "metrics.jsonl"


def current_lr(trainer) -> float | None:
    """LR of the first param group after the last scheduler step (legacy: ``get_last_lr()[0]``)."""
    sched = getattr(trainer, "lr_scheduler", None)
    if sched is not None:
        return float(sched.get_last_lr()[0])
    opt = getattr(trainer, "optimizer", None)
    if opt is not None and opt.param_groups:
        return float(opt.param_groups[0]["lr"])
    return None


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def step_metrics_record(
    *,
    step: int,
    epoch: Any,
    loss: float,
    grad_norm: float | None,
    lr: float | None,
    step_time: float | None,
    tokens: int | None,
    report_throughput: bool,
    flops_per_token: float | None,
    peak_tflops: float | None,
    world_size: int,
) -> dict[str, Any]:
    """The metrics record of one optimizer step (see the module docstring for the formulas).

    ``tokens`` are the label tokens of the step over all DP ranks; throughput fields are added
    only with ``report_throughput``, a measured ``step_time`` and known ``tokens``.
    """
    rec: dict[str, Any] = {
        "step": int(step),
        "epoch": epoch,
        "loss": float(loss),
        "grad_norm": None if grad_norm is None else float(grad_norm),
        "lr": lr,
        "step_time": step_time,
    }
    if report_throughput and step_time and tokens is not None:
        tps = float(tokens) / step_time
        rec["tokens_per_sec"] = tps
        if flops_per_token and peak_tflops:
            tflops = tps * float(flops_per_token) / 1e12
            rec["tflops"] = tflops
            rec["mfu"] = tflops / (float(peak_tflops) * int(world_size))
    return rec


def format_step_record(rec: dict[str, Any], max_steps: int | None) -> str:
    """The one-line log message of a :func:`step_metrics_record` (loss with 8 decimals)."""
    parts = [
        f"step {rec['step']}/{max_steps}",
        f"loss {_fmt(rec['loss'], '.8f')}",
        f"grad_norm {_fmt(rec['grad_norm'], '.4f')}",
        f"lr {_fmt(rec['lr'], '.6e')}",
        f"step_time {_fmt(rec['step_time'], '.3f')}s",
    ]
    if "tokens_per_sec" in rec:
        parts.append(f"tokens/s {rec['tokens_per_sec']:.1f}")
    if "tflops" in rec:
        parts.append(f"TFLOPS {rec['tflops']:.2f} MFU {100 * rec['mfu']:.2f}%")
    if "moe_aux_loss" in rec:
        parts.append(f"moe_aux_loss {rec['moe_aux_loss']:.6f}")
    if "moe_load_imbalance" in rec:
        parts.append(f"moe_imbalance {rec['moe_load_imbalance']:.3f}")
    return " | ".join(parts)


def format_eval_metrics(metrics: dict[str, Any]) -> str:
    """``k v | k v`` of evaluation metrics (finite floats with 8 decimals)."""
    return " | ".join(
        f"{k} {v:.8f}" if isinstance(v, float) and math.isfinite(v) else f"{k} {v}"
        for k, v in metrics.items()
    )


class JsonlWriter:
    """Appends one JSON object per line to ``path`` (opened on the first write, flushed per
    line, appended across resumes; a resume first cuts the file back to the resumed step with
    :func:`truncate_metrics_file`). NaN/inf are written as the JSON extensions NaN/Infinity
    (Python's json reads them back)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = None

    def write(self, rec: dict[str, Any]) -> None:
        if self._file is None:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            # Kept open for the whole run (closed by close()): one line per logged step.
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._file.write(json.dumps(rec, sort_keys=True) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _record_step(rec: Any) -> int | None:
    """The integer ``step`` of a metrics record, or None (a row without one, e.g. a header)."""
    if isinstance(rec, dict):
        step = rec.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            return step
    return None


def latest_attempt_rows(records: list[Any]) -> list[Any]:
    """The rows of ``records`` (parsed metrics.jsonl lines, in file order) that the last attempt
    of a run stands by.

    A file written before resumes replaced their rows holds, after a resume at step 2 of a
    4-step run, the steps 1, 2, 3, 4, 3, 4: a training row (one with ``loss``) whose step is not
    after the last training row's step starts a new attempt, so every earlier row of that step
    or later (training and evaluation) is dropped. Rows without an integer ``step`` are kept.
    """
    return [records[i] for i in _latest_attempt_indices(records)]


def _latest_attempt_indices(records: list[Any]) -> list[int]:
    kept: list[int] = []
    last_train_step: int | None = None
    for i, rec in enumerate(records):
        step = _record_step(rec)
        if step is not None and "loss" in rec:
            if last_train_step is not None and step <= last_train_step:
                kept = [j for j in kept if (s := _record_step(records[j])) is None or s < step]
            last_train_step = step
        kept.append(i)
    return kept


def truncate_metrics_file(path: str, step: int) -> int:
    """Cut ``path`` (a metrics.jsonl) back to a resume at ``step``; returns the rows dropped.

    Keeps the rows of steps ``<= step`` (training and evaluation alike) and every row without an
    integer ``step``; drops the later ones (the resumed run writes them again), the duplicates
    of an older file (:func:`latest_attempt_rows`) and a torn last line of a killed run. The file
    is rewritten atomically (a temporary file in the same directory, fsynced, then
    ``os.replace``) with the old file's permission bits, and only when something is dropped; a
    missing file is left missing. Rank 0 only (it is one file).
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return 0
    parsed: list[tuple[Any, str]] = []
    dropped = 0
    for line in lines:
        if not line.strip():
            dropped += 1
            continue
        try:
            parsed.append((json.loads(line), line))
        except json.JSONDecodeError:
            dropped += 1  # half a line: the run was killed while writing it
    records = [rec for rec, _ in parsed]
    keep = [
        parsed[i][1]
        for i in _latest_attempt_indices(records)
        if (s := _record_step(records[i])) is None or s <= step
    ]
    dropped += len(parsed) - len(keep)
    if dropped == 0:
        return 0
    mode = os.stat(path).st_mode & 0o7777
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in keep))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return dropped
