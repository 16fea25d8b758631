"""``HuggingFaceTokenizer`` against ``LLMTrainer._build_model_assets``."""

from __future__ import annotations

import json
import shutil

import pytest

from hyper_parallel import assets
from hyper_parallel.components import BaseTokenizer, HuggingFaceTokenizer
from hyper_parallel.data import read_jsonl_documents
from hyper_parallel.utils.errors import ConfigError
from tests.torch.ut.components._common import legacy_config, legacy_tokenizer

TEXT_DATA = {"type": "jsonl", "train_path": "pkg://corpus/valid.jsonl"}


def assert_same_tokenizer(new: HuggingFaceTokenizer, old) -> None:
    assert new.path == old.path
    assert (new.eos_id, new.pad_id, new.vocab_size) == (old.eos_id, old.pad_id, old.vocab_size)
    assert new.backend.to_str() == old.backend.to_str()
    docs = read_jsonl_documents([assets.corpus_path("valid.jsonl")])[:20]
    docs.append("a literal <|endoftext|> stays text")
    assert new.encode_batch(docs) == old.encode_batch(docs)
    assert [new.encode(d) for d in docs] == [old.encode(d) for d in docs]
    ids = new.encode(docs[0])
    assert new.decode(ids) == old.decode(ids) == docs[0]


def test_default_is_the_shipped_tokenizer_like_the_legacy_default():
    old = legacy_tokenizer(legacy_config(data=TEXT_DATA))
    new = HuggingFaceTokenizer.Config().build()
    assert new.path == assets.tokenizer_path()
    assert_same_tokenizer(new, old)
    assert isinstance(new, BaseTokenizer) and new.vocab_size == 2048


def test_explicit_path_equals_legacy_tokenizer_path(tmp_path):
    shutil.copytree(assets.asset_root() / "tokenizer", tmp_path / "tok")
    # A tokenizer_config.json that names another pad token: both sides must honour it.
    cfg = json.loads((tmp_path / "tok" / "tokenizer_config.json").read_text())
    cfg["pad_token"] = "a"
    (tmp_path / "tok" / "tokenizer_config.json").write_text(json.dumps(cfg))
    old = legacy_tokenizer(legacy_config(model={"tokenizer_path": str(tmp_path / "tok")}, data=TEXT_DATA))
    new = HuggingFaceTokenizer.Config(path=str(tmp_path / "tok")).build()
    assert_same_tokenizer(new, old)
    assert new.pad_id != new.eos_id


def test_weights_directory_fallback_equals_the_legacy(tmp_path):
    weights = tmp_path / "weights"
    shutil.copytree(assets.asset_root() / "tokenizer", weights)
    old = legacy_tokenizer(legacy_config(model={"weights_path": str(weights)}, data=TEXT_DATA))
    new = HuggingFaceTokenizer.Config().build(weights_path=str(weights))
    assert new.path == str(weights / "tokenizer.json")
    assert_same_tokenizer(new, old)
    # An explicit path wins over the weights directory, as model.tokenizer_path does.
    explicit = HuggingFaceTokenizer.Config(path="pkg://tokenizer").build(weights_path=str(weights))
    assert explicit.path == assets.tokenizer_path()


def test_errors_name_the_config_field(tmp_path):
    # A file that is not there is bad input: a ConfigError naming the recipe field.
    with pytest.raises(ConfigError, match=r"^tokenizer.path: .* does not exist") as info:
        HuggingFaceTokenizer.Config(path=str(tmp_path / "missing")).build()
    assert info.value.path == "tokenizer.path"
    with pytest.raises(ValueError, match=r"HuggingFaceTokenizer.Config.path='': must be a non-empty"):
        HuggingFaceTokenizer.Config(path="")


def test_base_tokenizer_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        BaseTokenizer.Config().build()
