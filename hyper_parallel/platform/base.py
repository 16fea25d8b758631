"""The interface every framework backend implements."""

from __future__ import annotations

import abc
import os
from typing import Any, Mapping

from hyper_parallel.platform.dtypes import canonical_dtype_name


class Platform(abc.ABC):
    """A deep-learning framework as seen by the trainer.

    Subclasses bind the framework lazily: constructing one imports the framework, importing this
    module does not.
    """

    #: Name used by ``HYPER_PARALLEL_PLATFORM``.
    name: str = ""

    @property
    @abc.abstractmethod
    def module_base(self) -> type:
        """The framework's module base class (``torch.nn.Module``, ``mindspore.nn.Cell``)."""

    @property
    @abc.abstractmethod
    def dtype_map(self) -> Mapping[str, Any]:
        """Every accepted dtype spelling (``bf16``, ``bfloat16``, ...) -> the framework dtype."""

    @abc.abstractmethod
    def device_type(self) -> str:
        """The accelerator type to use (``cuda``, ``npu``, ``cpu``, ...)."""

    @abc.abstractmethod
    def manual_seed(self, seed: int) -> None:
        """Seed the framework's global RNGs (host and device)."""

    @abc.abstractmethod
    def get_world_size(self) -> int:
        """Number of processes in the job (1 when not distributed)."""

    @abc.abstractmethod
    def get_rank(self) -> int:
        """Global rank of this process (0 when not distributed)."""

    def get_local_rank(self) -> int:
        """Rank on this node, as set by the launcher (``LOCAL_RANK``)."""
        return int(os.environ.get("LOCAL_RANK", "0"))

    def dtype(self, name: str) -> Any:
        """The framework dtype for ``name``; an unknown name is a ``ValueError`` listing valid ones."""
        canonical_dtype_name(name)  # raises with the list of valid names
        return self.dtype_map[str(name).lower()]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r} device={self.device_type()!r}>"
