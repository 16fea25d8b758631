"""``--module`` names a file too (a run record's ``config.py``), and ``--rerun RUN_DIR`` is
``--module RUN_DIR/config.py --config run``."""

from __future__ import annotations

import pytest

from hyper_parallel.config.manager import ConfigManager
from hyper_parallel.config.recipes import RecipeError
from hyper_parallel.train import main, parse_run

RECORD = '''\
from hyper_parallel.models.qwen3_5_v2.config_registry import qwen3_5_v2_debugmodel


def run():
    config = qwen3_5_v2_debugmodel()
    config.training.steps = 3
    return config
'''


def test_module_may_be_a_file(tmp_path):
    (tmp_path / "config.py").write_text(RECORD)
    config = ConfigManager().parse_args(["--module", str(tmp_path / "config.py"), "--config",
                                         "run", "--training.seq_len=64"])
    assert (config.training.steps, config.training.seq_len) == (3, 64)


def test_a_file_that_fails_names_itself(tmp_path):
    (tmp_path / "config.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(RecipeError, match=r"config\.py: importing it failed: RuntimeError: "
                                          r"boom \(.*config\.py:1\)"):
        ConfigManager().parse_args(["--module", str(tmp_path / "config.py"), "--config", "run"])
    with pytest.raises(RecipeError, match="no such file"):
        ConfigManager().parse_args(["--module", str(tmp_path / "x.py"), "--config", "run"])


def test_rerun_reads_the_record_and_keeps_the_command_line(tmp_path):
    (tmp_path / "config.py").write_text(RECORD)
    source = parse_run(["--rerun", str(tmp_path), "--training.seq_len=64"])
    assert source.record == tmp_path / "config.py"
    assert source.config.training.steps == 3 and source.config.training.seq_len == 64
    assert source.argv[:2] == ["--rerun", str(tmp_path)]
    assert [flag.text for flag in source.flags] == ["--training.seq_len=64"]


def test_rerun_of_a_folder_without_a_record_exits_2(tmp_path, capsys):
    assert main(["--rerun", str(tmp_path)]) == 2
    assert "no config.py there" in capsys.readouterr().err
    assert main(["--rerun"]) == 2
