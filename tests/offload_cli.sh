#!/usr/bin/env bash
# tests/offload_cli.sh — ZeRO-Offload (--offload-optimizer) on CPU-only ranks: refused before any
# step, with the reason (no CUDA worker: nothing to offload from), exit code != 0, on one rank and
# on two; its DeepSpeed spelling (zero_optimization.offload_optimizer.device "cpu") maps to it. The
# offload itself needs a GPU: scripts/gpu-check.sh's `offload` part compares it with no offload.
# Runs with STARPU_NCUDA=0, so the refusal is tested on a GPU machine too.
# Usage: offload_cli.sh BUILD_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
export STARPU_NCUDA=0
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_{train,val}.bin (or skipped)
args=(--config d2 --vocab 256 --max-seq 64 --train "$dir/lic_train.bin" --batch 4 --seq 32 --steps 2)
check() { # NAME FILE
    grep -q "offload-optimizer (ZeRO-Offload) moves the optimizer from the GPU to the CPU, but this rank has no CUDA worker" "$2" &&
        grep -q "Drop --offload-optimizer" "$2" ||
        { cat "$2"; fail "$1: the refusal does not give the reason"; }
    grep -q '^step' "$2" && fail "$1: a step ran before the refusal"
    echo "$1: refused: $(grep -m1 'offload-optimizer' "$2" | cut -c1-150)..."
}
if timeout 60 "$bin/sz-train" "${args[@]}" --offload-optimizer >"$dir/one.txt" 2>&1; then
    cat "$dir/one.txt"; fail "--offload-optimizer was accepted on a CPU-only rank"
fi
check "1 rank" "$dir/one.txt"
if timeout 120 "$mpiexec" -n 2 "$bin/sz-train" "${args[@]}" --zero-stage 2 --offload-optimizer >"$dir/two.txt" 2>&1; then
    cat "$dir/two.txt"; fail "--offload-optimizer was accepted on 2 CPU-only ranks"
fi
check "2 ranks" "$dir/two.txt"
cat >"$dir/ds.json" <<'JSON'
{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}}
JSON
if timeout 60 "$bin/sz-train" "${args[@]}" --ds-config "$dir/ds.json" >"$dir/ds.txt" 2>&1; then
    cat "$dir/ds.txt"; fail "the DeepSpeed offload_optimizer was accepted on a CPU-only rank"
fi
grep -q "offload_optimizer = .* -> --offload-optimizer" "$dir/ds.txt" || { cat "$dir/ds.txt"; fail "ds-config: offload_optimizer not mapped"; }
check "ds-config" "$dir/ds.txt"
# without the option, the same run trains
timeout 60 "$bin/sz-train" "${args[@]}" >"$dir/plain.txt" 2>&1 || { cat "$dir/plain.txt"; fail "the plain run failed"; }
echo "PASS"
