"""Convert between this model's state dict and Hugging Face Qwen3.5 checkpoints.

Our keys (``Qwen3_5ForCausalLM.state_dict()``) differ from HF only by prefix and inside
``linear_attn``, where HF fuses ``in_proj_qkv = cat(in_proj_q, in_proj_k, in_proj_v)`` and
``conv1d.weight = cat(conv_q_weight, conv_k_weight, conv_v_weight)`` (both on dim 0).

Load (``from_hf``) accepts both HF layouts:

* ``model.language_model.X`` (``Qwen3_5ForConditionalGeneration``, the published checkpoints);
* ``model.X`` (``Qwen3_5ForCausalLM``);

keeps ``model.visual.*`` (the vision tower, the same name here) when the config has a
``vision_config`` and drops it otherwise, drops ``mtp.*`` and ``model.mtp.*``, drops layers
``>= num_hidden_layers`` (truncated models), and synthesises ``lm_head.weight`` from the
embedding when tied and absent. (What is dropped is not lost: the Hugging Face export carries
the source checkpoint's tensors the model does not hold.)

Export (``to_hf``) writes the ``model.language_model.X`` layout plus ``lm_head.weight`` (and
``model.visual.X`` unchanged);
transformers' ``Qwen3_5ForCausalLM.from_pretrained`` strips ``language_model`` itself (its
``qwen3_5_text`` checkpoint-conversion rule), so the exported directory loads there and into
``Qwen3_5ForConditionalGeneration``-style tooling alike. With tied embeddings ``lm_head.weight`` is
omitted, as ``save_pretrained`` does (safetensors also refuses two names for one storage).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch
from torch.distributed.tensor import DTensor

from .configuration import Qwen3_5Config

HF_PREFIX = "model.language_model."
OUR_PREFIX = "model."
VISION_PREFIX = "model.visual."
LM_HEAD = "lm_head.weight"
EMBED = "model.embed_tokens.weight"
_DROPPED_PREFIXES = ("mtp.", "model.mtp.", "model.language_model.mtp.")
_VISION_PREFIXES = (VISION_PREFIX, "visual.")
_LAYER_RE = re.compile(r"^model\.layers\.(\d+)\.")
_SPLITS = {
    # fused HF suffix -> our (q, k, v) suffixes
    "linear_attn.in_proj_qkv.weight": (
        "linear_attn.in_proj_q.weight",
        "linear_attn.in_proj_k.weight",
        "linear_attn.in_proj_v.weight",
    ),
    "linear_attn.conv1d.weight": (
        "linear_attn.conv_q_weight",
        "linear_attn.conv_k_weight",
        "linear_attn.conv_v_weight",
    ),
}


def _full(t: torch.Tensor) -> torch.Tensor:
    # A DTensor must be gathered to be exported; this is a collective, so every rank must call.
    return t.full_tensor() if isinstance(t, DTensor) else t


def expected_keys(config: Qwen3_5Config) -> list[str]:
    """Our state-dict keys for ``config`` (built on the meta device, so free for any size)."""
    from .model import Qwen3_5ForCausalLM  # local import: model imports nothing from here

    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(config)
    return list(model.state_dict().keys())


class Qwen3_5StateDictAdapter:
    """``to_hf`` / ``from_hf`` between ``Qwen3_5ForCausalLM`` and HF Qwen3.5 checkpoints.

    The conversions are static (``Qwen3_5StateDictAdapter.to_hf(state_dict, config)``); the
    engine builds an instance with the run's model config and ``hf_assets_path``, which the Hugging Face export reads for the assets it copies next to the weights.
    """

    def __init__(self, model_config: Any = None, hf_assets_path: str | None = None) -> None:
        self.model_config = model_config
        self.hf_assets_path = hf_assets_path

    @staticmethod
    def to_hf(
        state_dict: Mapping[str, torch.Tensor], config: Qwen3_5Config
    ) -> dict[str, torch.Tensor]:
        """Our keys -> HF keys (``model.language_model.X``, fused GDN tensors, ``lm_head.weight``)."""
        sd = {k: _full(v) for k, v in state_dict.items()}
        out: dict[str, torch.Tensor] = {}
        consumed: set[str] = set()
        for key in sd:
            for fused, parts in _SPLITS.items():
                if key.endswith(parts[0]):
                    base = key[: -len(parts[0])]
                    names = [base + p for p in parts]
                    missing = [n for n in names if n not in sd]
                    if missing:
                        raise KeyError(f"to_hf: {key} present but {missing} missing.")
                    out[HF_PREFIX + base[len(OUR_PREFIX) :] + fused] = torch.cat(
                        [sd[n] for n in names], dim=0
                    )
                    consumed.update(names)
        for key, value in sd.items():
            if key in consumed:
                continue
            if key == LM_HEAD:
                if not config.tie_word_embeddings:
                    out[LM_HEAD] = value
            elif key.startswith(VISION_PREFIX):
                out[key] = value
            elif key.startswith(OUR_PREFIX):
                out[HF_PREFIX + key[len(OUR_PREFIX) :]] = value
            else:
                raise KeyError(f"to_hf: unexpected key {key!r} (not under 'model.' nor lm_head).")
        return out

    @staticmethod
    def carried(name: str, config: Qwen3_5Config) -> bool:
        """Whether the Hugging Face tensor ``name`` of a source checkpoint is one the model does
        not hold and an export carries unchanged: the MTP head, and the vision tower when the
        model is the text decoder alone. (Layers past ``num_hidden_layers`` are not carried: a
        truncated model is another model.)"""
        if name.startswith(_DROPPED_PREFIXES):
            return True
        return config.vision_config is None and name.startswith(_VISION_PREFIXES)

    @staticmethod
    def from_hf(
        hf_state_dict: Mapping[str, torch.Tensor],
        config: Qwen3_5Config,
        strict: bool = True,
        dtype: torch.dtype | None = None,
    ) -> dict[str, torch.Tensor]:
        """HF keys -> our keys (see the module docstring for what is accepted and dropped).

        ``strict`` (default) raises ``KeyError`` listing unexpected and missing keys against
        ``config``; ``dtype`` optionally casts floating tensors.
        """
        key_dim, value_dim = config.linear_key_dim, config.linear_value_dim
        out: dict[str, torch.Tensor] = {}
        for key, value in hf_state_dict.items():
            if key.startswith(_DROPPED_PREFIXES):
                continue
            if key.startswith(_VISION_PREFIXES):
                if config.vision_config is None:
                    continue
                out[VISION_PREFIX + key.split("visual.", 1)[1]] = _cast(value, dtype)
                continue
            if key.startswith(HF_PREFIX):
                key = OUR_PREFIX + key[len(HF_PREFIX) :]
            match = _LAYER_RE.match(key)
            if match and int(match.group(1)) >= config.num_hidden_layers:
                continue
            value = _cast(value, dtype)
            fused = next((f for f in _SPLITS if key.endswith(f)), None)
            if fused is None:
                out[key] = value
                continue
            sizes = [key_dim, key_dim, value_dim]
            if value.shape[0] != sum(sizes):
                raise ValueError(
                    f"from_hf: {key} has {value.shape[0]} rows but the config expects "
                    f"2*linear_key_dim + linear_value_dim = {sum(sizes)}; check "
                    "linear_num_key_heads / linear_num_value_heads / linear_*_head_dim."
                )
            base = key[: -len(fused)]
            for part, piece in zip(_SPLITS[fused], value.split(sizes, dim=0)):
                out[base + part] = piece
        if LM_HEAD not in out and config.tie_word_embeddings and EMBED in out:
            out[LM_HEAD] = out[EMBED]  # same tensor: loading copies it into the tied parameter
        if strict:
            check_keys_match(out, expected_keys(config))
        return out


def _cast(value: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    return value.to(dtype) if dtype is not None and value.is_floating_point() else value


def check_keys_match(state_dict: Mapping[str, Any], expected: list[str]) -> None:
    """A ``KeyError`` listing the unexpected and the missing keys (the first 20 of each) when
    ``state_dict`` does not hold exactly ``expected``."""
    unexpected = sorted(set(state_dict) - set(expected))
    missing = sorted(set(expected) - set(state_dict))
    if unexpected or missing:
        raise KeyError(
            "from_hf: checkpoint does not match the config. "
            f"unexpected={unexpected[:20]}{'...' if len(unexpected) > 20 else ''} "
            f"missing={missing[:20]}{'...' if len(missing) > 20 else ''}"
        )
