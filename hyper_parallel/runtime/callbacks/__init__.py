"""Training callbacks of the engine.

``CallbackHandler(trainer, builtins)`` holds the built-ins (``HyperTrainer`` builds them from its
components and settings) and dispatches every hook in the legacy fixed orders (see :mod:`.base`);
``handler.add_callback(cb)`` appends user callbacks, which always run after the built-ins.
"""

from .base import BUILTIN_NAMES, DISPATCH_ORDER, Callback, CallbackHandler
from .components import CheckpointManagerCallback, MetricsCallback, ProfilerComponentCallback
from .eval import EvalCallback
from .gc import GCCallback
from .gradient_health import GradientHealthCallback
from .progress import ProgressCallback

__all__ = [
    "BUILTIN_NAMES",
    "DISPATCH_ORDER",
    "Callback",
    "CallbackHandler",
    "CheckpointManagerCallback",
    "EvalCallback",
    "GCCallback",
    "GradientHealthCallback",
    "MetricsCallback",
    "ProfilerComponentCallback",
    "ProgressCallback",
]
