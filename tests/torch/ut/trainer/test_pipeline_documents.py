"""A pipeline step hands every micro-batch the documents of its own rows (``block_causal``).

* The step makes the documents of its rows once, on the host, and torch's schedule cuts them
  with the rows (:class:`~hyper_parallel.utils.documents.Documents` is a pytree node over its
  starts): each micro-batch's are exactly those its rows' ``position_ids`` give, whatever the
  rows' layouts and the number of micro-batches (a property over random packings).
* Through a real schedule (one stage, one process): the stage's forward receives each
  micro-batch's documents, made on the host, and the step's loss is the loss the step without
  pipelining computes from the same micro-batches, bit for bit, and the token-weighted mean of
  the documents' losses run alone; evaluation through the schedule likewise.

The pipeline layouts themselves (2 ranks, GPipe and 1F1B, on packed rows) are
``tests/torch/st/qwen3_5/test_pipeline.py``'s packed cases.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from hyper_parallel.utils.documents import Documents

IGNORE = -100


def _positions(rows) -> torch.Tensor:
    return torch.stack([torch.cat([torch.arange(n) for n in row]) for row in rows])


def _rows(lengths_per_row: list[list[int]], seq: int) -> list[list[int]]:
    """Each row's document lengths, its tail filled with one last document up to ``seq``."""
    out = []
    for lengths in lengths_per_row:
        kept, total = [], 0
        for n in lengths:
            if total + n < seq:
                kept.append(n)
                total += n
        out.append([*kept, seq - total])
    return out


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3),
       st.lists(st.lists(st.integers(1, 9), max_size=4), min_size=1, max_size=3))
def test_the_schedule_cuts_the_documents_with_the_rows(per_chunk, chunks, layouts):
    from torch.distributed.pipelining.microbatch import split_args_kwargs_into_chunks

    import hyper_parallel.runtime.pipeline_step  # noqa: F401  (registers the pytree node)

    seq = 12
    rows = _rows([layouts[i % len(layouts)] for i in range(per_chunk * chunks)], seq)
    positions = _positions(rows)
    ids = torch.arange(positions.numel()).reshape(positions.shape)
    _, kwargs = split_args_kwargs_into_chunks(
        (), {"input_ids": ids, "documents": Documents.from_positions(positions)}, chunks)
    assert len(kwargs) == chunks
    for piece, want_rows in zip(kwargs, torch.tensor_split(positions, chunks)):
        got, want = piece["documents"], Documents.from_positions(want_rows)
        assert isinstance(got, Documents)
        assert got.shape == tuple(piece["input_ids"].shape)
        assert torch.equal(got.starts, want.starts)
        assert got.cu_seqlens_host.tolist() == want.cu_seqlens_host.tolist()
        assert got.cu_seqlens_host.device.type == "cpu"
        assert (got.max_length, got.max_per_row) == (want.max_length, want.max_per_row)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([2, 4]), st.integers(1, 2), st.integers(1, 3), st.integers(1, 2),
       st.lists(st.lists(st.integers(1, 9), max_size=5), min_size=1, max_size=4))
def test_each_micro_batch_carries_its_rows_shard_under_context_parallelism(
        parts, per_chunk, chunks, accumulation, layouts):
    """Context x pipeline parallelism: every context-parallel rank splits each accumulation
    micro-batch as the trainer does (the whole rows' documents, then ``split_sequence``), the
    step concatenates them and the schedule cuts them into pipeline micro-batches. Each
    pipeline micro-batch on rank ``r`` then carries the shard ``r`` of its own rows'
    documents, at the positions of its own tokens; the ranks' shards reassemble into the
    micro-batch's documents (documents crossing a shard boundary included)."""
    import types

    from torch.distributed.pipelining.microbatch import split_args_kwargs_into_chunks

    from hyper_parallel.data import split_sequence
    from hyper_parallel.runtime.pipeline_step import concat_micro_batches, with_step_documents
    from hyper_parallel.runtime.step import DOCUMENTS, with_documents
    from hyper_parallel.utils.documents import DocumentShard

    seq = 12
    rows = per_chunk * chunks * accumulation
    positions = _positions(_rows([layouts[i % len(layouts)] for i in range(rows)], seq))
    ids = torch.arange(positions.numel()).reshape(positions.shape)
    batches = [{"input_ids": i, "labels": i, "position_ids": p}
               for i, p in zip(ids.chunk(accumulation), positions.chunk(accumulation))]
    model = types.SimpleNamespace(reads_documents=True)
    pipeline = types.SimpleNamespace(parts=[model])
    length = seq // parts
    pieces = []  # per rank: the schedule's micro-batches
    for rank in range(parts):
        own = [split_sequence(with_documents(model, b), rank, parts) for b in batches]
        step = with_step_documents(pipeline, concat_micro_batches(own, length))
        _, kwargs = split_args_kwargs_into_chunks(
            (), {k: step[k] for k in ("input_ids", DOCUMENTS)}, chunks)
        pieces.append(kwargs)
    for c, want_positions in enumerate(torch.tensor_split(positions, chunks)):
        want = Documents.from_positions(want_positions)
        shards = [pieces[rank][c][DOCUMENTS] for rank in range(parts)]
        for rank, shard in enumerate(shards):
            assert isinstance(shard, DocumentShard)
            assert (shard.rank, shard.parts) == (rank, parts)
            assert torch.equal(shard.whole.starts, want.starts)
            assert shard.whole.cu_seqlens_host.tolist() == want.cu_seqlens_host.tolist()
            tokens = pieces[rank][c]["input_ids"]
            assert tuple(shard.starts.shape) == tuple(tokens.shape)
            rows_ids = torch.tensor_split(ids, chunks)[c]
            assert torch.equal(tokens, rows_ids[:, rank * length:(rank + 1) * length])
            assert shard.continues == (~want.starts[:, rank * length]).tolist()
        assert torch.equal(torch.cat([s.starts for s in shards], dim=1), want.starts)


