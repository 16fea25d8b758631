"""``LLMTrainer(args)``: the legacy language-model trainer.

``LLMTrainer(args).train()`` trains the model of ``args.model.name`` on ``args.data`` as
``args.train`` says. The constructor runs the legacy build sequence in its fixed order; the
language-model specific steps (tokenizer, data transform, collate) live here, everything else in
:class:`~hyper_parallel.trainer.base.BaseTrainer` and its helpers.
"""

from __future__ import annotations

import functools

from hyper_parallel.data import collate, load_tokenizer
from hyper_parallel.data.tokenizer import resolve_tokenizer_path
from hyper_parallel.trainer.base import BaseTrainer
from hyper_parallel.trainer.config import HyperTrainerConfig


class LLMTrainer(BaseTrainer):
    """Causal language-model training from a legacy ``HyperTrainerConfig``."""

    def __init__(self, args: HyperTrainerConfig):
        super().__init__(args)
        self._setup()                      # 1  process group, device, mesh, seeds
        self._build_model()                # 2  on init_device (meta: no memory yet)
        self._freeze_model()               # 3
        self._build_model_assets()         # 4  tokenizer
        self._build_data_transform()       # 5
        self._build_dataset()              # 6
        self._build_collate_fn()           # 7
        self._build_dataloader()           # 8
        self._build_parallelized_model()   # 9  TP / AC / FSDP, materialize, init, load weights
        self._build_optimizer()            # 10 (after FSDP: sees the sharded parameters)
        self._build_lr_scheduler()         # 11
        self._build_training_context()     # 12
        self._init_callbacks()             # 13
        self.callbacks.on_init_end()

    def _build_model_assets(self) -> None:
        """The tokenizer, for text datasets (synthetic data needs none)."""
        if self.args.data.type == "dummy":
            self.tokenizer = None
            return
        path = resolve_tokenizer_path(self.args.model.tokenizer_path, self.args.model.weights_path)
        self.tokenizer = load_tokenizer(path)

    def _build_data_transform(self) -> None:
        # Text datasets tokenize and pack documents with self.tokenizer when they are built.
        self.data_transform = self.tokenizer.encode if self.tokenizer is not None else None

    def _build_collate_fn(self) -> None:
        pad_id = self.tokenizer.pad_id if self.tokenizer is not None else 0
        self.collate_fn = functools.partial(collate, pad_id=pad_id)
