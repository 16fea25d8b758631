"""``json_file``: Alpaca-style instruction records for supervised fine-tuning.

A file is either a JSON list of objects or JSON lines (one object per line); every record has
``instruction`` (string), optional ``input`` (string; absent, null or empty = none) and
``output`` (string). A path may also be a folder (its ``*.json`` / ``*.jsonl`` files, in name
order) or a glob. The *prompt* is ``instruction``, followed by ``"\\n" + input`` when ``input``
is non-empty; the *response* is ``output``.

Templates (``template``), as the legacy ``LLMTrainer`` tokenize transform (C.5):

* ``empty`` -- prompt-masked SFT. Prompt and response are tokenized separately without special
  tokens; **the eos id is appended to the response** (as LlamaFactory-style templates do, so
  the model learns where an answer ends) and counts as a response token. The two are cut to
  ``max_seq_len`` by :func:`infer_seqlen` and the sample is ``prompt + response`` with labels
  -100 over the prompt, so only the response (and its eos) is trained.
* ``human_assistant`` -- the record becomes the text ``"Human: {prompt}\\n\\nAssistant:
  {output}"``, tokenized like ``hf_datasets`` plain text: truncated to ``max_seq_len``, labels =
  input_ids, no eos added.

One sample per record, not packed; collate pads the batch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hyper_parallel import assets
from hyper_parallel.data.files import decode_utf8, resolve_data_files
from hyper_parallel.data.sequences import SequenceDataset, check_max_seq_len
from hyper_parallel.utils.data_types import TEMPLATES

DEFAULT_FIELDS = {"path": "data.train_path", "template": "data.template"}
_SUFFIXES = (".json", ".jsonl")


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


def _resolve(path: str, path_field: str) -> list[str]:
    resolved = assets.resolve_path(os.path.expanduser(path))
    if os.path.isdir(resolved):
        files = sorted(os.path.join(resolved, n) for n in os.listdir(resolved)
                       if n.endswith(_SUFFIXES) and os.path.isfile(os.path.join(resolved, n)))
        if not files:
            raise FileNotFoundError(f"{path_field}: directory {path!r} contains no *.json or "
                                    "*.jsonl files")
        return files
    return resolve_data_files(path, suffix=".json", path_field=path_field)


def _record(obj: Any, where: str) -> AlpacaRecord:
    expected = ("json_file records are objects with string keys 'instruction' and 'output' "
                "and an optional 'input'")
    if not isinstance(obj, dict):
        # ValueError, not TypeError: bad file content, like the other data errors.
        raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}; "  # noqa: TRY004
                         f"{expected}")
    for key in ("instruction", "output"):
        if key not in obj:
            raise ValueError(f"{where}: no key {key!r}; {expected}; the object has keys "
                             f"{sorted(obj)}")
    for key in ("instruction", "input", "output"):
        value = obj.get(key)
        if not isinstance(value, str) and not (key == "input" and value is None):
            raise ValueError(f"{where}: key {key!r} holds {type(value).__name__}, expected a "
                             "string")
    extra = obj.get("input") or ""
    prompt = obj["instruction"] + ("\n" + extra if extra else "")
    return AlpacaRecord(prompt, obj["output"], where)


def read_alpaca_records(files: Sequence[str]) -> list[AlpacaRecord]:
    """The records of ``files`` in order: each a JSON list of objects or JSON lines.

    Malformed content raises ``ValueError`` naming the file and the record (index in a list,
    line in JSON lines) and the key.
    """
    records: list[AlpacaRecord] = []
    for file in files:
        with open(file, "rb") as fh:
            text = decode_utf8(fh.read(), file)
        if text.lstrip().startswith("["):
            try:
                items = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{file}: invalid JSON ({exc.msg}, line {exc.lineno} column "
                                 f"{exc.colno}); expected a list of records") from exc
            records.extend(_record(obj, f"{file} record {i}") for i, obj in enumerate(items))
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
            records.append(_record(obj, where))
    return records


def _masked_samples(records: Sequence[AlpacaRecord], tokenizer: Any, max_seq_len: int,
                    source: str) -> SequenceDataset:
    prompts = tokenizer.encode_batch([r.prompt for r in records])
    responses = tokenizer.encode_batch([r.response for r in records])
    eos = tokenizer.eos_id
    sequences: list[list[int]] = []
    prompt_lens: list[int] = []
    truncated = 0
    for source_ids, target_ids in zip(prompts, responses):
        target_ids = [*target_ids, eos]
        s, t = infer_seqlen(len(source_ids), len(target_ids), max_seq_len)
        truncated += (s, t) != (len(source_ids), len(target_ids))
        sequences.append(source_ids[:s] + target_ids[:t])
        prompt_lens.append(s)
    return SequenceDataset(sequences, prompt_lens=prompt_lens, max_seq_len=max_seq_len,
                           source=source, num_truncated=truncated)


def human_assistant_text(record: AlpacaRecord) -> str:
    return f"Human: {record.prompt}\n\nAssistant: {record.response}"


def build_sft_dataset(path: str, *, tokenizer: Any, max_seq_len: int, template: str = "empty",
                      limit: int | None = None, fields: Mapping[str, str] | None = None
                      ) -> SequenceDataset:
    """Read the Alpaca records of ``path`` and tokenize them with ``template`` (module
    docstring). ``limit`` (``max_samples``): only the first ``limit`` records are tokenized."""
    names = {**DEFAULT_FIELDS, **(fields or {})}
    check_max_seq_len(max_seq_len)
    if template not in TEMPLATES:
        raise ValueError(f"{names['template']}={template!r} is not a json_file template; choose "
                         f"one of {', '.join(TEMPLATES)}")
    records = read_alpaca_records(_resolve(path, names["path"]))
    if not records:
        raise ValueError(f"{names['path']}={path!r}: no records; json_file needs a JSON list of "
                         "instruction/output objects or one per line")
    total = len(records)
    if limit is not None:
        records = records[:limit]
    if template == "empty":
        dataset = _masked_samples(records, tokenizer, max_seq_len, path)
    else:
        texts = [human_assistant_text(r) for r in records]
        dataset = SequenceDataset.from_texts([texts], tokenizer=tokenizer,
                                             max_seq_len=max_seq_len, source=path)
    dataset.num_records = total
    return dataset


__all__ = ["AlpacaRecord", "build_sft_dataset", "human_assistant_text", "infer_seqlen",
           "read_alpaca_records"]
