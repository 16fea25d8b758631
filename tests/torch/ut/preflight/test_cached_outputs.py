"""Preflight's short path to the fake mode's cache hits (:mod:`hyper_parallel.preflight.
cached_outputs`) answers with torch's tensors: over operators a step runs -- views (on the
storage they view, at its offset), new tensors, tuples of either, in-place operators,
operators on tensors that require gradients -- on transposed, sliced and offset fake tensors,
a cache hit's output has the size, stride, offset, dtype, device, ``requires_grad`` and
storage torch's own path gives it; and the fake mode dispatches to torch's own function."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from hyper_parallel.preflight import cached_outputs
from hyper_parallel.preflight.fake_world import Patches
from tests.torch.ut.preflight.test_cache_keys import _make

#: name -> an operator a step runs, on one fake tensor (None: it does not apply to that tensor).
OPERATORS = {
    "add": lambda t: t + t,
    "mul by a scalar": lambda t: t * 2,
    "sum": lambda t: t.sum(-1) if t.dim() else None,
    "view": lambda t: t.view(-1) if t.is_contiguous() else None,
    "transpose": lambda t: t.transpose(0, -1) if t.dim() >= 2 else None,
    "slice": lambda t: t[1:] if t.dim() and t.shape[0] > 1 else None,
    "split": lambda t: t.split(1) if t.dim() and t.shape[0] > 1 else None,
    "detach": lambda t: t.detach(),
    "expand": lambda t: t.unsqueeze(0).expand(2, *t.shape),
    "as_strided": lambda t: t.as_strided((1,), (1,), t.storage_offset()) if t.numel() else None,
    "clone": lambda t: t.clone(),
    "to bf16": lambda t: t.to(torch.bfloat16) if t.is_floating_point() else None,
    "in place": lambda t: t.mul_(2) if not t.requires_grad and t._base is None else None,
    "matmul": lambda t: t @ t.transpose(-1, -2) if t.dim() >= 2 and t.is_floating_point()
    else None,
}


def _fields(out) -> list:
    outs = out if isinstance(out, tuple) else (out,)
    return [(type(o), o.shape, o.stride(), o.storage_offset(), o.dtype, o.fake_device,
             o.requires_grad, o.untyped_storage().nbytes()) for o in outs]


def _views_of(out, arg) -> list[bool]:
    outs = out if isinstance(out, tuple) else (out,)
    return [o.untyped_storage()._cdata == arg.untyped_storage()._cdata for o in outs]


def _hit(mode: FakeTensorMode, make, operator, patched: bool):
    """The operator's output the second time (a cache hit where torch caches the operator: the
    first call fills the entry), with the short path or torch's: its fields, whether each
    output shares the argument's storage, and whether it was a hit."""
    patches = Patches()
    if patched:
        cached_outputs.patch_cache_hits(patches)
    try:
        with mode:
            operator(make())
            arg = make()
            hits = mode.cache_hits
            out = operator(arg)
            return _fields(out), _views_of(out, arg), mode.cache_hits > hits
    finally:
        patches.undo()


@st.composite
def tensors(draw):
    dims = draw(st.lists(st.integers(1, 4), min_size=0, max_size=3))
    dtype = draw(st.sampled_from((torch.float32, torch.bfloat16, torch.int64)))
    ops = draw(st.lists(st.sampled_from(("t", "slice", "offset", "requires_grad")), max_size=3))
    return dims, dtype, ops


def _maker(mode: FakeTensorMode, dims, dtype, ops):
    """A maker of fresh fake tensors of one drawn kind (``test_cache_keys``' own construction)."""
    return lambda: mode.from_tensor(_make(dims, dtype, ops))


@settings(max_examples=150, deadline=None)
@given(tensors(), st.sampled_from(sorted(OPERATORS)))
def test_a_cache_hit_is_the_tensor_torch_makes(drawn, name):
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    make = _maker(mode, *drawn)
    operator = OPERATORS[name]
    with mode:
        if operator(make()) is None:
            return
    assert _hit(mode, make, operator, patched=True) == _hit(mode, make, operator,
                                                           patched=False)


def test_each_kind_of_output_is_a_cache_hit_and_torchs_tensor():
    """The property's cases are cache hits, the short path's: a view (sharing its argument's
    storage, at an offset too), a new tensor (not sharing it), a tuple of views, an in-place
    operator's argument, an operator on a tensor that requires gradients."""
    for name, dims, ops, shares in (("transpose", [3, 4], [], [True]), ("add", [3, 4], [], [False]),
                                    ("split", [2, 3], [], [True, True]),
                                    ("slice", [2, 3], ["offset"], [True]),
                                    ("in place", [3, 4], [], [True]),
                                    ("matmul", [2, 3, 4], ["requires_grad"], [False])):
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        make = _maker(mode, dims, torch.float32, ops)
        ours = _hit(mode, make, OPERATORS[name], patched=True)
        assert ours == _hit(mode, make, OPERATORS[name], patched=False), name
        assert ours[1:] == (shares, True), name


def test_the_fake_mode_dispatches_to_torchs_function_itself():
    """Under the pinned torch the short paths are in force (a failure of the first assertion
    means: read torch's new cache entry fields)."""
    assert cached_outputs.entries_match()
    patches = Patches()
    cached_outputs.patch_cache_hits(patches)
    try:
        dispatch = FakeTensorMode.__torch_dispatch__
        assert not hasattr(dispatch, "__wrapped__")
        mode = FakeTensorMode()
        with mode:
            assert isinstance(torch.empty(2) * 2, FakeTensor)
    finally:
        patches.undo()
    assert hasattr(FakeTensorMode.__torch_dispatch__, "__wrapped__")
