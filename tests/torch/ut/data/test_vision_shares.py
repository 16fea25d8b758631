"""Each rank reads its own share of the images, loaded or streamed (issue 44, item 5).

* Loaded (map-style) chat records: at start-up rank ``r`` of ``W`` touches -- opens, stats --
  only the image files of records ``r, r + W, ...`` (the unshuffled sampler's assignment),
  never the others': 2 gloo ranks, file-system calls counted. A record that cannot train is
  reported by every rank, whichever rank's share it is in.
* Streamed chat records (``dataloader.streaming``): each data-parallel rank opens the images of
  its share of the stream only, as the records come; the stream resumes mid-epoch with the
  very batches -- pixels included -- of the uninterrupted one, shuffled or not; the engine
  resumed from a checkpoint trains the uninterrupted run's steps bit for bit; a record whose
  images cannot fit its row is left out and logged, never an error hours in.

Every image is made here with PIL.
"""

from __future__ import annotations

import builtins
import dataclasses
import io
import json
import logging
import os
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from hyper_parallel.components.dataloader import BaseDataLoader
from hyper_parallel.models.qwen3_5.configuration import FLAVORS

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")

VISION = FLAVORS["debugmodel_vl"].vision_config
VOCAB = FLAVORS["debugmodel_vl"].vocab_size
RECORDS = 12
COLOURS = ("red", "green", "blue", "white")
#: The demo corpus's image processor: 32 x 32 .. 128 x 128 pixels (1 .. 16 tokens an image).
PROCESSOR = "pkg://vl_corpus"


