#!/usr/bin/env bash
# tests/cpu_targets_cli.sh — scripts/cpu-targets.sh's evaluation on canned runs (--dry-run: no build,
# no sz-bench, seconds): the medians it takes (an outlier round does not move them), the ratios and
# the verdicts of targets (a) bf16 <= 0.35 x fp32 where AMX, (b) bf16 not slower, (c) fp32 gflops >=
# 0.6 x the same run's FMA peak, "not applicable" without AMX or at another shape, a failed run
# counted, the before/after attention check (the T x T bytes), the exit status (0 all pass, 1 a
# fail), and the refusals of bad options and files (status 2, the message). The canned figures are
# made up; no timing is measured here.
# Usage: cpu_targets_cli.sh SOURCE_DIR
set -u
src=$1
script=$src/scripts/cpu-targets.sh
corpus=none
. "$(dirname "$0")/cli_common.sh"   # $dir, fail

cpu() { # AMX(true|false) -> the CPU record
    printf '{"ct_record":"cpu","cpu_model":"Canned CPU \\"X\\"","amx_bf16":%s,"amx_tile":%s,"avx512_bf16":true,"nproc":2,"sz_info_bf16_path":"native under --precision bf16 with --bf16-compute auto (canned)","openblas_env":"neither set","commit":"abc1234","date":"2026-12-02T00:00:00Z","shape":"T64","steps":5,"warmup":1,"rounds":3}\n' "$1" "$1"
}
rec() { # LABEL ROUND LOAD STEP MIN GFLOPS PEAK AMX PATH BYTES [MODEL BATCH SEQ] -> a run line as the script writes it
    printf '{"ct_run":"%s","ct_round":%s,"ct_loadavg":%s,"model":"%s","precision":"x","bf16_path":"%s","batch":%s,"seq":%s,"steps":5,"step_ms":%s,"step_ms_min":%s,"tokens_per_s":1,"gflops":%s,"fma_peak_gflops":%s,"fma_isa":"avx512","bf16_matmul_gflops":3000,"bf16_matmul_impl":"brg:avx512_core_amx_bf16","amx":%s,"peak_bytes":%s,"predicted_peak_bytes":%s,"activation_bytes":5}\n' \
        "$1" "$2" "$3" "${11:-d12}" "$9" "${12:-4}" "${13:-64}" "$4" "$5" "$6" "$7" "$8" "${10}" "${10}"
}
# run the evaluation: status in $rc, output in $out
dry() { out=$("$script" --dry-run "$1" 2>"$dir/err"); rc=$?; }
line() { echo "$out" | grep "\"check\":\"$1\"" || fail "no $1 line in: $out"; }
has() { # CHECK TEXT...
    local l t
    l=$(line "$1") || exit 1
    shift
    for t in "$@"; do case "$l" in *"$t"*) ;; *) fail "expected '$t' in: $l" ;; esac; done
}

# 1. an AMX machine where every target passes; medians of 3 rounds, alternating
{
    cpu true
    rec fp32 1 0.50 860 850 300 470 true fp32 2000; rec bf16 1 0.60 290 280 10 470 true native 1500
    rec emulated 1 0.7 1000 990 5 470 true emulated 2500; rec native 1 0.8 285 275 10 470 true native 1500
    rec bf16 2 0.90 300 290 10 470 true native 1500; rec fp32 2 1.00 900 880 290 470 true fp32 2000
    rec native 2 1.1 295 285 10 470 true native 1500; rec emulated 2 1.2 1010 1000 5 470 true emulated 2500
    rec fp32 3 1.30 870 860 310 470 true fp32 2000; rec bf16 3 1.40 280 270 10 470 true native 1500
    rec emulated 3 1.5 990 980 5 470 true emulated 2500; rec native 3 1.6 290 280 10 470 true native 1500
} >"$dir/amx_pass.jsonl"
dry "$dir/amx_pass.jsonl"
[ "$rc" = 0 ] || fail "all targets pass: status $rc, expected 0: $out $(cat "$dir/err")"
[ "$(echo "$out" | wc -l)" = 8 ] || fail "expected 8 lines (machine, 4 runs, 3 targets), got: $out"
has machine '"cpu_model":"Canned CPU \"X\""' '"amx_bf16":true' '"amx_cpuid":true' '"bf16_path_auto":"native"' \
    '"bf16_matmul_impl":"brg:avx512_core_amx_bf16"' '"fma_peak_gflops_median":470.0' '"model":"d12","batch":4,"seq":64'
