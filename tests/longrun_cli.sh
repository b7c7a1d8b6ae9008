#!/usr/bin/env bash
# tests/longrun_cli.sh — what long training runs need from sz-train, end to end on tiny models:
#  1. the data order is llm.c's: files shorter than one batch are refused with the numbers, and
#     validation reads at most the batches the val file holds;
#  2. strict options (and the learning-rate schedule's): malformed numbers and out-of-range values are refused naming the option, the
#     value and the range; a checkpoint holding NaN is refused naming the tensor; a step whose loss
#     is not finite stops the run naming the step (exit 3) unless --allow-nonfinite;
#  3. the paths the run will write are checked before training starts;
#  4. resumable training state: 3 steps + --save-state, then --resume to 6, gives bitwise the
#     losses and --save parameters of 6 straight steps (1 rank; 2 ranks at stage 3 with
#     micro-batches; bf16 at stage 2; the LLaMA-style model at stage 3); a state saved at N_d 2 stage 3 resumes at N_d 1 stage 1
#     within 1e-5 of 6 straight steps there; --keep, DIR/latest; sz-state verifies the checksums
#     (and finds a damaged file) and exports the parameters as --save writes them; a model or
#     precision mismatch is refused naming the field;
#  5. preemption: SIGTERM to the one rank, to one of two ranks, SIGUSR1 to mpirun: every rank ends
#     the step, the state is saved, exit 0 with a line naming it; a second signal during the save
#     exits at once; SIGKILL during a save leaves the previous state, which resumes bitwise;
#  6. --ds-config: a DeepSpeed config written as DeepSpeed's documentation writes them
#     (tests/ds_config_example.json) trains bitwise like the options it reports, the command line
#     wins over it, and settings StarZeRO lacks are refused.
# Usage: longrun_cli.sh BUILD_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_{train,val}.bin (or skipped)
tr=$dir/lic_train.bin
base=(--config d2 --vocab 256 --max-seq 64 --train "$tr" --batch 2 --seq 32)
sztrain() { timeout 120 "$bin/sz-train" "$@"; }

expect() { # RC WORDS... -- ARGS...   the run exits with RC and its output holds every WORD
    local want=$1; shift
    local words=()
    while [ "$1" != "--" ]; do words+=("$1"); shift; done
    shift
    sztrain "$@" >"$dir/out.txt" 2>&1
    local rc=$?
    [ "$rc" = "$want" ] || { cat "$dir/out.txt"; fail "exit $rc, not $want: $*"; }
    for w in "${words[@]}"; do
        grep -qF -- "$w" "$dir/out.txt" || { cat "$dir/out.txt"; fail "message lacks '$w': $*"; }
    done
    echo "ok ($rc): $(grep -v '^\[starzero' "$dir/out.txt" | grep -m1 'sz-train:' || head -1 "$dir/out.txt")"
}

# 1. token files shorter than one batch (N_d*B*T + 1 = 65 tokens here), the val protocol
for n in 2 40 64; do
    head -c $((1024 + 2 * n)) "$tr" >"$dir/short$n.bin"
    printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((n & 255)) $((n >> 8 & 255)) 0 0)" |
        dd of="$dir/short$n.bin" bs=1 seek=8 conv=notrunc 2>/dev/null   # header word 2: the count
    expect 1 "short$n.bin holds $n tokens" "= 65 tokens" -- --config d2 --vocab 256 --max-seq 64 \
        --train "$dir/short$n.bin" --batch 1 --seq 64 --steps 1
done
expect 1 "short2.bin holds 2 tokens" -- "${base[@]}" --seq 64 --batch 1 --val "$dir/short2.bin" --steps 1
head -c $((1024 + 2 * 200)) "$tr" >"$dir/v200.bin"   # 200 tokens: 3 batches of 64 (+1)
printf '\xc8\x00\x00\x00' | dd of="$dir/v200.bin" bs=1 seek=8 conv=notrunc 2>/dev/null
expect 0 "val loss" "(3 batches)" -- "${base[@]}" --steps 1 --val "$dir/v200.bin" --val-steps 20

