"""Fixtures for the generator tests: a throw-away copy of the generator's inputs and outputs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hyper_parallel.codegen.table import introspect

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """The table, the templates, the package sources and the docs, copied to ``tmp_path``:
    tests edit them freely and run the generator with ``root=tmp_path``."""
    for name in ("codegen", "templates", "docs"):
        shutil.copytree(REPO / name, tmp_path / name)
    shutil.copytree(
        REPO / "hyper_parallel",
        tmp_path / "hyper_parallel",
        ignore=shutil.ignore_patterns("assets", "__pycache__", "*.pyc"),
    )
    introspect.clear_cache()
    yield tmp_path
    introspect.clear_cache()


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    """Replace ``old`` by ``new`` in ``path`` (``old`` must occur)."""
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, count), encoding="utf-8")
