"""HFExportCallback: HF safetensors next to every checkpoint (``train.checkpoint.save_hf_weights``).

Runs on ``on_save(dir)``, i.e. exactly at the checkpoint cadence and for the final save, after the
checkpoint directory was atomically renamed into place (for an async save rank 0 waits for the
rename first). The export goes to ``<dir>/hf_ckpt/`` through its own temporary directory + rename
(:func:`hyper_parallel.trainer.checkpoint.export_hf_weights`), so neither the checkpoint nor the HF
folder is ever seen half-written. Needs ``trainer.spec.state_dict_adapter`` and
``trainer.model_config`` (checked at ``on_init_end``, before hours of training, and at each export).
"""

from __future__ import annotations

import os

from .. import checkpoint as ckpt
from .base import Callback


class HFExportCallback(Callback):
    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        self.enabled = bool(self.train_section("checkpoint").save_hf_weights)
        self.exported: list[str] = []

    def _requirements(self):
        t = self.trainer
        spec = getattr(t, "spec", None)
        adapter = getattr(spec, "state_dict_adapter", None) if spec is not None else None
        if adapter is None:
            raise ValueError(
                "train.checkpoint.save_hf_weights is true but the model spec has no state_dict_adapter; "
                "set train.checkpoint.save_hf_weights: false"
            )
        if getattr(t, "model_config", None) is None:
            raise ValueError(
                "train.checkpoint.save_hf_weights is true but trainer.model_config is not set"
            )
        return adapter, t.model_config

    def on_init_end(self) -> None:
        if self.enabled:
            self._requirements()

    def on_save(self, checkpoint_dir: str) -> None:
        if not self.enabled:
            return
        target = os.path.join(checkpoint_dir, ckpt.HF_SUBDIR)
        if target in self.exported:
            return
        adapter, config = self._requirements()
        ckpt.export_hf_weights(self.trainer.model, adapter, config, target)
        self.exported.append(target)