# 2. strict options
expect 2 "--batch 2x" "not an integer" -- "${base[@]}" --batch 2x
expect 2 "--steps 2.9" "not an integer" -- "${base[@]}" --steps 2.9
expect 2 "--seed xyz" "not an unsigned integer" -- "${base[@]}" --seed xyz
expect 2 "--lr abc" "not a number" -- "${base[@]}" --lr abc
for v in nan inf -1; do expect 2 "--lr $v" "out of range" "finite, >= 0" -- "${base[@]}" --lr $v; done
expect 2 "--beta1 2" "0 <= x < 1" -- "${base[@]}" --beta1 2
expect 2 "--beta2 1" "0 <= x < 1" -- "${base[@]}" --beta2 1
expect 2 "--eps 0" "> 0" -- "${base[@]}" --eps 0
expect 2 "--wd -0.1" ">= 0" -- "${base[@]}" --wd -0.1
expect 2 "--grad-clip nan" "out of range" -- "${base[@]}" --grad-clip nan
expect 2 "--mem-budget 5Q" "not a byte size" -- "${base[@]}" --mem-budget 5Q
expect 2 "--zero-stage 4" "0 .. 3" -- "${base[@]}" --zero-stage 4
# the learning-rate schedule (warmup, cosine to --min-lr; values as tests/test_lr_schedule.c checks them)
expect 2 "--lr-schedule linear" "constant or cosine" -- "${base[@]}" --lr-schedule linear
expect 2 "--min-lr 0.01" "<= --lr" -- "${base[@]}" --lr 1e-3 --min-lr 0.01
sztrain "${base[@]}" --steps 6 --lr 1e-3 --warmup 2 --lr-schedule cosine --min-lr 1e-4 --json 2>/dev/null |
    grep -o '"lr": [0-9.e-]*' | sed 's/"lr": //' | tr '\n' ' ' >"$dir/lr.txt"
[ "$(cat "$dir/lr.txt")" = "0.0005 0.001 0.001 0.000868198 0.00055 0.000231802 " ] || fail "lr schedule: $(cat "$dir/lr.txt")"
echo "ok: --warmup 2 --lr-schedule cosine --min-lr 1e-4: $(cat "$dir/lr.txt")"
# a checkpoint with a NaN in layer 1's fcw (its element 60384)
sztrain "${base[@]}" --steps 1 --save "$dir/m.bin" >/dev/null 2>&1 || fail "saving a checkpoint"
printf '\x00\x00\xc0\x7f' | dd of="$dir/m.bin" bs=1 seek=$((1024 + 4 * 300000)) conv=notrunc 2>/dev/null
expect 1 "m.bin: tensor fcw of layer 1 holds nan at element 60384" -- --init "$dir/m.bin" --train "$tr" --steps 1
# a diverging run (lr 1e30) stops at its first non-finite step, or trains on when allowed
expect 3 "step 2: the loss is nan" -- "${base[@]}" --steps 3 --lr 1e30 --save "$dir/never.bin"
[ ! -e "$dir/never.bin" ] || fail "a run stopped by a non-finite step saved its parameters"
expect 0 "step    3/3: loss nan" -- "${base[@]}" --steps 3 --lr 1e30 --allow-nonfinite

# 3. outputs checked before training (no step line may appear)
expect 1 "--save $dir/nodir/m.bin: cannot be written: $dir/nodir does not exist" -- "${base[@]}" --steps 1 --save "$dir/nodir/m.bin"
expect 1 "--save $dir: cannot be written: it is a directory" -- "${base[@]}" --steps 1 --save "$dir"
expect 1 "--trace /proc/sz-trace: cannot create the directory" -- "${base[@]}" --steps 1 --trace /proc/sz-trace
grep -q "step " "$dir/out.txt" && fail "a run with an unwritable output trained first"