has 'run","run":"fp32' '"runs":3,"errors":0' '"step_ms_median":870.0' '"step_ms_min_median":860.0' '"ratio_to_fp32":1.0000' \
    '"peak_bytes":2000' '"step_ms":[860.0,900.0,870.0]' '"rounds":[1,2,3]' '"loadavg_before":[0.50,1.00,1.30]'
has 'run","run":"emulated' '"step_ms_median":1000.0' '"ratio_to_fp32":1.1494'
has a_bf16_amx '"amx":true' '"fp32_step_ms_median":870.0' '"bf16_step_ms_median":290.0' '"ratio":0.3333' \
    '"ratio_min":0.3256' '"ratio_per_round":[0.3372,0.3333,0.3218]' '"loadavg_before_bf16":[0.60,0.90,1.40]' \
    '"verdict":"pass","pass":true'
has b_bf16_not_slower '"ratio":0.3333' '"rounds_bf16_slower":0' '"rounds_paired":3' '"pass":true'
has c_fp32_gflops '"gflops_over_peak":[0.6383,0.6170,0.6596]' '"gflops_over_peak_median":0.6383' \
    '"runs_at_or_above":3' '"pass":true'

# 2. the same machine where bf16 is slower and fp32 far from its peak: (a), (b) and (c) fail
{
    cpu true
    rec fp32 1 2 870 860 200 470 true fp32 2000; rec bf16 1 2 950 940 180 470 true native 1500
    rec bf16 2 2 1100 1000 160 470 true native 1500; rec fp32 2 2 900 890 190 470 true fp32 2000
    rec fp32 3 2 860 850 205 470 true fp32 2000; rec bf16 3 2 1000 990 170 470 true native 1500
} >"$dir/amx_fail.jsonl"
dry "$dir/amx_fail.jsonl"
[ "$rc" = 1 ] || fail "failing targets: status $rc, expected 1: $out"
has a_bf16_amx '"ratio":1.1494' '"verdict":"fail","pass":false'
has b_bf16_not_slower '"rounds_bf16_slower":3' '"pass":false'
has c_fp32_gflops '"gflops_over_peak_median":0.4255' '"runs_at_or_above":0' '"pass":false'

# 3. no AMX: (a) not applicable; an outlier round does not move the medians; (c) from each run's own
# peak (0.5, 0.13, 0.67: median 0.5, fails); a run that failed is counted and fails the check
{
    cpu false
    rec fp32 1 7 1500 1400 150 300 false fp32 2000; rec bf16 1 7 1200 1100 100 300 false native 1500
    rec bf16 2 9 1300 1200 100 300 false native 1500; rec fp32 2 9 5000 1450 40 300 false fp32 2000
    rec fp32 3 8 1400 1300 200 300 false fp32 2000; rec bf16 3 8 9000 1150 100 300 false native 1500
    echo '{"ct_run":"native","ct_round":1,"ct_loadavg":7,"ct_error":"exit 1, no JSON from sz-bench: refused"}'
} >"$dir/noamx.jsonl"
dry "$dir/noamx.jsonl"
[ "$rc" = 1 ] || fail "no AMX, (c) fails: status $rc, expected 1: $out"
has a_bf16_amx '"amx":false' '"verdict":"not applicable: no AMX","pass":null'
has b_bf16_not_slower '"fp32_step_ms_median":1500.0' '"bf16_step_ms_median":1300.0' '"ratio":0.8667' \
    '"rounds_bf16_slower":1' '"pass":true'
