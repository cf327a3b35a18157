#!/usr/bin/env bash
# The GPU check (issue 26 §6): one pass/fail line per part, in under 8 minutes on a GPU machine.
#
#   benchmarks/gpu_check.sh            # on a GPU machine: install the gpu extra, then every part
#   benchmarks/gpu_check.sh --dry-run  # on CPU: the same parts at the smallest size, gloo, no engine
#
# Parts: install (pip install -e ".[gpu]"), fixture (a Qwen2-architecture model from a config),
# sample (vLLM on CUDA), fsdp (one FSDP bf16 step over NCCL, 2 ranks if there are 2 GPUs, else 1),
# sync (a CUDA learner's weights into a CUDA engine, direct path), grpo (5 GRPO steps via the CLI).
# Exit status: the number of failed parts.
set -u
cd "$(dirname "$0")/.."
DRY=""
[ "${1:-}" = "--dry-run" ] && DRY="--dry-run"
PY=${PYTHON:-python}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
export VLLM_ENABLE_V1_MULTIPROCESSING=${VLLM_ENABLE_V1_MULTIPROCESSING:-0}
FAILED=0

part() {  # part NAME LIMIT_S COMMAND...
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    if timeout "$limit" "$@" >"$WORK/$name.log" 2>&1; then
        printf 'PASS %-8s %4ds\n' "$name" $((SECONDS - t0))
    else
        FAILED=$((FAILED + 1))
        printf 'FAIL %-8s %4ds  %s (log: %s)\n' "$name" $((SECONDS - t0)) \
            "$(grep -v '^\s*$' "$WORK/$name.log" | tail -n 1 | cut -c1-160)" "$WORK/$name.log"
    fi
}

if [ -n "$DRY" ]; then
    printf 'SKIP %-8s %4ds  dry run: the gpu extra is not installed\n' install 0
else
    part install 240 "$PY" -m pip install -q -e ".[gpu]"
fi
part fixture 60 "$PY" benchmarks/gpu_check.py fixture "$WORK" $DRY
part sample 120 "$PY" benchmarks/gpu_check.py sample "$WORK" $DRY
part fsdp 120 "$PY" benchmarks/gpu_check.py fsdp "$WORK" $DRY
part sync 120 "$PY" benchmarks/gpu_check.py sync "$WORK" $DRY
part grpo 240 "$PY" benchmarks/gpu_check.py grpo "$WORK" $DRY
echo "gpu_check: $FAILED failed${DRY:+ (dry run on $(uname -m) CPU)}"
exit "$FAILED"
