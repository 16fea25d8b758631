"""TensorBoard scalars for the ``MetricsProcessor``: ``train/loss``, ``train/grad_norm``,
``train/lr`` and, when measured, ``train/tokens_per_sec`` (plus ``train/tflops``/``train/mfu``)
and a mixture-of-experts model's ``train/moe_aux_loss`` / ``train/moe_load_imbalance``;
``eval/loss`` on every evaluation."""

from __future__ import annotations

from typing import Any

_STEP_SCALARS = (
    "loss", "grad_norm", "lr", "tokens_per_sec", "tflops", "mfu", "moe_aux_loss",
    "moe_load_imbalance",
)


def open_summary_writer(output_dir: str, field_name: str = "train.tensorboard.enabled"):
    """A ``SummaryWriter`` logging into ``output_dir``; ``field_name`` is the switch named in
    the error when the ``tensorboard`` package is missing."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"{field_name} needs the 'tensorboard' package (pip install tensorboard)"
        ) from e
    return SummaryWriter(log_dir=output_dir)


def add_step_scalars(writer, metrics: dict[str, Any], step: int) -> None:
    """``train/<name>`` for each step scalar present (not None) in ``metrics``."""
    for key in _STEP_SCALARS:
        value = metrics.get(key)
        if value is not None:
            writer.add_scalar(f"train/{key}", float(value), step)


def add_eval_scalars(writer, metrics: dict[str, Any], step: int) -> None:
    """``eval/<name>`` for each evaluation metric (``eval_`` prefix dropped), then flush."""
    for key, value in metrics.items():
        name = key.removeprefix("eval_")
        writer.add_scalar(f"eval/{name}", float(value), step)
    writer.flush()
