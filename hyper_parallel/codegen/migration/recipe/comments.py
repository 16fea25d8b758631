"""The comments of a converted recipe: where each line comes from, and the YAML's own notes.

One rule for single recipes and fleets alike: a statement carries at most one comment --
trailing when ``    code  # comment`` fits in 100 columns, else on the line above it; never two
comment lines over one statement. That comment is the line's *provenance* -- the legacy keys it
comes from and their lines (``train.max_steps (line 14)``, ``command line: --train.seed=7``;
in a fleet's shared function ``train.seed (3 of 6 YAMLs)``) -- followed by the YAML's comments on
those keys, a block of comment lines joined into one sentence.

The YAML's comments that describe no statement go to the docstring instead (:class:`Loose`):
its header (the comment block above the first key, kept line for line), the comments after its
last key, and the comments of keys no line sets (a key at the baseline's value, a section),
each named by its key and line.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from hyper_parallel.codegen.migration.recipe.changes import Change, statement
from hyper_parallel.codegen.migration.yaml_comments import KeyComments
from hyper_parallel.codegen.migration.yaml_source import LegacySource, covers
from hyper_parallel.codegen.rendering.render import LINE_LENGTH

#: The indentation of a recipe's statements (the body of its function).
INDENT = 4


def comment_text(text: str) -> str:
    """One printable line (non-printable characters escaped), safe after ``#``."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text).rstrip()


def joined(texts: list[str]) -> str:
    """Several remarks as one line: a remark ending in punctuation (a sentence, a clause) is
    followed by a space, any other by ``; ``."""
    out = ""
    for text in texts:
        text = text.strip()
        if text:
            out = text if not out else out + (" " if out.endswith(tuple(".!?:;,")) else "; ") + text
    return out


@dataclass
class RecipeLine:
    """One statement of a recipe function and its comment."""

    code: str
    provenance: str = ""
    keys: tuple[tuple, ...] = ()
    """The legacy key paths whose values the line sets (their YAML comments are its notes)."""
    notes: list[str] = field(default_factory=list)
    """The YAML's comments on those keys, one line each."""

    @property
    def comment(self) -> str:
        """The provenance and the notes, as one line ("" when there is neither)."""
        note = joined(self.notes)
        if not note or not self.provenance:
            return self.provenance or note
        return f"{self.provenance}{'; ' if ': ' in self.provenance else ': '}{note}"

    @property
    def fits(self) -> bool:
        """Whether ``code  # comment`` fits black's line length; else the comment goes on the
        line above, and black never has to wrap a value around it."""
        return "\n" not in self.code and \
            len(f"{' ' * INDENT}{self.code}  # {self.comment}") <= LINE_LENGTH


def keys_text(keys: list[str]) -> str:
    """``a.b`` / ``a.{b, c.d}`` (the keys' common dotted prefix once) / ``a.b, c.d``."""
    if len(keys) == 1:
        return keys[0]
    parts = [key.split(".") for key in keys]
    common: list[str] = []
    for group in zip(*parts):
        if len(set(group)) != 1:
            break
        common.append(group[0])
    common = common[:min(len(p) for p in parts) - 1]  # never the whole of a key
    if not common:
        return ", ".join(keys)
    rest = ", ".join(".".join(p[len(common):]) for p in parts)
    return f"{'.'.join(common)}.{{{rest}}}"


def lines_text(lines: list[int]) -> str:
    """``line 4`` / ``lines 4-6``."""
    first, last = min(lines), max(lines)
    return f"line {first}" if first == last else f"lines {first}-{last}"


#: The provenance of a line that sets a field no legacy key reaches (back to its default, which
#: every legacy YAML has), when the field table gives no reason.
NEW_ONLY = "new-only: at its default in every legacy YAML"


class Provenance:
    """New-tree paths -> the legacy keys (and their lines, or the overrides) they come from."""

    def __init__(self, source: LegacySource):
        from hyper_parallel.config.legacy_adapter import FIELD_MAP

        self.source = source
        self.rows = FIELD_MAP

    def legacy_keys(self, change: Change) -> list[str]:
        """The legacy keys of the field table rows that reach the field ``change`` sets."""
        attr = change.attr_path
        keys: list[str] = []
        for row in self.rows:
            if any(new == attr or new.startswith(attr + ".") or attr.startswith(new + ".")
                   for new in row.new):
                keys += [k for k in row.legacy if k not in keys]
        if change.dict_keys and len(keys) == 1:
            keys = [".".join([keys[0], *map(str, change.dict_keys)])]
        return keys

    def new_only(self, change: Change) -> str:
        """The provenance of a line setting a field that no legacy key reaches: the field
        table's reason (``new-only: the legacy outputs are relative to the working
        directory``)."""
        attr = change.attr_path
        for row in self.rows:
            if row.kind == "new_only" and any(attr == new or attr.startswith(new + ".")
                                              for new in row.new):
                return comment_text(f"new-only: {row.detail}")
        return NEW_ONLY

    def line(self, key: str) -> int | None:
        return self.source.lines.get(tuple(key.split(".")))

    def overrides_of(self, key: str) -> list[tuple[int, str, bool]]:
        """``(position, as written, decides)`` of each override that sets ``key`` or a part of
        it (``decides``: the override, not the YAML, gives the key its value)."""
        parts = tuple(key.split("."))
        found = []
        for position, (path, (written, value)) in enumerate(self.source.cli.items()):
            if covers(path, value, parts):
                found.append((position, written, True))
            elif path[:len(parts)] == parts:
                found.append((position, written, False))
        return found

    def locate(self, keys: list[str]) -> tuple[list[tuple[int, str]], list[tuple[int, str]],
                                              list[tuple[int, str]]]:
        """``(written, overridden, cli)``: ``(line, key)`` of the keys the YAML gives their
        value, ``(line, key)`` of the YAML's keys an override replaces, and ``(position, as
        written)`` of those overrides, in the order written."""
        written, overridden, cli = [], [], []
        for k in keys:
            line = self.line(k)
            decided = False
            for position, text, decides in self.overrides_of(k):
                decided = decided or decides
                if (position, text) not in cli:
                    cli.append((position, text))
            if line is not None:
                (overridden if decided else written).append((line, k))
        return sorted(written), sorted(overridden), sorted(cli)

    def describe(self, keys: list[str]) -> tuple[str, tuple[tuple, ...]]:
        """``(provenance, key paths)`` of a line that the legacy ``keys`` decide."""
        written, overridden, cli = self.locate(keys)
        if not written and not cli:
            if not keys:
                return NEW_ONLY, ()
            return (comment_text(f"from the legacy default of {keys_text(keys)} and the YAML's "
                                 "other keys"), ())
        parts = []
        if written:
            parts.append(f"{keys_text([k for _, k in written])} "
                         f"({lines_text([line for line, _ in written])})")
        if cli:
            parts.append("command line: " + " ".join(text for _, text in cli))
        paths = tuple(tuple(k.split(".")) for _, k in sorted(written + overridden))
        return comment_text(", ".join(parts)), paths

    def describe_baseline(self, keys: tuple[str, ...]) -> tuple[str, tuple[tuple, ...]]:
        """The provenance of the first line, ``config = <baseline>`` (``keys``: the legacy keys
        the baseline expresses, ``model.name`` and the flavor)."""
        written, _, cli = self.locate(list(keys))
        if not written and not cli:
            return comment_text(f"{keys_text(list(keys))}: the legacy default"), ()
        return self.describe(list(keys))


