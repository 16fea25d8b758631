"""How the Qwen3.5 token mixers keep a packed row's documents apart (``attn_mask_type:
block_causal``), from the boundaries the batch carries
(:class:`~hyper_parallel.utils.documents.Documents`).

* Full attention (:func:`block_causal_attention`): a token attends to the earlier tokens of
  its own document. On CUDA in bf16 / fp16, torch's variable-length flash attention
  (``torch.nn.attention.varlen.varlen_attn``: the rows flattened, the documents' offsets
  ``cu_seqlens``, causal inside each); elsewhere (the CPU, fp32) scaled-dot-product attention
  once per document, causal, on that document's slice. Neither builds a mask: the work and the
  memory are those of the documents, never of an ``S x S`` mask of the row.
* The short convolution (:func:`conv_within_documents`): its window of ``K`` tokens is cleared
  at a document start -- the row is spaced out with ``K - 1`` zero tokens before each
  document, so any causal convolution kernel (the torch path's, causal-conv1d's, fla's) sees
  at a document's first tokens exactly the zeros it sees at a row's start, and the spacing is
  dropped from its output.
* The delta-rule state restarts at each document start: the torch path in
  :func:`~hyper_parallel.models.qwen3_5.delta_rule.chunk_gated_delta_rule`
  (``document_starts``), fla's kernel with ``cu_seqlens`` at batch 1
  (:mod:`~hyper_parallel.models.qwen3_5.kernels`).
* The rotary positions restart with the ``position_ids`` themselves.

Under context parallelism a rank holds a shard of every row and its documents as a
:class:`~hyper_parallel.utils.documents.DocumentShard` (made from the whole rows before the
split): the Ulysses forms run the functions above on the whole rows after their all-to-all
(``whole``); the all-gather attention attends its shard's queries to the gathered keys of
their documents (:func:`shard_attention`); state passing convolves the shard with the previous
shard's last tokens inside their documents (``with_halo``) and resets the state at the shard's
own starts (:mod:`.context_parallel`). A mixer under context parallelism handed documents made
from a shard's own positions refuses them (:func:`refuse_under_context_parallelism`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from hyper_parallel.utils.documents import Documents, DocumentShard
from hyper_parallel.utils.errors import ConfigError

__all__ = [
    "ATTN_MASK_TYPE_PATH",
    "block_causal_attention",
    "conv_within_documents",
    "refuse_under_context_parallelism",
    "shard_attention",
]

ATTN_MASK_TYPE_PATH = "model.attn_mask_type"
"""The field that asks for documents to be kept apart (named by every refusal)."""

#: The head sizes flash attention takes.
_FLASH_MAX_HEAD_DIM = 256


@functools.cache
def _varlen_attn() -> Callable | None:
    """``torch.nn.attention.varlen.varlen_attn`` where this torch has it, else None."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn


def _varlen_runs(q: torch.Tensor) -> bool:
    """Whether the variable-length flash kernel takes ``q`` (a CUDA tensor in bf16 / fp16
    with a head size flash attention has)."""
    return (q.is_cuda and q.dtype in (torch.bfloat16, torch.float16)
            and q.shape[-1] <= _FLASH_MAX_HEAD_DIM and q.shape[-1] % 8 == 0
            and _varlen_attn() is not None)


def block_causal_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, documents: Documents
) -> torch.Tensor:
    """Attention of every token to the earlier tokens of its own document.

    ``q`` ``(B, S, Hq, D)``, ``k`` / ``v`` ``(B, S, Hkv, D)`` (grouped: query head ``i`` reads
    key head ``i // (Hq / Hkv)``, as the causal path); returns ``(B, S, Hq * D)``.
    """
    batch, seq, heads, dim = q.shape
    grouped = heads != k.shape[2]
    if _varlen_runs(q):
        out = _varlen_attn()(
            q.reshape(batch * seq, heads, dim),
            k.reshape(batch * seq, -1, dim),
            v.reshape(batch * seq, -1, dim),
            documents.cu_seqlens,
            documents.cu_seqlens,
            documents.max_length,
            documents.max_length,
            scale=scale,
            window_size=(-1, 0),  # causal
            enable_gqa=grouped,
        )
        return out.reshape(batch, seq, heads * dim)
    # One causal attention per document over its own slice: exact, and the memory of the
    # largest document's scores at most (SDPA's math kernel on a CPU), not the row's.
    pieces = []
    for row, start, stop in documents.segments():
        doc_q, doc_k, doc_v = (t[row:row + 1, start:stop].transpose(1, 2) for t in (q, k, v))
        pieces.append(F.scaled_dot_product_attention(
            doc_q, doc_k, doc_v, is_causal=True, scale=scale, enable_gqa=grouped))
    out = torch.cat(pieces, dim=2)  # (1, Hq, B * S, D): the documents in row order
    return out.transpose(1, 2).reshape(batch, seq, heads * dim)


