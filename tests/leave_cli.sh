#!/usr/bin/env bash
# tests/leave_cli.sh — a rank that fails alone ends the job in seconds (sched/deadline.c: a rank that
# frees its context tells the others; one waiting in a collective for it stops the job, exit 5, with
# the leaver's last error), not at the collectives' deadline (600 s by default). Two ranks, each case
# within 10 s, the message checked:
#  1. a step failing on one rank only (the test hook SZ_TEST_FAIL_ROUND_SCRATCH=1 on rank 1, bf16),
#     in both transports (shared memory, and MPI: SZ_COLLECTIVES=mpi);
#  2. a --save-state directory one rank cannot create (the options agree: "given" on both);
#  3. a --train file that differs on one rank (refused by every rank: the start-up agreement);
#  4. a library app (tests/test_leave.c) whose rank 1 logs an error and frees its context while rank 0
#     enters a collective; and every rank failing alike ends normally (exit 0).
# Usage: leave_cli.sh BUILD_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_{train,val}.bin (or skipped)
args=(--config d2 --vocab 256 --max-seq 64 --train "$dir/lic_train.bin" --batch 2 --seq 32 --steps 50)

# lone NAME WORDS... -- MPMD-ARGS...: the job ends within 10 s, non-zero, its output holding every WORD
lone() {
    local name=$1; shift
    local words=()
    while [ "$1" != "--" ]; do words+=("$1"); shift; done
    shift
    local t0 t1 rc
    t0=$(date +%s.%N)
    timeout 60 "$mpiexec" "$@" >"$dir/$name.txt" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    local took
    took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    [ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat "$dir/$name.txt"; fail "$name: exit $rc (want non-zero, not the timeout)"; }
    awk -v t="$took" 'BEGIN { exit !(t < 10) }' || { cat "$dir/$name.txt"; fail "$name: the job took $took s (>= 10 s)"; }
    for w in "${words[@]}"; do
        grep -qF -- "$w" "$dir/$name.txt" || { cat "$dir/$name.txt"; fail "$name: no '$w' in the output"; }
    done
    echo "$name: ended in $took s, exit $rc: $(grep -m1 -o -e 'rank 1 left the job.\{0,120\}' -e "${words[0]}" "$dir/$name.txt")"
}

for coll in shm mpi; do
    lone "step_$coll" "rank 1 left the job" "its last error: bwd:" "out of memory (the gradients' rounding scratch)" -- \
        -n 1 env SZ_COLLECTIVES=$coll "$bin/sz-train" "${args[@]}" --precision bf16 : \
        -n 1 env SZ_COLLECTIVES=$coll SZ_TEST_FAIL_ROUND_SCRATCH=1 "$bin/sz-train" "${args[@]}" --precision bf16
done
lone save_state "--save-state /proc/sz-nowhere/st: cannot create the directory" -- \
    -n 1 "$bin/sz-train" "${args[@]}" --save-state "$dir/ok.st" : \
    -n 1 "$bin/sz-train" "${args[@]}" --save-state /proc/sz-nowhere/st
: >"$dir/empty.bin"
lone train_file "the ranks disagree on the --train file" -- -n 1 "$bin/sz-train" "${args[@]}" : \
    -n 1 "$bin/sz-train" "${args[@]/$dir\/lic_train.bin/$dir/empty.bin}"
lone app "rank 1 left the job" "its last error: test_leave: rank 1 cannot open its input" -- -n 2 "$bin/tests/test_leave"
timeout 60 "$mpiexec" -n 2 "$bin/tests/test_leave" all >"$dir/all.txt" 2>&1 ||
    { cat "$dir/all.txt"; fail "every rank failing alike: not a normal end"; }
grep -q "left the job" "$dir/all.txt" && { cat "$dir/all.txt"; fail "every rank failing alike: a rank said another left"; }
echo "every rank failing alike: a normal end"
