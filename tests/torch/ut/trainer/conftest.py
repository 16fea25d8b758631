"""Fixtures of the trainer tests: an entry's ``main`` run in this process."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

import pytest


@pytest.fixture
def run_entry(capsys, tmp_path, monkeypatch) -> Iterator[Callable[..., tuple[int, str]]]:
    """``run_entry(main, argv) -> (exit code, stderr)``: a command-line entry's ``main`` in
    ``tmp_path``, in this process (fast: no interpreter start, torch imported once).

    ``hyper_parallel.train.main`` configures the root logger once per process; here it does so
    afresh, on the captured stderr, so that a traceback it logs is seen, and the test's logging
    is restored afterwards."""
    monkeypatch.chdir(tmp_path)
    root = logging.getLogger()
    saved = root.handlers[:], root.level, getattr(root, "_hyper_parallel_configured", False)
    root._hyper_parallel_configured = False  # type: ignore[attr-defined]

    def run(main: Callable[[list[str]], int], argv: Sequence[str]) -> tuple[int, str]:
        code = main(list(argv))
        return code, capsys.readouterr().err

    yield run
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    root._hyper_parallel_configured = saved[2]  # type: ignore[attr-defined]