@pytest.fixture
def one_process_group():
    """A one-rank gloo group in this process (a pipeline stage needs a process group)."""
    if dist.is_initialized():
        pytest.skip("this process already has a process group")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


# Four rows of 16 tokens: documents shorter than the convolution window (1, 2, 3), a row of
# one document, a one-token document at a row's start.
ROWS = ((5, 2, 9), (3, 13), (16,), (1, 4, 11))


def _tiny_block_causal() -> torch.nn.Module:
    from hyper_parallel.models.qwen3_5 import Qwen3_5ForCausalLM
    from hyper_parallel.models.qwen3_5.configuration import FLAVORS

    torch.manual_seed(3)
    model = Qwen3_5ForCausalLM(FLAVORS["tiny"].replace(attn_mask_type="block_causal",
                                                       initializer_range=0.1))
    model.init_weights()
    return model


def test_every_stage_forward_gets_its_micro_batch_documents(one_process_group):
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import ScheduleGPipe

    from hyper_parallel.components.loss import CrossEntropyLoss
    from hyper_parallel.models.pipelining import Pipeline
    from hyper_parallel.runtime.pipeline_step import (
        PipelineLoss,
        pipeline_evaluate,
        pipeline_train_step,
    )
    from hyper_parallel.runtime.step import evaluate, train_step

    positions = _positions(ROWS)
    ids = torch.randint(0, 2048, positions.shape, generator=torch.Generator().manual_seed(4))
    labels = ids.masked_fill(positions == 0, IGNORE)  # DataCollatorWithFlattening's labels
    micro_batches = [{"input_ids": ids[r:r + 2], "labels": labels[r:r + 2],
                      "position_ids": positions[r:r + 2]} for r in (0, 2)]
    model = _tiny_block_causal()
    reference = _tiny_block_causal()
    received = []
    model.register_forward_pre_hook(
        lambda m, args, kwargs: received.append(kwargs.get("documents")), with_kwargs=True)
    loss_fn = CrossEntropyLoss.Config().build()
    loss = PipelineLoss(loss_fn)
    stage = PipelineStage(model, 0, 1, torch.device("cpu"), group=one_process_group)
    pipeline = Pipeline(
        schedule=ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss, scale_grads=False),
        parts=[model], stage_indices=[0], num_stages=1, num_microbatches=2,
        has_first_stage=True, has_last_stage=True, group=one_process_group)

    def step(run, target, **kwargs):
        optimizer = torch.optim.SGD(target.parameters(), lr=0.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        return run(target, optimizer, scheduler, micro_batches, device=torch.device("cpu"),
                   dp_group=None, dp_size=1, max_grad_norm=0.0, **kwargs)

    piped = step(lambda m, *a, **k: pipeline_train_step(pipeline, *a, **k), model, loss=loss)
    plain = step(train_step, reference, loss_fn=loss_fn)
    # The schedule's shape inference runs the first micro-batch once more, first.
    assert len(received) == 3 and all(isinstance(d, Documents) for d in received)
    for got, mb in zip(received[1:], micro_batches):
        want = Documents.from_positions(mb["position_ids"])
        assert got.cu_seqlens_host.tolist() == want.cu_seqlens_host.tolist()
        assert got.starts.device.type == "cpu"  # made on the host, before the forward
    assert piped.loss == plain.loss  # bit for bit: the same rows, documents, scaling
    assert piped.global_tokens == plain.global_tokens
    with torch.no_grad():
        sums, tokens = 0.0, 0
        for r, row in enumerate(ROWS):
            start = 0
            for n in row:
                alone = ids[r:r + 1, start:start + n]
                logits = reference(alone)
                sums += F.cross_entropy(logits[0, :-1].float(), alone[0, 1:],
                                        reduction="sum").item()
                tokens += n - 1
                start += n
    assert piped.global_tokens == tokens
    assert piped.loss == pytest.approx(sums / tokens, rel=1e-5)
    # Evaluation through the schedule reads each micro-batch's documents too (after its own
    # shape inference, on the first's).
    del received[:]
    evaluated = pipeline_evaluate(pipeline, micro_batches, loss=loss, device=torch.device("cpu"),
                                  dp_group=None, rows_per_step=4)
    assert [d.cu_seqlens_host.tolist() for d in received[-2:]] == [
        Documents.from_positions(mb["position_ids"]).cu_seqlens_host.tolist()
        for mb in micro_batches]
    assert evaluated == evaluate(reference, micro_batches, device=torch.device("cpu"),
                                 dp_group=None, loss_fn=loss_fn)


def test_block_causal_trains_under_pipeline_parallelism():
    """The model's config accepts ``block_causal`` with pipeline stages (it refused them while
    the micro-batches did not carry their documents)."""
    import types

    from hyper_parallel.models.qwen3_5.protocol import flavor_config

    trainer_config = types.SimpleNamespace(
        parallelism=types.SimpleNamespace(pipeline_parallel_degree=4),
        compile=types.SimpleNamespace(enable=False, components=[]))
    config = flavor_config("tiny").replace(attn_mask_type="block_causal")
    config.update_from_config(trainer_config=trainer_config)
    assert config.attn_mask_type == "block_causal"


class _RecordingStage(torch.nn.Module):
    """A one-stage 'model' that keeps documents apart (``reads_documents``) and records what
    each forward is handed."""

    reads_documents = True

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(64, 8)
        self.head = torch.nn.Linear(8, 64)
        self.received: list = []

    def forward(self, input_ids, position_ids=None, documents=None):
        self.received.append((tuple(input_ids.shape), documents))
        return self.head(self.embed(input_ids))


@pytest.mark.parametrize("cp_rank", [0, 1])
def test_evaluation_under_context_and_pipeline_parallelism_hands_each_stage_its_shard(
        one_process_group, cp_rank):
    """The trainer's evaluation under CP x PP: each batch is split as in training (the whole
    rows padded to the run's length first, their documents made before the split), the group
    padded with rows to the step's, and every pipeline micro-batch's forward gets this rank's
    shard of its rows and of their documents."""
    import types

    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import ScheduleGPipe

    from hyper_parallel.components.loss import CrossEntropyLoss
    from hyper_parallel.models.pipelining import Pipeline
    from hyper_parallel.runtime.pipeline_step import PipelineLoss
    from hyper_parallel.trainer.base import BaseTrainer
    from hyper_parallel.utils.documents import DocumentShard

    seq, parts = 16, 2
    model = _RecordingStage()
    stage = PipelineStage(model, 0, 1, torch.device("cpu"), group=one_process_group)
    loss = PipelineLoss(CrossEntropyLoss.Config().build())
    pipeline = Pipeline(
        schedule=ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss, scale_grads=False),
        parts=[model], stage_indices=[0], num_stages=1, num_microbatches=2,
        has_first_stage=True, has_last_stage=True, group=one_process_group)

    def batch(rows):
        positions = _positions(rows)
        ids = (positions * 7 + 3) % 64
        return {"input_ids": ids, "labels": ids.masked_fill(positions == 0, IGNORE),
                "position_ids": positions}

    # Documents crossing the shard boundary (8); the second batch's rows are 12 tokens long.
    batches = [batch([(5, 7, 4), (9, 7)]), batch([(3, 9)])]

    class Trainer(BaseTrainer):
        def _pipeline_rows_per_step(self):
            return 4

        def _pipeline_seq_len(self):
            return seq // parts

    trainer = Trainer()
    trainer.model, trainer.pipeline, trainer.pipeline_loss = model, pipeline, loss
    trainer.eval_dataloader, trainer.device = batches, torch.device("cpu")
    trainer.dist = types.SimpleNamespace(batch_split=1, seq_split=parts, cp_rank=cp_rank,
                                         dp_group=None)
    assert trainer.evaluate() > 0
    padded = torch.nn.functional.pad(batches[1]["position_ids"], (0, seq - 12))
    whole = torch.cat([batches[0]["position_ids"], padded, batches[0]["position_ids"][:1]])
    for (shape, got), want in zip(model.received[-2:], torch.tensor_split(whole, 2)):
        assert shape == (2, seq // parts)
        assert isinstance(got, DocumentShard) and (got.rank, got.parts) == (cp_rank, parts)
        assert torch.equal(got.whole.starts, Documents.from_positions(want).starts)
