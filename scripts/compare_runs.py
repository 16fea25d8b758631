#!/usr/bin/env python
"""Compare two training runs from their metrics.jsonl: are their curves bit-identical?

    python scripts/compare_runs.py outputs/demo/legacy outputs/demo/recipe \\
        --png outputs/demo/loss_curves.png --jsonl outputs/demo/metrics.jsonl

Written for the migration demo (``make demo``): the same legacy YAML trained by ``LLMTrainer``
and, converted by ``python -m hyper_parallel.codegen --from-yaml``, by ``HyperTrainer`` must give
the same numbers bit for bit, so a mere "close enough" plot would hide the regression it is
meant to catch.

Each positional argument is a run's output folder (holding ``metrics.jsonl``) or the file
itself. Records are merged per step (evaluation records add their ``eval_*`` keys to the
step); a file from before the trainer rewrote it on resume, which repeats the resumed steps, is
read as its last attempt: the last value of each step wins and later steps of an abandoned
attempt are dropped. Every metric except the wall-clock ones
(``step_time``, ``tokens_per_sec``, ``tflops``, ``mfu``) is compared bit for bit: ``loss``,
``grad_norm``, ``lr``, ``epoch``, ``eval_*``; both runs must also log the same steps.

Prints a short table and ``bit-identical: yes|no (max |diff| = ...)``; ``--png`` overlays the
two loss curves (first run as a line, second as markers, so coinciding curves stay visible) and
``--jsonl`` (default: the PNG's path with ``.jsonl``) writes one record per step with both
runs' metrics, tagged ``<label>/<metric>``.

Exit status: 0 bit-identical, 1 the runs differ, 2 a metrics file is missing or has no loss.
"""

from __future__ import annotations

import argparse
import json
import math
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"
# Measured wall-clock figures: they differ between any two runs and say nothing about the maths.
TIMING_KEYS = frozenset({"step_time", "tokens_per_sec", "tflops", "mfu"})
TABLE_ROWS = 12

Run = dict[int, dict[str, Any]]  # step -> merged metrics of that step


class InputError(Exception):
    """A run's metrics cannot be read; the message names the file and the fix."""


def metrics_path(run: str | Path) -> Path:
    """``run`` itself when it is a file, else ``run/metrics.jsonl``."""
    path = Path(run)
    return path if path.is_file() else path / METRICS_FILE


