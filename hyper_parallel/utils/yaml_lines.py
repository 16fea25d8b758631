"""YAML loading that remembers where every key stands: the one loader of the legacy configs, the
field table and the model descriptors.

Error messages must point at ``file:line``, which ``yaml.safe_load`` forgets. The document is
composed into nodes (LibYAML when available) and walked into :class:`LDict` / :class:`LList`
values that remember the line of every key and item; :func:`load_yaml_with_lines` turns those
into plain values plus a ``{key path: line}`` map.

The semantics:

* **YAML 1.2 core schema** for plain scalars (:mod:`hyper_parallel.utils.yaml_core`: ``off`` is
  the string ``"off"``, ``010`` is ten; a string where a number is declared is then a type error,
  never a silent conversion). Only the core tags may be written explicitly (``!!str``,
  ``!!int``, ``!!float``, ``!!bool``, ``!!null``, ``!!map``, ``!!seq``).
* **Merge keys** (``<<: *base`` or ``<<: [*a, *b]``) work as YAML defines them: the keys written
  in the mapping win over merged ones, and of several merged mappings the earlier wins. A key's
  line is where its winning value is written.
* **Duplicate keys are errors** (PyYAML silently keeps the last one); so are non-scalar keys.
* **Bounded**: a document may expand to at most :data:`MAX_NODES` values through its aliases (a
  "billion laughs" document fails at once, before anything is built), nest at most
  :data:`MAX_DEPTH` levels, and an alias must not refer to a collection that contains it.

A syntax error stops the load (:class:`YamlSyntaxError`, with its line). The other problems --
duplicate keys, bad keys, unsupported tags, unreadable values -- are collected, one
:class:`YamlProblem` each, so that a caller can report them together with its own schema
problems; their values load as :data:`INVALID`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from hyper_parallel.utils.yaml_core import (
    CORE_TAG,
    FLOAT_RE,
    INT_RE,
    MAP_TAG,
    MERGE_TAG,
    SCALAR_TAGS,
    SEQ_TAG,
    CoreLoader,
    dump,
)

# INT_RE, FLOAT_RE and dump are yaml_core's; the callers of this module take them from here.
__all__ = ["FLOAT_RE", "INT_RE", "INVALID", "LDict", "LList", "LocatedYaml", "YamlProblem",
           "YamlSyntaxError", "dump", "holds_invalid", "load_nodes", "load_yaml_located",
           "load_yaml_with_lines", "parse_scalar", "plain"]

MAX_NODES = 100_000
"""Most values (scalars, mappings and lists, counted after alias expansion) a document may hold."""

MAX_DEPTH = 100
"""Deepest nesting of mappings and lists."""


class YamlSyntaxError(ValueError):
    """The text cannot be loaded at all (not YAML, too large or too deep); ``line`` is 1-based
    when known. :func:`load_yaml_with_lines` also raises it for the first collected problem."""

    def __init__(self, message: str, line: int | None):
        self.line = line
        super().__init__(message)


@dataclass(frozen=True)
class YamlProblem:
    """A problem found while building the values (the load went on): ``line`` is 1-based."""

    line: int
    message: str


class _Invalid:
    """The value of a node that has a :class:`YamlProblem` (never a real value); one instance,
    :data:`INVALID`, compared with ``is``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<invalid>"

    def __copy__(self) -> _Invalid:
        return self

    def __deepcopy__(self, memo: Any) -> _Invalid:
        return self

    def __reduce__(self) -> str:
        return "INVALID"  # pickles as the module attribute: still the one instance


INVALID = _Invalid()
"""Stands for a value that could not be read (its problem is in the load's ``problems``)."""


def holds_invalid(value: Any) -> bool:
    """Whether ``value`` is, or contains, :data:`INVALID` (a value that could not be read and
    whose problem was already reported)."""
    if value is INVALID:
        return True
    if isinstance(value, dict):
        return any(holds_invalid(v) for v in value.values())
    if isinstance(value, list):
        return any(holds_invalid(v) for v in value)
    return False


class LDict(dict):
    """A mapping with ``line`` (1-based, of the mapping) and ``key_lines`` (of each key)."""

    line: int = 0
    key_lines: dict[Any, int]


