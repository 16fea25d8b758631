"""hyper_parallel: a PyTorch distributed LLM trainer with legacy YAML and torchtitan-style configs.

Importing this package is cheap on purpose: it imports neither torch nor mindspore. The framework
is chosen at run time by :func:`hyper_parallel.platform.get_platform`.
"""

__version__ = "0.1.0"
