"""``streaming``: ``hf_datasets`` / ``json_file`` read record by record, split over the ranks.

The later legacy snapshots (``data.streaming: true``; their ``hyper_parallel/data/hf.py``) read
the data with ``load_dataset(..., streaming=True)``, shuffle it with ``IterableDataset.shuffle(
seed=train.seed, buffer_size=10_000)`` when ``data.shuffle`` is on, give each data-parallel rank
its share with ``datasets.distributed.split_dataset_by_node`` and take ``data.train_size`` as the
*global* sample budget of an epoch: each rank yields its part of it, reading the stream again
from its start when it runs out first; without a budget an epoch ends when the stream does.
:func:`build_streaming_dataset` does the same with the real libraries:

    source (load_dataset(..., streaming=True), or a save_to_disk / cached dataset's
            to_iterable_dataset())
      -> the record's number (map with_indices: errors name the record)
      -> shuffle(seed=seed, buffer_size=STREAM_SHUFFLE_BUFFER)      (shuffle on; reseeded for
         every epoch by datasets' set_epoch, which also shuffles the order of the files)
      -> split_dataset_by_node(rank=dp_rank, world_size=dp_size)    (whole files per rank when
         their number is a multiple of dp_size, else every dp_size-th record)
      -> StreamingDataset: each record made into one sample by RecordEncoder (json_file: Alpaca
         or text records, told by the first record; hf_datasets: the text under text_key), the
         budget counted, the position kept for checkpoints

``json_file`` chat records with images (:func:`build_image_text_stream`) take the same
path from :func:`json_lines_source` (the files' lines, one shard a file: an Arrow schema cannot
hold records whose contents are a string in one and a list of parts in the next) through
:func:`stream_records`; their encoder (:class:`~.chat_records.ChatStreamEncoder`) reads a
record's images when the record comes to this rank, so each rank opens the images of its share
only, and leaves out (logged) a record whose images cannot fit ``max_seq_len``.

**The budget** (``max_samples``, legacy ``data.train_size``) is split evenly: every rank yields
``max_samples // dp_size`` samples an epoch (the remainder is dropped, as the
``DistributedSampler`` of the map-style datasets drops it: every rank must run the same number of
batches, or the ranks' collectives would go out of step at the end of an epoch). When a rank's
share runs out first the stream is read again from its start, in the same order (a new *pass*).
Without a budget one epoch is one pass over the stream; the ranks' shares differ in length, so
that needs a single data-parallel rank (several are an error asking for the budget).

**Shuffle off**: records in file order, every epoch (datasets' ``set_epoch`` would shuffle the
order of the files, so it is only called with the shuffle on).

**Resume** (:meth:`StreamingDataset.state_dict`, which torchdata's ``StatefulDataLoader`` saves
as its ``dataset_state``): the epoch, the pass, the records read in the pass, the samples of the
epoch and the layout (ranks, seed, shuffle, budget: a position under another layout names other
samples, so loading it is an error). Without the shuffle the position also holds datasets' own
``IterableDataset.state_dict()``, and the resumed stream seeks there. With it, datasets cannot
restore the buffer ("examples from shuffle buffers are lost when resuming"), which would change
the samples: the pass is replayed from its start instead and the records already read are
skipped, untokenized -- the exact sample order of the uninterrupted run, for the cost of reading
the pass up to the saved position again.

Records are read in the training process (``num_workers`` must be 0): a worker process would
read a copy of the rank's stream of its own.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch.utils.data import IterableDataset

from hyper_parallel.data.datasets import LEGACY_FIELDS, text_tokenizer
from hyper_parallel.data.loader import IGNORE_INDEX
from hyper_parallel.data.sequences import check_max_seq_len
from hyper_parallel.data.sft import (
    TEXT,
    RecordEncoder,
    check_template_fits,
    record_kind,
    resolve_json_files,
)
from hyper_parallel.utils.data_types import (
    STREAM_SHUFFLE_BUFFER,
    STREAMING_TYPES,
    TEMPLATES,
    setting_problems,
)
from hyper_parallel.utils.errors import ConfigError

logger = logging.getLogger(__name__)

#: The column holding a record's number in the stream (added before the shuffle).
RECORD_NUMBER = "__hyper_parallel_record__"
#: What :meth:`StreamingDataset.state_dict` holds besides the position: the layout it is for.
_LAYOUT_KEYS = ("dp_rank", "dp_size", "seed", "shuffle", "samples_per_rank")
_STATE_KIND = "hyper_parallel.streaming"


def _number(_record: dict, index: int) -> dict:
    return {RECORD_NUMBER: index}


class StreamingDataset(IterableDataset):
    """This data-parallel rank's samples from a ``datasets.IterableDataset`` (module docstring).

    ``set_epoch(epoch)`` before every epoch; ``len()`` is ``samples_per_rank`` (a stream without
    a budget has no length). ``state_dict()`` / ``load_state_dict()``: the exact position.
    """

    def __init__(self, source: Any, encoder: RecordEncoder, *, path: str, dp_rank: int,
                 dp_size: int, seed: int, shuffle: bool, samples_per_rank: int | None,
                 drop_nulls: bool, fields: Mapping[str, str]) -> None:
        self.source = source
        self.encoder = encoder
        #: Whether its samples carry images (the loader collates them with collate_vision).
        self.holds_images = bool(getattr(encoder, "holds_images", False))
        self.path = path
        self.shuffle = shuffle
        self.samples_per_rank = samples_per_rank
        self.layout = {"dp_rank": dp_rank, "dp_size": dp_size, "seed": seed, "shuffle": shuffle,
                       "samples_per_rank": samples_per_rank}
        self.fields = dict(fields)
        self._drop_nulls = drop_nulls
        self.epoch = 0
        self._resume: dict | None = None
        self._position = {"epoch": 0, "pass": 0, "records": 0, "samples": 0}
        self._stream: Any = None  # the pass being read (its datasets state: the position)
        self._loaded_source: Any = None  # a loaded position's datasets state, until read on

    # ------------------------------------------------------------------ iteration

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        if self.samples_per_rank is None:
            raise TypeError(f"a streamed dataset has no length without {self.fields['max_samples']}"
                            " (the sample budget of an epoch)")
        return self.samples_per_rank

    def _where(self, number: Any) -> str:
        return f"{self.path} record {number}"

    def _records(self, stream: Any) -> Iterator[dict]:
        """The records of ``stream``; what datasets cannot read is a ``ConfigError`` naming the
        path field (found only now: a stream is read as the run goes)."""
        iterator = iter(stream)
        while True:
            try:
                record = next(iterator)
            except StopIteration:
                return
            except Exception as exc:  # noqa: BLE001 - the library raises many types
                raise ConfigError(
                    f"datasets cannot read the stream of {self.path!r} (data-parallel rank "
                    f"{self.layout['dp_rank']}, epoch {self.epoch}): {type(exc).__name__}: {exc}",
                    path=self.fields["path"]) from None
            yield record

    def _sample(self, record: dict) -> dict[str, torch.Tensor] | None:
        number = record.pop(RECORD_NUMBER, "?")
        if self._drop_nulls:  # json: datasets fills a key other records have with None
            record = {k: v for k, v in record.items() if v is not None}
        try:
            encoded = self.encoder(record, self._where(number))
        except (ValueError, OSError) as exc:  # the record's content: the user's data to fix
            raise ConfigError(str(exc)) from None
        if encoded is None or isinstance(encoded, Mapping):  # left out, or a whole sample
            return encoded
        ids, prompt_len = encoded
        input_ids = torch.tensor(ids, dtype=torch.long)
        labels = input_ids.clone()
        labels[:prompt_len] = IGNORE_INDEX
        return {"input_ids": input_ids, "labels": labels}

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        resume, self._resume = self._resume, None
        epoch, budget = self.epoch, self.samples_per_rank
        pass_, records, samples = ((resume["pass"], resume["records"], resume["samples"])
                                   if resume else (0, 0, 0))
        self._position = {"epoch": epoch, "pass": pass_, "records": records, "samples": samples}
        while budget is None or samples < budget:
            # A pristine copy per pass: datasets keeps a loaded state for every later iteration.
            stream = copy.deepcopy(self.source)
            if self.shuffle:
                stream.set_epoch(epoch)
            skip = 0
            if records:
                saved = resume.get("source") if resume else None
                if saved is None:  # the shuffle buffer cannot be restored: replay the pass
                    skip = records
                else:
                    stream.load_state_dict(saved)
            resume = None
            self._stream, self._loaded_source = stream, None
            from_start, samples_before = records == 0, samples
            for record in self._records(stream):
                if skip:
                    skip -= 1
                    continue
                records += 1
                self._position["records"] = records
                sample = self._sample(record)
                if sample is None:
                    continue
                samples += 1
                self._position["samples"] = samples
                yield sample
                if budget is not None and samples >= budget:
                    return
            if budget is None:
                return
            if from_start and samples == samples_before:
                raise ConfigError(
                    f"{self.path!r}: data-parallel rank {self.layout['dp_rank']} of "
                    f"{self.layout['dp_size']} got no sample from its share of the stream (no "
                    "record, or none that gives a token); use more data or fewer data-parallel "
                    "ranks", path=self.fields["path"])
            pass_, records = pass_ + 1, 0
            self._position.update({"pass": pass_, "records": 0})
            if pass_ == 1:
                logger.info("%s: data-parallel rank %d read its whole share of the stream after "
                            "%d of %d samples; reading it again from the start to fill %s",
                            self.path, self.layout["dp_rank"], samples, budget,
                            self.fields["max_samples"])

    # ------------------------------------------------------------------ checkpointing

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"kind": _STATE_KIND, **self._position, **self.layout,
                                 "source": None}
        if not self.shuffle and self._position["records"]:
            state["source"] = (self._loaded_source if self._stream is None
                               else self._stream.state_dict())
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.check_state(state)
        self.epoch = int(state["epoch"])
        self._resume = dict(state)
        self._position = {k: state[k] for k in ("epoch", "pass", "records", "samples")}
        self._stream, self._loaded_source = None, state.get("source")

    def check_state(self, state: Any) -> None:
        """A ``ValueError`` unless ``state`` is a position of this stream's layout."""
        if not isinstance(state, Mapping) or state.get("kind") != _STATE_KIND:
            raise ValueError(
                f"cannot resume the data position: the checkpoint holds no position of a "
                f"streamed dataset ({self.fields['streaming']} changed?); resume with the "
                "original settings or start the data from scratch")
        for key in _LAYOUT_KEYS:
            if state.get(key) != self.layout[key]:
                raise ValueError(
                    f"cannot resume the data position: it was saved with {key}="
                    f"{state.get(key)!r} but this run has {self.layout[key]!r} (the streamed "
                    "data's layout changed: data-parallel ranks, seed, shuffle or "
                    f"{self.fields['max_samples']}); resume with the original settings or start "
                    "the data from scratch")

    def describe(self) -> str:
        """One line for the training log."""
        budget = ("one pass over the stream per epoch" if self.samples_per_rank is None else
                  f"{self.samples_per_rank} samples per epoch on each of "
                  f"{self.layout['dp_size']} data-parallel ranks")
        order = (f"shuffled in a buffer of {STREAM_SHUFFLE_BUFFER} records (seed "
                 f"{self.layout['seed']})" if self.shuffle else "in file order")
        return f"{self.path}: {self.encoder.kind} records streamed, {order}; {budget}"


