"""Map-style training datasets: the factory, synthetic tokens and packed text.

``data.type`` selects one of (:data:`~hyper_parallel.utils.data_types.DATA_TYPES`):

* ``dummy`` -- :class:`DummyDataset`, random token ids (legacy behaviour, no files needed);
* ``jsonl`` -- one JSON object per line, the document text under ``data.text_key``;
* ``text``  -- plain UTF-8 text. Within a file, **documents are separated by one or more blank
  (empty or whitespace-only) lines**; a file without blank lines is one document. Lines inside a
  document keep their ``\\n`` (CRLF is read as LF);
* ``hf_datasets`` -- a local dataset read with the ``datasets`` library, one truncated sample
  per record (:mod:`hyper_parallel.data.hf`);
* ``json_file`` -- JSON records of one kind per file, told by the first record: Alpaca
  instructions for prompt-masked SFT, or text under ``data.text_key`` (one truncated sample per
  record, as ``hf_datasets``) (:mod:`hyper_parallel.data.sft`);
* ``preset_pt`` -- pre-tokenized batches replayed in file order (:mod:`hyper_parallel.data.preset`).

``megatron`` and ``vl_dummy`` (legacy registry entries) are refused with the reason
(:data:`~hyper_parallel.utils.data_types.REFUSED_DATA_TYPES`). Each of the last three types lives
in its own module, imported only when used (``hf_datasets`` pulls in the ``datasets`` library).
``max_samples`` (legacy ``data.train_size``) keeps the first N samples of any type.

``hf_datasets`` and ``json_file`` can also be streamed (``data.streaming``): that is
:func:`hyper_parallel.data.streaming.build_streaming_dataset`, an iterable dataset split over the
data-parallel ranks, not this factory's map-style datasets.

For ``jsonl`` and ``text``, ``data.train_path`` may be a file, a directory (its ``*.jsonl`` /
``*.txt`` files, not recursive, in name order) or a glob pattern (matches in sorted order), and
may start with ``pkg://`` to address the files shipped in ``hyper_parallel/assets``:
``pkg://corpus/train.jsonl``, ``pkg://corpus/valid.jsonl``, ``pkg://corpus/train.txt``.

Both text types are packed the same way (:class:`PackedTextDataset`): every non-empty document
is tokenized once, followed by the eos id, all documents are concatenated in file/line order and
the stream is cut into consecutive samples of exactly ``max_seq_len`` tokens; the incomplete
tail is dropped. ``labels`` equal ``input_ids`` (the model shifts them). Nothing is cached on
disk: the shipped corpus (~1 MB) tokenizes in well under a second. With ``data.packing`` a
sample also carries ``position_ids`` restarting at each document's start (and -100 on its first
label), so ``block_causal`` keeps the documents apart; ``hf_datasets`` / ``json_file`` samples
are then packed into rows (:mod:`hyper_parallel.data.packing`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch.utils.data import Dataset, Subset

from hyper_parallel.data.files import decode_utf8, json_lines, resolve_data_files
from hyper_parallel.data.packing import PackedSequenceDataset, document_positions
from hyper_parallel.data.tokenizer import TextTokenizer, load_tokenizer
from hyper_parallel.data.vision_source import holds_chat_records
from hyper_parallel.utils.choices import IGNORE_INDEX
from hyper_parallel.utils.data_types import (
    DATA_TYPES,
    LEGACY_DATA_FIELDS,
    TEMPLATES,
    setting_problems,
    unsupported_type_message,
)

#: The config fields named in errors, legacy names by default; ``build_dataset(fields=...)``
#: replaces them (the component passes its own, e.g. ``BaseDataLoader.Config.dataset_path``).
LEGACY_FIELDS = LEGACY_DATA_FIELDS
# Legacy: the dummy vocabulary comes from the model config, else 32000.
DEFAULT_DUMMY_VOCAB_SIZE = 32000
DUMMY_BASE_SEED = 42


class DummyDataset(Dataset):
    """Random token ids; sample ``i`` comes from a generator seeded ``42 + i``.

    Each sample depends only on its index, so the data a step sees is identical for every
    data-parallel layout (the sampler only decides which rank reads which index).
    """

    def __init__(self, num_samples: int, seq_len: int, vocab_size: int) -> None:
        for name, value in (("num_samples", num_samples), ("seq_len", seq_len),
                            ("vocab_size", vocab_size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"DummyDataset: {name} must be a positive int, got {value!r}")
        self.num_samples = num_samples
        self.seq_len = seq_len
        self.vocab_size = vocab_size

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not 0 <= index < self.num_samples:
            raise IndexError(f"DummyDataset index {index} out of range [0, {self.num_samples})")
        gen = torch.Generator().manual_seed(DUMMY_BASE_SEED + index)
        ids = torch.randint(0, self.vocab_size, (self.seq_len,), generator=gen)
        return {"input_ids": ids, "labels": ids.clone()}


class PackedTextDataset(Dataset):
    """Documents tokenized once, joined with eos and cut into fixed-length samples.

    Attributes for logging: ``num_documents`` (non-empty documents packed), ``num_empty``
    (empty documents skipped), ``num_tokens`` (stream length including the eos ids),
    ``num_dropped_tokens`` (the tail shorter than ``max_seq_len``), ``source``.
    """

    def __init__(self, documents: Sequence[str], *, tokenizer: TextTokenizer, max_seq_len: int,
                 source: str = "<documents>", boundaries: bool = False) -> None:
        if not isinstance(max_seq_len, int) or max_seq_len < 1:
            raise ValueError(f"data.max_seq_len must be a positive int, got {max_seq_len!r}")
        texts = [d for d in documents if d]
        eos = tokenizer.eos_id
        stream: list[int] = []
        doc_starts: list[int] = []
        for ids in tokenizer.encode_batch(texts):
            doc_starts.append(len(stream))
            stream.extend(ids)
            stream.append(eos)
        num_samples = len(stream) // max_seq_len
        if num_samples == 0:
            raise ValueError(
                f"{source}: {len(texts)} documents give only {len(stream)} tokens, fewer than "
                f"data.max_seq_len={max_seq_len}; lower data.max_seq_len or add data"
            )
        # int32 halves the memory of the packed stream; samples are widened to int64 on read.
        tokens = torch.tensor(stream[: num_samples * max_seq_len], dtype=torch.int32)
        self.samples = tokens.view(num_samples, max_seq_len)
        # data.packing: where each document starts, so a row carries its documents' boundaries
        # (position_ids restarting at 0) and block_causal keeps them apart.
        self.starts: torch.Tensor | None = None
        if boundaries:
            starts = torch.zeros(len(stream), dtype=torch.bool)
            starts[torch.tensor(doc_starts, dtype=torch.long)] = True
            self.starts = starts[: num_samples * max_seq_len].view(num_samples, max_seq_len)
        self.max_seq_len = max_seq_len
        self.source = source
        self.num_documents = len(texts)
        self.num_empty = len(documents) - len(texts)
        self.num_tokens = len(stream)
        self.num_dropped_tokens = len(stream) - num_samples * max_seq_len

    @classmethod
    def from_jsonl(cls, path: str, *, tokenizer: TextTokenizer, max_seq_len: int,
                   text_key: str = "text", path_field: str = "data.train_path",
                   boundaries: bool = False) -> PackedTextDataset:
        files = resolve_data_files(path, suffix=".jsonl", path_field=path_field)
        docs = read_jsonl_documents(files, text_key)
        return cls(docs, tokenizer=tokenizer, max_seq_len=max_seq_len, source=path,
                   boundaries=boundaries)

    @classmethod
    def from_text(cls, path: str, *, tokenizer: TextTokenizer, max_seq_len: int,
                  path_field: str = "data.train_path", boundaries: bool = False
                  ) -> PackedTextDataset:
        files = resolve_data_files(path, suffix=".txt", path_field=path_field)
        docs = read_text_documents(files)
        return cls(docs, tokenizer=tokenizer, max_seq_len=max_seq_len, source=path,
                   boundaries=boundaries)

    def __len__(self) -> int:
        return self.samples.shape[0]

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        ids = self.samples[index].to(torch.long)  # a fresh tensor: callers may modify it
        if self.starts is None:
            return {"input_ids": ids, "labels": ids.clone()}
        # A document's first token is no target of the one before (the previous document's
        # eos), as DataCollatorWithFlattening writes; its positions restart at 0.
        starts = self.starts[index]
        labels = ids.clone()
        labels[starts] = IGNORE_INDEX
        return {"input_ids": ids, "labels": labels, "position_ids": document_positions(starts)}

    def head(self, n: int) -> PackedTextDataset:
        """The first ``n`` samples (``max_samples``), sharing this dataset's storage."""
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.samples = self.samples[:n]
        out.starts = None if self.starts is None else self.starts[:n]
        return out

    def describe(self) -> str:
        """One line for the training log."""
        return (f"{self.source}: {self.num_documents} documents, {self.num_tokens} tokens -> "
                f"{len(self)} samples of {self.max_seq_len} tokens "
                f"({self.num_dropped_tokens} tail tokens dropped)")


