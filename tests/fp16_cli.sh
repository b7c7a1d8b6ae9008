#!/usr/bin/env bash
# tests/fp16_cli.sh — fp16 mixed precision with dynamic loss scaling through sz-train (issue 33):
#  1. the first line says fp16; the step lines carry the loss scale (2^16 by default);
#  2. fp16's losses stay close to fp32's over 200 steps of a tiny GPT-2 on the license corpus
#     (the mean of the last 50 within 0.25: bf16 drifts as far from fp32 here), and both learn;
#  3. a forced overflow (a large --initial-scale-power) skips exactly the steps DeepSpeed's dynamic
#     loss scaler skips — each step's scale checked against that rule written out below in awk, with
#     hysteresis 2 and a window of 4 so that halving, hysteresis and doubling all happen — and the
#     run recovers (steps apply, the loss falls);
#  4. bitwise the same losses and parameters with STARPU_NCPU=1 and 2;
#  5. 2 ranks: ZeRO stages 1, 2, 3 and stage 3 with checkpointing give bitwise stage 0's losses,
#     the forced overflow included;
#  6. a state saved at step 3 of the overflowing run resumes to bitwise the uninterrupted run's
#     step 8 loss, loss scale and parameters (the scaler is part of the state); a state whose
#     manifest lacks the scaler is refused, saying so;
#  7. --ds-config's fp16 block trains exactly as the options it maps to; a key it does not take is
#     refused; --precision fp15 is refused naming the choices;
#  8. sz-estimate --precision fp16 --plan predicts the peak sz-train measures.
# Usage: fp16_cli.sh BUILD_DIR [MPIEXEC]
set -u
bin=$1 mpiexec=${2:-mpiexec}
export STARPU_NCUDA=0 # the CPU path (fp16 on CUDA workers: scripts/gpu-check.sh --emulated, part d2_fp16)
corpus="GPL-3 LGPL-3 Apache-2.0 MPL-2.0"
. "$(dirname "$0")/cli_common.sh"
train() { "$bin/sz-train" --config d2 --vocab 256 --max-seq 64 --train "$dir/lic_train.bin" --batch 4 --seq 32 \
          --lr 2e-3 "$@"; }
losses() { grep -o '"loss": [-0-9.e]*' | sed 's/"loss": //'; }

# 1. reporting
train --steps 2 --precision fp16 >"$dir/first.txt" || fail "--precision fp16"
head -1 "$dir/first.txt" | grep -q "(bf16_path fp16)" || { head -1 "$dir/first.txt"; fail "first line lacks bf16_path fp16"; }
grep -q "scale 65536" "$dir/first.txt" || { cat "$dir/first.txt"; fail "the step line lacks the loss scale 65536"; }
echo "fp16 reported; scale 65536 on the step lines"

# 2. fp16 against fp32 over 200 steps
train --steps 200 --json >"$dir/fp32.json" || fail "fp32 run"
train --steps 200 --json --precision fp16 >"$dir/fp16.json" || fail "fp16 run"
# (per-step losses move with the batch, and fp16 skips its first overflowing steps: compare the
# mean of the last 50 steps)
paste <(losses <"$dir/fp32.json") <(losses <"$dir/fp16.json") | awk '
    NR == 1 { first = $1 } NR > 150 { a += $1; b += $2 }
    END { a /= 50; b /= 50; d = a - b; if (d < 0) d = -d
          printf "fp16 vs fp32 over %d steps: mean loss of the last 50 %.4f vs %.4f (first %.4f)\n", NR, b, a, first
          exit !(NR == 200 && d < 0.25 && b < first - 1.5) }' || fail "fp16 losses far from fp32's, or not learning"

