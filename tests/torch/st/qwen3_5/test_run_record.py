"""Every run is a rerunnable record, and a resume checks that a checkpoint belongs to its run.

The entries (``python -m hyper_parallel.train``, the legacy ``scripts/train_lm.py``) on the tiny
flavor, a few steps on synthetic tokens, one rank each:

* a run writes ``config.py``, ``config.yaml`` and ``run.json`` into its checkpoint folder; the
  recipe's lines a flag set say so; ``run.json`` holds the versions, the launch, the mesh, the
  seed and the hash every checkpoint of the run carries;
* ``--rerun`` trains the recorded run again with bit-identical losses, and writes the same
  record; a legacy YAML's record reruns as the YAML trained;
* resuming with another architecture is a ``ConfigError`` (exit 2) naming each field with both
  values; with another checkpoint interval and learning rate it resumes, and the log lists
  both;
* weights that do not fit the model are a ``ConfigError`` naming ``model.weights_path``;
  weights beside a resumed checkpoint are said to lose to it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.torchrun import run_python

from .conftest import TRAIN_SCRIPT, read_metrics

pytestmark = pytest.mark.slow

RECIPE = ("--module", "recipes.train_qwen3_5_debug", "--config", "train_qwen3_5_debug",
          "--model.config_overrides={flavor: tiny}", "--training.seq_len=32",
          "--training.steps=4", "--checkpoint.interval=2")
YAML = """\
model: {name: qwen3_5, config_overrides: {flavor: tiny}}
data: {type: dummy, max_seq_len: 32}
train:
  max_steps: 3
  global_batch_size: 2
  micro_batch_size: 1
  seed: 7
  checkpoint: {save_steps: 0, save_hf_weights: false}
  logging: {log_steps: 1}
  debug: {deterministic: true}
