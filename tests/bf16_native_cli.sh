#!/usr/bin/env bash
# tests/bf16_native_cli.sh — the native bf16 compute path through sz-train, forced with
# --bf16-compute native (whatever this CPU's rule says, so the test runs alike with and without AMX):
#  1. the first line reports bf16_path (native, emulated; fp32 for fp32 runs), for GPT-2 and LLaMA;
#  2. native losses stay close to fp32's over a few steps of a tiny GPT-2 (bf16 noise);
#  3. deterministic: bitwise the same losses and saved parameters with STARPU_NCPU=1 and 2;
#  4. a state saved at step 2 resumes to bitwise the uninterrupted run's step 4 loss and parameters;
#  5. 2 ranks at ZeRO stage 3 with checkpointing give bitwise the losses of stage 0 (N_d = 2);
#  6. a bad --bf16-compute value is refused with a message;
#  7. sz-estimate --plan --bf16-compute native|emulated predicts the peak sz-train --json measures on
#     that path (stage 0, and stage 3 with checkpointing), and its main table (no --plan) the same
#     peak and --plan's activation bytes; it prints bf16_path in text and JSON, and refuses a bad
#     --bf16-compute value; on the emulated path GPT-2 d12's plan (stages 0 and 3) has no convert
#     action (the units read the bf16 parameters directly) and fewer gathered bytes and a lower
#     device peak than with --bf16-work-copies;
#  8. the LLaMA-style model (--arch llama) on the native path: losses within bf16 noise of fp32's over
#     8 steps, bitwise the same with 1 and 2 kernel threads per task (--kernel-threads),
#     a state saved at step 2 resumes bitwise (losses and every state shard at step 4), and
#     sz-estimate --arch llama --plan --bf16-compute native|emulated, and its main table, predict the
#     peak sz-train measures (stage 0, and 2 ranks at stage 3 with checkpointing; both paths).
# Usage: bf16_native_cli.sh BUILD_DIR [MPIEXEC]
set -u
bin=$1 mpiexec=${2:-mpiexec}
# the CPU paths (sz-estimate sees no CUDA workers; with them sz-train's emulated path keeps fp32
# working copies and the GPU rule decides native): CPU workers only, on a GPU machine too
export STARPU_NCUDA=0
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
ltrain() { "$bin/sz-train" --arch llama --config 2,2,32 --vocab 256 --max-seq 32 --train "$dir/lic_train.bin" \
           --batch 4 --seq 32 --lr 2e-3 --grad-clip 1.0 "$@"; }
for p in "native native" "emulated emulated"; do
    set -- $p
    ltrain --steps 1 --precision bf16 --bf16-compute "$1" >"$dir/llama.txt" || fail "llama --bf16-compute $1"
    head -1 "$dir/llama.txt" | grep -q "(bf16_path $2)" || { head -1 "$dir/llama.txt"; fail "llama: first line lacks bf16_path $2"; }
done
echo "bf16_path reported: fp32, native, emulated (GPT-2 and LLaMA)"

