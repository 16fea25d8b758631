"""scripts/compare_runs.py on tiny synthetic metrics.jsonl files: the verdict, the exit status
and the files it writes (the last step of ``make demo``)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_runs.py"


def _load_script():
    # scripts/ is not a package: load the file as a module.
    spec = importlib.util.spec_from_file_location("compare_runs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


compare_runs = _load_script()


def _write_run(folder: Path, losses: dict[int, float], step_time: float) -> Path:
    """A run folder whose metrics.jsonl looks like the trainer's (timing differs per run)."""
    folder.mkdir(parents=True)
    lines = [
        json.dumps({"epoch": 0, "grad_norm": 1.5, "loss": loss, "lr": 1e-3, "step": step,
                    "step_time": step_time, "tokens_per_sec": 1000 / step_time})
        for step, loss in losses.items()
    ]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return folder


LOSSES = {2: 7.701972007751465, 4: 6.707921504974365, 6: 5.770229339599609}


def test_identical_runs_exit_0_and_write_png_and_jsonl(tmp_path, capsys):
    legacy = _write_run(tmp_path / "legacy", LOSSES, step_time=1.0)
    recipe = _write_run(tmp_path / "recipe", LOSSES, step_time=2.0)  # timing is not compared
    png, jsonl = tmp_path / "out" / "loss_curves.png", tmp_path / "out" / "metrics.jsonl"

    rc = compare_runs.main([str(legacy), str(recipe), "--png", str(png), "--jsonl", str(jsonl)])

    out = capsys.readouterr().out
    assert rc == 0
    assert "bit-identical: yes (max |diff| = 0" in out
    assert png.read_bytes().startswith(b"\x89PNG")
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["step"] for r in records] == [2, 4, 6]
    assert records[0]["legacy/loss"] == records[0]["recipe/loss"] == LOSSES[2]
    assert records[0]["legacy/step_time"] == 1.0 and records[0]["recipe/step_time"] == 2.0
    assert all(r["identical"] and r["loss_abs_diff"] == 0.0 for r in records)


def test_different_runs_exit_1_and_name_the_difference(tmp_path, capsys):
    legacy = _write_run(tmp_path / "legacy", LOSSES, step_time=1.0)
    changed = {**LOSSES, 4: math.nextafter(LOSSES[4], 0.0)}  # one ulp: still not identical
    recipe = _write_run(tmp_path / "recipe", changed, step_time=1.0)
    png = tmp_path / "loss_curves.png"

    rc = compare_runs.main([str(legacy / "metrics.jsonl"), str(recipe), "--png", str(png)])

    out = capsys.readouterr().out
    assert rc == 1
    assert "bit-identical: no (max |diff| = " in out and "loss at step 4" in out
    assert png.exists()
    records = [json.loads(line) for line in png.with_suffix(".jsonl").read_text().splitlines()]
    assert [r["identical"] for r in records] == [True, False, True]


def test_missing_steps_differ(tmp_path):
    legacy = compare_runs.load_run(_write_run(tmp_path / "a", LOSSES, step_time=1.0))
    recipe = compare_runs.load_run(_write_run(tmp_path / "b", {2: LOSSES[2]}, step_time=1.0))
    comparison = compare_runs.compare(legacy, recipe)
    assert not comparison.identical
    assert "steps only in legacy: [4, 6]" in comparison.summary()


@pytest.mark.parametrize("content", [None, '{"step": 2, "eval_loss": 1.0}\n'])
def test_missing_file_or_no_loss_exits_2(tmp_path, capsys, content):
    run = tmp_path / "run"
    run.mkdir()
    if content is not None:
        (run / "metrics.jsonl").write_text(content)
    good = _write_run(tmp_path / "good", LOSSES, step_time=1.0)
    assert compare_runs.main([str(run), str(good)]) == 2
    assert "metrics.jsonl" in capsys.readouterr().err
