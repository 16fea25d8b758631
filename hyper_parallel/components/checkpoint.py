"""``CheckpointManager``: periodic, atomic, resumable checkpoints as a Configurable.

Saving and loading are the helpers in :mod:`hyper_parallel.runtime.checkpoint` (the atomic
``.step_<N>.tmp`` -> ``step_<N>`` rename, the async snapshot), called with the model parts, the
``OptimizersContainer``, the ``LRSchedulersContainer`` and the ``BaseDataLoader``. The cadence is
the legacy trainer's: every ``interval`` steps (never step 0) and once more at the end unless
that step was just saved. ``export_hf`` writes ``step_<N>/hf_ckpt`` (Hugging Face safetensors,
streamed unit by unit in files of at most ``export_hf_max_shard_size``, with the tokenizer files
of the adapter's ``hf_assets_path``, when set) after the saves ``export_hf_policy`` names:
``final``, the default, only the save at the end of training -- the legacy trainer exported
after every save (``every_save``), which for a model of hundreds of billions of parameters
costs every checkpoint minutes of writing and a copy of the model on disk. The export's
tensors are written in ``export_hf_dtype``: ``auto``, the source checkpoint's dtypes
(``weights_source``, read from its headers; the model's without one), or one dtype. A run
resumed at its last step whose checkpoint holds no finished export -- a job that died during
the final export, requeued -- writes it then (:meth:`CheckpointManager.maybe_save`).

``keep_latest_k`` (new; the legacy keeps everything, which is the default 0) deletes older
complete checkpoints after each successful save through
:func:`hyper_parallel.runtime.checkpoint.purge_old_checkpoints`: only *complete* checkpoints count
(a save still in flight never causes a deletion), and each victim is renamed to a hidden
directory before it is removed, so a crash never leaves a half-deleted ``step_<N>``.

Defaults equal the legacy ``train.checkpoint`` section: ``folder`` = ``output_dir``
(``outputs``), ``interval`` = ``save_steps`` (500), ``export_hf`` = ``save_hf_weights`` (true),
``load_path`` (unset), ``async_mode`` ``disabled`` = ``save_async: false``. New:
``export_hf_policy`` (``final``), ``export_hf_max_shard_size`` (transformers' default),
``export_hf_dtype`` (``auto``) and ``resume_latest`` (off; the generated cluster jobs turn it on: a requeued job resumes from its
own newest checkpoint, which wins over ``load_path``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyper_parallel.components._validate import integer_at_least, one_of, require
from hyper_parallel.protocols.configurable import Configurable
from hyper_parallel.utils.choices import (
    ASYNC_MODES,
    HF_EXPORT_DTYPES,
    HF_EXPORT_POLICIES,
    AsyncMode,
    HfExportDtype,
    HfExportPolicy,
)
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.sizes import HF_DEFAULT_MAX_SHARD_SIZE, parse_byte_size

if TYPE_CHECKING:
    from torch import nn

logger = logging.getLogger(__name__)
# How errors name the setting of ``load_path``: the engine's section is ``checkpoint``; the legacy
# YAML's key converts to it (both command lines build the same engine).
LOAD_PATH_FIELD = "checkpoint.load_path"
LEGACY_LOAD_PATH_KEY = "train.checkpoint.load_path"


class CheckpointManager(Configurable):
    """Saves and restores model parts, optimizers, LR schedulers, data position and RNG.

    ``save(step, extra)`` writes ``<folder>/step_<step>`` (collective); ``maybe_save(step,
    extra, last_step=...)`` applies the cadence; ``load()`` resumes from ``load_path`` and
    returns the ``extra`` dict that was saved (``global_step`` included), or None for a fresh
    start; ``close()`` waits for a background save. ``extra`` must be JSON-serialisable
    (the trainers store e.g. ``{"epoch": ...}`` there).
    """

    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        folder: str = "outputs"
        """Directory of the checkpoints: ``<folder>/step_<N>/`` (legacy
        ``train.checkpoint.output_dir``). One file system shared by all ranks."""

        interval: int = 500
        """Save every N optimizer steps and at the end of training; 0 disables saving."""

        export_hf: bool = True
        """Also export Hugging Face safetensors to ``step_<N>/hf_ckpt/`` after the saves
        ``export_hf_policy`` names (needs the model's state-dict adapter and config)."""

        export_hf_policy: HfExportPolicy = "final"
        """Which saves ``export_hf`` exports: ``final``, the one at the end of training (a
        save for a stop signal is not one: its grace period is for the checkpoint the run
        resumes from); ``every_save``, each one (the legacy trainer's behaviour)."""

        export_hf_max_shard_size: str = "50GB"
        """The largest safetensors file of a Hugging Face export, written as transformers'
        ``max_shard_size`` is (``50GB``, ``500MB``, ``2GiB``; the default is ``save_pretrained``'s).
        A bigger export is ``model-0000i-of-0000N.safetensors`` files and
        ``model.safetensors.index.json``; a tensor larger than this gets a file of its own."""

        export_hf_dtype: HfExportDtype = "auto"
        """The dtype the Hugging Face export writes its floating tensors in: ``auto``, each one
        in its dtype in the run's source checkpoint (``model.weights_path``, a Hugging Face
        checkpoint: ``bfloat16`` for the published Qwen3.5 ones), else in the model's (what it
        trains in: ``float32``); or ``float32``, ``bfloat16``, ``float16`` for all of them."""

        load_path: str | None = None
        """Resume from a ``step_<N>`` directory, from the newest complete checkpoint under a
        directory holding them, or ``latest``: the newest complete checkpoint under ``folder``
        (a fresh start, with a warning, when there is none). Unset: start fresh."""

        resume_latest: bool = False
        """Resume from the newest complete checkpoint under ``folder`` when it holds one, so a
        requeued or restarted job continues where it stopped without an edit; ``load_path``
        then applies only when ``folder`` holds none, and with neither the run starts fresh.
        The jobs ``python -m hyper_parallel.launch`` writes turn it on."""

        async_mode: AsyncMode = "disabled"
        """``async``: periodic saves snapshot the state and write it in a background thread
        (the final save is synchronous); ``disabled``: every save blocks."""

        keep_latest_k: int = 0
        """Keep only the newest K complete checkpoints, deleting older ones after each
        successful save; 0 keeps all."""

        def __post_init__(self) -> None:
            require(
                isinstance(self.folder, str) and self.folder != "",
                self,
                "folder",
                "must be a non-empty directory path",
            )
            integer_at_least(self, "interval", 0)
            require(isinstance(self.export_hf, bool), self, "export_hf", "must be true or false")
            one_of(self, "export_hf_policy", HF_EXPORT_POLICIES)
            require(isinstance(self.export_hf_max_shard_size, str), self,
                    "export_hf_max_shard_size", "must be a size such as '50GB'")
            try:
                parse_byte_size(self.export_hf_max_shard_size)
            except ValueError as exc:
                require(False, self, "export_hf_max_shard_size", str(exc))
            one_of(self, "export_hf_dtype", HF_EXPORT_DTYPES)
            # Nothing accepted is ignored: these only act on an export.
            for name, default in (("export_hf_policy", "final"),
                                  ("export_hf_max_shard_size", HF_DEFAULT_MAX_SHARD_SIZE),
                                  ("export_hf_dtype", "auto")):
                require(
                    self.export_hf or getattr(self, name) == default,
                    self,
                    name,
                    f"has no effect while export_hf is false; set export_hf to true, or leave "
                    f"{name} at {default!r}",
                )
            require(
                self.load_path is None or (isinstance(self.load_path, str) and self.load_path != ""),
                self,
                "load_path",
                "must be a checkpoint path, 'latest', or unset",
            )
            require(isinstance(self.resume_latest, bool), self, "resume_latest",
                    "must be true or false")
            one_of(self, "async_mode", ASYNC_MODES)
            integer_at_least(self, "keep_latest_k", 0)

    def __init__(
        self,
        config: Config,
        *,
        model_parts: Sequence[nn.Module],
        optimizers: Any | None = None,
        lr_schedulers: Any | None = None,
        dataloader: Any | None = None,
        sd_adapter: Any | None = None,
        model_config: Any | None = None,
        pipeline_group: Any | None = None,
        data_rank: tuple[int, int] | None = None,
        weights_source: str | None = None,
    ) -> None:
        """
        Args:
            model_parts: the model (a list of parts; a single module is accepted).
            optimizers, lr_schedulers, dataloader: saved and restored when given (anything
                with ``state_dict`` / ``load_state_dict``; the optimizers in DCP form).
            sd_adapter, model_config: the model's state-dict adapter (``to_hf``) and config,
                required by ``export_hf``.
            pipeline_group: the pipeline-parallel ranks, when each holds some stages of the
                model; the Hugging Face export gathers the whole model over them.
            data_rank: ``(rank, size)`` of this process in the data-parallel group. Saved with
                every checkpoint (the data-parallel rank of each process), it lets a run on
                another layout with the same data-parallel size -- another pipeline or tensor
                degree -- resume each rank's data position from a rank that read the same data.
                Collective when given (the ranks exchange theirs once).
            weights_source: the checkpoint the run's weights came from (``model.weights_path``):
                a Hugging Face export carries its tensors the model does not hold (the MTP
                head; the vision tower of a text-only run) unchanged, so the export is as whole
                as its source (:mod:`hyper_parallel.runtime.checkpoint.carried`).
        """
        # The runtime (torch, DCP) is imported here, where the manager is built: the Config
        # above is configuration and must import without it.
        from torch import nn

        from hyper_parallel.runtime import checkpoint

        self._ckpt = checkpoint
        self.config = config
        self.model_parts = (
            [model_parts] if isinstance(model_parts, nn.Module) else list(model_parts)
        )
        self.optimizers = optimizers
        self.lr_schedulers = lr_schedulers
        self.dataloader = dataloader
        self.sd_adapter = sd_adapter
        self.model_config = model_config
        self.pipeline_group = pipeline_group
        self.data_rank = data_rank
        self.weights_source = weights_source
        self._data_ranks = None if data_rank is None else _all_data_ranks(data_rank[0])
        if config.export_hf and (sd_adapter is None or model_config is None):
            # A trainer passes its model spec's state_dict_adapter: a spec without one is a
            # configuration the user fixes, so the error names the recipe field.
            missing = "sd_adapter" if sd_adapter is None else "model_config"
            raise ConfigError(
                f"True, but no {missing} was given to build() to write Hugging Face weights "
                "with (a trainer passes its model spec's state_dict_adapter and model config); "
                "use a model spec with a state_dict_adapter, or set it to False",
                path="checkpoint.export_hf",
            )
        self.last_saved_step: int | None = None
        self.loaded_from: str | None = None
        self.saved: list[str] = []
        self.exported: list[str] = []
        self.deleted: list[str] = []

    @property
    def _model(self):
        # One part is passed as the module itself, which keeps the legacy checkpoint layout.
        return self.model_parts[0] if len(self.model_parts) == 1 else self.model_parts

    # ------------------------------------------------------------------ load

    def load(self, before_load: Callable[[dict[str, Any], str], None] | None = None
             ) -> dict[str, Any] | None:
        """Resume (collective) from the newest checkpoint under ``folder`` with
        ``resume_latest``, else from ``load_path``; the saved ``extra`` dict, or None.
        ``before_load(extra, path)`` is called with the checkpoint's ``extra`` before any state
        is read (it may refuse the checkpoint by raising).

        A missing, interrupted or incomplete path is an error, never a silent fresh start
        (except ``latest`` with nothing saved yet). A damaged checkpoint (a truncated or
        unreadable shard, ``.metadata``, ``extra_state.json`` or per-rank ``.pt`` file) is a
        ``CheckpointError`` on every rank naming the directory, the file and the newest earlier
        complete checkpoint to set ``load_path`` to instead.
        """
        fields = {"field": LOAD_PATH_FIELD, "legacy_field": LEGACY_LOAD_PATH_KEY}
        path = self._newest_of_folder() if self.config.resume_latest else None
        if path is None:
            path = self._ckpt.resolve_resume_path(self.config.load_path, self.config.folder,
                                                  **fields)
        if path is None:
            return None
        if before_load is not None:
            before_load(self._ckpt.read_extra_state(path, **fields), path)
        extra = self._ckpt.load_checkpoint(
            path,
            model=self._model,
            optimizer=self.optimizers,
            lr_scheduler=self.lr_schedulers,
            dataloader=self.dataloader,
            data_rank=self.data_rank,
            **fields,
        )
        self.last_saved_step = int(extra["global_step"])
        self.loaded_from = path
        return extra

    def _newest_of_folder(self) -> str | None:
        """``resume_latest``: the newest complete checkpoint under ``folder`` (collective), and
        the rule that picked the run's source in the log."""
        folder = self.config.folder
        newest = self._ckpt.newest_agreed(folder)
        if newest is not None:
            then = f"resuming from {newest}"
        elif self.config.load_path:
            then = f"{folder} holds no complete checkpoint, so loading {self.config.load_path}"
        else:
            then = f"{folder} holds no complete checkpoint, so starting fresh"
        logger.info("Checkpoint source: %s (%s).", then, self._ckpt.RESUME_RULE)
        return newest

    # ------------------------------------------------------------------ save

    def save(self, step: int, extra: dict[str, Any] | None = None, *,
             async_save: bool | None = None, export_hf: bool | None = None) -> str:
        """Save ``step`` now (collective), export HF weights and purge old checkpoints as
        configured; returns the checkpoint directory. ``async_save`` overrides ``async_mode``;
        ``export_hf`` (when ``checkpoint.export_hf`` is on) overrides ``export_hf_policy``
        (``every_save`` exports every save, ``final`` only the one :meth:`maybe_save` makes at
        the end of training)."""
        if async_save is None:
            async_save = self.config.async_mode == "async"
        if export_hf is None:
            export_hf = self.config.export_hf_policy == "every_save"
        if self._data_ranks is not None:
            extra = {**(extra or {}), self._ckpt.DATA_RANKS_KEY: {
                "size": self.data_rank[1], "ranks": self._data_ranks,
            }}
        path = self._ckpt.save_checkpoint(
            self.config.folder,
            step,
            model=self._model,
            optimizer=self.optimizers,
            lr_scheduler=self.lr_schedulers,
            dataloader=self.dataloader,
            extra=extra,
            async_save=async_save,
        )
        self.last_saved_step = step
        self.saved.append(path)
        if self.config.export_hf and export_hf:
            self._export(path)
        self._purge()
        return path

    def _export(self, path: str) -> None:
        """The Hugging Face export of the checkpoint ``path`` saved from the live model
        (collective; streamed, see :mod:`hyper_parallel.runtime.checkpoint.hf_export`)."""
        target = os.path.join(path, self._ckpt.HF_SUBDIR)
        carry = self._ckpt.carried_weights(self.weights_source, self.sd_adapter, self.model_config)
        self._ckpt.export_hf_weights(
            self._model, self.sd_adapter, self.model_config, target,
            pipeline_group=self.pipeline_group,
            max_shard_size=self.config.export_hf_max_shard_size,
            carry=carry,
            dtypes=self._export_dtypes(),
        )
        self.exported.append(target)

    def _export_dtypes(self):
        """``export_hf_dtype`` as the export's :class:`~hyper_parallel.runtime.checkpoint.hf_plan.DtypeRule`
        (``auto``: the source checkpoint's dtypes, read from its headers, when it is a Hugging
        Face checkpoint)."""
        from hyper_parallel.runtime.checkpoint.carried import source_dtypes
        from hyper_parallel.runtime.checkpoint.hf_plan import DtypeRule

        asked = self.config.export_hf_dtype
        if asked != "auto":
            return DtypeRule(cast=_DTYPE_CODES[asked])
        return DtypeRule(source=source_dtypes(self.weights_source))

    def should_save(self, step: int, *, last_step: bool = False) -> bool:
        """The legacy cadence: every ``interval`` steps and at the last step, never step 0,
        never a step that was just saved or loaded; ``interval`` 0 never saves."""
        interval = self.config.interval
        if interval <= 0 or step <= 0 or step == self.last_saved_step:
            return False
        return last_step or step % interval == 0

    def maybe_save(
        self, step: int, extra: dict[str, Any] | None = None, *, last_step: bool = False,
        end_of_training: bool = False,
    ) -> str | None:
        """``save`` when :meth:`should_save` says so (the last save is synchronous); returns
        the new checkpoint's directory, or None.

        ``end_of_training`` (the training loop's end, which implies ``last_step``; not a stop
        request's save) is where ``export_hf_policy: final`` exports: the checkpoint saved now,
        or the one the cadence saved at this very step already (from the live model, which is
        still that step's). It is also where the final export is made up for: a run resumed
        at its last step (a requeued job whose first attempt crashed during the export, or
        stopped at that step) exports that checkpoint unless it holds a finished export
        (:func:`~hyper_parallel.runtime.checkpoint.hf_export.export_complete`), under
        either policy."""
        last_step = last_step or end_of_training
        final_export = end_of_training and self.config.export_hf_policy == "final"
        if self.should_save(step, last_step=last_step):
            return self.save(step, extra, async_save=False if last_step else None,
                             export_hf=True if final_export else None)
        if end_of_training and self.config.export_hf and self._export_due(step):
            self._export(self._ckpt.step_dir(self.config.folder, step))
        return None

    def _export_due(self, step: int) -> bool:
        """The checkpoint of ``step`` under ``folder`` holds the live model -- this run saved
        it, or resumed from it -- and lacks its final export: this run did not export it, and
        (a resumed one) it holds no finished export, as rank 0 reads the folder (collective
        then: every rank takes rank 0's answer)."""
        path = self._ckpt.step_dir(self.config.folder, step)
        target = os.path.join(path, self._ckpt.HF_SUBDIR)
        if self.last_saved_step != step or target in self.exported:
            return False
        if self.saved and self.saved[-1] == path:
            return True  # saved by the cadence at this very step (the policy did not export)
        if self.loaded_from is None or os.path.normpath(self.loaded_from) != os.path.normpath(path):
            return False  # another run's checkpoint (load_path): its folder is not ours
        missing = _on_rank0(lambda: not self._ckpt.hf_export.export_complete(target))
        if missing:
            logger.warning(
                "Resumed at the last step from %s, which holds no finished Hugging Face export "
                "(%s; the run that saved it stopped during or before the export): exporting "
                "it now.", path, "damaged" if os.path.exists(target) else "missing")
        return missing

    def _purge(self) -> None:
        if self.config.keep_latest_k > 0:
            self.deleted += self._ckpt.purge_old_checkpoints(
                self.config.folder, self.config.keep_latest_k
            )

    def wait(self) -> None:
        """Wait for a background save (re-raising its error), then purge old checkpoints."""
        self._ckpt.wait_async_save()
        self._purge()

    close = wait



#: ``export_hf_dtype`` -> the safetensors dtype code of the files.
_DTYPE_CODES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


def _on_rank0(read: Callable[[], bool]) -> bool:
    """``read()`` on rank 0, its answer on every rank (the ranks may see a shared folder
    differently: they must agree on whether to enter a collective)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return read()
    answer = [read() if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(answer, src=0)
    return bool(answer[0])


def _all_data_ranks(data_rank: int) -> list[int]:
    """The data-parallel rank of every process, by global rank (one all-gather)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return [data_rank]
    ranks: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, data_rank)
    return [int(r) for r in ranks]


__all__ = ["CheckpointManager"]
