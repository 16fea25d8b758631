# The step runner of bench/gpu_check.sh and bench/gpu_multi_check.sh (sourced, not run).
#
# A step is one command with a time limit. Its output goes to the terminal and to $OUT/NAME.log;
# its exit status and seconds to a line of $OUT/steps.jsonl. A failed step does not stop the
# script -- the next steps still run, so one broken check hides no other -- but it is recorded,
# and bench/_gpu_summary.py then writes summary.json (pass / fail / skipped / partial per step,
# from the step's own report $OUT/NAME.json where it writes one) and sets the script's exit
# status: 1 when a step failed, 3 (a real run only) when a step was skipped or partial.
#
# Needs: REPO, PHASE and PY (the interpreter); open_results sets OUT.

# open_results NAME: OUT, the results folder (a new temporary one in a dry run, else
# bench/results/NAME; $OUT when set), without an earlier run's records; the environment of
# every step; the clock.
open_results() {
    if [ "$PHASE" = dry ]; then
        OUT="${OUT:-$(mktemp -d -t "$1_dry.XXXXXX")}"
    else
        OUT="${OUT:-$REPO/bench/results/$1}"
    fi
    mkdir -p "$OUT"
    rm -f "$OUT/steps.jsonl" "$OUT/summary.json"
    export PYTHONUNBUFFERED=1 HYPER_PARALLEL_DISABLE_TQDM=1
    SECONDS=0
    echo "$1 ($PHASE): results under $OUT"
}

# step NAME LIMIT_S COMMAND...
step() {
    local name="$1" limit="$2"
    shift 2
    local start=$SECONDS
    rm -f "$OUT/$name.json"  # a report left by an earlier run must not speak for this one
    echo "==== step $name (limit ${limit}s): $*"
    timeout --kill-after=30 "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
    local rc=${PIPESTATUS[0]}
    printf '{"step": "%s", "rc": %d, "seconds": %d}\n' "$name" "$rc" $((SECONDS - start)) \
        >> "$OUT/steps.jsonl"
    if [ "$rc" -eq 0 ]; then
        echo "==== step $name: exit 0 after $((SECONDS - start))s"
    else
        echo "==== step $name: FAILED (exit $rc$([ "$rc" -ge 124 ] && echo ', timed out or killed')) after $((SECONDS - start))s" >&2
    fi
}

# skip_step NAME REASON: a step this run does not make, with the reason (printed and recorded).
skip_step() {
    local name="$1" reason="${2//\"/\'}"
    echo "==== step $name: skipped ($reason)"
    printf '{"step": "%s", "skipped": "%s"}\n' "$name" "$reason" >> "$OUT/steps.jsonl"
}

# summarize SCRIPT MODE: write $OUT/summary.json, print it; returns the script's exit status.
summarize() {
    ELAPSED=$SECONDS "$PY" "$REPO/bench/_gpu_summary.py" "$OUT" --script "$1" --mode "$2"
}
