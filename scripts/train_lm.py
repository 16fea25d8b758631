#!/usr/bin/env python
"""Train a language model (the legacy entry point; both command lines work).

    torchrun --nproc_per_node N scripts/train_lm.py old.yaml [--section.field=value ...]
    torchrun --nproc_per_node N scripts/train_lm.py --module M --config F [--a.b=c ...]

Same as ``python -m hyper_parallel.train``: a YAML goes to ``LLMTrainer(args)`` exactly as
before, ``--module``/``--config`` to ``HyperTrainer``.
"""

from hyper_parallel.train import main

if __name__ == "__main__":
    code = main()
    from hyper_parallel.utils.process import exit_now

    exit_now(code)
