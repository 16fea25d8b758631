"""The field table's ``mappings:``: one row per legacy field, and the probe every row carries.

A row is ``rename``, ``transform`` (a named forward / backward [/ canonical] function pair in
``hyper_parallel/config/transforms.py``), ``unsupported`` (with the reason) or ``new_only``;
:func:`read_rows` checks each row's shape and its probe (see :mod:`.probes`) and reports every
problem with ``file:line`` and the row (``mappings[12]``). Whether the paths exist and agree is
:mod:`.coverage`'s job.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from typing import Any

from hyper_parallel.codegen.table.checked_yaml import Problems, check_keys, one_line
from hyper_parallel.codegen.table.probes import (
    EXPECTING_OBSERVABLES,
    OBSERVABLES,
    PROBE_KEYS,
    TWO_RANK_OBSERVABLES,
)
from hyper_parallel.utils.suggest import did_you_mean
from hyper_parallel.utils.yaml_lines import LDict, LList, plain

KINDS = ("rename", "transform", "unsupported", "new_only")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass
class Row:
    """One mapping row; ``legacy`` / ``new`` / ``reads`` / ``reads_new`` map local names to
    dotted paths (rename rows use the leaf names as local names)."""

    index: int
    line: int
    kind: str
    legacy: dict[str, str]
    new: dict[str, str]
    reads: dict[str, str] = field(default_factory=dict)
    reads_new: dict[str, str] = field(default_factory=dict)
    forward: str | None = None
    backward: str | None = None
    canonical: str | None = None
    reason: str | None = None
    note: str | None = None
    probe: dict = field(default_factory=dict)
    """The setting and the observable it moves (see :mod:`hyper_parallel.codegen.table.probes`)."""
    raw: str = ""

    @property
    def label(self) -> str:
        return f"mappings[{self.index}]"



# Every row needs a probe (see hyper_parallel/codegen/table/probes.py): accepted-and-ignored fields
# cannot land.
_ROW_KEYS = {
    "rename": (("kind", "legacy", "new", "note", "probe"), ("kind", "legacy", "new")),
    "transform": (
        ("kind", "legacy", "new", "reads", "reads_new", "forward", "backward", "canonical", "note",
         "probe"),
        ("kind", "legacy", "new", "forward", "backward"),
    ),
    "unsupported": (("kind", "legacy", "reason", "note", "probe"), ("kind", "legacy", "reason")),
    "new_only": (("kind", "new", "reason", "note", "probe"), ("kind", "new", "reason")),
}
"""Allowed and required keys per row kind; ``probe`` is required of every row too, reported on
its own so that a row without one still gets its other problems checked."""


def _probe(obj: Any, where: str, line: int, own: list[str], problems: Problems) -> dict | None:
    """Shape-check a row's probe; ``own`` are the paths one of which ``set`` must contain."""
    where = f"{where}.probe"
    if not check_keys(obj, where, line, PROBE_KEYS, ("observe", "set"), problems):
        return None
    ok = True
    observe = obj["observe"]
    if observe not in OBSERVABLES:
        problems.add(obj.key_lines["observe"], where, f"observe: unknown observable {observe!r}"
                     f"{did_you_mean(str(observe), OBSERVABLES)}; known: {', '.join(OBSERVABLES)}")
        ok = False
    for key in ("set", "base"):
        value = obj.get(key, LDict() if key == "base" else None)
        if not isinstance(value, dict) or (key == "set" and not value) or not all(
                isinstance(k, str) and _PATH.fullmatch(k) for k in value):
            problems.add(obj.key_lines[key], where, f"{key} must map dotted field paths to "
                         f"values, got {value!r}")
            ok = False
    if ok and not any(path in obj["set"] for path in own):
        problems.add(obj.key_lines["set"], where, f"set must set the row's own field "
                     f"({' or '.join(own)}), so the probe tests this row")
        ok = False
    for key, needed in (("path", ("attribute",)), ("expect", EXPECTING_OBSERVABLES)):
        if (key in obj) != (observe in needed):
            problems.add(line, where, f"{key} is required with observe: {' / '.join(needed)}, "
                         "and only then")
            ok = False
    if obj.get("ranks", 1) not in (1, 2):
        problems.add(obj.key_lines["ranks"], where, f"ranks must be 1 or 2, got {obj['ranks']!r}")
        ok = False
    elif observe in TWO_RANK_OBSERVABLES and obj.get("ranks", 1) != 2:
        problems.add(line, where, f"observe: {observe} needs a peer: ranks: 2")
        ok = False
    steps = obj.get("steps", 3)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        problems.add(obj.key_lines["steps"], where, f"steps must be an integer >= 0, got {steps!r}")
        ok = False
    return plain(obj) if ok else None


