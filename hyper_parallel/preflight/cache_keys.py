"""The fake tensors' cache keys, made in fewer Python steps: the same keys.

A simulated step is some 10,000 operators on fake tensors, each a fraction of a millisecond of
Python, and about a third of that is the fake mode's dispatch cache building its key: for every
tensor argument, ``extract_tensor_metadata`` (which asks ``is_sparse_any`` three times) and
``TensorMetadata._flatten_into`` (which walks ``dataclasses.fields`` and recurses into the shape
and stride tuples through the generic ``_prep_args_for_hash``). Preflight's tensors are never
sparse and never symbolic (its fake mode has no shape environment), so both have a short path:
:func:`tensor_metadata` and :func:`flatten_into` produce exactly the values torch's would,
appended in the same order, and fall back to torch's own for anything else.
The walk over an operator's arguments (``FakeTensorMode._prep_args_for_hash``, called for
every operator) has one too: :func:`prep_args_for_hash` writes a list or tuple of fake tensors
and plain scalars without torch's chain of ``isinstance`` checks and the imports it repeats at
every call, and hands any other argument to torch's. ``tests/torch/ut/preflight/
test_cache_keys.py`` holds the two to the same keys over tensors of every layout, dtype, stride
and flag a key reads, and to the same refusals.

This module names torch's private ``TensorMetadata`` fields; under a torch whose fields differ
:func:`patch_cache_keys` leaves torch's functions in place (the simulation is then only slower).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch._subclasses import fake_tensor
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, TensorMetadata

#: The fields of torch 2.13's ``TensorMetadata``, in its order (the order the key is made in).
FIELDS = ("dtype", "shape", "stride", "device", "layout", "memory_format", "storage_offset",
          "storage_bytes", "requires_grad", "is_quantized", "is_conj", "is_neg", "is_inference",
          "is_sparse", "is_coalesced", "dense_dim", "sparse_dim")

_TORCH_EXTRACT = fake_tensor.extract_tensor_metadata
_TORCH_FLATTEN = TensorMetadata._flatten_into
_TORCH_PREP = FakeTensorMode._prep_args_for_hash
_SEQUENCES = (tuple, list, torch.Size)
#: Arguments a key holds as ``type, value`` (torch's last branch), told apart by their exact type.
_PLAIN = frozenset({int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout,
                    torch.memory_format})


def tensor_metadata(t: torch.Tensor) -> TensorMetadata:
    """torch's ``extract_tensor_metadata(t)``, for a dense tensor with concrete sizes without
    its repeated sparsity checks; torch's own for any other."""
    if t.layout is not torch.strided or t._has_symbolic_sizes_strides:
        return _TORCH_EXTRACT(t)
    memory_format = fake_tensor.suggest_memory_format(t)
    if not t.is_contiguous(memory_format=memory_format):
        memory_format = None
    return TensorMetadata(
        t.dtype, t.shape, t.stride(), t.device, t.layout, memory_format, t.storage_offset(),
        t.untyped_storage().nbytes(), t.requires_grad, t.is_quantized, t.is_conj(), t.is_neg(),
        t.is_inference(), t.is_sparse, None, None, None)


def _concrete(values: Any) -> bool:
    return type(values) in _SEQUENCES and all(type(v) is int for v in values)


def flatten_into(self: TensorMetadata, result: list, mode: Any, state: Any) -> None:
    """``TensorMetadata._flatten_into``: the fields in order, a tuple of plain integers as
    ``_prep_args_for_hash`` writes it (its type, its length, then each integer's type and
    value); torch's own when a field holds anything else a key must convert (a SymInt)."""
    shape, stride = self.shape, self.stride
    if not (_concrete(shape) and _concrete(stride)) or any(
            isinstance(v, torch.SymInt) for v in (self.storage_offset, self.storage_bytes)):
        return _TORCH_FLATTEN(self, result, mode, state)
    append = result.append
    append(self.dtype)
    for values in (shape, stride):
        append(type(values))
        append(f"length_{len(values)}")
        for v in values:
            append(int)
            append(v)
    for name in FIELDS[3:]:
        append(getattr(self, name))


def prep_args_for_hash(self: FakeTensorMode, result: list, args: Any, state: Any,
                       id_hashed_objects: list) -> None:
    """``FakeTensorMode._prep_args_for_hash``: for a list or a tuple, its type and length, then
    each argument -- a dense fake tensor of this mode by :func:`tensor_metadata` and
    :func:`flatten_into`, a plain scalar as its type and value, a list or tuple the same way;
    anything else (a dict, a ``torch.Size``, a symbolic size, a tensor torch refuses to key)
    exactly as torch writes it, or refuses it."""
    kind = type(args)
    if kind is not list and kind is not tuple:
        return _TORCH_PREP(self, result, args, state, id_hashed_objects)
    append = result.append
    append(kind)
    append(f"length_{len(args)}")
    for arg in args:
        kind = type(arg)
        if kind is FakeTensor and arg.fake_mode is self and arg.constant is None \
                and arg.layout is torch.strided:
            flatten_into(tensor_metadata(arg), result, self, state)
        elif kind in _PLAIN:
            append(kind)
            append(arg)
        elif kind is list or kind is tuple:
            prep_args_for_hash(self, result, arg, state, id_hashed_objects)
        else:  # torch's own, as one argument: its entry without the 1-tuple's type and length
            one: list = []
            _TORCH_PREP(self, one, (arg,), state, id_hashed_objects)
            result.extend(one[2:])


def fields_match() -> bool:
    """Whether this torch's ``TensorMetadata`` is the one :data:`FIELDS` names."""
    return tuple(f.name for f in dataclasses.fields(TensorMetadata)) == FIELDS


def patch_cache_keys(patches: Any) -> None:
    """The short paths in place of torch's (a :class:`~.fake_world.Patches`), when this torch's
    ``TensorMetadata`` is the one they were written for."""
    if not fields_match():
        return
    patches.set(fake_tensor, "extract_tensor_metadata", tensor_metadata)
    patches.set(TensorMetadata, "_flatten_into", flatten_into)
    patches.set(FakeTensorMode, "_prep_args_for_hash", prep_args_for_hash)


__all__ = ["FIELDS", "fields_match", "flatten_into", "patch_cache_keys", "prep_args_for_hash",
           "tensor_metadata"]
