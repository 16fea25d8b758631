"""The comments of a YAML document, attached to the mapping keys they describe.

PyYAML drops comments, but its scanner reports where every token starts and ends; whatever
starts with ``#`` in the gaps between tokens (at a line start or after whitespace) is a comment.
A comment on the line of a key is that key's *trailing* comment; a run of comment lines belongs
to the first key below it (its *block* comments). Comments after the last key are the document's
``tail``. When several keys start on one line (a flow mapping), the outermost one gets the
comments.

``--from-yaml`` carries these comments into the recipe it writes, so a user's notes survive the
move from YAML to Python.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import yaml

#: The characters YAML counts as line breaks (PyYAML's reader and scanner agree).
_BREAKS = "\r\n\x85\u2028\u2029"


@dataclass
class KeyComments:
    """The comments attached to one key."""

    block: list[str] = field(default_factory=list)
    """Whole-line comments directly above the key (blank lines between are allowed)."""
    trailing: str | None = None
    """The comment at the end of the key's line."""

    def all(self) -> list[str]:
        """Block comments first, then the trailing one."""
        return self.block + ([self.trailing] if self.trailing is not None else [])


@dataclass
class DocumentComments:
    """``keys`` maps a key path (as in :class:`~hyper_parallel.utils.yaml_lines.LocatedYaml`) to
    its comments; ``tail`` holds the comments after the last key."""

    keys: dict[tuple, KeyComments] = field(default_factory=dict)
    tail: list[str] = field(default_factory=list)


def _line_starts(text: str) -> list[int]:
    starts = [0]
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in _BREAKS:
            if ch == "\r" and text[i + 1:i + 2] == "\n":
                i += 1
            starts.append(i + 1)
        i += 1
    return starts


def _comments_in_gap(text: str, start: int, end: int) -> list[tuple[int, str]]:
    """``(index, comment text without '#')`` of each comment in ``text[start:end]``."""
    found = []
    i = start
    while i < end:
        ch = text[i]
        if ch == "#" and (i == 0 or text[i - 1] in " \t" + _BREAKS):
            j = i
            while j < end and text[j] not in _BREAKS:
                j += 1
            found.append((i, text[i + 1:j]))
            i = j
        else:
            i += 1
    return found


def _clean(comment: str) -> str:
    # "# text" -> "text"; a banner such as "#####" stays as written.
    return comment[1:].rstrip() if comment.startswith(" ") else comment.rstrip()


def find_comments(text: str, key_lines: dict[tuple, int]) -> DocumentComments:
    """Attach the comments of ``text`` to the keys of ``key_lines`` (path -> 1-based line).

    ``text`` must be valid YAML (it has been loaded already); a scanner error returns no
    comments rather than failing a conversion over a comment.
    """
    try:
        tokens = list(yaml.scan(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        return DocumentComments()
    spans = sorted((t.start_mark.index, t.end_mark.index) for t in tokens
                   if t.end_mark.index > t.start_mark.index)
    comments: list[tuple[int, str]] = []
    position = 0
    for start, end in spans + [(len(text), len(text))]:
        if start > position:
            comments += _comments_in_gap(text, position, start)
        position = max(position, end)
    starts = _line_starts(text)

    def line_of(index: int) -> int:
        return bisect.bisect_right(starts, index)  # 1-based

    # The outermost key starting on each line.
    key_at_line: dict[int, tuple] = {}
    for path, line in key_lines.items():
        if line not in key_at_line or len(path) < len(key_at_line[line]):
            key_at_line[line] = path
    key_line_list = sorted(key_at_line)
    result = DocumentComments()
    for index, raw in comments:
        line = line_of(index)
        body = _clean(raw)
        line_start = starts[line - 1]
        own_line = text[line_start:index].strip(" \t") == ""
        if not own_line and line in key_at_line:
            entry = result.keys.setdefault(key_at_line[line], KeyComments())
            entry.trailing = body
            continue
        if not own_line:
            # After a value that continues a key's line further up (a multi-line flow value):
            # keep it with the closest key above.
            above = bisect.bisect_right(key_line_list, line) - 1
            if above >= 0:
                entry = result.keys.setdefault(key_at_line[key_line_list[above]], KeyComments())
                entry.block.append(body)
                continue
        below = bisect.bisect_right(key_line_list, line)
        if below < len(key_line_list):
            result.keys.setdefault(key_at_line[key_line_list[below]], KeyComments()).block.append(body)
        else:
            result.tail.append(body)
    return result
