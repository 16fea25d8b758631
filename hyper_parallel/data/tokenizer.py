"""Loading a HF ``tokenizers`` tokenizer for the text datasets.

Only the fast Rust tokenizer (``tokenizer.json``) is used: it loads in milliseconds, needs no
``transformers`` import and batch-encodes in parallel. ``transformers``' ``AutoTokenizer`` reads
the same files, so a checkpoint directory works for both.

Where the path comes from (see :func:`resolve_tokenizer_path`): ``model.tokenizer_path`` if set,
else ``model.weights_path`` when that directory holds a ``tokenizer.json``, else the tokenizer
shipped in ``hyper_parallel/assets/tokenizer`` (vocab 2048, trained on the shipped corpus).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tokenizers import Tokenizer as _HFTokenizer

from hyper_parallel import assets

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# Tried in order when no tokenizer_config.json names the eos token. <|endoftext|> first: it is
# the document separator of GPT-2/Qwen base models and of the shipped tokenizer.
EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<eos>", "<|end_of_text|>", "<|im_end|>")


@dataclass
class TextTokenizer:
    """A thin wrapper over a HF ``tokenizers.Tokenizer`` with the ids the data pipeline needs.

    ``encode`` treats its input strictly as text: a literal ``"<|endoftext|>"`` inside a document
    is encoded as ordinary characters, so only the dataset decides where documents end.
    """

    backend: _HFTokenizer
    eos_id: int
    pad_id: int
    path: str
    eos_token: str = field(default="")
    pad_token: str = field(default="")

    def __post_init__(self) -> None:
        self.backend.encode_special_tokens = True

    @property
    def vocab_size(self) -> int:
        """Number of ids the tokenizer can produce (base vocabulary + added tokens)."""
        return self.backend.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; no special tokens are added."""
        return self.backend.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """``encode`` over many texts (parallel in Rust; same result as a loop)."""
        return [e.ids for e in self.backend.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)


def resolve_tokenizer_path(tokenizer_path: str | None, weights_path: str | None) -> str | None:
    """The legacy fallback order: ``model.tokenizer_path``, then a ``model.weights_path``
    directory that contains ``tokenizer.json``, then None (= the shipped tokenizer)."""
    if tokenizer_path:
        return tokenizer_path
    if weights_path and os.path.isfile(os.path.join(weights_path, TOKENIZER_FILE)):
        return weights_path
    return None


def _token_name(value: object) -> str | None:
    # tokenizer_config.json stores tokens either as strings or as AddedToken dicts.
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def load_tokenizer(path: str | None = None, *, field_name: str = "model.tokenizer_path"
                   ) -> TextTokenizer:
    """Load a tokenizer from a ``tokenizer.json`` file or a directory containing one.

    ``path=None`` loads the shipped tokenizer. ``field_name`` is the config field the path came
    from; it is named in every error. The eos token comes from a ``tokenizer_config.json`` next to
    the file (``eos_token``), else the first of :data:`EOS_CANDIDATES` in the vocabulary; the pad
    token from ``pad_token`` there, else eos (padding is masked out of the loss anyway).
    """
    if path is None:
        file = assets.tokenizer_path()
    else:
        path = assets.resolve_path(os.path.expanduser(path))
        if os.path.isdir(path):
            file = os.path.join(path, TOKENIZER_FILE)
            if not os.path.isfile(file):
                raise FileNotFoundError(
                    f"{field_name}: directory {path!r} has no {TOKENIZER_FILE}; point "
                    f"{field_name} at a HF tokenizers {TOKENIZER_FILE} or a directory holding one "
                    "(or leave it unset to use the shipped tokenizer)"
                )
        elif os.path.isfile(path):
            file = path
        else:
            raise FileNotFoundError(
                f"{field_name}: {path!r} does not exist (looked for a {TOKENIZER_FILE} file or a "
                f"directory containing {TOKENIZER_FILE})"
            )
    try:
        backend = _HFTokenizer.from_file(file)
    except Exception as exc:  # the Rust error type is not exported
        raise ValueError(f"{field_name}: cannot read {file!r} as a HF tokenizers file: {exc}"
                         ) from exc

    config: dict = {}
    config_file = os.path.join(os.path.dirname(file), TOKENIZER_CONFIG_FILE)
    if os.path.isfile(config_file):
        with open(config_file, encoding="utf-8") as fh:
            config = json.load(fh)

    eos_token = _token_name(config.get("eos_token"))
    if eos_token is None:
        eos_token = next((t for t in EOS_CANDIDATES if backend.token_to_id(t) is not None), None)
    if eos_token is None or backend.token_to_id(eos_token) is None:
        raise ValueError(
            f"{field_name}: cannot find the end-of-text token of {file!r} (tried "
            f"{TOKENIZER_CONFIG_FILE} eos_token={config.get('eos_token')!r} and "
            f"{list(EOS_CANDIDATES)}); add eos_token to {TOKENIZER_CONFIG_FILE}"
        )
    pad_token = _token_name(config.get("pad_token")) or eos_token
    if backend.token_to_id(pad_token) is None:
        raise ValueError(
            f"{field_name}: {config_file!r} names pad_token={pad_token!r}, which is not in the "
            f"vocabulary of {file!r}; fix pad_token or remove it (pad then defaults to eos)"
        )
    return TextTokenizer(
        backend=backend,
        eos_id=backend.token_to_id(eos_token),
        pad_id=backend.token_to_id(pad_token),
        path=file,
        eos_token=eos_token,
        pad_token=pad_token,
    )
