"""The legacy ``model`` section applied to a :class:`~.configuration.Qwen3_5Config`.

``config_from_legacy`` accepts one extra, non-HF override key, ``flavor``, naming the base size.

The one home of the ``model.config_overrides`` rule is :func:`check_config_overrides` (every key
a field name or ``flavor``; ``flavor`` one of ``FLAVORS``): both the recipe path
(:func:`apply_model_section`, which the engine reaches through the model's
``update_from_config``) and the legacy parser call it. It raises
:class:`~hyper_parallel.utils.errors.ConfigError` and, like the configuration, imports no
framework.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hyper_parallel.models.qwen3_5.configuration import (
    DEFAULT_FLAVOR,
    FLAVOR_KEY,
    FLAVORS,
    Qwen3_5Config,
    field_names,
)
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.legacy_model_fields import LEGACY_UNIVERSAL_FIELDS
from hyper_parallel.utils.suggest import did_you_mean

# Every ``model.*`` field that sets the config field of the same name: the universal ones,
# ``model.kernels`` and ``model.attn_mask_type`` (always set: their defaults are the config's,
# ``auto`` and ``causal``; the legacy section has no ``attn_mask_type``, which a legacy YAML
# sets in ``config_overrides``).
MODEL_SECTION_FIELDS = (*LEGACY_UNIVERSAL_FIELDS, "kernels", "attn_mask_type")

UPSTREAM_KEYS = ("vl", "text_config")
"""Keys of ``model.config_overrides`` that the upstream trainer's image-text YAMLs write, read
as this model's own: ``vl: true`` is the image-text model (the flavor's tower, else the
published one; ``false``: the text decoder alone), ``text_config: {...}`` the text model's
fields nested as in Hugging Face's image-text ``config.json`` (applied as the top-level keys
they are here)."""


def upstream_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` with the :data:`UPSTREAM_KEYS` written as this model's fields
    (``vision_config``, the flat text fields); a ``ConfigError`` where they contradict what
    ``overrides`` states itself."""
    out = dict(overrides)
    text = out.pop("text_config", None)
    where = "model.config_overrides"
    if text is not None:
        if not isinstance(text, Mapping):
            raise ConfigError(f"{text!r}: must be a mapping of the text model's fields "
                              "(hidden_size, num_hidden_layers, ...)", path=f"{where}.text_config")
        twice = sorted(set(text) & set(out))
        if twice:
            raise ConfigError(f"{twice} are set both here and in text_config; keep one",
                              path=f"{where}.text_config")
        out.update(text)
    vl = out.pop("vl", None)
    if vl is not None:
        if not isinstance(vl, bool):
            raise ConfigError(f"{vl!r}: must be true (the image-text model) or false (the text "
                              "decoder alone)", path=f"{where}.vl")
        if "vision_config" in out:
            raise ConfigError("vl and vision_config are both set; keep vision_config",
                              path=f"{where}.vl")
        out["vision_config"] = {} if vl else None
    return out


def _get(section: Any, name: str) -> Any:
    if isinstance(section, Mapping):
        return section.get(name)
    return getattr(section, name, None)


def _config_error(message: str, path: str, location: str | None = None) -> Exception:
    return ConfigError(message, path=path, location=location)