# 4. resumable training state
losses() { grep -o '"step": [0-9]*, "loss": [-0-9.e]*' "$1"; }
mpi() { timeout 120 "$mpiexec" -n "$@"; }
run6() { # NAME NP ARGS...: 6 straight steps, then 3 + state + resume to 6; compare bitwise
    local name=$1 np=$2; shift 2
    mpi "$np" "$bin/sz-train" "$@" --json --steps 6 --save "$dir/$name.full.bin" >"$dir/$name.full.json" || fail "$name: 6 steps"
    mpi "$np" "$bin/sz-train" "$@" --json --steps 3 --save-state "$dir/$name.st" >/dev/null || fail "$name: 3 steps + state"
    mpi "$np" "$bin/sz-train" "$@" --json --steps 6 --resume "$dir/$name.st" --save "$dir/$name.res.bin" \
        >"$dir/$name.res.json" || fail "$name: resume"
    losses "$dir/$name.res.json" | head -1 | grep -q '"step": 4,' || fail "$name: the resumed run did not start at step 4"
    cmp -s <(losses "$dir/$name.full.json" | tail -3) <(losses "$dir/$name.res.json") \
        || { paste <(losses "$dir/$name.full.json" | tail -3) <(losses "$dir/$name.res.json"); fail "$name: resumed losses differ"; }
    cmp -s "$dir/$name.full.bin" "$dir/$name.res.bin" || fail "$name: resumed parameters differ from 6 straight steps"
    echo "ok: $name: 3 steps + resume = 6 straight steps, bitwise (losses and parameters)"
}
small=(--config 2,2,32 --vocab 256 --max-seq 32 --train "$tr" --seq 16 --lr 1e-3 --grad-clip 1.0)
run6 np1 1 "${small[@]}" --batch 2
run6 np2s3 2 "${small[@]}" --batch 1 --zero-stage 3 --micro-batches 2
run6 np2s2bf16 2 "${small[@]}" --batch 1 --zero-stage 2 --precision bf16

