"""Variable-length samples: one tokenized record each, not packed (``hf_datasets``, ``json_file``).

Unlike the packed types, every sample is one record truncated to ``max_seq_len`` tokens, so
samples differ in length and :func:`~hyper_parallel.data.loader.collate` pads each batch.

All samples live in one flat int32 tensor plus offsets: a few bytes per token instead of a
Python object per record, cheap to index, and shared (not copied) with fork-started loader
workers. A sample may start with a *prompt* whose labels are -100 (the SFT masking of
``json_file``); for plain text the prompt is empty and ``labels`` equal ``input_ids``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch.utils.data import Dataset

from hyper_parallel.data.loader import IGNORE_INDEX


class SequenceDataset(Dataset):
    """Samples of different lengths; sample ``i`` is ``input_ids`` + ``labels`` (-100 over its
    first ``prompt_lens[i]`` tokens).

    Attributes for logging: ``source``, ``num_records`` (records read), ``num_empty`` (records
    dropped because they gave no token), ``num_truncated`` (records cut to ``max_seq_len``).
    """

    def __init__(self, sequences: Sequence[Sequence[int]], *, prompt_lens: Sequence[int] | None = None,
                 max_seq_len: int, source: str = "<records>", num_records: int | None = None,
                 num_empty: int = 0, num_truncated: int = 0) -> None:
        if prompt_lens is not None and len(prompt_lens) != len(sequences):
            raise ValueError("SequenceDataset: one prompt length per sequence")
        lengths = torch.tensor([len(s) for s in sequences], dtype=torch.int64)
        self.offsets = torch.zeros(len(sequences) + 1, dtype=torch.int64)
        torch.cumsum(lengths, 0, out=self.offsets[1:])
        # int32 halves the memory; samples are widened to int64 on read.
        self.tokens = torch.tensor(list(itertools.chain.from_iterable(sequences)),
                                   dtype=torch.int32)
        self.prompt_lens = (torch.zeros(len(sequences), dtype=torch.int32) if prompt_lens is None
                            else torch.tensor(list(prompt_lens), dtype=torch.int32))
        self.max_seq_len = max_seq_len
        self.source = source
        self.num_records = len(sequences) if num_records is None else num_records
        self.num_empty = num_empty
        self.num_truncated = num_truncated

    @classmethod
    def from_texts(cls, batches: Iterable[Sequence[str]], *, tokenizer: Any, max_seq_len: int,
                   source: str, limit: int | None = None) -> SequenceDataset:
        """The legacy plain-text transform, ``tokenizer(texts, truncation=True,
        max_length=max_seq_len)`` with ``labels`` = ``input_ids``: one sample per text, cut to
        its first ``max_seq_len`` tokens, texts giving no token dropped.

        ``batches`` yields lists of texts (so a large dataset is never held as strings all at
        once); ``limit`` stops once that many samples exist (``max_samples``: the rest of the
        data is not tokenized at all).
        """
        check_max_seq_len(max_seq_len)
        samples: list[list[int]] = []
        records = empty = truncated = 0
        for texts in batches:
            records += len(texts)
            for ids in tokenizer.encode_batch(list(texts)):
                if not ids:
                    empty += 1
                    continue
                if len(ids) > max_seq_len:
                    truncated += 1
                    ids = ids[:max_seq_len]
                samples.append(ids)
            if limit is not None and len(samples) >= limit:
                break
        return cls(samples, max_seq_len=max_seq_len, source=source, num_records=records,
                   num_empty=empty, num_truncated=truncated)

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not -len(self) <= index < len(self):
            raise IndexError(f"{type(self).__name__} index {index} out of range [0, {len(self)})")
        index %= len(self)
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        ids = self.tokens[start:end].to(torch.long)  # a fresh tensor: callers may modify it
        labels = ids.clone()
        labels[: int(self.prompt_lens[index])] = IGNORE_INDEX
        return {"input_ids": ids, "labels": labels}

    def head(self, n: int) -> SequenceDataset:
        """The first ``n`` samples (``max_samples``), sharing this dataset's storage."""
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.offsets = self.offsets[: n + 1]
        out.tokens = self.tokens[: int(self.offsets[n])]
        out.prompt_lens = self.prompt_lens[:n]
        return out

    def lengths(self) -> torch.Tensor:
        """Tokens per sample."""
        return self.offsets[1:] - self.offsets[:-1]

    def describe(self) -> str:
        """One line for the training log."""
        lengths = self.lengths()
        longest = int(lengths.max()) if len(self) else 0
        return (f"{self.source}: {self.num_records} records -> {len(self)} samples of up to "
                f"{self.max_seq_len} tokens (longest {longest}, {self.num_truncated} truncated, "
                f"{self.num_empty} empty dropped)")


def check_max_seq_len(max_seq_len: object) -> None:
    if not isinstance(max_seq_len, int) or isinstance(max_seq_len, bool) or max_seq_len < 1:
        raise ValueError(f"data.max_seq_len must be a positive int, got {max_seq_len!r}")
