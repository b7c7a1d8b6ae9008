#!/usr/bin/env bash
# tests/sched_cli.sh — the scheduler and the budget, through sz-train on 2 ranks (ZeRO stage 3):
#  1. an impossible --mem-budget is refused before any step, with the predicted peak, the budget and
#     settings that would fit; exit code != 0;
#  2. a configuration that fits keeps its measured peak under the budget (and under the prediction);
#  3. results are bitwise the same whatever the policy (zero, eager, prio, lws, dmdas), with a
#     prefetch window, and at stages 0-3 with activation checkpointing, offloaded checkpoints and
#     small buckets, and through MPI's collectives or shared memory; --partition-activations is refused (no model parallelism). The StarPU watchdog (set by CTest) turns any hang into a failure.
# Usage: sched_cli.sh BUILD_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
. "$(dirname "$0")/cli_common.sh"   # $dir, fail, the corpus $dir/lic_{train,val}.bin (or skipped)
train() { timeout 120 "$mpiexec" -n 2 "$bin/sz-train" --config d2 --vocab 256 --max-seq 64 \
            --train "$dir/lic_train.bin" --batch 4 --seq 32 --steps 3 --zero-stage 3 --grad-clip 1.0 "$@"; }
# (a later --zero-stage overrides the 3 above)

# 1. refused
if train --mem-budget 5M >"$dir/refused.txt" 2>&1; then fail "an impossible budget was accepted"; fi
grep -q "budget" "$dir/refused.txt" && grep -q "Settings that fit" "$dir/refused.txt" && grep -q "MB per rank" "$dir/refused.txt" \
    || { cat "$dir/refused.txt"; fail "refusal message lacks the prediction or the settings that fit"; }
grep -q '^step' "$dir/refused.txt" && fail "a step ran before the refusal"
echo "refused: $(grep -m1 'budget' "$dir/refused.txt" | cut -c1-160)..."

# 2. respected
train --mem-budget 40M --json >"$dir/fit.json" || fail "a fitting budget was refused"
rep=$(tail -1 "$dir/fit.json")
peak=$(echo "$rep" | sed 's/.*"peak_bytes": \([0-9]*\).*/\1/')
pred=$(echo "$rep" | sed 's/.*"predicted_peak_bytes": \([0-9]*\).*/\1/')
[ "$peak" -le 40000000 ] || fail "measured peak $peak over the 40 MB budget"
[ "$peak" -eq "$pred" ] || fail "measured peak $peak is not the plan's prediction $pred"
echo "budget respected: measured peak $peak = predicted $pred <= 40000000"
# sz-estimate --plan folds the same plan without running anything: the same peak
# (its host buffers: the data loader's tokens, 2 bytes each after the 1024-byte header)
ntok=$(( ($(stat -c %s "$dir/lic_train.bin") - 1024) / 2 ))
est=$("$bin/sz-estimate" --model d2 --vocab 256 --max-seq 64 --batch 4 --seq 32 --nd 2 --stage 3 --precision fp32 \
        --clip --data-tokens $ntok --plan --json | sed 's/.*"peak_bytes":\([0-9]*\).*/\1/')
[ "$est" = "$peak" ] || fail "sz-estimate --plan predicts $est bytes, sz-train measured $peak"
"$bin/sz-estimate" --model d2 --vocab 256 --nd 2 --precision fp32 --plan | grep -q "^ *[0-9]* *0 reduce_scatter" ||
    fail "sz-estimate --plan prints no reduce-scatter action"
echo "sz-estimate --plan: the same predicted peak ($est) without a run"
# --max-live-bytes bounds the prefetch window in the prediction too: a budget of exactly the measured
# peak is accepted, one byte less refused, and the refusal's "needs X" prints above its "budget Y"
train --prefetch-bytes 2M --max-live-bytes 2M --steps 1 --json >"$dir/ml.json" || fail "max-live run"
mpeak=$(tail -1 "$dir/ml.json" | sed 's/.*"peak_bytes": \([0-9]*\).*/\1/')
mpred=$(tail -1 "$dir/ml.json" | sed 's/.*"predicted_peak_bytes": \([0-9]*\).*/\1/')
[ "$mpeak" -eq "$mpred" ] || fail "with --max-live-bytes: measured $mpeak, predicted $mpred"
train --prefetch-bytes 2M --max-live-bytes 2M --steps 1 --mem-budget "$mpeak" >/dev/null 2>&1 ||
    fail "a budget of exactly the measured peak ($mpeak) was refused"
