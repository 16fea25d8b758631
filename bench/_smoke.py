"""The ``--smoke`` mode every bench shares: where its results go.

A smoke run proves that a bench still runs -- its code paths at their smallest sizes, one or two
iterations, seconds long -- and prints its figures as a real run would (``tests/bench/
test_bench_smoke.py`` runs each one). Its figures measure nothing worth keeping, so it writes
no result file unless ``--out`` names one: a smoke run leaves the repository as it was. A part
that failed, which a full run reports and passes over, fails a smoke run (:func:`exit_status`).
"""

from __future__ import annotations

import json
from pathlib import Path

SMOKE_HELP = ("a seconds-long run of every section at its smallest size, to prove the bench "
              "still runs (no result file unless --out names one)")


def result_path(out: str | None, default: Path, smoke: bool) -> Path | None:
    """Where to write the results: ``out`` when given, else ``default`` -- except in a smoke
    run, which writes nowhere unless told."""
    if out:
        return Path(out)
    return None if smoke else default


def write_results(path: Path | None, results: dict) -> str:
    """Write ``results`` as JSON to ``path`` (its folder made); what to print about it."""
    if path is None:
        return "smoke run: no result file written (--out FILE writes one)"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
    return f"wrote {path}"


def errors(results, where: str = "") -> list[str]:
    """Every ``{"error": ...}`` in ``results`` (a bench's way of reporting a part that failed
    and going on), as ``"path: message"``."""
    found = []
    if isinstance(results, dict):
        if "error" in results:
            found.append(f"{where or '(top)'}: {results['error']}")
        for key, value in results.items():
            found += errors(value, f"{where}/{key}" if where else str(key))
    elif isinstance(results, list):
        for index, value in enumerate(results):
            found += errors(value, f"{where}[{index}]")
    return found


def exit_status(results: dict, smoke: bool) -> int:
    """0, or in a smoke run 1 when a part failed: a full run reports a failed layout and goes
    on (figures, not assertions), but a failure is what a smoke run is there to catch."""
    failed = errors(results) if smoke else []
    for line in failed:
        print(f"smoke: FAILED {line}")
    return 1 if failed else 0


__all__ = ["SMOKE_HELP", "errors", "exit_status", "result_path", "write_results"]