# 3. forced overflow against DeepSpeed's rule
pow=24 # well above what this model's gradients fit in fp16 (2^16 already overflows at step 1)
force=(--precision fp16 --initial-scale-power $pow --hysteresis 2 --loss-scale-window 4 --json)
train --steps 16 "${force[@]}" --save "$dir/ovf.bin" >"$dir/ovf.json" || fail "forced overflow run"
# The rule (DeepSpeed, DynamicLossScaler.update_scale, consecutive_hysteresis false): an overflow with
# hysteresis left 1 halves the scale (not below min 1), else spends one; a clean step doubles it when
# (iteration - last overflow's) % window == 0, restoring the hysteresis.
jawk '
    BEGIN { scale = 2^'$pow'; hyst = 2; last = -1; it = 0; win = 4; bad = 0 }
    jok($0) && jraw($0, "loss_scale") != "" {
        s = jraw($0, "loss_scale") + 0; k = jraw($0, "skipped") == "true"
        if (s != scale) { printf "step %d: scale %s, the rule says %s\n", it + 1, s, scale; bad = 1 }
        if (k) { if (hyst == 1) { scale = scale / 2; if (scale < 1) scale = 1 } else hyst--; last = it; nskip++ }
        else if ((it - last) % win == 0) { hyst = 2; scale = scale * 2 }
        if (!k) napplied++
        it++
    }
    END { printf "forced overflow: %d of %d steps skipped, %d applied; the scale followed the rule\n", nskip, it, napplied
          exit bad || nskip < 2 || napplied < 4 || it != 16 }' "$dir/ovf.json" || fail "the loss scale did not follow DeepSpeed's rule"
first=$(losses <"$dir/ovf.json" | head -1) last=$(losses <"$dir/ovf.json" | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "the loss did not fall after the overflows ($first -> $last)"

# 4. thread counts
STARPU_NCPU=1 train --steps 8 "${force[@]}" --save "$dir/n1.bin" | losses >"$dir/n1.txt" || fail "STARPU_NCPU=1"
STARPU_NCPU=2 train --steps 8 "${force[@]}" --save "$dir/n2.bin" | losses >"$dir/n2.txt" || fail "STARPU_NCPU=2"
cmp -s "$dir/n1.txt" "$dir/n2.txt" && cmp -s "$dir/n1.bin" "$dir/n2.bin" || fail "STARPU_NCPU=1 and 2 differ"
echo "STARPU_NCPU=1 and 2: bitwise the same losses and parameters"

# 5. stages at N_d = 2
mpi() { timeout 120 "$mpiexec" -n 2 "$bin/sz-train" --config d2 --vocab 256 --max-seq 64 \
        --train "$dir/lic_train.bin" --batch 2 --seq 32 --lr 2e-3 --steps 6 "${force[@]}" "$@"; }
mpi --zero-stage 0 >"$dir/s0.json" || fail "2 ranks, stage 0"
grep -q '"skipped": true' "$dir/s0.json" || fail "2 ranks: the forced scale did not overflow"
for s in "1" "2" "3" "3 --checkpoint"; do
    mpi --zero-stage $s >"$dir/s.json" || fail "2 ranks, stage $s"
    cmp -s <(losses <"$dir/s0.json") <(losses <"$dir/s.json") && \
        cmp -s <(grep -o '"loss_scale": [0-9.e+]*' "$dir/s0.json") <(grep -o '"loss_scale": [0-9.e+]*' "$dir/s.json") \
        || fail "2 ranks: stage $s losses or scales differ from stage 0"
done
echo "2 ranks: stages 1, 2, 3 and 3 with checkpointing bitwise stage 0 (overflows included)"

# 6. resume mid-overflow: the scaler is in the state
train --steps 8 "${force[@]}" --save "$dir/u.bin" >"$dir/u.json" || fail "uninterrupted run"
train --steps 3 "${force[@]}" --save-state "$dir/state" >/dev/null || fail "--save-state"
train --steps 8 "${force[@]}" --resume "$dir/state" --save "$dir/r.bin" >"$dir/r.json" || fail "--resume"
[ "$(losses <"$dir/r.json" | tail -1)" = "$(losses <"$dir/u.json" | tail -1)" ] && cmp -s "$dir/r.bin" "$dir/u.bin" && \
    [ "$(grep -o '"loss_scale": [0-9.e+]*' "$dir/r.json" | tail -1)" = "$(grep -o '"loss_scale": [0-9.e+]*' "$dir/u.json" | tail -1)" ] \
    || fail "resumed: step 8 differs from the uninterrupted run's (loss, scale or parameters)"
echo "resumed at step 3: bitwise the uninterrupted run's step 8 loss, scale and parameters"
# a state without its loss scaler cannot resume an fp16 run: refused, saying what is missing
sed -i 's/"loss_scaler"/"loss_scaler_gone"/' "$dir"/state/step-00000003/manifest.json
"$bin/sz-state" --reseal "$dir/state/step-00000003" >/dev/null || fail "sz-state --reseal" # the edit is deliberate
if train --steps 8 "${force[@]}" --resume "$dir/state" >"$dir/noscaler.txt" 2>&1; then fail "resumed fp16 without a loss scaler"; fi
grep -q "the state has no usable loss_scaler" "$dir/noscaler.txt" || { cat "$dir/noscaler.txt"; fail "no clear refusal"; }
echo "a state without its loss scaler: refused"

# 7. --ds-config's fp16 block
cat >"$dir/ds.json" <<'EOF'
{"fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 24, "loss_scale_window": 4, "hysteresis": 2,
          "min_loss_scale": 1}}
