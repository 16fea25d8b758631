"""The streamed Hugging Face export on one process: its file plan, its safetensors writer, its
setting, and the folder it writes -- sharded as ``save_pretrained`` shards, loaded by
transformers with the model's logits, dense and MoE.

The layouts (FSDP 2, EP, TP, PP) are exported by the torchrun jobs that train on them:
``tests/torch/ut/trainer/test_checkpoint.py`` (FSDP 2, 30 KB files),
``tests/torch/st/qwen3_5/test_pipeline.py`` (PP 2 and 4, tied) and
``tests/torch/st/qwen3_5/test_moe_layouts.py`` (EP, TP, PP x EP, 100 KB files).
"""

from __future__ import annotations

import inspect
import json
import weakref

import pytest
import torch

from hyper_parallel.components.checkpoint import CheckpointManager
from hyper_parallel.runtime import checkpoint as ck
from hyper_parallel.runtime.checkpoint import hf_export
from hyper_parallel.runtime.checkpoint.hf_plan import TensorSpec, UnitSpec, plan_export
from hyper_parallel.runtime.checkpoint.safetensors_stream import (
    StreamedSafetensorsFile,
    dtype_code,
)
from hyper_parallel.utils.errors import ConfigFieldError
from hyper_parallel.utils.sizes import HF_DEFAULT_MAX_SHARD_SIZE, parse_byte_size
from tests.helpers.hf_export_check import assert_export_is_the_model, check_layout

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _dense(tie: bool = False):
    from hyper_parallel.models.qwen3_5.configuration import FLAVORS
    from hyper_parallel.models.qwen3_5.model import Qwen3_5ForCausalLM
    from hyper_parallel.models.qwen3_5.state_dict_adapter import Qwen3_5StateDictAdapter

    config = FLAVORS["tiny"].replace(tie_word_embeddings=tie)
    torch.manual_seed(3)
    return Qwen3_5ForCausalLM(config), Qwen3_5StateDictAdapter, config


def _moe():
    from hyper_parallel.models.qwen3_5_moe.configuration import FLAVORS
    from hyper_parallel.models.qwen3_5_moe.model import Qwen3_5MoeForCausalLM
    from hyper_parallel.models.qwen3_5_moe.state_dict_adapter import Qwen3_5MoeStateDictAdapter

    config = FLAVORS["debugmodel"].replace(num_hidden_layers=2, full_attention_interval=2)
    torch.manual_seed(3)
    model = Qwen3_5MoeForCausalLM(config)
    model.init_weights()
    return model, Qwen3_5MoeStateDictAdapter, config


MODELS = {"dense": _dense, "dense tied": lambda: _dense(tie=True), "moe": _moe}


