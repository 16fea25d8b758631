#!/usr/bin/env python3
"""Train the byte-level BPE tokenizer shipped in ``hyper_parallel/assets/tokenizer/``.

The tokenizer is trained with HF ``tokenizers`` on the documents of the shipped
``corpus/train.jsonl`` (run ``scripts/make_corpus.py`` first). Design choices, and why:

* **Byte-level BPE** (GPT-2 / Qwen family): any UTF-8 text encodes without an unknown token, and
  ``decode(encode(text)) == text`` exactly (no normalizer, no prefix space).
* **Digits are split one per token** (as Qwen and Llama do) so arithmetic facts in the corpus are
  learnable digit by digit instead of through thousands of number tokens.
* **vocab_size is exactly 2048** including the single special token ``<|endoftext|>`` (id 0),
  which is both the end-of-document marker appended by the packing dataset and the pad token.
  A small power of two keeps the embedding of the tiny smoke-test models small.
* No post-processor: ``encode`` adds no special tokens; the dataset appends eos itself.

Determinism: the trainer sees the documents in file order with fixed settings, and HF's BPE
breaks ties deterministically, so the output is byte-identical across runs. ``--check``
retrains in memory and compares with the committed ``tokenizer.json`` (exit 1 on a difference).

Outputs: ``tokenizer.json`` and a ``tokenizer_config.json`` (eos/pad names, read by
``hyper_parallel.data.load_tokenizer`` and also understood by ``transformers.AutoTokenizer``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB_SIZE = 2048
EOS_TOKEN = "<|endoftext|>"

ASSETS = Path(__file__).resolve().parent.parent / "hyper_parallel" / "assets"
DEFAULT_CORPUS = ASSETS / "corpus" / "train.jsonl"
DEFAULT_OUT = ASSETS / "tokenizer"

TOKENIZER_CONFIG = {
    # Names the tokenizer class for transformers.AutoTokenizer; our own loader only reads the
    # token names below.
    "tokenizer_class": "PreTrainedTokenizerFast",
    "eos_token": EOS_TOKEN,
    "pad_token": EOS_TOKEN,
    "bos_token": None,
    "unk_token": None,
    "add_bos_token": False,
    "add_eos_token": False,
    "clean_up_tokenization_spaces": False,
    "model_max_length": 2048,
}


def read_documents(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


def train(documents: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=[EOS_TOKEN],
        # All 256 byte symbols are in the base vocabulary so any input is encodable.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(documents, trainer=trainer, length=len(documents))
    size = tok.get_vocab_size(with_added_tokens=True)
    if size != VOCAB_SIZE:
        raise RuntimeError(
            f"trained vocabulary has {size} entries, expected exactly {VOCAB_SIZE}: the corpus is "
            "too small/repetitive for that many merges; enlarge scripts/make_corpus.py output"
        )
    if tok.token_to_id(EOS_TOKEN) != 0:
        raise RuntimeError(f"{EOS_TOKEN} should be id 0, got {tok.token_to_id(EOS_TOKEN)}")
    return tok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true",
                        help="compare with the files in --out-dir instead of writing them")
    args = parser.parse_args(argv)

    docs = read_documents(args.corpus)
    tok = train(docs)
    files = {
        "tokenizer.json": tok.to_str(pretty=True) + "\n",
        "tokenizer_config.json": json.dumps(TOKENIZER_CONFIG, indent=2) + "\n",
    }
    if args.check:
        bad = [name for name, content in files.items()
               if not (args.out_dir / name).is_file()
               or (args.out_dir / name).read_text(encoding="utf-8") != content]
        if bad:
            print(f"tokenizer differs from a fresh training run: {', '.join(bad)}; rerun "
                  "`python scripts/train_tokenizer.py`", file=sys.stderr)
            return 1
        print("tokenizer is up to date")
        return 0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        with open(args.out_dir / name, "w", encoding="utf-8", newline="") as fh:
            fh.write(content)
    n_tokens = sum(len(e.ids) for e in tok.encode_batch(docs))
    n_chars = sum(len(d) for d in docs)
    print(f"vocab {tok.get_vocab_size()}; {len(docs)} docs, {n_chars} chars -> {n_tokens} tokens "
          f"({n_chars / n_tokens:.2f} chars/token); wrote {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
