"""A tensor's full value on one rank only: how the Hugging Face export moves a weight to the rank
that writes it.

``DTensor.full_tensor()`` all-gathers: every rank of the mesh ends up holding the whole tensor
(for 397B-A17B a layer's stacked expert weight is 17 GB in fp32), while only the rank that
writes the tensor's file needs it. :func:`gather_to` moves the shards to that rank alone.

* **The layout is DTensor's own.** Each rank's shard is a box of the full tensor (its shape and
  offset), as DTensor and DCP (which saves every checkpoint by these boxes) lay it out from the
  mesh coordinate and the placements: ``torch.chunk``'s split for ``Shard``, nothing for
  ``Replicate``, torch's ``_compute_local_shape_and_global_offset`` for FSDP over TP's
  ``_StridedShard``. The writer computes every rank's box itself: no rank sends a description
  of its shard.
* **The bytes go to the writer only**, with ``torch.distributed.gather`` over the mesh's own
  groups (no new communicator), one mesh dimension at a time, the last first: along a sharded
  dimension the ranks send their pieces to the rank at the writer's coordinate; along a
  replicated one nothing moves (the rank at the writer's coordinate holds the same values and
  the others drop out). A mesh that does not hold the writer is a replica of the one that does
  (data parallelism without FSDP): its ranks send nothing.
* **In pieces.** Every rank sends a piece of the same size (uneven shards are padded) and the
  writer receives at most ``piece_bytes`` on the device at a time, then copies each rank's part
  into the full tensor on the host. NCCL serves CUDA tensors only, so a piece is staged on the
  mesh's device (a CPU-offloaded shard too); gloo's is the host.
* **In the written dtype.** A piece is cast as it is packed, so a bf16 export moves and holds
  half the bytes of the fp32 weights it is made from.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import torch

from .errors import CheckpointError

#: The most a writer receives on its device in one gather (all ranks' pieces together).
PIECE_BYTES = 256 * 2**20

__all__ = ["PIECE_BYTES", "gather_to"]


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _host(tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    return tensor.detach().to("cpu", dtype=dtype)


def gather_to(tensor: torch.Tensor, writer: int, dtype: torch.dtype | None = None, *,
              piece_bytes: int | None = None) -> torch.Tensor | None:
    """``tensor``'s full value on the host of global rank ``writer``, in ``dtype`` (its own when
    None); None on every other rank.

    Collective for a DTensor whose mesh holds ``writer``: every rank of that mesh calls it, in
    the same order (the module docstring says what moves). No communication for a plain tensor
    (each rank holds it whole) or a DTensor on a mesh without ``writer``."""
    from torch.distributed.tensor import DTensor

    me = _rank()
    if not isinstance(tensor, DTensor):
        return _host(tensor, dtype) if me == writer else None
    mesh = tensor.device_mesh
    # Coordinates from the mesh's ranks as plain integers: no tensor op (the CPU check of
    # tests/helpers/fake_cuda runs all of this under a fake tensor mode).
    ranks = _RankGrid(mesh.mesh.tolist())
    to = ranks.coordinate(writer)
    if to is None:
        return None  # a replica: the writer gathers the copy on its own mesh
    mine = ranks.coordinate(me)
    placements = tuple(tensor.placements)
    if any(p.is_partial() for p in placements):
        raise CheckpointError(
            f"HF export: a weight has a pending reduction ({placements}); only sharded and "
            "replicated weights can be exported")
    sharded = [k for k, p in enumerate(placements) if not p.is_replicate()]
    if not sharded:
        return _host(tensor.to_local(), dtype) if me == writer else None
    return _Gather(tensor, mesh, ranks, placements, sharded, mine, to, dtype,
                   PIECE_BYTES if piece_bytes is None else piece_bytes).run()


class _RankGrid:
    """A mesh's global ranks (``mesh.mesh.tolist()``), looked up both ways."""

    def __init__(self, nested: Any) -> None:
        self.nested = nested
        self._coords: dict[int, tuple[int, ...]] = {}
        self._walk(nested, ())

    def _walk(self, nested: Any, at: tuple[int, ...]) -> None:
        if isinstance(nested, list):
            for i, inner in enumerate(nested):
                self._walk(inner, (*at, i))
        else:
            self._coords[int(nested)] = at

    def coordinate(self, rank: int) -> tuple[int, ...] | None:
        return self._coords.get(rank)

    def rank(self, coordinate: Sequence[int]) -> int:
        nested = self.nested
        for c in coordinate:
            nested = nested[c]
        return int(nested)


