#!/usr/bin/env bash
# tests/bench_cli.sh — sz-bench runs a step on a tiny model and prints one JSON object with its
# figures and the machine's yardsticks, bf16 and f32 oneDNN matmul, amx, the stream triad and the step
# split into matmul_ms and other_ms (within it the conversions' convert_ms, 0 in fp32, > 0 on the
# emulated bf16 path with SZ_GRAD_ROUND_FOLD=0 and 0 without, and the zeroing's zero_ms), the optimizer's time against the bytes it moves, and
# every codelet's time and task count (codelet_ms, codelet_tasks: adding up to the busy time, matmul_ms and
# optimizer_ms), page faults per step (their presence, not their values: timings are never pass/fail here; optimizer_bytes is
# exact: 28 bytes per parameter, padded, at stage 0 on one rank; with --optimizer sgd --momentum 0.9,
# recorded in the JSON, 20: one fp32 state); on a CPU-only run no GPU figure (mfu, gpu_peak_tflops) at
# all; a bad --optimizer or --momentum, a value option without its value and a malformed or out-of-range
# number are refused with a message (exit status 2). --arch llama: the LLaMA-style model's
# parameters and model FLOPs exact (SwiGLU's three matmuls, no biases), peak_bytes = predicted_peak_bytes,
# bf16_path fp32 / native / emulated as asked; an unknown --arch refused.
# Usage: bench_cli.sh BUILD_DIR
set -u
bin=$1
corpus=none
. "$(dirname "$0")/cli_common.sh"   # fail
out=$(STARPU_NCUDA=0 timeout 120 "$bin/sz-bench" --model 2,2,32 --vocab 256 --batch 2 --seq 16 --steps 2 --warmup 1 --json) ||
    fail "sz-bench exited non-zero"
