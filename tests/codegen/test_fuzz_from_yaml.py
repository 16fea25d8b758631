"""Fuzz ``--from-yaml``: converting a random mutation of a legacy YAML ends in a recipe whose
proof holds, or in a ``ConfigError`` / ``CodegenError`` (exit 2) -- never in another exception,
and never in a ``ConversionError`` (exit 1: the YAML parsed but the recipe lost something).

The documents are the legacy fuzz's mutations (``tests/torch/ut/config/test_fuzz_legacy.py``) of
the shipped example YAMLs. black is replaced by the identity for the bulk of the examples (it
costs ~200 ms a file and formats text the generator already wrote as valid Python; the proof
executes the unformatted module all the same); a few examples run the real formatter.

Measured on the 2-core dev machine: 1,500 + 40 examples in about 20 s; about a sixth convert.
``HYPER_PARALLEL_FUZZ_SCALE=N`` multiplies the counts.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.migration import from_yaml
from hyper_parallel.codegen.rendering import render as render_module
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.yaml_lines import dump
from tests.torch.ut.config.test_fuzz_legacy import _mutate

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = {
    name: yaml.safe_load((REPO / "examples" / "yaml" / name).read_text(encoding="utf-8"))
    for name in ("train_qwen3_5_debug.yaml", "train_qwen3_5_fsdp2.yaml",
                 "train_qwen3_5_tp2.yaml", "train_qwen3_5_demo.yaml")
}
SCALE = float(os.environ.get("HYPER_PARALLEL_FUZZ_SCALE", "1"))
tally = {"examples": 0, "recipe": 0, "refused": 0}


@pytest.fixture(scope="module")
def workdir():
    shm = Path("/dev/shm")
    parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    folder = Path(tempfile.mkdtemp(prefix="hyper_parallel_fuzz_", dir=parent))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _convert(workdir: Path, doc: dict) -> None:
    path = workdir / "fuzz.yaml"
    try:
        path.write_text(dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    except yaml.YAMLError:
        return
    tally["examples"] += 1
    try:
        recipe, _ = from_yaml.convert(path, "fuzz_recipe", workdir / "recipes" / "fuzz_recipe.py",
                                      REPO, base=workdir)
    except from_yaml.ConversionError as exc:
        pytest.fail(f"the YAML parsed but its recipe lost something: {exc}\n{path.read_text()}")
    except (ConfigError, CodegenError) as exc:
        tally["refused"] += 1
        assert str(exc)
        return
    tally["recipe"] += 1
    assert "def fuzz_recipe()" in recipe.text


def _document(draw) -> dict:
    return _mutate(EXAMPLES[draw(st.sampled_from(sorted(EXAMPLES)))], draw)


@settings(max_examples=int(1500 * SCALE), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_from_yaml_converts_or_refuses(workdir, data, identity_formatter):
    _convert(workdir, _document(data.draw))


@settings(max_examples=max(1, int(40 * SCALE)), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_from_yaml_with_the_real_formatter(workdir, data):
    _convert(workdir, _document(data.draw))


@pytest.fixture
def identity_formatter(monkeypatch):
    """black replaced for one test function (not per example: hypothesis runs them all inside)."""
    monkeypatch.setattr(render_module, "format_python", lambda text: text)


def teardown_module(module):
    print(f"\n--from-yaml fuzz: {tally}")
    assert tally["recipe"] > 0 and tally["refused"] > 0, tally
