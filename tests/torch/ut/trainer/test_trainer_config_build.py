"""``HyperTrainer.Config(...).build()``: every component is built exactly once, with the right
arguments, in the engine's order (mocked model Config and recording component Configs)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from hyper_parallel.components.checkpoint import CheckpointManager
from hyper_parallel.components.dataloader import BaseDataLoader
from hyper_parallel.components.loss import CrossEntropyLoss
from hyper_parallel.components.lr_scheduler import LRSchedulersContainer
from hyper_parallel.components.metrics import MetricsProcessor
from hyper_parallel.components.optimizer import OptimizersContainer
from hyper_parallel.components.profiler import Profiler
from hyper_parallel.components.tokenizer import HuggingFaceTokenizer
from hyper_parallel.config.configs import TrainingConfig
from hyper_parallel.protocols.model import BaseModel
from hyper_parallel.protocols.model_spec import ModelSpec
from hyper_parallel.trainer.hyper_trainer import HyperTrainer
from hyper_parallel.utils.errors import ConfigError

CALLS: list[tuple[str, dict]] = []


class TinyLM(BaseModel):
    """A two-layer LM that satisfies the trainer's model contract."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseModel.Config):
        vocab_size: int = 2048
        """Vocabulary size."""

        hidden_size: int = 16
        """Width."""

        def update_from_config(self, *, trainer_config) -> None:
            CALLS.append(("model.update_from_config", {"trainer_config": trainer_config}))

        def build(self, **kwargs):
            CALLS.append(("model.build", {"device": torch.empty(0).device.type}))
            return BaseModel.Config.build(self, **kwargs)

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.embed = torch.nn.Embedding(config.vocab_size, config.hidden_size)
        self.head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids, position_ids=None):
        return self.head(self.embed(input_ids))

    @torch.no_grad()
    def init_weights(self, buffer_device=None) -> None:
        torch.nn.init.normal_(self.embed.weight, std=0.02)
        torch.nn.init.normal_(self.head.weight, std=0.02)

    def verify_module_protocol(self, **kwargs):
        CALLS.append(("model.verify_module_protocol", kwargs))
        mark = len(CALLS)
        result = BaseModel.verify_module_protocol(self, **kwargs)
        del CALLS[mark:]  # the protocol check's own round-trip build is not the trainer's
        return result


def parallelize(model, parallel_dims, **sections):
    CALLS.append(("parallelize_fn", {"parallel_dims": parallel_dims, **sections}))
    return model


def recording(config_cls, name):
    """A Config subclass whose build() records its kwargs and then builds the real component."""

    @dataclass(kw_only=True, slots=True)
    class Recording(config_cls):
        def build(self, **kwargs):
            CALLS.append((name, kwargs))
            return config_cls.build(self, **kwargs)

    Recording.__qualname__ = f"Recording{config_cls.__qualname__}"
    return Recording


@pytest.fixture
def config(tmp_path):
    CALLS.clear()
    spec = ModelSpec(name="tiny_lm", flavor="tiny", model=TinyLM.Config(), parallelize_fn=parallelize)
    return HyperTrainer.Config(
        model_spec=spec,
        training=TrainingConfig(steps=2, seq_len=32, global_batch_size=2, local_batch_size=1),
        tokenizer=recording(HuggingFaceTokenizer.Config, "tokenizer")(),
        dataloader=recording(BaseDataLoader.Config, "dataloader")(
            dataset="jsonl", dataset_path="pkg://corpus/valid.jsonl", shuffle=False, pin_memory=False
        ),
        optimizer=recording(OptimizersContainer.Config, "optimizer")(lr=1e-3),
        lr_scheduler=recording(LRSchedulersContainer.Config, "lr_scheduler")(warmup_steps=1),
        loss=recording(CrossEntropyLoss.Config, "loss")(),
        checkpoint=recording(CheckpointManager.Config, "checkpoint")(
            folder=str(tmp_path), interval=0, export_hf=False
        ),
        metrics=recording(MetricsProcessor.Config, "metrics")(log_freq=1),
        profiler=recording(Profiler.Config, "profiler")(),
    )