[ "$(echo "$out" | wc -l)" -eq 1 ] || fail "expected exactly one JSON line, got: $out"
num() { echo "$out" | sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p"; }
for k in step_ms step_ms_min cpu_ms_per_step tokens_per_s gflops fma_peak_gflops sgemm_gflops; do
    v=$(num "$k")
    [ -n "$v" ] || fail "no \"$k\" in $out"
    awk -v v="$v" 'BEGIN { exit !(v > 0) }' || fail "$k = $v, expected > 0"
done
v=$(num bf16_dot_peak_gflops)
[ -n "$v" ] || fail "no bf16_dot_peak_gflops in $out"
if grep -q avx512_bf16 /proc/cpuinfo; then
    awk -v v="$v" 'BEGIN { exit !(v > 0) }' || fail "the CPU has AVX512_BF16 but bf16_dot_peak_gflops = $v"
else
    [ "$v" = 0 ] || fail "no AVX512_BF16 here but bf16_dot_peak_gflops = $v"
fi
for k in bf16_matmul_gflops f32_matmul_gflops stream_gbps matmul_ms other_ms convert_ms zero_ms optimizer_ms optimizer_bytes \
    optimizer_gbps optimizer_over_stream page_faults_per_step page_faults_max_step; do
    v=$(num "$k")
    [ -n "$v" ] || fail "no \"$k\" in $out"
done
for k in f32_matmul_gflops stream_gbps; do
    awk -v v="$(num $k)" 'BEGIN { exit !(v > 0) }' || fail "$k = $(num $k), expected > 0"
done
if echo "$out" | grep -q '"sched_policy":"zero"'; then   # the zero policy times the tasks
    awk -v v="$(num matmul_ms)" 'BEGIN { exit !(v > 0) }' || fail "matmul_ms = $(num matmul_ms) under the zero policy"
    awk -v v="$(num other_ms)" 'BEGIN { exit !(v >= 0) }' || fail "other_ms = $(num other_ms), expected >= 0"
    awk -v v="$(num optimizer_ms)" 'BEGIN { exit !(v > 0) }' || fail "optimizer_ms = $(num optimizer_ms) under the zero policy"
    awk -v v="$(num optimizer_gbps)" 'BEGIN { exit !(v > 0) }' || fail "optimizer_gbps = $(num optimizer_gbps) under the zero policy"
    awk -v v="$(num convert_ms)" 'BEGIN { exit !(v == 0) }' || fail "convert_ms = $(num convert_ms) in fp32 (no conversions)"
    # every codelet's time (codelet_ms) and task count (codelet_tasks): on one rank with one worker
    # the tasks never overlap, so they add up to the compute and communication busy time; the five
    # matmul codelets add up to matmul_ms, adamw to optimizer_ms
    echo "$out" | jawk '{
        c = jraw($0, "codelet_ms"); n = jraw($0, "codelet_tasks")
        if (!jok(n)) { print "codelet_tasks is not an object: " n; exit 1 }
        for (i = 1; i <= jnkeys; i++) tasks[JK[i]] = JV[i] + 0
        if (!jok(c) || jnkeys < 5) { print "codelet_ms is not an object of the step codelets: " c; exit 1 }
        for (i = 1; i <= jnkeys; i++) {
            k = JK[i]; v = JV[i] + 0; all += v
            if (!(k in tasks) || tasks[k] < 1 || v < 0) { print "codelet " k ": " v " ms, " tasks[k] " tasks"; exit 1 }
            if (k ~ /^(matmul_fwd|matmul_bwd|matmul_bwd_tied|matmul_gelu_fwd|gelu_matmul_bwd)$/) mm += v
            if (k == "adamw") opt += v
        }
        busy = (jget($0, "compute_task_s") + jget($0, "comm_task_s")) * 1e3
        d = all - busy; if (d < 0) d = -d
        if (d > 1e-3 * busy + 1e-3) { print "codelet_ms add up to " all " ms, the tasks were busy " busy; exit 1 }
        d = mm - jget($0, "matmul_ms"); if (d < 0) d = -d
        if (d > 1e-6 * mm + 1e-6) { print "matmul codelets " mm " ms against matmul_ms " jget($0, "matmul_ms"); exit 1 }
        d = opt - jget($0, "optimizer_ms"); if (d < 0) d = -d
        if (opt <= 0 || d > 1e-6 * opt + 1e-6) { print "adamw " opt " ms against optimizer_ms " jget($0, "optimizer_ms"); exit 1 }
    }' || fail "codelet_ms / codelet_tasks wrong in $out"
    # the emulated bf16 path with the gradients' rounding a task of its own (SZ_GRAD_ROUND_FOLD=0)
    # converts the working gradients to bf16: its conversion tasks are timed; with the rounding folded
    # into the writers (the default; the tied wte's too) GPT-2 converts nothing (LLaMA: below)
    for f in 0 1; do
        emu=$(SZ_GRAD_ROUND_FOLD=$f STARPU_NCUDA=0 timeout 120 "$bin/sz-bench" --model 2,2,32 --vocab 256 --batch 2 \
            --seq 16 --steps 1 --warmup 0 --precision bf16 --bf16-compute emulated --json) ||
            fail "SZ_GRAD_ROUND_FOLD=$f sz-bench --precision bf16 --bf16-compute emulated"
        v=$(echo "$emu" | sed -n 's/.*"convert_ms":\([-0-9.e+]*\).*/\1/p')
        awk -v v="$v" -v f=$f 'BEGIN { exit !(f ? v == 0 : v > 0) }' ||
            fail "convert_ms = '$v' on the emulated bf16 path with SZ_GRAD_ROUND_FOLD=$f"
    done
fi
# model 2,2,32 vocab 256: wte 256x32 + wpe 1024x32 + 2 blocks of 12704 + lnf 64 = 66432 parameters,
# each unit padded to a multiple of N_d = 1 (no padding): 28 bytes each
[ "$(num params)" = 66432 ] || fail "params = $(num params), expected 66432"
[ "$(num optimizer_bytes)" = 1860096 ] || fail "optimizer_bytes = $(num optimizer_bytes), expected 28 x 66432 = 1860096"
awk -v v="$(num page_faults_per_step)" 'BEGIN { exit !(v >= 0) }' || fail "page_faults_per_step = $(num page_faults_per_step)"
echo "$out" | grep -q '"bf16_matmul_impl":"[^"]*"' || fail "no bf16_matmul_impl in $out"
if grep -q amx_tile /proc/cpuinfo && grep -q amx_bf16 /proc/cpuinfo; then amx=true; else amx=false; fi
echo "$out" | grep -q "\"amx\":$amx" || fail "amx should be $amx (from /proc/cpuinfo): $out"
# GPU figures only when a GPU ran (this test runs with STARPU_NCUDA=0): absent, not zero, on a CPU run
for k in mfu gpu_peak_tflops gpus gpu_name; do
    echo "$out" | grep -q "\"$k\":" && fail "\"$k\" present on a CPU-only run: $out"
