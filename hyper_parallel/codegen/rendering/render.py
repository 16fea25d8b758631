"""Formatting the generated Python with black, and the text helpers every template context uses.

The Python-side work (deciding every annotation, default, check and call) happens in the
template context of each output (:mod:`.sections_context`, :mod:`.adapter_context`,
:mod:`.reference_context`, :mod:`.registry_context`); the Jinja2 templates in ``templates/``
only lay the results out (:mod:`.templating`), so the templates read like the files they
produce. Python output goes through black in-process with explicit settings
(:func:`black_mode`; black's own configuration discovery is never used), so the output does not
depend on the working directory or a ``pyproject.toml``.
"""

from __future__ import annotations

import functools
import textwrap
import time
from dataclasses import dataclass
from typing import Any

LINE_LENGTH = 100


@dataclass
class Timer:
    """Seconds spent in black (for ``bench/bench_codegen.py``)."""

    black_seconds: float = 0.0


def black_mode() -> Any:
    """black's settings, all explicit: py310+, 100 columns, the stable style."""
    import black

    return black.Mode(
        target_versions={black.TargetVersion.PY310},
        line_length=LINE_LENGTH,
        string_normalization=True,
        is_pyi=False,
        magic_trailing_comma=True,
        preview=False,
    )


def black_version() -> str:
    """The installed black's version, without importing black (that takes longer than ``make
    codegen`` on a current tree may): black's own ``__version__`` is its top-level
    ``_black_version`` module's; the package metadata says the same, more slowly."""
    try:
        from _black_version import version
    except ImportError:
        from importlib.metadata import version as installed

        return installed("black")
    return version


def format_python(source: str, timer: Timer | None = None) -> str:
    """``source`` formatted by black (raises ``black.InvalidInput`` on a syntax error).

    Results are remembered for the life of the process (``check`` after ``generate``, and the
    tests, format the same text again); nothing is cached across processes.
    """
    start = time.perf_counter()
    try:
        return _format_cached(source)
    finally:
        if timer is not None:
            timer.black_seconds += time.perf_counter() - start


@functools.lru_cache(maxsize=32)
def _format_cached(source: str) -> str:
    import black

    return black.format_str(source, mode=black_mode())


def docstring(text: str, indent: int) -> str:
    """``text`` wrapped for a docstring at ``indent`` spaces (continuation lines indented)."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    # Room for the opening and the closing quotes on every line keeps each line in bounds.
    width = LINE_LENGTH - indent - 6
    lines = textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)
    return ("\n" + " " * indent).join(lines)