if train --prefetch-bytes 2M --max-live-bytes 2M --steps 1 --mem-budget $((mpeak - 1)) >"$dir/tight.txt" 2>&1; then
    fail "a budget one byte under the peak was accepted"
fi
grep -o "needs [0-9.]* MB per rank.*the budget is [0-9.]* MB" "$dir/tight.txt" | head -1 |
    awk '{ x = $2; y = $NF == "MB" ? $(NF-1) : $NF; exit !(x + 0 > y + 0) }' ||
    { cat "$dir/tight.txt"; fail "the refusal one byte short does not print needs > budget"; }
# advice lists only what the same fold says fits and helps: at stage 0 bf16 with fp32 working
# gradients (SZ_GRAD_ROUND_FOLD=0) needs more than fp32; with the rounding folded into the writers
# (the default) it needs less at stage 1, and is advised there below fp32's figure
train --zero-stage 0 --steps 1 --json >"$dir/s0.json" || fail "stage 0 run"
s0=$(tail -1 "$dir/s0.json" | sed 's/.*"peak_bytes": \([0-9]*\).*/\1/')
if SZ_GRAD_ROUND_FOLD=0 train --zero-stage 0 --steps 1 --mem-budget $((s0 - 1)) >"$dir/s0tight.txt" 2>&1; then fail "stage 0 one byte short accepted"; fi
grep -q "Settings that fit" "$dir/s0tight.txt" || { cat "$dir/s0tight.txt"; fail "no advice at stage 0"; }
grep -q "bf16" "$dir/s0tight.txt" && { cat "$dir/s0tight.txt"; fail "bf16 advised where it needs more"; }
if train --zero-stage 0 --steps 1 --mem-budget $((s0 - 1)) >"$dir/s0fold.txt" 2>&1; then fail "stage 0 one byte short accepted (fold)"; fi
f32=$(grep -o "Settings that fit.*" "$dir/s0fold.txt" | head -1 | sed -n 's/.*: stage 1 with N_d >= 2 (\([0-9.]*\) MB).*--precision bf16.*/\1/p')
b16=$(grep -o "precision bf16: stage 1 with N_d >= 2 ([0-9.]* MB)" "$dir/s0fold.txt" | head -1 | sed 's/.*(\([0-9.]*\) MB)/\1/')
[ -n "$f32" ] && [ -n "$b16" ] && awk -v a="$b16" -v b="$f32" 'BEGIN { exit !(a + 0 < b + 0) }' ||
    { cat "$dir/s0fold.txt"; fail "bf16 (rounding folded) not advised at stage 1 below fp32's figure"; }
echo "advice at stage 0: bf16 not listed with fp32 working gradients; with the rounding folded stage 1 at $b16 MB (fp32 $f32)"
echo "max live bytes in the prediction: peak $mpeak accepted as the budget, $((mpeak - 1)) refused with: $(grep -o 'needs [0-9.]* MB' "$dir/tight.txt" | head -1) vs $(grep -o 'budget is [0-9.]* MB' "$dir/tight.txt" | head -1)"

# 3. the same bits under every policy and with prefetching
train --save "$dir/ref.bin" >/dev/null || fail "reference run"
for pol in eager prio lws dmdas; do
    STARPU_SCHED=$pol train --save "$dir/$pol.bin" >/dev/null || fail "STARPU_SCHED=$pol run"
    cmp -s "$dir/ref.bin" "$dir/$pol.bin" || fail "STARPU_SCHED=$pol changed the parameters"
done
train --prefetch-bytes 2M --max-live-bytes 4M --save "$dir/pf.bin" >/dev/null || fail "prefetch run"
cmp -s "$dir/ref.bin" "$dir/pf.bin" || fail "prefetching changed the parameters"
# a communication worker per rank: the same parameters, and collectives that ran during compute
SZ_COMM_WORKER=1 train --prefetch-bytes 2M --save "$dir/cw.bin" >/dev/null 2>&1 || fail "comm worker run"
cmp -s "$dir/ref.bin" "$dir/cw.bin" || fail "the communication worker changed the parameters"
# (a model big enough that collectives take longer than a task switch)
SZ_COMM_WORKER=1 train --config 4,4,256 --seq 64 --grad-clip 0 --prefetch-bytes 16M --report >"$dir/cw.txt" 2>&1 ||
    fail "comm worker run (4,4,256)"
