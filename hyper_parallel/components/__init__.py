"""The training components of the new (torchtitan-style) configuration.

Each component is a :class:`~hyper_parallel.protocols.Configurable`: its nested ``Config``
dataclass holds the settings (validated in ``__post_init__``, every field documented), and
``config.build(**runtime_objects)`` constructs it. Every component is a thin wrapper over the
helper the legacy trainer (``BaseTrainer`` / ``LLMTrainer``) already calls, so a component and
the legacy build step with the same settings produce the same object, numbers and files; the
defaults equal the legacy defaults.

============================  ==========================================================
Component                     Built with / wraps
============================  ==========================================================
``OptimizersContainer``       ``build(model_parts=[...])`` / ``runtime.optim.build_optimizer``
``LRSchedulersContainer``     ``build(optimizers=..., training_steps=...)`` /
                              ``runtime.optim.build_lr_scheduler``
``CrossEntropyLoss``          ``build()`` / ``runtime.loss`` (``token_loss_sum``, ``LossScaler``)
``HuggingFaceTokenizer``      ``build(weights_path=None)`` / ``data.load_tokenizer``
``BaseDataLoader``            ``build(dp_world_size=, dp_rank=, local_batch_size=, seq_len=,
                              seed=, tokenizer=, vocab_size=, num_samples=)`` /
                              ``data.build_dataset`` + ``data.build_dataloader``
``CheckpointManager``         ``build(model_parts=, optimizers=, lr_schedulers=, dataloader=,
                              sd_adapter=, model_config=)`` / ``runtime.checkpoint``
``MetricsProcessor``          ``build(trainer=, output_dir=, ...)`` / the logging,
                              TensorBoard and memory callbacks' helpers
``Profiler``                  ``build(rank=None)`` / the profiler callback's helper
============================  ==========================================================
"""

from hyper_parallel.components.checkpoint import CheckpointManager
from hyper_parallel.components.dataloader import BaseDataLoader
from hyper_parallel.components.loss import BaseLoss, CrossEntropyLoss
from hyper_parallel.components.lr_scheduler import LRSchedulersContainer
from hyper_parallel.components.metrics import MetricsProcessor
from hyper_parallel.components.optimizer import OptimizersContainer
from hyper_parallel.components.profiler import Profiler
from hyper_parallel.components.tokenizer import BaseTokenizer, HuggingFaceTokenizer

__all__ = [
    "BaseDataLoader",
    "BaseLoss",
    "BaseTokenizer",
    "CheckpointManager",
    "CrossEntropyLoss",
    "HuggingFaceTokenizer",
    "LRSchedulersContainer",
    "MetricsProcessor",
    "OptimizersContainer",
    "Profiler",
]
