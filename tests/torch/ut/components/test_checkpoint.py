"""``CheckpointManager`` against the plain checkpoint helpers (``save_checkpoint`` /
``export_hf_weights`` of :mod:`hyper_parallel.runtime.checkpoint`, called directly on the objects the
legacy settings describe), and its own behaviour: resume, cadence, keep-latest-k, HF export."""

from __future__ import annotations

import json
import os
import threading
from types import SimpleNamespace

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

from hyper_parallel.components import (
    BaseDataLoader,
    CheckpointManager,
    LRSchedulersContainer,
    OptimizersContainer,
)
from hyper_parallel.runtime import checkpoint as ck
from hyper_parallel.runtime.callbacks import Callback, CallbackHandler, CheckpointManagerCallback
from hyper_parallel.runtime.step import train_step
from tests.torch.ut.components._common import (
    assert_same_tree,
    backward_through,
    batch_of,
    legacy_config,
    legacy_dataloader,
    legacy_lr_scheduler,
    legacy_optimizer,
    tiny_model,
    two_parts,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated"),
    pytest.mark.filterwarnings("ignore:torch.distributed is disabled"),
]

STEPS = 6
LEGACY = {"max_steps": STEPS, "global_batch_size": 2, "micro_batch_size": 2, "seed": 3}
DATA = {"max_seq_len": 8}


@pytest.fixture(autouse=True)
def _no_leftover_async():
    yield
    ck.wait_async_save()


def run_steps(model, optimizer, scheduler, loader_iter, n: int) -> list[float]:
    losses = []
    for _ in range(n):
        result = train_step(
            model,
            optimizer,
            scheduler,
            [next(loader_iter)],
            device=torch.device("cpu"),
            loss_aggregation="token_weighted",
            dp_group=None,
            dp_size=1,
            max_grad_norm=1.0,
        )
        losses.append(result.loss)
    return losses


def legacy_objects(tmp_path):
    """The optimizer / scheduler / data the legacy settings describe, from the plain helpers,
    with the folder their checkpoints go to (saved by calling ``save_checkpoint`` directly)."""
    args = legacy_config(data=DATA, **LEGACY)
    model = tiny_model()
    optimizer = legacy_optimizer(args, model)
    data = legacy_dataloader(args, vocab_size=32)
    return SimpleNamespace(
        args=args,
        folder=str(tmp_path / "legacy"),
        model=model,
        optimizer=optimizer,
        lr_scheduler=legacy_lr_scheduler(args, optimizer),
        train_dataloader=data.train_dataloader,
    )


def plain_save(legacy, step: int, extra: dict) -> str:
    """The checkpoint of ``legacy`` written by the plain helper (what the legacy trainer did)."""
    return ck.save_checkpoint(
        legacy.folder,
        step,
        model=legacy.model,
        optimizer=legacy.optimizer,
        lr_scheduler=legacy.lr_scheduler,
        dataloader=legacy.train_dataloader,
        extra=extra,
    )


def components(tmp_path, *, model=None, **checkpoint):
    """The same objects built from component Configs, plus a CheckpointManager."""
    model = tiny_model() if model is None else model
    optimizers = OptimizersContainer.Config().build(model_parts=[model])
    schedulers = LRSchedulersContainer.Config(warmup_steps=1).build(
        optimizers=optimizers, training_steps=STEPS
    )
    loader = BaseDataLoader.Config().build(
        dp_world_size=1,
        dp_rank=0,
        local_batch_size=2,
        seq_len=8,
        seed=3,
        vocab_size=32,
        num_samples=STEPS * 2,
    )
    manager = CheckpointManager.Config(
        folder=str(tmp_path / "new"), export_hf=False, **checkpoint
    ).build(model_parts=[model], optimizers=optimizers, lr_schedulers=schedulers, dataloader=loader)
    return SimpleNamespace(
        model=model, optimizers=optimizers, schedulers=schedulers, loader=loader, manager=manager
    )


