"""Qwen3.5 on the new protocol: ``Qwen3_5Model`` (a ``BaseModel``) and its ``Config``.

One implementation. ``Qwen3_5Model`` *is* the legacy ``Qwen3_5ForCausalLM`` (it subclasses it and
builds its submodules through the legacy ``_init_modules`` hook), so the module classes, the
forward pass, ``init_weights``, ``tie_weights`` and every parameter / buffer / state-dict name are
the legacy ones; the TP plan, the HF state-dict adapter and DCP checkpoints apply unchanged.

What the protocol adds:

* ``Qwen3_5Model.Config`` -- :class:`~.model_config.Qwen3_5ModelConfig`, a ``BaseModel.Config``
  that *is* a :class:`Qwen3_5Config` (every architecture field written once, in
  ``configuration.py``), with ``update_from_config`` and ``replace``. It is declared in
  the framework-free ``model_config.py`` (with :func:`flavor_config`,
  :func:`config_from_model_section` and :func:`tp_divisibility_problems`, re-exported here), so
  recipes and the spec registry hold it without importing torch; this class adopts it.
* ``verify_module_protocol()`` -- ``BaseModel``'s, with a memory-safe default: the ``init_weights``
  check runs on a full copy only for small models, on a miniature of the architecture otherwise.
* ``num_flops_per_token`` -- ``BaseModel``'s ``6 * N`` plus the weight-free token mixing and the
  tied ``lm_head`` matmul (:meth:`Qwen3_5Model.extra_flops_per_token`).

Class layout: ``class Qwen3_5Model(Qwen3_5ForCausalLM, BaseModel)`` -- the framework module first,
as the protocol recommends for mixing a framework class into a ``Module`` -- so the legacy
``forward`` / ``init_weights`` win over ``BaseModel``'s abstract ones, and ``BaseModel`` supplies
``num_params``, ``num_flops_per_token`` and the protocol checks.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hyper_parallel.models.qwen3_5.model import Qwen3_5ForCausalLM
from hyper_parallel.models.qwen3_5.model_config import (
    DEFAULT_FLAVOR,
    FLAVOR_NAMES,
    Qwen3_5ModelConfig,
    config_from_model_section,
    flavor_config,
    tp_divisibility_problems,
)
from hyper_parallel.protocols.model import BaseModel, ModuleProtocolError

# The configuration half is re-exported: this is where callers have always found it.
__all__ = [
    "DEFAULT_FLAVOR",
    "FLAVOR_NAMES",
    "Qwen3_5Model",
    "config_from_model_section",
    "flavor_config",
    "tp_divisibility_problems",
]

AUTO_INIT_CHECK_MAX_PARAMS = 100_000_000
"""``verify_module_protocol()`` runs its init check on a full copy up to this many parameters
(~400 MB in fp32); above, on a miniature of the same architecture."""


class Qwen3_5Model(Qwen3_5ForCausalLM, BaseModel):
    """Qwen3.5 dense causal LM (hybrid Gated DeltaNet / gated attention) as a ``BaseModel``.

    ``forward(input_ids, position_ids=None) -> logits (B, S, vocab)``; the loss is the trainer's.
    Build with ``Qwen3_5Model.Config(...).build()`` (under ``torch.device("meta")`` for a model to
    be parallelised, then ``to_empty`` + ``init_weights``), or ``flavor_config(name).build()``.
    """

    # The architecture, declared framework-free in model_config.py (recipes and the registry
    # hold it without torch); adopting it here makes this class its owner.
    Config = Qwen3_5ModelConfig

    # ------------------------------------------------------------------ construction
    def __init__(self, config: Qwen3_5ModelConfig) -> None:
        # BaseModel.__init__ stores the config and reaches nn.Module.__init__ (the legacy
        # __init__ is skipped: it would store a legacy config); the legacy hook then builds the
        # very same submodules from the equivalent legacy config.
        BaseModel.__init__(self, config)
        self._init_modules(config)

    # ------------------------------------------------------------------ protocol check
    def verify_module_protocol(
        self, *, check_init: bool | None = None, init_device: Any = "cpu"
    ) -> None:
        """``BaseModel.verify_module_protocol`` with an automatic, memory-safe init check.

        ``check_init=None`` (the default): the config / round-trip checks run on this model as
        always (free on the meta device), and the ``init_weights`` check materialises a full
        copy only when the model has at most :data:`AUTO_INIT_CHECK_MAX_PARAMS` parameters
        (the debug model). A larger model -- a trainer verifying a 9B model on every rank --
        gets the init check on a *miniature of the same architecture* instead: every mixer type
        it uses, one layer each, with the same flags (tied embeddings, biases, gates) and head
        geometry, but small vocab / hidden / MLP widths. ``init_weights`` has one rule per module
        type, so that covers every rule this model needs, for a few MB. ``True`` forces the
        full-copy check, ``False`` skips it.
        """
        if check_init is None and self.num_params() > AUTO_INIT_CHECK_MAX_PARAMS:
            BaseModel.verify_module_protocol(self, check_init=False, init_device=init_device)
            import torch

            with torch.device("meta"):
                mini = type(self.config)._owner(_miniature(self.config))
            try:
                BaseModel.verify_module_protocol(mini, check_init=True, init_device=init_device)
            except ModuleProtocolError as exc:
                raise ModuleProtocolError(
                    type(self).__qualname__,
                    [f"(checked on a miniature of this architecture) {f}" for f in exc.failures],
                ) from exc
            return
        BaseModel.verify_module_protocol(
            self, check_init=check_init is not False, init_device=init_device
        )

    # ------------------------------------------------------------------ size & FLOPs
    def extra_flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token that ``6 * num_params(exclude_embeddings=True)`` misses: the
        weight-free token mixing (:func:`~hyper_parallel.models.qwen3_5.model.
        token_mixing_flops_per_token`) and, when the ``lm_head`` is tied, its matmul
        (``6 * vocab * hidden``: its weight is the embedding, excluded from ``N``, but it is a real
        matmul). The total equals :func:`~hyper_parallel.models.qwen3_5.model.flops_per_token`.
        """
        from hyper_parallel.models.qwen3_5.model import token_mixing_flops_per_token

        c = self.config
        tied = 6 * c.vocab_size * c.hidden_size if c.tie_word_embeddings else 0
        # The vision tower's work is per image patch, not per token: its weights are left out
        # of the per-token count (the FLOPs and MFU of a step are the decoder's). Its position
        # table is an embedding, which N leaves out already.
        v = c.vision_config
        tower = 0 if v is None else 6 * (
            v.num_params(c.hidden_size) - v.num_position_embeddings * v.hidden_size)
        return token_mixing_flops_per_token(c, seq_len) + tied - tower


def _miniature(config: Qwen3_5ModelConfig) -> Qwen3_5ModelConfig:
    """The same architecture, tiny: one layer per mixer type in use, narrow vocab / hidden / MLP
    (head counts, head sizes, RoPE, flags unchanged), one narrow vision block when the model
    has a tower."""
    kinds = list(dict.fromkeys(config.layer_types))  # in order of first use
    vocab = min(config.vocab_size, 512)
    vision = config.vision_config
    if vision is not None:  # one narrow block; the placeholder ids moved into the small vocab
        vision = dataclasses.replace(
            vision, depth=1, hidden_size=min(vision.hidden_size, 64),
            num_heads=min(vision.num_heads, 4),
            intermediate_size=min(vision.intermediate_size, 128),
            num_position_embeddings=min(vision.num_position_embeddings, 64),
            image_token_id=vocab - 1, video_token_id=vocab - 2,
            vision_start_token_id=vocab - 3, vision_end_token_id=vocab - 4,
        )
    return dataclasses.replace(
        config,
        vision_config=vision,
        vocab_size=vocab,
        hidden_size=min(config.hidden_size, 128),
        intermediate_size=min(config.intermediate_size, 128),
        num_hidden_layers=len(kinds),
        layer_types=kinds,
    )
