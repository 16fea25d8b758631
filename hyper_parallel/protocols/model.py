"""``BaseModel``: the root ``Module`` of a trainable model, and its protocol check.

A model's ``Config`` is the whole architecture (a tree of sub-module Configs); ``build()`` gives
the model, usually under ``torch.device("meta")``. What the trainer relies on beyond ``Module``:

* ``Config.update_from_config(trainer_config=...)`` -- a hook to derive model settings from the
  rest of the run (default: nothing);
* ``init_weights(buffer_device)`` -- initialise everything after ``to_empty``;
* ``num_params`` / ``num_flops_per_token`` -- for logging and MFU;
* ``verify_module_protocol()`` -- checks the above actually hold for this model (see there).

The parameter walks use torch's ``nn.Module`` API (``parameters``, ``modules``,
``named_buffers``); a model on another platform overrides them.
"""

from __future__ import annotations

import math
from typing import Any

from hyper_parallel.protocols.model_config import BaseModelConfig
from hyper_parallel.protocols.module import Module


class ModuleProtocolError(RuntimeError):
    """A model breaks the module protocol; ``failures`` lists every broken rule."""

    def __init__(self, model_name: str, failures: list[str]) -> None:
        self.failures = list(failures)
        lines = "\n".join(f"  - {f}" for f in self.failures)
        super().__init__(f"{model_name} does not satisfy the module protocol:\n{lines}")


