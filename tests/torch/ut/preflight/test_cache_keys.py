"""Preflight's short paths to the fake tensors' cache keys (:mod:`hyper_parallel.preflight.
cache_keys`) make exactly torch's keys: over tensors of every dtype, stride, offset, view and
flag a key reads, among the arguments an operator takes (nested lists and tuples, sizes,
dtypes, devices, strings, dicts), the flattened key is the one torch's own functions write,
value for value and type for type (1 and 1.0, or a tuple and a torch.Size, hash alike and must
not meet); and an argument torch refuses to key is refused alike."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses import fake_tensor
from torch._subclasses.fake_tensor import (
    FakeTensorMode,
    TensorMetadata,
    _BypassDispatchCache,
    _CacheKeyState,
)

from hyper_parallel.preflight import cache_keys
from hyper_parallel.preflight.fake_world import Patches

DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool,
          torch.complex64, torch.uint8)


def _key(mode: FakeTensorMode, args: list, patched: bool) -> list:
    patches = Patches()
    if patched:
        cache_keys.patch_cache_keys(patches)
    try:
        result: list = []
        mode._prep_args_for_hash(result, args, _CacheKeyState(mode.shape_env), [])
        return result
    finally:
        patches.undo()


def _typed(key: list) -> list:
    return [(type(v), v) for v in key]


@st.composite
def tensors(draw):
    """A fake tensor reached the ways a step reaches its operands: made, viewed, sliced,
    transposed, expanded, offset, channels-last, conjugated, negated, in inference mode."""
    dims = draw(st.lists(st.integers(1, 5), min_size=0, max_size=4))
    dtype = draw(st.sampled_from(DTYPES))
    ops = draw(st.lists(st.sampled_from(
        ("t", "slice", "expand", "unsqueeze", "offset", "channels_last", "conj", "neg",
         "requires_grad", "inference", "resize_storage")), max_size=4))
    return dims, dtype, ops


def _make(dims: list[int], dtype: torch.dtype, ops: list[str]) -> torch.Tensor:
    inference = "inference" in ops
    with torch.inference_mode(inference):
        t = torch.empty(dims, dtype=dtype)
        for op in ops:
            if op == "t" and t.dim() >= 2:
                t = t.transpose(0, -1)
            elif op == "slice" and t.dim() >= 1 and t.shape[0] > 1:
                t = t[1:]
            elif op == "expand":
                t = t.unsqueeze(0).expand(3, *t.shape)
            elif op == "unsqueeze":
                t = t.unsqueeze(-1)
            elif op == "offset" and t.numel() > 1:
                t = t.reshape(-1)[1:]
            elif op == "channels_last" and t.dim() == 4:
                t = t.contiguous(memory_format=torch.channels_last)
            elif op == "conj" and t.is_complex():
                t = t.conj()
            elif op == "neg" and t.is_complex():
                t = torch._neg_view(t)
            elif op == "requires_grad" and t.is_floating_point() and t.is_leaf \
                    and not inference:
                t = t.detach().requires_grad_()
            elif op == "resize_storage" and t.is_contiguous() and t._base is None \
                    and not inference:
                t.untyped_storage().resize_(t.untyped_storage().nbytes() + 8)
    return t


@settings(max_examples=300, deadline=None)
@given(st.lists(tensors(), min_size=1, max_size=3), st.lists(
    st.one_of(st.integers(-3, 3), st.floats(-2, 2), st.booleans(), st.none()), max_size=2))
def test_the_short_paths_make_torchs_keys(drawn, scalars):
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [mode.from_tensor(_make(dims, dtype, ops)) for dims, dtype, ops in drawn]
    args = [*fakes, tuple(scalars), {"k": fakes[0]}, [fakes[-1], (fakes[0], 2)],
            fakes[0].shape, fakes[0].dtype, torch.device("cuda", 1), "mean", torch.strided]
    assert _typed(_key(mode, args, patched=True)) == _typed(_key(mode, args, patched=False))
    for arguments in (tuple(args), (*scalars,), ()):
        assert (_typed(_key(mode, arguments, patched=True))
                == _typed(_key(mode, arguments, patched=False)))
    for fake in fakes:
        with mode:
            ours = cache_keys.tensor_metadata(fake)
            torchs = fake_tensor.extract_tensor_metadata(fake)
        assert ours == torchs


@pytest.mark.parametrize("refused", ["another mode's", "a real tensor", "a constant", "sparse",
                                     "a function"])
def test_what_torch_refuses_to_key_is_refused_alike(refused):
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    arg = {
        "another mode's": lambda: FakeTensorMode().from_tensor(torch.empty(2)),
        "a real tensor": lambda: torch.empty(2),
        "a constant": lambda: mode.from_tensor(torch.tensor(3.0), static_shapes=True),
        "sparse": lambda: mode.from_tensor(torch.eye(3).to_sparse()),
        "a function": lambda: (lambda: None),
    }[refused]()
    if refused == "a constant":
        arg.constant = torch.tensor(3.0)
    for patched in (True, False):
        with pytest.raises(_BypassDispatchCache):
            _key(mode, [mode.from_tensor(torch.empty(2)), [arg]], patched=patched)


def test_a_sparse_tensor_takes_torchs_path():
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    sparse = mode.from_tensor(torch.eye(3).to_sparse())
    assert cache_keys.tensor_metadata(sparse) == fake_tensor.extract_tensor_metadata(sparse)


def test_the_fields_are_torchs():
    """Under another torch the patch stands down instead of writing keys of the wrong shape;
    under the pinned one it is in force (a failure here means: read torch's new fields)."""
    assert cache_keys.fields_match(), [f.name for f in dataclasses.fields(TensorMetadata)]
    patches = Patches()
    cache_keys.patch_cache_keys(patches)
    try:
        assert fake_tensor.extract_tensor_metadata is cache_keys.tensor_metadata
    finally:
        patches.undo()
    assert fake_tensor.extract_tensor_metadata is not cache_keys.tensor_metadata


@pytest.mark.parametrize("field", ["shape", "stride"])
def test_a_key_differs_where_torchs_does(field):
    """The control: two tensors torch keys apart are keyed apart by the short path too."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    a = mode.from_tensor(torch.empty(2, 3))
    b = mode.from_tensor(torch.empty(3, 2) if field == "shape" else torch.empty(3, 2).t())
    assert _key(mode, [a], patched=True) != _key(mode, [b], patched=True)
