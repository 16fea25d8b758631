"""The documents of packed rows: where each one starts, made once per micro-batch on the host.

A packed row holds several documents one after another. Its ``position_ids`` restart at 0
where each document begins (the convention of transformers' ``DataCollatorWithFlattening``
and of torchtitan), and that is the only place the boundaries come from:
:meth:`Documents.from_positions` reads them, with tensor operations over the whole batch (no
Python loop per token), into the one object every token mixer of a ``block_causal`` model
reads (``model.attn_mask_type``): the full attention, the Gated DeltaNet's short convolution
and its delta-rule state, each of which must stop at a boundary for the documents to stay
apart (the rotary positions restart with the ``position_ids`` themselves).

The step makes it from the micro-batch's host ``position_ids`` before the batch moves to the
device, so that the host values kernels need (the offsets, the longest document) are known
without asking the device; :meth:`Documents.to` then copies the tensors to the device once
per forward, and every layer (and an activation-checkpointing recompute) reads that copy.

A token starts a document when its position is 0 and the next token's is 1, or when it is a
row's first token (torchtitan's rule, ``get_attention_masks``). The "next is 1" part keeps a
run of zeros in one piece: the loader pads ``position_ids`` with 0, and a padded tail would
otherwise make as many one-token documents as it has pad tokens. Such a run (and a
one-token document, whose position 0 the next document's 0 follows) stays in the document
before it; neither holds a label that is trained (padding is ignored, and the collator ignores
every document's first token), and no later document sees it.

:class:`Documents` is a plain object, not a tensor or a container torch knows: FSDP2's root
pre-forward, which moves every tensor of a forward's arguments to the device, passes it as it
is (like :class:`~hyper_parallel.utils.host_data.HostTensor`).
"""

from __future__ import annotations

from itertools import pairwise

import torch

__all__ = ["DocumentShard", "Documents"]

_INT32_MAX = 2**31 - 1


