"""``json_file``: JSON records of one kind per file -- Alpaca instructions or text.

A file is either a JSON list of objects or JSON lines (one object per line, blank lines
skipped); a path may also be a folder (its ``*.json`` / ``*.jsonl`` files, in name order) or a
glob. The later legacy snapshots read ``json_file`` with ``datasets.load_dataset("json",
data_files=...)`` and tell a record's format by its keys; here **the first record tells the
kind of the whole file** (:func:`record_kind`):

* **Alpaca records** -- the first record has ``instruction``. Every record has ``instruction``
  (string), optional ``input`` (string; absent, null or empty = none) and ``output`` (string).
  The *prompt* is ``instruction``, followed by ``"\\n" + input`` when ``input`` is non-empty;
  the *response* is ``output``. Templates (``template``), as the legacy ``LLMTrainer`` tokenize
  transform (C.5):

  * ``empty`` -- prompt-masked SFT. Prompt and response are tokenized separately without special
    tokens; **the eos id is appended to the response** (as LlamaFactory-style templates do, so
    the model learns where an answer ends) and counts as a response token. The two are cut to
    ``max_seq_len`` by :func:`infer_seqlen` and the sample is ``prompt + response`` with labels
    -100 over the prompt, so only the response (and its eos) is trained.
  * ``human_assistant`` -- the record becomes the text ``"Human: {prompt}\\n\\nAssistant:
    {output}"``, tokenized like plain text (below).

* **text records** -- the first record has no ``instruction`` but the text key (``text_key``,
  default ``text``). Every record holds its text (a string) under that key. Each is tokenized
  with the tokenizer (no special tokens, as ``jsonl`` documents are) into **one sample, cut to
  its first ``max_seq_len`` tokens, labels = input_ids, no eos, not packed** -- the later
  snapshots' plain-text transform, the same as ``hf_datasets``; a text giving no token is
  dropped. ``template`` must stay ``empty`` (there is no prompt to mask).

A record of the other kind (a mixed file), a first record with neither key, or a record that is
not an object is an error naming the path field, the file and the line (JSON lines) or record
index (a JSON list). One sample per record; collate pads the batch (``data.packing``
packs the samples into rows instead: :mod:`hyper_parallel.data.packing`). The same records
stream through :class:`RecordEncoder` (``streaming``, :mod:`hyper_parallel.data.streaming`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hyper_parallel import assets
from hyper_parallel.data.files import decode_utf8, resolve_data_files
from hyper_parallel.data.sequences import SequenceDataset, check_max_seq_len
from hyper_parallel.utils.data_types import TEMPLATES

DEFAULT_FIELDS = {"path": "data.train_path", "template": "data.template",
                  "text_key": "data.text_key"}
_SUFFIXES = (".json", ".jsonl")

#: The two kinds of ``json_file`` record (:func:`record_kind`).
RecordKind = Literal["alpaca", "text"]
ALPACA: RecordKind = "alpaca"
TEXT: RecordKind = "text"
_ALPACA_KEYS = "Alpaca records ('instruction', optional 'input', 'output')"


def infer_seqlen(source_len: int, target_len: int, cutoff_len: int) -> tuple[int, int]:
    """How many prompt (source) and response (target) tokens to keep within ``cutoff_len``.

    The legacy ``_infer_seqlen`` rule, kept exactly: a short response (``t * 2 < cutoff``) is
    kept whole; else a short prompt (``s * 2 < cutoff``) is kept whole and the response gets
    the rest; else both are long and the response gets its proportional share
    ``int(cutoff * t / (s + t))``. The prompt gets what the response leaves. Both are cut at
    the end (their beginnings are kept).

    Consequences (checked by the property test): ``source + target == min(s + t, cutoff)`` (a
    record that fits is kept whole, one that does not fills the cutoff exactly); the response
    keeps at least ``min(t, cutoff - s)`` tokens; but when both are long and the prompt much
    longer, the response share may round down to 0 (``s=100, t=5, cutoff=10``), leaving a
    sample with nothing to train on -- as the legacy trainer did.

    Returns ``(source_len, target_len)`` to keep.
    """
    if cutoff_len < 1 or source_len < 0 or target_len < 0:
        raise ValueError(f"infer_seqlen: need cutoff >= 1 and lengths >= 0, got "
                         f"s={source_len}, t={target_len}, cutoff={cutoff_len}")
    if target_len * 2 < cutoff_len:  # truncate the source only
        max_target_len = cutoff_len
    elif source_len * 2 < cutoff_len:  # truncate the target only
        max_target_len = cutoff_len - source_len
    else:  # truncate both, in proportion
        max_target_len = int(cutoff_len * (target_len / (source_len + target_len)))
    new_target_len = min(max_target_len, target_len)
    new_source_len = min(max(cutoff_len - new_target_len, 0), source_len)
    return new_source_len, new_target_len


@dataclass(frozen=True, slots=True)
class AlpacaRecord:
    prompt: str
    response: str
    where: str  # file:line or file record N, for messages


def resolve_json_files(path: str, path_field: str) -> list[str]:
    """The files a ``json_file`` path names: a file, a folder (its ``*.json`` / ``*.jsonl``
    files, in name order) or a glob."""
    resolved = assets.resolve_path(os.path.expanduser(path))
    if os.path.isdir(resolved):
        files = sorted(os.path.join(resolved, n) for n in os.listdir(resolved)
                       if n.endswith(_SUFFIXES) and os.path.isfile(os.path.join(resolved, n)))
        if not files:
            raise FileNotFoundError(f"{path_field}: directory {path!r} contains no *.json or "
                                    "*.jsonl files")
        return files
    return resolve_data_files(path, suffix=".json", path_field=path_field)


def record_kind(obj: Any, where: str, *, text_key: str = "text",
                fields: Mapping[str, str] | None = None, path: str | None = None) -> RecordKind:
    """The kind of the records of a file, told by its first record ``obj`` (at ``where``):
    Alpaca when it has ``instruction``, text when it has ``text_key``; anything else is a
    ``ValueError`` naming the path field, ``where`` and the keys it has."""
    names = {**DEFAULT_FIELDS, **(fields or {})}
    shown = f"{names['path']}" + (f"={path!r}" if path is not None else "")
    if not isinstance(obj, dict):
        raise ValueError(  # noqa: TRY004 - bad file content, like the other data errors
            f"{shown}: {where}: expected a JSON object, got {type(obj).__name__}; json_file "
            f"reads {_ALPACA_KEYS} or text records (the text under {names['text_key']}="
            f"{text_key!r})")
    if "instruction" in obj:
        return ALPACA
    if text_key in obj:
        return TEXT
    raise ValueError(
        f"{shown}: {where}: the first record has keys {sorted(obj)}: neither 'instruction' (of "
        f"{_ALPACA_KEYS}) nor {text_key!r} (a text record, the text under "
        f"{names['text_key']}={text_key!r}); json_file tells the kind of a file by its first "
        f"record -- set {names['text_key']} to the key holding the text, or convert the file")


def _one_kind(first: str | None) -> str:
    return ("" if first is None else
            f" (json_file reads one kind of record per file, told by the first record, {first})")


def alpaca_record(obj: Any, where: str, *, first: str | None = None,
                  path_field: str | None = None) -> AlpacaRecord:
    """``obj`` (at ``where``) as an Alpaca record; ``first``: where the file's first record is
    (for the message when ``obj`` is of another kind)."""
    prefix = f"{path_field}: " if path_field else ""
    expected = ("json_file records are objects with string keys 'instruction' and 'output' "
                "and an optional 'input'")
    if not isinstance(obj, dict):
        # ValueError, not TypeError: bad file content, like the other data errors.
        raise ValueError(f"{prefix}{where}: expected a JSON object, got "  # noqa: TRY004
                         f"{type(obj).__name__}; {expected}")
    for key in ("instruction", "output"):
        if key not in obj:
            raise ValueError(f"{prefix}{where}: no key {key!r}; {expected}; the object has keys "
                             f"{sorted(obj)}{_one_kind(first)}")
    for key in ("instruction", "input", "output"):
        value = obj.get(key)
        if not isinstance(value, str) and not (key == "input" and value is None):
            raise ValueError(f"{prefix}{where}: key {key!r} holds {type(value).__name__}, "
                             "expected a string")
    extra = obj.get("input") or ""
    prompt = obj["instruction"] + ("\n" + extra if extra else "")
    return AlpacaRecord(prompt, obj["output"], where)


def record_text(obj: Any, where: str, *, text_key: str, key_field: str = "data.text_key",
                first: str | None = None, path_field: str | None = None) -> str:
    """The text of the text record ``obj`` (at ``where``), under ``text_key``."""
    prefix = f"{path_field}: " if path_field else ""
    if not isinstance(obj, dict):
        raise ValueError(f"{prefix}{where}: expected a JSON object with the text under "  # noqa: TRY004
                         f"{key_field}={text_key!r}, got {type(obj).__name__}")
    if text_key not in obj:
        alpaca = " (an Alpaca record, in a file of text records)" if "instruction" in obj else ""
        raise ValueError(f"{prefix}{where}: no key {text_key!r} ({key_field}){alpaca}; the object "
                         f"has keys {sorted(obj)}{_one_kind(first)}")
    text = obj[text_key]
    if not isinstance(text, str):
        raise ValueError(  # noqa: TRY004
            f"{prefix}{where}: key {text_key!r} ({key_field}) holds {type(text).__name__} "
            f"{text!r:.60}, expected a string")
    return text


def read_json_objects(files: Sequence[str]) -> list[tuple[Any, str]]:
    """Every object of ``files`` in order, with where it is (``file:line`` in JSON lines,
    ``file record N`` in a JSON list). Invalid JSON raises ``ValueError`` naming the place."""
    out: list[tuple[Any, str]] = []
    for file in files:
        with open(file, "rb") as fh:
            text = decode_utf8(fh.read(), file)
        if text.lstrip().startswith("["):
            try:
                items = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{file}: invalid JSON ({exc.msg}, line {exc.lineno} column "
                                 f"{exc.colno}); expected a list of records") from exc
            out.extend((obj, f"{file} record {i}") for i, obj in enumerate(items))
            continue
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{file}:{lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: invalid JSON ({exc.msg}, column {exc.colno}); "
                                 "expected a JSON list of records or one record per line"
                                 ) from exc
            out.append((obj, where))
    return out


def read_alpaca_records(files: Sequence[str]) -> list[AlpacaRecord]:
    """The Alpaca records of ``files`` in order: each a JSON list of objects or JSON lines.

    Malformed content raises ``ValueError`` naming the file and the record (index in a list,
    line in JSON lines) and the key.
    """
    objects = read_json_objects(files)
    first = objects[0][1] if objects else None
    return [alpaca_record(obj, where, first=first) for obj, where in objects]


def masked_sample(prompt_ids: Sequence[int], response_ids: Sequence[int], eos: int,
                  max_seq_len: int) -> tuple[list[int], int, bool]:
    """``template: empty``: ``(ids, prompt tokens kept, truncated)`` of one Alpaca record: the
    response gets the eos, both are cut by :func:`infer_seqlen`, the prompt comes first."""
    target = [*response_ids, eos]
    s, t = infer_seqlen(len(prompt_ids), len(target), max_seq_len)
    return list(prompt_ids[:s]) + target[:t], s, (s, t) != (len(prompt_ids), len(target))


def _masked_samples(records: Sequence[AlpacaRecord], tokenizer: Any, max_seq_len: int,
                    source: str) -> SequenceDataset:
    prompts = tokenizer.encode_batch([r.prompt for r in records])
    responses = tokenizer.encode_batch([r.response for r in records])
    sequences: list[list[int]] = []
    prompt_lens: list[int] = []
    truncated = 0
    for prompt_ids, response_ids in zip(prompts, responses):
        ids, kept, cut = masked_sample(prompt_ids, response_ids, tokenizer.eos_id, max_seq_len)
        truncated += cut
        sequences.append(ids)
        prompt_lens.append(kept)
    return SequenceDataset(sequences, prompt_lens=prompt_lens, max_seq_len=max_seq_len,
                           source=source, num_truncated=truncated)


def human_assistant_text(record: AlpacaRecord) -> str:
    return f"Human: {record.prompt}\n\nAssistant: {record.response}"


def check_template_fits(template: str, kind: RecordKind, names: Mapping[str, str], path: str,
                        first: str) -> None:
    """A template formats Alpaca records: with text records it must stay ``empty``."""
    if kind == TEXT and template != "empty":
        raise ValueError(
            f"{names['template']}={template!r}: templates format Alpaca records, but "
            f"{names['path']}={path!r} holds text records (its first record, {first}, has no "
            f"'instruction'); leave {names['template']} at 'empty'")


def build_sft_dataset(path: str, *, tokenizer: Any, max_seq_len: int, template: str = "empty",
                      text_key: str = "text", limit: int | None = None,
                      fields: Mapping[str, str] | None = None) -> SequenceDataset:
    """Read the records of ``path`` -- Alpaca or text, told by the first record -- and tokenize
    them (module docstring). ``limit`` (``max_samples``): only the first ``limit`` records are
    tokenized."""
    names = {**DEFAULT_FIELDS, **(fields or {})}
    check_max_seq_len(max_seq_len)
    if template not in TEMPLATES:
        raise ValueError(f"{names['template']}={template!r} is not a json_file template; choose "
                         f"one of {', '.join(TEMPLATES)}")
    objects = read_json_objects(resolve_json_files(path, names["path"]))
    if not objects:
        raise ValueError(f"{names['path']}={path!r}: no records; json_file needs a JSON list of "
                         f"records or one per line ({_ALPACA_KEYS}, or text records under "
                         f"{names['text_key']}={text_key!r})")
    first = objects[0][1]
    kind = record_kind(objects[0][0], first, text_key=text_key, fields=names, path=path)
    check_template_fits(template, kind, names, path, first)
    total = len(objects)
    if kind == TEXT:
        texts = [record_text(obj, where, text_key=text_key, key_field=names["text_key"],
                             first=first, path_field=names["path"]) for obj, where in objects]
        dataset = SequenceDataset.from_texts([texts], tokenizer=tokenizer,
                                             max_seq_len=max_seq_len, source=path, limit=limit)
        dataset.record_kind = TEXT
        return dataset
    records = [alpaca_record(obj, where, first=first, path_field=names["path"])
               for obj, where in objects]
    if limit is not None:
        records = records[:limit]
    if template == "empty":
        dataset = _masked_samples(records, tokenizer, max_seq_len, path)
    else:
        texts = [human_assistant_text(r) for r in records]
        dataset = SequenceDataset.from_texts([texts], tokenizer=tokenizer,
                                             max_seq_len=max_seq_len, source=path)
    dataset.num_records = total
    dataset.record_kind = ALPACA
    return dataset


class RecordEncoder:
    """One record of a known kind -> one sample, as the map-style datasets make it: the stream's
    per-record transform (:mod:`hyper_parallel.data.streaming`).

    ``encoder(record, where)`` returns ``(input_ids, prompt_len)`` (labels are -100 over the
    first ``prompt_len`` tokens) or None for a text that gives no token (dropped, as
    :meth:`SequenceDataset.from_texts` drops it); a record of another kind raises ``ValueError``
    naming ``where``. ``first``: where the file's first record is (None for ``hf_datasets``,
    whose records are all text)."""

    def __init__(self, kind: RecordKind, *, tokenizer: Any, max_seq_len: int,
                 template: str = "empty", text_key: str = "text", first: str | None = None,
                 fields: Mapping[str, str] | None = None) -> None:
        check_max_seq_len(max_seq_len)
        self.names = {**DEFAULT_FIELDS, **(fields or {})}
        self.kind, self.tokenizer, self.max_seq_len = kind, tokenizer, max_seq_len
        self.template, self.text_key, self.first = template, text_key, first

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer.encode_batch([text])[0]

    def __call__(self, record: Any, where: str) -> tuple[list[int], int] | None:
        names = self.names
        if self.kind == ALPACA:
            rec = alpaca_record(record, where, first=self.first, path_field=names["path"])
            if self.template == "empty":
                ids, kept, _ = masked_sample(self._ids(rec.prompt), self._ids(rec.response),
                                             self.tokenizer.eos_id, self.max_seq_len)
                return ids, kept
            text = human_assistant_text(rec)
        else:
            text = record_text(record, where, text_key=self.text_key,
                               key_field=names["text_key"], first=self.first,
                               path_field=names["path"])
        ids = self._ids(text)[: self.max_seq_len]
        return (ids, 0) if ids else None


__all__ = ["ALPACA", "TEXT", "AlpacaRecord", "RecordEncoder", "RecordKind", "alpaca_record",
           "build_sft_dataset", "check_template_fits", "human_assistant_text", "infer_seqlen", "masked_sample",
           "read_alpaca_records", "read_json_objects", "record_kind", "record_text",
           "resolve_json_files"]
