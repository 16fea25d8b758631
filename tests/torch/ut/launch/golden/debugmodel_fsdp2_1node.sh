#!/bin/bash
# hyper_parallel job qwen3-5-v2-debugmodel-fsdp2: recipe qwen3_5_v2 --config
#   qwen3_5_v2_debugmodel_fsdp2
# 1 node(s) x 2 GPU(s) = 2 rank(s): parallelism.data_parallel_shard_degree 2 = 2 ranks
# preflight: not run
# resume: with checkpoint.resume_latest on, the newest complete checkpoint under checkpoint.folder
#   wins; checkpoint.load_path applies only when the folder holds none; with neither the run
#   starts fresh
# checkpoints: /shared/project/outputs/qwen3_5_v2_debugmodel_fsdp2/checkpoint
# written by: python -m hyper_parallel.launch --module qwen3_5_v2 --config qwen3_5_v2_debugmodel_fsdp2 --training.steps=100 --scheduler=torchrun --workdir=/shared/project --no-preflight --dry-run --gpus-per-node=2
# A failed worker restarts the workers up to 3 time(s), each resuming from the
# newest checkpoint; SIGTERM stops the training after its step with a checkpoint (300 s allowed).
set -euo pipefail
cd /shared/project
export NCCL_DEBUG=WARN
export OMP_NUM_THREADS=8
export PYTORCH_ALLOC_CONF=expandable_segments:True
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
export TORCH_FR_BUFFER_SIZE=20000
export TORCH_FR_DUMP_TEMP_FILE=/shared/project/outputs/qwen3_5_v2_debugmodel_fsdp2/checkpoint/nccl_flight_recorder_rank_
export TORCH_NCCL_DUMP_ON_TIMEOUT=1

exec \
  torchrun \
  --standalone \
  --nproc-per-node=2 \
  --max-restarts=3 \
  --shutdown-timeout=300 \
  -m hyper_parallel.train \
  --module qwen3_5_v2 \
  --config qwen3_5_v2_debugmodel_fsdp2 \
  --training.steps=100 \
  --checkpoint.resume_latest=true
