#!/usr/bin/env bash
# tests/devwatch_cli.sh — the run-time device-memory check stops every rank, on CPUs: its host-node
# analogue (SZ_DEVWATCH_BUDGET on CPU-only ranks: StarPU's main-RAM allocations against that
# figure, tasks/devwatch.c) takes the same path a GPU over its budget does. 2 ranks, GPT-2 d2,
# stage 3 bf16 (StarPU allocates the gathered units and working copies):
#  1. rank 0 alone over (MPMD: rank 1 has a large figure): after step 1 both stop, non-zero, well
#     inside the timeout (no hang); rank 0 names main RAM, the node, the step, the figures and what
#     to do; rank 1 says rank 0 was over and that it stops with it; no step 2;
#  2. a figure above what StarPU allocates: the run completes, losses as without the check.
# Usage: devwatch_cli.sh BUILD_DIR MPIEXEC
set -u
bin=$1
mpiexec=${2:-mpiexec}
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_{train,val}.bin (or skipped)
args=(--config d2 --vocab 256 --max-seq 32 --train "$dir/lic_train.bin" --batch 2 --seq 32 --steps 3 --zero-stage 3
      --precision bf16 --json)
t0=$(date +%s)
if timeout 120 "$mpiexec" -np 1 env SZ_DEVWATCH_BUDGET=1000 "$bin/sz-train" "${args[@]}" : \
    -np 1 env SZ_DEVWATCH_BUDGET=1000000000000 "$bin/sz-train" "${args[@]}" >"$dir/over.txt" 2>&1; then
    cat "$dir/over.txt"; fail "a rank over SZ_DEVWATCH_BUDGET did not stop the run"
fi
took=$(($(date +%s) - t0))
[ "$took" -lt 60 ] || fail "stopping took $took s (a wait somewhere)"
grep -q "device memory over the budget: rank 0, main RAM (StarPU memory node 0), step 1: StarPU's allocations there" \
    "$dir/over.txt" || { cat "$dir/over.txt"; fail "rank 0 does not name main RAM, the node and the step"; }
grep -q "over the 0.0 MB SZ_DEVWATCH_BUDGET gives the run-time check.*raise it to at least [0-9.]* MB" "$dir/over.txt" ||
    { cat "$dir/over.txt"; fail "rank 0's message lacks the figures or what to do"; }
grep -q "device memory over the budget on rank 0 after step 1 (its message gives the figures and what to do): rank 1 stops with it" \
    "$dir/over.txt" || { cat "$dir/over.txt"; fail "rank 1 does not say why it stops"; }
grep -q '"step": 2' "$dir/over.txt" && fail "a step ran after the check stopped the run"
echo "rank 0 over: both ranks stopped after step 1 in $took s: $(grep -m1 -o 'device memory over the budget: rank 0.*MB, over' "$dir/over.txt")"

losses() { grep '"loss"' | sed 's/.*"loss": \([-0-9.e]*\).*/\1/'; }
SZ_DEVWATCH_BUDGET=1000000000000 timeout 120 "$mpiexec" -np 2 "$bin/sz-train" "${args[@]}" >"$dir/fit.txt" 2>&1 ||
    { cat "$dir/fit.txt"; fail "a figure above StarPU's allocations stopped the run"; }
timeout 120 "$mpiexec" -np 2 "$bin/sz-train" "${args[@]}" >"$dir/plain.txt" 2>&1 || fail "the run without the check"
[ "$(losses <"$dir/fit.txt")" = "$(losses <"$dir/plain.txt")" ] && [ -n "$(losses <"$dir/fit.txt")" ] ||
    fail "losses differ with the check on"
echo "within the figure: 3 steps, losses bitwise those without the check"