"""


def _train(*args: str, check: bool = True):
    return run_python(TRAIN_SCRIPT, list(args), check=check, timeout=300)


def _losses(folder: Path) -> list[float]:
    return [r["loss"] for r in read_metrics(folder) if "loss" in r]


@pytest.fixture(scope="module")
def runs(run_once) -> dict:
    """One recipe run and its rerun in the same folder, one YAML run and its rerun elsewhere,
    made once per session."""

    def make(folder: Path) -> dict:
        first = folder / "recipe"
        _train(*RECIPE, f"--checkpoint.folder={first}")
        record = {name: (first / name).read_text()
                  for name in ("config.py", "config.yaml", "run.json")}
        losses = _losses(first)
        _train("--rerun", str(first))  # the same folder: the record is written again
        yaml_file = folder / "tiny.yaml"
        yaml_file.write_text(YAML)
        legacy = folder / "legacy"
        _train(str(yaml_file), f"--train.checkpoint.output_dir={legacy}")
        again = folder / "legacy_rerun"
        _train("--rerun", str(legacy), f"--checkpoint.folder={again}")
        return {"folder": str(folder), "record": record, "losses": losses,
                "rerun_losses": _losses(first)[len(losses):],
                "rerun_record": {name: (first / name).read_text()
                                 for name in ("config.py", "config.yaml", "run.json")},
                "legacy_losses": _losses(legacy), "legacy_rerun_losses": _losses(again),
                "legacy_record": (legacy / "config.py").read_text(),
                "legacy_rerun_record": (again / "config.py").read_text()}

    return run_once.get("run record runs", make)


def test_a_run_writes_its_record(runs):
    folder = Path(runs["folder"]) / "recipe"
    text = runs["record"]["config.py"]
    assert "def run() -> HyperTrainer.Config:" in text
    assert 'config = flavor_baseline("qwen3_5", "debugmodel")' in text
    assert "config.training.steps = 4  # command line: --training.steps=4" in text
    assert "config.model.config_overrides" in text and "--model.config_overrides=" in text
    assert "--rerun" in text
    assert "max_steps: 4" in runs["record"]["config.yaml"]
    record = json.loads(runs["record"]["run.json"])
    assert record["recipe"] == {"file": "config.py", "function": "run"}
    assert record["legacy_yaml"] == {"file": "config.yaml"}
    assert record["world_size"] == 1 and record["mesh"]["tp"] == 1
    assert record["seed"] == 1234 and record["deterministic"] is True
    assert record["libraries"]["torch"].startswith("2.")
    assert record["hyper_parallel"]["git_commit"]  # the tests run in a checkout
    assert record["launch"]["environment"]["OMP_NUM_THREADS"] == "1"
    assert "--training.steps=4" in record["launch"]["command"]
    # The hash every checkpoint of the run carries.
    saved = json.loads((folder / "step_2" / "extra_state.json").read_text())
    assert saved["config_sha256"] == record["config_sha256"]
    assert saved["config"]["training.steps"] == "4"


def test_rerun_trains_the_same_run_and_writes_the_same_record(runs):
    assert len(runs["losses"]) == 4
    assert runs["rerun_losses"] == runs["losses"]  # bit for bit
    for name in ("config.py", "config.yaml"):
        assert runs["rerun_record"][name] == runs["record"][name], name
    launch = json.loads(runs["rerun_record"]["run.json"])["launch"]["command"]
    assert "--rerun" in launch  # run.json says how this run was started


def test_a_yaml_runs_record_reruns_it(runs):
    assert len(runs["legacy_losses"]) == 3
    assert runs["legacy_rerun_losses"] == runs["legacy_losses"]
    # The YAML's command-line override is a line of the record, commented with its flag.
    assert "command line: --train.checkpoint.output_dir=" in runs["legacy_record"]
    assert "command line: --checkpoint.folder=" in runs["legacy_rerun_record"]


def test_resume_refuses_another_architecture(runs, tmp_path):
    step_2 = Path(runs["folder"]) / "recipe" / "step_2"
    proc = _train(*RECIPE, "--model.config_overrides={flavor: debugmodel}",
                  f"--checkpoint.load_path={step_2}", f"--checkpoint.folder={tmp_path}",
                  check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "was written by a run of another configuration" in proc.stderr
    assert "architecture.hidden_size: checkpoint 32, this run 256" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_resume_lists_the_fields_that_may_change(runs, tmp_path):
    step_2 = Path(runs["folder"]) / "recipe" / "step_2"
    proc = _train(*RECIPE, "--checkpoint.interval=3", "--optimizer.lr=0.002",
                  f"--checkpoint.load_path={step_2}", f"--checkpoint.folder={tmp_path}")
    log = proc.stdout + proc.stderr
    assert "checkpoint.interval: 2 -> 3" in log and "optimizer.lr: 0.001 -> 0.002" in log
    assert [r["step"] for r in read_metrics(tmp_path) if "loss" in r] == [3, 4]


def test_weights_that_do_not_fit_are_a_config_error(runs, tmp_path):
    step_4 = Path(runs["folder"]) / "recipe" / "step_4"
    proc = _train(*RECIPE, "--model.config_overrides={flavor: debugmodel}",
                  f"--model.weights_path={step_4}", f"--checkpoint.folder={tmp_path}",
                  check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "model.weights_path:" in proc.stderr and "does not fit the model" in proc.stderr
    assert "missing:" in proc.stderr
    assert "model.embed_tokens.weight: the file has [2048, 32], the model [2048, 256]" \
        in proc.stderr


def test_weights_beside_a_resumed_checkpoint_lose_to_it_in_the_log(runs, tmp_path):
    folder = Path(runs["folder"]) / "recipe"
    proc = _train(*RECIPE, f"--model.weights_path={folder / 'step_4'}",
                  f"--checkpoint.load_path={folder / 'step_2'}",
                  f"--checkpoint.folder={tmp_path}")
    assert "is not loaded: a resume restores the checkpoint's weights" in proc.stdout + proc.stderr


def test_a_data_position_that_does_not_fit_is_a_config_error(runs, tmp_path):
    """Synthetic data is sized by the steps: more steps, another dataset, no exact resume."""
    step_2 = Path(runs["folder"]) / "recipe" / "step_2"
    proc = _train(*RECIPE, "--training.steps=6", f"--checkpoint.load_path={step_2}",
                  f"--checkpoint.folder={tmp_path}", check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "checkpoint.load_path: cannot resume the data position" in proc.stderr
    assert "Traceback" not in proc.stderr