done
awk -v a="$(num step_ms_min)" -v b="$(num step_ms)" 'BEGIN { exit !(a <= b) }' || fail "step_ms_min above the mean step"
[ "$(num model_state_bytes)" = "$(num model_state_bytes_formula)" ] || fail "model-state bytes differ from the formula"
echo "$out" | grep -q '"optimizer":"adamw"' && [ "$(num optimizer_state_floats)" = 2 ] || fail "the default optimizer is not recorded as adamw with 2 states: $out"
# --optimizer sgd --momentum 0.9 (one fp32 state: 12 + 8 = 20 bytes a parameter), in the same run as
# STARPU_SCHED=zero, which names our policy: StarPU must not look it up in its own table (and warn)
err=$(env -u STARPU_SILENT STARPU_SCHED=zero timeout 120 "$bin/sz-bench" --model 2,2,32 --vocab 256 --batch 2 \
    --seq 16 --steps 1 --warmup 0 --optimizer sgd --momentum 0.9 --json 2>&1 >"$dir/sgd.json") ||
    fail "sz-bench --optimizer sgd with STARPU_SCHED=zero"
grep -q '"sched_policy":"zero"' "$dir/sgd.json" || fail "STARPU_SCHED=zero did not select the zero policy"
! echo "$err" | grep -q "not found" || fail "StarPU warned about STARPU_SCHED=zero: $err"
out=$(cat "$dir/sgd.json")
echo "$out" | grep -Eq '"optimizer":"sgd","momentum":0\.(9|89999997)' || fail "the JSON does not record sgd with momentum 0.9: $out"
[ "$(num optimizer_state_floats)" = 1 ] || fail "optimizer_state_floats = $(num optimizer_state_floats) with SGD's momentum"
[ "$(num optimizer_bytes)" = 1328640 ] || fail "SGD optimizer_bytes = $(num optimizer_bytes), expected 20 x 66432 = 1328640"
[ "$(num model_state_bytes)" = "$(num model_state_bytes_formula)" ] || fail "SGD: model-state bytes $(num model_state_bytes), formula $(num model_state_bytes_formula)"
# refusals, before any work, exit status 2: an unknown optimizer, a momentum out of range, a momentum
# with AdamW; a value option last on the line (no value), a value that is not a number or out of range
for bad in "--optimizer lamb:allowed: adamw, sgd" "--optimizer sgd --momentum 1:--momentum" \
    "--momentum 0.9:only --optimizer sgd has a momentum" "--batch:--batch needs a value" \
    "--seq:--seq needs a value" "--steps:--steps needs a value" "--model:--model needs a value" \
    "--prefetch-bytes:--prefetch-bytes needs a value" "--batch abc:--batch abc: not an integer" \
    "--seq 2x:--seq 2x: not an integer" "--steps 0:--steps 0: out of range" \
    "--warmup 1.5:--warmup 1.5: not an integer" "--zero-stage 4:--zero-stage 4: out of range" \
    "--micro-batches -1:--micro-batches -1: out of range" "--prefetch-bytes zz:--prefetch-bytes zz: not a byte size"; do
    # shellcheck disable=SC2086
    "$bin/sz-bench" --model 2,2,32 --vocab 256 ${bad%%:*} >"$dir/bad.txt" 2>&1
    rc=$?
    [ "$rc" = 2 ] || { cat "$dir/bad.txt"; fail "sz-bench ${bad%%:*}: exit status $rc, expected 2"; }
    grep -q -- "${bad#*:}" "$dir/bad.txt" || { cat "$dir/bad.txt"; fail "sz-bench ${bad%%:*}: the message lacks '${bad#*:}'"; }
