"""``--to-yaml``: the legacy YAML of a recipe, for users who must go back.

The recipe is converted with the generated adapter (``trainer_config_to_legacy``). A field the
legacy schema has no key for (a ``new_only`` row of the field table set off its default, such
as a ``dump_folder``) makes the conversion impossible (a ``model_spec`` that trains what the
spec registered under its name trains becomes that ``model.name`` and, where needed, its
flavor: ``legacy_spec.without_registered_spec``); every such field is named, with the table's
reason, and nothing is written. The YAML lists only the keys that differ from the legacy
defaults, and is proven like ``--from-yaml``'s output: the legacy parser reads it back to the
very same configuration before it is written.
"""

from __future__ import annotations

from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.migration.recipe.proof import ConversionError, differences
from hyper_parallel.utils.yaml_lines import dump as yaml_dump


def blocking_fields(config: Any) -> list[str]:
    """``path = value (reason)`` for each new-only field of ``config`` off its default."""
    from hyper_parallel.config.legacy_adapter import FIELD_MAP
    from hyper_parallel.config.legacy_spec import without_registered_spec
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    config = without_registered_spec(config)
    default = HyperTrainer.Config()
    found = []
    for row in FIELD_MAP:
        if row.kind != "new_only":
            continue
        for path in row.new:
            value, base = config, default
            for part in path.split("."):
                value, base = getattr(value, part), getattr(base, part)
            if type(value) is not type(base) or value != base:
                shown = repr(value)
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                found.append(f"{path} = {shown} ({row.detail}; "
                             f"codegen/field_table.yaml:{row.line})")
    return found


def _minimal(value: dict, default: dict) -> dict:
    out = {}
    for key, item in value.items():
        base = default.get(key)
        if isinstance(item, dict) and isinstance(base, dict) and key != "config_overrides":
            sub = _minimal(item, base)
            if sub:
                out[key] = sub
        elif item != base or type(item) is not type(base):
            out[key] = item
    return out


def legacy_yaml(module: str, config_name: str) -> str:
    """The YAML text of recipe ``config_name`` in ``module``; raises :class:`CodegenError` when
    the recipe cannot be expressed in the legacy schema."""
    from hyper_parallel.config.recipes import load_recipe
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    config = load_recipe(module, config_name, root_type=HyperTrainer.Config)
    header = (f"# Legacy YAML of the recipe {config_name} ({module}), written by\n"
              f"#   python -m hyper_parallel.codegen --to-yaml --module {module} "
              f"--config {config_name}\n")
    return config_yaml(config, f"--module {module} --config {config_name}", header)


def config_yaml(config: Any, where: str, header: str = "") -> str:
    """The legacy YAML text of a ``HyperTrainer.Config`` (``where`` names it in errors); read
    back by the legacy parser and compared before it is returned."""
    from hyper_parallel.config.legacy_adapter import trainer_config_to_legacy
    from hyper_parallel.config.legacy_spec import without_registered_spec
    from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig
    from hyper_parallel.trainer.config_parser import config_to_dict, load_config

    config = without_registered_spec(config)  # once: the checks below then find it unset
    blocking = blocking_fields(config)
    if blocking:
        raise CodegenError(
            f"{where}: the recipe sets {len(blocking)} field(s) the legacy schema has no key "
            "for, so it has no legacy YAML:\n" + "\n".join(f"  {b}" for b in blocking)
            + "\nreset them to their defaults in the recipe (or train it with --module/--config)"
        )
    try:
        legacy = trainer_config_to_legacy(config)
    except ConfigError as exc:
        raise CodegenError(f"{where}: no legacy YAML: {exc}") from None
    data = _minimal(config_to_dict(legacy), config_to_dict(HyperTrainerConfig()))
    data.get("train", {}).pop("local_rank", None)
    # The model's name always shows, even at its default: it is what the YAML trains.
    data["model"] = {"name": legacy.model.name, **data.get("model", {})}
    data = {key: data[key] for key in ("model", "data", "train") if key in data}
    # The dumper of the loader that reads it back: a string such as '1e-4' or '010' is quoted
    # (YAML 1.2 would read it as a number), as YAML 1.1 readers need too.
    body = yaml_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False,
                     width=100)
    text = header + "# Keys not listed have their legacy defaults.\n" + body
    back = load_config(HyperTrainerConfig, text, source=f"<{where}>")
    back.train.local_rank = legacy.train.local_rank
    problems = differences(legacy, back)
    if problems:
        raise ConversionError(f"{where}: the written YAML would not read back exactly:\n"
                              + "\n".join(f"  {p}" for p in problems))
    return text


__all__ = ["blocking_fields", "config_yaml", "legacy_yaml"]