def load_run(run: str | Path) -> Run:
    """The metrics of a run, merged per step: the records of its last attempt
    (:func:`latest_attempt`), later ones overriding earlier ones."""
    path = metrics_path(run)
    if not path.is_file():
        raise InputError(f"{path}: no such file (pass a run's output folder, the one given as "
                         "--train.checkpoint.output_dir / --checkpoint.folder, or its "
                         f"{METRICS_FILE})")
    records = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{lineno}: not a JSON object ({exc.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise InputError(f"{path}:{lineno}: a metrics record needs an integer 'step'")
        records.append(record)
    steps: Run = {}
    for record in latest_attempt(records):
        steps.setdefault(record["step"], {}).update(
            (k, v) for k, v in record.items() if k != "step")
    if not any("loss" in rec for rec in steps.values()):
        raise InputError(f"{path}: no loss records (did the run log any step? see "
                         "train.logging.log_steps / --metrics.log_freq)")
    return steps


def latest_attempt(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of the run's last attempt, in file order.

    The trainer rewrites metrics.jsonl on a resume, but an older file holds the repeated steps
    twice (a resume at step 2 of a 4-step run: steps 1, 2, 3, 4, 3, 4). A training record (one
    with ``loss``) whose step is not after the previous training record's step starts a new
    attempt: every earlier record of that step or later (evaluation ones too) is dropped, so each
    step keeps its last value and no step of an abandoned attempt survives.
    """
    kept: list[dict[str, Any]] = []
    last_train_step = None
    for record in records:
        if "loss" in record:
            step = record["step"]
            if last_train_step is not None and step <= last_train_step:
                kept = [r for r in kept if r["step"] < step]
            last_train_step = step
        kept.append(record)
    return kept


def same_bits(a: Any, b: Any) -> bool:
    """Equal as written: floats compare by their IEEE-754 bits (so NaN equals NaN, 0.0 is not
    -0.0), anything else by type and ``==``."""
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


def abs_diff(a: Any, b: Any) -> float | None:
    """|a - b| of two numbers (0 for equal bits, inf for NaN against a number); None if either
    is not a number."""
    numbers = (int, float)
    if not (isinstance(a, numbers) and isinstance(b, numbers)) or isinstance(a, bool) \
            or isinstance(b, bool):
        return None
    if same_bits(float(a), float(b)):
        return 0.0
    diff = abs(float(a) - float(b))
    return math.inf if math.isnan(diff) else diff


@dataclass
class Comparison:
    """The verdict on two runs; ``max_diff`` is over the numeric compared metrics."""

    labels: tuple[str, str]
    common_steps: list[int]
    only_first: list[int]
    only_second: list[int]
    compared_keys: list[str]
    differing_steps: list[int] = field(default_factory=list)
    max_diff: float = 0.0
    max_diff_at: tuple[str, int] | None = None  # (metric, step)
    mismatched: list[tuple[str, int]] = field(default_factory=list)  # non-numeric or missing

    @property
    def identical(self) -> bool:
        return not (self.only_first or self.only_second or self.differing_steps)

    def summary(self) -> str:
        """``bit-identical: yes|no (max |diff| = ...)``, the line ``make demo`` ends with."""
        keys = ", ".join(self.compared_keys)
        if self.identical:
            return (f"bit-identical: yes (max |diff| = 0 over {keys} at "
                    f"{len(self.common_steps)} steps)")
        details = [f"max |diff| = {self.max_diff:.6g}"
                   + (f" ({self.max_diff_at[0]} at step {self.max_diff_at[1]})"
                      if self.max_diff_at else "")]
        if self.differing_steps:
            details.append(f"{len(self.differing_steps)} of {len(self.common_steps)} common "
                           "steps differ")
        if self.mismatched:
            key, step = self.mismatched[0]
            details.append(f"{key} at step {step} is missing or not a number in one run")
        for label, steps in zip(self.labels, (self.only_first, self.only_second)):
            if steps:
                details.append(f"steps only in {label}: {_short_list(steps)}")
        return f"bit-identical: no ({'; '.join(details)})"


def compare(first: Run, second: Run, labels: tuple[str, str] = ("legacy", "recipe")) -> Comparison:
    """Compare every non-timing metric of the steps both runs logged, bit for bit."""
    common = sorted(first.keys() & second.keys())
    keys = sorted({k for s in common for k in (*first[s], *second[s])} - TIMING_KEYS,
                  key=lambda k: (k != "loss", k))
    result = Comparison(labels, common, sorted(first.keys() - second.keys()),
                        sorted(second.keys() - first.keys()), keys)
    for step in common:
        differs = False
        for key in keys:
            a, b = first[step].get(key), second[step].get(key)
            if same_bits(a, b):
                continue
            differs = True
            diff = abs_diff(a, b)
            if diff is None:
                result.mismatched.append((key, step))
            elif result.max_diff_at is None or diff > result.max_diff:
                result.max_diff, result.max_diff_at = diff, (key, step)
        if differs:
            result.differing_steps.append(step)
    return result


def merged_records(first: Run, second: Run, labels: tuple[str, str]) -> list[dict[str, Any]]:
    """One record per step (union of both runs): ``step``, ``<label>/<metric>`` for both runs,
    ``loss_abs_diff`` and ``identical`` (every non-timing metric has the same bits)."""
    records = []
    for step in sorted(first.keys() | second.keys()):
        a, b = first.get(step), second.get(step)
        record: dict[str, Any] = {"step": step}
        for label, metrics in zip(labels, (a, b)):
            for key, value in sorted((metrics or {}).items()):
                record[f"{label}/{key}"] = value
        both = a is not None and b is not None
        record["loss_abs_diff"] = abs_diff(a.get("loss"), b.get("loss")) if both else None
        record["identical"] = both and all(
            same_bits(a.get(k), b.get(k)) for k in (a.keys() | b.keys()) - TIMING_KEYS)
        records.append(record)
    return records


def write_jsonl(records: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")


def plot(first: Run, second: Run, comparison: Comparison, path: Path) -> None:
    """The two loss curves on one axis: the first run as a line, the second as hollow markers
    on top of it, so that two identical curves remain two visible series."""
    import matplotlib

    matplotlib.use("Agg")  # no display: this runs in CI and on headless machines
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run, label, style in zip((first, second), comparison.labels,
                                 ({"linestyle": "-", "linewidth": 2.0, "color": "tab:blue"},
                                  {"linestyle": "none", "marker": "o", "markersize": 6,
                                   "markerfacecolor": "none", "color": "tab:orange"})):
        steps = sorted(s for s in run if "loss" in run[s])
        ax.plot(steps, [run[s]["loss"] for s in steps], label=label, **style)
    if comparison.identical:
        verdict = "bit-identical"
    else:
        verdict = f"NOT bit-identical (max |diff| = {comparison.max_diff:.3g})"
    ax.set_title(f"loss: {comparison.labels[0]} vs {comparison.labels[1]} — {verdict}")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_table(first: Run, second: Run, comparison: Comparison,
                 max_rows: int = TABLE_ROWS) -> str:
    """Loss of both runs per step; at most ``max_rows`` steps (first, last, differing ones,
    then evenly spaced), so the demo's output stays short."""
    steps = sorted(first.keys() | second.keys())
    if len(steps) > max_rows:
        keep = {steps[0], steps[-1], *comparison.differing_steps[: max_rows // 2]}
        stride = max(1, len(steps) // max(1, max_rows - len(keep)))
        keep.update(steps[::stride][: max_rows - len(keep)])
        steps = sorted(keep)
    a_label, b_label = comparison.labels
    width = max(12, len(a_label), len(b_label))
    lines = [f"{'step':>5}  {a_label:>{width}}  {b_label:>{width}}  {'|diff|':>9}"]
    for step in steps:
        a, b = first.get(step, {}).get("loss"), second.get(step, {}).get("loss")
        diff = abs_diff(a, b)
        lines.append(f"{step:>5}  {_num(a):>{width}}  {_num(b):>{width}}  "
                     f"{'-' if diff is None else f'{diff:.3g}':>9}")
    return "\n".join(lines)


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.8f}"


def _short_list(steps: list[int], limit: int = 6) -> str:
    shown = ", ".join(map(str, steps[:limit]))
    return f"[{shown}{', ...' if len(steps) > limit else ''}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="compare_runs.py",
        description="Compare the metrics.jsonl of two runs bit for bit; exit 0 when identical, "
        "1 when they differ, 2 when a metrics file is missing or holds no loss.",
    )
    parser.add_argument("legacy", metavar="LEGACY_DIR",
                        help="first run: output folder or its metrics.jsonl")
    parser.add_argument("recipe", metavar="RECIPE_DIR",
                        help="second run: output folder or its metrics.jsonl")
    parser.add_argument("--png", type=Path, help="write the two loss curves to this PNG")
    parser.add_argument("--jsonl", type=Path,
                        help="write the per-step merged metrics here (default with --png: the "
                        "PNG's path with .jsonl)")
    parser.add_argument("--labels", nargs=2, default=("legacy", "recipe"),
                        metavar=("FIRST", "SECOND"),
                        help="names of the two runs in the table, plot and JSONL tags "
                        "(default: legacy recipe)")
    args = parser.parse_args(argv)
    labels = tuple(args.labels)
    try:
        first, second = load_run(args.legacy), load_run(args.recipe)
    except InputError as exc:
        print(f"compare_runs: error: {exc}", file=sys.stderr)
        return 2
    comparison = compare(first, second, labels)
    print(format_table(first, second, comparison))
    jsonl = args.jsonl or (args.png.with_suffix(".jsonl") if args.png else None)
    if args.png is not None:
        plot(first, second, comparison, args.png)
        print(f"wrote {args.png}")
    if jsonl is not None:
        write_jsonl(merged_records(first, second, labels), jsonl)
        print(f"wrote {jsonl}")
    print(comparison.summary())
    return 0 if comparison.identical else 1


if __name__ == "__main__":
    sys.exit(main())