def read_dcp(path: str) -> tuple[dict, dict]:
    """``(tensors, other entries)`` of a DCP checkpoint, by their stored key."""
    metadata = dcp.FileSystemReader(path).read_metadata().state_dict_metadata
    tensors = {
        k: torch.empty(m.size, dtype=m.properties.dtype)
        for k, m in metadata.items()
        if isinstance(m, TensorStorageMetadata)
    }
    dcp.load(tensors, checkpoint_id=path, no_dist=True)
    return tensors, {k: m for k, m in metadata.items() if k not in tensors}


def test_checkpoint_contents_equal_the_plain_helpers_checkpoint(tmp_path):
    legacy = legacy_objects(tmp_path)
    new = components(tmp_path)
    assert run_steps(
        legacy.model, legacy.optimizer, legacy.lr_scheduler, iter(legacy.train_dataloader), 2
    ) == run_steps(new.model, new.optimizers, new.schedulers, iter(new.loader), 2)

    legacy_dir = plain_save(legacy, 2, {"epoch": 0})
    new_dir = new.manager.save(2, {"epoch": 0})
    assert os.path.basename(new_dir) == os.path.basename(legacy_dir) == "step_2"
    assert new.manager.saved == [new_dir] and new.manager.last_saved_step == 2
    assert sorted(os.listdir(new_dir)) == sorted(os.listdir(legacy_dir))

    # Model weights and optimizer moments: the same tensors under the same stored keys.
    legacy_tensors, legacy_other = read_dcp(legacy_dir)
    new_tensors, new_other = read_dcp(new_dir)
    assert any(k.startswith("model.") for k in new_tensors)
    assert any(k.startswith("optimizer.state.") for k in new_tensors)
    assert_same_tree(new_tensors, legacy_tensors)
    # Hyperparameters: per parameter (flattened container) instead of per group (torch optimizer).
    assert "optimizer.param_groups.0.lr" in legacy_other
    assert "optimizer.param_groups.proj.weight.lr" in new_other

    for name in ("scheduler.pt", "dataloader_rank0.pt", "rng_rank0.pt"):
        assert_same_tree(
            torch.load(os.path.join(new_dir, name), weights_only=True),
            torch.load(os.path.join(legacy_dir, name), weights_only=True),
        )
    with (
        open(os.path.join(new_dir, ck.EXTRA_STATE_FILE)) as f,
        open(os.path.join(legacy_dir, ck.EXTRA_STATE_FILE)) as g,
    ):
        new_extra = json.load(f)
        assert new_extra == json.load(g)
    assert new_extra["global_step"] == 2 and new_extra["epoch"] == 0


def test_resume_continues_exactly_like_the_uninterrupted_run(tmp_path):
    reference = components(tmp_path / "ref")
    it = iter(reference.loader)
    uninterrupted = run_steps(reference.model, reference.optimizers, reference.schedulers, it, 5)

    first = components(tmp_path)
    it = iter(first.loader)
    head = run_steps(first.model, first.optimizers, first.schedulers, it, 3)
    first.manager.save(3, {"epoch": 0})
    run_steps(first.model, first.optimizers, first.schedulers, it, 1)  # progress that is lost

    resumed = components(tmp_path, model=tiny_model(seed=9), load_path="latest")
    extra = resumed.manager.load()
    assert extra["global_step"] == 3 and extra["epoch"] == 0
    assert resumed.manager.last_saved_step == 3
    tail = run_steps(resumed.model, resumed.optimizers, resumed.schedulers, iter(resumed.loader), 2)
    assert head + tail == uninterrupted
    # The resumed step is not saved again (the legacy rule).
    assert resumed.manager.maybe_save(3, last_step=True) is None


def test_fresh_start_and_missing_checkpoint(tmp_path):
    assert components(tmp_path, load_path="latest").manager.load() is None
    with pytest.raises(ck.CheckpointError, match="does not exist"):
        components(tmp_path, load_path=str(tmp_path / "nope")).manager.load()


