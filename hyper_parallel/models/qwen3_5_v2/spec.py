"""The ``qwen3_5_v2`` model spec: the Qwen3.5 spec under the name its recipes use.

``qwen3_5_v2_spec_factory(flavor)`` is what recipes call; importing ``hyper_parallel.models.
qwen3_5_v2`` registers one default spec (flavor ``0.8b``, the legacy default) under
``"qwen3_5_v2"``, once. The spec is :func:`hyper_parallel.models.qwen3_5.spec.qwen3_5_spec_factory`
with another name: the same model, parallelisation and adapter as ``model.name: qwen3_5``.
"""

from __future__ import annotations

from hyper_parallel.models.qwen3_5.spec import qwen3_5_spec_factory
from hyper_parallel.models.qwen3_5.spec import register_default_spec as _register
from hyper_parallel.protocols.model_spec import ModelSpec

__all__ = ["SPEC_NAME", "qwen3_5_v2_spec_factory", "register_default_spec"]

SPEC_NAME = "qwen3_5_v2"


def qwen3_5_v2_spec_factory(flavor: str) -> ModelSpec:
    """A fresh Qwen3.5 spec of the named size, named ``qwen3_5_v2`` (see
    :func:`~hyper_parallel.models.qwen3_5.spec.qwen3_5_spec_factory`)."""
    return qwen3_5_spec_factory(flavor, name=SPEC_NAME)


def register_default_spec() -> None:
    """Register the default (``0.8b``) spec as ``"qwen3_5_v2"`` unless that name is taken."""
    _register(SPEC_NAME)


register_default_spec()
