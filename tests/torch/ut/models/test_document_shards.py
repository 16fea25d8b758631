"""A packed batch's documents under context parallelism (issue 46): each rank's
:class:`~hyper_parallel.utils.documents.DocumentShard`, one process.

* ``split_sequence`` hands every rank its part of the documents made from the whole rows: the
  shard's starts (its first token a start only where a document begins exactly there) and
  whether it continues the previous shard's document;
* the short convolution over a shard with the previous shard's last tokens before it
  (``with_halo``) is the whole rows' convolution within documents, and the delta rule run
  shard after shard, each from the state the previous one hands on and resetting at the
  shard's own starts, is the whole rows' -- for any packing, any boundary;
* fla's variable-length form of a shard's state-passing run (a stand-in on the CPU) hands
  each row's incoming state to its first segment only where the row continues its document;
* the model config lets ``block_causal`` train under context parallelism, and refuses it
  together with pipeline parallelism.

The distributed forms (the all-to-alls, the gathered state maps) are held to the one-rank
layer on packed rows in ``tests/torch/st/qwen3_5/test_context_parallel.py``.
"""

from __future__ import annotations

import types
from itertools import pairwise

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hyper_parallel.data import split_sequence
from hyper_parallel.models.qwen3_5 import kernels
from hyper_parallel.models.qwen3_5.delta_rule import chunk_gated_delta_rule
from hyper_parallel.models.qwen3_5.documents import conv_within_documents
from hyper_parallel.models.qwen3_5.kernels import causal_depthwise_conv_silu
from hyper_parallel.models.qwen3_5.protocol import flavor_config
from hyper_parallel.runtime.step import DOCUMENTS
from hyper_parallel.utils.documents import Documents, DocumentShard

KERNEL = 4  # the convolution's window: a halo of 3 tokens


@st.composite
def packed_rows(draw, min_shard: int = KERNEL):
    """``(parts, positions (B, S))``: rows of documents of 1 to 40 tokens (a one-token
    document, and a padded tail of zeros, stay with the document before them), ``S`` a
    multiple of ``parts`` with shards of at least ``min_shard`` tokens."""
    parts = draw(st.sampled_from([2, 4]))
    seq = parts * draw(st.integers(min_shard, 40))
    rows = []
    for _ in range(draw(st.integers(1, 3))):
        pieces, left = [], seq
        while left:
            n = min(left, draw(st.integers(1, 40)))
            pieces.append(torch.arange(n) if draw(st.integers(0, 5)) else torch.zeros(n))
            left -= n
        rows.append(torch.cat(pieces).long())
    return parts, torch.stack(rows)


@settings(max_examples=40, deadline=None)
@given(packed_rows(min_shard=1))
def test_each_shard_carries_its_part_of_the_whole_rows(case):
    parts, positions = case
    rows, seq = positions.shape
    whole = Documents.from_positions(positions)
    batch = {"input_ids": torch.zeros_like(positions), "labels": torch.zeros_like(positions),
             "position_ids": positions, DOCUMENTS: whole}
    size = seq // parts
    for rank in range(parts):
        shard = split_sequence(batch, rank, parts)[DOCUMENTS]
        start = rank * size
        assert isinstance(shard, DocumentShard) and shard.whole is whole
        assert (shard.start, shard.stop, shard.max_per_row) == (start, start + size,
                                                                 whole.max_per_row)
        assert torch.equal(shard.starts, whole.starts[:, start:start + size])
        # Whether the shard's first token continues a document: never on rank 0; elsewhere
        # exactly where no document begins there (a shard's own positions could not say:
        # a padded zero, or a start whose next position is in the next shard).
        assert shard.continues == [rank > 0 and not whole.starts[r, start].item()
                                   for r in range(rows)]
        segments = shard.segments()
        assert segments.shape == (rows, size)
        assert torch.equal(segments.starts[:, 1:], shard.starts[:, 1:])
        assert segments.starts[:, 0].all()


