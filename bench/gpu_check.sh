#!/usr/bin/env bash
# The GPU checks on one GPU, in one go (an H200: about 10 minutes, and 3-4 more for (g); not yet
# measured -- see docs/architecture.md, "GPU checks"). Each numbered item is a step
# (bench/_gpu_steps.sh): its own process and time limit, its log and report under $OUT,
# pass / fail / skipped / partial in $OUT/summary.json; a failed step does not stop the next
# ones, it fails the script.
#
#   env            the device, torch, CUDA, fla-core, causal-conv1d (env.txt)
#   parity         the kernel parity tests, fla vs torch path, forward and backward, fp32 and
#                  bf16 (tests/torch/ut/models/test_qwen3_5_kernels.py, with the CPU dispatch
#                  tests), -rs so a skip shows its reason; every error ratio to parity_ratios.json
#   throughput     the 0.8b flavor through the real trainer (bf16, FSDP on one rank),
#                  model.kernels torch and fla interleaved: tokens/s, MFU, the speed-up
#                  (gpu_throughput.json)
#   state_passing  (a) context parallelism's state-passing Gated DeltaNet on the fla kernels and
#                  the torch path, fp32 and bf16, against the one-rank torch path; the bf16 read
#                  matrix's error shown apart (bench/_check_state_passing.py)
#   grouped_mm     (b) torch._grouped_mm experts in bf16 against the per-expert loop
#                  (bench/_check_grouped_mm.py)
#   compile_fla    (c) torch.compile of the debug model on the fla kernels against eager
#                  (bench/_check_compile.py)
#   deterministic  (d) debug.deterministic: two trainer runs, losses bit-identical
#                  (bench/_check_determinism.py)
#   fake_pg_fsdp8  (e) one real trainer step of rank 0 of FSDP 8 (the 0.8b recipe) and of EP 8
#   fake_pg_ep8        (the MoE debug recipe), the other 7 ranks a fake process group: the rank's
#                      real memory, against preflight's prediction for that rank (within 20 %;
#                      bench/_check_fake_pg.py)
#   plan_fake_world  (g) the planner's compute on this GPU: rank 0 of five 8-rank layouts of the
#                  0.8b recipe (FSDP with and without full checkpointing, HSDP, TP 2 and CP 2
#                  inside FSDP), the other ranks a fake process group, each step against the
#                  predicted compute on the GPU's datasheet profile (bench/bench_plan_accuracy.py
#                  --fake-world 8; figures, no bound: plan_fake_world.json)
#   packing        (f) block_causal packed rows, bf16: the full attention on torch's varlen
#                  flash attention, the Gated DeltaNet on fla's cu_seqlens kernels and on the
#                  torch path, against the documents run alone on the torch path in fp32
#                  (bench/_check_packing.py)
#
# Three phases; the GPU machine reaches no package index:
#
#   bash bench/gpu_check.sh prepare   # where pip reaches PyPI: the wheels the GPU image lacks
#                                     # (fla-core, torchdata) into .whl/ (git-ignored)
#   bash bench/gpu_check.sh run       # on the GPU machine, from the repository root: installs
#                                     # .whl/*.whl when present, then every step
#   bash bench/gpu_check.sh dry       # anywhere (also: smoke, or DRY=1 ... run): every step's
#                                     # Python on the CPU in its cheapest form, what needs CUDA
#                                     # skipped with the reason; seconds (tests/bench runs it)
#
# STEPS="state_passing grouped_mm" runs only those steps (a device budget's subset). $OUT:
# default bench/results/gpu_check (a dry run: a new temporary folder). Exit status: 0 all
# passed (a dry run: nothing failed), 1 a step failed, 3 (run) a step was skipped or partial --
# fla-core missing, say: the script says so plainly, and which checks did not happen.
set -uo pipefail

PHASE="${1:-run}"
case "$PHASE" in smoke) PHASE=dry ;; esac
[ "${DRY:-0}" = 1 ] && [ "$PHASE" = run ] && PHASE=dry
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
WHEELS="${WHEELS:-.whl}"
# A real run: the image's python3 (a GPU image has torch with CUDA); a dry run: the project's
# .venv where there is one.
DEFAULT_PY=python3
[ "$PHASE" = dry ] && [ -x "$REPO/.venv/bin/python" ] && DEFAULT_PY="$REPO/.venv/bin/python"
PY="${PYTHON:-$DEFAULT_PY}"
FLA_CORE_VERSION="${FLA_CORE_VERSION:-0.6.0}"
TORCHDATA_VERSION="${TORCHDATA_VERSION:-0.11.0}"

