#!/usr/bin/env bash
# tests/agree_cli.sh — ranks that disagree are refused before anything is allocated: 2 ranks started
# with different options (MPMD: `mpiexec -n 1 sz-train A : -n 1 sz-train B`) must both exit non-zero
# within 10 s (the runtime's start included), each printing the one message that names the first
# differing setting and both ranks' values, no step run; through the shared-memory transport and
# through MPI's collectives (SZ_COLLECTIVES=mpi). A matching pair still trains. Ranks on two nodes
# (SZ_HOST_NAME) are named with their node. Compared too: the schedule, --save-state, --json and the
# other options that decide when ranks communicate, and the whole contents of the data files (a hash).
# Usage: agree_cli.sh BUILD_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_{train,val}.bin (or skipped)
base="--config d2 --vocab 256 --max-seq 64 --train $dir/lic_train.bin --batch 4 --seq 32 --steps 2"

# pair NAME "ARGS_A" "ARGS_B" EXPECTED: both ranks refuse, each with the message naming EXPECTED
pair() {
    local name=$1 a=$2 b=$3 want=$4 t0 t1 rc
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    timeout 60 "$mpiexec" -n 1 "$bin/sz-train" $base $a : -n 1 "$bin/sz-train" $base $b >"$dir/out.txt" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    [ $rc -ne 0 ] || { cat "$dir/out.txt"; fail "$name: exit 0 although the ranks disagree"; }
    [ $rc -ne 124 ] || { cat "$dir/out.txt"; fail "$name: hung (killed by timeout)"; }
    for r in 0 1; do
        grep -q "\[starzero r$r\] error: sz-train: the ranks disagree on $want" "$dir/out.txt" ||
            { cat "$dir/out.txt"; fail "$name: rank $r does not name '$want'"; }
        grep -q "sz-train: rank $r stops" "$dir/out.txt" || { cat "$dir/out.txt"; fail "$name: rank $r did not stop"; }
    done
    grep -q '^step' "$dir/out.txt" && fail "$name: a step ran"
    awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 10) }' || fail "$name: took $(echo "$t1 - $t0" | bc) s (> 10 s)"
    echo "$name (${COLL:-shm}): $(grep -m1 'the ranks disagree' "$dir/out.txt" | sed 's/.*error: //')"
}

for coll in shm mpi; do
    export SZ_COLLECTIVES=$coll COLL=$coll
    pair "stage 0 vs 1" "--zero-stage 0" "--zero-stage 1" "--zero-stage: 0 on rank 0; 1 on rank 1"
    pair "stage 3 vs 2" "--zero-stage 3" "--zero-stage 2" "--zero-stage: 3 on rank 0; 2 on rank 1"
    pair "config d2 vs d6" "" "--config d6" "the model (--config/--init, --vocab, --max-seq): L=2 H=4 C=128"
    pair "batch" "--batch 4" "--batch 2" "--batch: 4 on rank 0; 2 on rank 1"
    pair "seq" "--seq 32" "--seq 16" "--seq: 32 on rank 0; 16 on rank 1"
    pair "seed" "--seed 1" "--seed 2" "--seed: 1 on rank 0; 2 on rank 1"
    pair "lr" "--lr 3e-4" "--lr 1e-3" "--lr: 0.000300000014 on rank 0; 0.00100000005 on rank 1"
    pair "precision" "--precision fp32" "--precision bf16" "--precision: fp32 on rank 0; bf16 on rank 1"
    pair "steps" "--steps 2" "--steps 3" "--steps: 2 on rank 0; 3 on rank 1"
    pair "budget on one rank" "--mem-budget 5M" "" "--mem-budget: 5000000 bytes on rank 0; not given (the machine's) on rank 1"
done
unset SZ_COLLECTIVES COLL
# a different data file (same size, other contents: the header's token count is the same, the rest too;
# so make one of another size)
head -c 20000 /usr/share/common-licenses/GPL-3 >"$dir/short.txt"
"$bin/sz-prepare" --out-dir "$dir" --prefix short "$dir/short.txt" >/dev/null || fail "sz-prepare short"
pair "train file" "" "--train $dir/short_train.bin" "the --train file:"
# what decides when the ranks communicate: the schedule, saving, reports, JSON lines
pair "warmup" "--warmup 2" "" "the schedule (--warmup, --lr-schedule, --min-lr): 2 constant 0 on rank 0; 0 constant 0 on rank 1"
pair "json on one rank" "--json" "" "--json: given on rank 0; not given on rank 1"
pair "save-state on one rank" "" "--save-state $dir/st1" "--save-state: not given on rank 0; given on rank 1"
# the same size, other contents (one token changed): the whole file's hash differs
cp "$dir/lic_train.bin" "$dir/changed.bin"
printf 'A' | dd of="$dir/changed.bin" bs=1 seek=5000 conv=notrunc status=none
pair "train file contents" "" "--train $dir/changed.bin" "the --train file: [0-9]* bytes, contents hash"

# ranks on several nodes: each value names its ranks' node (SZ_HOST_NAME stands for the name
# MPI_Get_processor_name gives on a real second node)
timeout 60 "$mpiexec" -n 1 env SZ_HOST_NAME=nodeA "$bin/sz-train" $base --seed 1 : \
    -n 1 env SZ_HOST_NAME=nodeB "$bin/sz-train" $base --seed 2 >"$dir/out.txt" 2>&1
grep -q "the ranks disagree on --seed: 1 on rank 0 (on nodeA); 2 on rank 1 (on nodeB)" "$dir/out.txt" ||
    { cat "$dir/out.txt"; fail "two nodes: the message does not name each rank's node"; }
echo "two nodes: $(grep -m1 'the ranks disagree' "$dir/out.txt" | sed 's/.*error: //')"

# the library's own check, for any app: sz_model_finalize compares units and the ZeRO config
# (sz-train's check comes first, so it is exercised by test_zero's agree case); the check mode, an
# environment switch sz-train does not see, is the library's: on one rank only, refused, named
# shellcheck disable=SC2086
timeout 60 "$mpiexec" -n 1 env SZ_CHECK=1 "$bin/sz-train" $base : -n 1 "$bin/sz-train" $base >"$dir/out.txt" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$dir/out.txt"; fail "SZ_CHECK on one rank: exit $rc"; }
grep -q "sz_model_finalize: the ranks' lists of settings differ: the check mode (sz_zero_config.check, SZ_CHECK) = on on rank 0" \
    "$dir/out.txt" || { cat "$dir/out.txt"; fail "SZ_CHECK on one rank: not named"; }
grep -q '^step' "$dir/out.txt" && fail "SZ_CHECK on one rank: a step ran"
echo "the check mode on one rank: refused at sz_model_finalize, named"

# agreeing ranks still train
# shellcheck disable=SC2086
timeout 60 "$mpiexec" -n 1 "$bin/sz-train" $base --zero-stage 2 : -n 1 "$bin/sz-train" $base --zero-stage 2 \
    >"$dir/ok.txt" 2>&1 || { cat "$dir/ok.txt"; fail "agreeing ranks refused"; }
grep -q '^step    2/2' "$dir/ok.txt" || { cat "$dir/ok.txt"; fail "agreeing ranks did not train"; }
echo "agreeing ranks train"
