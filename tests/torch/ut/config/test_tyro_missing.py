"""Without tyro the new command line fails with an install hint; the legacy path still works."""

import subprocess
import sys

import pytest

from hyper_parallel.config.manager import ConfigManager


def test_new_cli_without_tyro(monkeypatch):
    monkeypatch.setitem(sys.modules, "tyro", None)  # import tyro -> ImportError
    with pytest.raises(ImportError, match="pip install tyro"):
        ConfigManager().parse_args(["--module", "qwen3_5_v2", "--config", "x"])


def test_importing_the_config_package_needs_neither_torch_nor_tyro():
    code = (
        "import sys; import hyper_parallel.config, hyper_parallel.config.manager;"
        "bad = [m for m in ('torch', 'tyro') if m in sys.modules]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_package_root_does_not_export_the_new_api():
    import hyper_parallel

    assert not hasattr(hyper_parallel, "ConfigManager")
    assert not hasattr(hyper_parallel, "TrainingConfig")
