"""Golden loss files: a run's losses pinned bit for bit, with one recording per CPU whose pinned
numerics differ.

The pinned kernel paths (:mod:`tests.helpers.numerics`) make a float32 run the same on the
Intel Xeons and AMD EPYCs the goldens were recorded and checked on, but not on every x86-64
CPU: on an Intel Xeon with AVX-512 and AMX (a 2-vCPU VM, 2026-12-07) the legacy goldens'
reported losses differ by one ulp at isolated steps (the debug YAML's steps 6 and 7, the TP 2
YAML's 3, 4, 5 and 7), every other step bit for bit -- so the parameters trained the same and
what differs is how the reported loss was summed. A golden therefore holds:

* ``golden/<name>.json``: the losses as first pinned (the legacy ones by the pre-refactor
  trainer, pinned by hash in ``tests/torch/ut/trainer/test_base_trainer_unchanged.py``);
* ``golden/other_cpus/<cpu>/<name>.json``: the same run recorded on each CPU found to differ,
  by the same recorder (the legacy ones again by the pre-refactor trainer, 70f70f5's own test,
  on the pinned paths; that docstring says how), with where it was recorded.

A run must equal one recording bit for bit: a change to the numerics fails on every CPU, and a
CPU that matches none fails until its recording is added the same way -- never by the code
under test recording itself.
"""

from __future__ import annotations

import json
from pathlib import Path

OTHER_CPUS = "other_cpus"


def recordings(golden: Path) -> dict[str, list[float]]:
    """Where each recording of ``golden`` was made (``"first"`` for the file itself) -> its
    losses."""
    found = {"first": json.loads(golden.read_text())["losses"]}
    for path in sorted(golden.parent.glob(f"{OTHER_CPUS}/*/{golden.name}")):
        found[path.parent.name] = json.loads(path.read_text())["losses"]
    return found


def assert_matches_a_recording(losses: list[float], golden: Path) -> None:
    """``losses`` equal, bit for bit, one recording of ``golden`` (:func:`recordings`)."""
    found = recordings(golden)
    if any(losses == recorded for recorded in found.values()):
        return
    lines = [f"{golden.name}: the losses match none of its {len(found)} recordings"]
    for where, recorded in found.items():
        steps = [i + 1 for i, (a, b) in enumerate(zip(losses, recorded)) if a != b]
        if len(losses) != len(recorded):
            steps.append(f"{len(losses)} steps against {len(recorded)}")
        lines.append(f"  {where}: differs at steps {steps}")
    lines.append(f"  this run: {losses}")
    lines.append("A numerics change fails here on every CPU. On a CPU none was recorded on, record "
                 f"it under golden/{OTHER_CPUS}/<cpu>/ as tests/helpers/golden.py says.")
    raise AssertionError("\n".join(lines))


__all__ = ["OTHER_CPUS", "assert_matches_a_recording", "recordings"]