# 2. native against fp32
train --steps 8 --json >"$dir/fp32.json" || fail "fp32 run"
train --steps 8 --json --precision bf16 --bf16-compute native >"$dir/nat.json" || fail "native run"
# near_fp32 LABEL FP32_JSON NATIVE_JSON: the 8 steps' losses within 0.05 of each other
near_fp32() {
    paste <(losses <"$2") <(losses <"$3") | awk -v l="$1" '{d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d}
        END {print l " native vs fp32: largest loss difference over 8 steps " m; exit !(NR == 8 && m < 0.05)}' \
        || fail "$1 native losses far from fp32's"
}
near_fp32 GPT-2 "$dir/fp32.json" "$dir/nat.json"

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
for p in "native 0" "emulated 0" "native 3 --checkpoint --ckpt" "emulated 3 --checkpoint --ckpt"; do
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
# the emulated path reads the bf16 parameters directly: GPT-2 d12's plan has no convert action, and
# its gathered bytes (the fp32 working copies) and device peak fall against --bf16-work-copies (the
# copies, as with CUDA workers); the matmuls' host buffers grow (they widen weight panels per thread)
fold() { sed 's/.*"fold"://' | grep -o "\"$1\":[0-9]*" | head -1 | grep -o '[0-9]*$'; }
for st in 0 3; do
    d12() { "$bin/sz-estimate" --model d12 --batch 4 --seq 64 --precision bf16 --bf16-compute emulated --plan --stage $st "$@"; }
    d12 >"$dir/d12.txt" && d12 --json >"$dir/d12.json" && d12 --bf16-work-copies --json >"$dir/d12wc.json" \
        || fail "sz-estimate --model d12 --bf16-compute emulated --plan --stage $st"
    ! grep -q " convert " "$dir/d12.txt" || fail "d12 emulated plan (stage $st) lists convert actions"
    grep -q "bf16 emulated (bf16 parameters read directly)" "$dir/d12.txt" || { head -1 "$dir/d12.txt"; fail "d12 plan's first line"; }
    grep -q '"bf16_params":"direct"' "$dir/d12.json" && grep -q '"bf16_params":"working copies"' "$dir/d12wc.json" \
        || fail "sz-estimate --plan --json lacks bf16_params"
    nconv=$(grep -o '"kind":"convert"' "$dir/d12wc.json" | wc -l)
    [ "$nconv" -gt 0 ] || fail "--bf16-work-copies plan (stage $st) has no convert action"
    g=$(fold gathered <"$dir/d12.json") gw=$(fold gathered <"$dir/d12wc.json")
    dp=$(fold device_peak_bytes <"$dir/d12.json") dpw=$(fold device_peak_bytes <"$dir/d12wc.json")
    p=$(fold peak_bytes <"$dir/d12.json") pw=$(fold peak_bytes <"$dir/d12wc.json")
    [ -n "$g" ] && [ -n "$gw" ] && [ "$g" -lt "$gw" ] && [ "$dp" -lt "$dpw" ] \
        || fail "d12 emulated stage $st: gathered $g / device peak $dp not below the working copies' $gw / $dpw"
    echo "d12 emulated, stage $st: no convert (working copies: $nconv); gathered $gw -> $g B, device peak $dpw -> $dp B, peak $pw -> $p B"
done
"$bin/sz-estimate" --model d2 --vocab 256 --bf16-compute native >"$dir/est.txt" || fail "sz-estimate --bf16-compute native"
grep -q "^bf16_path: native" "$dir/est.txt" || fail "sz-estimate text lacks bf16_path: native"
grep -q "as sz-train holds them (bf16_path native" "$dir/est.txt" && grep -q "^Predicted peak per rank" "$dir/est.txt" \
    || { cat "$dir/est.txt"; fail "sz-estimate's table lacks the native activations or the predicted peak"; }
"$bin/sz-estimate" --model d2 --vocab 256 --precision fp32 --json | tr -d ' \t\n' | grep -q '"bf16_path":"fp32"' \
    || fail "sz-estimate --json lacks bf16_path fp32"
"$bin/sz-estimate" --arch llama --model 2,2,32 --vocab 256 --max-seq 32 --bf16-compute native | grep -q "^bf16_path: native" \
    || fail "sz-estimate --arch llama --bf16-compute native does not say native"
if "$bin/sz-estimate" --model d2 --bf16-compute fast >"$dir/est.txt" 2>&1; then fail "sz-estimate accepted --bf16-compute fast"; fi
grep -q "auto, native or emulated" "$dir/est.txt" || { cat "$dir/est.txt"; fail "sz-estimate's message lacks the choices"; }
echo "sz-estimate: bf16_path in text and JSON; refused: $(head -1 "$dir/est.txt")"

# 8. the LLaMA-style model on the native path
ltrain --steps 8 --json >"$dir/lfp32.json" || fail "llama fp32 run"
ltrain --steps 8 --json --precision bf16 --bf16-compute native >"$dir/lnat.json" || fail "llama native run"
near_fp32 llama "$dir/lfp32.json" "$dir/lnat.json"
lnat() { ltrain --precision bf16 --bf16-compute native --json "$@"; }
lnat --steps 4 --kernel-threads 1 --save-state "$dir/l1.st" >"$dir/l1.json" || fail "llama, 1 kernel thread"
lnat --steps 4 --kernel-threads 2 --save-state "$dir/l2.st" >"$dir/l2.json" || fail "llama, 2 kernel threads"
cmp -s <(losses <"$dir/l1.json") <(losses <"$dir/l2.json") || fail "llama native: 1 and 2 kernel threads give other losses"
for f in "$dir"/l2.st/step-00000004/*.bin; do
    cmp -s "$f" "$dir/l1.st/step-00000004/$(basename "$f")" || fail "llama native: $(basename "$f") differs between 1 and 2 kernel threads"
done
hb() { tail -1 "$1" | sed 's/.*"host_buffer_bytes": \([0-9]*\).*/\1/'; }
[ "$(hb "$dir/l1.json")" -lt "$(hb "$dir/l2.json")" ] \
    || fail "--kernel-threads 1 and 2 budget the same matmul working memory ($(hb "$dir/l1.json") bytes): the option did nothing"
