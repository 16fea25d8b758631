"""``python -m hyper_parallel.train`` alone or with ``--help`` explains its two command lines."""

from __future__ import annotations

from hyper_parallel.train import main


def test_help_names_both_command_lines(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--module M --config F" in out and "old.yaml" in out
    assert "python -m hyper_parallel.trainer.config --help" in out


def test_no_arguments_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "--module M --config F" in capsys.readouterr().err