if [ "$PHASE" = "prepare" ]; then
    mkdir -p "$WHEELS"
    grep -qx "/$WHEELS/" .git/info/exclude 2>/dev/null || echo "/$WHEELS/" >> .git/info/exclude
    # Pure-Python wheels: the GPU image has torch, triton, einops and the rest of the runtime.
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        -d "$WHEELS" "fla-core==$FLA_CORE_VERSION" "torchdata==$TORCHDATA_VERSION" || exit 1
    ls -l "$WHEELS"
    echo "carry '$WHEELS' to the GPU machine and run: bash bench/gpu_check.sh run"
    exit 0
fi
if [ "$PHASE" != "run" ] && [ "$PHASE" != "dry" ]; then
    echo "usage: bash bench/gpu_check.sh [prepare|run|dry]" >&2
    exit 2
fi

# shellcheck source=bench/_gpu_steps.sh
source "$REPO/bench/_gpu_steps.sh"
open_results gpu_check

# STEPS limits the run to the steps it names (unnamed steps are neither run nor recorded).
wanted() { [ -z "${STEPS:-}" ] || [[ " $STEPS " == *" $1 "* ]]; }
# The checks' cheapest CPU form in a dry run, even on a machine with CUDA.
CPU=()
[ "$PHASE" = dry ] && CPU=(--cpu)
check() {  # check STEP LIMIT_S CHECK [ARGS...]: a step of bench/_gpu_checks.py
    local name="$1" limit="$2" what="$3"
    shift 3
    wanted "$name" && step "$name" "$limit" "$PY" bench/_gpu_checks.py "$what" \
        ${CPU[@]+"${CPU[@]}"} --out "$OUT/$name.json" "$@"
}

# ---- the wheels, when carried (the `gpu` extra cannot be fetched there) ---------------------
if [ "$PHASE" = run ]; then
    if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/gpu_check_site "$WHEELS"/*.whl \
            && export PYTHONPATH="/tmp/gpu_check_site${PYTHONPATH:+:$PYTHONPATH}" \
            || echo "WARNING: installing $WHEELS/*.whl failed" >&2
    else
        echo "no $WHEELS/*.whl: using what the image has (run 'bash bench/gpu_check.sh prepare' where pip works, and carry $WHEELS)" >&2
    fi
fi

# ---- env ------------------------------------------------------------------------------------
if wanted env; then
    step env 120 "$PY" bench/_gpu_env.py
    cp "$OUT/env.log" "$OUT/env.txt"
    [ "$PHASE" = run ] && grep -q "fla-core kernels: MISSING" "$OUT/env.txt" \
        && echo "FLA-CORE IS MISSING: the fla halves of the checks will be skipped and the fla bench will fail; carry the wheels (see the header of this script)" >&2
fi

# ---- parity ---------------------------------------------------------------------------------
if wanted parity; then
    if [ "$PHASE" = run ]; then
        export HYPER_PARALLEL_KERNEL_REPORT="$OUT/parity_ratios.json"
        step parity 300 "$PY" -m pytest \
            -q -rs -p no:randomly -p no:cacheprovider --junitxml="$OUT/parity.xml" \
            tests/torch/ut/models/test_qwen3_5_kernels.py \
            tests/torch/ut/models/test_qwen3_5_kernel_dispatch.py
    else
        # Every test of the file needs CUDA; the suite collects it and runs the dispatch tests.
        skip_step parity "no CUDA in a dry run: the parity tests need a CUDA device"
    fi
fi

# ---- throughput -----------------------------------------------------------------------------
if wanted throughput; then
    if [ "$PHASE" = run ]; then
        step throughput 300 "$PY" bench/_gpu_throughput.py --out "$OUT/gpu_throughput.json"
    else
        step throughput 120 "$PY" bench/_gpu_throughput.py --dry-run \
            --out "$OUT/gpu_throughput.json"
    fi
fi

# ---- (a)-(f) --------------------------------------------------------------------------------
check state_passing 240 state_passing
check grouped_mm 180 grouped_mm
check compile_fla 420 compile_fla
check deterministic 360 deterministic
check fake_pg_fsdp8 300 fake_pg --layout fsdp8_0_8b
check fake_pg_ep8 240 fake_pg --layout ep8_moe_debugmodel
check packing 240 packing

# ---- (g) ------------------------------------------------------------------------------------
if wanted plan_fake_world; then
    if [ "$PHASE" = run ]; then
        step plan_fake_world 420 "$PY" bench/bench_plan_accuracy.py --fake-world 8 --rounds 1 \
            --out "$OUT/plan_fake_world.json"
    else
        step plan_fake_world 180 "$PY" bench/bench_plan_accuracy.py --fake-world 4 --smoke \
            --out "$OUT/plan_fake_world.json"
    fi
fi

# ---- summary --------------------------------------------------------------------------------
summarize gpu_check "$PHASE"
