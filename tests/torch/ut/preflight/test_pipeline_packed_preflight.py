"""Preflight of a packed run under pipeline parallelism steps each stage on a micro-batch that
carries its documents, as the pipeline's step hands them to every stage
(``runtime/pipeline_step.py``): the per-document work is in the stage's measured peak."""

from __future__ import annotations

from hyper_parallel.config.manager import ConfigManager
from hyper_parallel.preflight.fake_world import fake_process_group, fake_world
from hyper_parallel.preflight.simulate import RoleBuild, simulation_config, stage_peak
from hyper_parallel.trainer.hyper_trainer import HyperTrainer
from hyper_parallel.utils.documents import Documents

PACKED_PP = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel",
             "--model.attn_mask_type=block_causal", "--parallelism.pipeline_parallel_degree=2",
             "--parallelism.num_pp_microbatches=2", "--training.local_batch_size=2",
             "--training.global_batch_size=2", "--training.seq_len=256"]


def test_each_stage_is_measured_with_its_micro_batch_documents():
    config = simulation_config(ConfigManager(root_type=HyperTrainer.Config).parse_args(PACKED_PP))
    received = []
    with fake_process_group(0, 2):
        build = RoleBuild(config)
        with fake_world():
            build.parallelize()
            for part in build.pipeline.parts:
                part.register_forward_pre_hook(
                    lambda m, args, kwargs: received.append(kwargs), with_kwargs=True)
            kinds, _ = stage_peak(build)
    assert kinds["ACT"] > 0
    (kwargs,) = received  # rank 0's stage, one micro-batch of the step's 2 rows
    documents = kwargs.get("documents")
    assert isinstance(documents, Documents)
    # The micro-batch's own row, rebuilt on the host from the documents of its rows.
    assert documents.shape == (1, 256) and documents.starts.device.type == "cpu"
    want = Documents.from_positions(kwargs["position_ids"])
    assert documents.cu_seqlens_host.tolist() == want.cu_seqlens_host.tolist()
    assert documents.count > 1


def test_under_context_parallelism_each_stage_gets_its_rows_shard_of_their_documents():
    """CP 2 x PP 2: the stage's micro-batch is the rank's shard of its rows, and its documents
    the shard of the rows' whole documents (what the trainer's split and the schedule's cut
    hand every stage, ``runtime/pipeline_step.py``)."""
    from hyper_parallel.utils.documents import DocumentShard

    argv = [*PACKED_PP, "--parallelism.context_parallel_degree=2"]
    config = simulation_config(ConfigManager(root_type=HyperTrainer.Config).parse_args(argv))
    received = []
    with fake_process_group(0, 4):
        build = RoleBuild(config)
        with fake_world():
            build.parallelize()
            for part in build.pipeline.parts:
                part.register_forward_pre_hook(
                    lambda m, args, kwargs: received.append((args, kwargs)), with_kwargs=True)
            kinds, _ = stage_peak(build)
    assert kinds["ACT"] > 0
    ((args, kwargs),) = received
    documents = kwargs.get("documents")
    assert isinstance(documents, DocumentShard)
    assert (documents.rank, documents.parts) == (build.dist.cp_rank, 2)
    assert documents.whole.shape == (1, 256) and documents.starts.shape == (1, 128)
    assert tuple(args[0].shape) == (1, 128)  # the shard's tokens
    assert documents.whole.count > 1