def _first_record(stream: Any, path: str, path_field: str) -> dict | None:
    try:
        return next(iter(stream), None)
    except Exception as exc:  # the library raises many types; name the field
        raise ValueError(f"{path_field}={path!r}: datasets cannot read it: "
                         f"{type(exc).__name__}: {exc}") from exc


def build_streaming_dataset(
    type: str,
    *,
    train_path: str | None,
    max_seq_len: int,
    dp_rank: int = 0,
    dp_size: int = 1,
    seed: int = 42,
    shuffle: bool = True,
    text_key: str = "text",
    tokenizer: Any = None,
    vocab_size: int | None = None,
    subset: str | None = None,
    template: str = "empty",
    max_samples: int | None = None,
    fields: Mapping[str, str] | None = None,
) -> StreamingDataset:
    """This rank's stream of ``hf_datasets`` / ``json_file`` samples (module docstring).

    The arguments are :func:`~hyper_parallel.data.build_dataset`'s, plus the layout (``dp_rank``,
    ``dp_size``), ``seed`` (``train.seed``) and ``shuffle``; ``max_samples`` is the *global*
    sample budget of an epoch. Errors are ``ValueError`` / ``FileNotFoundError`` naming the
    fields (``fields``, by role; :data:`~hyper_parallel.data.datasets.LEGACY_FIELDS` names the
    rest); a record found wrong while training is a ``ConfigError`` naming it.
    """
    names = {**LEGACY_FIELDS, **(fields or {})}
    path_field = names["path"]
    if type not in STREAMING_TYPES:
        raise ValueError(setting_problems(type, streaming=True, fields=names)[0].message)
    if template not in TEMPLATES:
        raise ValueError(f"{names['template']}={template!r} is not supported; choose one of "
                         f"{', '.join(TEMPLATES)}")
    problems = setting_problems(type, subset=subset, template=template, max_samples=max_samples,
                                streaming=True, fields=names)
    if problems:
        raise ValueError(problems[0].message)
    check_max_seq_len(max_seq_len)
    if not train_path:
        raise ValueError(f"{names['type']}={type!r} needs {path_field}")
    _samples_per_rank(max_samples, dp_size, names)
    tokenizer = text_tokenizer(tokenizer, vocab_size)

    import datasets

    from hyper_parallel.data.hf import _quiet_progress, hf_offline, load_train_split

    with hf_offline(), _quiet_progress():
        if type == "json_file":
            files = resolve_json_files(train_path, path_field)
            try:
                stream = datasets.load_dataset("json", data_files=files, split="train",
                                               streaming=True)
            except Exception as exc:  # the library raises many types; name the field
                raise ValueError(f"{path_field}={train_path!r}: datasets cannot read it as "
                                 f"json: {exc.__class__.__name__}: {exc}") from exc
        else:
            stream = load_train_split(train_path, subset=subset, fields=names, streaming=True)
        first = _first_record(stream, train_path, path_field)
    if first is None:
        raise ValueError(f"{path_field}={train_path!r}: no records to stream")
    where_first = f"{train_path} record 0"
    if type == "json_file":
        kind = record_kind({k: v for k, v in first.items() if v is not None}, where_first,
                           text_key=text_key, fields=names, path=train_path)
        check_template_fits(template, kind, names, train_path, where_first)
        encoder = RecordEncoder(kind, tokenizer=tokenizer, max_seq_len=max_seq_len,
                                template=template, text_key=text_key, first=where_first,
                                fields=names)
    else:
        columns = stream.column_names
        if columns is not None:
            if text_key not in columns:
                raise ValueError(f"{path_field}={train_path!r}: no column {text_key!r} "
                                 f"({names['text_key']}); the dataset has columns {columns}")
            stream = stream.select_columns([text_key])
        encoder = RecordEncoder(TEXT, tokenizer=tokenizer, max_seq_len=max_seq_len,
                                text_key=text_key, fields=names)
    return stream_records(stream, encoder, train_path=train_path, dp_rank=dp_rank,
                          dp_size=dp_size, seed=seed, shuffle=shuffle, max_samples=max_samples,
                          drop_nulls=type == "json_file", fields=names)


