#!/usr/bin/env python3
"""Write tiny data files for the legacy data types (``hf_datasets``, ``json_file``, ``preset_pt``).

Why a script instead of committed files: the fixtures include binary formats (parquet, Arrow
folders from ``save_to_disk``, a ``torch.save`` file) whose bytes depend on library versions;
generating them keeps the repository free of binaries and the tests free of downloads. Every
value is fixed or drawn from a seeded ``torch.Generator``, so two calls write the same data.

Importable: :func:`write_fixtures` is what the tests call into their ``tmp_path``. As a script::

    python scripts/make_data_fixtures.py OUT_DIR     # writes the files, prints name -> path

The files (keys of the returned dict):

* ``alpaca_json`` / ``alpaca_jsonl`` -- the same :data:`ALPACA_RECORDS` as a JSON list / as
  JSON lines (``json_file``);
* ``hf_jsonl`` -- :data:`HF_TEXTS` under ``text`` (one is empty) plus a ``meta`` column;
* ``hf_parquet`` -- the same rows as parquet;
* ``hf_folder`` -- a folder of two JSON lines files (``part-0``, ``part-1``), a default config;
* ``hf_configs`` -- a folder whose README declares two configurations ``alpha`` and ``beta``;
* ``hf_saved`` -- a ``Dataset.save_to_disk`` folder; ``hf_saved_dict`` -- a ``DatasetDict`` one;
* ``hf_no_train`` -- a folder with only a ``test`` split;
* ``preset_pt`` -- :data:`PRESET_BATCHES` batches of ``[PRESET_BATCH, PRESET_SEQ_LEN]`` ids below
  :data:`PRESET_VOCAB`, labels with -100 over the first :data:`PRESET_MASKED` positions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ALPACA_RECORDS: list[dict] = [
    {"instruction": "Name a colour.", "input": "", "output": "Blue."},
    {"instruction": "Add the numbers.", "input": "two and three", "output": "Five."},
    {"instruction": "Say hello.", "output": "Hello there, friend."},  # no input key
    {"instruction": "Summarise the story.", "input": None,
     "output": "A fox wanted grapes, could not reach them, and called them sour."},
]

HF_TEXTS: list[str] = [
    "the cat sat on the mat",
    "",
    ("a longer record about the weather: rain in the morning, sun in the afternoon, wind at "
     "night, and a cold clear sky before dawn"),
    "short",
    "one more line of text for the dataset",
]

PRESET_BATCHES = 6
PRESET_BATCH = 2
PRESET_SEQ_LEN = 16
PRESET_VOCAB = 256
PRESET_MASKED = 3
PRESET_SEED = 1234


def preset_batches(num_batches: int = PRESET_BATCHES, batch: int = PRESET_BATCH,
                   seq_len: int = PRESET_SEQ_LEN, vocab: int = PRESET_VOCAB) -> list[dict]:
    """The ``preset_pt`` batches: seeded ids, labels = ids with the first positions -100."""
    import torch

    gen = torch.Generator().manual_seed(PRESET_SEED)
    batches = []
    for _ in range(num_batches):
        ids = torch.randint(0, vocab, (batch, seq_len), generator=gen)
        labels = ids.clone()
        labels[:, :PRESET_MASKED] = -100
        batches.append({"input_ids": ids, "labels": labels})
    return batches


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_fixtures(folder: str | Path) -> dict[str, Path]:
    """Write every fixture under ``folder`` (created if needed); returns name -> path."""
    import datasets
    import torch

    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # six tiny writes: bars would only clutter the output
    try:
        return _write(root, datasets, torch)
    finally:
        if bars:
            datasets.enable_progress_bars()


def _write(root: Path, datasets, torch) -> dict[str, Path]:
    out: dict[str, Path] = {}

    out["alpaca_json"] = root / "alpaca.json"
    out["alpaca_json"].write_text(json.dumps(ALPACA_RECORDS, indent=1), encoding="utf-8")
    out["alpaca_jsonl"] = _write_jsonl(root / "alpaca.jsonl", ALPACA_RECORDS)

    rows = [{"text": t, "meta": i} for i, t in enumerate(HF_TEXTS)]
    out["hf_jsonl"] = _write_jsonl(root / "hf_text.jsonl", rows)
    out["hf_parquet"] = root / "hf_text.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(out["hf_parquet"]))

    out["hf_folder"] = root / "hf_folder"
    _write_jsonl(out["hf_folder"] / "part-0.jsonl", rows[:3])
    _write_jsonl(out["hf_folder"] / "part-1.jsonl", rows[3:])

    out["hf_configs"] = root / "hf_configs"
    _write_jsonl(out["hf_configs"] / "alpha" / "data.jsonl",
                 [{"text": "alpha one"}, {"text": "alpha two"}])
    _write_jsonl(out["hf_configs"] / "beta" / "data.jsonl", [{"text": "beta only"}])
    (out["hf_configs"] / "README.md").write_text(
        "---\nconfigs:\n"
        "- config_name: alpha\n  data_files:\n  - split: train\n    path: alpha/*.jsonl\n"
        "- config_name: beta\n  data_files:\n  - split: train\n    path: beta/*.jsonl\n"
        "---\nTwo configurations for the hf_datasets subset tests.\n",
        encoding="utf-8",
    )

    out["hf_saved"] = root / "hf_saved"
    datasets.Dataset.from_dict({"text": ["saved one", "saved two", "saved three"]}).save_to_disk(
        str(out["hf_saved"]))
    out["hf_saved_dict"] = root / "hf_saved_dict"
    datasets.DatasetDict(
        train=datasets.Dataset.from_dict({"text": ["dict train"]}),
        validation=datasets.Dataset.from_dict({"text": ["dict validation"]}),
    ).save_to_disk(str(out["hf_saved_dict"]))

    out["hf_no_train"] = root / "hf_no_train"
    _write_jsonl(out["hf_no_train"] / "test.jsonl", [{"text": "only a test split"}])

    out["preset_pt"] = root / "preset.pt"
    torch.save(preset_batches(), out["preset_pt"])
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: make_data_fixtures.py OUT_DIR", file=sys.stderr)
        return 2
    for name, path in write_fixtures(argv[0]).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
