#!/usr/bin/env bash
# tests/optimizer_cli.sh — the optimizer choice end to end (sz-train --optimizer sgd --momentum M):
#  1. strict options: an unknown optimizer, a momentum outside [0, 1) or not a number, --momentum
#     with AdamW are refused naming the option and the value; ranks started with different
#     optimizers or momenta refuse at start-up naming the setting (the agreement digest);
#  2. SGD with momentum: 2 ranks at stages 1 and 3 with the same global batch as one rank agree
#     with it within 1e-5 (losses, gradient norms), and stage 3 predicts its measured peak; the
#     memory report (JSON and text) labels the optimizer's states by SGD's own names (sgd state
#     momentum; without momentum also "sgd: no state 2"), not Adam's;
#  3. resumable state: 2 steps + --save-state, --resume to 4 gives bitwise the losses and
#     parameters of 4 straight steps (2 ranks, stage 2); the manifest records the optimizer and
#     its momentum file; resuming it with AdamW, or with SGD at momentum 0, is refused with the reason;
#     --ds-config's optimizer type SGD trains bitwise like the options it maps to;
#  4. sz-estimate --optimizer sgd: the model-state formula with 1 (momentum) or 0 fp32 states
#     per parameter (K = 8 / 4 under mixed precision).
# Usage: optimizer_cli.sh BUILD_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_{train,val}.bin (or skipped)
small=(--config 2,2,32 --vocab 256 --max-seq 32 --train "$dir/lic_train.bin" --seq 16 --lr 0.05 --grad-clip 1.0
       --optimizer sgd --momentum 0.9 --wd 0.01)
mpi() { local np=$1; shift; timeout 120 "$mpiexec" -n "$np" "$@"; }
expect() { # RC WORDS... -- ARGS...
    local want=$1; shift
    local words=()
    while [ "$1" != "--" ]; do words+=("$1"); shift; done
    shift
    timeout 120 "$bin/sz-train" "$@" >"$dir/out.txt" 2>&1
    local rc=$?
    [ "$rc" = "$want" ] || { cat "$dir/out.txt"; fail "exit $rc, not $want: $*"; }
    for w in "${words[@]}"; do
        grep -qF -- "$w" "$dir/out.txt" || { cat "$dir/out.txt"; fail "message lacks '$w': $*"; }
    done
    echo "ok ($rc): $(grep -m1 'sz-train' "$dir/out.txt")"
}

# 1. options
expect 2 "--optimizer lamb" "allowed: adamw, sgd" -- "${small[@]}" --steps 1 --optimizer lamb
expect 2 "--momentum 1" "out of range" -- "${small[@]}" --steps 1 --momentum 1
expect 2 "--momentum -0.1" "out of range" -- "${small[@]}" --steps 1 --momentum -0.1
expect 2 "--momentum 0.9x" "not a number" -- "${small[@]}" --steps 1 --momentum 0.9x
expect 2 "only --optimizer sgd has a momentum" -- "${small[@]}" --steps 1 --optimizer adamw
"$bin/sz-train" --help | grep -q -- "--optimizer adamw|sgd" || fail "--help lacks --optimizer"

# ranks started with different optimizers (MPMD) refuse before any step, naming the setting
base=(--config 2,2,32 --vocab 256 --max-seq 32 --train "$dir/lic_train.bin" --seq 16 --batch 2 --steps 1)
disagree() { # ARGS_RANK0 ARGS_RANK1 EXPECTED
    # shellcheck disable=SC2086
    timeout 60 "$mpiexec" -n 1 "$bin/sz-train" "${base[@]}" $1 : -n 1 "$bin/sz-train" "${base[@]}" $2 >"$dir/dis.txt" 2>&1
    local rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$dir/dis.txt"; fail "ranks with $1 / $2: exit $rc"; }
    grep -qF "the ranks disagree on $3" "$dir/dis.txt" || { cat "$dir/dis.txt"; fail "no disagreement on '$3'"; }
    grep -q '^step' "$dir/dis.txt" && fail "a step ran although the ranks disagree on $3"
    echo "ok: $(grep -m1 -o 'the ranks disagree on .*' "$dir/dis.txt")"
}
disagree "--optimizer sgd" "--optimizer adamw" "--optimizer: sgd on rank 0; adamw on rank 1"
disagree "--optimizer sgd --momentum 0.9" "--optimizer sgd --momentum 0.5" "--momentum: 0.899999976 on rank 0; 0.5 on rank 1"

