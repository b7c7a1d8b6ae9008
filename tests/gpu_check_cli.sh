#!/usr/bin/env bash
# tests/gpu_check_cli.sh — scripts/gpu-check.sh's scheduler ranking without a GPU: its dry run
# (SZ_GPU_CHECK_DRYRUN=1, only the part sched_ranking_canned) ranks made-up rows through
# scripts/sched_rank.sh (bash and awk; neither this test nor the script needs Python). The shipped
# rows (zero wins every criterion) give a passing summary; rows where prio is faster, zero's overlap
# falls short and lws failed give the right verdict on every criterion; communication longer than
# compute makes the overlap criterion not apply; with no zero row nothing is ranked. The ranking
# never changes the check's exit status. Also the other parts are not run when not selected, and the
# d2 bf16 native part runs its two d2 runs (both on CPUs here) and reports, failing for want of a GPU;
# so does the d2 fp16 part (its forced overflow: the same steps skipped, the same losses, on CPUs).
# And --bundle's prerequisites on made-up bundles (too new a glibc, a CPU feature missing, a library
# not found, an mpiexec that fails, no file), an unknown argument and --bundle with --emulated (exit 2).
# Usage: gpu_check_cli.sh BUILD_DIR
set -uo pipefail
bin="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
corpus=none
. "$(dirname "$0")/cli_common.sh"   # $dir, fail
check() { # NAME ROWS_FILE: run the dry run's canned ranking on it, output in $dir/NAME.out
    env SZ_GPU_CHECK_DRYRUN=1 SZ_BUILD_DIR="$bin" SZ_GPU_LOG="$dir/logs" SZ_GPU_CHECK_PARTS=sched_ranking_canned \
        ${2:+SZ_GPU_CHECK_CANNED_ROWS="$2"} timeout 120 "$root/scripts/gpu-check.sh" >"$dir/$1.out" 2>"$dir/$1.err"
    echo $?
}
# Q NAME PART KEY...: a value from the JSON line of PART in NAME's output ("missing" if none)
q() {
    jawk 'BEGIN { r = "missing" }
        FNR == 1 { nk = split(KEYS, K, " ") }
        jok($0) && jraw($0, "part") == "\"" P "\"" {
            r = $0
            for (i = 1; i <= nk; i++) r = substr(r, 1, 1) == "{" ? jraw(r, K[i]) : ""
            if (r == "") r = "null"
            exit
        }
        END { print r }' P="$2" KEYS="${*:3}" "$dir/$1.out"
}

rc=$(check shipped "")
[ "$rc" = 0 ] || fail "dry run with the shipped rows: exit $rc ($(tail -3 "$dir/shipped.err"))"
[ "$(q shipped sched_ranking_canned result)" = '"pass"' ] || fail "shipped rows: summary not pass: $(cat "$dir/shipped.out")"
[ "$(q shipped sched_ranking_canned canned)" = true ] || fail "summary not marked canned"
[ "$(q shipped sched_ranking_canned counts_toward_total)" = false ] || fail "the ranking must not count toward total"
[ "$(q shipped sched_ranking_canned fastest)" = '"zero"' ] || fail "shipped: fastest"
for pol in zero dmdas prio lws; do
    [ "$(q shipped canned_sched_$pol zero_wins step)" = true ] || fail "shipped: zero must win the step against $pol"
    [ "$(q shipped canned_sched_$pol zero_wins device_peak)" = true ] || fail "shipped: zero must win the peak against $pol"
done
[ "$(q shipped canned_sched_zero zero_wins overlap)" = true ] || fail "shipped: overlap 0.91 with comm < compute must pass"
for part in kernels attention_bench d2_losses d2_bf16_native d2_fp16 llama_d2_losses llama_d2_bf16_native stages budget bench sched_zero; do
    [ "$(q shipped $part result)" = missing ] || fail "part $part ran although not selected"
done

