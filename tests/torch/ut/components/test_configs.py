"""The component Configs: Configurable rules, documentation, validation and legacy defaults."""

from __future__ import annotations

import dataclasses

import pytest

from hyper_parallel.components import (
    BaseDataLoader,
    CheckpointManager,
    CrossEntropyLoss,
    HuggingFaceTokenizer,
    LRSchedulersContainer,
    MetricsProcessor,
    OptimizersContainer,
    Profiler,
)
from hyper_parallel.protocols import Configurable
from hyper_parallel.trainer.config import HyperTrainerConfig
from hyper_parallel.runtime.optim import NO_DECAY_KEYWORDS, warmup_steps_from_ratio
from hyper_parallel.utils.docstrings import field_docstrings
from tests.torch.ut.components._common import tiny_model

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")


def _optimizers():
    return OptimizersContainer.Config().build(model_parts=[tiny_model()])


# Runtime objects each component needs to be built (factories: a fresh set per build).
RUNTIME = {
    OptimizersContainer: lambda: {"model_parts": [tiny_model()]},
    LRSchedulersContainer: lambda: {"optimizers": _optimizers(), "training_steps": 20},
    CrossEntropyLoss: dict,
    HuggingFaceTokenizer: dict,
    BaseDataLoader: lambda: {
        "dp_world_size": 1,
        "dp_rank": 0,
        "local_batch_size": 1,
        "seq_len": 8,
        "num_samples": 4,
    },
    CheckpointManager: lambda: {"model_parts": [tiny_model()]},
    MetricsProcessor: dict,
    Profiler: dict,
}
# A valid non-default value for one field, and an invalid one for the same field.
CHANGE = {
    OptimizersContainer: ("lr", 3e-4, -1.0),
    LRSchedulersContainer: ("warmup_steps", 3, -1),
    CrossEntropyLoss: ("aggregation", "rank_average", "mean"),
    HuggingFaceTokenizer: ("path", "pkg://tokenizer", ""),
    BaseDataLoader: ("text_key", "body", ""),
    CheckpointManager: ("interval", 7, -1),
    MetricsProcessor: ("log_freq", 3, 0),
    Profiler: ("active", 2, 0),
}
COMPONENTS = list(RUNTIME)


def make_config(cls, **kw):
    if cls is CheckpointManager:
        kw.setdefault("export_hf", False)
    return cls.Config(**kw)


@pytest.mark.parametrize("cls", COMPONENTS, ids=lambda c: c.__name__)
def test_build_makes_the_owner_from_a_copy_of_the_config(cls):
    name, value, _ = CHANGE[cls]
    config = make_config(cls, **{name: value})
    built = config.build(**RUNTIME[cls]())
    assert type(built) is cls and isinstance(built, Configurable)
    assert built.config == config and built.config is not config
    # Edits of the component's config do not reach the caller's.
    setattr(built.config, name, getattr(make_config(cls), name))
    assert getattr(config, name) == value


@pytest.mark.parametrize("cls", COMPONENTS, ids=lambda c: c.__name__)
def test_config_edits_after_building_do_not_reach_the_component(cls):
    name, value, _ = CHANGE[cls]
    config = make_config(cls)
    default = getattr(config, name)
    built = config.build(**RUNTIME[cls]())
    setattr(config, name, value)
    assert getattr(built.config, name) == default


@pytest.mark.parametrize("cls", COMPONENTS, ids=lambda c: c.__name__)
def test_validation_runs_again_at_build(cls):
    name, _, invalid = CHANGE[cls]
    config = make_config(cls)
    setattr(config, name, invalid)  # dataclasses do not validate on assignment...
    with pytest.raises(ValueError, match=rf"{cls.__name__}.Config.{name}="):
        config.build(**RUNTIME[cls]())  # ...but build() re-runs __post_init__ on the copy


@pytest.mark.parametrize("cls", COMPONENTS, ids=lambda c: c.__name__)
def test_a_build_kwarg_that_is_a_field_is_rejected(cls):
    name, value, _ = CHANGE[cls]
    with pytest.raises(ValueError, match=rf"\['{name}'\] that are fields of .*Put these values in the Config"):
        make_config(cls).build(**RUNTIME[cls](), **{name: value})


