"""A run's configuration inside its checkpoints, and what a resume may change.

Every checkpoint carries the run's resolved configuration, flat (``{dotted field: repr of its
value}``, the model's resolved architecture under ``architecture.``), and its sha256
(:func:`checkpoint_identity`). A resume compares the running configuration with the saved one
(:func:`compare`):

* a field that changes what the checkpoint *means* (:data:`MEANING`: the architecture, the
  vocabulary, the optimizer kind) is a ``ConfigError`` listing each such field with both values:
  the weights or the optimizer state would be read as something they are not;
* every other difference (steps, learning rate, logging, intervals, parallel degrees, which
  DCP reshards) is legitimate -- that is how a run is extended or moved -- and is logged, one
  line per field.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from hyper_parallel.utils.errors import ConfigError

logger = logging.getLogger(__name__)

#: The ``extra_state.json`` keys of a checkpoint's configuration.
CONFIG_KEY = "config"
CONFIG_HASH_KEY = "config_sha256"

#: The model's resolved architecture is flattened under this prefix (it is what the weights
#: are; the ``model`` section and the spec only request it, in several equivalent spellings).
ARCHITECTURE = "architecture"

#: ``(field or prefix ending in '.', why a change is refused)``, first match wins; ``None``:
#: the field may change (listed before the prefix it is an exception to).
MEANING: tuple[tuple[str, str | None], ...] = (
    (f"{ARCHITECTURE}.kernels", None),
    (f"{ARCHITECTURE}.", "the model's architecture: the saved weights mean another model"),
    ("tokenizer.path", "the vocabulary: token ids would mean other tokens"),
    ("optimizer.name", "the optimizer kind: its saved state belongs to another algorithm"),
)


def flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """``{dotted path: repr}`` of every leaf of a configuration (dataclasses and dicts are
    walked, dict keys sorted; a function or lazy reference is named by its import path)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, str] = {}
        for f in dataclasses.fields(value):
            out.update(flatten(getattr(value, f.name), f"{prefix}{f.name}."))
        return out
    if isinstance(value, dict) and value:
        out = {}
        for key in sorted(value, key=repr):
            out.update(flatten(value[key], f"{prefix}{key}."))
        return out
    return {prefix[:-1]: _shown(value)}


def _shown(value: Any) -> str:
    target = getattr(value, "target", None)  # protocols.lazy.LazyRef
    if isinstance(target, str):
        return target
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    return repr(value)


def run_configuration(config: Any, model_config: Any) -> dict[str, str]:
    """The flat configuration a checkpoint records: ``config`` (its spec by name, flavor and
    requested model Config) and the resolved ``model_config`` under :data:`ARCHITECTURE`."""
    flat = flatten(config)
    flat.update(flatten(model_config, f"{ARCHITECTURE}."))
    return flat


def config_hash(flat: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(flat, sort_keys=True).encode()).hexdigest()


def checkpoint_identity(flat: dict[str, str]) -> dict[str, Any]:
    """What a checkpoint's ``extra_state.json`` holds of the configuration."""
    return {CONFIG_KEY: flat, CONFIG_HASH_KEY: config_hash(flat)}


def why_fixed(field: str) -> str | None:
    """Why ``field`` may not change on a resume, or None."""
    for rule, why in MEANING:
        if field == rule or (rule.endswith(".") and field.startswith(rule)):
            return why
    return None


def compare(saved: dict[str, str], current: dict[str, str]
            ) -> tuple[list[tuple[str, str, str, str]], list[tuple[str, str, str]]]:
    """``(refused, allowed)``: the differing fields as ``(field, saved, now, why)`` and
    ``(field, saved, now)``, in field order (a field only one side has shows ``<absent>``)."""
    refused, allowed = [], []
    for field in sorted(set(saved) | set(current)):
        before, now = saved.get(field, "<absent>"), current.get(field, "<absent>")
        if before == now:
            continue
        why = why_fixed(field)
        if why is None:
            allowed.append((field, before, now))
        else:
            refused.append((field, before, now, why))
    return refused, allowed


def _short(shown: str, limit: int = 80) -> str:
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


def check_resume(extra: dict[str, Any], path: str, current: dict[str, str], *,
                 name: Callable[[str], str] = str, log: bool = True) -> None:
    """Compare a checkpoint's configuration (``extra``) with the running one (see the module
    docstring); ``name`` spells a field of the log in the entry's own names (the error names
    the recipe fields, which the legacy front door rewrites as it rewrites every error). A
    checkpoint written before configurations were recorded is resumed with a warning."""
    saved = extra.get(CONFIG_KEY)
    if not isinstance(saved, dict):
        if log:
            logger.warning("%s records no configuration (written by an older version): the "
                           "resume cannot check that it belongs to this run", path)
        return
    if extra.get(CONFIG_HASH_KEY) == config_hash(current):
        return
    refused, allowed = compare(saved, current)
    if refused:
        lines = []
        for why in dict.fromkeys(why for *_, why in refused):
            lines.append(f"  {why}:")
            lines += [f"    {f}: checkpoint {_short(b)}, this run {_short(n)}"
                      for f, b, n, reason in refused if reason == why]
        raise ConfigError(
            f"the checkpoint {path} was written by a run of another configuration; "
            f"{len(refused)} field(s) that change what it means differ:\n" + "\n".join(lines)
            + "\nresume with the checkpoint's values, or start a fresh run (another "
            "checkpoint folder, no load_path)")
    if log and allowed:
        logger.info("resuming %s with %d field(s) changed since it was saved:\n%s", path,
                    len(allowed),
                    "\n".join(f"  {name(f)}: {_short(b)} -> {_short(n)}" for f, b, n in allowed))


__all__ = ["ARCHITECTURE", "CONFIG_HASH_KEY", "CONFIG_KEY", "MEANING", "check_resume",
           "checkpoint_identity", "compare", "config_hash", "flatten", "run_configuration",
           "why_fixed"]
