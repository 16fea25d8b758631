"""Callback base class and the dispatcher with the legacy trainer's fixed dispatch orders.

A callback is constructed with the trainer (and, for the built-ins, the settings or the component
it drives; callbacks never read a configuration schema). The trainer owns one
:class:`CallbackHandler` and calls its ``on_*`` methods; the handler forwards each hook to the
built-ins in the legacy order, then to user callbacks (``add_callback``) in registration order.

Trainer contract used by the built-ins: ``state`` (``global_step``, ``epoch``, ``max_steps``,
``log_history``), ``model``, ``optimizer``, ``lr_scheduler``, ``rank``, ``is_rank0``,
``last_global_tokens``, ``evaluate()``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class Callback:
    """No-op implementation of every hook; subclasses override what they need.

    ``self.handler`` is set by :class:`CallbackHandler` when the callback is registered; callbacks
    that emit events (``on_log``, ``on_save``, ``on_load``, ``on_evaluate``) send them through it so
    that every callback sees them.
    """

    def __init__(self, trainer) -> None:
        self.trainer = trainer
        self.handler: CallbackHandler | None = None

    def dispatch(self, event: str, *args: Any) -> None:
        """Send an event to every registered callback (or only to self when unregistered)."""
        if self.handler is not None:
            getattr(self.handler, event)(*args)
        else:
            getattr(self, event)(*args)

    # -- hooks -----------------------------------------------------------------------------------
    def on_init_end(self) -> None: ...

    def on_train_begin(self) -> None: ...

    def on_train_end(self) -> None: ...

    def on_epoch_begin(self) -> None: ...

    def on_epoch_end(self) -> None: ...

    def on_step_begin(self) -> None: ...

    def on_step_end(self, loss: float, grad_norm: float | None) -> None: ...

    def on_substep_end(self) -> None: ...

    def on_pre_optimizer_step(self, grad_norm: float | None) -> None: ...

    def on_log(self, metrics: dict[str, Any]) -> None: ...

    def on_save(self, checkpoint_dir: str) -> None: ...

    def on_load(self, checkpoint_dir: str) -> None: ...

    def on_evaluate(self, metrics: dict[str, Any]) -> None: ...


# Built-in names, in declaration order (the order of the "fan out to all" hooks). ``logging``
# drives the MetricsProcessor (log line, metrics.jsonl, TensorBoard, memory monitor),
# ``checkpoint`` the CheckpointManager (resume, saves, Hugging Face export), ``profiler`` the
# Profiler component.
BUILTIN_NAMES: tuple[str, ...] = (
    "logging",
    "checkpoint",
    "eval",
    "profiler",
    "progress",
    "gradient_health",
    "gc",
)

# The legacy trainer's dispatch orders (on_train_begin as its later versions have it: checkpoint
# before progress, so that the bar starts at the resumed step), minus wandb / moe_monitor / training_state_monitor which are not
# built here. The legacy tensorboard, memory-monitor and HF-export callbacks are part of the
# components behind ``logging`` and ``checkpoint``. on_train_end additionally closes the metrics
# files and re-enables the garbage collector (appended after the legacy ones).
DISPATCH_ORDER: dict[str, tuple[str, ...]] = {
    "on_step_end": (
        "logging",
        "eval",
        "profiler",
        "progress",
        "checkpoint",
        "gradient_health",
        "gc",
    ),
    "on_train_begin": ("logging", "profiler", "checkpoint", "progress"),
    "on_train_end": ("checkpoint", "progress", "profiler", "logging", "gc"),
    "on_step_begin": ("logging",),
    "on_substep_end": (),
    "on_pre_optimizer_step": ("gradient_health", "logging"),
}
FAN_OUT_HOOKS = (
    "on_init_end",
    "on_epoch_begin",
    "on_epoch_end",
    "on_log",
    "on_save",
    "on_load",
    "on_evaluate",
)


class CallbackHandler:
    """Holds the built-in callbacks as named fields and dispatches hooks in the legacy orders.

    ``handler.logging_callback``, ``handler.checkpoint_callback``, ... are the built-ins (field name
    = ``<name>_callback``); ``builtins`` maps built-in names to instances (the trainer builds them
    from its components and settings; any subset is fine).
    """

    def __init__(self, trainer, builtins: dict[str, Callback] | None = None) -> None:
        self.trainer = trainer
        builtins = dict(builtins or {})
        unknown = set(builtins) - set(BUILTIN_NAMES)
        if unknown:
            raise ValueError(
                f"unknown built-in callback names {sorted(unknown)}; known: {list(BUILTIN_NAMES)}"
            )
        self._builtins: dict[str, Callback] = {}
        for name in BUILTIN_NAMES:
            if name in builtins:
                cb = builtins[name]
                cb.handler = self
                self._builtins[name] = cb
                setattr(self, f"{name}_callback", cb)
        self.user_callbacks: list[Callback] = []
        # The metrics of the last step (set by the logging built-in every step), for other callbacks.
        self.last_step_metrics: dict[str, Any] = {}

    def add_callback(self, callback: Callback) -> Callback:
        """Register a user callback; it runs after all built-ins, in registration order."""
        if not isinstance(callback, Callback):
            raise TypeError(
                f"add_callback expects a Callback instance, got {type(callback).__name__}"
            )
        callback.handler = self
        self.user_callbacks.append(callback)
        return callback

    @property
    def callbacks(self) -> list[Callback]:
        """Built-ins (declaration order) followed by user callbacks."""
        return list(self._builtins.values()) + self.user_callbacks

    def _targets(self, hook: str) -> Iterable[Callback]:
        order = DISPATCH_ORDER.get(hook)
        if order is None:
            yield from self.callbacks
            return
        for name in order:
            cb = self._builtins.get(name)
            if cb is not None:
                yield cb
        yield from self.user_callbacks

    def _call(self, hook: str, *args: Any) -> None:
        for cb in self._targets(hook):
            getattr(cb, hook)(*args)

    # -- hooks (the trainer calls these) ----------------------------------------------------------
    def on_init_end(self) -> None:
        self._call("on_init_end")

    def on_train_begin(self) -> None:
        self._call("on_train_begin")

    def on_train_end(self) -> None:
        self._call("on_train_end")

    def on_epoch_begin(self) -> None:
        self._call("on_epoch_begin")

    def on_epoch_end(self) -> None:
        self._call("on_epoch_end")

    def on_step_begin(self) -> None:
        self._call("on_step_begin")

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        self._call("on_step_end", loss, grad_norm)

    def on_substep_end(self) -> None:
        self._call("on_substep_end")

    def on_pre_optimizer_step(self, grad_norm: float | None) -> None:
        self._call("on_pre_optimizer_step", grad_norm)

    def on_log(self, metrics: dict[str, Any]) -> None:
        self._call("on_log", metrics)

    def on_save(self, checkpoint_dir: str) -> None:
        self._call("on_save", checkpoint_dir)

    def on_load(self, checkpoint_dir: str) -> None:
        self._call("on_load", checkpoint_dir)

    def on_evaluate(self, metrics: dict[str, Any]) -> None:
        self._call("on_evaluate", metrics)

    # Legacy names of the event fan-outs.
    dispatch_log_event = on_log
    dispatch_save_event = on_save
    dispatch_load_event = on_load
    dispatch_evaluate_event = on_evaluate
