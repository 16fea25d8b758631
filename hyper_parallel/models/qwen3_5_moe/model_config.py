"""``Qwen3_5MoeModel.Config`` and the flavors, without the framework.

``Qwen3_5MoeModelConfig`` is the dense protocol config
(:class:`~hyper_parallel.models.qwen3_5.model_config.Qwen3_5ModelConfig`: ``update_from_config``,
``replace``, the legacy bridge) over the MoE architecture
(:class:`~hyper_parallel.models.qwen3_5_moe.configuration.Qwen3_5MoeConfig`): every field is
declared once, in ``configuration.py``. What differs from the dense model is what a run may ask
of it: a ``model`` section re-bases on the MoE flavors, and expert parallelism is allowed when it
divides the experts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hyper_parallel.models.qwen3_5.context_parallel_rules import check_context_parallel
from hyper_parallel.models.qwen3_5.model_config import Qwen3_5ModelConfig
from hyper_parallel.models.qwen3_5.model_section import apply_model_section
from hyper_parallel.models.qwen3_5_moe.configuration import (
    DEFAULT_FLAVOR,
    FLAVORS,
    Qwen3_5MoeConfig,
)
from hyper_parallel.protocols.lazy import LazyOwner
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.suggest import did_you_mean

__all__ = [
    "DEFAULT_FLAVOR",
    "FLAVOR_NAMES",
    "Qwen3_5MoeModelConfig",
    "config_from_model_section",
    "flavor_config",
]

FLAVOR_NAMES: tuple[str, ...] = tuple(FLAVORS)
"""The named sizes (``debugmodel``, ``35b_a3b``, ``122b_a10b``, ``397b_a17b``)."""


#: Why context parallelism is refused for this family (its model config and its
#: parallelization say it).
CP_REFUSAL = (
    "context parallelism is implemented and tested for the dense Qwen3.5 family only; for "
    "the mixture-of-experts family the router's load-balancing statistics and auxiliary loss "
    "would be taken over each rank's part of the sequence, which no test has compared with one "
    "rank yet; set it to 1"
)

@dataclass(kw_only=True, slots=True)
class Qwen3_5MoeModelConfig(Qwen3_5ModelConfig, Qwen3_5MoeConfig):
    """Architecture of a Qwen3.5 mixture-of-experts text decoder; defaults are Qwen3.5-35B-A3B.

    The fields, defaults and rules are :class:`Qwen3_5MoeConfig`'s; the protocol
    (``build``, ``update_from_config``, ``replace``) is the dense model's, with the MoE flavors
    and the MoE parallel rules (:meth:`_check_parallelism`).
    """

    def _with_model_section(self, section: Any) -> Qwen3_5MoeModelConfig:
        return apply_model_section(self, section, flavor_config, FLAVORS)

    def _check_parallelism(self, parallelism: Any) -> None:
        """CP above 1 is refused (:data:`CP_REFUSAL`); ``expert_parallel_degree`` must divide ``num_experts``;
        ``expert_tensor_parallel_degree`` must be 1 (the routed experts are whole on each rank:
        under TP they are replicated over the TP ranks); TP must divide what it shards."""
        cp = getattr(parallelism, "context_parallel_degree", 1) or 1
        if cp > 1:
            raise ConfigError(f"{cp}: {CP_REFUSAL}", path="parallelism.context_parallel_degree")
        check_context_parallel(self, parallelism)  # its other fields do nothing at cp 1
        ep = getattr(parallelism, "expert_parallel_degree", 1) or 1
        if self.num_experts % ep:
            divisors = [d for d in range(1, self.num_experts + 1) if self.num_experts % d == 0]
            raise ConfigError(
                f"{ep} does not divide the model's num_experts={self.num_experts}; choose one of "
                f"{', '.join(map(str, divisors[:12]))}{', ...' if len(divisors) > 12 else ''}",
                path="parallelism.expert_parallel_degree",
            )
        etp = getattr(parallelism, "expert_tensor_parallel_degree", 1) or 1
        if etp > 1:
            raise ConfigError(
                f"{etp}: expert tensor parallelism is not implemented; set it to 1 (each routed "
                "expert is whole on its rank, and replicated over the tensor-parallel ranks)",
                path="parallelism.expert_tensor_parallel_degree",
            )
        self._check_tensor_parallel(parallelism)


# The model (a torch module) owns this Config; it is imported only when a model is built.
Qwen3_5MoeModelConfig._owner = LazyOwner(  # type: ignore[assignment]
    "hyper_parallel.models.qwen3_5_moe.model:Qwen3_5MoeModel"
)


def flavor_config(name: str) -> Qwen3_5MoeModelConfig:
    """A fresh ``Qwen3_5MoeModelConfig`` of the named size."""
    if name not in FLAVORS:
        raise ValueError(
            f"unknown Qwen3.5 MoE flavor {name!r}{did_you_mean(str(name), FLAVORS)}; "
            f"valid flavors: {', '.join(FLAVOR_NAMES)}"
        )
    return Qwen3_5MoeModelConfig.from_legacy(FLAVORS[name])


def config_from_model_section(section: Any) -> Qwen3_5MoeModelConfig:
    """The config a legacy ``model`` section describes: the base is
    ``config_overrides['flavor']``, default ``35b_a3b``."""
    return flavor_config(DEFAULT_FLAVOR)._with_model_section(section)
