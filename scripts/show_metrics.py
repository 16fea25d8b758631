#!/usr/bin/env python
"""Print the loss curve of a run from its metrics.jsonl, as a table with a bar per step.

    python scripts/show_metrics.py outputs/demo/metrics.jsonl
"""

import json
import sys
from pathlib import Path

WIDTH = 50


def main(path: str) -> int:
    records = {}
    for line in Path(path).read_text().splitlines():
        record = json.loads(line)
        if "loss" in record:
            records[record["step"]] = record  # a resumed run appends: keep the last
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
