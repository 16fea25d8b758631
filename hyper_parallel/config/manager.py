"""``ConfigManager``: one command line, two configuration worlds.

* ``--module M --config F [--section.field=value ...]`` (argv starts with ``--module``): import
  the recipe module, call the zero-argument recipe ``F()`` for a ``HyperTrainer.Config``, apply
  the overrides with tyro, then re-run every ``__post_init__`` validation of the tree (tyro's
  handling of validation errors differs between versions; this makes it uniform). Finding and
  calling the recipe is :mod:`hyper_parallel.config.recipes`; the override syntax and its errors
  are :mod:`hyper_parallel.config.overrides`.
* anything else is the legacy command line, ``old.yaml [--a.b.c=value ...]``: the legacy parser
  (same rules, same errors) and then ``legacy_to_trainer_config``.

Precedence on the new path: command line > recipe > dataclass defaults.

Bad input on the new path is a :class:`~hyper_parallel.config.recipes.RecipeError` (the
``--module`` / ``--config`` pair) or a :class:`~hyper_parallel.utils.errors.ConfigError` (an
override), each one message naming the flag, never a traceback or tyro's own error box.

``python -m hyper_parallel.config.manager --module M --config F [overrides]`` prints the resolved
config; ``--help`` after ``--config F`` lists every CLI field with its docstring.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import sys
from collections.abc import Sequence
from typing import Any

from hyper_parallel.config.overrides import (
    SYNTAX_HELP,
    _config_error,
    _tyro_refusal,
    _validation_error,
    cli_spec,
    normalize_overrides,
)
from hyper_parallel.config.recipes import RecipeError, available_recipes, load_recipe, revalidate
from hyper_parallel.utils.errors import ConfigError

# RecipeError, available_recipes, load_recipe, revalidate (recipes.py), cli_spec and
# normalize_overrides (overrides.py) are re-exported for callers that import them from here.
__all__ = [
    "ConfigManager",
    "RecipeError",
    "available_recipes",
    "cli_spec",
    "extract_module_and_config",
    "is_recipe_command_line",
    "load_recipe",
    "main",
    "normalize_overrides",
    "revalidate",
]

TYRO_HINT = "The --module/--config command line needs tyro: pip install tyro (or hyper_parallel[config-cli])"
EXAMPLE = "--module qwen3_5_v2 --config qwen3_5_v2_debugmodel --training.steps=10"


def _import_tyro() -> Any:
    try:
        import tyro
    except ImportError as exc:
        raise ImportError(TYRO_HINT) from exc
    return tyro


def extract_module_and_config(argv: Sequence[str]) -> tuple[str, str, list[str]]:
    """Pull ``--module X`` / ``--module=X`` and ``--config Y`` / ``--config=Y`` out of ``argv``."""
    found: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        key = next((k for k in ("module", "config") if token == f"--{k}" or token.startswith(f"--{k}=")), None)
        if key is None:
            rest.append(token)
            i += 1
            continue
        if key in found:
            raise RecipeError(f"--{key} is given twice")
        if "=" in token:
            value = token.split("=", 1)[1]
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            value = argv[i + 1]
            i += 1
        else:
            value = ""
        if not value:
            raise RecipeError(f"--{key} needs a value, e.g. {EXAMPLE}")
        found[key] = value
        i += 1
    missing = [k for k in ("module", "config") if k not in found]
    if missing:
        raise RecipeError(f"missing {' and '.join('--' + k for k in missing)}; e.g. {EXAMPLE}")
    return found["module"], found["config"], rest


def is_recipe_command_line(argv: Sequence[str]) -> bool:
    """Whether ``argv`` picks a recipe: it starts with an option (the legacy command line starts
    with the YAML path) and names ``--module`` or ``--config`` anywhere, in either order."""
    return bool(argv) and argv[0].startswith("--") and any(
        token in ("--module", "--config") or token.startswith(("--module=", "--config="))
        for token in argv
    )


class ConfigManager:
    """Parse a command line into a ``HyperTrainer.Config`` (either entry path).

    ``root_type``: the class a recipe must return an instance of (``train`` passes
    ``HyperTrainer.Config``, the class it builds); unset, any config dataclass."""

    def __init__(self, root_type: type | None = None) -> None:
        self.root_type = root_type
        self.overrides: list[str] = []
        """The last recipe command line's overrides, normalized (``--a.b=c`` each)."""
        self.recipe_config: Any = None
        """The last recipe command line's recipe, as the recipe returned it (no overrides)."""

    def parse_args(self, argv: Sequence[str] | None = None) -> Any:
        args = list(sys.argv[1:] if argv is None else argv)  # read at call time
        if is_recipe_command_line(args):
            return self._parse_new(args)
        return self._parse_legacy(args)

    def _parse_new(self, argv: list[str]) -> Any:
        tyro = _import_tyro()
        from hyper_parallel.config.tyro_rules import install_tyro_rules

        registry = install_tyro_rules()
        module, config, rest = extract_module_and_config(argv)
        default = load_recipe(module, config, self.root_type)
        self.recipe_config = default
        recipe = f"{module}.{config}"
        spec = cli_spec(default)
        args = normalize_overrides(rest, spec)
        self.overrides = list(args)
        given = {a[2:].split("=", 1)[0]: a.split("=", 1)[1] for a in args if "=" in a}
        printed = io.StringIO()
        try:
            with contextlib.redirect_stderr(printed):
                parsed = tyro.cli(
                    type(default),
                    args=args,
                    default=default,
                    registry=registry,
                    config=(tyro.conf.FlagConversionOff,),
                    prog=f"--module {module} --config {config}",
                    description=f"Recipe {config} of {module}. {SYNTAX_HELP}",
                )
        except SystemExit as exc:
            if exc.code in (0, None):  # --help
                sys.stderr.write(printed.getvalue())
                raise
            raise _tyro_refusal(exc, printed.getvalue(), spec, given, recipe) from None
        except (ValueError, TypeError) as exc:  # raised by the root's __post_init__
            raise (_validation_error(exc, spec, given, recipe)
                   or _config_error(f"{type(exc).__name__}: {exc}")) from None
        sys.stderr.write(printed.getvalue())  # warnings tyro printed on the way
        try:
            return revalidate(parsed)
        except (ValueError, TypeError) as exc:
            raise (_validation_error(exc, spec, given, recipe)
                   or _config_error(f"invalid configuration: {type(exc).__name__}: {exc}")) from None

    def _parse_legacy(self, argv: list[str]) -> Any:
        from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
        from hyper_parallel.trainer.config import HyperTrainerConfig, parse_args

        return legacy_to_trainer_config(parse_args(HyperTrainerConfig, argv))


def _print_config(config: Any) -> None:
    from hyper_parallel.utils.yaml_lines import dump

    to_dict = getattr(config, "to_dict", None)
    data = to_dict() if callable(to_dict) else dataclasses.asdict(config)
    print(dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True), end="")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = ConfigManager().parse_args(argv)
    except (ConfigError, RecipeError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _print_config(config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