class Documents:
    """The documents of a batch of ``B`` rows of ``S`` tokens (module docstring).

    * ``starts`` -- ``(B, S)`` bool: token ``t`` of a row begins a document (the first token
      of every row does). On the host as made; on the device after :meth:`to`.
    * ``cu_seqlens`` -- ``(N + 1,)`` int32: where each of the batch's ``N`` documents begins
      in the rows flattened to ``B * S`` tokens (row ``b`` begins at ``b * S``), then
      ``B * S`` -- the variable-length kernels' convention (flash-attention, fla). Beside
      ``starts``.
    * ``cu_seqlens_host`` -- the same offsets, always on the host: sizes and loops read them
      without waiting for the device.
    * ``max_length`` -- the longest document's length; ``max_per_row`` -- the most documents
      one row holds (Python ints).
    """

    __slots__ = (
        "_spaced",
        "cu_seqlens",
        "cu_seqlens_host",
        "max_length",
        "max_per_row",
        "starts",
    )

    def __init__(self, starts: torch.Tensor, cu_seqlens: torch.Tensor,
                 cu_seqlens_host: torch.Tensor, max_length: int, max_per_row: int) -> None:
        self.starts = starts
        self.cu_seqlens = cu_seqlens
        self.cu_seqlens_host = cu_seqlens_host
        self.max_length = max_length
        self.max_per_row = max_per_row
        self._spaced: dict[int, tuple[torch.Tensor, int]] = {}

    @classmethod
    def from_positions(cls, position_ids: torch.Tensor) -> Documents:
        """The documents of a batch whose ``position_ids`` are ``(B, S)``, or ``(3, B, S)``
        (the image-text model's three rows: a token is at 0 only when all three are, so their
        largest value is read).

        Made on the host: ``position_ids`` on a device are copied back first, which waits for
        the device (the step passes the batch's host positions, before they move)."""
        positions = position_ids
        if positions.dim() == 3:
            positions = positions.amax(dim=0)
        if positions.dim() != 2 or positions.is_floating_point():
            raise ValueError("position_ids must be an integer tensor (B, S) or (3, B, S), got "
                             f"{positions.dtype} {tuple(position_ids.shape)}")
        positions = positions.cpu()
        rows, seq = positions.shape
        if rows * seq > _INT32_MAX:
            raise ValueError(f"a batch of {rows} x {seq} tokens does not fit the int32 offsets "
                             "of the variable-length kernels; use fewer or shorter rows")
        starts = positions == 0
        starts[:, :-1] &= positions[:, 1:] == 1  # a run of zeros (padding) is not documents
        starts[:, -1] = False
        return cls.from_starts(starts)

    @classmethod
    def from_starts(cls, starts: torch.Tensor) -> Documents:
        """The documents of host rows whose ``(B, S)`` bool ``starts`` mark where each begins
        (a row's first token always begins one: it is set here)."""
        starts = starts.clone()
        starts[:, 0] = True
        rows, seq = starts.shape
        offsets = starts.reshape(-1).nonzero().squeeze(1)
        cu_seqlens = torch.cat([offsets, offsets.new_tensor([rows * seq])]).to(torch.int32)
        return cls(
            starts,
            cu_seqlens,
            cu_seqlens,
            max_length=int(cu_seqlens.diff().max()),
            max_per_row=int(starts.sum(dim=1).max()),
        )

    @property
    def count(self) -> int:
        """How many documents the batch holds (``N``)."""
        return self.cu_seqlens_host.numel() - 1

    @property
    def shape(self) -> tuple[int, int]:
        """``(B, S)``: the batch's rows and their length."""
        return tuple(self.starts.shape)

    def to(self, device: torch.device | str) -> Documents:
        """These documents with ``starts`` and ``cu_seqlens`` on ``device`` (the same object
        when they are there already); the host facts stay as they are."""
        if self.starts.device == torch.device(device):
            return self
        return Documents(
            self.starts.to(device, non_blocking=True),
            self.cu_seqlens.to(device, non_blocking=True),
            self.cu_seqlens_host,
            self.max_length,
            self.max_per_row,
        )

    def segments(self) -> list[tuple[int, int, int]]:
        """Every document as ``(row, start, stop)``: its tokens are ``start:stop`` of row
        ``row`` (host ints, in order)."""
        seq = self.shape[1]
        offsets = self.cu_seqlens_host.tolist()
        return [(a // seq, a % seq, b - (a // seq) * seq) for a, b in pairwise(offsets)]

    def spaced(self, gap: int) -> tuple[torch.Tensor, int]:
        """Where each token goes when ``gap`` empty slots are put before every document but a
        row's first: ``(index, length)``, ``index`` ``(B, S)`` int64 on ``starts``'s device
        (the token's slot in its spaced row) and ``length`` the spaced rows' length. A causal
        window of ``gap + 1`` tokens over a spaced row never reaches into another document
        (:func:`~hyper_parallel.models.qwen3_5.documents.conv_within_documents`). Made once
        per gap and kept."""
        if gap not in self._spaced:
            seq = self.shape[1]
            before = self.starts.cumsum(dim=1) - 1  # documents of the row begun before t's
            slots = torch.arange(seq, device=self.starts.device) + gap * before
            self._spaced[gap] = (slots, seq + gap * (self.max_per_row - 1))
        return self._spaced[gap]

    def __repr__(self) -> str:
        rows, seq = self.shape
        return (f"Documents({self.count} in {rows} x {seq} tokens, longest {self.max_length}, "
                f"on {self.starts.device})")

    def shard(self, rank: int, parts: int) -> DocumentShard:
        """Context-parallel rank ``rank``'s part of these (host) documents: positions
        ``[rank * S / parts, (rank + 1) * S / parts)`` of every row (:class:`DocumentShard`),
        what :func:`~hyper_parallel.data.split_sequence` hands the rank with its tokens."""
        return DocumentShard(self, rank, parts)


class DocumentShard:
    """The documents of one context-parallel shard: positions ``[start, stop)`` of every row
    (``S / parts`` of them, ``start = rank * S / parts``) of a batch whose documents are
    ``whole``.

    A shard alone cannot tell where its documents begin: its first token may continue a
    document of the previous shard, and whether its last token begins one depends on the
    next shard's first position. So every rank carries the whole rows' documents (``B * S``
    booleans and the offsets, made once on the host before the split; each rank loaded the
    whole rows anyway) and reads its part from them:

    * ``whole`` -- the rows' :class:`Documents`: what a mixer that holds every position after an
      exchange reads (Ulysses, and the all-gathered keys).
    * ``starts`` -- ``(B, s)`` bool: where a document begins in the shard, its first column
      True only where one begins exactly there (rank 0: always); False there means the shard
      continues the previous shard's document (the delta-rule state passed in is kept).
    * :meth:`with_halo` -- the documents of the shard with the ``gap`` tokens before it (the
      short convolution's window across the shard boundary).
    * :meth:`segments` -- the shard's documents as the variable-length kernels take a row
      (each row's first segment the piece it continues or the document it begins).

    Like :class:`Documents`, a plain object; :meth:`to` copies the tensors a forward reads.
    """

    __slots__ = ("_halos", "_host_starts", "_segments", "parts", "rank", "starts", "whole")

    def __init__(self, whole: Documents, rank: int, parts: int,
                 host_starts: torch.Tensor | None = None) -> None:
        seq = whole.shape[1]
        if seq % parts or not 0 <= rank < parts:
            raise ValueError(f"rows of {seq} tokens have no shard {rank} of {parts}")
        self.whole = whole
        self.rank = rank
        self.parts = parts
        # The whole rows' starts on the host: the halo's and segments' host facts read them.
        self._host_starts = whole.starts if host_starts is None else host_starts
        if self._host_starts.device.type != "cpu":
            raise ValueError("a DocumentShard is made from host documents")
        self.starts = whole.starts[:, self.start:self.stop]
        self._halos: dict[int, Documents] = {}
        self._segments: Documents | None = None

    @property
    def start(self) -> int:
        """The shard's first position in its row."""
        return self.rank * self.length

    @property
    def stop(self) -> int:
        return self.start + self.length

    @property
    def length(self) -> int:
        """``s``: the positions of the shard."""
        return self.whole.shape[1] // self.parts

    @property
    def max_per_row(self) -> int:
        """The most documents a whole row holds (1: the causal path is these documents)."""
        return self.whole.max_per_row

    @property
    def continues(self) -> list[bool]:
        """Per row: whether the shard's first token continues the previous shard's document
        (host; False on rank 0)."""
        return (~self._host_starts[:, self.start]).tolist()

    def to(self, device: torch.device | str) -> DocumentShard:
        """This shard with the tensors a forward reads on ``device`` (the same object when
        they are there already); the host facts stay."""
        if self.starts.device == torch.device(device):
            return self
        return DocumentShard(self.whole.to(device), self.rank, self.parts, self._host_starts)

    def with_halo(self, gap: int) -> Documents:
        """The documents of the rows ``[start - gap, stop)`` (rank 0: ``gap`` empty tokens
        before its rows, a document of their own), on the shard's device: a causal window of
        ``gap + 1`` tokens over the shard with the previous shard's last ``gap`` tokens before
        it reaches exactly the tokens of its own document. Made once per gap and kept."""
        if gap not in self._halos:
            host = self._host_starts
            if self.rank == 0:  # nothing before the row: a halo of its own
                starts = torch.cat([host.new_zeros(host.shape[0], gap), host[:, :self.stop]], 1)
            elif self.start >= gap:
                starts = host[:, self.start - gap:self.stop]
            else:
                raise ValueError(f"a window of {gap + 1} tokens reaches past the previous "
                                 f"shard of {self.length} tokens")
            self._halos[gap] = Documents.from_starts(starts).to(self.starts.device)
        return self._halos[gap]

    def segments(self) -> Documents:
        """The shard's rows as :class:`Documents` of their own (a row's first token begins its
        first segment, whether it begins a document or continues one), on the shard's
        device: the offsets a variable-length kernel steps the shard's documents by."""
        if self._segments is None:
            local = self._host_starts[:, self.start:self.stop]
            self._segments = Documents.from_starts(local).to(self.starts.device)
        return self._segments

    def __repr__(self) -> str:
        return f"DocumentShard({self.rank} of {self.parts} of {self.whole!r})"