def _samples_per_rank(max_samples: int | None, dp_size: int,
                      names: Mapping[str, str]) -> int | None:
    """Each rank's samples an epoch: ``max_samples // dp_size`` (module docstring)."""
    if max_samples is None and dp_size > 1:
        raise ValueError(
            f"{names['max_samples']} is unset, but {names['streaming']}=True on {dp_size} "
            "data-parallel ranks needs it: it is the sample budget of an epoch, of which every "
            f"rank reads {names['max_samples']} // {dp_size}. Without it an epoch would end "
            "where each rank's share of the stream does, at a different step on each rank; "
            f"set {names['max_samples']}")
    per_rank = None if max_samples is None else max_samples // dp_size
    if per_rank == 0:
        raise ValueError(f"{names['max_samples']}={max_samples} is fewer than the {dp_size} "
                         f"data-parallel ranks: each would read {max_samples} // {dp_size} = 0 "
                         "samples an epoch")
    return per_rank


def stream_records(
    source: Any,
    encoder: Any,
    *,
    train_path: str,
    dp_rank: int,
    dp_size: int,
    seed: int,
    shuffle: bool,
    max_samples: int | None,
    drop_nulls: bool = False,
    fields: Mapping[str, str] | None = None,
) -> StreamingDataset:
    """This rank's :class:`StreamingDataset` of ``source`` (a ``datasets.IterableDataset`` of
    records): numbered, shuffled in the seeded buffer with ``shuffle``, split over the
    data-parallel ranks, each record made into its sample by ``encoder(record, where)`` (``(ids,
    prompt tokens)``, a sample dict, or None to leave it out). ``max_samples`` is the global
    budget of an epoch."""
    from datasets.distributed import split_dataset_by_node

    names = {**LEGACY_FIELDS, **(fields or {})}
    per_rank = _samples_per_rank(max_samples, dp_size, names)
    stream = source.map(_number, with_indices=True)
    if shuffle:
        stream = stream.shuffle(seed=seed, buffer_size=STREAM_SHUFFLE_BUFFER)
    stream = split_dataset_by_node(stream, rank=dp_rank, world_size=dp_size)
    dataset = StreamingDataset(stream, encoder, path=train_path, dp_rank=dp_rank,
                               dp_size=dp_size, seed=seed, shuffle=shuffle,
                               samples_per_rank=per_rank, drop_nulls=drop_nulls, fields=names)
    if dp_rank == 0:
        logger.info("%s", dataset.describe())
    return dataset