cat >"$dir/lose.jsonl" <<'ROWS'
# zero slower than prio, lowest measured peak, overlap short of 0.8 with comm < compute; lws failed
{"part": "sched_zero", "result": "pass", "policy": "zero", "step_ms": 100.0, "device_peak_bytes": 900, "device_measured_peak_bytes": 1000, "overlap": 0.5, "comm_task_s": 0.05, "compute_task_s": 0.09}
{"part": "sched_dmdas", "result": "pass", "policy": "dmdas", "step_ms": 120.0, "device_peak_bytes": 800, "device_measured_peak_bytes": 1200, "overlap": -1}
{"part": "sched_prio", "result": "pass", "policy": "prio", "step_ms": 99.5, "device_peak_bytes": 900, "device_measured_peak_bytes": 1100, "overlap": -1}
{"part": "sched_lws", "result": "fail", "policy": "lws", "rc": 124, "step_ms": null, "device_measured_peak_bytes": 10}
ROWS
rc=$(check lose "$dir/lose.jsonl")
[ "$rc" = 0 ] || fail "a lost ranking changed the exit status ($rc)"
[ "$(q lose sched_ranking_canned result)" = '"fail"' ] || fail "lose: summary must fail"
[ "$(q lose sched_ranking_canned fastest)" = '"prio"' ] || fail "lose: fastest must be prio"
[ "$(q lose sched_ranking_canned lowest_device_peak)" = '"zero"' ] || fail "lose: measured peak: zero lowest (not dmdas's engine count)"
[ "$(q lose sched_ranking_canned peak_from)" = '"device_measured_peak_bytes"' ] || fail "lose: peak source"
[ "$(q lose sched_ranking_canned ranked)" = '["zero", "dmdas", "prio"]' ] || fail "lose: the failed lws row must not be ranked"
[ "$(q lose canned_sched_zero zero_wins)" = '{"step": false, "device_peak": true, "overlap": false}' ] ||
    fail "lose: zero row verdicts: $(q lose canned_sched_zero zero_wins)"
[ "$(q lose canned_sched_dmdas zero_wins)" = '{"step": true, "device_peak": true}' ] || fail "lose: against dmdas"
[ "$(q lose canned_sched_prio zero_wins)" = '{"step": false, "device_peak": true}' ] || fail "lose: against prio"
[ "$(q lose canned_sched_lws zero_wins)" = null ] || fail "lose: a failed row has no verdict"

cat >"$dir/na.jsonl" <<'ROWS'
{"part": "sched_zero", "result": "pass", "policy": "zero", "step_ms": 90.0, "device_peak_bytes": 900, "overlap": 0.1, "comm_task_s": 0.2, "compute_task_s": 0.1}
{"part": "sched_lws", "result": "pass", "policy": "lws", "step_ms": 95.0, "device_peak_bytes": 950, "overlap": -1}
ROWS
check na "$dir/na.jsonl" >/dev/null
[ "$(q na sched_ranking_canned overlap_applies)" = false ] || fail "na: comm longer than compute: overlap must not apply"
[ "$(q na canned_sched_zero zero_wins overlap)" = null ] || fail "na: overlap verdict must be null"
[ "$(q na sched_ranking_canned result)" = '"pass"' ] || fail "na: zero wins step and peak: pass"
[ "$(q na sched_ranking_canned peak_from)" = '"device_peak_bytes"' ] || fail "na: no measured peaks: the engine's count"

printf '%s\n' '{"part": "sched_zero", "result": "fail", "policy": "zero", "rc": 1}' \
    '{"part": "sched_lws", "result": "pass", "policy": "lws", "step_ms": 95.0, "device_peak_bytes": 950}' >"$dir/nozero.jsonl"
check nozero "$dir/nozero.jsonl" >/dev/null
[ "$(q nozero sched_ranking_canned result)" = '"fail"' ] || fail "nozero: must fail"
q nozero sched_ranking_canned reason | grep -q "zero row did not run" || fail "nozero: reason"
# the d2 bf16 native part's plumbing on CPUs only (both runs on CPU workers): its row has the loss
# comparison and the GPU run's bf16_path, and fails for want of CUDA tasks
env SZ_GPU_CHECK_DRYRUN=1 SZ_BUILD_DIR="$bin" SZ_GPU_LOG="$dir/logs" SZ_GPU_CHECK_PARTS=d2_bf16_native \
    timeout 240 "$root/scripts/gpu-check.sh" >"$dir/native.out" 2>"$dir/native.err"
