#!/usr/bin/env bash
# tests/zero_cli.sh — sz-train under mpiexec: N_d ranks with --batch B equal one rank with
# --batch N_d*B (the same global batch) to float rounding, for every ZeRO stage: same losses and
# same gradient norms; and --json ends with the memory/communication report (AdamW's states labelled
# adamw state adam_m, adam_v).
# Usage: zero_cli.sh BUILD_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
corpus="GPL-3 LGPL-3 Apache-2.0"
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, field, close, the corpus $dir/lic_{train,val}.bin (or skipped)

run() { # NP BATCH STAGE MICRO [CLIP] -> json lines
    timeout 120 "$mpiexec" -n "$1" "$bin/sz-train" --config 2,2,32 --vocab 256 --max-seq 32 \
        --train "$dir/lic_train.bin" --batch "$2" --seq 16 --steps 3 --lr 1e-3 --grad-clip "${5:-1.0}" \
        --zero-stage "$3" --micro-batches "$4" --json
}

run 1 4 0 1 >"$dir/ref.json" || fail "single-rank reference run"
# the report names AdamW's states by their own names (sz_mem_category_label)
tail -1 "$dir/ref.json" | grep -q '"adamw state adam_m": [1-9].*"adamw state adam_v": [1-9]' ||
    fail "the report does not label AdamW's m and v by their state names: $(tail -1 "$dir/ref.json")"
for stage in 0 1 2 3; do
    for np in 2 4; do
        run $np $((4 / np)) $stage 1 >"$dir/s$stage.n$np.json" || fail "stage $stage np $np exited non-zero"
        paste <(field loss <"$dir/ref.json") <(field loss <"$dir/s$stage.n$np.json") | while read -r a b; do
            close "$a" "$b" 1e-4 || { echo "FAIL: stage $stage np $np loss $b vs single rank $a"; exit 1; }
        done || exit 1
        a=$(field grad_norm <"$dir/ref.json" | head -1); b=$(field grad_norm <"$dir/s$stage.n$np.json" | head -1)
        close "$a" "$b" 1e-5 || fail "stage $stage np $np first gradient norm $b vs single rank $a"
        tail -1 "$dir/s$stage.n$np.json" | grep -q '"model_state_bytes_formula"' || fail "no final report line"
    done
    echo "stage $stage: 2 and 4 ranks match one rank with the same global batch"
done
# micro-batches: 2 ranks x batch 1 x 2 micro-batches = one rank with batch 4
run 2 1 2 2 >"$dir/mb.json" || fail "micro-batch run"
a=$(field grad_norm <"$dir/ref.json" | head -1); b=$(field grad_norm <"$dir/mb.json" | head -1)
close "$a" "$b" 1e-5 || fail "2 ranks x 2 micro-batches: first gradient norm $b vs $a"
# without clipping AdamW takes each rank's shard norm in its own pass: the same global norms
run 1 4 0 1 0 >"$dir/ref0.json" || fail "single-rank run without clipping"
for stage in 1 3; do
    run 2 2 $stage 1 0 >"$dir/nc$stage.json" || fail "stage $stage np 2 without clipping"
    paste <(field grad_norm <"$dir/ref0.json") <(field grad_norm <"$dir/nc$stage.json") | while read -r a b; do
        close "$a" "$b" 1e-4 || { echo "FAIL: no clipping, stage $stage np 2: gradient norm $b vs single rank $a"; exit 1; }
    done || exit 1
done
echo "without clipping: the gradient norms of 2 ranks at stages 1 and 3 match one rank's"
echo "zero_cli: all checks passed"