# 2. one rank vs two with the same global batch
mpi 1 "$bin/sz-train" "${small[@]}" --batch 4 --steps 3 --json >"$dir/ref.json" || fail "one-rank SGD run"
for stage in 1 3; do
    mpi 2 "$bin/sz-train" "${small[@]}" --batch 2 --steps 3 --zero-stage $stage --json >"$dir/s$stage.json" \
        || fail "2 ranks stage $stage SGD"
    for k in loss grad_norm; do
        paste <(field $k <"$dir/ref.json") <(field $k <"$dir/s$stage.json") | while read -r a b; do
            close "$a" "$b" 1e-5 || { echo "FAIL: SGD stage $stage: $k $b vs one rank's $a"; exit 1; }
        done || exit 1
    done
    tail -1 "$dir/s$stage.json" | grep -q '"optimizer_state_floats": 1' || fail "stage $stage: report lacks the optimizer's state floats"
    # the report names the optimizer's states by their own names, never Adam's
    tail -1 "$dir/s$stage.json" | grep -q '"sgd state momentum": [1-9]' && ! tail -1 "$dir/s$stage.json" | grep -q 'Adam' \
        || fail "stage $stage: the report does not label SGD's momentum buffer by its state name: $(tail -1 "$dir/s$stage.json")"
    peak=$(tail -1 "$dir/s$stage.json" | field peak_bytes); pred=$(tail -1 "$dir/s$stage.json" | field predicted_peak_bytes)
    [ -n "$peak" ] && [ "$peak" = "$pred" ] || fail "stage $stage SGD: measured peak $peak, predicted $pred"
    ms=$(tail -1 "$dir/s$stage.json" | field model_state_bytes); mf=$(tail -1 "$dir/s$stage.json" | field model_state_bytes_formula)
    [ "$ms" = "$mf" ] || fail "stage $stage SGD: model-state bytes $ms, formula $mf"
done
echo "ok: SGD at 2 ranks (stages 1, 3) = one rank within 1e-5; predicted peak = measured; formula = measured"

# 3. resume
losses() { grep -o '"step": [0-9]*, "loss": [-0-9.e]*' "$1"; }
mpi 2 "$bin/sz-train" "${small[@]}" --batch 2 --zero-stage 2 --steps 4 --json --save "$dir/full.bin" >"$dir/full.json" \
    || fail "4 straight SGD steps"
mpi 2 "$bin/sz-train" "${small[@]}" --batch 2 --zero-stage 2 --steps 2 --json --save-state "$dir/st" >/dev/null \
    || fail "2 SGD steps + --save-state"
grep -q '"name":[[:space:]]*"sgd"' "$dir/st/step-00000002/manifest.json" || fail "the manifest does not record the optimizer"
ls "$dir/st/step-00000002/" | grep -q '^momentum-r00001.bin$' || fail "no momentum file of rank 1"
mpi 2 "$bin/sz-train" "${small[@]}" --batch 2 --zero-stage 2 --steps 4 --json --resume "$dir/st" --save "$dir/res.bin" \
    >"$dir/res.json" || fail "--resume with SGD"
cmp -s <(losses "$dir/full.json" | tail -2) <(losses "$dir/res.json") || fail "resumed SGD losses differ"
cmp -s "$dir/full.bin" "$dir/res.bin" || fail "resumed SGD parameters differ from 4 straight steps"
echo "ok: SGD resumes bitwise"
expect 1 "saved by optimizer sgd, this run trains with adamw" "--optimizer sgd" -- \
    --train "$dir/lic_train.bin" --seq 16 --batch 2 --steps 4 --resume "$dir/st"
expect 1 "the state holds momentum, which this run keeps none of" -- "${small[@]}" --momentum 0 --batch 2 --steps 4 \
    --resume "$dir/st"