rc=$?
[ "$rc" = 1 ] || fail "d2_bf16_native dry run: exit $rc, expected 1 (no CUDA task): $(cat "$dir/native.out")"
[ "$(q native d2_bf16_native result)" = '"fail"' ] || fail "d2_bf16_native dry run must fail: $(cat "$dir/native.out")"
[ "$(q native d2_bf16_native cuda_tasks)" = 0 ] || fail "d2_bf16_native dry run: cuda_tasks"
[ "$(q native d2_bf16_native steps)" = 5 ] || fail "d2_bf16_native dry run: steps: $(cat "$dir/native.out")"
case "$(q native d2_bf16_native bf16_path)" in '"native"'|'"emulated"') ;; *) fail "d2_bf16_native: bf16_path: $(cat "$dir/native.out")" ;; esac
case "$(q native d2_bf16_native max_rel_loss_diff)" in [0-9]*) ;; *) fail "d2_bf16_native: max_rel_loss_diff: $(cat "$dir/native.out")" ;; esac
[ "$(q native d2_bf16_native tolerance)" = 2e-2 ] || fail "d2_bf16_native: tolerance"
[ "$(q native d2_losses result)" = missing ] || fail "d2_losses ran although not selected"
# the d2 fp16 part's plumbing likewise: both runs on CPU workers give the same losses and the same
# loss scales and skipped steps (the forced overflow's), and the part fails for want of CUDA tasks
env SZ_GPU_CHECK_DRYRUN=1 SZ_BUILD_DIR="$bin" SZ_GPU_LOG="$dir/logs" SZ_GPU_CHECK_PARTS=d2_fp16 \
    timeout 240 "$root/scripts/gpu-check.sh" >"$dir/fp16.out" 2>"$dir/fp16.err"
rc=$?
[ "$rc" = 1 ] || fail "d2_fp16 dry run: exit $rc, expected 1 (no CUDA task): $(cat "$dir/fp16.out")"
[ "$(q fp16 d2_fp16 result)" = '"fail"' ] || fail "d2_fp16 dry run must fail: $(cat "$dir/fp16.out")"
[ "$(q fp16 d2_fp16 cuda_tasks)" = 0 ] || fail "d2_fp16 dry run: cuda_tasks"
[ "$(q fp16 d2_fp16 steps)" = 16 ] || fail "d2_fp16 dry run: steps: $(cat "$dir/fp16.out")"
[ "$(q fp16 d2_fp16 same_scales_and_skips)" = true ] || fail "d2_fp16 dry run: scales and skips differ: $(cat "$dir/fp16.out")"
[ "$(q fp16 d2_fp16 max_rel_loss_diff)" = 0 ] || fail "d2_fp16 dry run: two CPU runs' losses differ: $(cat "$dir/fp16.out")"
awk -v k="$(q fp16 d2_fp16 skipped)" -v a="$(q fp16 d2_fp16 applied)" 'BEGIN { exit !(k >= 2 && a >= 4) }' ||
    fail "d2_fp16 dry run: the forced overflow skipped $(q fp16 d2_fp16 skipped), applied $(q fp16 d2_fp16 applied)"
# every run ends with the summary line; the prerequisites are named before the build: here (the
# dry run) a StarPU that is not there is reported by name, and the run stops where it needs it
[ "$(q shipped total result)" = '"pass"' ] || fail "shipped: no total line: $(cat "$dir/shipped.out")"
case "$(q shipped prereq result)" in '"pass"'|'"fail"') ;; *) fail "shipped: no prereq line: $(cat "$dir/shipped.out")" ;; esac
env SZ_GPU_CHECK_DRYRUN=1 SZ_BUILD_DIR="$bin" SZ_GPU_LOG="$dir/logs" SZ_GPU_CHECK_PARTS=none SZ_DEPS_DIR="$dir/nodeps" \
    SZ_GPU_CHECK_OUT="$dir" timeout 60 "$root/scripts/gpu-check.sh" >"$dir/nodeps.out" 2>"$dir/nodeps.err"
