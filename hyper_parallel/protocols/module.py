"""``Module``: the framework's module base class plus ``Configurable``, with ``init_weights``.

The base class is the platform's (``torch.nn.Module`` on torch, ``mindspore.nn.Cell`` on
mindspore), resolved through :func:`hyper_parallel.platform.get_platform` when this module is
imported -- so importing it imports the framework. Choose the platform first
(``HYPER_PARALLEL_PLATFORM``); a later change does not rebind ``Module``.

Writing one::

    class FeedForward(Module):
        @dataclass(kw_only=True, slots=True)
        class Config(Module.Config):
            dim: int
            hidden_dim: int

        def __init__(self, config: Config):
            super().__init__(config=config)      # sets self.config
            self.w1 = nn.Linear(config.dim, config.hidden_dim)
            self.w2 = nn.Linear(config.hidden_dim, config.dim)

        def init_weights(self, buffer_device=None):
            ...                                  # every parameter and buffer, in place

    ffn = FeedForward.Config(dim=8, hidden_dim=32).build()

Mixing in a framework layer works as long as the framework class comes first:
``class Embedding(nn.Embedding, Module)``.
"""

from __future__ import annotations

from typing import Any

from hyper_parallel.platform import get_platform
from hyper_parallel.protocols.configurable import Configurable
from hyper_parallel.protocols.model_config import ModuleConfig

ModuleBase: type = get_platform().module_base
"""The platform's module base class this ``Module`` derives from."""


class Module(ModuleBase, Configurable):  # type: ignore[misc, valid-type]
    """A framework module built from its ``Config``; subclasses implement ``init_weights``.

    The init protocol: a module may be constructed on the ``meta`` device, parallelised, and
    materialised with ``to_empty``; ``init_weights`` then fills *every* parameter and buffer in
    place (in a way that does not depend on their previous contents), so a model initialises
    identically however it was built.
    """

    # Declared framework-free in model_config.py (a model Config must be importable without
    # torch); adopting it here makes this class its owner.
    Config = ModuleConfig

    def __init__(self, *args: Any, config: ModuleConfig | None = None, **kwargs: Any) -> None:
        # Positional and other keyword arguments go to the framework base (e.g. mindspore's
        # Cell(auto_prefix, flags)); ``config`` is keyword-only so a framework layer mixed in
        # before Module (class Emb(nn.Embedding, Module)) reaches here with no config at all.
        super().__init__(*args, **kwargs)
        if config is not None:
            self.config = config

    def init_weights(self, buffer_device: Any = None) -> None:
        """(Re)initialise every parameter and buffer of this module, in place.

        ``buffer_device``: where buffers computed from scratch (e.g. RoPE frequencies) should be
        created; ``None`` means where they live. Called under ``no_grad`` after ``to_empty``.
        """
        raise NotImplementedError(
            f"{type(self).__qualname__}.init_weights(buffer_device=None) is not implemented: a "
            "Module subclass must initialise all of its parameters and buffers in place (it is "
            "called after to_empty(), when their contents are garbage)"
        )


__all__ = ["Module", "ModuleBase"]