# ------------------------------------------------------------------------ the folder
@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("shard", ["20KB", HF_DEFAULT_MAX_SHARD_SIZE])
def test_export_is_save_pretrained_layout_and_transformers_logits(tmp_path, kind, shard):
    """Small files: ``model-0000i-of-0000N`` and the index; the default: ``model.safetensors``.
    Either way the checkpoint's weights, and transformers' logits equal ours."""
    model, adapter, config = MODELS[kind]()
    step = ck.save_checkpoint(str(tmp_path), 1, model=model, optimizer=None, lr_scheduler=None,
                              dataloader=None)
    target = ck.export_hf_weights(model, adapter, config, f"{step}/hf_ckpt", max_shard_size=shard)
    result = assert_export_is_the_model(target, step, max_shard_bytes=parse_byte_size(shard))
    if shard == HF_DEFAULT_MAX_SHARD_SIZE:
        assert result["files"] == 1
    else:
        # At least a file per tensor over 20 KB and enough 20 KB files for the rest.
        sizes = [t.numel() * t.element_size()
                 for t in check_layout(target, parse_byte_size(shard)).values()]
        small = sum(s for s in sizes if s <= 20_000)
        assert result["files"] >= sum(s > 20_000 for s in sizes) + -(-small // 20_000) > 2
    assert json.loads((tmp_path / "step_1" / "hf_ckpt" / "config.json").read_text())[
        "dtype"] == "float32"
    assert sorted(p.name for p in tmp_path.joinpath("step_1").iterdir() if p.name.startswith(
        ".")) == [".metadata"]  # no temporary folder left


def test_file_boundaries_match_transformers_file_count(tmp_path):
    """transformers' own ``save_pretrained`` of the loaded export cuts as many files of the
    same total size (its order of tensors differs, so not the same ones)."""
    import transformers

    model, adapter, config = _dense()
    ours = ck.export_hf_weights(model, adapter, config, str(tmp_path / "ours"),
                                max_shard_size="100KB")
    hf = transformers.AutoModelForCausalLM.from_pretrained(ours)
    hf.save_pretrained(tmp_path / "theirs", max_shard_size="100KB")
    index = {n: json.loads((tmp_path / n / "model.safetensors.index.json").read_text())
             for n in ("ours", "theirs")}
    assert index["ours"]["metadata"] == index["theirs"]["metadata"]
    assert sorted(index["ours"]["weight_map"]) == sorted(index["theirs"]["weight_map"])
    assert (len(set(index["ours"]["weight_map"].values()))
            == len(set(index["theirs"]["weight_map"].values())))


def test_the_writer_holds_one_unit_at_a_time(tmp_path, monkeypatch):
    """What the exporter keeps alive while it writes is one unit's tensors (a decoder layer),
    never the model: every gathered tensor is tracked until it is freed."""
    model, adapter, config = _dense()
    alive: dict[int, int] = {}
    peak = [0]
    gathered = hf_export._gathered

    def tracked(tensor, keep):
        out = gathered(tensor, keep)
        key = id(out)
        alive[key] = out.numel() * out.element_size()
        weakref.finalize(out, alive.pop, key, None)
        peak[0] = max(peak[0], sum(alive.values()))
        return out

    monkeypatch.setattr(hf_export, "_gathered", tracked)
    ck.export_hf_weights(model, adapter, config, str(tmp_path / "hf"), max_shard_size="1GB")
    units = {}
    for name, p in model.state_dict().items():
        unit = hf_export._unit_of(name, model.pipeline_units())
        units[unit] = units.get(unit, 0) + p.numel() * p.element_size()
    model_bytes = sum(units.values())
    assert peak[0] <= max(units.values()) < model_bytes / 2, (peak[0], units)


def test_the_writer_thread_hands_its_error_to_the_next_unit(tmp_path, monkeypatch):
    """Files written in the background (other ranks): a unit that fails to write raises, with
    its own error, where the exporting thread hands over the next unit -- never a hang, never
    an export published without the file."""
    from hyper_parallel.runtime.checkpoint import safetensors_stream

    specs = [TensorSpec(f"t{i}", "F32", (2,)) for i in range(4)]
    plan = plan_export([UnitSpec("a", 0, tuple(specs[:2])), UnitSpec("b", 0, tuple(specs[2:]))],
                       16)
    original = safetensors_stream.StreamedSafetensorsFile.write

    def write(self, name, tensor):
        if name == "t1":
            raise OSError("injected: no space left on device")
        return original(self, name, tensor)

    monkeypatch.setattr(safetensors_stream.StreamedSafetensorsFile, "write", write)
    files = hf_export._ShardWriter(str(tmp_path), plan.files, background=True)
    files.submit([("t0", torch.zeros(2)), ("t1", torch.zeros(2))])
    with pytest.raises(OSError, match="no space left"):
        files.submit([("t2", torch.zeros(2)), ("t3", torch.zeros(2))])
    files.abort()
    monkeypatch.undo()
    files = hf_export._ShardWriter(str(tmp_path), plan.files, background=True)
    for unit in (specs[:2], specs[2:]):
        files.submit([(t.name, torch.full((2,), float(i))) for i, t in enumerate(unit)])
    files.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f.name for f in plan.files]