EOF
train --steps 8 --json --ds-config "$dir/ds.json" 2>"$dir/ds.err" | losses >"$dir/ds.txt" || { cat "$dir/ds.err"; fail "--ds-config fp16"; }
grep -q "fp16.enabled = true -> --precision fp16" "$dir/ds.err" || { cat "$dir/ds.err"; fail "ds-config did not map fp16.enabled"; }
cmp -s "$dir/ds.txt" "$dir/n1.txt" || fail "--ds-config's fp16 block trains differently from its options"
echo '{"fp16": {"enabled": true, "fp16_master_weights_and_grads": true}}' >"$dir/bad.json"
if train --steps 1 --ds-config "$dir/bad.json" >"$dir/bad.txt" 2>&1; then fail "accepted fp16.fp16_master_weights_and_grads"; fi
grep -q "fp16.fp16_master_weights_and_grads: not supported" "$dir/bad.txt" || { cat "$dir/bad.txt"; fail "no clear refusal"; }
if train --steps 1 --precision fp15 >"$dir/bad.txt" 2>&1; then fail "accepted --precision fp15"; fi
grep -q "fp32, bf16 or fp16" "$dir/bad.txt" || { cat "$dir/bad.txt"; fail "the refusal does not name the choices"; }
echo "--ds-config fp16: trains as its options; unknown keys and precisions refused"

# 8. sz-estimate --precision fp16
ntok=$(( ($(stat -c %s "$dir/lic_train.bin") - 1024) / 2 ))
for s in 0 3; do
    peak=$(train --steps 1 --json --precision fp16 --zero-stage $s | tail -1 | sed 's/.*"peak_bytes": \([0-9]*\).*/\1/')
    est=$("$bin/sz-estimate" --model d2 --vocab 256 --max-seq 64 --batch 4 --seq 32 --nd 1 --stage $s \
          --precision fp16 --data-tokens $ntok --plan --json) || fail "sz-estimate --precision fp16 --plan"
    echo "$est" | grep -q '"kind":"clip"' || fail "sz-estimate --precision fp16 --plan has no clip action (the overflow check)"
    est=$(echo "$est" | sed 's/.*"peak_bytes":\([0-9]*\).*/\1/')
    [ -n "$peak" ] && [ "$est" = "$peak" ] || fail "sz-estimate --precision fp16 (stage $s) predicts $est bytes, sz-train measured $peak"
    echo "sz-estimate --precision fp16 --plan, stage $s: predicted $est = sz-train's peak"
done
"$bin/sz-estimate" --model d2 --vocab 256 --precision fp16 --json | tr -d ' \t\n' | grep -q '"bf16_path":"fp16"' \
    || fail "sz-estimate --precision fp16 --json lacks bf16_path fp16"
echo "fp16_cli: all checks passed"
