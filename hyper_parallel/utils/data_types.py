"""The training data types and what each one needs: one home for every config schema.

Both config worlds (the legacy ``data.type`` and ``BaseDataLoader.Config.dataset``) and the data
layer (:func:`hyper_parallel.data.build_dataset`) read the choices from here, so a type is added
or refused in one place; the rules between a type and the settings that depend on it are
:func:`setting_problems`, asked by every place that checks them. Framework-free on purpose (no
torch, no ``hyper_parallel.data``): the config tools import it without paying for torch.

Types:

* ``dummy``       -- random token ids, no files;
* ``jsonl``       -- JSON lines, documents under ``text_key``, packed into full-length samples;
* ``text``        -- plain text, documents separated by blank lines, packed the same way;
* ``hf_datasets`` -- a local file / folder (or a dataset already in the local Hugging Face
  cache) read with the ``datasets`` library; one truncated sample per record, not packed;
* ``json_file``   -- JSON / JSON lines of one kind of record, told by the first record: Alpaca
  records (``instruction`` / ``input`` / ``output``, supervised fine-tuning with the prompt
  masked out of the loss, ``template``) or text records (the text under ``text_key``, one
  truncated sample each, as ``hf_datasets``);
* ``preset_pt``   -- pre-tokenized batches saved with ``torch.save``, replayed in file order.

``hf_datasets`` and ``json_file`` may be *streamed* (``streaming``): read record by record as a
``datasets`` ``IterableDataset``, split over the data-parallel ranks, shuffled in a seeded
buffer of :data:`STREAM_SHUFFLE_BUFFER` records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from hyper_parallel.utils.numbers import MAX_INT

#: The data types, as the ``Literal`` that ``BaseDataLoader.Config.dataset`` is annotated with.
DataType = Literal["dummy", "jsonl", "text", "hf_datasets", "json_file", "preset_pt", "vl_dummy"]
DATA_TYPES: tuple[str, ...] = get_args(DataType)

#: Types the legacy trainer registered that hyper_parallel deliberately does not implement,
#: with the reason shown to a user who asks for one.
REFUSED_DATA_TYPES: dict[str, str] = {
    "megatron": (
        "Megatron indexed .bin/.idx datasets need megatron-core's data loader, which "
        "hyper_parallel does not ship; convert the corpus to jsonl or a preset_pt file"
    ),
}

#: ``json_file`` templates: ``empty`` = prompt-masked SFT (the prompt's labels are -100);
#: ``human_assistant`` = one ``"Human: ...\n\nAssistant: ..."`` text trained on every token.
Template = Literal["empty", "human_assistant"]
TEMPLATES: tuple[str, ...] = get_args(Template)

#: Synthetic types: nothing is read, so no ``dataset_path``.
SYNTHETIC_TYPES: tuple[str, ...] = ("dummy", "vl_dummy")

#: Types that read ``dataset_path`` (every type but the synthetic ones).
TYPES_NEEDING_PATH: tuple[str, ...] = tuple(t for t in DATA_TYPES if t not in SYNTHETIC_TYPES)

#: Types that tokenize text (``dummy`` draws ids, ``preset_pt`` holds them already).
TYPES_NEEDING_TOKENIZER: tuple[str, ...] = ("jsonl", "text", "hf_datasets", "json_file")

#: Types whose documents sit under ``text_key`` (``json_file``: its text records).
TYPES_USING_TEXT_KEY: tuple[str, ...] = ("jsonl", "hf_datasets", "json_file")

#: Types whose samples differ in length (collate pads them to the batch's longest).
VARIABLE_LENGTH_TYPES: tuple[str, ...] = ("hf_datasets", "json_file")

#: An image-text batch's images, by transformers' names: ``pixel_values`` ``(patches,
#: patch_dim)`` and ``image_grid_thw`` ``(images, 3)``, the rows' images in row order (not
#: row-aligned: each row holds its own number of them).
IMAGE_KEYS: tuple[str, ...] = ("pixel_values", "image_grid_thw")

#: The batch key of how many images each row holds (``(B,)``): what a split of the rows deals
#: the images by.
IMAGES_PER_ROW = "images_per_row"

#: Types that must be read in file order (the loader may not shuffle them).
ORDERED_TYPES: tuple[str, ...] = ("preset_pt",)

#: Types that can be streamed (``streaming``): read record by record with the ``datasets``
#: library, never held whole.
STREAMING_TYPES: tuple[str, ...] = ("hf_datasets", "json_file")

#: Records in the shuffle buffer of a streamed dataset (``IterableDataset.shuffle(seed=...,
#: buffer_size=...)``). A fixed size, as in the later legacy snapshots, which have no setting
#: for it either: a sample is drawn at random from the next this-many records of the stream.
STREAM_SHUFFLE_BUFFER = 10_000


#: How the data settings are named in messages, by role: the legacy ``data`` keys. A caller
#: with other names (``BaseDataLoader.Config.dataset_subset``, ``dataloader.template``) passes
#: them as ``fields``.
LEGACY_DATA_FIELDS: dict[str, str] = {
    "type": "data.type",
    "path": "data.train_path",
    "subset": "data.subset",
    "text_key": "data.text_key",
    "template": "data.template",
    "max_samples": "data.train_size",
    "max_seq_len": "data.max_seq_len",
    "shuffle": "data.shuffle",
    "streaming": "data.streaming",
    "num_workers": "data.num_workers",
    "messages_key": "data.messages_key",
    "image_key": "data.image_key",
    "processor_path": "data.processor_path",
    "vl_grid": "data.vl_grid_t/h/w",
    "packing": "data.packing",
}

#: The types ``packing`` applies to: fine-tuning records packed into rows (``hf_datasets``,
#: ``json_file``), and the pretraining types whose rows then carry their documents' boundaries.
PACKING_TYPES = ("jsonl", "text", "hf_datasets", "json_file")

@dataclass(frozen=True)
class SettingProblem:
    """One data setting that its data type does not allow: which one (``role``, as in
    :data:`LEGACY_DATA_FIELDS`), its name in the caller's words (``field``), its ``value`` and
    why it is refused, with the fix (``reason``)."""

    role: str
    field: str
    value: object
    reason: str

    @property
    def message(self) -> str:
        """``<field>=<value>: <reason>``."""
        return f"{self.field}={self.value!r}: {self.reason}"


def setting_problems(
    type: str | None,
    *,
    subset: object = None,
    template: object = "empty",
    max_samples: object = None,
    shuffle: object = False,
    streaming: object = False,
    num_workers: object = 0,
    packing: object = False,
    fields: Mapping[str, str] | None = None,
) -> list[SettingProblem]:
    """What is wrong with the data settings that depend on the data type, in the order below
    (empty: nothing). The one statement of these rules: the component Config, the dataset
    factory, the loader and the legacy conversion all ask here.

    * ``subset`` only with ``hf_datasets``;
    * a ``template`` other than ``empty`` only with ``json_file``;
    * ``max_samples`` unset or an integer >= 1 (at most 2**53 - 1);
    * no ``shuffle`` of a type replayed in file order (``preset_pt``);
    * ``streaming`` only with a type read through the ``datasets`` library
      (:data:`STREAMING_TYPES`), and only without worker processes (``num_workers`` 0: each
      rank's stream is one ordered, resumable sequence read in the training process);
    * ``packing`` only with a type that has documents to pack (:data:`PACKING_TYPES`), and not
      with ``streaming`` (packing plans rows over the whole dataset, which a stream never holds).

    ``type`` is one of :data:`DATA_TYPES` (or None, which no type-dependent rule applies to:
    the loader knows a dataset, not always its type). ``fields`` names the settings in the
    caller's words, by role (:data:`LEGACY_DATA_FIELDS` names the roles not given). Whether
    ``subset`` and ``template`` are themselves valid values is the caller's check.
    """
    names = {**LEGACY_DATA_FIELDS, **(fields or {})}
    problems: list[SettingProblem] = []

    def refuse(role: str, value: object, reason: str) -> None:
        problems.append(SettingProblem(role, names[role], value, reason))

    this = f"(this is {type!r})"
    if subset is not None and type is not None and type != "hf_datasets":
        refuse("subset", subset, f"only applies to {names['type']}='hf_datasets' {this}; "
               "unset it")
    if template != "empty" and type is not None and type != "json_file":
        refuse("template", template, f"only applies to {names['type']}='json_file' {this}; "
               "leave it at 'empty'")
    if max_samples is not None:
        if not isinstance(max_samples, int) or isinstance(max_samples, bool) or max_samples < 1:
            refuse("max_samples", max_samples, "must be an integer >= 1 (or unset for the whole "
                   "dataset)")
        elif max_samples > MAX_INT:
            refuse("max_samples", max_samples, f"must be an integer <= {MAX_INT} (2**53 - 1)")
    if shuffle and type in ORDERED_TYPES:
        refuse("shuffle", shuffle, f"{type} replays the file's batches in file order; set it to "
               "False")
    if streaming and type is not None and type not in STREAMING_TYPES:
        refuse("streaming", streaming, f"only applies to {names['type']}='hf_datasets' or "
               f"'json_file', which the datasets library reads record by record {this}; set it "
               "to False")
    if streaming and isinstance(num_workers, int) and num_workers > 0:
        refuse("num_workers", num_workers, f"a streamed dataset ({names['streaming']}=True) is "
               "read in the training process, one ordered and resumable stream per "
               "data-parallel rank; set it to 0")
    if packing and type is not None and type not in PACKING_TYPES:
        why = ("its batches carry their own position_ids, packed as written"
               if type == "preset_pt" else "its samples are synthetic, no documents to pack")
        refuse("packing", packing, f"only applies to {names['type']}='jsonl', 'text', "
               f"'hf_datasets' or 'json_file' {this}: {why}; set it to False")
    if packing and streaming:
        refuse("packing", packing, f"packs rows from the whole dataset, which a stream "
               f"({names['streaming']}=True) never holds; set {names['streaming']} to False to "
               "pack, or packing to False to stream")
    return problems


def unsupported_type_message(value: object, field: str) -> str:
    """Why ``value`` is not a data type, for an error on ``field``: the refusal reason of a
    refused type, else the list of choices."""
    reason = REFUSED_DATA_TYPES.get(value) if isinstance(value, str) else None
    if reason is not None:
        return (f"{field}={value!r} is not supported: {reason} (choose one of "
                f"{', '.join(DATA_TYPES)})")
    return f"{field}={value!r} is not supported; choose one of {', '.join(DATA_TYPES)}"


__all__ = [
    "DATA_TYPES",
    "IMAGES_PER_ROW",
    "IMAGE_KEYS",
    "LEGACY_DATA_FIELDS",
    "ORDERED_TYPES",
    "PACKING_TYPES",
    "REFUSED_DATA_TYPES",
    "STREAMING_TYPES",
    "STREAM_SHUFFLE_BUFFER",
    "SYNTHETIC_TYPES",
    "TEMPLATES",
    "TYPES_NEEDING_PATH",
    "TYPES_NEEDING_TOKENIZER",
    "TYPES_USING_TEXT_KEY",
    "VARIABLE_LENGTH_TYPES",
    "DataType",
    "SettingProblem",
    "Template",
    "setting_problems",
    "unsupported_type_message",
]
