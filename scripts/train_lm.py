#!/usr/bin/env python
"""Train a language model from a legacy YAML config.

    torchrun --nproc_per_node N scripts/train_lm.py old.yaml [--section.field=value ...]
"""

import os
import sys

# The platform is chosen from the environment when hyper_parallel first asks for it.
os.environ.setdefault("HYPER_PARALLEL_PLATFORM", "torch")


def main(argv=None) -> int:
    from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig, parse_args
    from hyper_parallel.utils.logging import init_logger

    init_logger()
    try:
        args = parse_args(HyperTrainerConfig, argv)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    from hyper_parallel.models.spec import discover_model_spec
    from hyper_parallel.trainer.llm_trainer import LLMTrainer

    discover_model_spec(args.model.name)
    trainer = LLMTrainer(args)
    try:
        trainer.train()
    finally:
        trainer.close()
    return 0


if __name__ == "__main__":
    code = main()
    from hyper_parallel.utils.process import exit_now

    exit_now(code)