def test_build_order_and_arguments(config):
    trainer = config.build()
    try:
        names = [name for name, _ in CALLS]
        assert names == [
            # update_from_config comes first: it may change the vocabulary the data needs.
            "model.update_from_config",
            "tokenizer",
            "dataloader",
            "model.build",
            "model.verify_module_protocol",
            # Before the model is parallelized: a pipeline's last stage calls it.
            "loss",
            "parallelize_fn",
            "optimizer",
            "lr_scheduler",
            "checkpoint",
            "metrics",
            "profiler",
        ]
        calls = dict(CALLS)
        assert calls["model.build"] == {"device": "meta"}
        assert calls["model.update_from_config"]["trainer_config"] is trainer.config
        assert calls["model.verify_module_protocol"] == {"check_init": False}
        dl = calls["dataloader"]
        assert (dl["dp_world_size"], dl["dp_rank"], dl["seq_len"], dl["local_batch_size"]) == (1, 0, 32, 1)
        assert dl["tokenizer"] is trainer.tokenizer and dl["vocab_size"] == 2048
        p = calls["parallelize_fn"]
        assert p["parallel_dims"] is trainer.parallel_dims
        for section in ("training", "parallelism", "activation_checkpoint", "compile"):
            assert p[section] is getattr(trainer.config, section)
        assert p["dump_folder"] == trainer.config.dump_folder
        assert calls["optimizer"]["model_parts"] == [trainer.model]
        assert calls["lr_scheduler"] == {"optimizers": trainer.optimizer, "training_steps": 2}
        ck = calls["checkpoint"]
        assert ck["optimizers"] is trainer.optimizer and ck["lr_schedulers"] is trainer.lr_scheduler
        assert ck["dataloader"] is trainer.train_dataloader and ck["model_parts"] == [trainer.model]
        assert calls["metrics"]["trainer"] is trainer
        # The built model is materialized and trains.
        assert trainer.model.embed.weight.device.type == "cpu"
        state = trainer.train()
        assert [s for s, _ in state.loss_history] == [1, 2]
    finally:
        trainer.close()


def test_each_component_is_built_once(config):
    trainer = config.build()
    try:
        names = [name for name, _ in CALLS]
        assert len(names) == len(set(names))
    finally:
        trainer.close()


def test_build_works_on_a_copy(config):
    trainer = config.build()
    try:
        assert trainer.config == config and trainer.config is not config
    finally:
        trainer.close()


def test_a_v2_spec_found_by_name_is_used_like_model_spec(tmp_path):
    """``model.name`` naming a v2 spec (no ``model_spec``): its model Config is built, re-based
    by ``update_from_config`` on the ``model`` section before the data is made."""
    import hyper_parallel.models.qwen3_5_v2  # noqa: F401 - registers the spec
    from hyper_parallel.config.configs import ModelConfig

    config = HyperTrainer.Config(
        model=ModelConfig(name="qwen3_5_v2", config_overrides={"flavor": "debugmodel", "num_hidden_layers": 2}),
        training=TrainingConfig(steps=1, seq_len=32, global_batch_size=1, local_batch_size=1),
        dataloader=BaseDataLoader.Config(dataset="dummy", pin_memory=False),
        checkpoint=CheckpointManager.Config(folder=str(tmp_path), interval=0, export_hf=False),
    )
    trainer = config.build()
    try:
        assert trainer.spec.name == "qwen3_5_v2" and trainer.model_config is trainer.spec.model
        assert trainer.model.config.vocab_size == 2048 and len(trainer.model.model.layers) == 2
        assert [s for s, _ in trainer.train().loss_history] == [1]
    finally:
        trainer.close()


def test_post_optimizer_build_fn_runs_once_the_optimizer_exists(config):
    seen = []
    config.model_spec.post_optimizer_build_fn = lambda optimizers, parts, dims: seen.append(
        (optimizers, parts, dims))
    trainer = config.build()
    try:
        assert seen == [(trainer.optimizer, [trainer.model], trainer.parallel_dims)]
        # ...after the optimizer and before the scheduler (it may register optimizer hooks).
        names = [name for name, _ in CALLS]
        assert names.index("optimizer") < names.index("lr_scheduler")
    finally:
        trainer.close()


def test_pipeline_parallelism_needs_a_spec_that_cuts_stages(config):
    config.model_spec.pipelining_fn = None
    config.parallelism.pipeline_parallel_degree = 2
    with pytest.raises(ConfigError, match="parallelism.pipeline_parallel_degree: 2: the spec "
                       ".* has no pipelining_fn"):
        config.build()


def test_a_pipeline_setting_without_pipeline_parallelism_is_refused(config):
    config.parallelism.num_pp_microbatches = 4
    with pytest.raises(ConfigError, match="parallelism.num_pp_microbatches: 4 has no effect "
                       "without pipeline parallelism"):
        config.build()


def test_a_v1_model_spec_is_refused_with_the_fix(config):
    config.model_spec = ModelSpec(name="v1_only", build_model_fn=lambda args: None)
    with pytest.raises(ValueError, match=r"v1 spec.*qwen3_5_spec_factory"):
        config.build()


def test_the_callers_spec_is_not_changed_by_update_from_config(tmp_path):
    """The engine fits a private copy of the spec's model Config to the run."""
    from hyper_parallel.config.configs import ModelConfig
    from hyper_parallel.models.qwen3_5 import qwen3_5_spec_factory

    spec = qwen3_5_spec_factory("debugmodel")
    config = HyperTrainer.Config(
        model_spec=spec,
        model=ModelConfig(num_hidden_layers=2),
        training=TrainingConfig(steps=1, seq_len=32, global_batch_size=1, local_batch_size=1),
        dataloader=BaseDataLoader.Config(dataset="dummy", pin_memory=False),
        checkpoint=CheckpointManager.Config(folder=str(tmp_path), interval=0, export_hf=False),
    )
    trainer = config.build()
    try:
        assert trainer.model_config.num_hidden_layers == 2
        assert spec.model.num_hidden_layers == 8
    finally:
        trainer.close()