def write_corpus(folder: Path, records: int = RECORDS, *, extra: dict | None = None) -> str:
    """``records`` chat records, each with an image of its own (a size of its own too, so a
    batch's grids tell its records apart); ``extra``: records replacing some, by index."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(records):
        name = f"images/{i:03d}.png"
        colour = COLOURS[i % len(COLOURS)]
        Image.new("RGB", (32 + 32 * (i % 5), 32 + 32 * (i // 5)), colour).save(folder / name)
        rows.append({"messages": [{"role": "user", "content": "<image>What colour?"},
                                  {"role": "assistant", "content": colour}], "image": name})
    rows = [(extra or {}).get(i, row) for i, row in enumerate(rows)]
    path = folder / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def tokenizer():
    from hyper_parallel.components.tokenizer import HuggingFaceTokenizer

    return HuggingFaceTokenizer.Config(path="pkg://tokenizer_vl").build()


class FileTouches:
    """The image files a process opens or stats (``builtins.open``, ``os.stat``: what PIL and
    ``os.path.isfile`` call), by name, while :meth:`watching`."""

    def __init__(self, folder: Path) -> None:
        self.folder = str(folder / "images")
        self.names: list[str] = []
        self._open, self._stat = builtins.open, os.stat

    def _seen(self, path) -> None:
        if isinstance(path, (str, os.PathLike)) and os.fspath(path).startswith(self.folder):
            self.names.append(os.path.basename(os.fspath(path)))

    def install(self, monkeypatch) -> FileTouches:
        def opened(file, *args, **kwargs):
            self._seen(file)
            return self._open(file, *args, **kwargs)

        def stat(path, *args, **kwargs):
            self._seen(path)
            return self._stat(path, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", opened)
        monkeypatch.setattr(os, "stat", stat)
        return self


# ------------------------------------------------------------------------ loaded: 2 gloo ranks


@pytest.mark.slow  # one 2-rank job: a few seconds
def test_each_rank_reads_only_its_share_of_the_images_at_start_up(tmp_path):
    from tests.helpers.torchrun import spawn_ranks

    write_corpus(tmp_path / "clean")
    record = {"messages": [{"role": "user", "content": "Colour?"},
                           {"role": "assistant", "content": "red"}]}
    write_corpus(tmp_path / "bad", extra={3: {**record, "image": "missing.png"},
                                          4: {**record, "image": "nowhere.png"}})
    spawn_ranks(os.path.abspath(__file__), [str(tmp_path)], nproc=2, timeout=300)
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for rank, result in enumerate(results):
        # Its share of the records, each image once: 6 of the 12.
        assert sorted(result["touched"]) == [f"{i:03d}.png" for i in range(rank, RECORDS, 2)]
        assert result["samples"] == RECORDS // 2  # and it still trains every record it draws
    # A bad record in each rank's share: both ranks raise the one error naming both.
    assert results[0]["error"] == results[1]["error"]
    error = results[0]["error"]
    assert f"2 of {RECORDS} records cannot be trained" in error
    assert ":4: image 'missing.png' not found" in error  # record 3: rank 1's share
    assert ":5: image 'nowhere.png' not found" in error  # record 4: rank 0's
    # A rank whose check fails: both raise, the other naming it and the cause.
    assert results[1]["failure"] == "OSError: [Errno 5] Input/output error"
    assert results[0]["failure"].startswith("RuntimeError: rank 1 could not check its share")
    assert results[0]["failure"].endswith("OSError: [Errno 5] Input/output error")
    # Packed (data.packing): still each rank its share of the headers, and every rank plans
    # the rows one process plans, from every record's length (gathered with the check).
    alone = _loaded(str(tmp_path / "clean" / "train.jsonl"), 0, world=1, packing=True)
    for rank, result in enumerate(results):
        assert sorted(result["packed touched"]) == [f"{i:03d}.png"
                                                    for i in range(rank, RECORDS, 2)]
        assert result["packed rows"] == alone.dataset.rows
    assert len(alone.dataset.rows) < RECORDS


def _share_worker(out: Path) -> None:
    import pytest as _pytest
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    result: dict = {}
    with _pytest.MonkeyPatch.context() as monkeypatch:
        touches = FileTouches(out / "clean").install(monkeypatch)
        loader = _loaded(str(out / "clean" / "train.jsonl"), rank)
        result["touched"] = touches.names
    result["samples"] = sum(len(b["input_ids"]) for b in loader)
    with _pytest.MonkeyPatch.context() as monkeypatch:
        touches = FileTouches(out / "clean").install(monkeypatch)
        packed = _loaded(str(out / "clean" / "train.jsonl"), rank, packing=True)
        result["packed touched"] = touches.names
    result["packed rows"] = packed.dataset.rows
    try:
        _loaded(str(out / "bad" / "train.jsonl"), rank)
        result["error"] = None
    except (ValueError, OSError) as exc:
        result["error"] = str(exc)
    # A rank whose check itself fails (here: rank 1's file system) tells the other, which
    # would otherwise wait in the gather for ever.
    from hyper_parallel.data.chat_records import ChatRecords

    with _pytest.MonkeyPatch.context() as monkeypatch:
        if rank == 1:
            def broken(self, record):
                raise OSError(5, "Input/output error")

            monkeypatch.setattr(ChatRecords, "check", broken)
        try:
            _loaded(str(out / "clean" / "train.jsonl"), rank)
            result["failure"] = None
        except (RuntimeError, OSError) as exc:
            result["failure"] = f"{type(exc).__name__}: {exc}"
    (out / f"rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


def _loaded(path: str, rank: int, *, world: int = 2, packing: bool = False):
    config = BaseDataLoader.Config(dataset="json_file", dataset_path=path, pin_memory=False,
                                   processor_path=PROCESSOR, packing=packing)
    return config.build(dp_world_size=world, dp_rank=rank, local_batch_size=2 if world == 2
                        else 1, seq_len=64, tokenizer=tokenizer(), vocab_size=VOCAB,
                        vision=VISION)


# ------------------------------------------------------------------------------- streamed


def _stream_loader(path: str, *, shuffle: bool, rank: int, tok, budget: int = 20):
    config = BaseDataLoader.Config(dataset="json_file", dataset_path=path, streaming=True,
                                   shuffle=shuffle, max_samples=budget, pin_memory=False,
                                   processor_path=PROCESSOR)
    return config.build(dp_world_size=2, dp_rank=rank, local_batch_size=2, seq_len=64, seed=3,
                        tokenizer=tok, vocab_size=VOCAB, vision=VISION)


def _saved(state: dict) -> dict:
    """``state`` through the checkpoint's ``torch.save`` / ``torch.load(weights_only=True)``."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def _batches(loader, stop: int | None = None) -> list[dict]:
    out = []
    for i, batch in enumerate(loader):
        out.append(batch)
        if stop is not None and i + 1 == stop:
            break
    return out


def _same(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x) for x, y in zip(a, b))


@pytest.mark.parametrize("shuffle", [False, True], ids=["in order", "shuffled"])
def test_streamed_image_records_read_each_ranks_share_and_resume_mid_epoch(tmp_path, shuffle,
                                                                           monkeypatch):
    path = write_corpus(tmp_path)
    tok = tokenizer()
    touches = FileTouches(tmp_path).install(monkeypatch)
    straight, opened = {}, {}
    for rank in range(2):
        # 10 samples an epoch on each rank from its 6 records: every epoch reads a second pass.
        loader = _stream_loader(path, shuffle=shuffle, rank=rank, tok=tok)
        assert loader.holds_images
        straight[rank] = []
        for epoch in range(2):
            touches.names.clear()
            loader.set_epoch(epoch)
            straight[rank].append(_batches(loader))
            opened[rank, epoch] = set(touches.names)
        assert [len(e) for e in straight[rank]] == [5, 5]
        assert all("pixel_values" in b and "position_ids" in b for b in straight[rank][0])
    for epoch in range(2):  # the ranks' shares: disjoint, the whole corpus between them
        assert len(opened[0, epoch]) == len(opened[1, epoch]) == RECORDS // 2
        assert opened[0, epoch] | opened[1, epoch] == {f"{i:03d}.png" for i in range(RECORDS)}
    assert _same(straight[0][0], straight[0][1]) != shuffle  # reshuffled each epoch
    # Saved in the first pass, in the second, and in the next epoch; resumed on a new loader.
    for rank in range(2):
        for cut_epoch, cut in ((0, 2), (0, 4), (1, 3)):
            loader = _stream_loader(path, shuffle=shuffle, rank=rank, tok=tok)
            seen = []
            for epoch in range(cut_epoch + 1):
                loader.set_epoch(epoch)
                seen.append(_batches(loader, cut if epoch == cut_epoch else None))
            resumed = _stream_loader(path, shuffle=shuffle, rank=rank, tok=tok)
            resumed.load_state_dict(_saved(loader.state_dict()))
            for epoch in range(cut_epoch, 2):
                resumed.set_epoch(epoch)
                rest = _batches(resumed)
                if epoch == cut_epoch:
                    seen[-1] += rest
                else:
                    seen.append(rest)
            assert all(_same(s, t) for s, t in zip(seen, straight[rank], strict=True)), (
                rank, cut_epoch, cut)


