#!/usr/bin/env bash
# tests/bf16_native_cli.sh — the native bf16 compute path through sz-train, forced with
# --bf16-compute native (whatever this CPU's rule says, so the test runs alike with and without AMX):
#  1. the first line reports bf16_path (native, emulated; fp32 for fp32 runs), and LLaMA says it
#     computes emulated (its units take no bf16 parameters yet);
#  2. native losses stay close to fp32's over a few steps of a tiny GPT-2 (bf16 noise);
#  3. deterministic: bitwise the same losses and saved parameters with STARPU_NCPU=1 and 2;
#  4. a state saved at step 2 resumes to bitwise the uninterrupted run's step 4 loss and parameters;
#  5. 2 ranks at ZeRO stage 3 with checkpointing give bitwise the losses of stage 0 (N_d = 2);
#  6. a bad --bf16-compute value is refused with a message;
#  7. sz-estimate --plan --bf16-compute native|emulated predicts the peak sz-train --json measures on
#     that path (stage 0, and stage 3 with checkpointing), and its main table (no --plan) the same
#     peak and --plan's activation bytes; it prints bf16_path in text and JSON, and refuses a bad
#     --bf16-compute value.
# Usage: bf16_native_cli.sh BUILD_DIR [MPIEXEC]
set -u
bin=$1 mpiexec=${2:-mpiexec}
corpus="GPL-3 LGPL-3 Apache-2.0 MPL-2.0"
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_{train,val}.bin (or skipped)
train() { "$bin/sz-train" --config d2 --vocab 256 --max-seq 64 --train "$dir/lic_train.bin" --batch 4 --seq 32 \
          --lr 2e-3 --grad-clip 1.0 "$@"; }
losses() { grep -o '"loss": [0-9.]*' | sed 's/"loss": //'; }

# 1. reporting
for p in "fp32 auto fp32" "bf16 native native" "bf16 emulated emulated"; do
    set -- $p
    train --steps 1 --precision "$1" --bf16-compute "$2" >"$dir/first.txt" || fail "--precision $1 --bf16-compute $2"
    head -1 "$dir/first.txt" | grep -q "(bf16_path $3)" || { head -1 "$dir/first.txt"; fail "first line lacks bf16_path $3"; }
done
"$bin/sz-train" --arch llama --config 2,2,32 --vocab 256 --max-seq 32 --seq 32 --train "$dir/lic_train.bin" --steps 1 \
    --precision bf16 --bf16-compute native >"$dir/llama.txt" || fail "llama bf16"
head -1 "$dir/llama.txt" | grep -q "(bf16_path emulated)" || { head -1 "$dir/llama.txt"; fail "llama does not say emulated"; }
echo "bf16_path reported: fp32, native, emulated; LLaMA computes emulated"

# 2. native against fp32
train --steps 8 --json >"$dir/fp32.json" || fail "fp32 run"
train --steps 8 --json --precision bf16 --bf16-compute native >"$dir/nat.json" || fail "native run"
paste <(losses <"$dir/fp32.json") <(losses <"$dir/nat.json") | awk '{d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d}
    END {print "native vs fp32: largest loss difference over 8 steps " m; exit !(NR == 8 && m < 0.05)}' \
    || fail "native losses far from fp32's"

# 3. thread counts
nat() { train --precision bf16 --bf16-compute native --json "$@"; }
STARPU_NCPU=1 nat --steps 4 --save "$dir/a.bin" | losses >"$dir/a.txt" || fail "STARPU_NCPU=1"
STARPU_NCPU=2 nat --steps 4 --save "$dir/b.bin" | losses >"$dir/b.txt" || fail "STARPU_NCPU=2"
cmp -s "$dir/a.txt" "$dir/b.txt" && cmp -s "$dir/a.bin" "$dir/b.bin" || fail "STARPU_NCPU=1 and 2 differ"
echo "STARPU_NCPU=1 and 2: bitwise the same losses and parameters"

# 4. resume
nat --steps 2 --save-state "$dir/state" >/dev/null || fail "--save-state"
nat --steps 4 --resume "$dir/state" --save "$dir/r.bin" | losses >"$dir/r.txt" || fail "--resume"
[ "$(tail -1 "$dir/r.txt")" = "$(tail -1 "$dir/a.txt")" ] && cmp -s "$dir/r.bin" "$dir/a.bin" \
    || fail "resumed: step 4 loss $(tail -1 "$dir/r.txt") vs $(tail -1 "$dir/a.txt"), or other parameters"
echo "resumed at step 2: bitwise the uninterrupted run's step 4 loss and parameters"

# 5. stages at N_d = 2
mpi() { timeout 120 "$mpiexec" -n 2 "$bin/sz-train" --config d2 --vocab 256 --max-seq 64 \
        --train "$dir/lic_train.bin" --batch 2 --seq 32 --lr 2e-3 --steps 3 --json --precision bf16 \
        --bf16-compute native "$@"; }