@dataclass
class Loose:
    """The YAML's comments that no statement carries (the docstring shows them)."""

    header: list[str] = field(default_factory=list)
    """The comment lines above the YAML's first key, as written."""
    notes: list[str] = field(default_factory=list)
    """``key (line N): comment`` of each commented key that no line sets."""
    tail: list[str] = field(default_factory=list)
    """The comment lines after the YAML's last key, as written."""

    def header_paragraphs(self) -> list[str]:
        """The header as a docstring paragraph (none without a header)."""
        return ["The YAML's header comment:\n\n" + _block(self.header)] if self.header else []

    def note_paragraphs(self, width: int) -> list[str]:
        """The notes and the closing comment as docstring paragraphs (``width``: the columns
        the text may take)."""
        out = []
        if self.notes:
            bullets = [textwrap.fill(f"* {note}", width=width, subsequent_indent="  ",
                                     break_on_hyphens=False, break_long_words=False)
                       for note in self.notes]
            out.append("The YAML's comments on keys that no line sets:\n\n" + "\n".join(bullets))
        if self.tail:
            out.append("The YAML's closing comment:\n\n" + _block(self.tail))
        return out


def _block(lines: list[str]) -> str:
    return "\n".join(f"    {line}" if line else "" for line in lines)


def _first_key(source: LegacySource) -> tuple | None:
    top = [path for path in source.lines if len(path) == 1]
    return min(top, key=lambda path: source.lines[path]) if top else None


def key_note(comments: KeyComments) -> str:
    """The comments of one key as one line: its block (one paragraph), then its trailing one."""
    block = " ".join(comment_text(c).strip() for c in comments.block)
    return joined([block, comment_text(comments.trailing or "")])


def attach_comments(source: LegacySource, lines: list[RecipeLine],
                    inherited: list[RecipeLine] = ()) -> Loose:
    """Give each line the comments of its keys (a line that sets a whole dict, such as
    ``config_overrides``, those of its entries too); returns the comments left over.

    ``inherited``: the lines of the functions this recipe calls (a fleet's shared functions, a
    sibling recipe): a key one of them sets keeps its comment there, added once."""
    owner = {key: line for line in inherited for key in line.keys}
    owner.update({key: line for line in lines for key in line.keys})
    mine = {id(line) for line in lines}

    def owner_of(path: tuple) -> RecipeLine | None:
        for end in range(len(path), 0, -1):
            if path[:end] in owner:
                return owner[path[:end]]
        return None

    first = _first_key(source)
    loose = Loose(tail=[comment_text(c) for c in source.comments.tail])
    ordered = sorted(source.comments.keys.items(),
                     key=lambda item: (source.lines.get(item[0], 0), repr(item[0])))
    for path, comments in ordered:
        if path == first:
            loose.header = [comment_text(c) for c in comments.block]
            comments = KeyComments(trailing=comments.trailing)
        text = key_note(comments)
        if not text:
            continue
        line = owner_of(path)
        if line is None:
            shown = ".".join(map(str, path))
            where = source.lines.get(path)
            loose.notes.append(f"{shown} (line {where}): {text}" if where else f"{shown}: {text}")
        elif id(line) in mine or text not in line.notes:
            line.notes.append(text)
    return loose


def recipe_lines(changes: list[Change], provenance: Provenance,
                 imports: set[tuple[str, str]]) -> list[RecipeLine]:
    """One line per change, in the changes' (field) order, with its provenance."""
    found = []
    for change in changes:
        legacy = provenance.legacy_keys(change)
        text, keys = provenance.describe(legacy) if legacy else (provenance.new_only(change), ())
        found.append(RecipeLine(statement(change, imports), text, keys))
    return found


__all__ = ["INDENT", "NEW_ONLY", "Loose", "Provenance", "RecipeLine", "attach_comments",
           "comment_text", "joined", "key_note", "keys_text", "lines_text", "recipe_lines"]
