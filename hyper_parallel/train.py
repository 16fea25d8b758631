"""Train from either configuration world.

    torchrun --nproc_per_node N -m hyper_parallel.train --module M --config F [--a.b=c ...]
    torchrun --nproc_per_node N -m hyper_parallel.train old.yaml [--a.b.c=value ...]

``--module``/``--config`` picks a recipe (``HyperTrainer.Config``) and trains it with
``HyperTrainer``; a YAML path is the legacy command line and trains with ``LLMTrainer(args)``
exactly as before (the legacy path stays the default for YAML files).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

# The platform is chosen from the environment when hyper_parallel first asks for it.
os.environ.setdefault("HYPER_PARALLEL_PLATFORM", "torch")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, build the trainer, train, tear down; returns the exit code."""
    from hyper_parallel.config.recipes import RecipeError
    from hyper_parallel.trainer.config import ConfigError
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
        trainer = build_trainer(args)
    except (ConfigError, RecipeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        # A rank that cannot build (a file it cannot write, a device it cannot use) says why
        # once and leaves at once: its peers then fail in their next collective, not after
        # the timeout.
        from hyper_parallel.runtime.faults import FAILED_EXIT_CODE, report_failure

        report_failure(exc)
        return FAILED_EXIT_CODE
    return _train(trainer)


def build_trainer(args: Sequence[str]):
    """The trainer either command line describes: ``--module M --config F [--a.b=c ...]`` a
    ``HyperTrainer`` built from the recipe, a YAML path ``LLMTrainer(parse_args(...))``.

    Bad input raises ``ConfigError`` / ``RecipeError``; :func:`main` turns them into exit 2.
    """
    from hyper_parallel.config.manager import ConfigManager, is_recipe_command_line
    from hyper_parallel.trainer.config import HyperTrainerConfig
    from hyper_parallel.trainer.config import parse_args as parse_legacy

    args = list(args)
    if is_recipe_command_line(args):
        from hyper_parallel.trainer.hyper_trainer import HyperTrainer

        # A recipe must return the config this entry point builds and trains.
        return ConfigManager(root_type=HyperTrainer.Config).parse_args(args).build()
    from hyper_parallel.models.spec import discover_model_spec
    from hyper_parallel.trainer.llm_trainer import LLMTrainer

    legacy = parse_legacy(HyperTrainerConfig, args)
    discover_model_spec(legacy.model.name)
    return LLMTrainer(legacy)


def _train(trainer) -> int:
    """Train; a stop request, a user error and a failure each end the run with its own status.

    A failure skips the process-group teardown in a multi-rank job: the peers may be inside a
    collective this rank will never join, and the exit is what makes theirs fail fast.
    """
    from hyper_parallel.runtime.checkpoint import CheckpointError
    from hyper_parallel.trainer.config import ConfigError
    from hyper_parallel.runtime.faults import (
        FAILED_EXIT_CODE,
        STOPPED_EXIT_CODE,
        TrainingStopped,
        current_rank,
        report_failure,
    )

    try:
        trainer.train()
    except TrainingStopped as stop:
        logging.getLogger(__name__).warning("%s", stop)
        trainer.close()
        return STOPPED_EXIT_CODE
    except (ConfigError, CheckpointError) as exc:
        # Found only once training starts (e.g. the checkpoint to resume from): the same one
        # line as a configuration error before the run, from every rank that finds it.
        print(f"error: rank {current_rank()}: {exc}", file=sys.stderr)
        _close_if_alone(trainer)
        return 2 if isinstance(exc, ConfigError) else FAILED_EXIT_CODE
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # DCP's CheckpointException is a BaseException
        report_failure(exc, step=trainer.state.global_step)
        _close_if_alone(trainer)
        return FAILED_EXIT_CODE
    trainer.close()
    return 0


def _close_if_alone(trainer) -> None:
    if trainer.world_size == 1:
        trainer.close()


if __name__ == "__main__":
    code = main()
    from hyper_parallel.utils.process import exit_now

    exit_now(code)