mpi --zero-stage 0 | losses >"$dir/s0.txt" || fail "2 ranks, stage 0"
mpi --zero-stage 3 --checkpoint | losses >"$dir/s3.txt" || fail "2 ranks, stage 3 + checkpointing"
[ -s "$dir/s0.txt" ] && cmp -s "$dir/s0.txt" "$dir/s3.txt" || fail "2 ranks: stage 3 + checkpointing losses differ from stage 0"
echo "2 ranks: stage 3 with checkpointing bitwise stage 0"

# 6. refusal
if train --steps 1 --bf16-compute fast >"$dir/out.txt" 2>&1; then fail "accepted --bf16-compute fast"; fi
grep -q "auto, native or emulated" "$dir/out.txt" || { cat "$dir/out.txt"; fail "message lacks the choices"; }
echo "refused as expected: $(head -1 "$dir/out.txt")"

# 7. sz-estimate --bf16-compute: the plan's peak on each path is what sz-train measures
ntok=$(( ($(stat -c %s "$dir/lic_train.bin") - 1024) / 2 ))
for p in "native 0" "emulated 0" "native 3 --checkpoint --ckpt"; do
    set -- $p
    rep=$(train --steps 1 --json --precision bf16 --bf16-compute "$1" --zero-stage "$2" ${3:-} | tail -1) \
        || fail "sz-train --bf16-compute $1 --zero-stage $2 ${3:-}"
    peak=$(echo "$rep" | sed 's/.*"peak_bytes": \([0-9]*\).*/\1/')
    est=$("$bin/sz-estimate" --model d2 --vocab 256 --max-seq 64 --batch 4 --seq 32 --nd 1 --stage "$2" ${4:-} \
          --precision bf16 --bf16-compute "$1" --data-tokens $ntok --plan --json) || fail "sz-estimate --bf16-compute $1"
    echo "$est" | grep -q "\"bf16_path\":\"$1\"" || fail "sz-estimate --plan --json lacks bf16_path $1"
    act=$(echo "$est" | sed 's/.*"fold"://' | grep -o '"activations":[0-9]*' | grep -o '[0-9]*$')
    est=$(echo "$est" | sed 's/.*"peak_bytes":\([0-9]*\).*/\1/')
    [ -n "$peak" ] && [ "$est" = "$peak" ] || fail "sz-estimate --plan --bf16-compute $1 (stage $2 ${3:-}) predicts $est bytes, sz-train measured $peak"
    # the main table (no --plan) folds the same plan: its peak and its activations are --plan's
    tab=$("$bin/sz-estimate" --model d2 --vocab 256 --max-seq 64 --batch 4 --seq 32 --nd 1 ${4:-} \
          --precision bf16 --bf16-compute "$1" --data-tokens $ntok --json | tr -d ' \t\n') || fail "sz-estimate --bf16-compute $1 (table)"
    tpeak=$(echo "$tab" | grep -o '"predicted_peak_bytes":[0-9]*' | sed -n "$(($2 + 1))p" | grep -o '[0-9]*$')
    [ "$tpeak" = "$peak" ] || fail "sz-estimate's table (bf16 $1, stage $2 ${3:-}) predicts $tpeak bytes, --plan and sz-train $peak"
    tact=$(echo "$tab" | grep -o "\"engine_activation_bytes${4:+_ckpt}\":[0-9]*" | grep -o '[0-9]*$')
    [ -n "$act" ] && [ "$tact" = "$act" ] || fail "sz-estimate's table (bf16 $1 ${4:-}) counts $tact activation bytes, --plan $act"
    eval "peak_$1_$2=$peak"
    echo "sz-estimate --plan --bf16-compute $1, stage $2 ${3:-}: predicted $est = sz-train's peak"
done
[ "$peak_native_0" -lt "$peak_emulated_0" ] || fail "native peak $peak_native_0 not below emulated $peak_emulated_0"
"$bin/sz-estimate" --model d2 --vocab 256 --bf16-compute native >"$dir/est.txt" || fail "sz-estimate --bf16-compute native"
grep -q "^bf16_path: native" "$dir/est.txt" || fail "sz-estimate text lacks bf16_path: native"
grep -q "as sz-train holds them (bf16_path native" "$dir/est.txt" && grep -q "^Predicted peak per rank" "$dir/est.txt" \
    || { cat "$dir/est.txt"; fail "sz-estimate's table lacks the native activations or the predicted peak"; }
"$bin/sz-estimate" --model d2 --vocab 256 --precision fp32 --json | tr -d ' \t\n' | grep -q '"bf16_path":"fp32"' \
    || fail "sz-estimate --json lacks bf16_path fp32"
"$bin/sz-estimate" --arch llama --model 2,2,32 --vocab 256 --max-seq 32 --bf16-compute native | grep -q "^bf16_path: emulated" \
    || fail "sz-estimate --arch llama does not say emulated"
if "$bin/sz-estimate" --model d2 --bf16-compute fast >"$dir/est.txt" 2>&1; then fail "sz-estimate accepted --bf16-compute fast"; fi
grep -q "auto, native or emulated" "$dir/est.txt" || { cat "$dir/est.txt"; fail "sz-estimate's message lacks the choices"; }
echo "sz-estimate: bf16_path in text and JSON; refused: $(head -1 "$dir/est.txt")"
echo "bf16_native_cli: all checks passed"
