"""The training data types and what each one needs: one home for every config schema.

Both config worlds (the legacy ``data.type`` and ``BaseDataLoader.Config.dataset``) and the data
layer (:func:`hyper_parallel.data.build_dataset`) read the choices from here, so a type is added
or refused in one place. Framework-free on purpose (no torch, no ``hyper_parallel.data``): the
config tools import it without paying for torch.

Types:

* ``dummy``       -- random token ids, no files;
* ``jsonl``       -- JSON lines, documents under ``text_key``, packed into full-length samples;
* ``text``        -- plain text, documents separated by blank lines, packed the same way;
* ``hf_datasets`` -- a local file / folder (or a dataset already in the local Hugging Face
  cache) read with the ``datasets`` library; one truncated sample per record, not packed;
* ``json_file``   -- Alpaca records (``instruction`` / ``input`` / ``output``): supervised
  fine-tuning with the prompt masked out of the loss (``template``);
* ``preset_pt``   -- pre-tokenized batches saved with ``torch.save``, replayed in file order.
"""

from __future__ import annotations

DATA_TYPES: tuple[str, ...] = ("dummy", "jsonl", "text", "hf_datasets", "json_file", "preset_pt")

#: Types the legacy trainer registered that hyper_parallel deliberately does not implement,
#: with the reason shown to a user who asks for one.
REFUSED_DATA_TYPES: dict[str, str] = {
    "megatron": (
        "Megatron indexed .bin/.idx datasets need megatron-core's data loader, which "
        "hyper_parallel does not ship; convert the corpus to jsonl or a preset_pt file"
    ),
    "vl_dummy": (
        "the vision-language synthetic data needs a vision model; hyper_parallel trains "
        "text-only Qwen3.5"
    ),
}

#: ``json_file`` templates: ``empty`` = prompt-masked SFT (the prompt's labels are -100);
#: ``human_assistant`` = one ``"Human: ...\n\nAssistant: ..."`` text trained on every token.
TEMPLATES: tuple[str, ...] = ("empty", "human_assistant")

#: Types that read ``dataset_path`` (every type but ``dummy``).
TYPES_NEEDING_PATH: tuple[str, ...] = tuple(t for t in DATA_TYPES if t != "dummy")

#: Types that tokenize text (``dummy`` draws ids, ``preset_pt`` holds them already).
TYPES_NEEDING_TOKENIZER: tuple[str, ...] = ("jsonl", "text", "hf_datasets", "json_file")

#: Types whose documents sit under ``text_key``.
TYPES_USING_TEXT_KEY: tuple[str, ...] = ("jsonl", "hf_datasets")

#: Types whose samples differ in length (collate pads them to the batch's longest).
VARIABLE_LENGTH_TYPES: tuple[str, ...] = ("hf_datasets", "json_file")

#: Types that must be read in file order (the loader may not shuffle them).
ORDERED_TYPES: tuple[str, ...] = ("preset_pt",)


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
    "ORDERED_TYPES",
    "REFUSED_DATA_TYPES",
    "TEMPLATES",
    "TYPES_NEEDING_PATH",
    "TYPES_NEEDING_TOKENIZER",
    "TYPES_USING_TEXT_KEY",
    "VARIABLE_LENGTH_TYPES",
    "unsupported_type_message",
]