# the LLaMA-style model (no llm.c file: the resumed state's shard files are compared instead)
ll=(--arch llama "${small[@]}" --batch 1 --zero-stage 3 --json)
mpi 2 "$bin/sz-train" "${ll[@]}" --steps 6 --save-state "$dir/llf.st" >"$dir/llf.json" || fail "llama: 6 steps"
mpi 2 "$bin/sz-train" "${ll[@]}" --steps 3 --save-state "$dir/ll.st" >/dev/null || fail "llama: 3 steps + state"
mpi 2 "$bin/sz-train" "${ll[@]}" --steps 6 --resume "$dir/ll.st" --save-state "$dir/ll.st" >"$dir/ll.json" || fail "llama: resume"
cmp -s <(losses "$dir/llf.json" | tail -3) <(losses "$dir/ll.json") || fail "llama: resumed losses differ"
for f in "$dir"/llf.st/step-00000006/*.bin; do
    cmp -s "$f" "$dir/ll.st/step-00000006/$(basename "$f")" || fail "llama: resumed $(basename "$f") differs from 6 straight steps"
done
echo "ok: llama: 3 steps + resume = 6 straight steps, bitwise (losses and every state shard)"

# across layouts: the N_d 2 stage 3 state resumed at N_d 1 stage 1 (same global batch)
mpi 1 "$bin/sz-train" "${small[@]}" --batch 2 --micro-batches 2 --zero-stage 1 --json --steps 6 >"$dir/x.full.json" || fail "x: 6 steps"
mpi 1 "$bin/sz-train" "${small[@]}" --batch 2 --micro-batches 2 --zero-stage 1 --json --steps 6 \
    --resume "$dir/np2s3.st" >"$dir/x.res.json" || fail "x: resume at N_d 1 stage 1"
paste <(losses "$dir/x.full.json" | tail -3 | sed 's/.*: //') <(losses "$dir/x.res.json" | sed 's/.*: //') >"$dir/x.txt"
[ "$(wc -l <"$dir/x.txt")" = 3 ] || fail "x: not 3 resumed steps"
awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * ($1 < 0 ? -$1 : $1)) { print "step", NR + 3, $1, $2; exit 1 } }' "$dir/x.txt" \
    || fail "a state saved at N_d 2 stage 3 resumed at N_d 1 stage 1 differs by more than 1e-5"
echo "ok: saved at N_d 2 stage 3, resumed at N_d 1 stage 1: within 1e-5 of 6 straight steps there"

# --save-every, --keep, latest; sz-state verifies and exports what --save writes
mpi 2 "$bin/sz-train" "${small[@]}" --batch 1 --zero-stage 3 --steps 4 --save-every 1 --keep 2 \
    --save-state "$dir/k.st" --save "$dir/k.bin" >/dev/null || fail "save-every/keep run"
[ "$(ls "$dir/k.st" | grep -c '^step-')" = 2 ] && [ -d "$dir/k.st/step-00000003" ] && [ -d "$dir/k.st/step-00000004" ] \
    || { ls "$dir/k.st"; fail "--keep 2 did not keep exactly steps 3 and 4"; }
[ "$(cat "$dir/k.st/latest")" = step-00000004 ] || fail "latest does not name step 4"
"$bin/sz-state" "$dir/k.st" --export "$dir/k.export.bin" >"$dir/sz-state.txt" || { cat "$dir/sz-state.txt"; fail "sz-state"; }
grep -q '"format":[[:space:]]*"starzero-training-state"' "$dir/sz-state.txt" && grep -q "all 6 files verified (step 4, N_d 2)" "$dir/sz-state.txt" \
    || { cat "$dir/sz-state.txt"; fail "sz-state did not print the manifest and verify 6 files"; }
cmp -s "$dir/k.bin" "$dir/k.export.bin" || fail "sz-state --export differs from sz-train --save"
echo "ok: --save-every 1 --keep 2 kept steps 3-4, latest = step 4; sz-state verified and exported = --save"
printf 'XXXX' | dd of="$dir/k.st/step-00000004/adam_v-r00001.bin" bs=1 seek=100 conv=notrunc 2>/dev/null
if "$bin/sz-state" "$dir/k.st" >"$dir/sz-state.txt" 2>&1; then fail "sz-state accepted a damaged file"; fi
grep -q "adam_v-r00001.bin: checksum crc32 .* the file is damaged" "$dir/sz-state.txt" || { cat "$dir/sz-state.txt"; fail "no damage message"; }
expect 1 "adam_v-r00001.bin: checksum" "damaged" -- --train "$tr" --seq 16 --batch 2 --steps 6 --resume "$dir/k.st"
expect 1 "field model.vocab" -- --config 2,2,32 --vocab 128 --max-seq 32 --train "$tr" --seq 16 --batch 2 --steps 6 --resume "$dir/np1.st"
expect 1 "field precision" "--precision fp32" -- --train "$tr" --seq 16 --batch 2 --steps 6 --precision bf16 --resume "$dir/np1.st"
expect 1 "no complete training state" -- --train "$tr" --seq 16 --batch 2 --steps 6 --resume "$dir/nothing"
expect 1 "--save-state /proc/sz-state: cannot create the directory" -- "${base[@]}" --steps 1 --save-state /proc/sz-state
grep -q "step " "$dir/out.txt" && fail "a run with an unwritable --save-state trained first"

# 5. preemption
child() { pgrep -P "$1" | head -1; }   # the process timeout runs (sz-train or mpiexec)
wait_for() { # FILE PATTERN: wait (at most 60 s) until FILE holds PATTERN
    for _ in $(seq 600); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    cat "$1"; fail "timed out waiting for '$2'"
}
endless=("${small[@]}" --batch 1 --steps 1000000)
check_stopped() { # NAME RC: exit 0, the line, latest names the step the line names, sz-state verifies
    local name=$1 rc=$2
    [ "$rc" = 0 ] || { tail -5 "$dir/$name.out"; fail "$name: exit $rc after the signal, not 0"; }
    local line; line=$(grep "sz-train: stopped by signal" "$dir/$name.out") || { tail -5 "$dir/$name.out"; fail "$name: no stop line"; }
    local step; step=$(echo "$line" | sed 's/.*after step \([0-9]*\):.*/\1/')
    printf -v want "step-%08d" "$step"
    echo "$line" | grep -q "the training state is in $dir/$name.st/$want" || fail "$name: the line names no state: $line"
    [ "$(cat "$dir/$name.st/latest")" = "$want" ] || fail "$name: latest is not $want"
    "$bin/sz-state" --quiet "$dir/$name.st" >/dev/null || fail "$name: the saved state does not verify"
    echo "ok: $name: $line"
}
timeout 120 "$bin/sz-train" "${endless[@]}" --save-state "$dir/sig1.st" >"$dir/sig1.out" 2>&1 &
pid=$!; wait_for "$dir/sig1.out" "step    3/"; kill -TERM "$(child $pid)"; wait $pid; check_stopped sig1 $?
timeout 120 "$mpiexec" -n 2 "$bin/sz-train" "${endless[@]}" --zero-stage 3 --save-state "$dir/sig2.st" >"$dir/sig2.out" 2>&1 &
pid=$!; wait_for "$dir/sig2.out" "step    3/"
ranks=($(pgrep -P "$(child $pid)")); [ ${#ranks[@]} = 2 ] || fail "sig2: mpiexec has ${#ranks[@]} children, not 2"
kill -TERM "${ranks[1]}"; wait $pid; check_stopped sig2 $?
timeout 120 "$mpiexec" -n 2 "$bin/sz-train" "${endless[@]}" --zero-stage 1 --save-state "$dir/sig3.st" >"$dir/sig3.out" 2>&1 &
pid=$!; wait_for "$dir/sig3.out" "step    3/"; kill -USR1 "$(child $pid)"; wait $pid; check_stopped sig3 $?
# a second signal, during the save that the first one started: out at once, nothing half-written visible
SZ_TEST_SAVE_DELAY_MS=30000 timeout 120 "$bin/sz-train" "${endless[@]}" --save-state "$dir/sig4.st" >"$dir/sig4.out" 2>&1 &
pid=$!; wait_for "$dir/sig4.out" "step    3/"; p4=$(child $pid); kill -TERM "$p4"; wait_for "$dir/sig4.out" "pausing"; kill -TERM "$p4"; wait $pid; rc=$?
[ $rc = 143 ] || { cat "$dir/sig4.out"; fail "sig4: a second SIGTERM gave exit $rc, not 143"; }
grep -q "a second signal: exiting at once" "$dir/sig4.out" || fail "sig4: no message for the second signal"
[ -z "$(ls "$dir/sig4.st" | grep '^step-')" ] || fail "sig4: an interrupted save left a visible step directory"
echo "ok: sig4: a second signal during the save exited at once (143), no step directory visible"
# SIGKILL during a save (2 ranks, stage 3): the previous state stays complete and resumes bitwise
SZ_TEST_SAVE_DELAY_MS=1000 timeout 120 "$mpiexec" -n 2 "$bin/sz-train" "${small[@]}" --batch 1 --zero-stage 3 --steps 6 \
    --save-every 1 --save-state "$dir/kill.st" >"$dir/kill.out" 2>&1 &
pid=$!; wait_for "$dir/kill.out" "saving $dir/kill.st/step-00000003: shards written"
kill -KILL "$(grep "step-00000003: shards written" "$dir/kill.out" | sed 's/.*(pid \([0-9]*\)).*/\1/')"; wait $pid
[ "$(cat "$dir/kill.st/latest")" = step-00000002 ] || fail "kill: latest is not step 2 after SIGKILL during step 3's save"
[ ! -e "$dir/kill.st/step-00000003" ] || fail "kill: the interrupted step 3 is visible"
"$bin/sz-state" --quiet "$dir/kill.st" >/dev/null || fail "kill: the previous state does not verify"
mpi 2 "$bin/sz-train" "${small[@]}" --batch 1 --zero-stage 3 --json --steps 6 --resume "$dir/kill.st" --save "$dir/kill.res.bin" \
    >"$dir/kill.res.json" || fail "kill: resume"
cmp -s <(losses "$dir/np2s3.full.json" >/dev/null; mpi 2 "$bin/sz-train" "${small[@]}" --batch 1 --zero-stage 3 --json --steps 6 \
         --save "$dir/kill.full.bin" | grep -o '"step": [0-9]*, "loss": [-0-9.e]*' | tail -4) <(losses "$dir/kill.res.json") \
    || fail "kill: resumed losses differ from a straight run"
cmp -s "$dir/kill.full.bin" "$dir/kill.res.bin" || fail "kill: resumed parameters differ from a straight run"
echo "ok: SIGKILL during step 3's save: step 2 stayed complete, resumed bitwise to step 6"

# 6. --ds-config
ds=$(dirname "$0")/ds_config_example.json
mpi 2 "$bin/sz-train" "${small[@]}" --steps 3 --json --ds-config "$ds" >"$dir/ds.json" 2>"$dir/ds.err" || { cat "$dir/ds.err"; fail "ds-config run"; }
for w in "train_micro_batch_size_per_gpu = 2 -> --batch 2" "gradient_accumulation_steps = 2 -> --micro-batches 2" \
         "optimizer.params.betas[0] = 0.8 -> --beta1 0.8" "scheduler.params.warmup_num_steps = 2 -> --warmup 2" \
         "bf16.enabled = true -> --precision bf16" "zero_optimization.stage = 3 -> --zero-stage 3" \
         "reduce_bucket_size = 500000 -> --bucket-bytes 1000000 (elements x 2 bytes (bf16 or fp16))" \
         "cpu_checkpointing = true -> --offload-checkpoints" "zero_optimization.overlap_comm = true ignored" \
         "train_batch_size = 8 -> --global-batch 8"; do
    grep -qF -- "$w" "$dir/ds.err" || { cat "$dir/ds.err"; fail "ds-config: no line '$w'"; }
done
mpi 2 "$bin/sz-train" "${small[@]}" --steps 3 --json --batch 2 --micro-batches 2 --grad-clip 1 --lr 0.001 --beta1 0.8 \
    --beta2 0.999 --eps 1e-08 --wd 3e-07 --lr-schedule constant --warmup 2 --precision bf16 --zero-stage 3 \
    --bucket-bytes 1000000 --prefetch-bytes 100000 --max-live-bytes 2000000 --checkpoint --offload-checkpoints \
    >"$dir/ds.cli.json" 2>/dev/null || fail "the ds-config's options on the command line"
cmp -s <(losses "$dir/ds.json") <(losses "$dir/ds.cli.json") || fail "--ds-config and its options on the command line differ"
[ "$(losses "$dir/ds.json" | wc -l)" = 3 ] || fail "ds-config: not 3 steps"
echo "ok: --ds-config trains bitwise like the options it reported"
mpi 2 "$bin/sz-train" "${small[@]}" --steps 1 --ds-config "$ds" --zero-stage 1 --report >"$dir/ds2.out" 2>&1 || fail "ds-config + --zero-stage 1"
grep -q "the command line's --zero-stage wins" "$dir/ds2.out" && grep -q "ZeRO stage 1" "$dir/ds2.out" || { cat "$dir/ds2.out"; fail "the command line did not win"; }
echo "ok: --zero-stage 1 on the command line wins over zero_optimization.stage 3"
expect 1 "--global-batch 8: this run's global batch is 1 rank(s) x --batch 2 x --micro-batches 2 = 4 rows" -- \
    "${small[@]}" --steps 1 --ds-config "$ds"
sed 's/"bf16"/"fp16"/' "$ds" >"$dir/fp16.json"   # fp16 now trains (tests/fp16_cli.sh); its block maps
"$bin/sz-train" "${small[@]}" --steps 1 --ds-config "$dir/fp16.json" --global-batch 4 >"$dir/fp16.out" 2>&1 \
    && grep -q "fp16.enabled = true -> --precision fp16" "$dir/fp16.out" || { cat "$dir/fp16.out"; fail "ds-config fp16"; }
sed 's/"AdamW"/"SGD"/' "$ds" >"$dir/sgd.json"
expect 2 "not a parameter of SGD (Adam's)" -- "${small[@]}" --steps 1 --ds-config "$dir/sgd.json"
sed 's/"AdamW"/"Lamb"/' "$ds" >"$dir/lamb.json"
expect 2 "optimizer.type Lamb" "AdamW or SGD" -- "${small[@]}" --steps 1 --ds-config "$dir/lamb.json"
sed 's/"partition_activations": false/"partition_activations": true/' "$ds" >"$dir/pa.json"
expect 2 "partition_activations = true" "no model parallelism" -- "${small[@]}" --steps 1 --ds-config "$dir/pa.json"
head -c 100 "$ds" >"$dir/broken.json"
expect 2 "broken.json: not one JSON object" -- "${small[@]}" --steps 1 --ds-config "$dir/broken.json"
# strict: a known key of the wrong type, text after the object, two keys for one option that
# disagree, a FIFO (which would block the open forever)
ds_bad() { # NAME JSON WORDS...
    local name=$1 json=$2; shift 2
    printf '%s\n' "$json" >"$dir/$name.json"
    expect 2 "$@" -- "${small[@]}" --steps 1 --ds-config "$dir/$name.json"
}
ds_bad type1 '{"optimizer": "adam"}' "optimizer is a string, expected an object"
ds_bad type2 '{"bf16": {"enabled": "true"}}' "bf16.enabled is a string, expected true or false"
ds_bad type3 '{"gradient_clipping": "1.0"}' "gradient_clipping is a string, expected a number"
ds_bad trailing '{"gradient_clipping": 1.0} {"x": 1}' "not one JSON object, or text after it"
ds_bad twice '{"bf16": {"enabled": true}, "fp16": {"enabled": true}}' "bf16.enabled (--precision bf16) and fp16.enabled (--precision fp16) disagree"
ds_bad lrs '{"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 2e-3}}}' "disagree"
mkfifo "$dir/fifo.json"
expect 2 "fifo.json: not a regular file" -- "${small[@]}" --steps 1 --ds-config "$dir/fifo.json"
echo "longrun_cli: all checks passed"