# ------------------------------------------------------------------------ the plan
def _unit(name, writer, *sizes):
    return UnitSpec(name, writer, tuple(TensorSpec(f"{name}.{i}", "F32", (s // 4,))
                                        for i, s in enumerate(sizes)))


def test_plan_cuts_files_greedily_in_order():
    plan = plan_export([_unit("a", 0, 40, 40), _unit("b", 0, 40, 200, 12), _unit("c", 0, 12)],
                       max_shard_bytes=100)
    files = [[t.name for t in f.tensors] for f in plan.files]
    # 40+40 fit; 40 would overflow: a new file; 200 is alone; 12 and 12 share the last.
    assert files == [["a.0", "a.1"], ["b.0"], ["b.1"], ["b.2", "c.0"]]
    assert [f.name for f in plan.files] == [f"model-0000{i}-of-00004.safetensors"
                                            for i in range(1, 5)]
    assert plan.index()["metadata"] == {"total_parameters": 86, "total_size": 344}
    assert plan.weight_map()["c.0"] == "model-00004-of-00004.safetensors"


def test_plan_starts_a_file_where_the_writer_changes_and_names_one_file_model_safetensors():
    assert [f.name for f in plan_export([_unit("a", 0, 8)], 100).files] == ["model.safetensors"]
    plan = plan_export([_unit("a", 0, 8), _unit("b", 1, 8), _unit("c", 1, 8)], 100)
    assert [(f.writer, len(f.tensors)) for f in plan.files] == [(0, 1), (1, 2)]
    assert plan.sharded and plan.files_of(1) == plan.files[1:]


def test_plan_refuses_a_name_two_units_convert_to():
    with pytest.raises(ck.CheckpointError, match="both convert to 'x.0'"):
        plan_export([_unit("x", 0, 4), UnitSpec("y", 0, (TensorSpec("x.0", "F32", (1,)),))], 100)


# ------------------------------------------------------------------------ the file writer
def test_streamed_file_is_read_by_safetensors(tmp_path):
    from safetensors.torch import load_file

    tensors = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3),
               "b": torch.tensor(1.5, dtype=torch.bfloat16),
               "c": torch.ones(3, 2).t(),  # not contiguous
               "d": torch.tensor([True, False]),
               "e": torch.zeros(0, 4)}
    specs = [TensorSpec(n, dtype_code(t.dtype), tuple(t.shape)) for n, t in tensors.items()]
    f = StreamedSafetensorsFile(str(tmp_path / "x.safetensors"), specs)
    for name, t in tensors.items():
        f.write(name, t)
    f.close()
    back = load_file(str(tmp_path / "x.safetensors"))
    for name, t in tensors.items():
        assert back[name].dtype == t.dtype and torch.equal(back[name], t), name


def test_streamed_file_refuses_what_its_header_does_not_say(tmp_path):
    spec = [TensorSpec("a", "F32", (2,)), TensorSpec("b", "F32", (1,))]
    f = StreamedSafetensorsFile(str(tmp_path / "x.safetensors"), spec)
    with pytest.raises(ck.CheckpointError, match="expects 'a' next, got 'b'"):
        f.write("b", torch.zeros(1))
    with pytest.raises(ck.CheckpointError, match=r"'a' is F32 \[3\], but the plan"):
        f.write("a", torch.zeros(3))
    f.write("a", torch.zeros(2))
    with pytest.raises(ck.CheckpointError, match="missing 1 tensors"):
        f.close()


def test_an_adapter_that_reads_values_is_refused_with_the_reason(tmp_path):
    class ReadsValues:
        @staticmethod
        def to_hf(state_dict, config):
            return {k: v for k, v in state_dict.items() if float(v.sum()) != 0}

    model, _, config = _dense()
    with pytest.raises(ck.CheckpointError, match="to_hf must accept meta tensors"):
        ck.export_hf_weights(model, ReadsValues, config, str(tmp_path / "hf"))
    assert not (tmp_path / "hf").exists()


# ------------------------------------------------------------------------ the settings
def test_default_shard_size_is_transformers_default():
    import transformers

    default = inspect.signature(transformers.PreTrainedModel.save_pretrained).parameters[
        "max_shard_size"].default
    assert CheckpointManager.Config().export_hf_max_shard_size == HF_DEFAULT_MAX_SHARD_SIZE
    assert parse_byte_size(HF_DEFAULT_MAX_SHARD_SIZE) == parse_byte_size(default)


