"""The universal ``model.*`` fields of the legacy schema (framework-free; one home for the list).

Each sets the model config field of the same name on top of the flavor when not None. The legacy
schema checks them (``trainer/config.py``) and the model's legacy section applies them
(``models/qwen3_5/model_section.py``); the models layer may not import the schema, so the list
lives here, below both.
"""

from __future__ import annotations

LEGACY_UNIVERSAL_FIELDS = (
    "num_hidden_layers",
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "max_position_embeddings",
)

__all__ = ["LEGACY_UNIVERSAL_FIELDS"]
