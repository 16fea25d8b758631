"""Training callbacks of the legacy trainer (``LLMTrainer``).

``CallbackHandler(trainer)`` builds the ten built-ins from ``trainer.args.train.*`` and dispatches
every hook in the legacy fixed orders (see :mod:`.base`); ``handler.add_callback(cb)`` appends user
callbacks, which always run after the built-ins.
"""

from .base import BUILTIN_NAMES, DISPATCH_ORDER, Callback, CallbackHandler, build_builtin_callbacks
from .checkpoint import CheckpointCallback
from .eval import EvalCallback
from .gc import GCCallback
from .gradient_health import GradientHealthCallback
from .hf_export import HFExportCallback
from .logging import LoggingCallback
from .memory import MemoryMonitorCallback
from .profiler import ProfilerCallback
from .progress import ProgressCallback
from .tensorboard import TensorBoardCallback

# Legacy class name of the HF export callback.
SafetensorsExportCallback = HFExportCallback

__all__ = [
    "BUILTIN_NAMES",
    "DISPATCH_ORDER",
    "Callback",
    "CallbackHandler",
    "CheckpointCallback",
    "EvalCallback",
    "GCCallback",
    "GradientHealthCallback",
    "HFExportCallback",
    "LoggingCallback",
    "MemoryMonitorCallback",
    "ProfilerCallback",
    "ProgressCallback",
    "SafetensorsExportCallback",
    "TensorBoardCallback",
    "build_builtin_callbacks",
]