@pytest.mark.parametrize("cls", COMPONENTS, ids=lambda c: c.__name__)
def test_configs_are_slotted_keyword_only_and_documented(cls):
    config = make_config(cls)
    with pytest.raises(AttributeError):
        config.misspelt_field = 1  # slots: a typo cannot be silently accepted
    with pytest.raises(TypeError):
        cls.Config(*[1])  # keyword-only
    documented = {}
    for klass in reversed(cls.Config.__mro__):
        if dataclasses.is_dataclass(klass):
            documented.update(field_docstrings(klass))
    missing = [f.name for f in dataclasses.fields(cls.Config) if not documented.get(f.name)]
    assert not missing, f"{cls.__name__}.Config fields without a docstring: {missing}"
    assert set(config.to_dict()) == {f.name for f in dataclasses.fields(config)}


# ---------------------------------------------------------------------------------- validation

INVALID = [
    (OptimizersContainer, {"name": "adamw"}, r"name='adamw': not allowed \(did you mean 'AdamW'\?\); choose one of: AdamW, Adam"),
    (OptimizersContainer, {"name": "SGD"}, r"choose one of: AdamW, Adam"),
    (OptimizersContainer, {"lr": -1.0}, r"OptimizersContainer.Config.lr=-1.0: must be a number >= 0"),
    (OptimizersContainer, {"betas": (0.9,)}, r"betas=\(0.9,\): must be two numbers in \[0, 1\)"),
    (OptimizersContainer, {"betas": (0.9, 1.0)}, r"betas=.*must be two numbers"),
    (OptimizersContainer, {"eps": 0.0}, r"eps=0.0: must be > 0"),
    (OptimizersContainer, {"weight_decay": -0.1}, r"weight_decay=-0.1"),
    (OptimizersContainer, {"foreach": True, "fused": True}, r"fused=True: cannot be combined with foreach=True"),
    (OptimizersContainer, {"foreach": "yes"}, r"foreach='yes': must be a bool or None"),
    (OptimizersContainer, {"no_decay_keywords": ("bias", "")}, r"no_decay_keywords=.*non-empty"),
    (LRSchedulersContainer, {"warmup_steps": -1}, r"warmup_steps=-1: must be an integer >= 0"),
    (LRSchedulersContainer, {"warmup_steps": 1.5}, r"warmup_steps=1.5: must be an integer"),
    (LRSchedulersContainer, {"decay_style": "cosin"}, r"decay_style='cosin'.*did you mean 'cosine'.*cosine, linear, constant"),
    (LRSchedulersContainer, {"lr_min": -1e-5}, r"lr_min=-1e-05: must be a number >= 0"),
    (CrossEntropyLoss, {"aggregation": "sum"}, r"CrossEntropyLoss.Config.aggregation='sum'"),
    (CrossEntropyLoss, {"ignore_index": 0}, r"ignore_index=0: only -100 is supported"),
    (HuggingFaceTokenizer, {"path": ""}, r"path='': must be a non-empty path"),
    (BaseDataLoader, {"dataset": "parquet"}, r"dataset='parquet'.*choose one of: dummy, jsonl, text"),
    (BaseDataLoader, {"dataset": "jsonl"}, r"dataset_path=None: is required for dataset='jsonl'"),
    (BaseDataLoader, {"text_key": ""}, r"text_key='': must be a non-empty JSON key"),
    (BaseDataLoader, {"num_workers": -1}, r"num_workers=-1: must be an integer >= 0"),
    (BaseDataLoader, {"prefetch_factor": 2}, r"prefetch_factor=2: only applies with worker processes"),
    (BaseDataLoader, {"prefetch_factor": 0, "num_workers": 1}, r"prefetch_factor=0: must be an integer >= 1"),
    (CheckpointManager, {"folder": ""}, r"folder='': must be a non-empty directory path"),
    (CheckpointManager, {"interval": -1}, r"interval=-1: must be an integer >= 0"),
    (CheckpointManager, {"async_mode": "async_with_pinned_mem"}, r"async_mode=.*choose one of: disabled, async"),
    (CheckpointManager, {"keep_latest_k": -1}, r"keep_latest_k=-1"),
    (CheckpointManager, {"load_path": ""}, r"load_path='': must be a checkpoint path, 'latest', or unset"),
    (MetricsProcessor, {"log_freq": 0}, r"log_freq=0: must be an integer >= 1"),
    (MetricsProcessor, {"peak_tflops": 0.0}, r"peak_tflops=0.0: must be > 0"),
    (MetricsProcessor, {"model_flops_per_token": 0}, r"model_flops_per_token=0"),
    (MetricsProcessor, {"tb_log_freq": 0}, r"tb_log_freq=0"),
    (MetricsProcessor, {"enable_tensorboard": True, "save_tb_folder": ""}, r"save_tb_folder='': must be a directory"),
    (MetricsProcessor, {"memory_log_freq": 0}, r"memory_log_freq=0"),
    (Profiler, {"wait": -1}, r"Profiler.Config.wait=-1: must be an integer >= 0"),
    (Profiler, {"warmup": -1}, r"warmup=-1"),
    (Profiler, {"active": 0}, r"active=0: must be an integer >= 1"),
    (Profiler, {"enable_profiling": True, "save_traces_folder": ""}, r"save_traces_folder='': must be a directory"),
]