has c_fp32_gflops '"gflops_over_peak":[0.5000,0.1333,0.6667]' '"gflops_over_peak_median":0.5000' '"runs_at_or_above":1' '"pass":false'
has 'run","run":"native' '"runs":0,"errors":1' '"last_error":"exit 1, no JSON from sz-bench: refused"' '"step_ms_median":null'
grep -v '"ct_run":"native"' "$dir/noamx.jsonl" | sed 's/"gflops":\(40\|150\),/"gflops":190,/' >"$dir/noamx_ok.jsonl"
dry "$dir/noamx_ok.jsonl"
[ "$rc" = 0 ] || fail "no AMX, (b) and (c) pass: status $rc, expected 0: $out"
has c_fp32_gflops '"gflops_over_peak_median":0.6333' '"pass":true'

# 4. before/after the attention change at d12 B4 T1024: the T x T bytes are 12 x 2 x 4 x 12 x 1024^2 x 4;
# falling by them less the row statistics is a fail with a note; the targets do not apply there
{
    cpu false
    rec before 1 3 103129 91270 80 300 false "" 12430008320 d12 4 1024
    rec fp32 1 3 140273 98367 70 300 false fp32 7602888704 d12 4 1024
    rec fp32 2 3 120000 99000 70 300 false fp32 7602888704 d12 4 1024
    rec before 2 3 100000 90000 80 300 false "" 12430008320 d12 4 1024
} | sed 's/"ct_run":"before",\("ct_round":[0-9]*,"ct_loadavg":[0-9]*\)/"ct_run":"before",\1,"ct_commit":"2532a79abcde"/' >"$dir/ba.jsonl"
dry "$dir/ba.jsonl"
[ "$rc" = 1 ] || fail "peak falls by less than the T x T bytes: status $rc, expected 1: $out"
has before_after_attention '"before_commit":"2532a79abcde"' '"before_step_ms_median":101564.5' '"after_step_ms_median":130136.5' \
    '"before_peak_bytes":12430008320' '"after_peak_bytes":7602888704' '"peak_fall_bytes":4827119616' \
    '"tt_bytes":4831838208' '"row_stats_bytes":4718592' '"note":"the peak falls by the T x T tensors less' '"pass":false'
has a_bf16_amx '"verdict":"not applicable: the targets are defined at d12 batch 4 seq 64 (these runs: d12 batch 4 seq 1024)"'
has c_fp32_gflops '"pass":null'
sed 's/7602888704/7598170112/g' "$dir/ba.jsonl" >"$dir/ba_ok.jsonl"
dry "$dir/ba_ok.jsonl"
[ "$rc" = 0 ] || fail "peak falls by the T x T bytes: status $rc, expected 0: $out"
has before_after_attention '"peak_fall_bytes":4831838208' '"verdict":"pass","pass":true'
case "$out" in *'"note"'*) fail "no note expected when the target is met: $out" ;; esac

# 5. refusals: status 2 and the reason, before anything is built or run
refuse() { # EXPECTED-TEXT ARGS...
    local want=$1 o r
    shift
    o=$(SZ_DEPS_DIR=$dir/no-deps "$script" "$@" 2>&1); r=$? # no StarPU env: never builds
    [ "$r" = 2 ] || fail "$* : status $r, expected 2: $o"
    case "$o" in *"$want"*) ;; *) fail "$* : expected '$want' in: $o" ;; esac
}
refuse "--dry-run $dir/none: no such readable file" --dry-run "$dir/none"
echo '{"model":"d12"}' >"$dir/junk.jsonl"
refuse "neither a cpu record nor a run" --dry-run "$dir/junk.jsonl"
cpu true >"$dir/empty.jsonl"
refuse "no runs in" --dry-run "$dir/empty.jsonl"
refuse "unknown option '--bogus'" --bogus
refuse "--runs: unknown run 'fp16'" --runs fp32,fp16
refuse "'before' needs --before-commit" --runs before,fp32
refuse "--shape T77: expected T64, T1024 or BxT" --shape T77
refuse "--rounds x: expected a whole number" --rounds x
refuse "--rounds must be at least 1" --rounds 0
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    refuse "--before-commit no-such-commit-xyz: not a commit" --before-commit no-such-commit-xyz
fi
echo "cpu_targets_cli: ok"
