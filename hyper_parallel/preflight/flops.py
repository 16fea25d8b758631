"""Training FLOPs per token of a Qwen3.5 decoder, and the step-time range they give.

A token's forward is 2 FLOPs per parameter it multiplies by (the dense weights, the lm head,
and of the routed experts only the ``top-k / experts`` share a token reaches; not the embedding
table, a lookup), plus what its mixers do with the sequence: causal attention ``2 x 2 x heads x
head_dim x seq / 2`` per full-attention layer, and the Gated DeltaNet's state read and update,
``2 x 2 x heads x key_dim x value_dim`` per linear-attention layer. The backward is twice the
forward: 3x in all (activation recomputation's extra forward is not counted: it is not useful
work, so it shows in the MFU, as PaLM's MFU convention has it).
"""

from __future__ import annotations

from typing import Any


def flops_per_token(model: Any, model_config: Any, seq_len: int) -> float:
    """Training FLOPs of one token (forward + backward) of ``model`` (built on any device,
    ``meta`` included, unsharded) at sequence length ``seq_len``."""
    matmul = 0.0
    experts = getattr(model_config, "num_experts", 0)
    share = model_config.num_experts_per_tok / experts if experts else 1.0
    embedding = getattr(getattr(model, "model", model), "embed_tokens", None)
    skip = {id(p) for p in embedding.parameters()} if embedding is not None else set()
    tied = bool(getattr(model_config, "tie_word_embeddings", False))
    for name, p in model.named_parameters(remove_duplicate=False):
        if p.dim() < 2 or (id(p) in skip and not name.startswith("lm_head")):
            continue
        routed = ".experts." in f".{name}."
        matmul += p.numel() * (share if routed else 1.0)
    if tied and "lm_head.weight" not in dict(model.named_parameters(remove_duplicate=False)):
        matmul += embedding.weight.numel()
    c = model_config
    full = sum(t == "full_attention" for t in c.layer_types)
    linear = len(c.layer_types) - full
    attention = 2 * 2 * c.num_attention_heads * c.head_dim * seq_len / 2 * full
    delta = 2 * 2 * c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim
    forward = 2 * matmul + attention + delta * linear
    return 3 * forward


#: The model FLOPs utilization range a step-time estimate assumes: what bf16 FSDP training of
#: dense and MoE decoders reaches on Hopper in torchtitan's and Megatron's published runs.
MFU_RANGE = (0.25, 0.45)


def step_seconds(flops_token: float, tokens_per_step: int, world: int,
                 peak_tflops: float) -> tuple[float, float] | None:
    """The step time at :data:`MFU_RANGE` (fastest, slowest), or ``None`` without a peak."""
    if not peak_tflops or not world or not flops_token:
        return None
    work = flops_token * tokens_per_step / (world * peak_tflops * 1e12)
    return work / MFU_RANGE[1], work / MFU_RANGE[0]


__all__ = ["MFU_RANGE", "flops_per_token", "step_seconds"]
