"""Writing a run's record into its checkpoint folder, once, by rank 0, when the run starts.

* ``config.py`` -- the resolved configuration as a recipe module, written and proven by the code
  generator (:func:`hyper_parallel.codegen.migration.config_recipe.render_config_recipe`); a run
  started from a record with nothing added on the command line records that very text again.
* ``config.yaml`` -- the configuration in the legacy schema (``--to-yaml``'s rules, read back
  and compared before it is written), when the legacy schema can express it; otherwise
  ``run.json`` says which fields cannot be (and a ``config.yaml`` of an earlier run is removed).
* ``run.json`` -- the rest of what fixes the result (:mod:`.facts`), the configuration's hash
  (the one each checkpoint carries) and what was written.

Every file is written atomically with the umask's mode. A record the generator cannot prove is
not written; the run goes on and says so (the record describes a run, it never stops one).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyper_parallel.run_record import facts

logger = logging.getLogger(__name__)

CONFIG_PY = "config.py"
CONFIG_YAML = "config.yaml"
RUN_JSON = "run.json"
#: The repository that holds the generator's templates (an editable install's checkout).
REPO = Path(__file__).resolve().parents[2]


@dataclass
class RunSource:
    """Where a run's configuration came from, as the entry parsed it."""

    config: Any
    """The ``HyperTrainer.Config`` before the engine resolved anything (a private copy)."""
    argv: list[str]
    """The command line after ``hyper_parallel.train``, as given."""
    origin: str
    """``recipe M.F`` or ``YAML path``: what the command line named."""
    flags: list[Any] = field(default_factory=list)
    """The command-line overrides
    (:class:`~hyper_parallel.codegen.migration.config_recipe.Flag`)."""
    record: Path | None = None
    """The ``config.py`` of the record the run was started from (``--rerun``), if any."""
    flavors: list[str] = field(default_factory=list)
    """The flavor of the recipe before the command line changed it (a baseline to try)."""
    built: Any = None
    """What the entry builds the trainer from: the parsed ``HyperTrainer.Config`` (the engine
    resolves it in place, hence :attr:`config`'s copy) or the legacy ``HyperTrainerConfig``."""


def write_run_record(source: RunSource, trainer: Any) -> Path:
    """Write the record of ``trainer``'s run (see the module docstring); returns its folder."""
    from hyper_parallel.codegen.rendering.writing import atomic_write
    from hyper_parallel.trainer.config_identity import config_hash

    folder = Path(trainer.config.checkpoint.folder)
    run: dict[str, Any] = {
        "config_sha256": config_hash(trainer.run_configuration),
        "origin": source.origin,
        **facts.versions(),
        "world_size": trainer.world_size,
        "mesh": _mesh(trainer),
        "launch": facts.launch(source.argv, trainer.world_size),
        "seed": trainer.config.debug.seed,
        "deterministic": trainer.config.debug.deterministic,
        "input_files": facts.input_files(source.config),
        "hash_limit_bytes": facts.HASH_LIMIT_BYTES,
        "hash_budget_bytes": facts.HASH_BUDGET_BYTES,
    }
    run["recipe"] = _write_recipe(source, folder, run["launch"]["command"], atomic_write)
    run["legacy_yaml"] = _write_yaml(source, folder, atomic_write)
    atomic_write(folder / RUN_JSON, json.dumps(run, indent=1) + "\n")
    logger.info("run record: %s (%s, %s, %s)", folder, CONFIG_PY, CONFIG_YAML, RUN_JSON)
    return folder


def _mesh(trainer: Any) -> dict[str, int]:
    dims = trainer.parallel_dims
    return {name: int(getattr(dims, name)) for name in
            ("dp_replicate", "dp_shard", "cp", "tp", "pp", "ep")}


def _write_recipe(source: RunSource, folder: Path, command: str, write: Any) -> dict[str, Any]:
    from hyper_parallel.codegen.errors import CodegenError
    from hyper_parallel.codegen.migration.config_recipe import (
        RECORD_RECIPE,
        prove,
        render_config_recipe,
    )
    from hyper_parallel.codegen.migration.recipe.render import fill

    rerun = f"torchrun --nproc_per_node N -m hyper_parallel.train --rerun {folder}"
    try:
        if source.record is not None and not source.flags:
            # Started from a record, nothing added: the same configuration, the same text.
            text = source.record.read_text(encoding="utf-8")
            prove(text, source.config, str(source.record))
        else:
            title = (f"Run record: the configuration of the run in {folder}, written when it "
                     f"started.\n\nRerun it with\n\n    {rerun}")
            about = (f"The run ({source.origin}) was started by\n\n    {command}\n\n"
                     + fill(f"Before writing, the trainer executed this module and checked that "
                            f"``{RECORD_RECIPE}()`` builds that configuration exactly; "
                            f"{RUN_JSON} beside it holds the versions, the launch and the "
                            "input files."))
            text = render_config_recipe(source.config, repo=REPO, title=title, about=about,
                                        flags=source.flags, flavors=source.flavors).text
    except CodegenError as exc:
        logger.error("run record: %s not written: %s", CONFIG_PY, exc)
        return {"file": None, "reason": str(exc)}
    write(folder / CONFIG_PY, text)
    return {"file": CONFIG_PY, "function": RECORD_RECIPE}


def _write_yaml(source: RunSource, folder: Path, write: Any) -> dict[str, Any]:
    from hyper_parallel.codegen.errors import CodegenError
    from hyper_parallel.codegen.migration.to_yaml import config_yaml

    header = f"# Legacy YAML of the run in {folder}, recorded when it started.\n"
    try:
        text = config_yaml(source.config, f"the run in {folder}", header)
    except CodegenError as exc:
        # A file of an earlier run in the same folder would describe another configuration.
        (folder / CONFIG_YAML).unlink(missing_ok=True)
        return {"file": None, "reason": str(exc)}
    write(folder / CONFIG_YAML, text)
    return {"file": CONFIG_YAML}


__all__ = ["CONFIG_PY", "CONFIG_YAML", "RUN_JSON", "RunSource", "write_run_record"]
