"""Atomic, resharding-friendly training checkpoints (shared by both trainers).

One checkpoint is the directory ``<output_dir>/step_<N>/``::

    .metadata, __<r>_<k>.distcp   model + optimizer, torch.distributed.checkpoint (DCP) of
                                  {"model": ..., "optimizer": ...} from ``get_state_dict`` (FQN keys,
                                  DTensor shards for FSDP2/TP, so a different mesh can load it)
    scheduler.pt                  rank 0: ``lr_scheduler.state_dict()``
    extra_state.json              rank 0: format_version, global_step, world_size + caller's ``extra``
                                  (the trainers put ``epoch`` there)
    rng_rank{r}.pt                every rank: python / numpy / torch CPU / CUDA (or NPU) RNG states
    dataloader_rank{r}.pt         every rank: ``StatefulDataLoader.state_dict()``
    hf_ckpt/                      optional, written by :func:`export_hf_weights` after the save
                                  (model.safetensors, or model-0000i-of-0000N.safetensors and
                                  model.safetensors.index.json; config.json)

One module per concept; callers use the names exported here (``from hyper_parallel.runtime
import checkpoint as ckpt``; ``ckpt.save_checkpoint(...)``):

* :mod:`.layout`       the folder and file names; finding complete checkpoints
* :mod:`.atomic`       durable writes and the rename that publishes a step (atomicity)
* :mod:`.dcp_io`       model + optimizer state through DCP (model parts, optimizer containers)
* :mod:`.extra_state`  RNG states and the data loader's position
* :mod:`.async_writer` background saves, at most one in flight
* :mod:`.save`         :func:`save_checkpoint` (and the ``kill_during_save`` test hook)
* :mod:`.integrity`    damaged checkpoints: which file, and which earlier step to load
* :mod:`.load`         :func:`load_checkpoint`
* :mod:`.resume`       :func:`resolve_resume_path` (the ``load_path`` setting), :func:`newest_agreed`
                       (``resume_latest``) and :data:`RESUME_RULE`
* :mod:`.retention`    :func:`purge_old_checkpoints` (``keep_latest_k``)
* :mod:`.carried`      :func:`carried_weights` (the source checkpoint's tensors the model does not
                       hold -- the MTP head, a text-only run's vision tower -- for the export)
* :mod:`.hf_export`    :func:`export_hf_weights` (Hugging Face safetensors, streamed unit by unit;
                       its file plan in :mod:`.hf_plan`, its file writer in
                       :mod:`.safetensors_stream`)
* :mod:`.errors`       :class:`CheckpointError` and the wording of its messages

``optimizer`` may be a torch optimizer or an optimizer container, ``lr_scheduler`` and
``dataloader`` only need ``state_dict()`` / ``load_state_dict()``. Everything works in a single
process without an initialized process group as well.
"""

from hyper_parallel.runtime.fault_injection import FAULT_INJECT_ENV
from hyper_parallel.runtime.fault_injection import SAVE_KILL_EXIT_CODE as FAULT_EXIT_CODE

from .async_writer import async_save_in_flight, wait_async_save
from .carried import carried_weights
from .errors import LEGACY_LOAD_PATH_FIELD, LOAD_PATH_FIELD, CheckpointError
from .extra_state import get_rng_state, set_rng_state
from .hf_export import HF_TOKENIZER_ASSETS, export_hf_weights, require_hf_assets_dir
from .integrity import read_extra_state
from .layout import (
    DCP_METADATA_FILE,
    EXTRA_STATE_FILE,
    FORMAT_VERSION,
    HF_SUBDIR,
    SCHEDULER_FILE,
    STEP_PREFIX,
    complete_checkpoints,
    dataloader_file,
    is_complete_checkpoint,
    latest_checkpoint,
    rng_file,
    step_dir,
)
from .load import DATA_RANKS_KEY, load_checkpoint
from .resume import RESUME_RULE, newest_agreed, resolve_resume_path
from .retention import purge_old_checkpoints
from .save import save_checkpoint

__all__ = [
    "DATA_RANKS_KEY",
    "RESUME_RULE",
    "DCP_METADATA_FILE",
    "EXTRA_STATE_FILE",
    "FAULT_EXIT_CODE",
    "FAULT_INJECT_ENV",
    "FORMAT_VERSION",
    "HF_SUBDIR",
    "HF_TOKENIZER_ASSETS",
    "LEGACY_LOAD_PATH_FIELD",
    "LOAD_PATH_FIELD",
    "SCHEDULER_FILE",
    "STEP_PREFIX",
    "CheckpointError",
    "async_save_in_flight",
    "complete_checkpoints",
    "dataloader_file",
    "carried_weights",
    "export_hf_weights",
    "get_rng_state",
    "is_complete_checkpoint",
    "latest_checkpoint",
    "load_checkpoint",
    "purge_old_checkpoints",
    "newest_agreed",
    "read_extra_state",
    "require_hf_assets_dir",
    "resolve_resume_path",
    "rng_file",
    "save_checkpoint",
    "set_rng_state",
    "step_dir",
    "wait_async_save",
]