def _box(shape: tuple[int, ...], mesh_shape: tuple[int, ...], coordinate: Sequence[int],
         placements: tuple) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shape and offset of the shard at ``coordinate``: DTensor's (and DCP's) layout --
    ``torch.chunk``'s split of each sharded dimension, mesh dimension by mesh dimension.
    Computed with integers for ``Shard`` and ``Replicate`` (no tensor op); a strided shard
    (FSDP over TP on one dimension) is left to torch's own function."""
    from torch.distributed.tensor import Shard

    if any(not p.is_replicate() and type(p) is not Shard for p in placements):
        from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset

        size, offset = _compute_local_shape_and_global_offset(shape, mesh_shape,
                                                              list(coordinate), placements)
        return tuple(size), tuple(offset)
    size, offset = list(shape), [0] * len(shape)
    for k, placement in enumerate(placements):
        if placement.is_replicate():
            continue
        dim, n = placement.dim, mesh_shape[k]
        chunk = -(-size[dim] // n)
        start = min(coordinate[k] * chunk, size[dim])
        stop = min(start + chunk, size[dim])
        offset[dim] += start
        size[dim] = stop - start
    return tuple(size), tuple(offset)


class _Gather:
    """One DTensor gathered to one rank (:func:`gather_to`)."""

    def __init__(self, tensor, mesh, ranks: _RankGrid, placements: tuple, sharded: list[int],
                 mine: tuple[int, ...], to: tuple[int, ...], dtype: torch.dtype | None,
                 piece_bytes: int) -> None:
        self.mesh, self.ranks, self.sharded, self.mine, self.to = mesh, ranks, sharded, mine, to
        self.dtype = tensor.dtype if dtype is None else dtype
        # A 0-d tensor is one element: every placement of it replicates (handled above).
        self.shape = tuple(tensor.shape)
        local = tensor.to_local()
        self.local = local.reshape(local.shape if self.shape else (1,))
        self.device = (self.local.device if self.local.device.type == mesh.device_type
                       else torch.device(mesh.device_type))
        # Every rank's box, in the order the gathers stack them: row-major over the sharded
        # mesh dimensions (the replicated ones at the writer's coordinate).
        self.coords = [
            tuple(combo[sharded.index(k)] if k in sharded else to[k] for k in range(mesh.ndim))
            for combo in itertools.product(*(range(mesh.size(k)) for k in sharded))
        ]
        self.boxes = [_box(self.shape, tuple(mesh.shape), c, placements) for c in self.coords]
        box_shapes = [tuple(s) for s, _ in self.boxes]
        self.template = tuple(max(dims) for dims in zip(*box_shapes))
        self.pieces = _pieces(self.template, len(self.coords),
                              self.dtype.itemsize, piece_bytes)

    # -------------------------------------------------------------------- the collective
    def run(self) -> torch.Tensor | None:
        writes = self.mine == self.to
        full = torch.empty(self.shape, dtype=self.dtype, device="cpu") if writes else None
        if math.prod(self.template) == 0:
            return full  # nothing anywhere (the same on every rank: from the shapes alone)
        flat = None if full is None else full.reshape(full.shape if self.shape else (1,))
        split, rows, numel = self.pieces
        for fixed in itertools.product(*(range(n) for n in self.template[:split])):
            for start in range(0, self.template[split], rows):
                piece = self._pack(self.local, fixed, split, start, rows, numel)
                held = self._gather(piece.unsqueeze(0))
                if held is not None:
                    self._unpack(flat, held.to("cpu"), fixed, split, start, rows)
        return full

    def _pack(self, local: torch.Tensor, fixed: tuple[int, ...], split: int, start: int,
              rows: int, numel: int) -> torch.Tensor:
        """This rank's part of one piece, padded to the piece's size, in the written dtype."""
        piece = torch.empty(numel, dtype=self.dtype, device=self.device)
        part = _part(local.shape, fixed, split, start, rows)
        if part is not None:
            data = local[part]
            piece[:data.numel()].view(data.shape).copy_(data)
        return piece

    def _gather(self, held: torch.Tensor) -> torch.Tensor | None:
        """``held`` (this rank's pieces) stacked with its peers' toward the writer, one mesh
        dimension at a time; the writer's ``[ranks, piece]``, None elsewhere."""
        import torch.distributed as dist

        mesh = self.mesh
        for k in reversed(range(mesh.ndim)):
            if k not in self.sharded:
                if self.mine[k] != self.to[k]:
                    return None  # a replica along k: the rank at the writer's coordinate sends
                continue
            dst = list(self.mine)
            dst[k] = self.to[k]
            dst_rank = self.ranks.rank(dst)
            group = mesh.get_group(k)
            if self.mine[k] != self.to[k]:
                dist.gather(held, None, dst=dst_rank, group=group)
                return None
            out = torch.empty((mesh.size(k), *held.shape), dtype=held.dtype, device=held.device)
            dist.gather(held, list(out.unbind(0)), dst=dst_rank, group=group)
            held = out.reshape(-1, held.shape[-1])
        return held

    def _unpack(self, full: torch.Tensor, held: torch.Tensor, fixed: tuple[int, ...],
                split: int, start: int, rows: int) -> None:
        for i, (shape, offset) in enumerate(self.boxes):
            shape = tuple(shape) or (1,)
            offset = tuple(offset) or (0,)
            part = _part(shape, fixed, split, start, rows)
            if part is None:
                continue
            size = [len(range(*p.indices(n))) if isinstance(p, slice) else None
                    for p, n in zip(part, shape)]
            data_shape = [n for n in size if n is not None]
            target = tuple(
                slice(o + p.start, o + p.start + n) if isinstance(p, slice) else o + p
                for p, o, n in zip(part, offset, size)
            )
            full[target].copy_(held[i, :math.prod(data_shape)].view(data_shape))


def _pieces(template: Sequence[int], ranks: int, itemsize: int,
            piece_bytes: int) -> tuple[int, int, int]:
    """How a shard is cut into pieces: ``(split, rows, numel)`` -- a piece fixes one index of
    each dimension before ``split``, takes ``rows`` indices of ``split`` and all of the rest,
    so that the ``ranks`` pieces of one gather come to at most ``piece_bytes`` (one element
    per rank at least); ``numel`` is a piece's size in elements."""
    ndim = len(template) or 1
    dims = tuple(template) or (1,)
    for split in range(ndim):
        inner = math.prod(dims[split + 1:])
        if inner * ranks * itemsize <= piece_bytes or split == ndim - 1:
            rows = max(1, min(dims[split], piece_bytes // max(1, inner * ranks * itemsize)))
            return split, rows, rows * inner
    raise AssertionError("unreachable")


def _part(shape: Sequence[int], fixed: tuple[int, ...], split: int, start: int,
          rows: int) -> tuple | None:
    """The index of one piece within a shard of ``shape`` (None: the shard has no part in
    it -- an uneven shard, smaller than the template of the pieces)."""
    if any(f >= n for f, n in zip(fixed, shape)) or start >= shape[split]:
        return None
    stop = min(start + rows, shape[split])
    return (*fixed, slice(start, stop), *(slice(0, n) for n in shape[split + 1:]))
