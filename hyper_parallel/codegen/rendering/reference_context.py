"""The template context of ``docs/config_reference.md``, the migration guide: every legacy field
with its new path, kind and doc; the new-only fields; the whole new tree with each field's
legacy source.
"""

from __future__ import annotations

from typing import Any

from hyper_parallel.codegen.table.coverage import Resolved


def _md(text: str) -> str:
    """A docstring as one Markdown table cell (RST double backticks become single ones)."""
    return " ".join(text.replace("``", "`").replace("|", "\\|").split())


def _code(value: Any) -> str:
    return f"`{value!r}`" if not isinstance(value, str) else f'`"{value}"`'


# ---------------------------------------------------------------------------------------------
# docs/config_reference.md
# ---------------------------------------------------------------------------------------------

KIND_TEXT = {
    "rename": "the value is copied to the new path (same meaning, possibly a new name).",
    "transform": "the value is converted by a named pair of functions in "
    "`hyper_parallel/config/transforms.py` (they may read other fields).",
    "unsupported": "the new configuration cannot express a non-default value; converting a "
    "config that sets one is an error quoting the reason.",
    "new_only": "a new-tree field with no legacy key; converting to the legacy schema fails "
    "unless it holds its default.",
}


def _type_default(type_text: str, default: Any) -> str:
    # A "|" inside a table cell must be escaped, also within code spans (GitHub Markdown).
    return f"`{type_text}` = {_code(default)}".replace("|", "\\|")


def reference_context(r: Resolved) -> dict[str, Any]:
    t = r.table
    groups: dict[str, list[dict[str, str]]] = {name: [] for name in r.legacy_sections if name}
    for path, info in r.legacy.items():
        row = r.owner_of_legacy[path]
        group = path.rsplit(".", 1)[0]
        first = next(iter(row.legacy.values()))
        if row.kind == "unsupported":
            new, doc = "—", f"Unsupported: {row.reason}."
        elif path != first:
            # A many-field transform is described once, on its first legacy key.
            new = "see `" + first + "`"
            doc = f"{info.doc} Converted together with `{first}`; see that row."
            groups[group].append({
                "legacy": path, "legacy_type": _type_default(info.type, info.default),
                "new": new, "kind": f"transform<br>`{row.forward}`", "doc": _md(doc),
            })
            continue
        else:
            new = "<br>".join(
                f"`{p}`<br>{_type_default(r.new[p].type, r.new[p].default)}"
                for p in row.new.values()
            )
            doc = " ".join(r.new[p].doc for p in row.new.values())
        kind = row.kind
        if row.kind == "transform":
            kind = f"transform<br>`{row.forward}`"
            others = [p for p in row.legacy.values() if p != path]
            if others:
                doc += f" Converted together with {', '.join(f'`{p}`' for p in others)}."
            if row.reads:
                doc += f" Reads {', '.join(f'`{p}`' for p in row.reads.values())}."
        if row.note:
            doc += f" {row.note}"
        groups[group].append({
            "legacy": path, "legacy_type": _type_default(info.type, info.default), "new": new,
            "kind": kind, "doc": _md(doc),
        })
    legacy_groups = [{"name": name, "rows": rows} for name, rows in groups.items() if rows]
    new_only = []
    for row in t.rows:
        if row.kind == "new_only":
            (npath,) = row.new.values()
            leaf = r.new[npath]
            new_only.append({"path": npath, "type": _type_default(leaf.type, leaf.default),
                             "reason": _md(row.reason or "")})
    tree = []

    def legacy_of(path: str) -> str:
        row = r.owner_of_new[path]
        return "<br>".join(f"`{p}`" for p in row.legacy.values()) or "—"

    plain = [e for e in t.root if e.kind == "field"]
    tree.append({
        "name": "(root)", "cls": "HyperTrainer.Config", "doc": _md(t.root_doc),
        "fields": [{"path": e.name, "type": _type_default(r.new[e.name].type,
                                                          r.new[e.name].default),
                    "legacy": legacy_of(e.name), "doc": _md(r.new[e.name].doc)} for e in plain],
    })
    for entry in t.root:
        if entry.kind == "field":
            continue
        if entry.kind == "section":
            s = t.section(entry.name)
            name, cls, doc = s.name, f"{s.cls} (generated)", s.doc
        else:
            c = t.component(entry.name)
            name, cls, doc = c.slot, f"{c.owner}.Config", c.doc
        leaves = [leaf for leaf in r.new.values() if leaf.container == name]
        tree.append({"name": name, "cls": cls, "doc": _md(doc), "fields": [
            {"path": leaf.path, "type": _type_default(leaf.type, leaf.default),
             "legacy": legacy_of(leaf.path), "doc": _md(leaf.doc)} for leaf in leaves
        ]})
    return {"table": t.rel, "kinds": list(KIND_TEXT.items()), "legacy_groups": legacy_groups,
            "new_only": new_only, "tree": tree}
