"""``BaseDataLoader``: the per-rank, resumable training data loader as a Configurable.

It is the legacy data pipeline, called the way ``BaseTrainer._build_dataset`` /
``_build_dataloader`` and ``LLMTrainer._build_collate_fn`` call it:
:func:`hyper_parallel.data.build_dataset` (``dummy`` random tokens; ``jsonl`` / ``text``
documents tokenized and packed into samples of ``seq_len`` tokens; ``hf_datasets`` /
``json_file`` records tokenized one sample each, truncated to ``seq_len``; ``preset_pt``
pre-tokenized batches replayed in file order), then :func:`hyper_parallel.data.build_dataloader`
(a torchdata ``StatefulDataLoader`` over a ``DistributedSampler`` seeded with ``seed``,
``local_batch_size`` samples per batch, tail dropped) with ``collate`` padding ``input_ids``
with the tokenizer's pad id (0 without a tokenizer), ``labels`` with -100, to the batch's
longest sample rounded up to ``pad_to_multiple_of``. Same settings, same batches, in the same
order. With ``streaming`` (``hf_datasets`` / ``json_file``, image-text chat records included)
the dataset is instead this rank's share of a ``datasets`` stream
(:func:`hyper_parallel.data.streaming.build_streaming_dataset`, or for chat records
:func:`hyper_parallel.data.streaming.build_image_text_stream`: ``split_dataset_by_node``, a
seeded shuffle buffer, ``max_samples`` the global sample budget of an epoch), batched by the
same loader without a sampler. With ``packing`` the samples are packed into rows whose
``position_ids`` restart at every document (:mod:`hyper_parallel.data.packing`).

Resumable: ``state_dict()`` is the ``StatefulDataLoader`` state (position, epoch and layout;
a stream's own position among it); ``load_state_dict`` on a freshly built loader continues with
the very next batch. Call ``set_epoch(epoch)`` at the start of every epoch.

Defaults equal the legacy ``data`` section: ``dummy``, no path, no subset, ``text_key: text``,
``template: empty``, all samples, no workers, shuffle on, pin memory on, no prefetch factor, no
streaming.
What the legacy config keeps elsewhere is passed to ``build``: ``seq_len``
(``data.max_seq_len``), ``local_batch_size`` (``train.micro_batch_size``), ``seed``
(``train.seed``), ``num_samples`` (dummy only: ``train.max_steps * train.global_batch_size``),
``vocab_size`` (the model's) and ``pad_to_multiple_of`` (``cp * tp`` in later snapshots).
The data type choices and their needs come from :mod:`hyper_parallel.utils.data_types`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyper_parallel.components._validate import integer_at_least, one_of, require
from hyper_parallel.protocols.configurable import Configurable
from hyper_parallel.utils.data_types import (
    DATA_TYPES,
    REFUSED_DATA_TYPES,
    TEMPLATES,
    TYPES_NEEDING_PATH,
    TYPES_NEEDING_TOKENIZER,
    DataType,
    Template,
    setting_problems,
)

if TYPE_CHECKING:
    from torch.utils.data import Dataset
    from torchdata.stateful_dataloader import StatefulDataLoader

# What dataset_path names, per type (for the "is required" message).
_PATH_HINTS = {
    "jsonl": "a file, directory or glob; e.g. pkg://corpus/train.jsonl",
    "text": "a file, directory or glob; e.g. pkg://corpus/train.txt",
    "hf_datasets": "a local data file or folder, or a Hub dataset name in the local cache",
    "json_file": "a JSON / JSON lines file of Alpaca or text records, a directory or a glob",
    "preset_pt": "a torch.save file: a list of batch dicts",
}


# The Config's field of each data-setting role (``utils.data_types.setting_problems``).
_FIELD_OF_ROLE = {
    "type": "dataset",
    "path": "dataset_path",
    "subset": "dataset_subset",
    "text_key": "text_key",
    "template": "template",
    "max_samples": "max_samples",
    "shuffle": "shuffle",
    "streaming": "streaming",
    "num_workers": "num_workers",
    "messages_key": "messages_key",
    "image_key": "image_key",
    "processor_path": "processor_path",
    "vl_grid": "vl_grid_t/h/w",
    "packing": "packing",
}


def _config_fields(config: Any) -> dict[str, str]:
    """How the data rules name this Config's fields (``BaseDataLoader.Config.dataset_subset``)."""
    owner = type(config).__qualname__
    return {role: f"{owner}.{name}" for role, name in _FIELD_OF_ROLE.items()}