@settings(max_examples=30, deadline=None)
@given(packed_rows(), st.integers(0, 2**16))
def test_the_shards_convolve_and_recur_as_the_whole_rows(case, seed):
    parts, positions = case
    rows, seq = positions.shape
    gap = KERNEL - 1
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, seq, 6, generator=gen)
    weight = torch.randn(6, 1, KERNEL, generator=gen)
    q, k = (torch.randn(rows, seq, 1, 4, generator=gen) for _ in range(2))
    v = torch.randn(rows, seq, 2, 3, generator=gen)
    g, beta = -torch.rand(rows, seq, 2, generator=gen), torch.rand(rows, seq, 2, generator=gen)
    whole = Documents.from_positions(positions)
    conv_whole = conv_within_documents(causal_depthwise_conv_silu, x, weight, whole)
    out_whole, _ = chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=8,
                                          document_starts=whole.starts)
    state = None
    for rank in range(parts):
        shard = whole.shard(rank, parts)
        mine = slice(shard.start, shard.stop)
        before = x[:, shard.start - gap:shard.start] if rank else x.new_zeros(rows, gap, 6)
        extended = torch.cat([before, x[:, mine]], dim=1)
        conv = conv_within_documents(causal_depthwise_conv_silu, extended, weight,
                                     shard.with_halo(gap))[:, gap:]
        torch.testing.assert_close(conv, conv_whole[:, mine], rtol=1e-6, atol=1e-6)
        out, state = chunk_gated_delta_rule(
            *(t[:, mine] for t in (q, k, v, g, beta)), chunk_size=8, initial_state=state,
            output_final_state=True, document_starts=shard.starts)
        torch.testing.assert_close(out, out_whole[:, mine], rtol=1e-5, atol=1e-5)


def _fla_stand_in(q, k, v, g, beta, *, scale, initial_state, output_final_state,
                  use_qk_l2norm_in_kernel, cu_seqlens=None, cu_seqlens_cpu=None):
    """fla's varlen contract on the CPU: batch 1, one initial and final state per segment."""
    assert q.shape[0] == 1 and initial_state.shape[0] == cu_seqlens.numel() - 1
    outs, finals = [], []
    for i, (a, b) in enumerate(pairwise(cu_seqlens.tolist())):
        out, final = chunk_gated_delta_rule(*(t[:, a:b] for t in (q, k, v, g, beta)),
                                            initial_state=initial_state[i:i + 1],
                                            output_final_state=True)
        outs.append(out)
        finals.append(final)
    return torch.cat(outs, dim=1), torch.cat(finals)


def test_fla_state_passing_hands_the_state_to_a_continued_document_only():
    # Row 0 continues its document into shard 1 (positions 40..79 of 80); row 1 begins one
    # exactly at it; both begin more inside.
    positions = torch.cat([torch.arange(30), torch.arange(20), torch.arange(30)]).expand(2, -1)
    positions = positions.clone()
    positions[1, 40:] = torch.cat([torch.arange(25), torch.arange(15)])
    shard = Documents.from_positions(positions).shard(1, 2)
    assert shard.continues == [True, False]
    gen = torch.Generator().manual_seed(3)
    q, k = (torch.randn(2, 40, 1, 4, generator=gen) for _ in range(2))
    v = torch.randn(2, 40, 2, 3, generator=gen)
    g, beta = -torch.rand(2, 40, 2, generator=gen), torch.rand(2, 40, 2, generator=gen)
    incoming = torch.randn(2, 2, 4, 3, generator=gen)
    got = kernels._fla_delta_rule_with_shard_state(_fla_stand_in)(
        q, k, v, g, beta, incoming, documents=shard)
    want = kernels.TORCH_KERNELS.delta_rule_with_state(q, k, v, g, beta, incoming,
                                                       documents=shard)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_context_parallelism_is_lifted_with_a_pipeline_too():
    """``block_causal`` trains under context parallelism, with a pipeline as well (each
    pipeline micro-batch carries its rows' shard of their documents,
    ``tests/torch/ut/trainer/test_pipeline_documents.py``)."""
    def trainer(**degrees):
        return types.SimpleNamespace(parallelism=types.SimpleNamespace(**degrees))

    config = flavor_config("tiny").replace(attn_mask_type="block_causal")
    config.update_from_config(trainer_config=trainer(context_parallel_degree=2))
    config.update_from_config(trainer_config=trainer(context_parallel_degree=2,
                                                     pipeline_parallel_degree=2))
