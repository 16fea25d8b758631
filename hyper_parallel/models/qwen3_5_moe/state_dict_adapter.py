"""Convert between the Qwen3.5 MoE state dict and Hugging Face checkpoints.

Everything outside the experts is the dense model's conversion
(:class:`~hyper_parallel.models.qwen3_5.state_dict_adapter.Qwen3_5StateDictAdapter`: the
``model.language_model.`` prefix, the fused Gated DeltaNet projections, dropped vision / MTP
weights, truncated layers). The experts come in two layouts, both accepted on load:

* per expert -- ``mlp.experts.{j}.{gate,up,down}_proj.weight`` (``[I, H]``, ``[I, H]``,
  ``[H, I]``): what the published checkpoints hold and what transformers' ``save_pretrained``
  writes (it un-fuses on save);
* fused -- ``mlp.experts.gate_up_proj`` ``[E, 2I, H]`` (gate rows first) and
  ``mlp.experts.down_proj`` ``[E, H, I]``: transformers' in-memory layout, and ours.

Export writes the per-expert layout under ``model.language_model.``, as the published
checkpoints are, which ``Qwen3_5MoeForCausalLM.from_pretrained`` fuses back. The expert bias
(``mlp.gate.expert_bias``, auxiliary-loss-free balancing) has no place in Hugging Face's
architecture: it is left out of an export (a warning says so when it is not zero, because the
exported model then routes without it) and zeros are filled in on import.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

import torch

from hyper_parallel.models.qwen3_5.state_dict_adapter import (
    Qwen3_5StateDictAdapter,
    _full,
    check_keys_match,
)

from .configuration import Qwen3_5MoeConfig

logger = logging.getLogger(__name__)

__all__ = ["Qwen3_5MoeStateDictAdapter", "expected_keys"]

_PER_EXPERT = re.compile(r"^(?P<base>.*\.mlp\.experts)\.(?P<j>\d+)\.(?P<proj>gate|up|down)_proj\.weight$")
_FUSED_GATE_UP = ".mlp.experts.gate_up_proj"
_FUSED_DOWN = ".mlp.experts.down_proj"
_EXPERT_BIAS = ".mlp.gate.expert_bias"
_ROUTER = ".mlp.gate.weight"


def expected_keys(config: Qwen3_5MoeConfig) -> list[str]:
    """Our state-dict keys for ``config`` (built on the meta device, so free for any size)."""
    from .model import Qwen3_5MoeForCausalLM  # local import: the model imports nothing from here

    with torch.device("meta"):
        model = Qwen3_5MoeForCausalLM(config)
    return list(model.state_dict().keys())


def _fuse_experts(hf: Mapping[str, torch.Tensor], num_experts: int) -> dict[str, torch.Tensor]:
    """``hf`` with every layer's per-expert weights fused into the two 3-D tensors."""
    out: dict[str, torch.Tensor] = {}
    groups: dict[str, dict[tuple[int, str], torch.Tensor]] = {}
    for key, value in hf.items():
        match = _PER_EXPERT.match(key)
        if match is None:
            out[key] = value
            continue
        groups.setdefault(match["base"], {})[(int(match["j"]), match["proj"])] = value
    for base, parts in groups.items():
        missing = [
            f"{base}.{j}.{proj}_proj.weight"
            for j in range(num_experts)
            for proj in ("gate", "up", "down")
            if (j, proj) not in parts
        ]
        extra = sorted({j for j, _ in parts if j >= num_experts})
        if missing or extra:
            raise KeyError(
                f"from_hf: the experts under {base!r} do not match num_experts={num_experts}: "
                f"missing {missing[:6]}{'...' if len(missing) > 6 else ''}"
                f"{f', unexpected experts {extra[:6]}' if extra else ''}"
            )
        out[base + ".gate_up_proj"] = torch.stack(
            [torch.cat([parts[(j, "gate")], parts[(j, "up")]], dim=0) for j in range(num_experts)]
        )
        out[base + ".down_proj"] = torch.stack([parts[(j, "down")] for j in range(num_experts)])
    return out


def _split_experts(hf: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``hf`` with every fused expert tensor written out per expert (the published layout)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in hf.items():
        if key.endswith(_FUSED_GATE_UP):
            base = key[: -len("gate_up_proj")]
            for j, weight in enumerate(value):
                gate, up = weight.chunk(2, dim=0)
                out[f"{base}{j}.gate_proj.weight"] = gate
                out[f"{base}{j}.up_proj.weight"] = up
        elif key.endswith(_FUSED_DOWN):
            base = key[: -len("down_proj")]
            for j, weight in enumerate(value):
                out[f"{base}{j}.down_proj.weight"] = weight
        else:
            out[key] = value
    return out


class Qwen3_5MoeStateDictAdapter(Qwen3_5StateDictAdapter):
    """``to_hf`` / ``from_hf`` between ``Qwen3_5MoeForCausalLM`` and HF Qwen3.5 MoE checkpoints
    (see the module docstring). Static like the dense adapter's; the engine builds an instance
    with the run's model config and ``hf_assets_path``."""

    @staticmethod
    def to_hf(
        state_dict: Mapping[str, torch.Tensor], config: Qwen3_5MoeConfig
    ) -> dict[str, torch.Tensor]:
        """Our keys -> HF keys: the dense conversion, per-expert weights, no expert bias."""
        sd = {}
        for key, value in state_dict.items():
            if key.endswith(_EXPERT_BIAS):
                bias = _full(value)
                # A meta tensor has no values: the streamed export plans its files from
                # shapes (to_hf on meta tensors), and warns when it converts the real one.
                if not bias.is_meta and bool(torch.any(bias != 0)):
                    logger.warning(
                        "%s is not zero: Hugging Face's Qwen3.5 MoE has no expert bias, so the "
                        "exported model routes without it (moe.load_balance_coeff trained it)",
                        key,
                    )
                continue
            sd[key] = value
        return _split_experts(Qwen3_5StateDictAdapter.to_hf(sd, config))

    @staticmethod
    def from_hf(
        hf_state_dict: Mapping[str, torch.Tensor],
        config: Qwen3_5MoeConfig,
        strict: bool = True,
        dtype: torch.dtype | None = None,
    ) -> dict[str, torch.Tensor]:
        """HF keys (either expert layout, either prefix) -> our keys; the expert bias is zeros.

        ``strict`` (default) raises ``KeyError`` listing unexpected and missing keys against
        ``config``; ``dtype`` optionally casts floating tensors."""
        fused = _fuse_experts(hf_state_dict, config.num_experts)
        out = Qwen3_5StateDictAdapter.from_hf(fused, config, strict=False, dtype=dtype)
        for key in list(out):
            if key.endswith(_ROUTER):
                bias_key = key[: -len(_ROUTER)] + _EXPERT_BIAS
                out.setdefault(bias_key, torch.zeros(config.num_experts, dtype=torch.float32))
        if strict:
            check_keys_match(out, expected_keys(config))
        return out

