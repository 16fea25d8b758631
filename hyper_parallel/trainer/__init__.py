"""Trainers and the legacy configuration.

This package's ``__init__`` imports nothing heavy: ``hyper_parallel.trainer.config`` must stay
usable without torch.
"""