def conv_within_documents(
    conv: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    weight: torch.Tensor,
    documents: Documents,
) -> torch.Tensor:
    """``conv(x, weight)`` (a causal depthwise convolution, ``x`` ``(B, S, C)``, ``weight``
    ``(C, 1, K)``) whose window never reaches into an earlier document.

    The rows are spaced out with ``K - 1`` zero tokens before every document but their first
    (:meth:`~hyper_parallel.utils.documents.Documents.spaced`), convolved, and the tokens'
    outputs taken back: a document's first ``K - 1`` outputs are those of the document alone.
    Rows of one document each are convolved as they are."""
    gap = weight.shape[-1] - 1
    if gap == 0 or documents.max_per_row == 1:
        return conv(x, weight)
    batch, _, channels = x.shape
    slots, length = documents.spaced(gap)
    rows = torch.arange(batch, device=x.device).unsqueeze(1)
    spaced = x.new_zeros(batch, length, channels).index_put((rows, slots), x)
    return conv(spaced, weight)[rows, slots]


def shard_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, shard: DocumentShard
) -> torch.Tensor:
    """Attention of this shard's queries to the earlier tokens of their own documents, over
    the whole rows' keys (context parallelism's all-gather form).

    ``q`` ``(B, s, Hq, D)`` (positions ``[start, stop)``), ``k`` / ``v`` ``(B, S, Hkv, D)``;
    returns ``(B, s, Hq * D)``. Each document's queries in the shard attend to its keys from
    the document's start to the last query, causally (the mask aligned to the queries' global
    positions): the work and the memory are those of the shard's documents."""
    batch, length, heads, dim = q.shape
    grouped = heads != k.shape[2]
    start, stop = shard.start, shard.stop
    pieces = []
    for row, first, last in shard.whole.segments():
        a, b = max(first, start), min(last, stop)  # the document's queries in the shard
        if a >= b:
            continue
        doc_q = q[row:row + 1, a - start:b - start].transpose(1, 2)
        doc_k, doc_v = (t[row:row + 1, first:b].transpose(1, 2) for t in (k, v))
        if a == first:  # the whole document so far is in the shard: plain causal
            out = F.scaled_dot_product_attention(doc_q, doc_k, doc_v, is_causal=True,
                                                 scale=scale, enable_gqa=grouped)
        else:  # query a + i sees keys first .. a + i: the mask's bottom-right corner
            mask = torch.ones(b - a, b - first, dtype=torch.bool, device=q.device).tril(a - first)
            out = F.scaled_dot_product_attention(doc_q, doc_k, doc_v, attn_mask=mask,
                                                 scale=scale, enable_gqa=grouped)
        pieces.append(out)
    out = torch.cat(pieces, dim=2)  # (1, Hq, B * s, D): the shard's documents in row order
    return out.transpose(1, 2).reshape(batch, length, heads * dim)


def refuse_under_context_parallelism(mixer: str) -> None:
    """The ``ConfigError`` of a ``mixer`` under context parallelism handed documents made from
    its shard's own positions (a model called directly): a shard cannot tell whether its first
    token continues a document, nor whether its last begins one. The step makes them from the
    whole rows before the split (a :class:`~hyper_parallel.utils.documents.DocumentShard`)."""
    raise ConfigError(
        f"block_causal: the {mixer} runs under context parallelism but was handed the "
        "documents of its shard's own positions, which cannot say where the shard's documents "
        "begin; make them from the whole rows and split them with the sequence "
        "(Documents.from_positions(position_ids).shard(rank, parts), which split_sequence "
        "does for a batch's documents)",
        path=ATTN_MASK_TYPE_PATH,
    )
