"""Host data that a model's forward reads as Python values, passed so that nothing moves it to
the device on the way.

FSDP2's root pre-forward moves every tensor of the forward's arguments to the device -- bare, or
inside a tuple, list, dict or named tuple (``torch.distributed.utils._to_kwargs``) -- so a host
tensor handed to an FSDP model arrives on the GPU, and the model's read of its values
(``.tolist()``) makes the host wait for the device's whole queue, every micro-batch. A value of
another type passes untouched: :class:`HostTensor` is one.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree


class HostTensor:
    """A host tensor that a module's input handling leaves on the host (see the module
    docstring); ``.tensor`` is it.

    It is a pytree node around the tensor, so a pipeline schedule, which cuts every input along
    its first dimension with torch's pytree, cuts the tensor inside and hands each micro-batch
    its own ``HostTensor``. Build it with :meth:`of`; the plain constructor is pytree's (it
    also rebuilds the node around the schedule's chunk specs)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor

    @classmethod
    def of(cls, tensor: torch.Tensor) -> HostTensor:
        """``tensor`` (on the host) kept there; a ``ValueError`` for a device tensor, whose
        values the host could only read by waiting for the device."""
        if not isinstance(tensor, torch.Tensor) or tensor.device.type != "cpu":
            where = tensor.device if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise ValueError(f"HostTensor holds host tensors only, got {where}")
        return cls(tensor)

    def __repr__(self) -> str:
        return f"HostTensor({self.tensor!r})"


pytree.register_pytree_node(
    HostTensor,
    lambda host: ([host.tensor], None),
    lambda children, _: HostTensor(children[0]),
    serialized_type_name="hyper_parallel.utils.host_data.HostTensor",
)


def host_value(value: Any) -> Any:
    """``value``'s tensor when it is a :class:`HostTensor`, else ``value`` itself."""
    return value.tensor if isinstance(value, HostTensor) else value


__all__ = ["HostTensor", "host_value"]