done
# --arch llama: the LLaMA-style model (sz-train --arch llama's presets and L,H,C), the same JSON. Model
# 2,2,32 vocab 256: C 32, SwiGLU hidden F = 96 (8C/3 rounded up to 32); parameters: wte 256x32 + 2 blocks
# of (rms1 32 + qkv 3x32x32 + proj 32x32 + rms2 32 + gate, up, down 3x96x32 = 13376) + rmsf 32 + lm 256x32
# = 43168. FLOPs per step, matmuls only (no biases, RMSNorm and RoPE not counted): per token forward
# 2 x (2 x (4 x 32^2 + 3 x 32 x 96) + 32 x 256) = 69632, causal attention 2 x 2 x 16 x 32 = 2048; x 3
# (forward + backward) x 2 x 16 tokens = 6881280. fp32, then bf16 native and emulated (bf16_path as asked)
for pc in fp32:auto:fp32 bf16:native:native bf16:emulated:emulated; do
    IFS=: read -r prec comp path <<<"$pc"
    out=$(STARPU_NCUDA=0 timeout 120 "$bin/sz-bench" --arch llama --model 2,2,32 --vocab 256 --batch 2 --seq 16 \
        --steps 1 --warmup 0 --precision "$prec" --bf16-compute "$comp" --json) || fail "sz-bench --arch llama --precision $prec --bf16-compute $comp"
    [ "$(echo "$out" | wc -l)" -eq 1 ] || fail "llama $pc: expected one JSON line, got: $out"
    echo "$out" | grep -q '"arch":"llama"' || fail "llama $pc: no \"arch\":\"llama\" in $out"
    echo "$out" | grep -q "\"bf16_path\":\"$path\"" || fail "llama $pc: bf16_path should be $path: $out"
    [ "$(num params)" = 43168 ] || fail "llama $pc: params = $(num params), expected 43168"
    [ "$(num flops_per_step)" = 6881280 ] || fail "llama $pc: flops_per_step = $(num flops_per_step), expected 6881280"
    [ "$(num peak_bytes)" = "$(num predicted_peak_bytes)" ] || fail "llama $pc: peak_bytes $(num peak_bytes) != predicted $(num predicted_peak_bytes)"
    [ "$(num model_state_bytes)" = "$(num model_state_bytes_formula)" ] || fail "llama $pc: model-state bytes differ from the formula"
    for k in step_ms gflops tokens_per_s; do
        awk -v v="$(num $k)" 'BEGIN { exit !(v > 0) }' || fail "llama $pc: $k = $(num $k), expected > 0"
    done
    for k in matmul_ms other_ms convert_ms; do [ -n "$(num $k)" ] || fail "llama $pc: no $k in $out"; done
    if echo "$out" | grep -q '"sched_policy":"zero"'; then
        awk -v v="$(num matmul_ms)" 'BEGIN { exit !(v > 0) }' || fail "llama $pc: matmul_ms = $(num matmul_ms)"
        # the emulated path rounds every gradient in its writers (the embedding's too): nothing to convert
        [ "$path" != emulated ] || awk -v v="$(num convert_ms)" 'BEGIN { exit !(v == 0) }' || fail "llama emulated: convert_ms = $(num convert_ms)"
        [ "$path" != fp32 ] || awk -v v="$(num convert_ms)" 'BEGIN { exit !(v == 0) }' || fail "llama fp32: convert_ms = $(num convert_ms)"
    fi
done
# and with the gradients' rounding a task of its own (SZ_GRAD_ROUND_FOLD=0) its conversions are timed
if echo "$out" | grep -q '"sched_policy":"zero"'; then
    emu=$(SZ_GRAD_ROUND_FOLD=0 STARPU_NCUDA=0 timeout 120 "$bin/sz-bench" --arch llama --model 2,2,32 --vocab 256 --batch 2 \
        --seq 16 --steps 1 --warmup 0 --precision bf16 --bf16-compute emulated --json) ||
        fail "SZ_GRAD_ROUND_FOLD=0 sz-bench --arch llama --precision bf16 --bf16-compute emulated"
    v=$(echo "$emu" | sed -n 's/.*"convert_ms":\([-0-9.e+]*\).*/\1/p')
    awk -v v="$v" 'BEGIN { exit !(v > 0) }' || fail "llama emulated, SZ_GRAD_ROUND_FOLD=0: convert_ms = '$v'"
fi
if "$bin/sz-bench" --arch bert --model 2,2,32 --vocab 256 >"$dir/bad.txt" 2>&1; then fail "sz-bench accepted --arch bert"; fi
grep -q -- "--arch bert: must be gpt2 or llama" "$dir/bad.txt" || { cat "$dir/bad.txt"; fail "--arch bert: the message"; }
echo "sz-bench: one JSON object with its figures and yardsticks; --optimizer sgd counted with its one state; STARPU_SCHED=zero selects ours quietly; --arch llama with its FLOPs counted"
