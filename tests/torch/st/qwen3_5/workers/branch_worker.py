"""torchrun worker: one YAML through LLMTrainer or through HyperTrainer; rank 0 writes a JSON
summary (parameter names and shapes, optimizer groups and hyperparameters, LR and loss per step)."""

import json
import sys

from hyper_parallel.config.legacy_adapter import _legacy_to_trainer_config
from hyper_parallel.models.spec import discover_model_spec
from hyper_parallel.trainer.config import HyperTrainerConfig, parse_args


def summary(trainer, lrs):
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    return {
        "params": [[n, list(p.shape)] for n, p in trainer.model.named_parameters()],
        "groups": [
            {
                "params": [names[id(p)] for p in g["params"]],
                **{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()
                   if k in ("weight_decay", "betas", "eps", "initial_lr", "foreach", "fused")},
            }
            for g in trainer.optimizer.param_groups
        ],
        "lrs": lrs,
        "losses": [loss for _, loss in trainer.state.loss_history],
    }


def main() -> None:
    which, yaml_path, out, *overrides = sys.argv[1:]
    legacy = parse_args(HyperTrainerConfig, [yaml_path, *overrides])
    discover_model_spec(legacy.model.name)
    if which == "legacy":
        from hyper_parallel.trainer.llm_trainer import LLMTrainer

        trainer = LLMTrainer(legacy)
    else:
        trainer = _legacy_to_trainer_config(legacy).build()
    lrs = []
    trainer.callbacks.on_pre_optimizer_step = (
        lambda grad_norm, _orig=trainer.callbacks.on_pre_optimizer_step: (
            lrs.append(trainer.optimizer.param_groups[0]["lr"]), _orig(grad_norm)
        )
    )
    trainer.train()
    if trainer.is_rank0:
        with open(out, "w") as f:
            json.dump({"trainer": type(trainer).__name__, **summary(trainer, lrs)}, f)
    trainer.close()


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    main()
    exit_now(0)