class BaseModel(Module):
    """Base of every model the trainer builds from a ``ModelSpec``."""

    # Declared framework-free in model_config.py (recipes and the registry hold model Configs
    # without importing torch); adopting it here makes this class its owner.
    Config = BaseModelConfig

    def __init__(self, config: BaseModelConfig) -> None:
        super().__init__(config=config)

    # ------------------------------------------------------------------ protocol

    def init_weights(self, buffer_device: Any = None) -> None:
        """(Re)initialise every parameter and buffer in place; called after ``to_empty``.

        Must not read the previous contents (they are garbage after ``to_empty``), and must reach
        every parameter and floating-point buffer: ``verify_module_protocol`` checks that.
        ``buffer_device`` is where buffers computed from scratch go (``None``: where they are).
        """
        raise NotImplementedError(
            f"{type(self).__qualname__}.init_weights(buffer_device=None) is not implemented: a "
            "BaseModel subclass must initialise every parameter and buffer in place"
        )

    def num_params(self, exclude_embeddings: bool = False) -> int:
        """Number of unique parameters (tied weights once; a DTensor counts its global size).

        ``exclude_embeddings`` leaves out the weights of ``nn.Embedding`` modules (lookups, not
        matmuls); a weight tied to an embedding is left out with it.
        """
        import torch

        excluded: set[int] = set()
        if exclude_embeddings:
            excluded = {
                id(p)
                for m in self.modules()
                if isinstance(m, torch.nn.Embedding)
                for p in m.parameters(recurse=False)
            }
        # parameters() yields a tied parameter once.
        return sum(p.numel() for p in self.parameters() if id(p) not in excluded)

    def num_flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs (forward + backward) per token at sequence length ``seq_len``.

        ``6 * N`` with ``N = num_params(exclude_embeddings=True)`` (2 FLOPs per weight per token
        forward, twice that backward) plus :meth:`extra_flops_per_token`.
        """
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
            raise ValueError(f"seq_len must be a positive int, got {seq_len!r}")
        return 6 * self.num_params(exclude_embeddings=True) + self.extra_flops_per_token(seq_len)

    def extra_flops_per_token(self, seq_len: int) -> float:
        """FLOPs per token that ``6 * N`` misses: weight-free token mixing (attention scores and
        values, recurrent state updates) and matmuls with weights excluded from ``N`` (an
        ``lm_head`` tied to the embedding). Default 0; models override."""
        return 0

    # ------------------------------------------------------------------ verification

    def verify_module_protocol(self, *, check_init: bool = True, init_device: Any = "cpu") -> None:
        """Check this model keeps the contract the trainer relies on; raise if it does not.

        Meant to run right after ``config.build()``, before parallelisation (FSDP swaps the
        class, TP changes parameters). One :class:`ModuleProtocolError` lists every failure
        found (``.failures``); a failure of check 1, or a config that cannot be built, stops
        there because the later checks need a built copy. The checks, in order:

        1. **Config.** ``self.config`` exists and is a ``BaseModel.Config`` whose owner is exactly
           ``type(self)`` (building it gives this class, not a parent or sibling). When this
           fails, the remaining checks are skipped (they need the config).
        2. **Round trip.** ``self.config.build()`` on the meta device (no memory) succeeds,
           gives a ``type(self)`` whose ``config`` is a copy (not the same object) equal to
           ``self.config``, and has exactly the same parameter names and shapes, and buffer
           names and shapes, as ``self``. So the config alone describes the model: nothing
           about its structure came from outside the config.
        3. **init_weights reaches everything** (``check_init=True``). That meta copy is
           materialised with ``to_empty(device=init_device)`` -- the trainer's own path -- then
           every floating-point parameter and buffer is filled with NaN, and
           ``init_weights(buffer_device=init_device)`` runs under ``no_grad``. It must not
           raise, and afterwards no NaN may remain in any of them: a NaN left means an element
           that ``init_weights`` never wrote (or computed from its old value, which after
           ``to_empty`` is garbage). Integer / bool tensors are not checked.

        Cost: checks 1-2 are free; check 3 materialises one unsharded copy of the model on
        ``init_device`` and initialises it. Pass ``check_init=False`` for models too large for
        that, and verify a small flavor of the same architecture instead.
        """
        import torch

        name = type(self).__qualname__
        config = getattr(self, "config", None)
        if not isinstance(config, BaseModel.Config):
            raise ModuleProtocolError(
                name,
                [
                    (
                        f"self.config is {type(config).__qualname__}, not a BaseModel.Config: "
                        "store the Config in __init__ (super().__init__(config))"
                    )
                ],
            )
        failures: list[str] = []
        owner = type(config)._owner
        if owner is not type(self):
            failures.append(
                f"self.config is a {type(config).__qualname__}, which builds "
                f"{getattr(owner, '__qualname__', owner)}, not {name}: construct {name} from "
                f"{name}.Config"
            )
            raise ModuleProtocolError(name, failures)

        try:
            with torch.device("meta"):
                clone = config.build()
        except Exception as exc:  # reported with the model's name, chained
            raise ModuleProtocolError(
                name, [f"self.config.build() on the meta device raised {exc!r}"]
            ) from exc
        failures += _round_trip_failures(self, clone)
        if check_init and type(clone) is type(self):
            failures += _init_failures(clone, torch.device(init_device))
        if failures:
            raise ModuleProtocolError(name, failures)


def _shapes(named: Any) -> dict[str, tuple[int, ...]]:
    return {n: tuple(t.shape) for n, t in named}


def _round_trip_failures(model: BaseModel, clone: Any) -> list[str]:
    failures: list[str] = []
    if type(clone) is not type(model):
        return [
            (
                f"self.config.build() gave a {type(clone).__qualname__}, not a "
                f"{type(model).__qualname__}"
            )
        ]
    if getattr(clone, "config", None) is model.config:
        failures.append(
            "the built model shares its config object with self.config (build must pass a copy)"
        )
    elif getattr(clone, "config", None) != model.config:
        failures.append("the built model's config differs from self.config")
    for kind, ours, theirs in (
        ("parameter", _shapes(model.named_parameters()), _shapes(clone.named_parameters())),
        ("buffer", _shapes(model.named_buffers()), _shapes(clone.named_buffers())),
    ):
        missing = sorted(set(ours) - set(theirs))
        extra = sorted(set(theirs) - set(ours))
        reshaped = sorted(n for n in set(ours) & set(theirs) if ours[n] != theirs[n])
        if missing:
            failures.append(f"self has {kind}s that self.config.build() does not create: {missing}")
        if extra:
            failures.append(f"self.config.build() creates {kind}s that self lacks: {extra}")
        if reshaped:
            details = ", ".join(f"{n}: {ours[n]} vs {theirs[n]}" for n in reshaped)
            failures.append(f"{kind} shapes differ between self and self.config.build(): {details}")
    return failures


def _init_failures(model: BaseModel, device: Any) -> list[str]:
    import torch

    model.to_empty(device=device)
    with torch.no_grad():
        for tensor in (*model.parameters(), *model.buffers()):
            if tensor.is_floating_point() or tensor.is_complex():
                tensor.fill_(math.nan)
        try:
            model.init_weights(buffer_device=device)
        except Exception as exc:  # noqa: BLE001 -- reported as a protocol failure
            return [f"init_weights(buffer_device={device!s}) raised {exc!r}"]
    failures = []
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        missed = [
            n
            for n, t in named
            if (t.is_floating_point() or t.is_complex()) and bool(torch.isnan(t).any())
        ]
        if missed:
            failures.append(
                f"init_weights left {len(missed)} {kind}(s) (partly) uninitialised -- NaN "
                f"remains after filling with NaN and calling init_weights: {missed}"
            )
    return failures


__all__ = ["BaseModel", "ModuleProtocolError"]