# ----------------------------------------------------------------------------------------------
# Reading files
# ----------------------------------------------------------------------------------------------


def read_jsonl_documents(files: Sequence[str], text_key: str = "text") -> list[str]:
    """The ``text_key`` string of every JSON object, in file and line order.

    Blank lines are skipped; any other malformed line raises ``ValueError`` naming
    ``file:line`` and the key.
    """
    from hyper_parallel.data.sft import record_text  # json_file's text records: one rule

    expected = (f"expected one object per line with the text under key {text_key!r} "
                "(data.text_key)")
    return [record_text(obj, where, text_key=text_key)
            for file in files for where, obj in json_lines(file, expected)]


def read_text_documents(files: Sequence[str]) -> list[str]:
    """Documents of plain-text files: runs of non-blank lines, separated by blank lines."""
    docs: list[str] = []
    for file in files:
        with open(file, "rb") as fh:
            text = decode_utf8(fh.read(), file).replace("\r\n", "\n")
        current: list[str] = []
        for line in text.split("\n"):
            if line.strip():
                current.append(line)
            elif current:
                docs.append("\n".join(current))
                current = []
        if current:
            docs.append("\n".join(current))
    return docs


# ----------------------------------------------------------------------------------------------
# Factory
# ----------------------------------------------------------------------------------------------