@pytest.mark.parametrize("text, size", [("50GB", 50 * 10**9), ("500mb", 500 * 10**6),
                                        ("1.5KB", 1500), ("2GiB", 2 * 2**30), (" 3 TB ", 3e12)])
def test_sizes_as_transformers_writes_them(text, size):
    assert parse_byte_size(text) == size


@pytest.mark.parametrize("value, message", [
    ("5 gigs", "is not a size: write a positive number and a unit"),
    ("0KB", "less than one byte"),
    ("-1GB", "is not a size"),
])
def test_a_bad_shard_size_names_the_field_and_the_fix(value, message):
    with pytest.raises(ConfigFieldError, match=message) as info:
        CheckpointManager.Config(export_hf_max_shard_size=value)
    assert info.value.field == "export_hf_max_shard_size"
    assert "e.g. '50GB'" in str(info.value) or "less than one byte" in str(info.value)


def test_a_bad_policy_names_the_choices():
    with pytest.raises(ConfigFieldError, match="did you mean 'every_save'.*final, every_save"):
        CheckpointManager.Config(export_hf_policy="every_saves")


@pytest.mark.parametrize("field, value", [("export_hf_policy", "every_save"),
                                          ("export_hf_max_shard_size", "1GB"),
                                          ("export_hf_dtype", "bfloat16")])
def test_export_settings_without_an_export_are_refused(field, value):
    with pytest.raises(ConfigFieldError, match="has no effect while export_hf is false; set "
                                               "export_hf to true"):
        CheckpointManager.Config(export_hf=False, **{field: value})
    CheckpointManager.Config(export_hf=True, **{field: value})  # with the export: accepted


def test_a_bad_export_dtype_names_the_choices():
    with pytest.raises(ConfigFieldError, match="did you mean 'bfloat16'.*auto, float32, bfloat16"):
        CheckpointManager.Config(export_hf_dtype="bfloat")


# ------------------------------------------------------------------------ the dtype
def _bf16_source(folder, model, adapter, config):
    """A Hugging Face checkpoint of ``model`` in bf16, as the published ones are."""
    from hyper_parallel.models.qwen3_5 import hf_io

    state = adapter.to_hf(model.state_dict(), config)
    hf_io.save_hf_checkpoint({k: v.to(torch.bfloat16) for k, v in state.items()}, folder, config)
    return str(folder)


def _manager(folder, model, adapter, config, **settings):
    fields = {"folder": str(folder), "interval": 5, "export_hf": True} | settings
    source = fields.pop("source", None)
    return CheckpointManager(CheckpointManager.Config(**fields), model_parts=model,
                             sd_adapter=adapter, model_config=config, weights_source=source)


def _dtypes(folder):
    from safetensors import safe_open

    codes = set()
    for file in folder.glob("*.safetensors"):
        with safe_open(str(file), framework="pt") as f:
            codes |= {f.get_slice(k).get_dtype() for k in f.keys()}  # noqa: SIM118
    return codes, json.loads((folder / "config.json").read_text())["dtype"]


def test_the_export_is_written_in_the_source_checkpoints_dtype_or_the_asked_one(tmp_path):
    """``export_hf_dtype: auto`` writes a run from a bf16 checkpoint in bf16 (whatever the model
    trains in: fp32 here), a run without a Hugging Face source in the model's dtype (as before);
    a dtype asked for is written whatever the source."""
    model, adapter, config = _dense()
    source = _bf16_source(tmp_path / "published", model, adapter, config)
    cases = {"bf16 source": ({"source": source}, {"BF16"}, "bfloat16"),
             "no source": ({}, {"F32"}, "float32"),
             "float16 asked": ({"source": source, "export_hf_dtype": "float16"}, {"F16"},
                               "float16")}
    for name, (settings, codes, dtype) in cases.items():
        manager = _manager(tmp_path / name, model, adapter, config, **settings)
        manager.maybe_save(3, {}, end_of_training=True)
        folder = tmp_path / name / "step_3" / "hf_ckpt"
        assert _dtypes(folder) == (codes, dtype), name
    # The values are the model's, cast: the bf16 export is the source's bytes (made the same way).
    ours = check_layout(tmp_path / "bf16 source" / "step_3" / "hf_ckpt")
    theirs = check_layout(source)
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)


