"""Train from either configuration world.

    torchrun --nproc_per_node N -m hyper_parallel.train --module M --config F [--a.b=c ...]
    torchrun --nproc_per_node N -m hyper_parallel.train old.yaml [--a.b.c=value ...]

``--module``/``--config`` picks a recipe (``HyperTrainer.Config``) and trains it with
``HyperTrainer``; a YAML path is the legacy command line and trains with ``LLMTrainer(args)``
exactly as before (the legacy path stays the default for YAML files).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

# The platform is chosen from the environment when hyper_parallel first asks for it.
os.environ.setdefault("HYPER_PARALLEL_PLATFORM", "torch")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, build the trainer, train, tear down; returns the exit code."""
    from hyper_parallel.config.manager import ConfigManager, RecipeError, is_recipe_command_line
    from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig
    from hyper_parallel.trainer.config import parse_args as parse_legacy
    from hyper_parallel.utils.logging import init_logger

    init_logger()
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        # Which of the two command lines to use; each then has its own --help.
        print(__doc__.strip() + "\n\nHelp on one of them: --module M --config F --help (every "
              "recipe field), or python -m hyper_parallel.trainer.config --help (every legacy "
              "key).", file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    try:
        if is_recipe_command_line(args):
            config = ConfigManager().parse_args(args)
            trainer = config.build()
        else:
            from hyper_parallel.models.spec import discover_model_spec
            from hyper_parallel.trainer.llm_trainer import LLMTrainer

            legacy = parse_legacy(HyperTrainerConfig, args)
            discover_model_spec(legacy.model.name)
            trainer = LLMTrainer(legacy)
    except (ConfigError, RecipeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        trainer.train()
    finally:
        trainer.close()
    return 0


if __name__ == "__main__":
    code = main()
    from hyper_parallel.utils.process import exit_now

    exit_now(code)