def first_samples(dataset: Dataset, max_samples: int | None, *,
                  field: str = "data.train_size") -> Dataset:
    """The first ``max_samples`` samples of ``dataset`` (all of them for None).

    More than the dataset holds is an error naming both numbers (silently training on fewer
    samples than asked would change the run's length and schedule).
    """
    if max_samples is None:
        return dataset
    problems = setting_problems(None, max_samples=max_samples, fields={"max_samples": field})
    if problems:
        raise ValueError(problems[0].message)
    if max_samples > len(dataset):
        raise ValueError(f"{field}={max_samples} is more than the dataset's {len(dataset)} "
                         f"samples; lower {field} or unset it to use them all")
    if max_samples == len(dataset):
        return dataset
    head = getattr(dataset, "head", None)
    return head(max_samples) if callable(head) else Subset(dataset, range(max_samples))


def build_dataset(
    type: str,
    *,
    train_path: str | None,
    max_seq_len: int,
    text_key: str = "text",
    tokenizer: TextTokenizer | None = None,
    vocab_size: int | None = None,
    num_samples: int | None = None,
    path_field: str = "data.train_path",
    subset: str | None = None,
    template: str = "empty",
    max_samples: int | None = None,
    fields: Mapping[str, str] | None = None,
    vision: object = None,
    images: Mapping[str, object] | None = None,
    packing: bool = False,
) -> Dataset:
    """Build the dataset selected by ``data.type``.

    Args:
        type: ``data.type``, one of :data:`DATA_TYPES`.
        train_path: ``data.train_path`` (ignored by ``dummy``); see the module docstring.
        max_seq_len: ``data.max_seq_len``: sample length (dummy, preset_pt: must equal the
            file's), packing length (jsonl, text), truncation length (hf_datasets, json_file).
        text_key: ``data.text_key`` (``jsonl``, ``hf_datasets``, the text records of
            ``json_file``).
        tokenizer: for the text types (jsonl, text, hf_datasets, json_file); None loads the
            shipped tokenizer (the same default as an unset ``model.tokenizer_path``). Unused
            by ``dummy`` and ``preset_pt``. Anything with ``encode_batch`` / ``eos_id`` /
            ``vocab_size`` / ``path`` works (a ``TextTokenizer`` or a ``BaseTokenizer``).
        vocab_size: the model's vocabulary size. ``dummy`` draws ids below it (None: 32000, the
            legacy default); the text types check the tokenizer fits into it; ``preset_pt``
            checks the file's ids are below it.
        num_samples: ``dummy`` only: dataset length, legacy ``max_steps * global_batch_size``
            (not needed when ``max_samples`` is set).
        path_field: the config field ``train_path`` came from, named in errors (use
            ``"train.eval.eval_dataset"`` when building the evaluation set).
        subset: ``data.subset``: the ``hf_datasets`` configuration (``load_dataset(name=)``);
            only for a folder or a cached Hub dataset.
        template: ``data.template``: ``json_file`` only, one of :data:`TEMPLATES`.
        max_samples: ``data.train_size``: keep the first N samples (dummy: the dataset length
            is N); more than the dataset holds is an error.
        fields: config field names for the errors, keyed like :data:`LEGACY_FIELDS` (missing
            keys keep the legacy names; ``"path"`` defaults to ``path_field``).
        vision: the model's vision tower (``vision_config``): ``vl_dummy`` samples and
            ``json_file`` chat records are made for it, ``preset_pt`` batches carrying images
            are dealt to their rows by its placeholder id (None: a text model, which image data
            is an error for).
        images: the image settings (:func:`~.vision_source.build_vision_dataset`'s
            ``messages_key``, ``image_key``, ``processor_path``, ``vl_grid``, ``seed``); their
            defaults when None.
        packing: ``data.packing``: ``hf_datasets`` / ``json_file`` samples (the first
            ``max_samples`` of them) packed into rows of ``max_seq_len``
            (:mod:`hyper_parallel.data.packing`), image-text chat records with their images;
            ``jsonl`` / ``text`` rows carry their documents' ``position_ids``.
    """
    names = {**LEGACY_FIELDS, "path": path_field, **(fields or {})}
    path_field = names["path"]
    if type not in DATA_TYPES:
        raise ValueError(unsupported_type_message(type, names["type"]))
    if template not in TEMPLATES:
        raise ValueError(f"{names['template']}={template!r} is not supported; choose one of "
                         f"{', '.join(TEMPLATES)}")
    problems = setting_problems(type, subset=subset, template=template,
                                max_samples=max_samples, packing=packing, fields=names)
    if problems:
        raise ValueError(problems[0].message)
    images = dict(images or {})
    if type == "vl_dummy" or (type == "json_file" and train_path and holds_chat_records(
            train_path, str(images.get("messages_key", "messages")), path_field)):
        # Image-text data: made for the model's tower (data.vision_source). Packed chat
        # records carry their images in the rows (vl_dummy's packing is refused above).
        from hyper_parallel.data.vision_source import build_vision_dataset

        dataset = build_vision_dataset(
            type, vision=vision, train_path=train_path, max_seq_len=max_seq_len,
            tokenizer=tokenizer, vocab_size=vocab_size,
            num_samples=num_samples if max_samples is None else max_samples, fields=names,
            limit=max_samples, packing=packing, **images)
        dataset = first_samples(dataset, max_samples, field=names["max_samples"])
        return PackedSequenceDataset(dataset, max_seq_len=max_seq_len) if packing else dataset
    if type == "dummy":
        if max_samples is None and num_samples is None:
            raise ValueError("the dummy dataset needs num_samples "
                             "(train.max_steps * train.global_batch_size)")
        return DummyDataset(num_samples if max_samples is None else max_samples, max_seq_len,
                            DEFAULT_DUMMY_VOCAB_SIZE if vocab_size is None else vocab_size)

    if not train_path:
        examples = {"jsonl": " (e.g. pkg://corpus/train.jsonl for the shipped corpus)",
                    "text": " (e.g. pkg://corpus/train.txt for the shipped corpus)"}
        raise ValueError(f"{names['type']}={type!r} needs {path_field} (a file, directory or "
                         f"glob{examples.get(type, '')})")
    if type == "preset_pt":
        from hyper_parallel.data.preset import PresetBatchesDataset

        dataset: Dataset = PresetBatchesDataset(train_path, max_seq_len=max_seq_len,
                                                vocab_size=vocab_size, fields=names,
                                                vision=vision)
        return first_samples(dataset, max_samples, field=names["max_samples"])

    # The remaining types tokenize text (TYPES_NEEDING_TOKENIZER).
    tokenizer = text_tokenizer(tokenizer, vocab_size)
    if type == "jsonl":
        dataset = PackedTextDataset.from_jsonl(train_path, tokenizer=tokenizer,
                                               max_seq_len=max_seq_len, text_key=text_key,
                                               path_field=path_field, boundaries=packing)
    elif type == "text":
        dataset = PackedTextDataset.from_text(train_path, tokenizer=tokenizer,
                                              max_seq_len=max_seq_len, path_field=path_field,
                                              boundaries=packing)
    elif type == "hf_datasets":
        from hyper_parallel.data.hf import build_hf_dataset

        dataset = build_hf_dataset(train_path, tokenizer=tokenizer, max_seq_len=max_seq_len,
                                   text_key=text_key, subset=subset, limit=max_samples,
                                   fields=names)
    else:
        from hyper_parallel.data.sft import build_sft_dataset

        dataset = build_sft_dataset(train_path, tokenizer=tokenizer, max_seq_len=max_seq_len,
                                    template=template, text_key=text_key, limit=max_samples,
                                    fields=names)
    dataset = first_samples(dataset, max_samples, field=names["max_samples"])
    if packing and type in ("hf_datasets", "json_file"):
        dataset = PackedSequenceDataset(dataset, max_seq_len=max_seq_len)
    return dataset


def text_tokenizer(tokenizer: TextTokenizer | None, vocab_size: int | None) -> TextTokenizer:
    """The tokenizer of a text dataset (None: the shipped one), checked to fit into the model's
    vocabulary ``vocab_size`` (None: not checked)."""
    if tokenizer is None:
        tokenizer = load_tokenizer(None)
    if vocab_size is not None and tokenizer.vocab_size > vocab_size:
        raise ValueError(
            f"the tokenizer {tokenizer.path!r} has {tokenizer.vocab_size} ids but the model "
            f"vocabulary (model.vocab_size) is {vocab_size}; use a matching model.tokenizer_path "
            f"or set model.vocab_size >= {tokenizer.vocab_size}"
        )
    return tokenizer