# ------------------------------------------------------------------------ a crash in the export
def _crash_after(monkeypatch, writes: int) -> None:
    """The export fails (as a killed process would stop) after ``writes`` tensors were written."""
    from hyper_parallel.runtime.checkpoint import safetensors_stream

    original = safetensors_stream.StreamedSafetensorsFile.write
    count = [0]

    def write(self, name, tensor):
        count[0] += 1
        if count[0] > writes:
            raise OSError("injected: the node went down during the export")
        return original(self, name, tensor)

    monkeypatch.setattr(safetensors_stream.StreamedSafetensorsFile, "write", write)


def _resumed(tmp_path, model, adapter, config):
    """A requeued job: a fresh manager resuming the newest checkpoint, at the last step."""
    manager = _manager(tmp_path, model, adapter, config, resume_latest=True,
                       export_hf_max_shard_size="50KB")
    assert manager.load()["global_step"] == 3
    manager.maybe_save(3, {}, end_of_training=True)
    return manager


def test_a_crash_during_the_final_export_is_redone_by_the_resumed_run(tmp_path, monkeypatch):
    """The job dies while it writes the final export: the checkpoint is saved, the export is
    not (only its hidden temporary folder). The requeued job resumes at the last step and
    writes the export; the one after it finds it finished and writes nothing."""
    model, adapter, config = _dense()
    _crash_after(monkeypatch, 5)
    first = _manager(tmp_path, model, adapter, config, export_hf_max_shard_size="50KB")
    with pytest.raises(OSError, match="injected"):
        first.maybe_save(3, {}, end_of_training=True)
    monkeypatch.undo()
    step = tmp_path / "step_3"
    assert ck.is_complete_checkpoint(str(step))
    assert not (step / "hf_ckpt").exists() and (step / ".hf_ckpt.tmp").is_dir()

    torch.manual_seed(0)
    for p in model.parameters():  # the requeued job's model holds what it loads, nothing else
        p.data.normal_()
    second = _resumed(tmp_path, model, adapter, config)
    assert second.exported == [str(step / "hf_ckpt")]
    assert hf_export.export_complete(str(step / "hf_ckpt"))
    assert_export_is_the_model(step / "hf_ckpt", step, max_shard_bytes=50_000, logits=False)
    assert not (step / ".hf_ckpt.tmp").exists()
    assert _resumed(tmp_path, model, adapter, config).exported == []


def test_a_damaged_final_export_is_redone_not_trusted(tmp_path):
    """An export whose file was cut short (a disk that lost what was not flushed) is not a
    finished one: the resumed run writes it again."""
    model, adapter, config = _dense()
    _manager(tmp_path, model, adapter, config,
             export_hf_max_shard_size="50KB").maybe_save(3, {}, end_of_training=True)
    export = tmp_path / "step_3" / "hf_ckpt"
    shard = sorted(export.glob("*.safetensors"))[1]
    whole = shard.read_bytes()
    shard.write_bytes(whole[: len(whole) // 2])
    assert _resumed(tmp_path, model, adapter, config).exported == [str(export)]
    assert shard.read_bytes() == whole
    shard.write_bytes(whole + b"\0")  # longer than its header says: not trusted either
    assert not hf_export.export_complete(str(export))


def test_checked_layout_catches_a_tensor_in_two_files(tmp_path):
    """The checker the layout tests rely on fails on a broken export (it can fail)."""
    model, adapter, config = _dense()
    target = ck.export_hf_weights(model, adapter, config, str(tmp_path / "hf"),
                                  max_shard_size="50KB")
    index_file = tmp_path / "hf" / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    name = next(iter(index["weight_map"]))
    index["weight_map"][name] = "model-00002-of-" + index["weight_map"][name][-17:]
    index_file.write_text(json.dumps(index))
    with pytest.raises(AssertionError, match="maps a tensor to another file"):
        check_layout(target)
