"""``ConfigManager``: one command line, two configuration worlds.

* ``--module M --config F [--section.field=value ...]`` (argv starts with ``--module``): import
  the recipe module, call the zero-argument recipe ``F()`` for a ``HyperTrainer.Config``, apply
  the overrides with tyro, then re-run every ``__post_init__`` validation of the tree (tyro's
  handling of validation errors differs between versions; this makes it uniform).
  The module is searched as ``hyper_parallel.models.<M>.config_registry``, then
  ``<M>.config_registry``, then ``<M>`` itself — so ``--module recipes.my_run`` works.
* anything else is the legacy command line, ``old.yaml [--a.b.c=value ...]``: the legacy parser
  (same rules, same errors) and then ``_legacy_to_trainer_config``.

Precedence on the new path: command line > recipe > dataclass defaults.

``python -m hyper_parallel.config.manager --module M --config F [overrides]`` prints the resolved
config; ``--help`` after ``--config F`` lists every CLI field with its docstring.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any, Callable, Sequence

from hyper_parallel.utils.suggest import did_you_mean

TYRO_HINT = "The --module/--config command line needs tyro: pip install tyro (or hyper_parallel[config-cli])"
EXAMPLE = "--module qwen3_5_v2 --config qwen3_5_v2_debugmodel --training.steps=10"


class RecipeError(ValueError):
    """The ``--module`` / ``--config`` pair does not name a usable recipe."""


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


def _candidates(module: str) -> list[str]:
    names = []
    if "." not in module:
        names.append(f"hyper_parallel.models.{module}.config_registry")
    names += [f"{module}.config_registry", module]
    return names


def resolve_recipe_module(module: str) -> ModuleType:
    """Import the first existing candidate; an import that fails *inside* a module is re-raised
    with its real cause, never reported as 'not found'."""
    for name in _candidates(module):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # Not found is only "this candidate does not exist" when the missing module is the
            # candidate itself or one of its parent packages.
            if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
                continue
            raise RecipeError(
                f"--module {module}: importing {name!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        except Exception as exc:
            raise RecipeError(
                f"--module {module}: importing {name!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
    builtin = _builtin_registries()
    raise RecipeError(
        f"--module {module}: no such module (tried {', '.join(_candidates(module))})"
        f"{did_you_mean(module, builtin)}. Built-in recipe modules: {', '.join(builtin) or '(none)'}"
    )


def _builtin_registries() -> list[str]:
    import pkgutil

    import hyper_parallel.models as models

    found = []
    for info in pkgutil.iter_modules(models.__path__):
        if info.ispkg:
            try:
                spec = importlib.util.find_spec(f"hyper_parallel.models.{info.name}.config_registry")
            except ModuleNotFoundError:
                spec = None
            if spec is not None:
                found.append(info.name)
    return sorted(found)


def available_recipes(module: ModuleType) -> list[str]:
    """Public zero-argument callables with a lower-case name defined by the recipe module."""
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or not name[:1].islower() or not callable(value):
            continue
        if getattr(value, "__module__", None) != module.__name__:
            continue  # imported helpers are not recipes
        names.append(name)
    return sorted(names)


def load_recipe(module: str, config: str) -> Any:
    """Call recipe ``config`` of ``module`` and return the config it builds."""
    mod = resolve_recipe_module(module)
    fn: Callable[[], Any] | None = getattr(mod, config, None)
    recipes = available_recipes(mod)
    if fn is None or not callable(fn):
        raise RecipeError(
            f"--config {config}: {mod.__name__} has no recipe {config!r}"
            f"{did_you_mean(config, recipes)}. Available: {', '.join(recipes) or '(none)'}"
        )
    result = fn()
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        raise RecipeError(
            f"--config {config}: {mod.__name__}.{config}() returned {type(result).__name__}, "
            "not a config dataclass (a recipe returns a fresh HyperTrainer.Config)"
        )
    return result


def revalidate(config: Any) -> Any:
    """Run ``__post_init__`` of every dataclass in the tree again, leaves first."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        for f in dataclasses.fields(config):
            value = getattr(config, f.name)
            if isinstance(value, (list, tuple)):
                for item in value:
                    revalidate(item)
            else:
                revalidate(value)
        post_init = getattr(config, "__post_init__", None)
        if post_init is not None:
            post_init()
    return config


class ConfigManager:
    """Parse a command line into a ``HyperTrainer.Config`` (either entry path)."""

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
        default = load_recipe(module, config)
        parsed = tyro.cli(
            type(default),
            args=rest,
            default=default,
            registry=registry,
            prog=f"--module {module} --config {config}",
            description=f"Recipe {config} of {module}: override any field below.",
        )
        return revalidate(parsed)

    def _parse_legacy(self, argv: list[str]) -> Any:
        from hyper_parallel.config.legacy_adapter import _legacy_to_trainer_config
        from hyper_parallel.trainer.config import HyperTrainerConfig, parse_args

        return _legacy_to_trainer_config(parse_args(HyperTrainerConfig, argv))


def _print_config(config: Any) -> None:
    import yaml

    to_dict = getattr(config, "to_dict", None)
    data = to_dict() if callable(to_dict) else dataclasses.asdict(config)
    print(yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True), end="")


def main(argv: Sequence[str] | None = None) -> int:
    from hyper_parallel.trainer.config import ConfigError

    try:
        config = ConfigManager().parse_args(argv)
    except (ConfigError, RecipeError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _print_config(config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
