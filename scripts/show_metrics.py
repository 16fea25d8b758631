#!/usr/bin/env python
"""Print the loss curve of a run from its metrics.jsonl, as a table with a bar per step.

    python scripts/show_metrics.py outputs/demo/metrics.jsonl
"""

import json
import sys
from pathlib import Path

WIDTH = 50


def loss_records(lines: list[str]) -> dict[int, dict]:
    """step -> training record (one with ``loss``) of the run's last attempt.

    The trainer rewrites metrics.jsonl on a resume; an older file repeats the resumed steps
    (1, 2, 3, 4, 3, 4): a step that is not after the previous one starts a new attempt, which
    replaces that step and every later one (each step keeps its last row).
    """
    records: dict[int, dict] = {}
    last = None
    for line in lines:
        if not line.strip():
            continue
        record = json.loads(line)
        if not isinstance(record, dict) or "loss" not in record:
            continue
        step = record["step"]
        if last is not None and step <= last:
            records = {s: r for s, r in records.items() if s < step}
        records[step] = record
        last = step
    return records


def main(path: str) -> int:
    records = loss_records(Path(path).read_text().splitlines())
    if not records:
        print(f"no loss records in {path}", file=sys.stderr)
        return 1
    steps = sorted(records)
    losses = [records[s]["loss"] for s in steps]
    top = max(losses)
    print(f"{'step':>5}  {'loss':>8}")
    for step, loss in zip(steps, losses):
        print(f"{step:>5}  {loss:8.4f}  {'#' * max(1, round(WIDTH * loss / top))}")
    print(f"loss {losses[0]:.4f} (step {steps[0]}) -> {losses[-1]:.4f} (step {steps[-1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "outputs/demo/metrics.jsonl"))