def test_a_streamed_record_too_long_for_its_row_is_left_out_and_named(tmp_path, caplog):
    many = {5: {"messages": [{"role": "user", "content": "<image>" * 30 + "Which?"},
                             {"role": "assistant", "content": "all"}],
                "image": ["images/000.png"] * 30}}
    path = write_corpus(tmp_path, extra=many)
    config = BaseDataLoader.Config(dataset="json_file", dataset_path=path, streaming=True,
                                   shuffle=False, pin_memory=False, processor_path=PROCESSOR)
    loader = config.build(dp_world_size=1, dp_rank=0, local_batch_size=1, seq_len=64,
                          tokenizer=tokenizer(), vocab_size=VOCAB, vision=VISION)
    with caplog.at_level(logging.WARNING, logger="hyper_parallel.data.chat_records"):
        batches = list(loader)
    assert len(batches) == RECORDS - 1  # the others all train
    assert all(int(b["image_grid_thw"].shape[0]) == 1 for b in batches)
    assert f"{path}:6: its 30 image(s) end at token" in caplog.text
    assert "left out of the stream" in caplog.text


def test_a_streamed_record_missing_its_image_is_bad_input_naming_it(tmp_path):
    """Not a size: the run cannot train what the user meant, so it ends as a text stream's bad
    record does (``ConfigError``: exit 2), naming the setting and the record."""
    from hyper_parallel.utils.errors import ConfigError

    lost = {3: {"messages": [{"role": "user", "content": "<image>What colour?"},
                             {"role": "assistant", "content": "red"}], "image": "lost.png"}}
    path = write_corpus(tmp_path, extra=lost)
    config = BaseDataLoader.Config(dataset="json_file", dataset_path=path, streaming=True,
                                   shuffle=False, pin_memory=False, processor_path=PROCESSOR)
    loader = config.build(dp_world_size=1, dp_rank=0, local_batch_size=1, seq_len=64,
                          tokenizer=tokenizer(), vocab_size=VOCAB, vision=VISION)
    with pytest.raises(ConfigError, match=rf"^BaseDataLoader\.Config\.dataset_path: {path}:4: "
                                          r"image 'lost\.png' not found"):
        list(loader)


# ------------------------------------------------------------------------------ the engine


def _engine_config(data: str, folder: Path, **checkpoint):
    from hyper_parallel.models.qwen3_5_v2.config_registry import qwen3_5_v2_debugmodel_vl

    config = qwen3_5_v2_debugmodel_vl()
    return dataclasses.replace(
        config, dump_folder=str(folder),
        dataloader=dataclasses.replace(config.dataloader, dataset_path=data, streaming=True,
                                       max_samples=8),
        training=dataclasses.replace(config.training, steps=6, max_epochs=2,
                                     local_batch_size=2, global_batch_size=2, seq_len=64),
        checkpoint=dataclasses.replace(config.checkpoint, folder=str(folder / "ckpt"),
                                       interval=2, **checkpoint),
        metrics=dataclasses.replace(config.metrics, log_freq=1))


def _train(config) -> list[tuple[int, float]]:
    trainer = config.build()
    try:
        trainer.train()
        return list(trainer.state.loss_history)
    finally:
        trainer.close()


def test_a_streamed_image_text_run_resumes_with_the_uninterrupted_steps(tmp_path):
    """The engine, in this process, on the debug image-text model: 12 chat records streamed
    with the shuffle buffer, 8 samples an epoch, 2 a step, 6 steps over 2 epochs, a checkpoint
    every 2 steps. Resumed from step 2 (mid-epoch), steps 3-6 have the very losses of the
    uninterrupted run."""
    data = write_corpus(tmp_path / "data")
    straight = _train(_engine_config(data, tmp_path / "straight"))
    assert [step for step, _ in straight] == [1, 2, 3, 4, 5, 6]
    resumed = _train(_engine_config(data, tmp_path / "resumed",
                                    load_path=str(tmp_path / "straight" / "ckpt" / "step_2")))
    assert resumed == straight[2:]


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    _share_worker(Path(sys.argv[1]))
    exit_now(0)