class LList(list):
    """A sequence with ``line`` and ``item_lines``."""

    line: int = 0
    item_lines: list[int]


@dataclass
class LocatedYaml:
    """A loaded document (plain values) plus the 1-based line of each mapping key, by key path
    tuple (list items are path steps too: ``("a", 0, "b")``), and the problems collected while
    building it (empty when the document is sound)."""

    data: Any
    lines: dict[tuple, int] = field(default_factory=dict)
    problems: list[YamlProblem] = field(default_factory=list)


def _line(node: Node) -> int:
    return node.start_mark.line + 1


def _describe_tag(tag: str) -> str:
    return "!!" + tag[len(CORE_TAG):] if tag.startswith(CORE_TAG) else tag


class _Walker:
    """Builds :class:`LDict` / :class:`LList` / scalars from a composed node graph."""

    def __init__(self, loader: Any, *, string_keys: bool):
        self.loader = loader
        self.string_keys = string_keys
        self.problems: list[YamlProblem] = []

    def problem(self, node: Node, message: str) -> _Invalid:
        self.problems.append(YamlProblem(_line(node), message))
        return INVALID

    # -- the bound, before anything is built ----------------------------------------------------

    def check_size(self, root: Node) -> None:
        """Count the values ``root`` expands to; raise on too many, too deep or recursive."""
        sizes: dict[int, int] = {}
        active: set[int] = set()
        total = 0

        def size(node: Node, depth: int) -> int:
            nonlocal total
            key = id(node)
            if key in sizes:
                total += sizes[key]
                if total > MAX_NODES:
                    self._too_large(node)
                return sizes[key]
            if isinstance(node, ScalarNode):
                total += 1
                if total > MAX_NODES:
                    self._too_large(node)
                return 1
            if depth > MAX_DEPTH:
                raise YamlSyntaxError(
                    f"the document nests mappings and lists more than {MAX_DEPTH} levels deep",
                    _line(node),
                )
            if key in active:
                raise YamlSyntaxError(
                    "an alias refers to a mapping or list that contains it (a recursive "
                    "alias); a configuration must be a tree",
                    _line(node),
                )
            active.add(key)
            total += 1
            count = 1
            children = (
                [n for pair in node.value for n in pair]
                if isinstance(node, MappingNode)
                else list(node.value)
            )
            for child in children:
                count += size(child, depth + 1)
            active.discard(key)
            sizes[key] = count
            return count

        size(root, 0)

    @staticmethod
    def _too_large(node: Node) -> None:
        raise YamlSyntaxError(
            f"the document expands to more than {MAX_NODES} values through its aliases (a "
            "'billion laughs' document?); nothing was loaded",
            _line(node),
        )

    # -- building -------------------------------------------------------------------------------

    def value(self, node: Node) -> Any:
        if isinstance(node, MappingNode):
            if node.tag != MAP_TAG:
                return self.problem(
                    node, f"unsupported tag {_describe_tag(node.tag)}: write a plain mapping"
                )
            return self.mapping(node)
        if isinstance(node, SequenceNode):
            if node.tag != SEQ_TAG:
                return self.problem(
                    node, f"unsupported tag {_describe_tag(node.tag)}: write a plain list"
                )
            return self.sequence(node)
        return self.scalar(node)

    def scalar(self, node: ScalarNode) -> Any:
        if node.tag not in SCALAR_TAGS:
            return self.problem(
                node,
                f"unsupported tag {_describe_tag(node.tag)} on {node.value!r}: only plain "
                "strings, numbers, booleans and null are configuration values",
            )
        try:
            value = self.loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            return self.problem(node, f"invalid value {node.value!r}: {exc}")
        return value

    def key(self, node: Node) -> Any:
        if not isinstance(node, ScalarNode):
            kind = "mapping" if isinstance(node, MappingNode) else "list"
            return self.problem(node, f"mapping keys must be plain scalars, got a {kind}")
        key = self.scalar(node)
        if key is INVALID:
            return key
        if self.string_keys and not isinstance(key, str):
            return self.problem(node, "keys must be strings")
        if key is None or not isinstance(key, (str, int, float, bool)):
            return self.problem(
                node, f"mapping keys must be plain scalars, got {type(key).__name__}"
            )
        return key

    def mapping(self, node: MappingNode) -> LDict:
        out = LDict()
        out.line = _line(node)
        out.key_lines = {}
        merges = [(k, v) for k, v in node.value if k.tag == MERGE_TAG]
        for extra, _ in merges[1:]:
            self.problem(extra, "duplicate merge key '<<' (give one `<<: [*a, *b]` instead)")
        if merges:
            self._merge(out, merges[0][1])
        explicit: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = self.key(key_node)
            if key is INVALID:
                continue
            line = _line(key_node)
            if key in explicit:
                self.problem(key_node, f"duplicate key {key!r} (first at line {explicit[key]})")
                continue
            explicit[key] = line
            out[key] = self.value(value_node)
            out.key_lines[key] = line
        return out

    def _merge(self, out: LDict, value_node: Node) -> None:
        if isinstance(value_node, MappingNode):
            sources = [value_node]
        elif isinstance(value_node, SequenceNode):
            sources = list(value_node.value)
        else:
            self.problem(value_node, "'<<' merges a mapping (`<<: *base`) or a list of mappings "
                                     f"(`<<: [*a, *b]`), got {value_node.value!r}")
            return
        # Of several merged mappings the earlier wins: apply them last to first.
        for source in reversed(sources):
            if not isinstance(source, MappingNode):
                self.problem(source, "'<<' can only merge mappings")
                continue
            merged = self.value(source)
            if merged is INVALID:
                continue
            for key, item in merged.items():
                out[key] = item
                out.key_lines[key] = merged.key_lines[key]

    def sequence(self, node: SequenceNode) -> LList:
        out = LList(self.value(item) for item in node.value)
        out.line = _line(node)
        out.item_lines = [_line(item) for item in node.value]
        return out


