#!/usr/bin/env bash
# tests/llama_cli.sh — `sz-train --arch llama` end to end:
#  1. the loss falls on real English text (the demo corpus of train_cli.sh);
#  2. 2 ranks with --batch 2 equal 1 rank with --batch 4 (the same global batch) within 1e-5,
#     at ZeRO stages 0 and 3 (3 with checkpointing);
#  2b. the plan's predicted peak equals the measured one; sz-estimate --arch llama counts its parameters;
#  3. its training state saves and resumes (--save-state / --resume) to the same losses;
#  4. llm.c checkpoints (--init/--save, GPT-2's format) and an unknown --arch are refused.
# Every multi-rank run has a timeout. Usage: llama_cli.sh BUILD_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
corpus="GPL-3 LGPL-3 Apache-2.0 MPL-2.0 Artistic GFDL-1.3"
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, field, close, the corpus $dir/lic_{train,val}.bin (or skipped)

# 1. loss falls
timeout 300 "$bin/sz-train" --arch llama --config d2 --vocab 256 --max-seq 64 --train "$dir/lic_train.bin" \
    --val "$dir/lic_val.bin" --batch 4 --seq 32 --lr 2e-3 --wd 0.1 --grad-clip 1.0 --steps 60 --json \
    >"$dir/fall.json" || fail "sz-train --arch llama exited non-zero"
first=$(field loss <"$dir/fall.json" | head -1)
last=$(field loss <"$dir/fall.json" | tail -10 | awk '{s+=$1} END {print s/NR}')
val=$(field val_loss <"$dir/fall.json" | tail -1)
echo "llama loss: first $first, mean of last 10 $last, val $val"
awk -v f="$first" -v l="$last" 'BEGIN {exit !(l < f - 1.5)}' || fail "loss did not fall by 1.5 nats ($first -> $last)"
awk -v v="$val" 'BEGIN {exit !(v > 0 && v < 4.0)}' || fail "val loss $val not below 4.0"

# 2. 1 rank vs 2 ranks, the same global batch
run() { # NP BATCH ARGS... -> json lines
    local np=$1 b=$2; shift 2
    timeout 120 "$mpiexec" -n "$np" "$bin/sz-train" --arch llama --config 2,2,32 --vocab 256 --max-seq 32 \
        --train "$dir/lic_train.bin" --batch "$b" --seq 16 --steps 3 --lr 1e-3 --grad-clip 1.0 --json "$@"
}
run 1 4 >"$dir/ref.json" || fail "single-rank reference run"
for args in "--zero-stage 0" "--zero-stage 3 --checkpoint"; do
    run 2 2 $args >"$dir/np2.json" || fail "2 ranks ($args) exited non-zero or timed out"
    paste <(field loss <"$dir/ref.json") <(field loss <"$dir/np2.json") | while read -r a b; do
        close "$a" "$b" 1e-5 || { echo "FAIL: 2 ranks ($args) loss $b vs 1 rank $a"; exit 1; }
    done || exit 1
    a=$(field grad_norm <"$dir/ref.json" | head -1); b=$(field grad_norm <"$dir/np2.json" | head -1)
    close "$a" "$b" 1e-5 || fail "2 ranks ($args): first gradient norm $b vs 1 rank $a"
    echo "2 ranks x batch 2 ($args) = 1 rank x batch 4 within 1e-5"
done

# 2b. the plan's predicted peak is the measured one; sz-estimate --arch llama counts the same parameters
run 2 2 --zero-stage 3 --checkpoint --offload-checkpoints >"$dir/off.json" || fail "2 ranks, stage 3 + offload"
rep=$(tail -1 "$dir/off.json")
peak=$(echo "$rep" | sed 's/.*"peak_bytes": \([0-9]*\).*/\1/'); pred=$(echo "$rep" | sed 's/.*"predicted_peak_bytes": \([0-9]*\).*/\1/')
[ -n "$peak" ] && [ "$peak" = "$pred" ] || fail "stage 3 + offload: measured peak $peak, predicted $pred"
psi=$(echo "$rep" | sed 's/.*"params": \([0-9]*\).*/\1/')
est=$("$bin/sz-estimate" --arch llama --model 2,2,32 --vocab 256 --max-seq 32 --json | tr -d ' \t\n' | grep -o '^{"params":[0-9]*' | grep -o '[0-9]*$')
[ "$psi" = "$est" ] || fail "sz-train counts $psi parameters, sz-estimate --arch llama $est"
echo "stage 3 + offload: predicted peak = measured peak ($peak bytes); sz-estimate: $est parameters as trained"

# 3. save the state after step 2, resume to step 3: the same losses as the uninterrupted run
run 1 4 --steps 2 --save-state "$dir/state" >/dev/null || fail "run with --save-state"
run 1 4 --resume "$dir/state" >"$dir/resumed.json" || fail "run with --resume"
a=$(field loss <"$dir/ref.json" | tail -1); b=$(field loss <"$dir/resumed.json" | tail -1)
[ "$a" = "$b" ] || fail "resumed step 3 loss $b differs from the uninterrupted run's $a"
echo "saved and resumed: step 3 loss $b as without the interruption"

# 4. refusals, each with a message
expect_error() { # WORD ARGS...
    local word=$1; shift
    if "$bin/sz-train" "$@" >"$dir/out.txt" 2>&1; then fail "accepted: $*"; fi
    grep -qi -- "$word" "$dir/out.txt" || { cat "$dir/out.txt"; fail "message lacks '$word'"; }
    echo "refused as expected: $(head -1 "$dir/out.txt")"
}
expect_error "--arch llama" --arch llama --init "$dir/lic_train.bin" --train "$dir/lic_train.bin"
expect_error "--arch llama" --arch llama --config d2 --vocab 256 --save "$dir/x.bin" --train "$dir/lic_train.bin"
expect_error "gpt2 or llama" --arch mamba --config d2 --train "$dir/lic_train.bin"
expect_error "head size" --arch llama --config 2,4,36 --vocab 256 --train "$dir/lic_train.bin"
echo "llama_cli: all checks passed"
