"""The rules of context parallelism for Qwen3.5, torch-free: which forms the
``parallelism.context_parallel_*`` fields select, and which head counts each form can split.

The forms themselves are :mod:`.context_parallel`'s. The model's config checks these rules
before anything is built (``Qwen3_5ModelConfig._check_parallelism``), and
``parallelize_qwen3_5_v2`` again for direct callers; each failure is a
:class:`~hyper_parallel.utils.errors.ConfigError` naming its field.
"""

from __future__ import annotations

import math
from typing import Any

from hyper_parallel.utils.choices import CP_LINEAR_ATTENTION_MODES
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.suggest import did_you_mean

__all__ = [
    "CP_DEGREE_FIELD",
    "CP_FIELDS",
    "check_context_parallel",
    "check_cp_heads",
    "context_parallel_modes",
    "cp_head_problems",
    "kv_repeats",
]

#: The recipe fields of context parallelism, besides the degree.
CP_FIELDS = {
    "ulysses_degree": "parallelism.context_parallel_ulysses_degree",
    "linear": "parallelism.context_parallel_linear_attention_mode",
    "async": "parallelism.context_parallel_async",
}
CP_DEGREE_FIELD = "parallelism.context_parallel_degree"


def context_parallel_modes(parallelism: Any, cp: int) -> tuple[str, str, bool] | None:
    """``(attention, linear, async)`` of ``parallelism``'s context-parallel fields for degree
    ``cp`` (:mod:`~hyper_parallel.models.qwen3_5.context_parallel`), None when ``cp`` is 1.

    ``context_parallel_ulysses_degree``: unset or ``cp`` -- Ulysses attention; 1 -- the
    all-gather form; anything between (the legacy hybrid) is refused. Each field set away from
    its default on a run without context parallelism is refused too (it would do nothing).
    Every refusal is a :class:`ConfigError` naming its field."""
    ulysses = getattr(parallelism, "context_parallel_ulysses_degree", None)
    linear = getattr(parallelism, "context_parallel_linear_attention_mode", "ulysses")
    async_comm = bool(getattr(parallelism, "context_parallel_async", False))
    if cp <= 1:
        for key, value, default in (("ulysses_degree", ulysses, None),
                                    ("linear", linear, "ulysses"), ("async", async_comm, False)):
            if value != default:
                raise ConfigError(
                    f"{value!r} does nothing without context parallelism ({CP_DEGREE_FIELD} is "
                    f"1); remove it or raise {CP_DEGREE_FIELD}",
                    path=CP_FIELDS[key],
                )
        return None
    if linear not in CP_LINEAR_ATTENTION_MODES:
        raise ConfigError(
            f"{linear!r} is not a Gated DeltaNet context-parallel mode"
            f"{did_you_mean(str(linear), CP_LINEAR_ATTENTION_MODES)}; choose one of: "
            f"{', '.join(CP_LINEAR_ATTENTION_MODES)}",
            path=CP_FIELDS["linear"],
        )
    if ulysses is None or ulysses == cp:
        attention = "ulysses"
    elif ulysses == 1:
        attention = "allgather"
    else:
        raise ConfigError(
            f"{ulysses}: the hybrid of Ulysses over {ulysses} ranks and K/V all-gather over "
            f"{cp // ulysses if ulysses and cp % ulysses == 0 else '?'} groups is not "
            f"implemented (it needs a causal mask per Ulysses group); use {cp} or unset "
            "(Ulysses: all-to-all over heads) or 1 (all-gather K/V)",
            path=CP_FIELDS["ulysses_degree"],
        )
    return attention, linear, async_comm


def check_cp_heads(config: Any, cp: int, tp: int, attention: str, linear: str) -> None:
    """A :class:`ConfigError` naming ``parallelism.context_parallel_degree`` listing every head
    count that cannot be split ``cp`` ways after ``tp``."""
    problems = cp_head_problems(config, cp, tp, attention=attention, linear=linear)
    if problems:
        raise ConfigError(f"{cp}: " + "; ".join(problems), path=CP_DEGREE_FIELD)


def kv_repeats(q_heads: int, kv_heads: int, cp: int) -> int:
    """How many times Ulysses repeats each KV head so ``cp`` divides them (1: none); the
    repeated count must still divide the query heads (each query head keeps its KV head)."""
    if kv_heads % cp == 0:
        return 1
    repeats = cp // math.gcd(kv_heads, cp)
    if q_heads % (kv_heads * repeats):
        raise ValueError(
            f"{kv_heads} KV heads repeated {repeats}x for cp={cp} do not divide the "
            f"{q_heads} query heads"
        )
    return repeats



def cp_head_problems(config, cp: int, tp: int, *, attention: str, linear: str) -> list[str]:
    """Why the head counts of ``config`` cannot be split ``cp`` ways (after ``tp``), one
    sentence per problem, the fields named (empty: they can)."""
    problems: list[str] = []
    if cp <= 1:
        return problems

    def per_tp(name: str) -> tuple[int, str]:
        count = getattr(config, name)
        if tp > 1:
            return count // tp, f"model {name}={count} / tensor_parallel_degree={tp} = {count // tp}"
        return count, f"model {name}={count}"

    has_attn = getattr(config, "num_full_attention_layers", 1) > 0
    has_linear = getattr(config, "num_linear_attention_layers", 1) > 0
    if has_attn and attention == "ulysses":
        q, q_text = per_tp("num_attention_heads")
        kv, _ = per_tp("num_key_value_heads")
        if q % cp:
            problems.append(
                f"{q_text} query heads do not divide by context_parallel_degree={cp} (Ulysses "
                "gives each rank whole heads); use a degree that divides them, or the "
                "all-gather form (context_parallel_ulysses_degree=1)"
            )
        else:
            try:
                kv_repeats(q, kv, cp)
            except ValueError as exc:
                problems.append(f"{exc}; use the all-gather form (context_parallel_ulysses_degree=1)")
    if has_linear and linear == "ulysses":
        for name in ("linear_num_key_heads", "linear_num_value_heads"):
            count, text = per_tp(name)
            if count % cp:
                problems.append(
                    f"{text} Gated DeltaNet heads do not divide by context_parallel_degree={cp} "
                    "(Ulysses over heads); use the state-passing form "
                    "(context_parallel_linear_attention_mode=p2p) or a degree that divides them"
                )
    return problems


def check_context_parallel(config: Any, parallelism: Any) -> None:
    """The context-parallel fields of ``parallelism`` against the model ``config`` (its head
    counts split over the tensor- and context-parallel degrees)."""
    cp = getattr(parallelism, "context_parallel_degree", 1) or 1
    modes = context_parallel_modes(parallelism, cp)
    if modes is not None:
        tp = getattr(parallelism, "tensor_parallel_degree", 1) or 1
        check_cp_heads(config, cp, tp, modes[0], modes[1])
