#!/usr/bin/env bash
# The multi-GPU checks, for a machine with 2 or more GPUs: every parallel layout of 2 ranks on
# NCCL, one GPU a rank, trains the same recipe as one GPU, and the losses must agree.
#
#   env            the devices, torch, CUDA, fla-core (env.txt)
#   one_rank       the dense debug recipe (qwen3_5_v2_debugmodel) on one GPU: the reference
#   dp2 tp2        the same on FSDP 2, TP 2, CP 2 (Ulysses attention, state-passing Gated
#   cp2 pp2        DeltaNet) and PP 2 (1F1B, 2 micro-batches), each against one_rank
#   moe_one_rank   the MoE debug recipe (qwen3_5_moe_debugmodel) on one GPU
#   ep2            the same with expert parallelism over 2 GPUs, against moe_one_rank
#
# Each is a step (bench/_gpu_steps.sh) running bench/_layout_check.py: the real entry point
# under torchrun, 10 steps; the per-step losses and gradient norms compared with the
# reference's within the bounds written there (relative; GPU: 1e-4, CP 2e-3). Results under
# $OUT (default bench/results/gpu_multi_check): one report a layout (LAYOUT.json), its log,
# summary.json.
#
#   bash bench/gpu_multi_check.sh run    # on the machine with the GPUs (see bench/gpu_check.sh
#                                        # prepare for the wheels it may need)
#   bash bench/gpu_multi_check.sh dry    # anywhere (also: smoke, or DRY=1 ... run): the same
#                                        # layouts on CPU ranks with gloo, 2 steps at 32 tokens
#
# LAYOUTS="dp2 pp2" runs only those layouts (their references always run). Exit status: 0 all
# passed, 1 a layout failed, 3 (run) a layout was skipped (fewer than 2 GPUs).
set -uo pipefail

PHASE="${1:-run}"
case "$PHASE" in smoke) PHASE=dry ;; esac
[ "${DRY:-0}" = 1 ] && [ "$PHASE" = run ] && PHASE=dry
if [ "$PHASE" != "run" ] && [ "$PHASE" != "dry" ]; then
    echo "usage: bash bench/gpu_multi_check.sh [run|dry]" >&2
    exit 2
fi
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
# A real run: the image's python3 (a GPU image has torch with CUDA); a dry run: the project's
# .venv where there is one.
DEFAULT_PY=python3
[ "$PHASE" = dry ] && [ -x "$REPO/.venv/bin/python" ] && DEFAULT_PY="$REPO/.venv/bin/python"
PY="${PYTHON:-$DEFAULT_PY}"
# shellcheck source=bench/_gpu_steps.sh
source "$REPO/bench/_gpu_steps.sh"
open_results gpu_multi_check
# Carried wheels installed by a gpu_check.sh run on this machine (fla-core for model.kernels).
[ -d /tmp/gpu_check_site ] && export PYTHONPATH="/tmp/gpu_check_site${PYTHONPATH:+:$PYTHONPATH}"

DRYFLAG=()
[ "$PHASE" = dry ] && DRYFLAG=(--dry)
layout() {  # layout NAME LIMIT_S: a step of bench/_layout_check.py
    step "$1" "$2" "$PY" bench/_layout_check.py "$1" ${DRYFLAG[@]+"${DRYFLAG[@]}"} \
        --out "$OUT/$1.json"
}
wanted() { [ -z "${LAYOUTS:-}" ] || [[ " $LAYOUTS " == *" $1 "* ]]; }

if [ "$PHASE" = run ]; then
    step env 120 "$PY" bench/_gpu_env.py
    cp "$OUT/env.log" "$OUT/env.txt"
fi
if wanted dp2 || wanted tp2 || wanted cp2 || wanted pp2; then
    layout one_rank 300
    for name in dp2 tp2 cp2 pp2; do
        wanted "$name" && layout "$name" 300
    done
fi
if wanted ep2; then
    layout moe_one_rank 300
    layout ep2 300
fi

summarize gpu_multi_check "$PHASE"