def load_nodes(
    text: str, *, string_keys: bool = False
) -> tuple[Any, list[YamlProblem]]:
    """One document as :class:`LDict` / :class:`LList` / scalars (None when empty) and the
    problems collected while building it. ``string_keys``: every key must be a string.
    Raises :class:`YamlSyntaxError` when the text cannot be loaded at all."""
    loader = None
    try:
        # The reader validates characters as soon as the loader is constructed.
        loader = CoreLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None, []
        walker = _Walker(loader, string_keys=string_keys)
        walker.check_size(node)
        return walker.value(node), walker.problems
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise YamlSyntaxError(f"invalid YAML: {exc.problem or exc}", line) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(f"invalid YAML: {exc}", None) from None
    except RecursionError:
        raise YamlSyntaxError(
            f"the document nests mappings and lists more than {MAX_DEPTH} levels deep", None
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


def plain(value: Any) -> Any:
    """An :class:`LDict` / :class:`LList` tree as plain ``dict`` / ``list``."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _record_lines(value: Any, path: tuple, lines: dict[tuple, int]) -> None:
    if isinstance(value, LDict):
        for key, item in value.items():
            lines[path + (key,)] = value.key_lines[key]
            _record_lines(item, path + (key,), lines)
    elif isinstance(value, LList):
        for i, item in enumerate(value):
            _record_lines(item, path + (i,), lines)


def load_yaml_located(text: str) -> LocatedYaml:
    """Load one YAML document (``data`` is None when it is empty: nothing, comments or a bare
    ``null``); the collected problems are in ``problems``. Raises :class:`YamlSyntaxError` only
    when the text cannot be loaded at all."""
    tree, problems = load_nodes(text)
    located = LocatedYaml(plain(tree), {}, problems)
    _record_lines(tree, (), located.lines)
    return located


def load_yaml_with_lines(text: str) -> LocatedYaml:
    """:func:`load_yaml_located`, raising :class:`YamlSyntaxError` for the first problem too."""
    located = load_yaml_located(text)
    if located.problems:
        first = located.problems[0]
        raise YamlSyntaxError(first.message, first.line)
    return located


def parse_scalar(text: str) -> Any:
    """Parse a command-line value the way a YAML value is parsed (flow lists and maps too)."""
    if text == "":
        return ""
    try:
        return load_yaml_with_lines(text).data
    except YamlSyntaxError:
        return text  # not YAML: the literal string, typed by the field later
