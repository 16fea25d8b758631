"""Layers that must work on any platform: platform, protocols, config and the legacy parser.

`make test` runs these with torch; `make test-mindspore` runs them in an environment that has
mindspore and no torch at all (HYPER_PARALLEL_PLATFORM=mindspore).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from hyper_parallel.config import TORCH_DTYPE_MAP, ConfigManager, Function
from hyper_parallel.platform import get_platform
from hyper_parallel.protocols.configurable import Configurable
from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig, parse_args

REPO = Path(__file__).resolve().parents[2]
PLATFORM = os.environ.get("HYPER_PARALLEL_PLATFORM", "torch")
HAS_TORCH = importlib.util.find_spec("torch") is not None


def test_dtype_map_yields_the_platform_dtypes():
    plat = get_platform()
    assert plat.name == PLATFORM
    assert TORCH_DTYPE_MAP["bf16"] == plat.dtype_map["bfloat16"]
    assert TORCH_DTYPE_MAP["float32"] == plat.dtype("fp32")
    with pytest.raises(KeyError, match="valid names"):
        TORCH_DTYPE_MAP["int3"]


def test_module_base_is_the_framework_module():
    base = get_platform().module_base
    assert base.__module__.split(".")[0] == ("torch" if PLATFORM == "torch" else "mindspore")


def test_configurable_and_function():
    from tests.crossbackend._recipes.config_registry import Schedule

    config = Schedule.Config(steps=4)
    built = config.build()
    assert isinstance(built, Schedule) and built.config == config and built.config is not config
    assert Function.Config(fn=lambda x: x * 3).build()(2) == 6
    assert issubclass(Schedule, Configurable)


def test_config_manager_on_a_framework_free_registry():
    pytest.importorskip("tyro")
    cfg = ConfigManager().parse_args([
        "--module", "tests.crossbackend._recipes", "--config", "tiny_run",
        "--schedule.steps", "7", "--schedule.tags", "a,b", "--dtype", "fp32",
    ])
    assert (cfg.name, cfg.schedule.steps, cfg.schedule.tags, cfg.dtype) == ("tiny", 7, ["a", "b"], "fp32")
    with pytest.raises((SystemExit, ValueError)):
        ConfigManager().parse_args(["--module", "tests.crossbackend._recipes", "--config", "tiny_run",
                                    "--schedule.steps", "0"])


@pytest.mark.parametrize("path", sorted((REPO / "examples" / "yaml").glob("*.yaml")), ids=lambda p: p.name)
def test_legacy_parser(path):
    cfg = parse_args(HyperTrainerConfig, [str(path)])
    assert cfg.model.name == "qwen3_5"
    with pytest.raises(ConfigError):
        parse_args(HyperTrainerConfig, [str(path), "--train.nope=1"])


def test_no_torch_here_when_there_is_none():
    if HAS_TORCH:
        pytest.skip("torch is installed in this environment")
    assert "torch" not in sys.modules