[ "$(q nodeps prereq result)" = '"fail"' ] || fail "no StarPU: prereq must fail: $(cat "$dir/nodeps.out")"
q nodeps prereq missing | grep -q "starpu(no $dir/nodeps/starpu.env" || fail "no StarPU: not named: $(q nodeps prereq missing)"
[ -s "$dir/gpu-check-logs.tgz" ] || fail "SZ_GPU_CHECK_OUT: no gpu-check-logs.tgz"
# --bundle (scripts/gpu-bundle.sh): what the bundle needs of this machine, named before anything
# runs, on made-up bundles: a glibc newer than this one's and a CPU feature this CPU lacks; a
# program with a library not found; an mpiexec that cannot start a process; no file at all
fake() { # NAME GLIBC_NEEDED CPU_FLAGS PROGRAM MPIEXEC_SCRIPT: $dir/NAME.tar.xz
    local t="$dir/$1/sz-gpu"
    mkdir -p "$t/bin/tests" "$t/mpi/bin" "$t/mpi/lib/openmpi3"
    printf 'commit=fake\nglibc_needed=%s\nmarch=made-up\ncpu_flags=%s\nprograms=prog\n' "$2" "$3" >"$t/MANIFEST"
    cp "$4" "$t/bin/prog"
    printf '#!/bin/sh\n%s\n' "$5" >"$t/mpi/bin/mpiexec"
    chmod +x "$t/bin/prog" "$t/mpi/bin/mpiexec"
    tar -C "$dir/$1" -cJf "$dir/$1.tar.xz" sz-gpu
}
bcheck() { # NAME: gpu-check --bundle $dir/NAME.tar.xz, output in $dir/NAME.out; prints the exit status
    SZ_GPU_LOG="$dir/logs_$1" timeout 60 "$root/scripts/gpu-check.sh" --bundle "$dir/$1.tar.xz" >"$dir/$1.out" 2>"$dir/$1.err"
    echo $?
}
fake old 99.1 "sse2 sz_no_such_flag" /bin/true "exit 0"
rc=$(bcheck old)
[ "$rc" = 1 ] || fail "bundle needing glibc 99.1: exit $rc, expected 1: $(cat "$dir/old.out")"
have=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
q old prereq missing | grep -q "this machine has $have, the bundle needs 99.1" || fail "glibc figures not named: $(q old prereq missing)"
q old prereq missing | grep -q "needs sz_no_such_flag" || fail "missing CPU feature not named: $(q old prereq missing)"
q old prereq missing | grep -q "needs sse2" && fail "a CPU feature this CPU has was named: $(q old prereq missing)"
[ "$(q old total result)" = '"fail"' ] || fail "bundle: no total line"
[ "$(q old gpu result)" = missing ] || fail "a bundle that cannot run must end the check before the GPU is looked for"
if command -v cc >/dev/null 2>&1; then
    printf 'int sz_gone(void);\nint main(void) { return sz_gone(); }\n' >"$dir/m.c"
    printf 'int sz_gone(void) { return 0; }\n' >"$dir/g.c"
    cc -shared -fPIC -o "$dir/libszgone.so" "$dir/g.c" && cc -o "$dir/needs_gone" "$dir/m.c" -L"$dir" -lszgone &&
        rm "$dir/libszgone.so" || fail "cc: the program with a library that goes"
    fake gone 2.0 "" "$dir/needs_gone" "exit 0"
    rc=$(bcheck gone)
    [ "$rc" = 1 ] || fail "bundle with a library not found: exit $rc: $(cat "$dir/gone.out")"
    q gone prereq missing | grep -q "libraries-not-found(prog:libszgone.so)" || fail "library not found not named: $(q gone prereq missing)"
else
    echo "note: no cc: the bundle's library-not-found case not tested"
fi
fake nompi 2.0 "" /bin/true "echo cannot start a daemon; exit 1"
rc=$(bcheck nompi)
[ "$rc" = 1 ] || fail "bundle whose mpiexec fails: exit $rc: $(cat "$dir/nompi.out")"
q nompi prereq missing | grep -q "mpiexec -n 1 true failed: cannot start a daemon" || fail "mpiexec failure not named: $(q nompi prereq missing)"
rc=$(SZ_GPU_LOG="$dir/logs_none" timeout 60 "$root/scripts/gpu-check.sh" --bundle "$dir/no-such.tar.xz" >"$dir/nobundle.out" 2>&1; echo $?)
[ "$rc" = 1 ] && grep -q "no bundle file $dir/no-such.tar.xz" "$dir/nobundle.out" || fail "no bundle file: exit $rc: $(cat "$dir/nobundle.out")"
rc=$(timeout 60 "$root/scripts/gpu-check.sh" --no-such-option >"$dir/badarg.out" 2>&1; echo $?)
[ "$rc" = 2 ] && grep -q "unknown argument --no-such-option" "$dir/badarg.out" || fail "unknown argument: exit $rc: $(cat "$dir/badarg.out")"
rc=$(timeout 60 "$root/scripts/gpu-check.sh" --bundle "$dir/no-such.tar.xz" --emulated >"$dir/bothargs.out" 2>&1; echo $?)
[ "$rc" = 2 ] && grep -q -- "--bundle and --emulated exclude each other" "$dir/bothargs.out" || fail "--bundle with --emulated: exit $rc: $(cat "$dir/bothargs.out")"
echo "gpu-check dry-run ranking: ok; the d2 bf16 native part's plumbing: ok; prerequisites and summary: ok; bundle prerequisites: ok"