mpi 1 "$bin/sz-train" "${small[@]}" --momentum 0 --batch 2 --steps 1 --save-state "$dir/st0" --report >"$dir/st0.txt" || fail "SGD momentum 0 save"
grep -Eq '^  sgd state momentum +0 +0$' "$dir/st0.txt" && grep -Eq '^  sgd: no state 2 +0 +0$' "$dir/st0.txt" &&
    ! grep -q '^  Adam' "$dir/st0.txt" || { cat "$dir/st0.txt"; fail "plain SGD's text report does not label its (empty) states by SGD's names"; }
expect 1 "the state has no momentum" "resume with --momentum 0" -- "${small[@]}" --batch 2 --steps 2 --resume "$dir/st0"

# --ds-config optimizer type SGD: the same bits as its options on the command line
cat >"$dir/sgd.json" <<'JSON'
{"train_micro_batch_size_per_gpu": 2,
 "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01, "dampening": 0, "nesterov": false}}}
JSON
base_ds=(--config 2,2,32 --vocab 256 --max-seq 32 --train "$dir/lic_train.bin" --seq 16 --steps 2 --json)
mpi 2 "$bin/sz-train" "${base_ds[@]}" --ds-config "$dir/sgd.json" >"$dir/ds.json" 2>"$dir/ds.err" || { cat "$dir/ds.err"; fail "ds-config SGD"; }
grep -qF "optimizer.type = SGD -> --optimizer sgd" "$dir/ds.err" && grep -qF "optimizer.params.momentum = 0.9 -> --momentum 0.9" "$dir/ds.err" \
    || { cat "$dir/ds.err"; fail "ds-config SGD: the mapping is not reported"; }
mpi 2 "$bin/sz-train" "${base_ds[@]}" --batch 2 --optimizer sgd --momentum 0.9 --lr 0.05 --wd 0.01 >"$dir/dscli.json" 2>/dev/null \
    || fail "ds-config SGD's options on the command line"
cmp -s <(losses "$dir/ds.json") <(losses "$dir/dscli.json") || fail "--ds-config SGD and its options differ"
sed 's/"nesterov": false/"nesterov": true/' "$dir/sgd.json" >"$dir/nest.json"
expect 2 "optimizer.params.nesterov: sz-train's SGD is not Nesterov's" -- "${base_ds[@]}" --ds-config "$dir/nest.json"
echo "ok: --ds-config optimizer SGD trains bitwise like --optimizer sgd --momentum 0.9 --lr 0.05 --wd 0.01"

# 4. sz-estimate
est() { "$bin/sz-estimate" --params 1e6 --nd 4 --json "$@" | grep -o '"model_state_bytes":[[:space:]]*[0-9.e+]*' | sed 's/.*:[[:space:]]*//'; }
check() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a == b) }' || fail "sz-estimate $3: $1, expected $2"; }
s=($(est --optimizer sgd --momentum 0.9)); check "${s[1]}" $((4000000 + 8000000 / 4)) "sgd mixed stage 1 (4Ψ + 8Ψ/N)"
s=($(est --optimizer sgd)); check "${s[3]}" $((8000000 / 4)) "plain sgd mixed stage 3 (8Ψ/N: K = 4)"
s=($(est --optimizer sgd --momentum 0.5 --precision fp32)); check "${s[0]}" 12000000 "sgd fp32 stage 0 (12Ψ)"
s=($(est)); check "${s[0]}" 16000000 "adamw mixed stage 0 (16Ψ)"
"$bin/sz-estimate" --params 1e6 --optimizer sgd --momentum 0.9 | grep -q "K = 8" || fail "sz-estimate text lacks K = 8"
"$bin/sz-estimate" --params 1e6 --momentum 0.9 2>&1 | grep -q "only --optimizer sgd has a momentum" || fail "sz-estimate --momentum with adamw"
"$bin/sz-estimate" --params 1e6 --optimizer sgdx 2>&1 | grep -q "allowed: adamw, sgd" || fail "sz-estimate --optimizer sgdx"
echo "ok: sz-estimate --optimizer"
echo "optimizer_cli: all checks passed"
