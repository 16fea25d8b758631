"""``tests/slow_single_process.txt`` names only tests that exist, each once.

``tests/conftest.py`` marks the tests listed there ``slow`` (``make test-fast`` leaves them to
``make test``); a name that no longer matches a test (renamed, moved, deleted) would silently
put that test back into the fast half, or leave a dead line behind. Read from the test files'
source (no import): a listed ``path::name`` or ``path::Class::name`` is a test function there.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LISTING = REPO / "tests" / "slow_single_process.txt"


def _listed() -> list[str]:
    lines = LISTING.read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def _tests_of(path: Path) -> set[str]:
    """``name`` and ``Class::name`` of every test function the file defines."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.add(node.name)
        elif isinstance(node, ast.ClassDef):
            found.update(f"{node.name}::{item.name}" for item in node.body
                         if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return {name for name in found if name.split("::")[-1].startswith("test")}


def test_every_listed_test_exists_and_is_listed_once():
    listed = _listed()
    assert listed, LISTING
    gone = []
    for name in listed:
        path, _, function = name.partition("::")
        file = REPO / path
        if not file.is_file() or function not in _tests_of(file):
            gone.append(name)
    assert not gone, f"{LISTING.name} names tests that do not exist: {gone}; rename or remove them"
    repeated = sorted({name for name in listed if listed.count(name) > 1})
    assert not repeated, f"{LISTING.name} lists these more than once: {repeated}"
