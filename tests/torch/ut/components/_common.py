"""Helpers of the component tests: a tiny model and the legacy build steps on a stand-in trainer.

The legacy side of every equivalence test calls the *real* ``BaseTrainer`` / ``LLMTrainer``
``_build_*`` methods unbound, on a ``SimpleNamespace`` that carries only the attributes the
method reads, so the helper calls are exactly the legacy trainer's.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from hyper_parallel.trainer.base import BaseTrainer
from hyper_parallel.trainer.config import (
    CheckpointConfig,
    DataConfig,
    HyperTrainerConfig,
    ModelConfig,
    OptimizerConfig,
    TrainConfig,
)
from hyper_parallel.trainer.llm_trainer import LLMTrainer


class TinyLM(nn.Module):
    """A language model small enough for unit tests, with names that hit every no-decay
    keyword (bias, layernorm, norm) and parameters that must stay in the decay group."""

    def __init__(self, vocab: int = 32, hidden: int = 8) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.input_layernorm = nn.LayerNorm(hidden)
        self.q_norm = nn.Parameter(torch.ones(hidden))
        self.A_log = nn.Parameter(torch.zeros(hidden))
        self.frozen = nn.Parameter(torch.ones(2), requires_grad=False)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids: torch.Tensor, position_ids: Any = None) -> torch.Tensor:
        h = self.input_layernorm(torch.tanh(self.proj(self.embed_tokens(input_ids))))
        return self.lm_head(h * self.q_norm + self.A_log)


def tiny_model(seed: int = 0, **kw: Any) -> TinyLM:
    torch.manual_seed(seed)
    return TinyLM(**kw)


class TinyTail(nn.Module):
    """A second model part whose parameter names differ from ``TinyLM``'s (like the last stage
    of a pipeline split, which keeps the whole model's FQNs)."""

    def __init__(self, vocab: int = 32) -> None:
        super().__init__()
        self.tail_proj = nn.Linear(vocab, vocab)
        self.final_norm = nn.LayerNorm(vocab)

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return self.final_norm(self.tail_proj(logits))


def two_parts(seed: int = 0) -> list[nn.Module]:
    """``[TinyLM, TinyTail]``: two model parts with distinct FQNs."""
    torch.manual_seed(seed)
    return [TinyLM(), TinyTail()]


def backward_through(parts: list[nn.Module], seed: int = 0) -> None:
    """One forward/backward through the parts in order (gradients on every parameter)."""
    out = batch_of(seed=seed)["input_ids"]
    for part in parts:
        out = part(out)
    out.float().pow(2).mean().backward()


def legacy_config(
    *,
    model: dict | None = None,
    optimizer: dict | None = None,
    data: dict | None = None,
    checkpoint: dict | None = None,
    **train: Any,
) -> HyperTrainerConfig:
    """A legacy ``HyperTrainerConfig`` with the given section fields (validated as usual)."""
    return HyperTrainerConfig(
        model=ModelConfig(**(model or {})),
        data=DataConfig(**(data or {})),
        train=TrainConfig(
            optimizer=OptimizerConfig(**(optimizer or {})),
            checkpoint=CheckpointConfig(**(checkpoint or {})),
            **train,
        ),
    )


def legacy_optimizer(args: HyperTrainerConfig, model: nn.Module) -> torch.optim.Optimizer:
    """``BaseTrainer._build_optimizer`` exactly."""
    fake = SimpleNamespace(args=args, model=model)
    BaseTrainer._build_optimizer(fake)
    return fake.optimizer


def legacy_lr_scheduler(args: HyperTrainerConfig, optimizer: torch.optim.Optimizer):
    """``BaseTrainer._build_lr_scheduler`` exactly."""
    fake = SimpleNamespace(args=args, optimizer=optimizer)
    BaseTrainer._build_lr_scheduler(fake)
    return fake.lr_scheduler


def legacy_tokenizer(args: HyperTrainerConfig):
    """``LLMTrainer._build_model_assets`` exactly (None for dummy data)."""
    fake = SimpleNamespace(args=args)
    LLMTrainer._build_model_assets(fake)
    return fake.tokenizer


def legacy_dataloader(
    args: HyperTrainerConfig, *, dp_rank: int = 0, dp_size: int = 1, vocab_size: int | None = None
):
    """``_build_model_assets`` -> ``_build_dataset`` -> ``_build_collate_fn`` ->
    ``_build_dataloader`` of ``LLMTrainer``, exactly; returns the stand-in trainer."""
    fake = SimpleNamespace(
        args=args,
        model_config=None if vocab_size is None else SimpleNamespace(vocab_size=vocab_size),
        dist=SimpleNamespace(dp_rank=dp_rank, dp_size=dp_size),
    )
    LLMTrainer._build_model_assets(fake)
    BaseTrainer._build_dataset(fake)
    LLMTrainer._build_collate_fn(fake)
    BaseTrainer._build_dataloader(fake)
    return fake


def batch_of(vocab: int = 32, batch: int = 2, seq: int = 6, seed: int = 1) -> dict:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    labels = ids.clone()
    labels[0, -2:] = -100  # some ignored positions
    return {"input_ids": ids, "labels": labels}


def assert_same_tree(a: Any, b: Any, path: str = "") -> None:
    """Nested dicts / lists / tensors are equal (tensors bit-for-bit, dtypes included)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), path
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert torch.equal(a, b), path
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (path, sorted(map(str, a)), sorted(map(str, b)))
        for k in a:
            assert_same_tree(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_tree(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)
