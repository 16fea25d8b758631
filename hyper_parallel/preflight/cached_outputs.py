"""The fake mode's cache hits, answered in fewer Python steps: the same tensors.

Once its key is made (:mod:`~hyper_parallel.preflight.cache_keys`), most of a cache hit's time
is its output: ``FakeTensorMode._get_output_tensor_from_cache_entry`` passes every size and
stride through a check for symbolic stubs, enters a context that suppresses a shape
environment's guards, and enters the kernel-invocation context twice for a view. Preflight's
fake mode has no shape environment (its sizes are concrete), so :func:`output_from_entry` makes
the same fake tensor directly -- the entry's sizes, strides, dtype, device and
``requires_grad``; a view set on its input's storage at the entry's offset -- and hands every
other entry (an in-place operator's, a constant, a conjugate or negative view, another layout,
a symbolic size) to torch's.

Every dispatch also passes through two wrappers of the fake mode's ``__torch_dispatch__``: a call
counter (``torch.utils._stats.count``, for debugging) and the guard that keeps TorchDynamo from
tracing into a dispatch mode. The simulation compiles nothing (``simulate.simulation_config``
turns compilation off), so it dispatches to torch's function itself
(:func:`patch_cache_hits`). ``tests/torch/ut/preflight/test_cached_outputs.py`` holds the outputs
to torch's, field for field, over views and new tensors of every kind a step makes.

Like :mod:`~hyper_parallel.preflight.cache_keys`, this names torch 2.13's private cache entry
fields: under a torch whose entries or metadata have other fields :func:`patch_cache_hits`
leaves torch's functions in place (the simulation is then only slower). The simulation's
figures are compared with torch's paths in ``bench/bench_preflight_speed.py``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch._ops import OpOverload
from torch._subclasses.fake_tensor import (
    FakeTensor,
    FakeTensorMode,
    _DispatchCacheEntryOutputInfo,
    in_kernel_invocation_manager,
)

from hyper_parallel.preflight.cache_keys import fields_match

_TORCH_OUTPUT = FakeTensorMode._get_output_tensor_from_cache_entry
#: The fields of torch 2.13's cache entry of one output, the ones :func:`output_from_entry` reads.
ENTRY_FIELDS = ("inplace_idx", "metadata", "view_idx", "constant_value")


def output_from_entry(self: FakeTensorMode, state: Any, entry: Any, key: Any, func: Any,
                      args: Any) -> Any:
    """``FakeTensorMode._get_output_tensor_from_cache_entry``: a new dense fake tensor of the
    entry's metadata (for a view operator, on the storage of the argument it views), made
    without a shape environment's steps; torch's own for any other entry."""
    metadata = entry.metadata
    if (self.shape_env is not None or metadata is None or entry.inplace_idx is not None
            or metadata.layout is not torch.strided or metadata.is_conj or metadata.is_neg):
        return _TORCH_OUTPUT(self, state, entry, key, func, args)
    with in_kernel_invocation_manager(self):
        empty = torch.empty_strided(metadata.shape, metadata.stride, dtype=metadata.dtype,
                                    device="meta", requires_grad=metadata.requires_grad)
    if isinstance(func, OpOverload) and func.is_view:
        storage = args[entry.view_idx].untyped_storage()
        with in_kernel_invocation_manager(self):
            empty.set_(storage, metadata.storage_offset, metadata.shape, metadata.stride)
    return FakeTensor(self, empty, metadata.device)


def _unwrapped(function: Any) -> Any:
    """``function`` without the ``functools.wraps`` wrappers around it."""
    while hasattr(function, "__wrapped__"):
        function = function.__wrapped__
    return function


def entries_match() -> bool:
    """Whether this torch's cache entries and tensor metadata are the ones this module reads."""
    return fields_match() and tuple(
        f.name for f in dataclasses.fields(_DispatchCacheEntryOutputInfo)) == ENTRY_FIELDS


def patch_cache_hits(patches: Any) -> None:
    """:func:`output_from_entry` in place of torch's, and the fake mode's ``__torch_dispatch__``
    without its counter and its TorchDynamo guard (a :class:`~.fake_world.Patches`), when this
    torch's cache entries are the ones they were written for."""
    if not entries_match():
        return
    patches.set(FakeTensorMode, "_get_output_tensor_from_cache_entry", output_from_entry)
    patches.set(FakeTensorMode, "__torch_dispatch__",
                _unwrapped(vars(FakeTensorMode)["__torch_dispatch__"]))


__all__ = ["ENTRY_FIELDS", "entries_match", "output_from_entry", "patch_cache_hits"]