def build_image_text_stream(
    *,
    vision: Any,
    train_path: str,
    max_seq_len: int,
    tokenizer: Any,
    dp_rank: int,
    dp_size: int,
    seed: int,
    shuffle: bool,
    max_samples: int | None,
    messages_key: str = "messages",
    image_key: str = "image",
    processor_path: str | None = None,
    fields: Mapping[str, str] | None = None,
) -> StreamingDataset:
    """``json_file`` image-text chat records streamed: this data-parallel rank's share of the
    records, each made into its sample as it comes -- its images read by this rank only
    (:class:`~.chat_records.ChatStreamEncoder`), for the model whose tower is ``vision``
    (:func:`~.vision_source.chat_setup`). The other arguments are
    :func:`build_streaming_dataset`'s and the image settings."""
    from hyper_parallel.data.chat_records import ChatRecords, ChatStreamEncoder
    from hyper_parallel.data.files import resolve_data_files
    from hyper_parallel.data.vision_source import chat_setup

    names = {**LEGACY_FIELDS, **(fields or {})}
    check_max_seq_len(max_seq_len)
    _samples_per_rank(max_samples, dp_size, names)
    tokens, processor = chat_setup(vision, tokenizer, processor_path, names)
    records = ChatRecords(tokenizer=tokenizer, tokens=tokens, processor=processor,
                          max_seq_len=max_seq_len, messages_key=messages_key,
                          image_key=image_key, length_field=names["max_seq_len"])
    files = resolve_data_files(train_path, suffix=".jsonl", path_field=names["path"])
    return stream_records(json_lines_source(files),
                          ChatStreamEncoder(records, path_field=names["path"]),
                          train_path=train_path, dp_rank=dp_rank, dp_size=dp_size, seed=seed,
                          shuffle=shuffle, max_samples=max_samples, fields=names)


def _json_lines_rows(files: list[str]) -> Iterator[dict]:
    """The non-blank lines of ``files`` as rows ``{"file", "line", "raw"}`` (bytes: a record
    is decoded and parsed by its encoder, which names its line)."""
    for file in files:
        with open(file, "rb") as fh:
            for number, raw in enumerate(fh, start=1):
                if raw.strip():
                    yield {"file": file, "line": number, "raw": raw}


def json_lines_source(files: list[str]) -> Any:
    """The lines of the JSON-lines ``files`` as a ``datasets.IterableDataset`` (one shard a
    file), for records whose shape an Arrow schema cannot hold -- chat records, whose contents
    are strings in one record and lists of parts in the next."""
    import datasets

    return datasets.IterableDataset.from_generator(_json_lines_rows,
                                                   gen_kwargs={"files": list(files)})


__all__ = ["RECORD_NUMBER", "StreamingDataset", "build_image_text_stream",
           "build_streaming_dataset", "json_lines_source", "stream_records"]