def test_resume_latest_prefers_the_runs_own_newest_checkpoint_then_load_path(tmp_path, caplog):
    """The rule, branch by branch: the folder's newest complete checkpoint wins over
    ``load_path``; an empty folder falls back to ``load_path``; with neither, a fresh start. Each
    start says in the log which source it took and why."""
    other = components(tmp_path / "other")
    run_steps(other.model, other.optimizers, other.schedulers, iter(other.loader), 2)
    initial = other.manager.save(2, {"epoch": 0})

    caplog.set_level("INFO", logger="hyper_parallel")
    fresh = components(tmp_path, resume_latest=True)
    assert fresh.manager.load() is None
    assert "holds no complete checkpoint, so starting fresh" in caplog.text
    assert ck.RESUME_RULE in caplog.text

    caplog.clear()
    first = components(tmp_path, resume_latest=True, load_path=initial)
    assert first.manager.load()["global_step"] == 2 and first.manager.loaded_from == initial
    assert f"so loading {initial}" in caplog.text
    run_steps(first.model, first.optimizers, first.schedulers, iter(first.loader), 3)
    own = first.manager.save(5, {"epoch": 0})

    caplog.clear()
    requeued = components(tmp_path, resume_latest=True, load_path=initial)
    assert requeued.manager.load()["global_step"] == 5 and requeued.manager.loaded_from == own
    assert f"resuming from {own}" in caplog.text
    # Off (the legacy behaviour): load_path is the source even when the folder holds newer.
    assert components(tmp_path, load_path=initial).manager.load()["global_step"] == 2


def two_checkpoints(tmp_path) -> tuple[str, str]:
    """Checkpoints of steps 2 and 4 (a 4-step run saving every 2 steps); their paths."""
    first = components(tmp_path)
    it = iter(first.loader)
    paths = []
    for step in (2, 4):
        run_steps(first.model, first.optimizers, first.schedulers, it, 2)
        paths.append(first.manager.save(step, {"epoch": 0}))
    return paths[0], paths[1]


def shard_of(path: str) -> str:
    (shard,) = [n for n in os.listdir(path) if n.endswith(".distcp")]
    return shard


