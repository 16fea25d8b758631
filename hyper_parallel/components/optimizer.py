"""``OptimizersContainer``: one optimizer per model part, configured by ``OptimizersContainer.Config``.

The optimizers are built by the legacy trainer's helper
:func:`hyper_parallel.runtime.optim.build_optimizer` (two parameter groups, decay / no-decay,
selected by :func:`~hyper_parallel.runtime.optim.build_param_groups`), so a container built from
``OptimizersContainer.Config(...)`` and the legacy helper with the same settings hold
identical optimizers.

Defaults equal the legacy ``train.optimizer`` defaults (``type: adamw``, ``lr: 1e-4``, ``betas:
(0.9, 0.999)``, ``eps: 1e-8``, ``weight_decay: 0.01``, ``foreach: null``); the legacy trainer never passes ``fused``, which is torch's default ``None``.

Checkpointing: ``state_dict()`` is the DCP optimizer state of every part, flattened
(``state.<fqn>.<key>`` / ``param_groups.<fqn>.<key>``, torch's ``flatten_optimizer_state_dict``)
and merged, so the parts never collide and a different number of parts or another mesh can load
it; :func:`hyper_parallel.runtime.checkpoint.save_checkpoint` accepts the container as its
``optimizer``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyper_parallel.components._validate import at_least, finite_above, one_of, require
from hyper_parallel.protocols.configurable import Configurable
from hyper_parallel.utils.choices import (
    NO_DECAY_KEYWORDS,
    OPTIMIZER_NAMES,
    OPTIMIZER_TYPE_OF_NAME,
    OptimizerName,
)

if TYPE_CHECKING:
    import torch
    from torch import nn


@functools.cache
def _flattened_options() -> Any:
    """The DCP options of :meth:`OptimizersContainer.state_dict` (one shared instance).

    Built on first use, not at import: ``torch.distributed.checkpoint`` (which pulls in FSDP)
    is only needed to checkpoint, and building a configuration must stay cheap to import.
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(flatten_optimizer_state_dict=True)


class OptimizersContainer(Configurable):
    """One optimizer per model part, driven as one (``step``, ``zero_grad``, ``state_dict``).

    Iterating yields the torch optimizers (``LRSchedulersContainer`` builds one scheduler per
    optimizer); ``param_groups`` lists the groups of every part in order (the live dicts, so an
    LR scheduler's updates are visible); ``state`` merges the per-parameter states (empty before
    the first step).
    """

    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        name: OptimizerName = "AdamW"
        """``AdamW`` (decoupled weight decay) or ``Adam`` (L2 decay added to the gradient);
        the torch class names (legacy ``train.optimizer.type``: ``adamw`` / ``adam``)."""

        lr: float = 1e-4
        """Peak learning rate, a finite number >= 0 (the LR scheduler scales it)."""

        betas: tuple[float, float] = (0.9, 0.999)
        """Adam betas ``(beta1, beta2)``, each in [0, 1)."""

        eps: float = 1e-8
        """Adam epsilon (> 0)."""

        weight_decay: float = 0.01
        """Weight decay of the decay group; the parameters matched by ``no_decay_keywords``
        are never decayed."""

        foreach: bool | None = None
        """Use torch's multi-tensor (foreach) implementation; ``None`` lets torch choose."""

        fused: bool | None = None
        """Use torch's fused implementation; ``None`` lets torch choose. Not together with
        ``foreach=True``."""

        no_decay_keywords: tuple[str, ...] = NO_DECAY_KEYWORDS
        """A trainable parameter whose lower-cased name contains any of these substrings goes
        into the no-decay group (weight decay 0): biases and norm weights by default."""

        def __post_init__(self) -> None:
            one_of(self, "name", OPTIMIZER_NAMES)
            at_least(self, "lr", 0.0)
            self.betas = tuple(self.betas)
            require(
                len(self.betas) == 2
                and all(
                    isinstance(b, (int, float)) and not isinstance(b, bool) and 0.0 <= b < 1.0
                    for b in self.betas
                ),
                self,
                "betas",
                "must be two numbers in [0, 1), e.g. (0.9, 0.95)",
            )
            finite_above(self, "eps", 0)
            at_least(self, "weight_decay", 0.0)
            for name in ("foreach", "fused"):
                value = getattr(self, name)
                require(value is None or isinstance(value, bool), self, name, "must be a bool or None")
            require(
                not (self.foreach and self.fused),
                self,
                "fused",
                "cannot be combined with foreach=True; enable at most one of them",
            )
            self.no_decay_keywords = tuple(self.no_decay_keywords)
            require(
                all(isinstance(k, str) and k for k in self.no_decay_keywords),
                self,
                "no_decay_keywords",
                "must be non-empty parameter-name substrings",
            )

    def __init__(self, config: Config, *, model_parts: Sequence[nn.Module]) -> None:
        # The runtime (torch) is imported here, where optimizers are built: the Config above is
        # configuration and must import without it.
        from torch import nn

        from hyper_parallel.runtime.optim import build_optimizer

        parts = [model_parts] if isinstance(model_parts, nn.Module) else list(model_parts)
        if not parts or not all(isinstance(p, nn.Module) for p in parts):
            raise TypeError(
                "OptimizersContainer needs model_parts=[nn.Module, ...] (one optimizer per part), "
                f"got {model_parts!r}"
            )
        self.config = config
        self.model_parts = parts
        self.optimizers: list[torch.optim.Optimizer] = [
            build_optimizer(
                part,
                name=OPTIMIZER_TYPE_OF_NAME[config.name],
                lr=config.lr,
                betas=config.betas,
                eps=config.eps,
                weight_decay=config.weight_decay,
                foreach=config.foreach,
                fused=config.fused,
                no_decay_keywords=config.no_decay_keywords,
            )
            for part in parts
        ]

    # ------------------------------------------------------------------ optimizer interface

    def __iter__(self) -> Iterator[torch.optim.Optimizer]:
        return iter(self.optimizers)

    def __len__(self) -> int:
        return len(self.optimizers)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The parameter groups of every part, in part order (the optimizers' own dicts)."""
        return [group for opt in self.optimizers for group in opt.param_groups]

    @property
    def state(self) -> dict[torch.Tensor, Any]:
        """Per-parameter optimizer state of every part (empty before the first step)."""
        return {p: s for opt in self.optimizers for p, s in opt.state.items()}

    def step(self) -> None:
        for opt in self.optimizers:
            opt.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    # ------------------------------------------------------------------ checkpointing (DCP)

    def state_dict(self) -> dict[str, Any]:
        """The flattened DCP optimizer state of every part, merged (FQN keys; DTensors stay
        sharded). Call after the first step: torch initialises a missing state with a fake
        step, which ``save_checkpoint`` refuses to do behind the run's back."""
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        merged: dict[str, Any] = {}
        for part, opt in zip(self.model_parts, self.optimizers):
            part_state = get_optimizer_state_dict(part, opt, options=_flattened_options())
            clash = next((k for k in part_state if k in merged), None)
            if clash is not None:
                raise ValueError(
                    f"OptimizersContainer.state_dict: two model parts both hold {clash!r}; "
                    "model parts must keep distinct parameter names (FQNs of the whole model)"
                )
            merged.update(part_state)
        return merged

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a :meth:`state_dict` (each part takes the keys of its own parameters)."""
        from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

        load = functools.partial(
            set_optimizer_state_dict, optim_state_dict=state_dict, options=_flattened_options()
        )
        for part, opt in zip(self.model_parts, self.optimizers):
            load(part, opt)


__all__ = ["OptimizersContainer"]