def check_config_overrides(
    overrides: Mapping[str, Any] | None,
    *,
    path: str = "model.config_overrides",
    location: str | None = None,
    config_cls: type = Qwen3_5Config,
    flavors: Mapping[str, Any] = FLAVORS,
) -> None:
    """The rule of ``model.config_overrides``: every key is a :class:`Qwen3_5Config` field
    (Hugging Face names) or ``flavor``, and ``flavor`` names one of :data:`FLAVORS`.

    A violation is a :class:`~hyper_parallel.utils.errors.ConfigError` with ``path`` (the
    mapping's dotted path; ``<path>.flavor`` for the flavor) and ``location`` as given, whose
    message names the key with the closest valid one. Values are checked when the overrides are
    applied (:func:`apply_model_section`). Framework-free: the legacy parser calls it too.
    """
    if not overrides:
        return
    valid = field_names(config_cls) + [FLAVOR_KEY]
    for key in overrides:
        if key not in valid:
            raise _config_error(
                f"unknown key {key!r}{did_you_mean(str(key), valid)}. Valid keys: "
                f"{', '.join(valid)}.",
                path,
                location,
            )
    if FLAVOR_KEY in overrides:
        flavor = overrides[FLAVOR_KEY]
        if not isinstance(flavor, str) or flavor not in flavors:
            raise _config_error(
                f"unknown flavor {flavor!r}{did_you_mean(str(flavor), flavors)}. Valid "
                f"flavors: {', '.join(flavors)}.",
                f"{path}.{FLAVOR_KEY}",
                location,
            )


#: The field an invalid-value message of :class:`Qwen3_5Config` (or a subclass) is about.
_FIELD_IN_MESSAGE = re.compile(r"\bQwen3_5(?:Moe)?(?:Model\.)?Config\.(\w+)")


def _error_path(message: str, section: Any, overrides: Mapping[str, Any]) -> str:
    """Where an invalid model value came from: ``model.<field>`` for a universal field set in
    the section (and not overridden), else ``model.config_overrides``."""
    match = _FIELD_IN_MESSAGE.search(message)
    field_name = match.group(1) if match else None
    if (
        field_name in MODEL_SECTION_FIELDS
        and field_name not in overrides
        and _get(section, field_name) is not None
    ):
        return f"model.{field_name}"
    return "model.config_overrides" if overrides else "model"


def apply_model_section(
    base: Any, section: Any, flavor_config: Any = None, flavors: Mapping[str, Any] = FLAVORS
) -> Any:
    """``base`` with a ``model`` section's overrides applied, in the legacy precedence (later
    wins): ``config_overrides['flavor']`` re-bases on that flavor (``flavor_config(name)``,
    default the ``FLAVORS`` entry), then the non-None universal ``model.*`` fields,
    ``model.kernels`` and ``model.attn_mask_type`` (``MODEL_SECTION_FIELDS``), then every other
    ``config_overrides`` key (HF
    field names; the upstream ``vl`` / ``text_config`` read by :func:`upstream_overrides`).
    A derived ``layer_types`` is re-derived for the final layer count (``base.replace``).

    Raises :class:`~hyper_parallel.utils.errors.ConfigError` (a ``ValueError``) naming an
    unknown override key or flavor with a suggestion (:func:`check_config_overrides`), or the
    ``model`` field whose value makes an invalid architecture (``model.num_attention_heads``,
    ``model.config_overrides``; the message is the config's own).
    """
    overrides = upstream_overrides(_get(section, "config_overrides") or {})
    check_config_overrides(overrides, config_cls=type(base), flavors=flavors)
    if FLAVOR_KEY in overrides:
        flavor = overrides.pop(FLAVOR_KEY)
        base = flavor_config(flavor) if flavor_config is not None else flavors[flavor]
    changes: dict[str, Any] = {}
    for name in MODEL_SECTION_FIELDS:
        value = _get(section, name)
        if value is None:
            continue
        if name in type(base).UNUSED_FIELDS:
            raise ConfigError(
                f"{value!r}: this model has no {name} (it is not part of its architecture); "
                "remove the key",
                path=f"model.{name}",
            )
        changes[name] = value
    changes.update(overrides)
    try:
        return base.replace(**changes)  # always a copy: FLAVORS entries are never handed out
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), path=_error_path(str(exc), section, overrides)) from None


def config_from_legacy(model_section: Any) -> Qwen3_5Config:
    """Build the model config from the legacy YAML ``model`` section: :func:`apply_model_section`
    on the default flavor (``'0.8b'``)."""
    return apply_model_section(FLAVORS[DEFAULT_FLAVOR], model_section)
