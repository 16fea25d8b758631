"""The configuration toolchain imports no framework: torch, torchdata, tokenizers, datasets and
safetensors are only for building the runtime objects.

Each check runs in a fresh interpreter whose imports of those packages fail: a ``sitecustomize``
module on ``PYTHONPATH`` installs a ``sys.meta_path`` finder that raises ``ImportError`` for
them and records every attempt in a log file. The children inherit ``PYTHONPATH``, so a
subprocess the tool starts (``make codegen`` converts the recipes in a fresh process) is blocked
too. A check passes when the command does its job *and* the log is empty: an attempt that some
caller swallowed (a ``try: import torch``) counts as a failure as well.

The three paths of the issue: ``ConfigManager.parse_args`` of a recipe with an override, the
code generator's check and ``--from-yaml`` (its proof included), and every recipe of every
recipe module; and the module that names ``HyperTrainer.Config``, the engine's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BLOCKED = ("torch", "torchdata", "tokenizers", "datasets", "safetensors")

SITECUSTOMIZE = textwrap.dedent(
    f"""\
    import os, sys, traceback

    _BLOCKED = {BLOCKED!r}
    _LOG = os.environ["HP_TORCH_FREE_LOG"]


    class _Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] not in _BLOCKED:
                return None
            where = "".join(traceback.format_stack(limit=12)[:-1])
            with open(_LOG, "a") as log:
                log.write(f"import of {{name!r}} in pid {{os.getpid()}}:\\n{{where}}\\n")
            raise ImportError(f"{{name}} is blocked: the configuration must not import it")


    sys.meta_path.insert(0, _Blocker())
    """
)


@pytest.fixture
def blocked_python(tmp_path):
    """Run ``python <args>`` in the repository with the framework packages blocked; returns the
    completed process after checking that nothing tried to import them."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "blocked.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
        "HP_TORCH_FREE_LOG": str(log),
    }

    def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True,
            timeout=timeout, check=False,
        )
        attempts = log.read_text() if log.exists() else ""
        assert not attempts, f"a framework package was imported:\n{attempts[-6000:]}"
        assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        return proc

    return run


def test_the_blocker_blocks(blocked_python, tmp_path):
    """The harness itself: an import of torch fails and is logged (else every check below
    would pass vacuously)."""
    with pytest.raises(AssertionError, match="a framework package was imported"):
        blocked_python("-c", "import torch")


def test_parse_args_of_a_recipe_with_overrides(blocked_python):
    code = textwrap.dedent(
        """\
        from hyper_parallel.config.manager import ConfigManager
        from hyper_parallel.trainer.hyper_trainer import HyperTrainer

        config = ConfigManager(HyperTrainer.Config).parse_args(
            ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel",
             "--training.steps", "3"]
        )
        assert config.training.steps == 3, config.training.steps
        spec = config.model_spec
        assert (spec.name, spec.flavor) == ("qwen3_5_v2", "debugmodel")
        from hyper_parallel.models.qwen3_5.model_config import flavor_config

        assert spec.model == flavor_config("debugmodel")
        import hyper_parallel.components  # every component Config
        print("parsed", config.training.steps)
        """
    )
    assert blocked_python("-c", code).stdout.split() == ["parsed", "3"]
    # The command-line entry prints the resolved tree, the spec's hooks as their import paths.
    printed = blocked_python(
        "-m", "hyper_parallel.config.manager", "--module", "qwen3_5_v2", "--config",
        "qwen3_5_v2_debugmodel", "--training.steps", "3",
    ).stdout
    assert "steps: 3" in printed and "LazyRef('hyper_parallel.models.qwen3_5" in printed


def test_the_engine_module_and_its_config(blocked_python):
    """The engine's module, the legacy front door and ``HyperTrainer.Config`` load without torch
    (the steps that build the runtime objects import it), and every import path of
    ``HyperTrainer`` gives the one engine class, whose ``Config`` is the generated root."""
    code = textwrap.dedent(
        """\
        from hyper_parallel.trainer import trainer_config
        from hyper_parallel.trainer.hyper_trainer import HyperTrainer
        from hyper_parallel.trainer.llm_trainer import LLMTrainer
        from hyper_parallel.trainer import HyperTrainer as from_package
        from hyper_parallel.trainer.trainer_config import HyperTrainer as old_path

        assert HyperTrainer is from_package is old_path
        assert HyperTrainer.Config is trainer_config.RootConfig
        assert HyperTrainer.Config._owner is HyperTrainer and issubclass(LLMTrainer, HyperTrainer)
        config = HyperTrainer.Config()
        config.training.steps = 2
        print(type(config).__qualname__, config.training.steps)
        """
    )
    assert blocked_python("-c", code).stdout.split() == ["RootConfig", "2"]


def test_codegen_check(blocked_python):
    """``make codegen-check``: regenerates every output (configuration modules, registries,
    the recipes of the example YAMLs) into a temporary place and compares."""
    blocked_python("-m", "hyper_parallel.codegen", "--check", "-q", timeout=600)


def test_from_yaml_with_its_proof(blocked_python, tmp_path):
    out = tmp_path / "train_qwen3_5_debug.py"
    blocked_python(
        "-m", "hyper_parallel.codegen", "--from-yaml", "examples/yaml/train_qwen3_5_debug.yaml",
        "-o", str(out), "-q",
    )
    text = out.read_text()
    assert "def train_qwen3_5_debug() -> HyperTrainer.Config:" in text


def test_every_recipe_of_every_recipe_module(blocked_python):
    code = textwrap.dedent(
        """\
        import importlib, pkgutil
        from pathlib import Path
        from hyper_parallel.config.recipes import available_recipes
        from hyper_parallel.trainer.hyper_trainer import HyperTrainer

        modules = ["hyper_parallel.models.qwen3_5_v2.config_registry"]
        modules += sorted(f"recipes.{p.stem}" for p in Path("recipes").glob("*.py"))
        called = 0
        for name in modules:
            module = importlib.import_module(name)
            recipes = available_recipes(module)
            assert recipes, name
            for recipe in recipes:
                config = getattr(module, recipe)()
                assert isinstance(config, HyperTrainer.Config), (name, recipe)
                if config.model_spec is not None:
                    config.model_spec.model.replace()  # the model Config is usable
                called += 1
        print(len(modules), called)
        """
    )
    modules, called = map(int, blocked_python("-c", code).stdout.split())
    assert modules == 1 + len(list((REPO / "recipes").glob("*.py")))
    assert called >= modules
