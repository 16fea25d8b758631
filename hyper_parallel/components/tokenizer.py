"""``BaseTokenizer`` and ``HuggingFaceTokenizer``: the text tokenizer as a Configurable.

``HuggingFaceTokenizer`` loads a HF ``tokenizers`` ``tokenizer.json`` through the legacy data
pipeline's :func:`hyper_parallel.data.load_tokenizer` and keeps its rules: eos from a
``tokenizer_config.json`` next to the file (else the first known end-of-text token), pad from
``pad_token`` there (else eos), no special tokens added by ``encode``.

Where the file comes from follows the legacy order (:func:`hyper_parallel.data.tokenizer.
resolve_tokenizer_path`): ``Config.path`` when set (legacy ``model.tokenizer_path``), else the
``weights_path`` given to ``build`` when that directory holds a ``tokenizer.json`` (legacy
``model.weights_path``), else the tokenizer shipped with hyper_parallel (vocab 2048). The default
``path=None`` is therefore the legacy default.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hyper_parallel.components._validate import require
from hyper_parallel.protocols.configurable import Configurable
from hyper_parallel.utils.errors import ConfigError

if TYPE_CHECKING:
    from hyper_parallel.data.tokenizer import TextTokenizer

#: The recipe field of ``HuggingFaceTokenizer.Config.path``, named by the errors of ``build``.
PATH_FIELD = "tokenizer.path"


class BaseTokenizer(Configurable, abc.ABC):
    """What the data pipeline needs from a tokenizer: ``encode`` / ``encode_batch`` /
    ``decode``, ``eos_id`` (document separator), ``pad_id`` (collate padding), ``vocab_size``
    (checked against the model) and ``path`` (named in errors). Abstract."""

    def __init__(self, config: Configurable.Config) -> None:
        self.config = config

    @property
    @abc.abstractmethod
    def eos_id(self) -> int: ...

    @property
    @abc.abstractmethod
    def pad_id(self) -> int: ...

    @property
    @abc.abstractmethod
    def vocab_size(self) -> int: ...

    @property
    @abc.abstractmethod
    def path(self) -> str: ...

    @abc.abstractmethod
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""

    @abc.abstractmethod
    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str: ...

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """``encode`` over many texts (subclasses may parallelise; the result is the same)."""
        return [self.encode(t) for t in texts]


class HuggingFaceTokenizer(BaseTokenizer):
    """A HF ``tokenizers`` tokenizer (``tokenizer.json``); ``.tokenizer`` is the legacy
    :class:`~hyper_parallel.data.tokenizer.TextTokenizer` it wraps."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseTokenizer.Config):
        path: str | None = None
        """A ``tokenizer.json`` file or a directory holding one (``pkg://tokenizer`` names the
        shipped one). Unset: the ``tokenizer.json`` of the model weights directory given to
        ``build(weights_path=...)``, else the tokenizer shipped with hyper_parallel."""

        def __post_init__(self) -> None:
            require(
                self.path is None or (isinstance(self.path, str) and self.path != ""),
                self,
                "path",
                "must be a non-empty path, or None for the shipped tokenizer",
            )

    def __init__(self, config: Config, *, weights_path: str | None = None) -> None:
        # The data layer (the ``tokenizers`` library) is imported here, where the tokenizer is
        # loaded: the Config above is configuration and must import without it.
        from hyper_parallel.data.tokenizer import load_tokenizer, resolve_tokenizer_path

        super().__init__(config)
        try:
            self.tokenizer: TextTokenizer = load_tokenizer(
                resolve_tokenizer_path(config.path, weights_path), field_name=PATH_FIELD
            )
        except (OSError, ValueError) as exc:
            # A file that is missing or not a tokenizer is bad input: a ConfigError naming the
            # recipe field (the data layer starts its messages with it), which the legacy front
            # door translates to its key.
            raise ConfigError(str(exc).removeprefix(f"{PATH_FIELD}: "), path=PATH_FIELD) from None

    @property
    def eos_id(self) -> int:
        return self.tokenizer.eos_id

    @property
    def pad_id(self) -> int:
        return self.tokenizer.pad_id

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def path(self) -> str:
        """The ``tokenizer.json`` file that was loaded."""
        return self.tokenizer.path

    @property
    def backend(self):
        """The ``tokenizers.Tokenizer``."""
        return self.tokenizer.backend

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self.tokenizer.encode_batch(texts)

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)


__all__ = ["BaseTokenizer", "HuggingFaceTokenizer"]
