"""What every test of a Hugging Face export checks: the folder is what transformers'
``save_pretrained`` writes, it holds the trainer's weights, and transformers computes the
trainer's logits from it.

* :func:`check_layout` -- one ``model.safetensors``, or ``model-0000i-of-0000N.safetensors``
  files whose index names every tensor of every file exactly once (the right file, the right
  ``total_size`` and ``total_parameters``), each file within the shard size unless it holds a
  single larger tensor; returns every tensor.
* :func:`model_from_checkpoint` -- the trainer's model on one process, from the DCP checkpoint
  the export was made from (the ground truth: it reshards from any layout).
* :func:`assert_export_is_the_model` -- the export is ``to_hf`` of that model, bit for bit, and
  transformers' ``AutoModelForCausalLM`` loads it without a missing or unexpected key and
  computes that model's logits.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"
_SHARD = re.compile(r"^model-(\d{5})-of-(\d{5})\.safetensors$")
#: transformers' Gated DeltaNet (its torch fallback) rounds differently from ours: seen 6e-6.
LOGITS_ATOL = 1e-5


def check_layout(folder: str | Path, max_shard_bytes: int | None = None) -> dict[str, torch.Tensor]:
    """Every tensor of the export in ``folder``, after checking its files (module docstring)."""
    from safetensors import safe_open

    folder = Path(folder)
    weights = sorted(p.name for p in folder.glob("*.safetensors"))
    assert (folder / "config.json").is_file(), sorted(p.name for p in folder.iterdir())
    if weights == [SINGLE]:
        assert not (folder / INDEX).exists()
        files = {SINGLE: None}
    else:
        assert weights and all(_SHARD.match(w) for w in weights), weights
        count = int(_SHARD.match(weights[0]).group(2))
        assert weights == [f"model-{i:05d}-of-{count:05d}.safetensors"
                           for i in range(1, count + 1)], weights
        assert count > 1, "one file is model.safetensors, with no index"
        files = dict.fromkeys(weights)
    tensors: dict[str, torch.Tensor] = {}
    where: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for name in files:
        with safe_open(str(folder / name), framework="pt") as f:
            for key in f.keys():  # noqa: SIM118 - a safe_open handle is not iterable
                assert key not in tensors, f"{key} is in {where[key]} and in {name}"
                tensors[key], where[key] = f.get_tensor(key), name
        sizes[name] = sum(t.numel() * t.element_size() for k, t in tensors.items()
                          if where[k] == name)
        if max_shard_bytes is not None and len(files) > 1:
            alone = sum(1 for k in where if where[k] == name) == 1
            assert sizes[name] <= max_shard_bytes or alone, (name, sizes[name], max_shard_bytes)
    if len(files) > 1:
        index = json.loads((folder / INDEX).read_text())
        assert index["weight_map"] == where, "the index maps a tensor to another file"
        assert index["metadata"] == {
            "total_size": sum(sizes.values()),
            "total_parameters": sum(t.numel() for t in tensors.values()),
        }
    return tensors


def _config_and_classes(folder: Path) -> tuple[Any, Any, Any]:
    """Our config of the exported model (from its config.json), our model class, our adapter."""
    hf = json.loads((folder / "config.json").read_text())
    if hf["model_type"].startswith("qwen3_5_moe"):
        from hyper_parallel.models.qwen3_5_moe.configuration import Qwen3_5MoeConfig
        from hyper_parallel.models.qwen3_5_moe.model import Qwen3_5MoeForCausalLM
        from hyper_parallel.models.qwen3_5_moe.state_dict_adapter import (
            Qwen3_5MoeStateDictAdapter,
        )

        return (Qwen3_5MoeConfig.from_hf_dict(hf), Qwen3_5MoeForCausalLM,
                Qwen3_5MoeStateDictAdapter)
    from hyper_parallel.models.qwen3_5.configuration import Qwen3_5Config
    from hyper_parallel.models.qwen3_5.model import Qwen3_5ForCausalLM
    from hyper_parallel.models.qwen3_5.state_dict_adapter import Qwen3_5StateDictAdapter

    return Qwen3_5Config.from_hf_dict(hf), Qwen3_5ForCausalLM, Qwen3_5StateDictAdapter


def model_from_checkpoint(step_dir: str | Path, export: str | Path) -> tuple[Any, Any, Any]:
    """``(model, config, adapter)``: the model of ``export``'s config.json with the weights of
    the DCP checkpoint ``step_dir`` (one process, eval mode)."""
    from hyper_parallel.runtime import checkpoint as ck

    config, model_class, adapter = _config_and_classes(Path(export))
    model = model_class(config)
    ck.load_checkpoint(str(step_dir), model=model, optimizer=None, lr_scheduler=None,
                       dataloader=None)
    return model.eval(), config, adapter


def assert_export_is_the_model(export: str | Path, step_dir: str | Path, *,
                               max_shard_bytes: int | None = None,
                               logits: bool = True) -> dict[str, Any]:
    """The checks of the module docstring; returns what a test may print (file count, the
    logits' largest difference)."""
    import transformers

    export = Path(export)
    tensors = check_layout(export, max_shard_bytes)
    model, config, adapter = model_from_checkpoint(step_dir, export)
    expected = adapter.to_hf(model.state_dict(), config)
    assert sorted(tensors) == sorted(expected), sorted(set(tensors) ^ set(expected))
    for name, value in expected.items():
        assert torch.equal(tensors[name], value), name
    out = {"files": len(list(export.glob("*.safetensors")))}
    if not logits:
        return out
    # Hugging Face's MoE has no expert bias (the export leaves it out): ours routes without it.
    for name, buffer in model.named_buffers():
        if name.endswith("expert_bias"):
            buffer.zero_()
    kwargs = {"experts_implementation": "eager"} if "experts" in " ".join(tensors) else {}
    hf, info = transformers.AutoModelForCausalLM.from_pretrained(
        export, attn_implementation="sdpa", output_loading_info=True, **kwargs)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    ids = torch.randint(0, config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        ours = model(ids)
        theirs = hf.eval()(input_ids=ids, use_cache=False).logits
    out["max_logits_diff"] = (theirs - ours).abs().max().item()
    assert out["max_logits_diff"] <= LOGITS_ATOL, out
    return out


__all__ = ["LOGITS_ATOL", "assert_export_is_the_model", "check_layout", "model_from_checkpoint"]
