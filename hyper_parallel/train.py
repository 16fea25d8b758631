"""Train from either configuration world.

    torchrun --nproc_per_node N -m hyper_parallel.train --module M --config F [--a.b=c ...]
    torchrun --nproc_per_node N -m hyper_parallel.train old.yaml [--a.b.c=value ...]
    torchrun --nproc_per_node N -m hyper_parallel.train --rerun RUN_DIR [--a.b=c ...]

``--module``/``--config`` picks a recipe (``HyperTrainer.Config``) and trains it with
``HyperTrainer``; a YAML path is the legacy command line and trains with ``LLMTrainer(args)``
exactly as before (the legacy path stays the default for YAML files). ``--rerun RUN_DIR``
trains the run recorded in ``RUN_DIR`` again (``--module RUN_DIR/config.py --config run``).

Either way rank 0 writes the run's record into its checkpoint folder before the first step
(:mod:`hyper_parallel.run_record`).
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
        source = parse_run(args)
        trainer = build(source)
    except (ConfigError, RecipeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - any failure to build exits the same way
        # A rank that cannot build (a file it cannot write, a device it cannot use) says why
        # once and leaves at once: its peers then fail in their next collective, not after
        # the timeout.
        from hyper_parallel.runtime.faults import FAILED_EXIT_CODE, report_failure

        report_failure(exc)
        return FAILED_EXIT_CODE
    if trainer.is_rank0:
        from hyper_parallel.run_record import write_run_record
        from hyper_parallel.runtime.faults import FAILED_EXIT_CODE, report_failure

        try:
            write_run_record(source, trainer)
        except Exception as exc:  # noqa: BLE001 - a folder it cannot write (a full disk): stop
            report_failure(exc)
            return FAILED_EXIT_CODE
    try:
        return _train(trainer)
    finally:
        _flush_wandb()


#: ``--rerun RUN_DIR``: the record's recipe file and function.
RERUN = "--rerun"


def build_trainer(args: Sequence[str]):
    """The trainer either command line describes: ``--module M --config F [--a.b=c ...]`` a
    ``HyperTrainer`` built from the recipe, a YAML path ``LLMTrainer(parse_args(...))``.

    Bad input raises ``ConfigError`` / ``RecipeError``; :func:`main` turns them into exit 2.
    """
    return build(parse_run(args))


def parse_run(args: Sequence[str]):
    """The command line parsed (nothing built): a
    :class:`~hyper_parallel.run_record.RunSource`."""
    import copy

    from hyper_parallel.config.manager import ConfigManager, is_recipe_command_line
    from hyper_parallel.run_record import CONFIG_PY, RunSource
    from hyper_parallel.trainer.config import HyperTrainerConfig
    from hyper_parallel.trainer.config import parse_args as parse_legacy

    given = list(args)
    args, record = _expand_rerun(given, CONFIG_PY)
    if is_recipe_command_line(args):
        from hyper_parallel.codegen.migration.config_recipe import Flag
        from hyper_parallel.config.manager import extract_module_and_config
        from hyper_parallel.trainer.hyper_trainer import HyperTrainer

        manager = ConfigManager(root_type=HyperTrainer.Config)
        # A recipe must return the config this entry point builds and trains.
        config = manager.parse_args(args)
        module, name, _ = extract_module_and_config(args)
        flags = [Flag(flag, (flag[2:].split("=", 1)[0],)) for flag in manager.overrides]
        spec = config.model_spec
        snapshot = copy.deepcopy(config, {id(spec): spec} if spec is not None else None)
        recipe_flavor = (manager.recipe_config.model.config_overrides or {}).get("flavor")
        return RunSource(snapshot, given, f"recipe {module} --config {name}", flags, record,
                         flavors=[recipe_flavor] if recipe_flavor else [], built=config)
    from hyper_parallel.models.spec import discover_model_spec

    legacy = parse_legacy(HyperTrainerConfig, args)
    discover_model_spec(legacy.model.name)
    return RunSource(_converted(legacy, args), given, f"YAML {args[0]}",
                     _legacy_flags(args[1:]), record, built=legacy)


def _converted(legacy, args: Sequence[str]):
    """``legacy`` (read from the YAML and overrides of ``args``) as a ``HyperTrainer.Config``;
    a key it refuses is located at its line or override, as ``--from-yaml`` locates it."""
    from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
    from hyper_parallel.trainer.config import ConfigError

    try:
        return legacy_to_trainer_config(legacy)
    except ConfigError as exc:
        found = in_entry_terms(exc, args)
        if found is exc:
            raise
        raise found from None


def in_entry_terms(exc: Exception, args: Sequence[str]) -> Exception:
    """A configuration error of the run ``args`` describes (:func:`parse_run`'s command line),
    in the entry's own terms: a legacy YAML's problems in its keys, each at its ``file:line``
    or override, as ``--from-yaml`` names them; a recipe's, and an error that names a tool's
    own option (``--nodes``), as they are."""
    from hyper_parallel.trainer.config import ConfigError

    if (not isinstance(exc, ConfigError) or not args or args[0].startswith("-")
            or (exc.path or "").startswith("-")):
        return exc
    from pathlib import Path

    from hyper_parallel.codegen.migration.yaml_source import located_in_file

    return located_in_file(exc, Path(args[0]), list(args[1:]))


def build(source):
    """The trainer of a parsed command line (:func:`parse_run`)."""
    from hyper_parallel.trainer.config import HyperTrainerConfig

    if isinstance(source.built, HyperTrainerConfig):
        from hyper_parallel.trainer.llm_trainer import LLMTrainer

        return LLMTrainer(source.built)
    return source.built.build()


def _expand_rerun(args: list[str], config_file: str):
    """``--rerun RUN_DIR [overrides]`` as ``--module RUN_DIR/config.py --config run
    [overrides]``, and the record's file (None without ``--rerun``)."""
    from pathlib import Path

    from hyper_parallel.codegen.migration.config_recipe import RECORD_RECIPE
    from hyper_parallel.config.recipes import RecipeError

    if not args or not (args[0] == RERUN or args[0].startswith(RERUN + "=")):
        return args, None
    if "=" in args[0]:
        folder, rest = args[0].split("=", 1)[1], args[1:]
    elif len(args) > 1 and not args[1].startswith("--"):
        folder, rest = args[1], args[2:]
    else:
        raise RecipeError(f"{RERUN} needs the folder of a recorded run (its checkpoint folder)")
    record = Path(folder) / config_file
    if not record.is_file():
        raise RecipeError(f"{RERUN} {folder}: no {config_file} there; a run's record is written "
                          "into its checkpoint folder when it starts")
    return ["--module", str(record), "--config", RECORD_RECIPE, *rest], record


def _legacy_flags(tokens: list[str]) -> list:
    """The legacy overrides, one ``Flag`` each
    (:mod:`hyper_parallel.codegen.migration.config_recipe`): ``--a.b=c`` (or ``--a.b c``) with
    the recipe fields of the table rows that own ``a.b``."""
    from hyper_parallel.codegen.migration.config_recipe import Flag
    from hyper_parallel.config.legacy_adapter import FIELD_MAP

    flags, i = [], 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("--"):
            continue
        if "=" not in token and i < len(tokens) and not tokens[i].startswith("--"):
            token, i = f"{token}={tokens[i]}", i + 1
        key = token[2:].split("=", 1)[0]
        fields = tuple(new for row in FIELD_MAP for legacy in row.legacy
                       if key == legacy or key.startswith(legacy + ".") for new in row.new)
        flags.append(Flag(token, fields))
    return flags


def _train(trainer) -> int:
    """Train; a stop request, a user error and a failure each end the run with its own status.

    A failure skips the process-group teardown in a multi-rank job: the peers may be inside a
    collective this rank will never join, and the exit is what makes theirs fail fast.
    """
    from hyper_parallel.runtime.checkpoint import CheckpointError
    from hyper_parallel.runtime.faults import (
        FAILED_EXIT_CODE,
        STOPPED_EXIT_CODE,
        TrainingStopped,
        current_rank,
        report_failure,
    )
    from hyper_parallel.trainer.config import ConfigError

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
        _finish_metrics(trainer)
        _close_if_alone(trainer)
        return 2 if isinstance(exc, ConfigError) else FAILED_EXIT_CODE
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - DCP's CheckpointException is a BaseException
        report_failure(exc, step=trainer.state.global_step)
        _finish_metrics(trainer)
        _close_if_alone(trainer)
        return FAILED_EXIT_CODE
    trainer.close()
    return 0


def _finish_metrics(trainer) -> None:
    """A failed run still closes its metrics (files flushed, the W&B run finished as failed):
    the entry's exit skips the interpreter's own clean-up."""
    metrics = getattr(trainer, "metrics", None)
    if metrics is None:
        return
    try:
        metrics.close(exit_code=1)
    except Exception:  # the failure already reported is the one that matters
        logging.getLogger(__name__).warning("closing the metrics failed", exc_info=True)


def _flush_wandb() -> None:
    """Wait until W&B has written (offline) or uploaded what the run logged: its service, a
    process of its own, finishes a run after ``finish()`` returns, and the entry's exit skips
    W&B's exit hook. Nothing to do when W&B was never imported."""
    wandb = sys.modules.get("wandb")
    if wandb is None or not hasattr(wandb, "teardown"):
        return
    try:
        wandb.teardown()
    except Exception:  # the run's own outcome is what the exit status reports
        logging.getLogger(__name__).warning("W&B did not shut down cleanly", exc_info=True)


def _close_if_alone(trainer) -> None:
    if trainer.world_size == 1:
        trainer.close()


if __name__ == "__main__":
    code = main()
    from hyper_parallel.utils.process import exit_now

    exit_now(code)