@pytest.mark.parametrize(
    "cls, kwargs, match", INVALID, ids=[f"{c.__name__}-{'-'.join(k)}" for c, k, _ in INVALID]
)
def test_invalid_values_name_the_field_and_the_allowed_values(cls, kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        cls.Config(**kwargs)
    assert str(info.value).startswith(f"{cls.__name__}.Config.")


# ---------------------------------------------------------------------------------- defaults


def test_defaults_equal_the_legacy_defaults():
    """Each component default is what the legacy config's default means (the mapping a
    legacy <-> new adapter uses)."""
    legacy = HyperTrainerConfig()
    t, o, d = legacy.train, legacy.train.optimizer, legacy.data

    opt = OptimizersContainer.Config()
    assert opt.name.lower() == o.type
    assert (opt.lr, opt.betas, opt.eps, opt.weight_decay, opt.foreach) == (
        o.lr, tuple(o.betas), o.eps, o.weight_decay, o.foreach
    )
    assert opt.fused is None  # the legacy trainer never passes fused: torch's default
    assert opt.no_decay_keywords == NO_DECAY_KEYWORDS

    lr = LRSchedulersContainer.Config()
    assert lr.warmup_steps == warmup_steps_from_ratio(t.max_steps, o.lr_warmup_ratio)
    assert (lr.decay_style, lr.lr_min) == (o.lr_decay_style, o.lr_min)

    loss = CrossEntropyLoss.Config()
    assert (loss.aggregation, loss.ignore_index) == (o.loss_aggregation, -100)

    assert HuggingFaceTokenizer.Config().path == legacy.model.tokenizer_path is None

    dl = BaseDataLoader.Config()
    assert (dl.dataset, dl.dataset_path, dl.text_key, dl.num_workers, dl.shuffle, dl.pin_memory, dl.prefetch_factor) == (
        d.type, d.train_path, d.text_key, d.num_workers, d.shuffle, d.pin_memory, d.prefetch_factor
    )

    c, ck = CheckpointManager.Config(), t.checkpoint
    assert (c.folder, c.interval, c.export_hf, c.load_path) == (
        ck.output_dir, ck.save_steps, ck.save_hf_weights, ck.load_path
    )
    assert (c.async_mode == "async") == ck.save_async and c.keep_latest_k == 0  # legacy keeps all

    m, lg, tb, mem = MetricsProcessor.Config(), t.logging, t.tensorboard, t.memory_monitor
    assert (m.log_freq, m.report_throughput, m.model_flops_per_token, m.peak_tflops) == (
        lg.log_steps, lg.report_throughput, lg.model_flops_per_token, lg.peak_tflops
    )
    assert (m.enable_tensorboard, m.save_tb_folder, m.tb_log_freq) == (tb.enabled, tb.output_dir, tb.log_steps)
    assert (m.enable_memory_monitor, m.memory_log_freq, m.reset_peak_memory_each_step) == (
        mem.enabled, mem.log_steps, mem.reset_peak_each_step
    )

    p, lp = Profiler.Config(), t.profile
    assert (p.enable_profiling, p.save_traces_folder, p.wait, p.warmup, p.active) == (
        lp.enabled, lp.output_dir, lp.wait_steps, lp.warmup_steps, lp.active_steps
    )


def test_lists_from_a_cli_are_normalised_to_tuples():
    config = OptimizersContainer.Config(betas=[0.9, 0.95], no_decay_keywords=["bias"])
    assert config.betas == (0.9, 0.95) and config.no_decay_keywords == ("bias",)