def truncate(path: str, name: str) -> None:
    file = os.path.join(path, name)
    with open(file, "r+b") as f:
        f.truncate(os.path.getsize(file) // 2)


def scribble(path: str, name: str) -> None:
    """Same size, garbage content."""
    file = os.path.join(path, name)
    with open(file, "r+b") as f:
        f.write(b"\x5a" * os.path.getsize(file))


def delete(path: str, name: str) -> None:
    os.remove(os.path.join(path, name))


DAMAGE = {
    "truncated shard": (lambda p: truncate(p, shard_of(p)), lambda p: shard_of(p), "is truncated"),
    "garbage shard": (lambda p: scribble(p, shard_of(p)), lambda p: shard_of(p), "cannot be read"),
    "deleted shard": (lambda p: delete(p, shard_of(p)), lambda p: "__0_0.distcp", "is missing"),
    "garbage .metadata": (lambda p: scribble(p, ".metadata"), lambda p: ".metadata", "cannot be read"),
    "garbage extra_state.json": (
        lambda p: scribble(p, ck.EXTRA_STATE_FILE), lambda p: ck.EXTRA_STATE_FILE, "cannot be read"
    ),
    "truncated scheduler.pt": (
        lambda p: truncate(p, ck.SCHEDULER_FILE), lambda p: ck.SCHEDULER_FILE, "cannot be read"
    ),
    "garbage dataloader": (
        lambda p: scribble(p, "dataloader_rank0.pt"), lambda p: "dataloader_rank0.pt",
        "cannot be read",
    ),
    "deleted rng": (lambda p: delete(p, "rng_rank0.pt"), lambda p: "rng_rank0.pt", "is missing"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_checkpoint_names_the_folder_the_file_and_the_earlier_step(tmp_path, damage):
    earlier, latest = two_checkpoints(tmp_path)
    apply, file_of, what = DAMAGE[damage]
    bad_file = file_of(latest)
    apply(latest)
    resumed = components(tmp_path, model=tiny_model(seed=9), load_path="latest")
    with pytest.raises(ck.CheckpointError) as err:
        resumed.manager.load()
    msg = str(err.value)
    assert f"checkpoint {latest} is damaged: {bad_file}" in msg, msg
    assert what in msg, msg
    assert "\n" not in msg  # one line for the entry's "error: ..."
    # the way out: the earlier step and the setting that loads it, on both command lines
    assert f"earlier complete checkpoint is step 2 ({earlier})" in msg, msg
    assert (
        f"set checkpoint.load_path={earlier!r} (legacy YAML: train.checkpoint.load_path)" in msg
    ), msg
    assert resumed.manager.loaded_from is None

    # ... and it works: the earlier checkpoint loads
    retry = components(tmp_path, model=tiny_model(seed=9), load_path=earlier)
    assert retry.manager.load()["global_step"] == 2


def test_no_earlier_intact_checkpoint_says_so(tmp_path):
    earlier, latest = two_checkpoints(tmp_path)
    truncate(latest, shard_of(latest))
    scribble(earlier, ".metadata")  # the earlier one fails the same checks: not offered
    with pytest.raises(ck.CheckpointError) as err:
        components(tmp_path, load_path="latest").manager.load()
    msg = str(err.value)
    assert f"checkpoint {latest} is damaged: {shard_of(latest)} is truncated" in msg
    assert "No earlier complete checkpoint under" in msg and "unset checkpoint.load_path" in msg
    with pytest.raises(ck.CheckpointError, match=rf"checkpoint {earlier} is damaged: \.metadata"):
        components(tmp_path, load_path=earlier).manager.load()


def test_load_path_errors_name_the_engine_field_and_the_legacy_key(tmp_path):
    with pytest.raises(ck.CheckpointError) as err:
        components(tmp_path, load_path=str(tmp_path / "nope")).manager.load()
    assert str(err.value).startswith(
        f"checkpoint.load_path={str(tmp_path / 'nope')!r} (legacy YAML: "
        "train.checkpoint.load_path) does not exist"
    )
    # the plain helper names whatever field its caller gives
    with pytest.raises(ck.CheckpointError, match=r"^load_from='x' does not exist"):
        ck.resolve_resume_path("x", str(tmp_path), field="load_from", legacy_field=None)


class SaveSink(Callback):
    def __init__(self, trainer):
        super().__init__(trainer)
        self.saved = []

    def on_save(self, checkpoint_dir):
        self.saved.append(checkpoint_dir)


def test_save_cadence_every_interval_and_at_the_end(tmp_path):
    new = components(tmp_path, interval=3)
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0, epoch=0), is_rank0=True)
    handler = CallbackHandler(
        trainer, builtins={"checkpoint": CheckpointManagerCallback(trainer, new.manager)}
    )
    sink = handler.add_callback(SaveSink(trainer))
    handler.on_train_begin()  # no load_path: a fresh start
    assert trainer.state.global_step == 0 and new.manager.loaded_from is None
    it = iter(new.loader)
    for step in range(1, 6):
        run_steps(new.model, new.optimizers, new.schedulers, it, 1)
        trainer.state.global_step = step
        handler.on_step_end(0.0, 0.0)
    handler.on_train_end()  # step 5 was not saved yet: the final save
    names = lambda paths: [os.path.basename(p) for p in paths]
    assert names(new.manager.saved) == names(sink.saved) == ["step_3", "step_5"]
    assert sorted(os.listdir(new.manager.config.folder)) == ["step_3", "step_5"]
    with open(os.path.join(new.manager.saved[-1], ck.EXTRA_STATE_FILE)) as f:
        assert json.load(f)["epoch"] == 0

    # The rule itself: never step 0, never the step just saved, every interval, the last step.
    manager = new.manager
    assert not manager.should_save(0, last_step=True)
    assert not manager.should_save(5, last_step=True)  # just saved
    assert manager.should_save(6) and not manager.should_save(7)
    assert manager.should_save(7, last_step=True)
    assert (
        CheckpointManager.Config(interval=0, export_hf=False)
        .build(model_parts=[new.model])
        .maybe_save(5, last_step=True)
        is None
    )  # interval 0 never saves


def test_keep_latest_k_deletes_only_older_complete_checkpoints(tmp_path):
    new = components(tmp_path, keep_latest_k=2)
    folder = new.manager.config.folder
    it = iter(new.loader)
    os.makedirs(os.path.join(folder, "step_0"))  # not a complete checkpoint: never touched
    os.makedirs(os.path.join(folder, ".step_1.deleting"))  # left by a killed purge
    for step in range(1, 5):
        run_steps(new.model, new.optimizers, new.schedulers, it, 1)
        new.manager.save(step, {"epoch": 0})
    assert sorted(os.listdir(folder)) == ["step_0", "step_3", "step_4"]
    assert [os.path.basename(p) for p in new.manager.deleted] == ["step_1", "step_2"]
    assert ck.latest_checkpoint(folder).endswith("step_4")


def test_keep_latest_k_never_counts_a_save_in_flight(tmp_path, monkeypatch):
    # Hold the background save before its final rename until the test releases it.
    release = threading.Event()
    finalize = ck.async_writer._finalize  # the background save's rename
    monkeypatch.setattr(
        ck.async_writer, "_finalize", lambda *a, **kw: (release.wait(timeout=30), finalize(*a, **kw))
    )
    new = components(tmp_path, keep_latest_k=1, async_mode="async")
    folder = new.manager.config.folder
    it = iter(new.loader)
    run_steps(new.model, new.optimizers, new.schedulers, it, 1)
    release.set()
    new.manager.save(1, {"epoch": 0}, async_save=False)
    release.clear()
    run_steps(new.model, new.optimizers, new.schedulers, it, 1)
    new.manager.save(2, {"epoch": 0})  # in flight: step_1 is still the only complete one
    assert sorted(os.listdir(folder)) == [".step_2.tmp", "step_1"]
    assert new.manager.deleted == []
    release.set()
    new.manager.wait()  # step_2 complete -> step_1 goes
    assert sorted(os.listdir(folder)) == ["step_2"]


def test_keep_all_by_default(tmp_path):
    new = components(tmp_path)
    it = iter(new.loader)
    for step in range(1, 4):
        run_steps(new.model, new.optimizers, new.schedulers, it, 1)
        new.manager.save(step, {"epoch": 0})
    assert sorted(os.listdir(new.manager.config.folder)) == ["step_1", "step_2", "step_3"]


class PrefixAdapter:
    @staticmethod
    def to_hf(state_dict, config):
        assert config == {"fake": "config"}
        return {f"model.{k}": v for k, v in state_dict.items()}


def write_config(path, config, dtype):
    """``config.json`` of the fake model (the export writes the weights itself)."""
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({**config, "dtype": dtype}, f)


def test_hf_export_equals_the_plain_helper(tmp_path, monkeypatch):
    from safetensors.torch import load_file

    monkeypatch.setattr(ck.hf_export, "_hf_config_writer", lambda: write_config)
    legacy = legacy_objects(tmp_path)
    # No LR schedule on either side (its warmup would start at LR 0 and freeze the weights; a
    # scheduler sets that LR on its optimizer when it is built, hence a fresh optimizer).
    legacy.optimizer, legacy.lr_scheduler = legacy_optimizer(legacy.args, legacy.model), None
    model = tiny_model()
    optimizers = OptimizersContainer.Config().build(model_parts=[model])
    manager = CheckpointManager.Config(
        folder=str(tmp_path / "new"), export_hf_policy="every_save"
    ).build(
        model_parts=[model],
        optimizers=optimizers,
        sd_adapter=PrefixAdapter,
        model_config={"fake": "config"},
    )
    for m, opt in ((legacy.model, legacy.optimizer), (model, optimizers)):
        m(batch_of()["input_ids"]).sum().backward()
        opt.step()
    legacy_dir = ck.save_checkpoint(
        legacy.folder,
        1,
        model=legacy.model,
        optimizer=legacy.optimizer,
        lr_scheduler=None,
        dataloader=None,
    )
    legacy_hf = ck.export_hf_weights(
        legacy.model, PrefixAdapter, {"fake": "config"}, os.path.join(legacy_dir, ck.HF_SUBDIR)
    )
    new_dir = manager.save(1)
    assert manager.exported == [os.path.join(new_dir, "hf_ckpt")]
    assert not torch.equal(model.proj.weight, tiny_model().proj.weight)  # trained weights
    exported = load_file(os.path.join(new_dir, "hf_ckpt", "model.safetensors"))
    assert "model.proj.weight" in exported
    assert_same_tree(exported, load_file(os.path.join(legacy_hf, "model.safetensors")))
    assert_same_tree(exported["model.proj.weight"], model.proj.weight.detach())


def test_hf_export_needs_the_adapter_and_model_config(tmp_path):
    with pytest.raises(ValueError, match=r"^checkpoint.export_hf: True, but no sd_adapter was given"):
        CheckpointManager.Config(folder=str(tmp_path)).build(model_parts=[tiny_model()])
    with pytest.raises(ValueError, match=r"no model_config was given"):
        CheckpointManager.Config(folder=str(tmp_path)).build(
            model_parts=[tiny_model()], sd_adapter=PrefixAdapter
        )


def test_two_model_parts_round_trip(tmp_path):
    parts = two_parts(0)
    optimizers = OptimizersContainer.Config(lr=1e-2).build(model_parts=parts)
    schedulers = LRSchedulersContainer.Config(warmup_steps=0).build(
        optimizers=optimizers, training_steps=4
    )
    backward_through(parts, seed=0)
    optimizers.step()
    schedulers.step()
    config = CheckpointManager.Config(folder=str(tmp_path), export_hf=False, load_path="latest")
    config.build(model_parts=parts, optimizers=optimizers, lr_schedulers=schedulers).save(1)

    fresh = two_parts(1)
    fresh_opt = OptimizersContainer.Config(lr=1e-2).build(model_parts=fresh)
    backward_through(fresh, seed=4)
    fresh_opt.step()
    fresh_sched = LRSchedulersContainer.Config(warmup_steps=0).build(
        optimizers=fresh_opt, training_steps=4
    )
    config.build(model_parts=fresh, optimizers=fresh_opt, lr_schedulers=fresh_sched).load()
    for a, b in zip(parts, fresh):
        assert_same_tree(b.state_dict(), a.state_dict())
    assert_same_tree(fresh_opt.state_dict(), optimizers.state_dict())
    assert fresh_sched.state_dict() == schedulers.state_dict()


def test_model_parts_must_have_distinct_names_and_their_own_optimizers(tmp_path):
    same_names = [tiny_model(0), tiny_model(1)]
    with pytest.raises(ValueError, match="two model parts both hold"):
        ck.save_checkpoint(
            str(tmp_path), 1, model=same_names, optimizer=None, lr_scheduler=None, dataloader=None
        )
    parts = two_parts()
    optimizer = torch.optim.AdamW([p for part in parts for p in part.parameters()])
    backward_through(parts)
    optimizer.step()
    with pytest.raises(
        TypeError, match="single torch optimizer cannot be checkpointed with several"
    ):
        ck.save_checkpoint(
            str(tmp_path), 1, model=parts, optimizer=optimizer, lr_scheduler=None, dataloader=None
        )