def _path_map(value: Any, where: str, line: int, key: str, problems: Problems,
              *, single: bool) -> dict[str, str] | None:
    if single:
        if not isinstance(value, str) or not _PATH.fullmatch(value):
            problems.add(line, where, f"{key} must be a dotted field path, got {value!r}")
            return None
        return {value.rsplit(".", 1)[-1]: value}
    if not isinstance(value, LDict) or not value:
        problems.add(line, where, f"{key} must map local names to dotted paths "
                     f"({{local_name: a.b.c}}), got {value!r}")
        return None
    out = {}
    for local, path in value.items():
        if not _IDENT.fullmatch(local) or keyword.iskeyword(local):
            problems.add(value.key_lines[local], where, f"{key}: {local!r} is not a usable "
                         "keyword name")
        if not isinstance(path, str) or not _PATH.fullmatch(path):
            problems.add(value.key_lines[local], where, f"{key}.{local} must be a dotted path, "
                         f"got {path!r}")
            return None
        out[local] = path
    return out


def read_rows(raw: Any, lines: list[str], problems: Problems) -> list[Row]:
    """The rows of ``mappings:`` (``lines``: the table's text, for each row's ``raw``)."""
    out: list[Row] = []
    if not isinstance(raw, LList):
        problems.add(getattr(raw, "line", 1), "mappings", "must be a list of rows")
        return out
    for i, obj in enumerate(raw):
        line = raw.item_lines[i]
        where = f"mappings[{i}]"
        if not isinstance(obj, LDict):
            problems.add(line, where, f"a row must be a mapping, got {obj!r}")
            continue
        kind = obj.get("kind")
        if kind not in KINDS:
            problems.add(line, where, f"kind must be one of {', '.join(KINDS)}, got {kind!r}"
                         f"{did_you_mean(str(kind), KINDS)}")
            continue
        allowed, required = _ROW_KEYS[kind]
        if not check_keys(obj, where, line, allowed, required, problems):
            continue
        single = kind != "transform"
        legacy = new = {}
        if "legacy" in obj:
            legacy = _path_map(obj["legacy"], where, obj.key_lines["legacy"], "legacy", problems,
                               single=single)
        if "new" in obj:
            new = _path_map(obj["new"], where, obj.key_lines["new"], "new", problems,
                            single=single)
        reads = reads_new = {}
        if "reads" in obj:
            reads = _path_map(obj["reads"], where, obj.key_lines["reads"], "reads", problems,
                              single=False)
        if "reads_new" in obj:
            reads_new = _path_map(obj["reads_new"], where, obj.key_lines["reads_new"],
                                  "reads_new", problems, single=False)
        if legacy is None or new is None or reads is None or reads_new is None:
            continue
        for key in ("forward", "backward", "canonical"):
            if key in obj and (not isinstance(obj[key], str) or not _IDENT.fullmatch(obj[key])):
                problems.add(obj.key_lines[key], where, f"{key} must name a function in "
                             f"hyper_parallel/config/transforms.py, got {obj[key]!r}")
        if set(legacy) & set(reads):
            problems.add(line, where, "a local name is used in both legacy and reads")
        if set(new) & set(reads_new):
            problems.add(line, where, "a local name is used in both new and reads_new")
        own = list(legacy.values()) if kind == "unsupported" else list(new.values())
        probe = None
        if "probe" not in obj:
            problems.add(line, where, "missing key 'probe': every row names a non-default "
                         "setting and the observable it moves "
                         "(hyper_parallel/codegen/table/probes.py)")
        else:
            probe = _probe(obj["probe"], where, obj.key_lines["probe"], own, problems)
        end = raw.item_lines[i + 1] - 1 if i + 1 < len(raw) else len(lines)
        block = lines[line - 1:end]
        while len(block) > 1 and (not block[-1].strip() or block[-1].lstrip().startswith("#")):
            block.pop()
        text = "\n".join(block)
        out.append(Row(
            index=i, line=line, kind=kind, legacy=legacy, new=new, reads=reads,
            reads_new=reads_new, forward=obj.get("forward"), backward=obj.get("backward"),
            canonical=obj.get("canonical"),
            reason=one_line(obj["reason"]) if "reason" in obj else None,
            note=one_line(obj["note"]) if "note" in obj else None, probe=probe or {}, raw=text,
        ))
    return out
