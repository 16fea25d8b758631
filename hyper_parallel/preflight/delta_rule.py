"""The chunked gated delta rule as preflight steps it: the same memory, a fraction of the operators.

:func:`~hyper_parallel.models.qwen3_5.delta_rule.chunk_gated_delta_rule` runs a Python loop over
the sequence's chunks of 64, a dozen operators each, forward and backward: at 4096 tokens most of
a Gated DeltaNet layer's fake operators, each a fraction of a millisecond of fake dispatch, and
most of a role's preflight time. The simulation (:func:`~.fake_world.fake_world`) steps
:func:`chunk_gated_delta_rule` here instead: the model's function itself, given another chunk
loop (:func:`middle_as_one`) that runs the first chunk and the last :data:`LAST_CHUNKS` by the
model's :func:`~hyper_parallel.models.qwen3_5.delta_rule.chunk_step` and the ones between as one
operator (:class:`_Chunks`) that holds what they hold. This module has no math of the rule: only
that operator, which knows what a chunk's step makes, keeps and saves.

**Why that is exact.** The loop's first chunk and its last :data:`LAST_CHUNKS` run as in the
model, operator by operator; :class:`_Chunks` stands for the ones between. A chunk's memory is
what it leaves behind (its output, kept in ``outs`` until the stack; what autograd saves: its
``delta``, the state it multiplies, the inputs it slices or the matmuls' copies of the slices;
under selective checkpointing, the matmul outputs the policy keeps) and the working memory it
holds above that for a moment. Every middle chunk leaves the same and works the same, so in the
forward the live bytes only grow through them and the next chunk, run as in the model, peaks
above all of them; in the backward each frees what it saved, so the chunks the backward meets
first peak above them (the last chunk's state update is dead unless the final state is returned:
the third from the end is the first whose backward adds into every input's gradient).
:class:`_Chunks` makes exactly what the middle chunks leave and nothing more at any instant, in
each way a step treats saved tensors: plain autograd keeps them; an activation checkpoint's
forward drops them and its recomputation keeps them until the backward reads them; a selective
checkpoint keeps its policy's outputs in the forward and hands them back in the recomputation.
Its backward makes the gradient of the state entering the middle and nothing else: the middle
chunks' shares of the inputs' gradients add into tensors the other chunks' backward made.
``tests/torch/ut/preflight/test_delta_rule_surrogate.py`` holds the two to the same live bytes at
every boundary and the same peaks inside, over shapes and checkpointing modes; every shipped
recipe's preflight is the same to the byte with either.

Its values are garbage (``empty``): it runs on fake tensors only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

# The module, not its names: the chunk step is looked up on each call, so the simulation always
# steps the model's (tests patch it to see that).
from hyper_parallel.models.qwen3_5 import delta_rule as model

#: Chunks at the end of the loop stepped operator by operator (see the module docstring).
LAST_CHUNKS = 3


def chunk_gated_delta_rule(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The model's :func:`~hyper_parallel.models.qwen3_5.delta_rule.chunk_gated_delta_rule` (the
    same arguments), its chunks stepped by :func:`middle_as_one`."""
    return model.chunk_gated_delta_rule(*args, loop=middle_as_one, **kwargs)


def middle_as_one(operands: model.ChunkOperands, carry: model.Carry) -> torch.Tensor:
    """A :data:`~hyper_parallel.models.qwen3_5.delta_rule.ChunkLoop`: chunk 0 and the last
    :data:`LAST_CHUNKS` by the model's ``chunk_step``, chunks ``1 .. N - 1 - LAST_CHUNKS`` as one
    :class:`_Chunks`; with no chunk between, the model's loop."""
    n = operands.count
    middle = n - 1 - LAST_CHUNKS
    if middle <= 0:
        return model.every_chunk(operands, carry)
    model.chunk_step(operands, 0, carry)
    middle_operands = (operands.state_read, operands.q_decayed, operands.intra,
                       operands.k_to_end, operands.chunk_decay)
    kept = (torch.is_grad_enabled() and _saved_tensors_kept()
            and any(t.requires_grad for t in (carry.state, *middle_operands)))
    span, carry.state, carry.delta = _Chunks.apply(carry.state, *middle_operands, middle, kept)
    carry.outs.append(span)
    for i in range(1 + middle, n):
        model.chunk_step(operands, i, carry)
    return _stack(carry.outs)


def _stack(outs: list[torch.Tensor]) -> torch.Tensor:
    """The chunks' outputs as one ``(B, H, N, c, Dv)`` tensor, the middle chunks' one
    ``(B, H, middle, c, Dv)`` entry of ``outs`` among the others' ``(B, H, c, Dv)``: concatenated,
    the same bytes as the model's stack."""
    return torch.cat([o if o.dim() == 5 else o.unsqueeze(2) for o in outs], dim=2)


def _saved_tensors_kept() -> bool:
    """Whether autograd keeps what an operator saves: yes, unless the forward of a
    (non-reentrant) activation checkpoint is running, whose hooks keep a placeholder and
    recompute the tensor in the backward."""
    hooks = torch._C._autograd._top_saved_tensors_default_hooks(False)
    return hooks is None or not hooks[0].__qualname__.startswith("_checkpoint_hook.")