awk '/^overlap/ { found = 1; if ($6 + 0 > 0) ok = 1 } END { exit !(found && ok) }' "$dir/cw.txt" ||
    { cat "$dir/cw.txt"; fail "no overlap with a communication worker"; }
echo "bitwise identical parameters with zero, eager, prio, lws, dmdas, a prefetch window and a communication worker"
# ZeRO-R at every stage: checkpointing, offloaded checkpoints, 64 KB buckets, no arenas change nothing
for stage in 0 1 2 3; do
    train --zero-stage $stage --save "$dir/r$stage.bin" >/dev/null || fail "stage $stage reference"
    for variant in "--checkpoint" "--checkpoint --offload-checkpoints" "--bucket-bytes 64K" "--no-arenas"; do
        # shellcheck disable=SC2086
        train --zero-stage $stage $variant --save "$dir/v.bin" >/dev/null || fail "stage $stage $variant run"
        cmp -s "$dir/r$stage.bin" "$dir/v.bin" || fail "stage $stage: $variant changed the parameters"
    done
done
echo "stages 0-3: bitwise identical with checkpointing, offloaded checkpoints, 64 KB buckets and no arenas"
# Transport: ranks on one node read each other's device pools in place (the default), or go
# through MPI's collectives (SZ_COLLECTIVES=mpi): the same bits at every stage, fp32 and bf16, 2 and 4 ranks.
train --zero-stage 3 --steps 1 >"$dir/shm.txt" 2>&1 || fail "shared-memory run"
grep -q "collectives through shared memory" "$dir/shm.txt" || { cat "$dir/shm.txt"; fail "2 ranks on one node do not use shared memory"; }
SZ_COLLECTIVES=mpi train --zero-stage 3 --steps 1 >"$dir/mpi.txt" 2>&1 || fail "MPI collectives run"
grep -q "collectives through MPI" "$dir/mpi.txt" || { cat "$dir/mpi.txt"; fail "SZ_COLLECTIVES=mpi not honoured"; }
for stage in 0 1 2 3; do
    SZ_COLLECTIVES=mpi train --zero-stage $stage --save "$dir/v.bin" >/dev/null || fail "stage $stage over MPI"
    cmp -s "$dir/r$stage.bin" "$dir/v.bin" || fail "stage $stage: MPI's collectives and shared memory differ"
done
for np in 2 4; do
    for c in shm mpi; do
        SZ_COLLECTIVES=$c timeout 120 "$mpiexec" -n $np "$bin/sz-train" --config d2 --vocab 256 --max-seq 64 \
            --train "$dir/lic_train.bin" --batch 2 --seq 32 --steps 2 --zero-stage 3 --precision bf16 \
            --save "$dir/bf16-$c.bin" >/dev/null || fail "bf16 np $np over $c"
    done
    cmp -s "$dir/bf16-shm.bin" "$dir/bf16-mpi.bin" || fail "bf16, $np ranks: MPI's collectives and shared memory differ"
done
echo "collectives: shared memory by default on one node, bitwise the same as MPI's (stages 0-3; bf16 on 2 and 4 ranks)"
# M_D: the device pool reports its fragmentation, with and without arenas (StarPU's cache off, so
# temporaries really come and go)
for a in "" "--no-arenas"; do
    # shellcheck disable=SC2086
    SZ_ALLOC_CACHE=0 train --zero-stage 3 --checkpoint $a --report >"$dir/md.txt" 2>&1 || fail "M_D run $a"
    grep -q "^device pool (rank 0, arenas o[nf]*): footprint" "$dir/md.txt" || { cat "$dir/md.txt"; fail "no device pool report $a"; }
done
if train --partition-activations >"$dir/pa.txt" 2>&1; then fail "--partition-activations accepted"; fi
grep -q "model parallelism" "$dir/pa.txt" || { cat "$dir/pa.txt"; fail "--partition-activations refusal does not say why"; }
