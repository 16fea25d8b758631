"""Module / BaseModel on torch: the platform base, init_weights, counts, verify_module_protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from hyper_parallel.protocols import BaseModel, Configurable, Module, ModuleProtocolError
from hyper_parallel.protocols.module import ModuleBase

# ---------------------------------------------------------------------- a small model


class Embedding(nn.Embedding, Module):
    """A framework layer mixed in before Module (diamond through nn.Module)."""

    @dataclass(kw_only=True, slots=True)
    class Config(Module.Config):
        num_embeddings: int
        embedding_dim: int

    def __init__(self, config: Config) -> None:
        super().__init__(config.num_embeddings, config.embedding_dim)
        self.config = config

    def init_weights(self, buffer_device=None) -> None:
        nn.init.normal_(self.weight, std=0.02)


class FeedForward(Module):
    @dataclass(kw_only=True, slots=True)
    class Config(Module.Config):
        dim: int
        hidden_dim: int

        def __post_init__(self) -> None:
            if self.hidden_dim < 1:
                raise ValueError(f"FeedForward.Config.hidden_dim must be >= 1, got {self.hidden_dim}")

    def __init__(self, config: Config) -> None:
        super().__init__(config=config)
        self.w1 = nn.Linear(config.dim, config.hidden_dim)
        self.w2 = nn.Linear(config.hidden_dim, config.dim)

    def init_weights(self, buffer_device=None) -> None:
        for linear in (self.w1, self.w2):
            nn.init.normal_(linear.weight, std=0.02)
            nn.init.zeros_(linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(torch.relu(self.w1(x)))


VOCAB, DIM, HIDDEN, SEQ = 16, 8, 12, 6


def _layers(n: int = 2) -> list[FeedForward.Config]:
    return [FeedForward.Config(dim=DIM, hidden_dim=HIDDEN) for _ in range(n)]


class TinyLM(BaseModel):
    SKIP: frozenset[str] = frozenset()  # test hook: what init_weights "forgets"

    @dataclass(kw_only=True, slots=True)
    class Config(BaseModel.Config):
        embed: Embedding.Config = field(
            default_factory=lambda: Embedding.Config(num_embeddings=VOCAB, embedding_dim=DIM)
        )
        layers: list[FeedForward.Config] = field(default_factory=_layers)
        tie_embeddings: bool = False
        max_seq_len: int = SEQ

        def __post_init__(self) -> None:
            dims = {layer.dim for layer in self.layers}
            if dims - {self.embed.embedding_dim}:
                raise ValueError(f"layer dims {sorted(dims)} != embed dim {self.embed.embedding_dim}")

        def update_from_config(self, *, trainer_config) -> None:
            super().update_from_config(trainer_config=trainer_config)
            self.max_seq_len = trainer_config.seq_len

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        dim = config.embed.embedding_dim
        self.embed = config.embed.build()
        self.layers = nn.ModuleList(layer.build() for layer in config.layers)
        self.norm_scale = nn.Parameter(torch.ones(dim))
        self.head = nn.Linear(dim, config.embed.num_embeddings)
        self.register_buffer("pos_scale", self._pos_scale(None), persistent=False)
        self.tie_weights()

    def _pos_scale(self, device) -> torch.Tensor:
        return torch.arange(self.config.max_seq_len, dtype=torch.float32, device=device) + 1.0

    def tie_weights(self) -> None:
        if self.config.tie_embeddings:
            self.head.weight = self.embed.weight

    @torch.no_grad()
    def init_weights(self, buffer_device=None) -> None:
        self.tie_weights()  # to_empty unties
        self.embed.init_weights()
        for layer in self.layers:
            layer.init_weights()
        if "norm_scale" not in self.SKIP:
            self.norm_scale.fill_(1.0)
        if not self.config.tie_embeddings:
            nn.init.normal_(self.head.weight, std=0.02)
        if "head.bias" not in self.SKIP:
            nn.init.zeros_(self.head.bias)
        if "pos_scale" not in self.SKIP:
            self.pos_scale = self._pos_scale(buffer_device or self.pos_scale.device)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids) * self.pos_scale[: ids.shape[1], None]
        for layer in self.layers:
            h = h + layer(h)
        return self.head(h * self.norm_scale)

    def extra_flops_per_token(self, seq_len: int) -> float:
        return 4 * DIM * seq_len  # a made-up token-mixing term, to see the hook summed in


def _expected_params(tied: bool) -> dict[str, int]:
    embed = VOCAB * DIM
    layers = 2 * (DIM * HIDDEN + HIDDEN + HIDDEN * DIM + DIM)
    head = (0 if tied else VOCAB * DIM) + VOCAB
    return {"embed": embed, "rest": layers + DIM + head}


def _materialize(cfg: TinyLM.Config) -> TinyLM:
    with torch.device("meta"):
        model = cfg.build()
    model.to_empty(device="cpu")
    torch.manual_seed(0)
    model.init_weights(buffer_device=torch.device("cpu"))
    return model


# ---------------------------------------------------------------------- Module


def test_module_is_the_platforms_module_base():
    assert ModuleBase is torch.nn.Module
    assert issubclass(Module, torch.nn.Module) and issubclass(Module, Configurable)
    plain = Module.Config().build()
    assert isinstance(plain, nn.Module) and isinstance(plain.config, Module.Config)


def test_framework_layer_mixed_in_before_module():
    emb = Embedding.Config(num_embeddings=5, embedding_dim=3).build()
    assert isinstance(emb, nn.Embedding) and isinstance(emb, Module)
    assert emb.weight.shape == (5, 3)
    assert emb.config == Embedding.Config(num_embeddings=5, embedding_dim=3)
    assert [n for n, _ in emb.named_parameters()] == ["weight"]


def test_default_init_weights_names_the_class():
    class NoInit(Module):
        pass

    with pytest.raises(NotImplementedError, match=r"NoInit\.init_weights\(buffer_device=None\)"):
        NoInit.Config().build().init_weights()


def test_module_build_validates_and_rejects_field_kwargs():
    with pytest.raises(ValueError, match="hidden_dim must be >= 1"):
        FeedForward.Config(dim=2, hidden_dim=0)
    with pytest.raises(ValueError, match=r"\['dim'\].*Put these values in the Config"):
        FeedForward.Config(dim=2, hidden_dim=3).build(dim=4)


# ---------------------------------------------------------------------- BaseModel end to end


def test_small_model_end_to_end():
    cfg = TinyLM.Config()
    assert [f for f, *_ in cfg.traverse(Module.Config, recurse=True)] == [
        "",
        "embed",
        "layers.0",
        "layers.1",
    ]
    cfg.update_from_config(trainer_config=SimpleNamespace(seq_len=SEQ + 2))
    assert cfg.max_seq_len == SEQ + 2

    model = _materialize(cfg)
    assert type(model) is TinyLM and model.config == cfg and model.config is not cfg
    assert torch.equal(model.pos_scale, torch.arange(SEQ + 2, dtype=torch.float32) + 1)
    model.verify_module_protocol()

    ids = torch.randint(0, VOCAB, (2, SEQ))
    logits = model(ids)
    assert logits.shape == (2, SEQ, VOCAB) and torch.isfinite(logits).all()
    logits.logsumexp(-1).mean().backward()
    assert all(p.grad is not None for p in model.parameters())

    counts = _expected_params(tied=False)
    assert model.num_params() == counts["embed"] + counts["rest"]
    assert model.num_params(exclude_embeddings=True) == counts["rest"]
    assert model.num_flops_per_token(SEQ) == 6 * counts["rest"] + 4 * DIM * SEQ


def test_tied_weights_are_counted_once_and_verified():
    model = _materialize(TinyLM.Config(tie_embeddings=True))
    assert model.head.weight is model.embed.weight
    counts = _expected_params(tied=True)
    assert model.num_params() == counts["embed"] + counts["rest"]
    assert model.num_params(exclude_embeddings=True) == counts["rest"]
    model.verify_module_protocol()


def test_counts_work_on_the_meta_device():
    with torch.device("meta"):
        model = TinyLM.Config().build()
    counts = _expected_params(tied=False)
    assert model.num_params() == counts["embed"] + counts["rest"]
    with pytest.raises(ValueError, match="seq_len must be a positive int"):
        model.num_flops_per_token(0)


def test_base_update_from_config_is_a_no_op():
    cfg = BaseModel.Config()
    assert cfg.update_from_config(trainer_config=object()) is None
    assert cfg == BaseModel.Config()


def test_verify_passes_on_a_meta_model():
    """The trainer verifies right after the meta-device build."""
    with torch.device("meta"):
        model = TinyLM.Config().build()
    model.verify_module_protocol()


# ---------------------------------------------------------------------- verify_module_protocol failures


class ForgetsHeadBias(TinyLM):
    SKIP = frozenset({"head.bias"})


class ForgetsBuffer(TinyLM):
    SKIP = frozenset({"pos_scale"})


class ScalesOldValue(TinyLM):
    """Scales ``norm_scale`` instead of setting it: reads the contents to_empty left behind."""

    SKIP = frozenset({"norm_scale"})

    @torch.no_grad()
    def init_weights(self, buffer_device=None) -> None:
        super().init_weights(buffer_device)
        self.norm_scale.mul_(0.5)


class NoInitModel(BaseModel):
    def __init__(self, config) -> None:
        super().__init__(config)
        self.w = nn.Parameter(torch.zeros(2))


def _failures(model, **kwargs) -> list[str]:
    with pytest.raises(ModuleProtocolError) as info:
        model.verify_module_protocol(**kwargs)
    assert type(model).__qualname__ in str(info.value)
    return info.value.failures


def test_verify_catches_a_parameter_init_weights_misses():
    model = ForgetsHeadBias.Config().build()
    (failure,) = _failures(model)
    assert "parameter" in failure and "['head.bias']" in failure
    # The check is opt-out for models too large to materialise twice.
    model.verify_module_protocol(check_init=False)


def test_verify_catches_a_buffer_init_weights_misses():
    (failure,) = _failures(ForgetsBuffer.Config().build())
    assert "buffer" in failure and "['pos_scale']" in failure


def test_verify_catches_init_that_reads_previous_values():
    (failure,) = _failures(ScalesOldValue.Config().build())
    assert "['norm_scale']" in failure


def test_verify_reports_a_missing_init_weights():
    (failure,) = _failures(NoInitModel.Config().build())
    assert "init_weights" in failure and "NotImplementedError" in failure


def test_verify_catches_structure_that_does_not_come_from_the_config():
    class Drifting(TinyLM):
        def __init__(self, config, *, extra: int = 0) -> None:
            super().__init__(config)
            if extra:
                self.extra = nn.Parameter(torch.zeros(extra))

    model = Drifting.Config().build(extra=3)
    failures = _failures(model, check_init=False)
    assert failures == [
        "self has parameters that self.config.build() does not create: ['extra']"
    ]


def test_verify_catches_shape_drift():
    model = TinyLM.Config().build()
    model.norm_scale = nn.Parameter(torch.ones(DIM + 1))
    (failure,) = _failures(model, check_init=False)
    assert f"norm_scale: ({DIM + 1},) vs ({DIM},)" in failure


def test_verify_catches_a_config_that_builds_another_class():
    model = ForgetsHeadBias(TinyLM.Config())  # the parent's Config builds TinyLM
    (failure,) = _failures(model)
    assert "builds" in failure and "TinyLM" in failure and "ForgetsHeadBias.Config" in failure


def test_verify_needs_a_model_config():
    model = TinyLM.Config().build()
    model.config = FeedForward.Config(dim=1, hidden_dim=1)
    (failure,) = _failures(model)
    assert "not a BaseModel.Config" in failure


def test_subclass_of_a_model_without_config_builds_itself():
    assert ForgetsHeadBias.Config is not TinyLM.Config
    assert type(ForgetsHeadBias.Config().build()) is ForgetsHeadBias
    assert type(TinyLM.Config().build()) is TinyLM
