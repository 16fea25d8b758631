#!/usr/bin/env bash
# The GPU check of the Gated DeltaNet kernels, in one go (sized for < 8 minutes on one H200):
#
#   1. the parity tests, kernel path vs torch path, forward and backward, fp32 and bf16
#      (tests/torch/ut/models/test_qwen3_5_kernels.py, with the CPU dispatch tests), -rs so a
#      skip shows its reason; every measured error ratio goes to parity_ratios.json;
#   2. the throughput of the 0.8b flavor through the real trainer (bf16 mixed precision, FSDP on
#      one rank), model.kernels=torch and =fla interleaved: tokens/s, MFU, the speed-up.
#
# Two phases, because the GPU machine reaches no package index:
#
#   bash bench/gpu_check.sh prepare   # where pip reaches PyPI: the wheels the GPU image lacks
#                                     # (fla-core, torchdata) into .whl/ (git-ignored)
#   bash bench/gpu_check.sh run       # on the GPU machine, from the repository root: installs
#                                     # .whl/*.whl when present, then 1. and 2.
#
# `run` writes under $OUT (default bench/results/gpu_check): env.txt, parity.log, parity.xml,
# parity_ratios.json, bench.log, gpu_throughput.json and summary.json (fla-core there or not,
# the tests' counts, the figures). It says plainly when fla-core is missing: the parity tests are
# then skipped with that reason and the bench reports the fla choice's error.
set -uo pipefail

PHASE="${1:-run}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
WHEELS="${WHEELS:-.whl}"
PY="${PYTHON:-python3}"
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
if [ "$PHASE" != "run" ]; then
    echo "usage: bash bench/gpu_check.sh [prepare|run]" >&2
    exit 2
fi

OUT="${OUT:-$REPO/bench/results/gpu_check}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HYPER_PARALLEL_DISABLE_TQDM=1
SECONDS=0

# ---- 0. the wheels, when carried (the `gpu` extra cannot be fetched there) -----------------
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/gpu_check_site "$WHEELS"/*.whl \
        && export PYTHONPATH="/tmp/gpu_check_site${PYTHONPATH:+:$PYTHONPATH}" \
        || echo "WARNING: installing $WHEELS/*.whl failed" >&2
else
    echo "no $WHEELS/*.whl: using what the image has (run 'bash bench/gpu_check.sh prepare' where pip works, and carry $WHEELS)" >&2
fi

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    "$PY" - <<'EOF'
import importlib, torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
for name in ("triton", "fla", "causal_conv1d", "torchdata", "einops"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "?"))
    except Exception as exc:  # noqa: BLE001
        print(name, "MISSING:", type(exc).__name__, exc)
from hyper_parallel.models.qwen3_5 import kernels
fla = kernels._load_fla()
print("fla-core kernels:", "MISSING: " + fla if isinstance(fla, str) else "importable")
print("causal-conv1d:", "importable" if kernels._load_causal_conv1d() else "not installed (fla-core's conv is used)")
EOF
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
grep -q "fla-core kernels: MISSING" "$OUT/env.txt" \
    && echo "FLA-CORE IS MISSING: the parity tests will be skipped and the fla bench will fail; carry the wheels (see the header of this script)" >&2

# ---- 1. parity tests --------------------------------------------------------------------------
HYPER_PARALLEL_KERNEL_REPORT="$OUT/parity_ratios.json" timeout 200 "$PY" -m pytest -q -rs \
    -p no:randomly -p no:cacheprovider --junitxml="$OUT/parity.xml" \
    tests/torch/ut/models/test_qwen3_5_kernels.py \
    tests/torch/ut/models/test_qwen3_5_kernel_dispatch.py 2>&1 | tee "$OUT/parity.log"
PARITY_RC=${PIPESTATUS[0]}
echo "parity tests: rc=$PARITY_RC after ${SECONDS}s"

# ---- 2. throughput, kernels on and off ---------------------------------------------------------
if grep -q -- "--gpu" bench/bench_train.py 2>/dev/null; then
    BENCH=(bench/bench_train.py --gpu --out "$OUT/gpu_throughput.json")
else
    BENCH=(bench/_gpu_throughput.py --out "$OUT/gpu_throughput.json")
fi
timeout 240 "$PY" "${BENCH[@]}" 2>&1 | tee "$OUT/bench.log"
BENCH_RC=${PIPESTATUS[0]}
echo "bench: rc=$BENCH_RC after ${SECONDS}s"

# ---- summary ------------------------------------------------------------------------------------
PARITY_RC=$PARITY_RC BENCH_RC=$BENCH_RC ELAPSED=$SECONDS "$PY" - "$OUT" <<'EOF'
import json, os, sys, xml.etree.ElementTree as ET
from pathlib import Path

out = Path(sys.argv[1])
env = (out / "env.txt").read_text() if (out / "env.txt").exists() else ""
summary = {
    "fla_core_available": "fla-core kernels: importable" in env,
    "causal_conv1d_available": "causal-conv1d: importable" in env,
    "parity_rc": int(os.environ["PARITY_RC"]),
    "bench_rc": int(os.environ["BENCH_RC"]),
    "elapsed_s": int(os.environ["ELAPSED"]),
}
try:
    suite = ET.parse(out / "parity.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    summary["parity_tests"] = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
except Exception as exc:  # noqa: BLE001
    summary["parity_tests"] = f"no junit report: {exc}"
try:
    ratios = json.loads((out / "parity_ratios.json").read_text())
    summary["worst_ratio_over_tol"] = max(r["ratio"] / r["tol"] for r in ratios)
except Exception:  # noqa: BLE001
    pass
try:
    bench = json.loads((out / "gpu_throughput.json").read_text())
    summary["bench"] = {
        name: {k: rec.get(k) for k in ("tokens_per_s", "mfu", "median_step_s", "error") if k in rec}
        for name, rec in bench.get("choices", {}).items()
    }
    summary["bench"].update({k: v for k, v in bench.items() if k.startswith(("speedup", "max_loss"))})
except Exception as exc:  # noqa: BLE001
    summary["bench"] = f"no bench result: {exc}"
text = json.dumps(summary, indent=2)
(out / "summary.json").write_text(text + "\n")
print(text)
EOF
[ "$PARITY_RC" -eq 0 ] && [ "$BENCH_RC" -eq 0 ]
