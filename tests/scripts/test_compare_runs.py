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


def _write_lines(folder: Path, records: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def _row(step: int, loss: float, **extra) -> dict:
    return {"epoch": 0, "grad_norm": 1.5, "loss": loss, "lr": 1e-3, "step": step,
            "step_time": 1.0, **extra}


def test_an_older_resumed_file_is_read_as_its_last_attempt(tmp_path, capsys):
    """A file from before the trainer rewrote metrics.jsonl on resume: 1, 2, 3, 4 (eval at 4),
    then the resume at step 2 appended 3 and 4 again. Each step keeps its last row, and the
    abandoned attempt's eval row of step 4 is gone."""
    straight = _write_run(tmp_path / "straight", {1: 4.0, 2: 3.0, 3: 2.5, 4: 2.0}, step_time=1.0)
    resumed = _write_lines(tmp_path / "resumed", [
        _row(1, 4.0), _row(2, 3.0), {"step": 2, "eval_loss": 3.5},
        _row(3, 9.0), _row(4, 9.0), {"step": 4, "eval_loss": 9.5},  # the abandoned attempt
        _row(3, 2.5), _row(4, 2.0),
    ])
    run = compare_runs.load_run(resumed)
    assert sorted(run) == [1, 2, 3, 4]
    assert [run[s]["loss"] for s in (1, 2, 3, 4)] == [4.0, 3.0, 2.5, 2.0]
    assert run[2]["eval_loss"] == 3.5 and "eval_loss" not in run[4]
    assert compare_runs.main([str(straight), str(resumed)]) == 1  # eval_loss only in one run
    out = capsys.readouterr().out
    assert "eval_loss at step 2 is missing" in out


def test_a_resume_that_logged_fewer_steps_drops_the_abandoned_later_steps(tmp_path):
    resumed = _write_lines(tmp_path / "resumed", [
        _row(2, 3.0), _row(4, 2.0), _row(6, 1.0), _row(8, 0.5),  # killed after step 8
        _row(6, 1.25),  # resumed from the checkpoint of step 4, stopped at step 6
    ])
    assert {s: r["loss"] for s, r in compare_runs.load_run(resumed).items()} == {
        2: 3.0, 4: 2.0, 6: 1.25}


def test_show_metrics_reads_the_last_attempt(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("show_metrics", SCRIPT.with_name("show_metrics.py"))
    show_metrics = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(show_metrics)
    run = _write_lines(tmp_path / "run", [
        _row(1, 4.0), _row(2, 3.0), _row(3, 9.0), _row(4, 9.0), {"step": 4, "eval_loss": 1.0},
        _row(3, 2.5), _row(4, 2.0),
    ])
    assert show_metrics.main(str(run / "metrics.jsonl")) == 0
    out = capsys.readouterr().out
    assert "9.0000" not in out
    assert "loss 4.0000 (step 1) -> 2.0000 (step 4)" in out
    assert [line.split()[0] for line in out.splitlines()[1:-1]] == ["1", "2", "3", "4"]
