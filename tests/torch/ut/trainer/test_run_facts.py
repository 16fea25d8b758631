"""``run.json``'s facts: input files by content hash, versions, the launch line."""

from __future__ import annotations

import hashlib

from hyper_parallel.run_record import facts


def _config(**paths):
    from hyper_parallel.models.qwen3_5_v2.config_registry import qwen3_5_v2_debugmodel

    config = qwen3_5_v2_debugmodel()
    config.dataloader.dataset_path = paths.get("data")
    config.tokenizer.path = paths.get("tokenizer")
    return config


def test_input_files_by_hash_pkg_paths_globs_and_folders(tmp_path, monkeypatch):
    shard = tmp_path / "data" / "a.jsonl"
    shard.parent.mkdir()
    shard.write_text('{"text": "x"}\n')
    (tmp_path / "data" / "b.jsonl").write_text("y" * 100)
    tok = tmp_path / "tok"
    (tok / "sub").mkdir(parents=True)
    (tok / "sub" / "tokenizer.json").write_text("{}")
    found = facts.input_files(_config(data=str(tmp_path / "data" / "*.jsonl"), tokenizer=str(tok)))
    assert [(f["field"], f["path"]) for f in found] == [
        ("dataloader.dataset_path", str(shard)),
        ("dataloader.dataset_path", str(tmp_path / "data" / "b.jsonl")),
        ("tokenizer.path", str(tok / "sub" / "tokenizer.json")),
    ]
    assert found[0]["sha256"] == hashlib.sha256(shard.read_bytes()).hexdigest()
    # The shipped corpus by its pkg:// name; the shipped tokenizer when none is named.
    shipped = facts.input_files(_config(data="pkg://corpus/train.jsonl"))
    assert [f["field"] for f in shipped] == ["dataloader.dataset_path", "tokenizer (shipped)"]
    assert shipped[0]["path"].endswith("corpus/train.jsonl") and shipped[0]["size"] > 0
    # Above the limit: size and modification time, no hash.
    monkeypatch.setattr(facts, "HASH_LIMIT_BYTES", 10)
    big = facts.file_fact(tmp_path / "data" / "b.jsonl")
    assert big["size"] == 100 and "mtime" in big and "sha256" not in big
    # Past the budget too: the first file is hashed, the next no more.
    monkeypatch.setattr(facts, "HASH_LIMIT_BYTES", 1000)
    monkeypatch.setattr(facts, "HASH_BUDGET_BYTES", 110)
    found = facts.input_files(_config(data=str(tmp_path / "data" / "*.jsonl"), tokenizer=str(tok)))
    assert ["sha256" in f for f in found] == [True, False, True]  # 14 + 100 > 110


def test_versions_and_launch(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    launch = facts.launch(["old.yaml", "--train.seed=7"], world_size=4)
    assert launch["command"] == ("torchrun --nnodes 2 --nproc_per_node 2 -m hyper_parallel.train "
                                 "old.yaml --train.seed=7")
    assert launch["environment"]["OMP_NUM_THREADS"] == "3"
    found = facts.versions()
    assert found["libraries"]["torch"].startswith("2.") and found["python"].count(".") == 2
    assert set(found["hyper_parallel"]) >= {"version", "git_commit"}
