"""The constraints the field table may put on a field's values (``min``, ``pattern``, ...).

One home for both questions asked about them: whether a field's constraints themselves make
sense for its type (:func:`check_constraints`, when the table is read), and what a value
violates (:func:`constraint_problem`: a field's own default, a model descriptor's setting). The
generated ``__post_init__`` enforces the same rules at run time (:mod:`.sections_context`).
"""

from __future__ import annotations

import re
from typing import Any

from hyper_parallel.codegen.table import types as T
from hyper_parallel.codegen.table.checked_yaml import Problems
from hyper_parallel.utils.suggest import did_you_mean
from hyper_parallel.utils.yaml_lines import LDict

CONSTRAINTS = ("min", "max", "extra_values", "nonempty", "pattern", "pattern_hint", "items_choices")


def check_constraints(constraints: dict[str, Any], type_text: str, default: Any, where: str,
                      obj: LDict, problems: Problems) -> None:
    """Report each constraint that does not apply to ``type_text``, and a ``default`` that
    violates the others."""
    base, _optional = T.split_optional(type_text)
    numeric = base in ("int", "float")
    # Bounds of every integer of an integer-list field (``list[int]``, ``int | list[int]``).
    int_items = base in ("list[int]", "int | list[int]")
    wrong: set[str] = set()

    def bad(key: str, message: str) -> None:
        problems.add(obj.key_lines[key], where, message)
        wrong.add(key)

    for key, value in constraints.items():
        if key == "min" and int_items:
            if not T.matches(value, "int"):
                bad(key, f"min of a {base} field needs an int bound")
        elif key in ("min", "max"):
            if not numeric or not T.matches(value, base):
                bad(key, f"{key} needs an {base} field and an {base} bound")
        elif key == "extra_values":
            if not numeric or not isinstance(value, list) or not all(T.matches(v, base) for v in value):
                bad(key, "extra_values must list values of the field's type")
        elif key == "nonempty":
            if value is not True or base not in ("str", "list[str]"):
                bad(key, "nonempty: true applies to str and list[str] fields")
        elif key == "pattern":
            if base != "str" or not isinstance(value, str):
                bad(key, "pattern applies to str fields")
            else:
                try:
                    re.compile(value)
                except re.error as exc:
                    bad(key, f"pattern is not a regular expression: {exc}")
        elif key == "pattern_hint" and "pattern" not in constraints:
            bad(key, "pattern_hint needs a pattern")
        elif key == "items_choices" and (base != "list[str]" or not isinstance(value, list)):
            bad(key, "items_choices applies to list[str] fields")
    # The default against the constraints that are themselves right (a wrong one is reported).
    usable = {k: v for k, v in constraints.items() if k not in wrong}
    if default is not None and constraint_problem(usable, base, default) is not None:
        problems.add(obj.key_lines["default"], where,
                     f"default {default!r} violates the field's own constraints")


def constraint_problem(constraints: dict[str, Any], base: str, value: Any) -> str | None:
    """What ``value`` (not None, of type ``base``) violates in ``constraints`` -- the rules the
    generated ``__post_init__`` enforces -- or None."""
    extra = constraints.get("extra_values") or []
    if base in ("int", "float") and value in extra:
        return None
    if base in ("list[int]", "int | list[int]"):
        items = value if isinstance(value, list) else [value]
        if "min" in constraints and any(v < constraints["min"] for v in items):
            return f"must be >= {constraints['min']!r} (every item)"
        return None
    also = f" (or one of {', '.join(map(repr, extra))})" if extra else ""
    if "min" in constraints and value < constraints["min"]:
        return f"must be >= {constraints['min']!r}{also}"
    if "max" in constraints and value > constraints["max"]:
        return f"must be <= {constraints['max']!r}{also}"
    if constraints.get("nonempty"):
        items = value if isinstance(value, list) else [value]
        if any(v == "" for v in items):
            return "must not be empty"
    if "pattern" in constraints and not re.fullmatch(constraints["pattern"], value):
        return f"must be {constraints.get('pattern_hint') or 'matching ' + constraints['pattern']}"
    choices = constraints.get("items_choices")
    if choices is not None and any(v not in choices for v in value):
        bad = next(v for v in value if v not in choices)
        return (f"item {bad!r} is not allowed{did_you_mean(str(bad), choices)}; items must be "
                f"among: {', '.join(choices)}")
    return None
