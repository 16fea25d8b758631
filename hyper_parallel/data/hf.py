"""``hf_datasets``: a dataset read with the Hugging Face ``datasets`` library, one sample a record.

Legacy C.5: ``load_dataset(train_path, split="train")`` and the plain-text transform
``tokenizer(texts, truncation=True, max_length=max_seq_len)``, ``labels`` = ``input_ids``,
empty sequences dropped. Records are **not packed**: each becomes one sample of at most
``max_seq_len`` tokens and collate pads the batch.

``dataset_path`` names, in this order:

* a local file, read by the builder of its suffix: ``.jsonl`` / ``.json`` -> ``json``,
  ``.txt`` -> ``text`` (the ``datasets`` text builder: **one record per line**, column
  ``text``; the hyper_parallel ``text`` type reads blank-line separated documents instead),
  ``.parquet``, ``.csv``;
* a local folder written by ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk`` (it holds
  ``dataset_info.json`` + ``state.json``, or ``dataset_dict.json``): ``load_from_disk``;
* any other local folder: ``load_dataset(folder, name=subset)`` (data files, or a dataset
  repository copy whose README declares configurations);
* otherwise a Hub name (``name`` or ``owner/name``) that must already be in the local HF
  cache. **Nothing is ever downloaded**: the load runs in the libraries' offline mode, so an
  uncached name fails at once with an error saying how to provide a local copy, instead of
  reaching for the network (training hosts usually have none, and a hang there is costly).

The ``train`` split is used. ``datasets`` is imported only here, on first use: it costs about a
second and a half, which the other data types should not pay.

With ``streaming`` (:func:`load_train_split` ``streaming=True``, used by
:mod:`hyper_parallel.data.streaming`) the split is a ``datasets.IterableDataset``: local files and
data folders are read by ``load_dataset(..., streaming=True)`` record by record (no Arrow copy is
prepared); a ``save_to_disk`` folder and a cached Hub dataset, Arrow files already, are streamed
from them with ``Dataset.to_iterable_dataset()`` (streaming a Hub dataset would read its remote
files, and nothing is downloaded).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from hyper_parallel import assets
from hyper_parallel.data.sequences import SequenceDataset, check_max_seq_len

#: Local file suffix -> the ``datasets`` builder that reads it.
SUFFIX_BUILDERS: dict[str, str] = {
    ".jsonl": "json",
    ".json": "json",
    ".txt": "text",
    ".parquet": "parquet",
    ".csv": "csv",
}
SPLIT = "train"
# Texts handed to the tokenizer at once: large enough for its parallel batch encoding, small
# enough that a big dataset is never materialized as Python strings.
TEXT_BATCH = 1024
_OFFLINE_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
_SAVED_DATASET_FILES = ("dataset_info.json", "state.json")
_SAVED_DICT_FILE = "dataset_dict.json"
DEFAULT_FIELDS = {"path": "data.train_path", "subset": "data.subset", "text_key": "data.text_key"}


@contextlib.contextmanager
def hf_offline() -> Iterator[None]:
    """Offline mode for ``datasets`` and ``huggingface_hub``, restored afterwards.

    The environment variables alone are not enough: both libraries read them once, at import,
    so the module-level flags are switched too (they are read at call time).
    """
    import datasets.config as ds_config
    import huggingface_hub.constants as hub_constants

    saved_env = {name: os.environ.get(name) for name in _OFFLINE_ENV}
    saved_flags = (ds_config.HF_HUB_OFFLINE, ds_config.HF_DATASETS_OFFLINE,
                   hub_constants.HF_HUB_OFFLINE)
    os.environ.update(dict.fromkeys(_OFFLINE_ENV, "1"))
    ds_config.HF_HUB_OFFLINE = ds_config.HF_DATASETS_OFFLINE = True
    hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        (ds_config.HF_HUB_OFFLINE, ds_config.HF_DATASETS_OFFLINE,
         hub_constants.HF_HUB_OFFLINE) = saved_flags


@contextlib.contextmanager
def _quiet_progress() -> Iterator[None]:
    """No ``datasets`` progress bars under ``HYPER_PARALLEL_DISABLE_TQDM=1`` (tests, CI)."""
    import datasets

    if os.environ.get("HYPER_PARALLEL_DISABLE_TQDM", "0") != "1" or \
            not datasets.is_progress_bar_enabled():
        yield
        return
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        datasets.enable_progress_bars()


def _is_saved_to_disk(folder: str) -> bool:
    return (os.path.isfile(os.path.join(folder, _SAVED_DICT_FILE))
            or all(os.path.isfile(os.path.join(folder, f)) for f in _SAVED_DATASET_FILES))


def _looks_like_hub_name(path: str) -> bool:
    """``name`` or ``owner/name``: what ``load_dataset`` would look up on the Hub."""
    return (path.count("/") <= 1 and not path.startswith((".", "/", "~", assets.PKG_PREFIX))
            and os.path.splitext(path)[1] not in SUFFIX_BUILDERS and path.strip() == path != "")


def _offline_error(path: str, path_field: str, exc: BaseException) -> ValueError:
    import datasets.config as ds_config

    return ValueError(
        f"{path_field}={path!r} is not a local file or folder, and the Hugging Face dataset "
        f"{path!r} is not in the local cache ({ds_config.HF_DATASETS_CACHE}); hyper_parallel "
        "reads datasets offline and never downloads them. Download it on a machine with network "
        f"access (e.g. datasets.load_dataset({path!r}).save_to_disk('DIR'), or "
        f"`hf download {path} --repo-type dataset --local-dir DIR`), copy DIR here and set "
        f"{path_field} to it. (datasets said: {type(exc).__name__}: {exc})"
    )


def _train_split(loaded: Any, shown: str, path_field: str) -> Any:
    import datasets

    # save_to_disk of a single Dataset: no splits.
    if isinstance(loaded, (datasets.Dataset, datasets.IterableDataset)):
        return loaded
    if not isinstance(loaded, Mapping):
        raise ValueError(f"{path_field}={shown}: expected a dataset with splits, got "  # noqa: TRY004
                         f"{type(loaded).__name__}")
    if SPLIT not in loaded:
        raise ValueError(
            f"{path_field}={shown}: the dataset has no {SPLIT!r} split (its splits: "
            f"{', '.join(loaded) or 'none'}); hyper_parallel trains on {SPLIT!r}: name the "
            f"training files train* (e.g. train.jsonl) or point {path_field} at that split's file"
        )
    return loaded[SPLIT]


def load_train_split(path: str, *, subset: str | None = None,
                     fields: Mapping[str, str] | None = None, streaming: bool = False) -> Any:
    """The ``train`` split of ``path`` as a ``datasets.Dataset`` -- with ``streaming`` a
    ``datasets.IterableDataset`` (see the module docstring).

    Errors are ``ValueError`` / ``FileNotFoundError`` naming ``fields["path"]`` and
    ``fields["subset"]``; the library's own exceptions are wrapped, never leaked.
    """
    names = {**DEFAULT_FIELDS, **(fields or {})}
    path_field, subset_field = names["path"], names["subset"]
    if subset is not None and (not isinstance(subset, str) or not subset):
        raise ValueError(f"{subset_field}={subset!r}: must be a non-empty configuration name")
    resolved = assets.resolve_path(os.path.expanduser(path))
    shown = repr(path) if resolved == path else f"{path!r} (= {resolved!r})"

    import datasets

    def subset_note() -> str:
        return f" with {subset_field}={subset!r}" if subset is not None else ""

    def config_hint(exc: BaseException) -> str:
        # The library names configurations "config"; say which field chooses one.
        return (f" (a configuration is chosen with {subset_field})"
                if "config" in str(exc).lower() else "")

    with hf_offline(), _quiet_progress():
        if os.path.isfile(resolved):
            builder = SUFFIX_BUILDERS.get(os.path.splitext(resolved)[1].lower())
            if builder is None:
                raise ValueError(
                    f"{path_field}={shown}: hf_datasets reads local files ending in "
                    f"{', '.join(SUFFIX_BUILDERS)} (or a folder); rename the file or convert it"
                )
            if subset is not None:
                raise ValueError(
                    f"{subset_field}={subset!r}: a subset (dataset configuration) only applies "
                    f"to a dataset folder or a cached Hub dataset, but {path_field}={shown} is "
                    f"a single file; unset {subset_field}"
                )
            try:
                loaded = datasets.load_dataset(builder, data_files=resolved, streaming=streaming)
            except Exception as exc:  # the library raises many types; name the field
                raise ValueError(f"{path_field}={shown}: datasets cannot read it as {builder}: "
                                 f"{type(exc).__name__}: {exc}") from exc
        elif os.path.isdir(resolved):
            saved = _is_saved_to_disk(resolved)
            if saved and subset is not None:
                raise ValueError(
                    f"{subset_field}={subset!r}: a subset (dataset configuration) does not apply "
                    f"to {path_field}={shown}, a folder written by save_to_disk (it holds one "
                    f"configuration); unset {subset_field}")
            try:
                loaded = (datasets.load_from_disk(resolved) if saved
                          else datasets.load_dataset(resolved, name=subset, streaming=streaming))
            except Exception as exc:
                raise ValueError(f"{path_field}={shown}{subset_note()}: datasets cannot load "
                                 f"the folder: {type(exc).__name__}: {exc}{config_hint(exc)}"
                                 ) from exc
        elif _looks_like_hub_name(path):
            try:
                loaded = datasets.load_dataset(path, name=subset)
            except (ConnectionError, FileNotFoundError, OSError) as exc:
                raise _offline_error(path, path_field, exc) from exc
            except Exception as exc:
                raise ValueError(f"{path_field}={shown}{subset_note()}: datasets cannot load "
                                 f"the cached dataset: {type(exc).__name__}: {exc}"
                                 f"{config_hint(exc)}") from exc
        else:
            raise FileNotFoundError(
                f"{path_field}={shown} does not exist (hf_datasets takes a local file, a local "
                "folder, or the name of a Hub dataset already in the local cache)")
    split = _train_split(loaded, shown, path_field)
    if streaming and isinstance(split, datasets.Dataset):  # Arrow already: stream it from there
        split = split.to_iterable_dataset()
    return split


def _text_batches(split: Any, text_key: str, shown: str, key_field: str
                  ) -> Iterator[list[str]]:
    """The ``text_key`` column in batches, every value checked to be a string."""
    for start in range(0, len(split), TEXT_BATCH):
        texts = split[start: start + TEXT_BATCH][text_key]
        for offset, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValueError(  # noqa: TRY004 (bad data: the callers catch ValueError)
                    f"{shown}: record {start + offset} holds {type(text).__name__} "
                    f"{text!r:.60} under {text_key!r} ({key_field}), expected a string")
        yield texts


def build_hf_dataset(path: str, *, tokenizer: Any, max_seq_len: int, text_key: str = "text",
                     subset: str | None = None, limit: int | None = None,
                     fields: Mapping[str, str] | None = None) -> SequenceDataset:
    """Load ``path`` (see the module docstring) and tokenize its ``text_key`` column, one
    truncated sample per record. ``limit`` (``max_samples``) stops tokenizing once that many
    samples exist."""
    names = {**DEFAULT_FIELDS, **(fields or {})}
    check_max_seq_len(max_seq_len)
    split = load_train_split(path, subset=subset, fields=names)
    shown = f"{names['path']}={path!r}"
    if text_key not in split.column_names:
        raise ValueError(f"{shown}: no column {text_key!r} ({names['text_key']}); the dataset "
                         f"has columns {split.column_names}")
    feature = split.features[text_key]
    if getattr(feature, "dtype", None) not in ("string", "large_string", "null"):
        raise ValueError(f"{shown}: column {text_key!r} ({names['text_key']}) holds {feature}, "
                         "expected strings")
    column = split.select_columns([text_key])
    dataset = SequenceDataset.from_texts(
        _text_batches(column, text_key, shown, names["text_key"]), tokenizer=tokenizer,
        max_seq_len=max_seq_len, source=path, limit=limit)
    if len(dataset) == 0:
        raise ValueError(f"{shown}: its {dataset.num_records} records under {text_key!r} are "
                         "all empty; nothing to train on")
    return dataset


__all__ = ["SUFFIX_BUILDERS", "build_hf_dataset", "hf_offline", "load_train_split"]
