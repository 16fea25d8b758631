"""Tests of hyper_parallel.runtime.checkpoint: atomic DCP checkpoints, exact resume, async, HF export.

Run as a script under torchrun (``torchrun --nproc_per_node 2 test_checkpoint.py <out_dir>``) this
file is also the worker of the 2-rank FSDP2 test.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn
from torchdata.stateful_dataloader import StatefulDataLoader

from hyper_parallel.runtime import checkpoint as ck
from hyper_parallel.utils.module_names import strip_wrapper_prefixes
from tests.helpers.torchrun import spawn_ranks

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# ---------------------------------------------------------------------------------------------
# a tiny training setup
# ---------------------------------------------------------------------------------------------


def make_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    # Dropout makes the loss depend on the torch RNG, so RNG restore is observable.
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Dropout(0.2), nn.Linear(16, 1))


def make_optim(model: nn.Module):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 4) * 0.9**s)
    return opt, sched


def make_dataset() -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(64, 6, generator=g)
    y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(64, 1, generator=g)
    return torch.utils.data.TensorDataset(x, y)


def make_loader(ds, sampler=None) -> StatefulDataLoader:
    # An explicit generator: without one, every iter(loader) draws its base seed from the global
    # torch RNG, so the iterator built after a resume would shift the dropout masks.
    gen = torch.Generator().manual_seed(7)
    if sampler is not None:
        return StatefulDataLoader(ds, batch_size=4, sampler=sampler, generator=gen)
    return StatefulDataLoader(ds, batch_size=4, shuffle=True, generator=gen)


def train_steps(model, opt, sched, it, n: int) -> list[float]:
    losses = []
    for _ in range(n):
        x, y = next(it)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def assert_state_equal(a, b, path="") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), path
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert torch.equal(a, b), path
    elif isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            assert_state_equal(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_state_equal(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


def save_at(out, step, model, opt, sched, dl, **kw) -> str:
    return ck.save_checkpoint(
        str(out),
        step,
        model=model,
        optimizer=opt,
        lr_scheduler=sched,
        dataloader=dl,
        extra={"epoch": 0},
        **kw,
    )


@pytest.fixture(autouse=True)
def _no_leftover_async():
    yield
    ck.wait_async_save()


# ---------------------------------------------------------------------------------------------
# single process
# ---------------------------------------------------------------------------------------------


def test_round_trip_restores_model_optimizer_scheduler_rng_and_data_position(tmp_path):
    ds = make_dataset()
    model = make_model(0)
    opt, sched = make_optim(model)
    dl = make_loader(ds)
    it = iter(dl)
    train_steps(model, opt, sched, it, 3)
    random.seed(99)  # python RNG is part of the state too
    path = save_at(tmp_path, 3, model, opt, sched, dl)
    saved = {
        "model": copy.deepcopy(model.state_dict()),
        "opt": copy.deepcopy(opt.state_dict()),
        "sched": copy.deepcopy(sched.state_dict()),
        "torch_rng": torch.get_rng_state(),
        "py_rng": random.getstate(),
    }
    expected = train_steps(model, opt, sched, it, 4)  # the uninterrupted continuation

    # A different process state: other init, other RNG, loader at its start.
    torch.manual_seed(555)
    random.seed(1)
    model2 = make_model(42)
    opt2, sched2 = make_optim(model2)
    dl2 = make_loader(ds)
    extra = ck.load_checkpoint(
        path, model=model2, optimizer=opt2, lr_scheduler=sched2, dataloader=dl2
    )

    assert extra == {"format_version": 1, "global_step": 3, "world_size": 1, "epoch": 0}
    assert_state_equal(saved["model"], model2.state_dict())
    assert_state_equal(saved["opt"], opt2.state_dict())
    assert_state_equal(saved["sched"], sched2.state_dict())
    assert torch.equal(saved["torch_rng"], torch.get_rng_state())
    assert saved["py_rng"] == random.getstate()
    # Bit-identical continuation: same batches, dropout masks, Adam moments and LR.
    assert train_steps(model2, opt2, sched2, iter(dl2), 4) == expected


def test_layout_is_complete_and_no_temporary_dir_remains(tmp_path):
    model = make_model(0)
    opt, sched = make_optim(model)
    dl = make_loader(make_dataset())
    train_steps(model, opt, sched, iter(dl), 1)
    path = save_at(tmp_path, 1, model, opt, sched, dl)
    assert path == str(tmp_path / "step_1")
    assert sorted(os.listdir(tmp_path)) == ["step_1"]
    files = set(os.listdir(path))
    assert {
        ".metadata",
        "scheduler.pt",
        "extra_state.json",
        "rng_rank0.pt",
        "dataloader_rank0.pt",
    } <= files
    assert any(f.endswith(".distcp") for f in files)
    assert json.loads((tmp_path / "step_1" / "extra_state.json").read_text())["global_step"] == 1


def test_latest_checkpoint_picks_highest_complete_step(tmp_path):
    assert ck.latest_checkpoint(str(tmp_path / "missing")) is None
    assert ck.latest_checkpoint(str(tmp_path)) is None
    model = make_model(0)
    opt, sched = make_optim(model)
    train_steps(model, opt, sched, iter(make_loader(make_dataset())), 1)
    for step in (2, 10):
        save_at(tmp_path, step, model, opt, sched, None)
    (tmp_path / ".step_30.tmp").mkdir()  # an interrupted save
    (tmp_path / "step_20").mkdir()  # not written by save_checkpoint
    (tmp_path / "step_x").mkdir()
    assert ck.latest_checkpoint(str(tmp_path)) == str(tmp_path / "step_10")


def test_load_missing_or_incomplete_checkpoint_is_an_error(tmp_path):
    model = make_model(0)
    opt, sched = make_optim(model)
    with pytest.raises(ck.CheckpointError, match="does not exist"):
        ck.load_checkpoint(
            str(tmp_path / "step_5"),
            model=model,
            optimizer=opt,
            lr_scheduler=sched,
            dataloader=None,
        )
    (tmp_path / "step_5").mkdir()
    with pytest.raises(ck.CheckpointError, match="not a complete checkpoint"):
        ck.load_checkpoint(
            str(tmp_path / "step_5"),
            model=model,
            optimizer=opt,
            lr_scheduler=sched,
            dataloader=None,
        )
    # Saved without a scheduler, loaded with one: the missing piece is named.
    train_steps(model, opt, sched, iter(make_loader(make_dataset())), 1)
    path = ck.save_checkpoint(
        str(tmp_path),
        1,
        model=model,
        optimizer=opt,
        lr_scheduler=None,
        dataloader=None,
        extra={"epoch": 0},
    )
    with pytest.raises(ck.CheckpointError, match="LR scheduler"):
        ck.load_checkpoint(path, model=model, optimizer=opt, lr_scheduler=sched, dataloader=None)


def test_world_size_change_cannot_restore_data_positions(tmp_path, caplog):
    model = make_model(0)
    opt, sched = make_optim(model)
    dl = make_loader(make_dataset())
    train_steps(model, opt, sched, iter(dl), 1)
    path = save_at(tmp_path, 1, model, opt, sched, dl)
    meta = tmp_path / "step_1" / "extra_state.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "world_size": 4}))  # "saved on 4"
    model2 = make_model(1)
    opt2, sched2 = make_optim(model2)
    with pytest.raises(ck.CheckpointError, match="world_size=4"):
        ck.load_checkpoint(path, model=model2, optimizer=opt2, lr_scheduler=sched2, dataloader=dl)
    # Weights + optimizer only: resharding is fine, RNG left alone (and said so).
    rng = torch.get_rng_state()
    ck.load_checkpoint(path, model=model2, optimizer=opt2, lr_scheduler=sched2, dataloader=None)
    assert_state_equal(model.state_dict(), model2.state_dict())
    assert torch.equal(rng, torch.get_rng_state())
    assert "RNG states not restored" in caplog.text


def test_resolve_resume_path(tmp_path):
    assert ck.resolve_resume_path(None, str(tmp_path)) is None
    assert ck.resolve_resume_path("latest", str(tmp_path)) is None  # nothing yet: fresh start
    with pytest.raises(ck.CheckpointError, match="load_path"):
        ck.resolve_resume_path(str(tmp_path / "nope"), str(tmp_path))
    model = make_model(0)
    opt, sched = make_optim(model)
    train_steps(model, opt, sched, iter(make_loader(make_dataset())), 1)
    for step in (3, 6):
        save_at(tmp_path, step, model, opt, sched, None)
    assert ck.resolve_resume_path("latest", str(tmp_path)) == str(tmp_path / "step_6")
    assert ck.resolve_resume_path(str(tmp_path), "unused") == str(tmp_path / "step_6")
    assert ck.resolve_resume_path(str(tmp_path / "step_3"), "unused") == str(tmp_path / "step_3")
    (tmp_path / ".step_9.tmp").mkdir()
    with pytest.raises(ck.CheckpointError, match="interrupted"):
        ck.resolve_resume_path(str(tmp_path / ".step_9.tmp"), "unused")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ck.CheckpointError, match="not a complete checkpoint"):
        ck.resolve_resume_path(str(tmp_path / "empty"), "unused")


def test_optimizer_without_state_is_rejected(tmp_path):
    model = make_model(0)
    opt, sched = make_optim(model)
    with pytest.raises(ck.CheckpointError, match="no state yet"):
        save_at(tmp_path, 0, model, opt, sched, None)
    assert opt.state == {}  # and nothing was initialised behind our back
    # A weights-only checkpoint is fine.
    path = ck.save_checkpoint(
        str(tmp_path), 0, model=model, optimizer=None, lr_scheduler=None, dataloader=None
    )
    model2 = make_model(1)
    ck.load_checkpoint(path, model=model2, optimizer=None, lr_scheduler=None, dataloader=None)
    assert_state_equal(model.state_dict(), model2.state_dict())


def test_bad_fault_inject_value_is_an_error(tmp_path, monkeypatch):
    model = make_model(0)
    for bad in ("explode:3", "kill_during_save:x"):
        monkeypatch.setenv(ck.FAULT_INJECT_ENV, bad)
        with pytest.raises(ValueError, match="kill_during_save"):
            ck.save_checkpoint(
                str(tmp_path), 1, model=model, optimizer=None, lr_scheduler=None, dataloader=None
            )
    assert not (tmp_path / "step_1").exists()
    # The trainer's own fault hook shares the variable and must not disturb saving.
    monkeypatch.setenv(ck.FAULT_INJECT_ENV, "exit_at_step:3")
    ck.save_checkpoint(
        str(tmp_path), 1, model=model, optimizer=None, lr_scheduler=None, dataloader=None
    )
    assert ck.latest_checkpoint(str(tmp_path)) == str(tmp_path / "step_1")


_KILL_SCRIPT = textwrap.dedent(
    """
    import sys, torch, torch.nn as nn
    from hyper_parallel.runtime import checkpoint as ck
    out = sys.argv[1]
    model = nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 4)).sum().backward(); opt.step()
    for step in (2, 4):
        ck.save_checkpoint(out, step, model=model, optimizer=opt, lr_scheduler=None, dataloader=None,
                           extra={"epoch": 0}, async_save=sys.argv[2] == "async")
        ck.wait_async_save()
    print("UNREACHABLE")
    """
)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_fault_injected_kill_during_save_leaves_no_step_dir(tmp_path, mode):
    env = dict(os.environ, **{ck.FAULT_INJECT_ENV: "kill_during_save:4"})
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_SCRIPT, str(tmp_path), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == ck.FAULT_EXIT_CODE, proc.stderr
    assert "UNREACHABLE" not in proc.stdout
    assert not (tmp_path / "step_4").exists()
    assert (tmp_path / ".step_4.tmp" / ".metadata").exists()  # files were written before the kill
    assert ck.latest_checkpoint(str(tmp_path)) == str(tmp_path / "step_2")
    with pytest.raises(ck.CheckpointError):
        ck.resolve_resume_path(str(tmp_path / ".step_4.tmp"), str(tmp_path))

    # The next save of that step clears the leftover and completes.
    model = make_model(0)
    opt, sched = make_optim(model)
    train_steps(model, opt, sched, iter(make_loader(make_dataset())), 1)
    save_at(tmp_path, 4, model, opt, sched, None)
    assert sorted(os.listdir(tmp_path)) == ["step_2", "step_4"]


def test_async_save_snapshots_state_before_returning(tmp_path):
    model = make_model(0)
    opt, sched = make_optim(model)
    dl = make_loader(make_dataset())
    it = iter(dl)
    train_steps(model, opt, sched, it, 2)
    snapshot = copy.deepcopy(model.state_dict())
    opt_snapshot = copy.deepcopy(opt.state_dict())
    path = save_at(tmp_path, 2, model, opt, sched, dl, async_save=True)
    assert ck.async_save_in_flight()
    # Training goes on while the save runs: in-place updates must not leak into the checkpoint.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1000.0)
    train_steps(model, opt, sched, it, 2)
    assert ck.wait_async_save() == path
    assert not ck.async_save_in_flight()
    assert sorted(os.listdir(tmp_path)) == ["step_2"]

    model2 = make_model(1)
    opt2, sched2 = make_optim(model2)
    ck.load_checkpoint(
        path,
        model=model2,
        optimizer=opt2,
        lr_scheduler=sched2,
        dataloader=make_loader(make_dataset()),
    )
    assert_state_equal(snapshot, model2.state_dict())
    assert_state_equal(opt_snapshot, opt2.state_dict())


def test_async_saves_are_serialised(tmp_path):
    model = make_model(0)
    opt, sched = make_optim(model)
    it = iter(make_loader(make_dataset()))
    for step in (1, 2, 3):
        train_steps(model, opt, sched, it, 1)
        save_at(tmp_path, step, model, opt, sched, None, async_save=True)
    # Each save waited for the previous one; only the last can still be running.
    assert (tmp_path / "step_1").is_dir() and (tmp_path / "step_2").is_dir()
    ck.wait_async_save()
    assert sorted(os.listdir(tmp_path)) == ["step_1", "step_2", "step_3"]


def test_resave_of_same_step_replaces_it(tmp_path):
    model = make_model(0)
    opt, sched = make_optim(model)
    it = iter(make_loader(make_dataset()))
    train_steps(model, opt, sched, it, 1)
    save_at(tmp_path, 5, model, opt, sched, None)
    train_steps(model, opt, sched, it, 1)
    save_at(tmp_path, 5, model, opt, sched, None)
    assert sorted(os.listdir(tmp_path)) == ["step_5"]
    model2 = make_model(3)
    ck.load_checkpoint(
        str(tmp_path / "step_5"), model=model2, optimizer=None, lr_scheduler=None, dataloader=None
    )
    assert_state_equal(model.state_dict(), model2.state_dict())


# ---------------------------------------------------------------------------------------------
# HF export
# ---------------------------------------------------------------------------------------------


class PrefixAdapter:
    """Fake state-dict adapter: HF names get a ``model.`` prefix."""

    @staticmethod
    def to_hf(state_dict, config):
        assert config == {"fake": "config"}
        return {f"model.{k}": v for k, v in state_dict.items()}


def config_writer(path, config, dtype):
    """``config.json`` of the fake model (the export writes the weights itself)."""
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)


def test_export_hf_weights_strips_wrapper_infixes(tmp_path, monkeypatch):
    from safetensors.torch import load_file
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    monkeypatch.setattr(ck.hf_export, "_hf_config_writer", lambda: config_writer)
    model = make_model(0)
    model[0] = checkpoint_wrapper(model[0])
    assert any("_checkpoint_wrapped_module" in n for n, _ in model.named_parameters())
    target = tmp_path / "step_1" / "hf_ckpt"
    assert ck.export_hf_weights(model, PrefixAdapter, {"fake": "config"}, str(target)) == str(
        target
    )
    assert sorted(os.listdir(tmp_path / "step_1")) == ["hf_ckpt"]  # no temporary dir left
    tensors = load_file(str(target / "model.safetensors"))
    assert sorted(tensors) == ["model.0.bias", "model.0.weight", "model.3.bias", "model.3.weight"]
    assert torch.equal(
        tensors["model.0.weight"], model[0]._checkpoint_wrapped_module.weight.detach()
    )


def test_hf_export_strips_the_same_wrapper_infixes_as_the_parallelize_code(tmp_path, monkeypatch):
    """One list of wrapper infixes (hyper_parallel.utils.module_names): an FSDP1-style
    ``_fsdp_wrapped_module`` (once missing from the export's own list) is removed as well."""
    from safetensors.torch import load_file

    from hyper_parallel.models.qwen3_5 import parallelize

    assert parallelize.strip_wrapper_prefixes is strip_wrapper_prefixes

    class Wrapped(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self._fsdp_wrapped_module = inner

    model = nn.Sequential(Wrapped(nn.Linear(2, 2)))
    monkeypatch.setattr(ck.hf_export, "_hf_config_writer", lambda: config_writer)
    ck.export_hf_weights(model, PrefixAdapter, {"fake": "config"}, str(tmp_path / "hf"))
    tensors = load_file(str(tmp_path / "hf" / "model.safetensors"))
    assert sorted(tensors) == ["model.0.bias", "model.0.weight"]


def test_export_hf_weights_with_the_qwen3_5_adapter_round_trips(tmp_path):
    """The real path: AC-wrapped Qwen3.5 layers, the real adapter class and HF writer."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    from hyper_parallel.models.qwen3_5.configuration import Qwen3_5Config
    from hyper_parallel.models.qwen3_5.hf_io import load_hf_checkpoint
    from hyper_parallel.models.qwen3_5.model import Qwen3_5ForCausalLM
    from hyper_parallel.models.qwen3_5.state_dict_adapter import Qwen3_5StateDictAdapter

    config = Qwen3_5Config(
        vocab_size=97,
        hidden_size=48,
        intermediate_size=80,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        partial_rotary_factor=0.5,
        mrope_section=[2, 2, 0],
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=8,
        linear_value_head_dim=12,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = Qwen3_5ForCausalLM(config)
    for i, layer in enumerate(model.model.layers):
        model.model.layers[i] = checkpoint_wrapper(layer)
    reference = {
        strip_wrapper_prefixes(n): p.detach().clone() for n, p in model.named_parameters()
    }

    target = tmp_path / "step_3" / "hf_ckpt"
    ck.export_hf_weights(model, Qwen3_5StateDictAdapter, config, str(target))
    assert (target / "model.safetensors").is_file() and (target / "config.json").is_file()
    hf = load_hf_checkpoint(str(target))
    assert all(k.startswith(("model.language_model.", "lm_head.")) for k in hf)
    back = Qwen3_5StateDictAdapter.from_hf(hf, config)
    for name, value in reference.items():
        assert torch.equal(back[name], value), name


def test_export_hf_weights_requires_an_adapter(tmp_path):
    with pytest.raises(ValueError, match="state_dict_adapter"):
        ck.export_hf_weights(make_model(0), None, None, str(tmp_path / "hf"))


# ---------------------------------------------------------------------------------------------
# 2 ranks, FSDP2 (torchrun, gloo)
# ---------------------------------------------------------------------------------------------


def _fsdp_worker(out_dir: str) -> None:
    """torchrun worker: FSDP2 MLP, save at step 2, continue; a fresh model resumes bit-exactly."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.utils.data.distributed import DistributedSampler

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    ds = make_dataset()

    def build(seed):
        model = make_model(seed)
        fully_shard(model[0], mesh=mesh)
        fully_shard(model[3], mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt, sched = make_optim(model)
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=3)
        return model, opt, sched, make_loader(ds, sampler)

    torch.manual_seed(100 + rank)
    model, opt, sched, dl = build(0)
    it = iter(dl)
    train_steps(model, opt, sched, it, 2)
    path = save_at(out_dir, 2, model, opt, sched, dl)
    expected = train_steps(model, opt, sched, it, 3)
    # An async save over the dedicated gloo group, while training continues.
    save_at(out_dir, 5, model, opt, sched, dl, async_save=True)
    train_steps(model, opt, sched, it, 1)
    ck.wait_async_save()

    torch.manual_seed(999)
    model2, opt2, sched2, dl2 = build(7)
    extra = ck.load_checkpoint(
        path, model=model2, optimizer=opt2, lr_scheduler=sched2, dataloader=dl2
    )
    resumed = train_steps(model2, opt2, sched2, iter(dl2), 3)

    qwen_config_writer = ck.hf_export._hf_config_writer
    ck.hf_export._hf_config_writer = lambda: config_writer  # the real one: Qwen3.5 configs
    ck.export_hf_weights(
        model2, PrefixAdapter, {"fake": "config"}, os.path.join(out_dir, "step_5", "hf_ckpt")
    )
    ck.hf_export._hf_config_writer = qwen_config_writer
    _export_fsdp_qwen(os.path.join(out_dir, "qwen"), mesh)
    local_shape = tuple(model2[0].weight.to_local().shape)
    with open(os.path.join(out_dir, f"result_rank{rank}.json"), "w") as f:
        json.dump(
            {"expected": expected, "resumed": resumed, "extra": extra, "local_shape": local_shape},
            f,
        )
    dist.destroy_process_group()


#: The FSDP2 Qwen3.5's Hugging Face files (the tied tiny flavor is 0.5 MB).
QWEN_SHARD_BYTES = 30_000


def _export_fsdp_qwen(folder: str, mesh) -> None:
    """A tied tiny Qwen3.5, every layer and the root sharded over the 2 ranks (the tied
    embedding and head one DTensor), saved (DCP: the reference) and exported in 30 KB files."""
    from torch.distributed.fsdp import fully_shard

    from hyper_parallel.models.qwen3_5.configuration import FLAVORS
    from hyper_parallel.models.qwen3_5.model import Qwen3_5ForCausalLM
    from hyper_parallel.models.qwen3_5.state_dict_adapter import Qwen3_5StateDictAdapter

    config = FLAVORS["tiny"].replace(tie_word_embeddings=True)
    torch.manual_seed(21)
    model = Qwen3_5ForCausalLM(config)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    path = ck.save_checkpoint(folder, 1, model=model, optimizer=None, lr_scheduler=None,
                              dataloader=None)
    ck.export_hf_weights(model, Qwen3_5StateDictAdapter, config,
                         os.path.join(path, ck.HF_SUBDIR), max_shard_size=QWEN_SHARD_BYTES)


@pytest.mark.slow  # a torchrun job: ~10 s alone, more on a busy 2-core machine
def test_fsdp2_two_ranks_round_trip_async_and_reshard(tmp_path):
    from safetensors.torch import load_file

    spawn_ranks(os.path.abspath(__file__), [str(tmp_path)], nproc=2, timeout=300)

    results = [json.loads((tmp_path / f"result_rank{r}.json").read_text()) for r in range(2)]
    for r, res in enumerate(results):
        assert res["resumed"] == res["expected"], f"rank {r}"
        assert res["extra"]["world_size"] == 2 and res["extra"]["global_step"] == 2
        assert res["local_shape"] == [8, 6]  # really sharded: 16 rows over 2 ranks
    assert results[0]["expected"] != results[1]["expected"]  # ranks saw different data
    for step in (2, 5):
        files = set(os.listdir(tmp_path / f"step_{step}"))
        assert {
            "rng_rank0.pt",
            "rng_rank1.pt",
            "dataloader_rank0.pt",
            "dataloader_rank1.pt",
        } <= files
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]

    # Reshard: the 2-rank FSDP checkpoint loads into one unsharded process; the weights equal the
    # full (gathered) weights that the HF export of the resumed model wrote at step 5.
    hf = load_file(str(tmp_path / "step_5" / "hf_ckpt" / "model.safetensors"))
    plain = make_model(11)
    ck.load_checkpoint(
        str(tmp_path / "step_5"), model=plain, optimizer=None, lr_scheduler=None, dataloader=None
    )
    step5 = plain.state_dict()
    assert sorted(hf) == sorted(f"model.{k}" for k in step5)
    # The resumed model trained 3 steps from step 2, the original 3 (+1) from step 2 too: the state
    # at step 5 of the original (saved async) equals the resumed model's state (exported).
    for k, v in step5.items():
        assert torch.equal(v, hf[f"model.{k}"]), k

    # The FSDP2 Qwen3.5: sharded files, the saved weights, transformers' logits of them.
    from tests.helpers.hf_export_check import assert_export_is_the_model

    step_1 = tmp_path / "qwen" / "step_1"
    result = assert_export_is_the_model(step_1 / "hf_ckpt", step_1,
                                        max_shard_bytes=QWEN_SHARD_BYTES)
    assert result["files"] >= 10, result  # 0.5 MB in files of at most 30 KB


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    _fsdp_worker(sys.argv[1])
    exit_now(0)
