"""``BaseDataLoader``: the per-rank, resumable training data loader as a Configurable.

It is the legacy data pipeline, called the way ``BaseTrainer._build_dataset`` /
``_build_dataloader`` and ``LLMTrainer._build_collate_fn`` call it:
:func:`hyper_parallel.data.build_dataset` (``dummy`` random tokens, or ``jsonl`` / ``text``
documents tokenized and packed into samples of ``seq_len`` tokens), then
:func:`hyper_parallel.data.build_dataloader` (a torchdata ``StatefulDataLoader`` over a
``DistributedSampler`` seeded with ``seed``, ``local_batch_size`` samples per batch, tail
dropped) with ``collate`` padding ``input_ids`` with the tokenizer's pad id (0 without a
tokenizer). Same settings, same batches, in the same order.

Resumable: ``state_dict()`` is the ``StatefulDataLoader`` state (position, epoch and layout);
``load_state_dict`` on a freshly built loader continues with the very next batch. Call
``set_epoch(epoch)`` (or ``loader.sampler.set_epoch``) at the start of every epoch.

Defaults equal the legacy ``data`` section: ``dummy``, no path, ``text_key: text``, no workers,
shuffle on, pin memory on, no prefetch factor. What the legacy config keeps elsewhere is passed
to ``build``: ``seq_len`` (``data.max_seq_len``), ``local_batch_size``
(``train.micro_batch_size``), ``seed`` (``train.seed``), ``num_samples`` (dummy only:
``train.max_steps * train.global_batch_size``) and ``vocab_size`` (the model's).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from torch.utils.data import Dataset
from torchdata.stateful_dataloader import StatefulDataLoader

from hyper_parallel.components._validate import integer_at_least, one_of, require
from hyper_parallel.data import DATA_TYPES, build_dataloader, build_dataset, collate
from hyper_parallel.protocols.configurable import Configurable


class BaseDataLoader(Configurable):
    """This data-parallel rank's batches: iterate it, ``set_epoch`` it, checkpoint it.

    Attributes: ``dataset`` (the map-style dataset), ``dataloader`` (the
    ``StatefulDataLoader``), ``sampler`` (its ``DistributedSampler``). A subclass with another
    data source overrides :meth:`build_dataset`.
    """

    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        dataset: Literal["dummy", "jsonl", "text"] = "dummy"
        """``dummy`` (random token ids, no files), ``jsonl`` (one JSON object per line, the
        document under ``text_key``) or ``text`` (plain text, documents separated by blank
        lines)."""

        dataset_path: str | None = None
        """File, directory or glob of the documents (required for ``jsonl`` and ``text``;
        ignored by ``dummy``). ``pkg://corpus/train.jsonl`` is the corpus shipped with
        hyper_parallel."""

        text_key: str = "text"
        """JSON key holding the document text (``jsonl``)."""

        num_workers: int = 0
        """Data-loading worker processes (0 loads in the training process)."""

        shuffle: bool = True
        """Shuffle the samples every epoch (seeded with ``build(seed=...)`` and the epoch)."""

        pin_memory: bool = True
        """Pin host memory of batches (only takes effect when an accelerator is present)."""

        prefetch_factor: int | None = None
        """Batches prefetched per worker; only valid with ``num_workers > 0``."""

        def __post_init__(self) -> None:
            one_of(self, "dataset", DATA_TYPES)
            if self.dataset != "dummy":
                require(
                    isinstance(self.dataset_path, str) and self.dataset_path != "",
                    self,
                    "dataset_path",
                    f"is required for dataset={self.dataset!r} (a file, directory or glob; "
                    "e.g. pkg://corpus/train.jsonl)",
                )
            require(
                isinstance(self.text_key, str) and self.text_key != "",
                self,
                "text_key",
                "must be a non-empty JSON key",
            )
            integer_at_least(self, "num_workers", 0)
            if self.prefetch_factor is not None:
                integer_at_least(self, "prefetch_factor", 1)
                require(
                    self.num_workers > 0,
                    self,
                    "prefetch_factor",
                    "only applies with worker processes; set num_workers > 0 or leave it unset",
                )

    def __init__(
        self,
        config: Config,
        *,
        dp_world_size: int,
        dp_rank: int,
        local_batch_size: int,
        seq_len: int,
        seed: int = 42,
        tokenizer: Any | None = None,
        vocab_size: int | None = None,
        num_samples: int | None = None,
    ) -> None:
        """
        Args:
            dp_world_size, dp_rank: this rank's place in the data-parallel group (ranks with the
                same ``dp_rank``, e.g. tensor-parallel peers, get identical batches).
            local_batch_size: samples per batch on this rank (legacy ``micro_batch_size``).
            seq_len: tokens per sample (legacy ``data.max_seq_len``).
            seed: shuffle seed (legacy ``train.seed``, default 42).
            tokenizer: a :class:`~hyper_parallel.components.tokenizer.BaseTokenizer` (or the
                legacy ``TextTokenizer``); required by ``jsonl`` / ``text``, unused by ``dummy``
                except for its pad id.
            vocab_size: the model's vocabulary: ``dummy`` draws ids below it (None: 32000), the
                text datasets check that the tokenizer fits.
            num_samples: ``dummy`` only: the dataset length.
        """
        self.config = config
        if config.dataset != "dummy" and tokenizer is None:
            raise ValueError(
                f"{type(config).__qualname__}.dataset={config.dataset!r} tokenizes text: build the "
                "data loader with tokenizer=<a tokenizer> (e.g. HuggingFaceTokenizer.Config().build())"
            )
        self.tokenizer = tokenizer
        self.dataset = self.build_dataset(
            tokenizer=tokenizer, seq_len=seq_len, vocab_size=vocab_size, num_samples=num_samples
        )
        # LLMTrainer._build_collate_fn: pad with the tokenizer's pad id, 0 without a tokenizer.
        pad_id = tokenizer.pad_id if tokenizer is not None else 0
        self.dataloader: StatefulDataLoader = build_dataloader(
            self.dataset,
            dp_rank=dp_rank,
            dp_size=dp_world_size,
            micro_batch_size=local_batch_size,
            shuffle=config.shuffle,
            seed=seed,
            num_workers=config.num_workers,
            pin_memory=config.pin_memory,
            prefetch_factor=config.prefetch_factor,
            collate_fn=functools.partial(collate, pad_id=pad_id),
        )

    def build_dataset(
        self,
        *,
        tokenizer: Any | None,
        seq_len: int,
        vocab_size: int | None,
        num_samples: int | None,
    ) -> Dataset:
        """The map-style dataset of ``self.config`` (override for another data source)."""
        c = self.config
        return build_dataset(
            c.dataset,
            train_path=c.dataset_path,
            max_seq_len=seq_len,
            text_key=c.text_key,
            tokenizer=tokenizer,
            vocab_size=vocab_size,
            num_samples=num_samples,
            path_field=f"{type(c).__qualname__}.dataset_path",
        )

    # ------------------------------------------------------------------ iteration

    def __iter__(self) -> Iterator[dict]:
        return iter(self.dataloader)

    def __len__(self) -> int:
        """Batches per epoch on this rank."""
        return len(self.dataloader)

    @property
    def sampler(self):
        """The ``DistributedSampler`` (``sampler.set_epoch(epoch)`` reshuffles)."""
        return self.dataloader.sampler

    def set_epoch(self, epoch: int) -> None:
        self.dataloader.sampler.set_epoch(epoch)

    # ------------------------------------------------------------------ checkpointing

    def state_dict(self) -> dict[str, Any]:
        return self.dataloader.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.dataloader.load_state_dict(state_dict)


__all__ = ["BaseDataLoader"]
