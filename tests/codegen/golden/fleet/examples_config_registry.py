"""Recipes converted from 6 legacy YAMLs: one zero-argument function per YAML, each returning a
fresh ``HyperTrainer.Config`` (train one with ``--module M --config NAME``).

What the YAMLs share is set once, in the shared functions ``train_qwen3_5_base``,
``train_qwen3_5_debug_hsdp_tp2_shared``, ``train_qwen3_5_debug_tp2_shared`` and
``train_qwen3_5_demo_fsdp2_shared``: each holds what the recipes below it agree on, starting
from a flavor baseline or from another of them. Each recipe calls one of them, the recipe of a
YAML whose settings it contains, or the flavor baseline of its own model, and sets, one line
each in the order of ``HyperTrainer.Config``, the fields where its YAML differs, each commented
with the legacy key and line it comes from and the YAML's own comment on that key. Before
writing, the converter executed this module, called every recipe and checked that each builds
its YAML's configuration and converts back to the YAML's canonical form.

Written by ``python -m hyper_parallel.codegen --from-yaml examples/yaml``.

Sources:

* ``train_qwen3_5_0_8b``: examples/yaml/train_qwen3_5_0_8b.yaml
  (sha256 39348e341571812c940f38786252471ab494fb049037f2bf27e79c54371f2c79)
* ``train_qwen3_5_debug``: examples/yaml/train_qwen3_5_debug.yaml
  (sha256 57bfe757897eed3830dc11c7d4bfa1379de65a9d23649d570f14d8c1ece3c2af)
* ``train_qwen3_5_demo``: examples/yaml/train_qwen3_5_demo.yaml
  (sha256 2d909fc8a8ec8eb5a9c6beb2de595a91d227205e612dc0bc64dac688960fc4eb)
* ``train_qwen3_5_fsdp2``: examples/yaml/train_qwen3_5_fsdp2.yaml
  (sha256 e1e85ca1373649cded3199d64cfe1f1f38abeb988311a86ee75b9294961e540e)
* ``train_qwen3_5_hsdp``: examples/yaml/train_qwen3_5_hsdp.yaml
  (sha256 c96271d9259843e8f577f147168d9a3cc1e94cd90a575352e70aaddbb77a4b62)
* ``train_qwen3_5_tp2``: examples/yaml/train_qwen3_5_tp2.yaml
  (sha256 f65876cc9f9b4a44fdfc0cb2e7ba33424812ae3800e7a5c2b6cf80b7a78c0f92)
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = [
    "train_qwen3_5_0_8b",
    "train_qwen3_5_base",
    "train_qwen3_5_debug",
    "train_qwen3_5_debug_hsdp_tp2_shared",
    "train_qwen3_5_debug_tp2_shared",
    "train_qwen3_5_demo",
    "train_qwen3_5_demo_fsdp2_shared",
    "train_qwen3_5_fsdp2",
    "train_qwen3_5_hsdp",
    "train_qwen3_5_tp2",
]


def train_qwen3_5_base() -> HyperTrainer.Config:
    """The settings shared by train_qwen3_5_debug, train_qwen3_5_demo, train_qwen3_5_fsdp2,
    train_qwen3_5_hsdp and train_qwen3_5_tp2 (5 of the 6 YAMLs): flavor_baseline: model
    'qwen3_5', flavor 'debugmodel', and the 3 fields they agree on. Their recipes call it,
    directly or through another function.
    """
    # model.{name, config_overrides.flavor} (5 of 6 YAMLs, lines 4-6): ~5M parameters, trains in seconds on a CPU
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.dataloader.pin_memory = False  # data.pin_memory (5 of 6 YAMLs)
    config.comm.backend = "gloo"  # train.comm_backend (5 of 6 YAMLs)
    config.debug.deterministic = True  # train.debug.deterministic (5 of 6 YAMLs)
    return config


def train_qwen3_5_debug_hsdp_tp2_shared() -> HyperTrainer.Config:
    """The settings shared by train_qwen3_5_debug, train_qwen3_5_hsdp and train_qwen3_5_tp2 (3 of
    the 6 YAMLs): what train_qwen3_5_base sets, and the 6 fields they agree on beyond it. Their
    recipes call it, directly or through another function.
    """
    config = train_qwen3_5_base()  # the settings shared by 5 of 6 YAMLs
    config.optimizer.lr = 0.001  # train.optimizer.lr (3 of 6 YAMLs)
    config.lr_scheduler.lr_min = 0.0001  # train.optimizer.lr_min (3 of 6 YAMLs)
    # train.checkpoint.save_steps (3 of 6 YAMLs): no checkpoints for a smoke run
    config.checkpoint.interval = 0
    config.checkpoint.export_hf = False  # train.checkpoint.save_hf_weights (3 of 6 YAMLs)
    config.training.steps = 10  # train.max_steps (3 of 6 YAMLs)
    config.debug.seed = 1234  # train.seed (3 of 6 YAMLs)
    return config


def train_qwen3_5_debug_tp2_shared() -> HyperTrainer.Config:
    """The settings shared by train_qwen3_5_debug and train_qwen3_5_tp2 (2 of the 6 YAMLs): what
    train_qwen3_5_debug_hsdp_tp2_shared sets, and the 6 fields they agree on beyond it. Their
    recipes call it.
    """
    config = train_qwen3_5_debug_hsdp_tp2_shared()  # the settings shared by 3 of 6 YAMLs
    config.dataloader.shuffle = False  # data.shuffle (2 of 6 YAMLs, line 10)
    config.lr_scheduler.warmup_steps = 2  # train.optimizer.lr_warmup_ratio (2 of 6 YAMLs)
    config.metrics.log_freq = 1  # train.logging.log_steps (2 of 6 YAMLs)
    config.training.global_batch_size = 4  # train.global_batch_size (2 of 6 YAMLs)
    # train.micro_batch_size (2 of 6 YAMLs): 2 micro-batches per step (gradient accumulation)
    config.training.local_batch_size = 2
    config.training.seq_len = 128  # data.max_seq_len (2 of 6 YAMLs, line 9)
    return config


def train_qwen3_5_demo_fsdp2_shared() -> HyperTrainer.Config:
    """The settings shared by train_qwen3_5_demo and train_qwen3_5_fsdp2 (2 of the 6 YAMLs): what
    train_qwen3_5_base sets, and the 6 fields they agree on beyond it. Their recipes call it.
    """
    config = train_qwen3_5_base()  # the settings shared by 5 of 6 YAMLs
    config.dataloader.dataset = "jsonl"  # data.type (2 of 6 YAMLs, line 8)
    # data.train_path (2 of 6 YAMLs, line 9): the corpus shipped inside hyper_parallel
    config.dataloader.dataset_path = "pkg://corpus/train.jsonl"
    config.optimizer.weight_decay = 0.1  # train.optimizer.weight_decay (2 of 6 YAMLs)
    config.metrics.log_freq = 1  # train.logging.log_steps (2 of 6 YAMLs)
    config.training.seq_len = 128  # data.max_seq_len (2 of 6 YAMLs)
    config.parallelism.data_parallel_shard_degree = 2  # train.accelerator.dp_shard (2 of 6 YAMLs)
    return config


def train_qwen3_5_0_8b() -> HyperTrainer.Config:
    """Converted from examples/yaml/train_qwen3_5_0_8b.yaml.

    The YAML's header comment:

        Qwen3.5-0.8B truncated to 4 layers, FSDP over 4 ranks, bf16 mixed precision.
        The legacy reference example (validated 1-card <-> FSDP4 loss parity there).
          torchrun --nproc_per_node 4 scripts/train_lm.py examples/yaml/train_qwen3_5_0_8b.yaml

    Train it with

        torchrun --nproc_per_node 4 -m hyper_parallel.train --module recipes.config_registry --config train_qwen3_5_0_8b
    """
    config = flavor_baseline("qwen3_5")  # model.name (line 5)
    # model.config_overrides (line 6): flavor defaults to 0.8b
    config.model.config_overrides = {"num_hidden_layers": 4}
    config.dataloader.shuffle = False  # data.shuffle (line 11)
    config.optimizer.weight_decay = 0.0  # train.optimizer.weight_decay (line 30)
    config.lr_scheduler.warmup_steps = 2  # train.optimizer.lr_warmup_ratio (line 28)
    config.lr_scheduler.lr_min = 0.0  # train.optimizer.lr_min (line 26)
    config.loss.aggregation = "rank_average"  # train.optimizer.loss_aggregation (line 31)
    config.checkpoint.folder = "outputs/qwen3_5"  # train.checkpoint.output_dir (line 40)
    config.checkpoint.interval = 0  # train.checkpoint.save_steps (line 41)
    config.checkpoint.export_hf = False  # train.checkpoint.save_hf_weights (line 42)
    config.metrics.log_freq = 1  # train.logging.log_steps (line 44)
    config.metrics.report_throughput = False  # train.logging.report_throughput (line 45)
    config.training.steps = 20  # train.max_steps (line 14)
    config.training.global_batch_size = 4  # train.global_batch_size (line 15)
    config.training.seq_len = 64  # data.max_seq_len (line 10)
    # train.mixed_precision.{enabled, param_dtype, reduce_dtype, output_dtype} (lines 33-36)
    config.training.mixed_precision_param = "bfloat16"
    # train.mixed_precision.{enabled, param_dtype, reduce_dtype, output_dtype} (lines 33-36)
    config.training.mixed_precision_output = "bfloat16"
    # train.optimizer.max_grad_norm (line 29): clipping effectively off
    config.training.max_norm = 1000000000.0
    config.parallelism.data_parallel_shard_degree = 4  # train.accelerator.dp_shard (line 21)
    # train.gradient_checkpointing.activation_checkpoint (line 38)
    config.activation_checkpoint.mode = "none"
    config.debug.seed = 1234  # train.seed (line 17)
    config.debug.deterministic = True  # train.debug.deterministic (line 47)
    return config


def train_qwen3_5_debug() -> HyperTrainer.Config:
    """Converted from examples/yaml/train_qwen3_5_debug.yaml.

    The YAML's header comment:

        Qwen3.5 debug model on synthetic tokens, one process.
          torchrun --nproc_per_node 1 scripts/train_lm.py examples/yaml/train_qwen3_5_debug.yaml

    Train it with

        torchrun --nproc_per_node 1 -m hyper_parallel.train --module recipes.config_registry --config train_qwen3_5_debug

    The YAML's comments on keys that no line sets:

    * data.type (line 8): random tokens, deterministic per sample index
    """
    config = train_qwen3_5_debug_tp2_shared()  # the settings shared by 2 of 6 YAMLs
    config.optimizer.betas = (0.9, 0.95)  # train.optimizer.betas (line 30)
    config.checkpoint.folder = "outputs/qwen3_5_debug"  # train.checkpoint.output_dir (line 34)
    config.parallelism.data_parallel_shard_degree = 1  # train.accelerator.dp_shard (line 21)
    config.debug.check_nan_inf = True  # train.debug.check_nan_inf (line 42)
    return config


def train_qwen3_5_demo() -> HyperTrainer.Config:
    """Converted from examples/yaml/train_qwen3_5_demo.yaml.

    The YAML's header comment:

        The demo: the debug model on the shipped corpus, FSDP over 2 CPU ranks (`make demo`).
          torchrun --nproc_per_node 2 scripts/train_lm.py examples/yaml/train_qwen3_5_demo.yaml

    Train it with

        torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.config_registry --config train_qwen3_5_demo
    """
    config = train_qwen3_5_demo_fsdp2_shared()  # the settings shared by 2 of 6 YAMLs
    config.optimizer.lr = 0.003  # train.optimizer.lr (line 22)
    config.lr_scheduler.warmup_steps = 2  # train.optimizer.lr_warmup_ratio (line 24)
    config.lr_scheduler.lr_min = 0.0003  # train.optimizer.lr_min (line 23)
    config.checkpoint.folder = "outputs/demo"  # train.checkpoint.output_dir (line 29)
    config.checkpoint.interval = 10  # train.checkpoint.save_steps (line 30)
    config.checkpoint.export_hf = False  # train.checkpoint.save_hf_weights (line 31)
    config.training.steps = 20  # train.max_steps (line 14)
    config.training.local_batch_size = 4  # train.micro_batch_size (line 16)
    return config


def train_qwen3_5_fsdp2() -> HyperTrainer.Config:
    """Converted from examples/yaml/train_qwen3_5_fsdp2.yaml.

    The YAML's header comment:

        Debug model on the shipped corpus, FSDP over 2 ranks, with checkpoints and evaluation.
          torchrun --nproc_per_node 2 scripts/train_lm.py examples/yaml/train_qwen3_5_fsdp2.yaml

    Train it with

        torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.config_registry --config train_qwen3_5_fsdp2
    """
    config = train_qwen3_5_demo_fsdp2_shared()  # the settings shared by 2 of 6 YAMLs
    config.optimizer.lr = 0.002  # train.optimizer.lr (line 25)
    config.lr_scheduler.warmup_steps = 1  # train.optimizer.lr_warmup_ratio (line 27)
    config.lr_scheduler.decay_style = "linear"  # train.optimizer.lr_decay_style (line 28)
    config.lr_scheduler.lr_min = 0.0002  # train.optimizer.lr_min (line 26)
    config.checkpoint.folder = "outputs/qwen3_5_fsdp2"  # train.checkpoint.output_dir (line 35)
    config.checkpoint.interval = 5  # train.checkpoint.save_steps (line 36)
    config.training.steps = 10  # train.max_steps (line 16)
    config.training.local_batch_size = 2  # train.micro_batch_size (line 18)
    config.training.gc_freq = 5  # train.debug.gc_steps (line 45)
    # train.gradient_checkpointing.activation_checkpoint (line 33)
    config.activation_checkpoint.mode = "full"
    config.validation.freq = 5  # train.eval.eval_steps (line 41)
    config.validation.dataset_path = "pkg://corpus/valid.jsonl"  # train.eval.eval_dataset (line 42)
    return config


def train_qwen3_5_hsdp() -> HyperTrainer.Config:
    """Converted from examples/yaml/train_qwen3_5_hsdp.yaml.

    The YAML's header comment:

        Debug model, HSDP: 2 replicas x FSDP over 2 (4 ranks).
          torchrun --nproc_per_node 4 scripts/train_lm.py examples/yaml/train_qwen3_5_hsdp.yaml

    Train it with

        torchrun --nproc_per_node 4 -m hyper_parallel.train --module recipes.config_registry --config train_qwen3_5_hsdp
    """
    config = train_qwen3_5_debug_hsdp_tp2_shared()  # the settings shared by 3 of 6 YAMLs
    config.optimizer.betas = (0.9, 0.95)  # train.optimizer.betas (line 27)
    config.lr_scheduler.warmup_steps = 1  # train.optimizer.lr_warmup_ratio (line 25)
    config.checkpoint.folder = "outputs/qwen3_5_hsdp"  # train.checkpoint.output_dir (line 32)
    config.metrics.log_freq = 2  # train.logging.log_steps (line 36)
    config.metrics.enable_tensorboard = True  # train.tensorboard.enabled (line 38)
    # train.tensorboard.output_dir (line 39)
    config.metrics.save_tb_folder = "outputs/qwen3_5_hsdp/tb"
    config.training.seq_len = 64  # data.max_seq_len (line 9)
    # train.accelerator.dp_replicate (line 19)
    config.parallelism.data_parallel_replicate_degree = 2
    config.parallelism.data_parallel_shard_degree = 2  # train.accelerator.dp_shard (line 20)
    # train.accelerator.reshard_after_forward (line 21)
    config.parallelism.reshard_after_forward = False
    return config


def train_qwen3_5_tp2() -> HyperTrainer.Config:
    """Converted from examples/yaml/train_qwen3_5_tp2.yaml.

    The YAML's header comment:

        Debug model, tensor parallel over 2 ranks (every layer type is sharded by head).
          torchrun --nproc_per_node 2 scripts/train_lm.py examples/yaml/train_qwen3_5_tp2.yaml

    Train it with

        torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.config_registry --config train_qwen3_5_tp2
    """
    config = train_qwen3_5_debug_tp2_shared()  # the settings shared by 2 of 6 YAMLs
    config.lr_scheduler.decay_style = "constant"  # train.optimizer.lr_decay_style (line 25)
    config.checkpoint.folder = "outputs/qwen3_5_tp2"  # train.checkpoint.output_dir (line 30)
    config.metrics.enable_memory_monitor = True  # train.memory_monitor.enabled (line 37)
    config.metrics.memory_log_freq = 5  # train.memory_monitor.log_steps (line 38)
    config.training.max_norm = 0.0  # train.optimizer.max_grad_norm (line 26): clipping disabled
    # train.accelerator.dp_shard (line 20): inferred: world 2 / tp 2 = 1
    config.parallelism.data_parallel_shard_degree = -1
    config.parallelism.tensor_parallel_degree = 2  # train.accelerator.tp (line 19)
    # train.gradient_checkpointing.activation_checkpoint (line 28)
    config.activation_checkpoint.mode = "selective"
    return config