echo "llama native: 1 and 2 kernel threads per task (host buffers $(hb "$dir/l1.json") and $(hb "$dir/l2.json") bytes): bitwise the same losses and state"
lnat --steps 2 --save-state "$dir/lr.st" >/dev/null || fail "llama --save-state"
lnat --steps 4 --resume "$dir/lr.st" --save-state "$dir/lr.st" >"$dir/lr.json" || fail "llama --resume"
[ "$(losses <"$dir/lr.json" | tail -1)" = "$(losses <"$dir/l2.json" | tail -1)" ] || fail "llama resumed: step 4 loss differs"
for f in "$dir"/l2.st/step-00000004/*.bin; do
    cmp -s "$f" "$dir/lr.st/step-00000004/$(basename "$f")" || fail "llama resumed: $(basename "$f") differs from 4 straight steps"
done
echo "llama native: resumed at step 2 = 4 straight steps, bitwise (loss and every state shard)"
for p in "native 1 0" "emulated 1 0" "native 2 3 --checkpoint --ckpt" "emulated 2 3 --checkpoint --ckpt"; do
    set -- $p
    rep=$(timeout 120 "$mpiexec" -n "$2" "$bin/sz-train" --arch llama --config 2,2,32 --vocab 256 --max-seq 32 \
          --train "$dir/lic_train.bin" --batch 4 --seq 32 --steps 1 --json --precision bf16 --bf16-compute "$1" \
          --zero-stage "$3" ${4:-} | tail -1) || fail "llama --bf16-compute $1, $2 rank(s), stage $3 ${4:-}"
    peak=$(echo "$rep" | sed 's/.*"peak_bytes": \([0-9]*\).*/\1/')
    est=$("$bin/sz-estimate" --arch llama --model 2,2,32 --vocab 256 --max-seq 32 --batch 4 --seq 32 --nd "$2" --stage "$3" \
          ${5:-} --precision bf16 --bf16-compute "$1" --data-tokens $ntok --plan --json) || fail "sz-estimate --arch llama --bf16-compute $1"
    echo "$est" | grep -q "\"bf16_path\":\"$1\"" || fail "sz-estimate --arch llama --plan --json lacks bf16_path $1"
    est=$(echo "$est" | sed 's/.*"peak_bytes":\([0-9]*\).*/\1/')
    [ -n "$peak" ] && [ "$est" = "$peak" ] || fail "sz-estimate --arch llama --plan --bf16-compute $1 ($2 rank(s), stage $3 ${4:-}) predicts $est bytes, sz-train measured $peak"
    tpeak=$("$bin/sz-estimate" --arch llama --model 2,2,32 --vocab 256 --max-seq 32 --batch 4 --seq 32 --nd "$2" ${5:-} \
            --precision bf16 --bf16-compute "$1" --data-tokens $ntok --json | tr -d ' \t\n' |
            grep -o '"predicted_peak_bytes":[0-9]*' | sed -n "$(($3 + 1))p" | grep -o '[0-9]*$')
    [ "$tpeak" = "$peak" ] || fail "sz-estimate --arch llama's table (bf16 $1, $2 rank(s), stage $3 ${4:-}) predicts $tpeak bytes, --plan and sz-train $peak"
    eval "lpeak_$1_$3=$peak"
    echo "sz-estimate --arch llama --plan --bf16-compute $1, $2 rank(s), stage $3 ${4:-}: predicted $est = sz-train's peak"
done
[ "$lpeak_native_0" -lt "$lpeak_emulated_0" ] || fail "llama native peak $lpeak_native_0 not below emulated $lpeak_emulated_0"
echo "bf16_native_cli: all checks passed"