class BaseDataLoader(Configurable):
    """This data-parallel rank's batches: iterate it, ``set_epoch`` it, checkpoint it.

    Attributes: ``dataset`` (the map-style dataset, or with ``streaming`` this rank's
    :class:`~hyper_parallel.data.streaming.StreamingDataset`), ``dataloader`` (the
    ``StatefulDataLoader``), ``sampler`` (its ``DistributedSampler``; None for a stream). A
    subclass with another data source overrides :meth:`build_dataset` (:meth:`build_stream`).
    """

    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        dataset: DataType = "dummy"
        """The data type. ``dummy``: random token ids, no files. ``jsonl``: one JSON object per
        line, the document under ``text_key``; ``text``: plain text, documents separated by
        blank lines (both packed into samples of exactly ``seq_len`` tokens). ``hf_datasets``:
        a local file or folder (or a Hub dataset already in the local cache) read with the
        ``datasets`` library, one sample per record truncated to ``seq_len``. ``json_file``:
        JSON / JSON lines of one kind of record, told by the first record: Alpaca records
        (``instruction``, optional ``input``, ``output``) for supervised fine-tuning, see
        ``template``, or text records (the text under ``text_key``, one sample each, as
        ``hf_datasets``), or image-text chat records (``messages_key``, images under
        ``image_key``; an image-text model). ``preset_pt``: pre-tokenized batches written with
        ``torch.save``, replayed in file order (they may carry ``pixel_values`` and
        ``image_grid_thw``). ``vl_dummy``: synthetic image-text samples, one random image of
        ``vl_grid_t x vl_grid_h x vl_grid_w`` patches and random text (an image-text model).
        (``megatron`` is refused.)"""

        dataset_path: str | None = None
        """Where the data is; required by every type but ``dummy``. ``jsonl`` / ``text`` /
        ``json_file``: a file, directory or glob (``pkg://corpus/train.jsonl`` is the corpus
        shipped with hyper_parallel). ``hf_datasets``: a ``.jsonl`` / ``.json`` / ``.txt`` /
        ``.parquet`` / ``.csv`` file, a data folder, a folder written by ``save_to_disk``, or
        the name of a Hub dataset in the local cache (nothing is downloaded). ``preset_pt``:
        the ``torch.save`` file (a list of dicts of ``[B, S]`` tensors)."""

        dataset_subset: str | None = None
        """``hf_datasets`` only: the dataset configuration, passed as ``load_dataset(...,
        name=...)``; for a folder or a cached Hub dataset that defines several (a single file
        has none)."""

        text_key: str = "text"
        """The key (``jsonl``, the text records of ``json_file``) or column (``hf_datasets``)
        holding the document text."""

        template: Template = "empty"
        """``json_file`` only (its Alpaca records). ``empty``: the sample is prompt (instruction
        + input) followed by the response (output) and its eos, trained on the response only
        (the prompt's labels are -100). ``human_assistant``: the record as the text ``Human:
        {prompt}\\n\\nAssistant: {output}``, trained on every token."""

        max_samples: int | None = None
        """Use only the first N samples of the dataset, for every type (``dummy``: the dataset
        has N samples). More than the dataset holds is an error. Unset: all of them. With
        ``streaming``: the global sample budget of an epoch -- every data-parallel rank yields
        ``N // ranks`` samples, reading the stream again from its start when its share runs
        out first (required with more than one data-parallel rank)."""

        num_workers: int = 0
        """Data-loading worker processes (0 loads in the training process)."""

        shuffle: bool = True
        """Shuffle the samples every epoch (seeded with ``build(seed=...)`` and the epoch).
        Must be false for ``preset_pt``, which replays its batches in file order. With
        ``streaming``: ``IterableDataset.shuffle`` with a buffer of 10,000 records, seeded the
        same way."""

        pin_memory: bool = True
        """Pin host memory of batches (only takes effect when an accelerator is present)."""

        prefetch_factor: int | None = None
        """Batches prefetched per worker; only valid with ``num_workers > 0``."""

        streaming: bool = False
        """``hf_datasets`` / ``json_file`` only: read the data as a stream (a ``datasets``
        ``IterableDataset``, record by record, never held whole) instead of loading it. Each
        data-parallel rank reads its share (``datasets.distributed.split_dataset_by_node``),
        shuffled in a seeded buffer of 10,000 records with ``shuffle``; ``max_samples`` is the
        global sample budget of an epoch. The position is resumable mid-epoch. Needs
        ``num_workers`` 0."""

        messages_key: str = "messages"
        """``json_file``: the key of an image-text record's chat messages (a list of ``{"role":
        "system" | "user" | "assistant", "content": ...}``); records holding it are rendered as
        Qwen's chat and trained on the assistant answers only."""

        image_key: str = "image"
        """``json_file`` image-text records: the key of the record's image path (or list of
        paths), relative to the file's folder; absent on a text-only record."""

        processor_path: str | None = None
        """``json_file`` image-text records: a folder holding the checkpoint's
        ``preprocessor_config.json`` (transformers' ``Qwen2VLImageProcessor``: resizing and
        normalisation); ``pkg://vl_corpus`` is the demo corpus's. Unset: Qwen's published
        settings at the model tower's patch sizes."""

        packing: bool = False
        """Pack the data into rows of ``seq_len`` whose documents stay apart (needs the model's
        ``attn_mask_type: block_causal``). ``hf_datasets`` / ``json_file`` (Alpaca, text and
        image-text chat records): whole samples, in file order, placed first-fit among the last
        64 open rows (each keeps its prompt masking, -100 on its first label; ``max_samples``
        counts samples; a row carries its samples' images in order), instead of one padded
        sample per row. ``jsonl`` / ``text``: the rows (packed already) carry where each
        document starts. Either way a row's ``position_ids`` (and an image-text row's three
        rows of them) restart at 0 at every document. Not with ``streaming``, ``dummy``,
        ``vl_dummy`` or ``preset_pt`` (whose batches carry their own ``position_ids``)."""

        vl_grid_t: int = 2
        """``vl_dummy``: the synthetic image's patch grid in time (frames / temporal patch)."""

        vl_grid_h: int = 2
        """``vl_dummy``: the synthetic image's patch grid height (a multiple of the tower's
        spatial merge, 2)."""

        vl_grid_w: int = 2
        """``vl_dummy``: the synthetic image's patch grid width (a multiple of the tower's
        spatial merge, 2)."""

        def __post_init__(self) -> None:
            reason = (REFUSED_DATA_TYPES.get(self.dataset) if isinstance(self.dataset, str)
                      else None)
            require(reason is None, self, "dataset", f"is not supported: {reason}")
            one_of(self, "dataset", DATA_TYPES)
            if self.dataset in TYPES_NEEDING_PATH:
                require(
                    isinstance(self.dataset_path, str) and self.dataset_path != "",
                    self,
                    "dataset_path",
                    f"is required for dataset={self.dataset!r} ({_PATH_HINTS[self.dataset]})",
                )
            if self.dataset_subset is not None:
                require(
                    isinstance(self.dataset_subset, str) and self.dataset_subset != "",
                    self,
                    "dataset_subset",
                    "must be a non-empty configuration name, or None",
                )
            require(
                isinstance(self.text_key, str) and self.text_key != "",
                self,
                "text_key",
                "must be a non-empty JSON key",
            )
            one_of(self, "template", TEMPLATES)
            problems = setting_problems(
                self.dataset,
                subset=self.dataset_subset,
                template=self.template,
                max_samples=self.max_samples,
                shuffle=self.shuffle,
                streaming=self.streaming,
                num_workers=self.num_workers,
                packing=self.packing,
                fields={**_config_fields(self), "type": "dataset"},  # a sibling: bare name
            )
            if problems:
                require(False, self, _FIELD_OF_ROLE[problems[0].role], problems[0].reason)
            integer_at_least(self, "num_workers", 0)
            for name in ("messages_key", "image_key"):
                require(isinstance(getattr(self, name), str) and getattr(self, name) != "",
                        self, name, "must be a non-empty JSON key")
            if self.processor_path is not None:
                require(isinstance(self.processor_path, str) and self.processor_path != "",
                        self, "processor_path", "must be a folder path, or None")
            for name in ("vl_grid_t", "vl_grid_h", "vl_grid_w"):
                integer_at_least(self, name, 1)
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
        pad_to_multiple_of: int = 1,
        field_names: Mapping[str, str] | None = None,
        vision: Any | None = None,
    ) -> None:
        """
        Args:
            dp_world_size, dp_rank: this rank's place in the data-parallel group (ranks with the
                same ``dp_rank``, e.g. tensor-parallel peers, get identical batches).
            local_batch_size: samples per batch on this rank (legacy ``micro_batch_size``).
            seq_len: tokens per sample (legacy ``data.max_seq_len``; ``training.seq_len``):
                the packing length of ``jsonl`` / ``text``, the truncation length of
                ``hf_datasets`` / ``json_file``, and what ``preset_pt`` samples must have.
            seed: shuffle seed (legacy ``train.seed``, default 42).
            tokenizer: a :class:`~hyper_parallel.components.tokenizer.BaseTokenizer` (or the
                legacy ``TextTokenizer``); required by ``jsonl`` / ``text`` / ``hf_datasets`` /
                ``json_file``, unused by ``dummy`` / ``preset_pt`` except for its pad id.
            vocab_size: the model's vocabulary: ``dummy`` draws ids below it (None: 32000), the
                text datasets check that the tokenizer fits, ``preset_pt`` that its ids do.
            num_samples: ``dummy`` only: the dataset length (``max_samples`` wins when set).
            pad_to_multiple_of: collate pads each batch to its longest sample rounded up to a
                multiple of this (later legacy snapshots: ``cp * tp``); 1 = no rounding. Only
                the variable-length types (``hf_datasets``, ``json_file``) have samples shorter
                than ``seq_len``.
            field_names: how data errors name the settings, by role (``type``, ``path``,
                ``subset``, ``text_key``, ``template``, ``max_samples``, ``max_seq_len``), e.g.
                ``{"path": "validation.dataset_path"}``; the roles not given are named
                ``<Config class>.<field>`` (and ``training.seq_len``).
            vision: the model's vision tower (its ``vision_config``), for image-text data: the
                placeholder ids and patch geometry the samples are made for (None: a text
                model, which image-text data is an error for).
        """
        # The data layer (torch, torchdata) is imported here, where the loader is built: the
        # Config above is configuration and must import without it.
        from hyper_parallel.data import build_dataloader

        self.config = config
        self.field_names = dict(field_names or {})
        self.vision = vision
        self.seed = seed
        self.holds_images = False  # build_dataset / build_stream say, for the collate
        if config.dataset in TYPES_NEEDING_TOKENIZER and tokenizer is None:
            raise ValueError(
                f"{type(config).__qualname__}.dataset={config.dataset!r} tokenizes text: build the "
                "data loader with tokenizer=<a tokenizer> (e.g. HuggingFaceTokenizer.Config().build())"
            )
        if (not isinstance(pad_to_multiple_of, int) or isinstance(pad_to_multiple_of, bool)
                or pad_to_multiple_of < 1):
            raise ValueError(f"BaseDataLoader: pad_to_multiple_of must be a positive int, got "
                             f"{pad_to_multiple_of!r}")
        self.tokenizer = tokenizer
        if config.streaming:
            # This rank's share of the stream, shuffled by the stream itself.
            self.dataset = self.build_stream(tokenizer=tokenizer, seq_len=seq_len,
                                             vocab_size=vocab_size, dp_rank=dp_rank,
                                             dp_world_size=dp_world_size, seed=seed)
        else:
            self.dataset = self.build_dataset(
                tokenizer=tokenizer, seq_len=seq_len, vocab_size=vocab_size,
                num_samples=num_samples
            )
        # LLMTrainer._build_collate_fn: pad with the tokenizer's pad id, 0 without a tokenizer.
        pad_id = tokenizer.pad_id if tokenizer is not None else 0
        self.dataloader: StatefulDataLoader = build_dataloader(
            self.dataset,
            dp_rank=dp_rank,
            dp_size=dp_world_size,
            micro_batch_size=local_batch_size,
            shuffle=config.shuffle and not config.streaming,
            seed=seed,
            num_workers=config.num_workers,
            pin_memory=config.pin_memory,
            prefetch_factor=config.prefetch_factor,
            collate_fn=self._collate(pad_id, pad_to_multiple_of),
        )

    def _collate(self, pad_id: int, pad_to_multiple_of: int) -> Any:
        """The loader's collate: ``collate``, or for image-text data ``collate_vision`` with
        the tower's positions (computed in the loader, on the host)."""
        from hyper_parallel.data import collate
        from hyper_parallel.data.vision import collate_vision

        if not self.holds_images:
            return functools.partial(collate, pad_id=pad_id, pad_to_multiple_of=pad_to_multiple_of)
        return functools.partial(collate_vision, pad_id=pad_id,
                                 pad_to_multiple_of=pad_to_multiple_of,
                                 positions=getattr(self.vision, "decoder_positions", None))

    def build_dataset(
        self,
        *,
        tokenizer: Any | None,
        seq_len: int,
        vocab_size: int | None,
        num_samples: int | None,
    ) -> Dataset:
        """The map-style dataset of ``self.config`` (override for another data source)."""
        from hyper_parallel.data import build_dataset
        from hyper_parallel.data.vision_source import holds_images

        c = self.config
        dataset = build_dataset(
            c.dataset, num_samples=num_samples, vision=self.vision,
            images={"messages_key": c.messages_key, "image_key": c.image_key,
                    "processor_path": c.processor_path,
                    "vl_grid": (c.vl_grid_t, c.vl_grid_h, c.vl_grid_w), "seed": self.seed},
            packing=c.packing, **self._source(tokenizer, seq_len, vocab_size))
        self.holds_images = holds_images(dataset)
        return dataset

    def build_stream(
        self,
        *,
        tokenizer: Any | None,
        seq_len: int,
        vocab_size: int | None,
        dp_rank: int,
        dp_world_size: int,
        seed: int,
    ) -> Dataset:
        """``streaming``: this rank's share of the stream of ``self.config`` (an
        ``IterableDataset``; override for another stream)."""
        from hyper_parallel.data.streaming import build_streaming_dataset
        from hyper_parallel.data.vision_source import holds_chat_records

        c = self.config
        if c.dataset == "json_file" and holds_chat_records(
                c.dataset_path, c.messages_key, self._field("path")):
            from hyper_parallel.data.streaming import build_image_text_stream

            # Image-text chat records: each rank reads its share's images as they come.
            source = self._source(tokenizer, seq_len, vocab_size)
            self.holds_images = True
            return build_image_text_stream(
                vision=self.vision, train_path=c.dataset_path, max_seq_len=seq_len,
                tokenizer=tokenizer, dp_rank=dp_rank, dp_size=dp_world_size, seed=seed,
                shuffle=c.shuffle, max_samples=c.max_samples, messages_key=c.messages_key,
                image_key=c.image_key, processor_path=c.processor_path,
                fields=source["fields"])
        return build_streaming_dataset(
            self.config.dataset, dp_rank=dp_rank, dp_size=dp_world_size, seed=seed,
            shuffle=self.config.shuffle, **self._source(tokenizer, seq_len, vocab_size))

    def _source(self, tokenizer: Any | None, seq_len: int, vocab_size: int | None) -> dict:
        """What both dataset builders read of the config, and the field names of its errors."""
        c = self.config
        return {
            "train_path": c.dataset_path,
            "max_seq_len": seq_len,
            "text_key": c.text_key,
            "tokenizer": tokenizer,
            "vocab_size": vocab_size,
            "subset": c.dataset_subset,
            "template": c.template,
            "max_samples": c.max_samples,
            "fields": {
                **_config_fields(c),
                "max_seq_len": "training.seq_len",
                **getattr(self, "field_names", {}),
            },
        }

    # ------------------------------------------------------------------ iteration

    def __iter__(self) -> Iterator[dict]:
        return iter(self.dataloader)

    def __len__(self) -> int:
        """Batches per epoch on this rank (a stream without ``max_samples`` has no length)."""
        return len(self.dataloader)

    @property
    def sampler(self):
        """The ``DistributedSampler`` (``sampler.set_epoch(epoch)`` reshuffles); None for a
        stream, which keeps its epoch itself (use :meth:`set_epoch`)."""
        return None if self.config.streaming else self.dataloader.sampler

    def set_epoch(self, epoch: int) -> None:
        if self.config.streaming:
            self.dataset.set_epoch(epoch)
        else:
            self.dataloader.sampler.set_epoch(epoch)

    # ------------------------------------------------------------------ checkpointing

    def _field(self, role: str) -> str:
        """How errors name the setting of ``role`` (``field_names``, else the Config's)."""
        return getattr(self, "field_names", {}).get(role) or _config_fields(self.config)[role]

    def state_dict(self) -> dict[str, Any]:
        return self.dataloader.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # A stream's position is its dataset's state; a map-style one has none. Loading one
        # kind into the other would silently restart the data, so it is refused.
        saved_stream = isinstance((state_dict or {}).get("dataset_state"), dict)
        if state_dict and saved_stream != self.config.streaming:
            what = "a streamed" if saved_stream else "a loaded (not streamed)"
            raise ValueError(
                f"cannot resume the data position: the checkpoint holds the position of {what} "
                f"dataset, and this run has {self._field('streaming')}={self.config.streaming}; "
                "resume with the original setting or start the data from scratch")
        check = getattr(self.dataset, "check_state", None)
        if saved_stream and check is not None:  # now: the loader reads it at the next iter()
            check(state_dict["dataset_state"])
        self.dataloader.load_state_dict(state_dict)


__all__ = ["BaseDataLoader"]
