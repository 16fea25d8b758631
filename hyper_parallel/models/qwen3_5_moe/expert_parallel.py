"""Expert parallelism: token dispatch to the ranks that own the experts, over all-to-all.

A mixture-of-experts block routes every token to ``k`` of ``E`` experts and sorts the resulting
token-slots by expert, so that ``tokens`` is ``[N, H]`` with rows grouped by *global* expert id
ascending (``counts[e]`` rows for expert ``e``, ``counts`` is ``[E]`` int64). With a dispatcher
the block calls::

    local_tokens, local_counts, handle = dispatcher.dispatch(tokens, counts)
    out_local = experts(local_tokens, local_counts)   # rows grouped by local expert
    out = dispatcher.combine(out_local, handle)        # [N, ...], the row order of ``tokens``

without one it runs every expert locally on ``tokens`` and ``counts`` (the same call with
``E_local = E``).

Under expert parallelism of degree ``ep`` over a process group, rank ``r`` owns the experts
``[r * E_local, (r + 1) * E_local)``, ``E_local = E / ep``; every rank holds tokens of its own.
:class:`AllToAllDispatcher` moves each row to the rank of its expert and back.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import DeviceMesh

__all__ = ["AllToAllDispatcher", "DispatchHandle"]


@dataclass(frozen=True)
class DispatchHandle:
    """What :meth:`AllToAllDispatcher.combine` needs to undo one :meth:`~AllToAllDispatcher.dispatch`."""

    input_splits: list[int]
    """Rows this rank sent to each rank of the group (in the group's rank order)."""
    output_splits: list[int]
    """Rows this rank received from each rank of the group."""
    local_index: torch.Tensor
    """``local_tokens = received[local_index]``: source-rank-major to local-expert-major."""
    inverse_index: torch.Tensor
    """``received = local_tokens[inverse_index]``: the inverse permutation."""


def _exclusive_cumsum(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x, 0) - x


def _joins_backward(x: torch.Tensor) -> torch.Tensor:
    """``x``, as a tensor that requires grad whenever grad mode is on.

    A collective's backward is a collective too, and autograd runs a node's backward only when
    one of its inputs requires grad. A rank whose input does not (tokens of a frozen embedding,
    a rank without tokens) would skip the backward all-to-all that the other ranks enter, and
    they would wait for it until the timeout. Making the input require grad on every rank keeps
    the backward collectives the same on all of them; the gradient it gets is dropped.
    """
    if torch.is_grad_enabled() and not x.requires_grad and x.is_floating_point():
        return x.detach().requires_grad_()
    return x


class AllToAllDispatcher:
    """Expert-parallel dispatch / combine over all-to-all on an EP process group.

    **What it communicates, in order.** :meth:`dispatch`:

    1. the per-expert row counts: ``counts.view(ep, E_local)`` row ``d`` goes to rank ``d``
       (``dist.all_to_all_single``, ``E_local`` int64 values each way), so every rank learns
       how many rows each source rank sends for each of its local experts;
    2. the splits to host, in one ``.tolist()`` (the only host synchronisation): rows sent to
       each rank (``counts`` summed per destination) and rows received from each;
    3. the token rows, ``all_to_all_single`` with those uneven splits, differentiable
       (:func:`torch.distributed._functional_collectives.all_to_all_single_autograd`; its
       backward is the all-to-all with the splits swapped). What arrives is source-rank-major
       (for each source rank, its rows of local expert 0, 1, ...); one gather (an index built
       with ``repeat_interleave``, no loop) reorders it local-expert-major, which is what the
       experts take, with ``local_counts`` = the received counts summed over source ranks.

    :meth:`combine` undoes it: the inverse gather (local-expert-major back to source-rank-major),
    then the reverse all-to-all (splits swapped), differentiable as well. Its output has the row
    order of the ``tokens`` given to :meth:`dispatch`. Backward runs the same two all-to-alls of
    token rows in reverse order (combine's, then dispatch's).

    **Why the splits go to host.** ``all_to_all_single`` takes its split sizes as Python ints:
    the backend needs them to size the receive buffer (its shape is the total received) and to
    lay out the send and receive offsets before the transfer, and on a GPU that means a
    device-to-host copy, i.e. a stream synchronisation. One ``.tolist()`` of the concatenated
    send and receive splits costs one synchronisation per dispatch; combine reuses them from
    the handle and needs none.

    Every rank of the group must call :meth:`dispatch` and :meth:`combine` (and backward) the
    same number of times in the same order, also a rank with no tokens; zero rows sent to or
    received from a rank, and experts with zero rows, are fine. In grad mode the inputs are made
    to require grad on every rank (see :func:`_joins_backward`) so that no rank skips a
    backward all-to-all the others wait in. Under activation checkpointing the recomputation
    repeats dispatch's collectives inside backward; that is fine as long as every rank of the
    group checkpoints the same blocks.

    Args:
        group: the EP process group, or a 1-D :class:`DeviceMesh` (its ``get_group()``).
        num_experts: ``E``, the global number of experts; a multiple of the group's size.
    """

    def __init__(self, group: dist.ProcessGroup | DeviceMesh, num_experts: int) -> None:
        if isinstance(group, DeviceMesh):
            if group.ndim != 1:
                raise ValueError(f"expert parallelism takes a 1-D mesh, got {group.ndim}-D "
                                 f"({group.mesh_dim_names}); pass mesh['ep']")
            group = group.get_group()
        self.group = group
        self.ep = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        if num_experts <= 0 or num_experts % self.ep:
            raise ValueError(f"num_experts={num_experts} must be a positive multiple of the "
                             f"expert-parallel degree {self.ep}")
        self.num_experts = num_experts
        self.num_local_experts = num_experts // self.ep

    @property
    def local_experts(self) -> range:
        """The global ids of the experts this rank runs."""
        start = self.rank * self.num_local_experts
        return range(start, start + self.num_local_experts)

    def dispatch(self, tokens: torch.Tensor, counts: torch.Tensor,
                 ) -> tuple[torch.Tensor, torch.Tensor, DispatchHandle]:
        """Send each row of ``tokens`` (``[N, H]``, grouped by global expert, ``counts[e]``
        rows for expert ``e``) to the rank owning its expert.

        Returns ``(local_tokens, local_counts, handle)``: the rows of this rank's experts from
        every rank, grouped by local expert (within one expert: by source rank, then in the
        source's order), ``local_counts`` (``[E_local]`` int64, on ``counts``' device) and the
        handle for :meth:`combine`."""
        ep, e_local = self.ep, self.num_local_experts
        if counts.shape != (self.num_experts,):
            raise ValueError(f"counts must have shape [{self.num_experts}], got "
                             f"{tuple(counts.shape)}")
        counts = counts.to(torch.int64).contiguous()
        # 1. counts: received[s, j] = rows source rank s sends for local expert j
        received = torch.empty_like(counts)
        dist.all_to_all_single(received, counts, group=self.group)
        sent = counts.view(ep, e_local)
        received = received.view(ep, e_local)
        # 2. the splits to host, one synchronisation
        splits = torch.cat([sent.sum(1), received.sum(1)]).tolist()
        input_splits, output_splits = splits[:ep], splits[ep:]
        if sum(input_splits) != tokens.shape[0]:
            raise ValueError(f"counts sum to {sum(input_splits)} rows, tokens has "
                             f"{tokens.shape[0]}")
        # 3. the rows
        rows = funcol.all_to_all_single_autograd(
            _joins_backward(tokens).contiguous(), output_splits, input_splits, self.group)
        local_index, inverse_index = self._local_order(received, sum(output_splits))
        local_tokens = rows.index_select(0, local_index)
        handle = DispatchHandle(input_splits, output_splits, local_index, inverse_index)
        return local_tokens, received.sum(0), handle

    def combine(self, out_local: torch.Tensor, handle: DispatchHandle) -> torch.Tensor:
        """Send the experts' output rows (``[M, ...]``, the row order of ``dispatch``'s
        ``local_tokens``) back to the ranks they came from; returns them in the row order of
        the ``tokens`` given to :meth:`dispatch`."""
        if out_local.shape[0] != handle.local_index.numel():
            raise ValueError(f"out_local has {out_local.shape[0]} rows, dispatch delivered "
                             f"{handle.local_index.numel()}")
        rows = _joins_backward(out_local).index_select(0, handle.inverse_index)
        out = funcol.all_to_all_single_autograd(
            rows.contiguous(), handle.input_splits, handle.output_splits, self.group)
        return funcol.wait_tensor(out)  # a plain tensor (not an AsyncCollectiveTensor)

    @staticmethod
    def _local_order(received: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The gather from the received order (source-rank-major: block ``(s, j)`` = the rows of
        local expert ``j`` from rank ``s``) to local-expert-major (blocks ``(j, s)``), and its
        inverse. Vectorised: each target block's rows are a run of consecutive source rows."""
        sizes = received.t().reshape(-1)  # block sizes in the target order (j, s)
        src_start = _exclusive_cumsum(received.reshape(-1)).view_as(received).t().reshape(-1)
        dst_start = _exclusive_cumsum(sizes)
        local_index = torch.arange(total, device=received.device) + torch.repeat_interleave(
            src_start - dst_start, sizes, output_size=total)
        inverse_index = torch.empty_like(local_index)
        inverse_index[local_index] = torch.arange(total, device=received.device)
        return local_index, inverse_index
