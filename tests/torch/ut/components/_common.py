"""Helpers of the component tests: a tiny model and the legacy settings applied to the plain
helpers (``runtime.optim``, ``data``) directly.

The "legacy" side of every equivalence test reads a legacy ``HyperTrainerConfig`` and calls the
plain helper functions with its values, field by field, as the legacy trainer's build steps
did; the component side builds from the converted settings. Both must give the same objects.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from hyper_parallel.data import build_dataloader, build_dataset, collate, load_tokenizer
from hyper_parallel.data.tokenizer import resolve_tokenizer_path
from hyper_parallel.trainer.config import (
    CheckpointConfig,
    DataConfig,
    HyperTrainerConfig,
    ModelConfig,
    OptimizerConfig,
    TrainConfig,
)
from hyper_parallel.runtime.optim import (
    build_lr_scheduler,
    build_optimizer,
    warmup_steps_from_ratio,
)


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
    """The optimizer ``train.optimizer`` describes, from the plain helper."""
    o = args.train.optimizer
    return build_optimizer(
        model, name=o.type, lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay,
        foreach=o.foreach,
    )


def legacy_lr_scheduler(args: HyperTrainerConfig, optimizer: torch.optim.Optimizer):
    """The LR scheduler ``train.optimizer`` / ``train.max_steps`` describe."""
    o, t = args.train.optimizer, args.train
    return build_lr_scheduler(
        optimizer,
        total_steps=t.max_steps,
        warmup_steps=warmup_steps_from_ratio(t.max_steps, o.lr_warmup_ratio),
        decay_style=o.lr_decay_style,
        lr=o.lr,
        lr_min=o.lr_min,
    )


def legacy_tokenizer(args: HyperTrainerConfig):
    """The tokenizer of ``model.tokenizer_path`` / ``model.weights_path`` (None for dummy data)."""
    if args.data.type == "dummy":
        return None
    return load_tokenizer(resolve_tokenizer_path(args.model.tokenizer_path, args.model.weights_path))


def legacy_dataloader(
    args: HyperTrainerConfig, *, dp_rank: int = 0, dp_size: int = 1, vocab_size: int | None = None
):
    """Tokenizer -> dataset -> collate -> loader from the ``data`` / ``train`` sections; returns
    a namespace with ``tokenizer``, ``train_dataset`` and ``train_dataloader``."""
    data, t = args.data, args.train
    tokenizer = legacy_tokenizer(args)
    dataset = build_dataset(
        data.type,
        train_path=data.train_path,
        max_seq_len=data.max_seq_len,
        text_key=data.text_key,
        tokenizer=tokenizer,
        vocab_size=vocab_size,
        num_samples=t.max_steps * t.global_batch_size,
    )
    pad_id = tokenizer.pad_id if tokenizer is not None else 0
    loader = build_dataloader(
        dataset,
        shuffle=data.shuffle,
        dp_rank=dp_rank,
        dp_size=dp_size,
        micro_batch_size=t.micro_batch_size,
        seed=t.seed,
        num_workers=data.num_workers,
        pin_memory=data.pin_memory,
        prefetch_factor=data.prefetch_factor,
        collate_fn=functools.partial(collate, pad_id=pad_id),
    )
    return SimpleNamespace(tokenizer=tokenizer, train_dataset=dataset, train_dataloader=loader)


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
