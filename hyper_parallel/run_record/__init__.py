"""The record of a run: what ran, written into its checkpoint folder when it starts.

``config.py`` (the resolved configuration as a proven recipe, ``--rerun`` trains it again),
``config.yaml`` (the same in the legacy schema, where it can be said there) and ``run.json``
(versions, launch, environment, input files). The entries write it (``hyper_parallel.train``);
the engine's checkpoints carry the configuration's hash and fields
(:mod:`hyper_parallel.trainer.config_identity`).
"""

from hyper_parallel.run_record.write import (
    CONFIG_PY,
    CONFIG_YAML,
    RUN_JSON,
    RunSource,
    write_run_record,
)

__all__ = ["CONFIG_PY", "CONFIG_YAML", "RUN_JSON", "RunSource", "write_run_record"]