def _kept_by_selective_checkpoint(op: Any) -> bool:
    """Whether a selective activation checkpoint running now keeps ``op``'s output: made in its
    forward and kept, then handed back by its recomputation instead of running ``op``. The
    engine's one policy (:func:`~hyper_parallel.models.qwen3_5.activation_checkpoint.apply_ac`)
    keeps the outputs of ``SAC_SAVED_OPS``; the recomputation asks no policy, so neither can
    this."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    from torch.utils.checkpoint import _CachedTorchDispatchMode, _CachingTorchDispatchMode

    from hyper_parallel.models.qwen3_5.activation_checkpoint import SAC_SAVED_OPS

    return op in SAC_SAVED_OPS and any(
        isinstance(mode, (_CachingTorchDispatchMode, _CachedTorchDispatchMode))
        for mode in _get_current_dispatch_mode_stack())


def _broadcast(like: torch.Tensor, *shape: int) -> torch.Tensor:
    """A tensor of ``shape`` that allocates nothing: one element of ``like``, expanded."""
    return like.as_strided((), (), like.storage_offset()).expand(*shape)


def _copied(operand: torch.Tensor) -> bool:
    """Whether a chunk's slice ``operand[:, :, i]`` is copied by the matmul it goes into:
    ``matmul`` reshapes its ``(B, H, r, c)`` operands to ``(B * H, r, c)``, a view only when
    ``B`` and ``H`` merge (``q_decayed`` and ``k_to_end`` keep the sequence-major layout of the
    projections when there are as many key heads as value heads: copied for ``B > 1``)."""
    b, h = operand.shape[:2]
    return b > 1 and h > 1 and operand.stride(0) != operand.stride(1) * h


class _Chunks(torch.autograd.Function):
    """Chunks ``1 .. middle`` of the loop in one operator (see the module docstring): from the
    state entering chunk 1 to the state after chunk ``middle``, the chunks' outputs and the last
    ``delta`` (which the model's loop variable holds until the next chunk replaces it)."""

    @staticmethod
    def forward(ctx: Any, state: torch.Tensor, state_read: torch.Tensor,
                q_decayed: torch.Tensor, intra: torch.Tensor, k_to_end: torch.Tensor,
                chunk_decay: torch.Tensor, middle: int, kept: bool):
        if not isinstance(state, FakeTensor):
            raise TypeError("preflight's delta rule makes no values: fake tensors only")
        batch, heads, _, c, dk = state_read.shape
        dv = state.shape[-1]
        shape = (batch, heads)
        # The slices each chunk multiplies (state_read and q_decayed by the state, intra and
        # k_to_end^T by delta) and saves: a view of the whole input, or the matmul's copy.
        operands = (state_read, q_decayed, intra, k_to_end)
        copied = sum(t.shape[-2] * t.shape[-1] for t in operands if _copied(t))
        viewed = [t for t in operands if not _copied(t)]

        # What a selective checkpoint keeps of the chunks' operators (elements per chunk and
        # (B, H) row), by the same operators: made and kept in its forward, handed back in its
        # recomputation (and let go here, as the chunks let go of them, before anything below
        # is made: the chunks make what replaces them one by one).
        aten = torch.ops.aten
        for op, numel in ((aten.bmm.default, (3 * c + dk) * dv),  # 3 (c, Dv) and a (Dk, Dv)
                          (aten.sub.Tensor, c * dv),  # delta
                          (aten.add.Tensor, (c + dk) * dv),  # the chunk's output, the state
                          (aten.mul.Tensor, dk * dv),  # the decayed state
                          (aten.clone.default, copied)):  # the matmuls' copies
            if numel and _kept_by_selective_checkpoint(op):
                total = (batch * heads, middle * numel)
                if op is aten.bmm.default:
                    op(_broadcast(state, total[0], total[1] // dv, 1),
                       _broadcast(state, total[0], 1, dv))
                else:
                    op(*(_broadcast(state, *total),) * (1 if op is aten.clone.default else 2))

        def saved(*size: int) -> torch.Tensor:
            """What the chunks save: made when autograd keeps it, else a placeholder of its
            shape (a checkpoint compares the two). The same operators either way: a selective
            checkpoint's recomputation replays the forward's operators one for one."""
            made = state.new_empty(*size) if kept else state.new_empty(0)
            placeholder = _broadcast(state, *size)
            return made if kept else placeholder

        deltas = saved(*shape, middle - 1, c, dv)  # each chunk's delta but the last
        states = saved(*shape, middle - 1, dk, dv)  # the states they multiply but the first
        copies = saved(*shape, middle, copied)
        outs = state.new_empty(*shape, middle, c, dv)
        last_delta = state.new_empty(*shape, c, dv)
        new_state = state.new_empty(*shape, dk, dv)
        ctx.mark_non_differentiable(last_delta)
        ctx.save_for_backward(state, chunk_decay, *viewed, deltas, states, copies, last_delta)
        return outs, new_state, last_delta

    @staticmethod
    def backward(ctx: Any, *grads: Any):
        # Every saved tensor is read (a checkpoint lets go of its recomputed copy on the read)
        # and goes with this node, as the chunks' go with theirs.
        state = ctx.saved_tensors[0]
        return torch.empty_like(state), None, None, None, None, None, None, None


__all__ = ["LAST_CHUNKS", "chunk_gated_delta_rule", "middle_as_one"]
