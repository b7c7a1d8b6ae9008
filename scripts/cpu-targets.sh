#!/usr/bin/env bash
# scripts/cpu-targets.sh [OPTIONS] — issue 16's CPU targets in one command (a benchmark, not a test).
# Builds if needed (scripts/build.sh), records the CPU (model name, amx_bf16 / amx_tile / avx512_bf16
# flags, the bf16 path `--bf16-compute auto` picks), then runs `sz-bench --model d12 --batch 4 --seq 64
# --json` on one rank (both cores) as fp32, bf16 (auto), bf16 forced emulated and bf16 forced native,
# alternating for R rounds (the order rotates each round), and prints one JSON line per target:
#   (a) bf16 (auto) step <= 0.35 x fp32 step where the CPU has AMX (else "not applicable: no AMX");
#   (b) bf16 (auto) never slower than fp32;
#   (c) fp32 gflops >= 0.6 x fma_peak_gflops, each run against its own run's peak;
# each from the medians of step_ms (and, beside it, of step_ms_min) over the rounds, with the
# per-round figures and the load average (/proc/loadavg, 1 min) read before each run. Before the
# targets: a "machine" line and one "run" line per configuration (medians, peak_bytes).
#   scripts/cpu-targets.sh                          # the targets (d12 B4 T64, 3 rounds, 5 steps)
#   scripts/cpu-targets.sh --rounds 5 --steps 8
#   scripts/cpu-targets.sh --shape T1024            # B4 T1024: step time and peak_bytes (fp32, bf16)
#   scripts/cpu-targets.sh --before-commit 2532a79  # T1024 before/after the linear-memory attention
#   scripts/cpu-targets.sh --dry-run FILE           # evaluate a runs.jsonl again (no build, no runs)
# Options:
#   --rounds R          rounds (default 3)
#   --steps N           timed steps per run (default 5; 2 when seq > 256); --warmup W (default 1)
#   --shape S           T64 (batch 4 seq 64, default), T1024 (batch 4 seq 1024) or BxT (e.g. 1x128)
#   --model M           sz-bench's --model (default d12; the targets are defined at d12 only)
#   --runs LIST         comma list of fp32,bf16,emulated,native,before (default: all four at seq <=
#                       256, fp32,bf16 above; before,fp32 with --before-commit)
#   --before-commit C   build commit C's sz-bench (fp32; CUDA off, tests off) from `git archive` into
#                       BUILD/cpu-targets/before/<sha>/ (outside the source tree, kept for reuse) and
#                       alternate it ("before") with this tree's; implies --shape T1024, --steps 2
#                       unless given. The before_after line gives both step_ms and peak_bytes and
#                       checks that the peak falls by at least the T x T tensors (L x 2 x B.NH.T^2 x 4).
#   --out DIR           results directory (default BUILD/cpu-targets/<UTC time>): runs.jsonl (every
#                       run's sz-bench JSON with ct_run, ct_round, ct_loadavg added; first line the
#                       CPU record), targets.jsonl (what is printed), logs/ (each run's stdout and stderr)
#   --run-timeout S     seconds per sz-bench run (default 1800); --no-build: skip scripts/build.sh
#   --build-only        build (this tree, and C with --before-commit C) and stop: the build out of the
#                       way before a quiet machine's timed runs
#   --dry-run FILE      evaluate FILE (a runs.jsonl, or canned lines in its format) and print the
#                       target lines; tests/cpu_targets_cli.sh tests the evaluation this way
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for this script's own sz-bench runs only (they
# move OpenBLAS's sgemm yardstick, not our matmuls, which are oneDNN's); the machine line says which
# were set. Exit status: 0 when every applicable target passes, 1 when one fails or is not measured,
# 2 on a usage or build error. Numbers go in docs/BENCHMARKS.md, never into pass/fail tests.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die2() { printf '[starzero] cpu-targets: %s\n' "$*" >&2; exit 2; }
jesc() { printf '%s' "$1" | tr -d '\r\n\t' | sed 's/\\/\\\\/g; s/"/\\"/g'; }

# ---- the evaluation: runs.jsonl in, one JSON line per check out (awk; no Python, no jq) ----------
evaluate() { # FILE
    sz_jawk '
    # jget (the value of a key in a one-line JSON object), JF: from scripts/json.awk (sz_jawk loads it)
    function med(a, n,   i, j, t) { # sorts a[1..n]; the median (mean of the middle two when n is even)
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        if (n == 0) return ""
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function num(x, f) { return x == "" ? "null" : sprintf(f, x) }
    function str(x) { return x == "" ? "null" : "\"" x "\"" }
    function list(lab, field, f,   i, s) {
        s = ""
        for (i = 1; i <= n[lab]; i++) s = s (i > 1 ? "," : "") num(V[lab, field, i], f)
        return "[" s "]"
    }
    function median_of(lab, field,   i, a) {
        for (i = 1; i <= n[lab]; i++) a[i] = V[lab, field, i]
        return med(a, n[lab])
    }
    function at_round(lab, field, r,   i) {
        for (i = 1; i <= n[lab]; i++) if (V[lab, "round", i] == r) return V[lab, field, i]
        return ""
    }
    function verdict(ok) { return ok ? "\"verdict\":\"pass\",\"pass\":true" : "\"verdict\":\"fail\",\"pass\":false" }
    function na(why) { return "\"verdict\":\"" why "\",\"pass\":null" }
    function nm(why) { failed = 1; return "\"verdict\":\"not measured: " why "\",\"pass\":false" }
    BEGIN { nlab = 0; failed = 0 }
    /^[ \t]*$/ { next }
    {
        if (jget($0, "ct_record") == "cpu") { CPU = $0; next }
        lab = jget($0, "ct_run")
        if (!JF) { printf "cpu-targets: %s:%d: neither a cpu record nor a run (no \"ct_run\")\n", FILENAME, FNR > "/dev/stderr"; bad = 1; next }
        if (!(lab in n)) { n[lab] = 0; errs[lab] = 0; order[++nlab] = lab }
        e = jget($0, "ct_error")
        if (JF) { errs[lab]++; lasterr[lab] = e; next }
        st = jget($0, "step_ms")
        if (!JF || st == "") { errs[lab]++; lasterr[lab] = "no step_ms in the run'"'"'s JSON"; next }
        i = ++n[lab]
        V[lab, "round", i] = jget($0, "ct_round")
        V[lab, "load", i] = jget($0, "ct_loadavg")
        V[lab, "step", i] = st + 0
        V[lab, "min", i] = jget($0, "step_ms_min") + 0
        V[lab, "gflops", i] = jget($0, "gflops") + 0
        V[lab, "peak", i] = jget($0, "fma_peak_gflops") + 0
        V[lab, "over", i] = V[lab, "peak", i] > 0 ? V[lab, "gflops", i] / V[lab, "peak", i] : ""
        V[lab, "bytes", i] = jget($0, "peak_bytes")
        V[lab, "pred", i] = jget($0, "predicted_peak_bytes")
        V[lab, "act", i] = jget($0, "activation_bytes")
        V[lab, "bf16mm", i] = jget($0, "bf16_matmul_gflops")
        path[lab] = jget($0, "bf16_path")
        a = jget($0, "amx"); if (a == "true") amx_json = "true"; else if (a == "false" && amx_json == "") amx_json = "false"
        if (jget($0, "bf16_matmul_impl") != "") impl = jget($0, "bf16_matmul_impl")
        model = jget($0, "model"); batch = jget($0, "batch") + 0; seq = jget($0, "seq") + 0
        commit[lab] = jget($0, "ct_commit")
    }
    END {
        if (bad) exit 2
        if (nlab == 0) { print "cpu-targets: no runs in " FILENAME > "/dev/stderr"; exit 2 }
        # the machine
        fl = jget(CPU, "amx_bf16"); amx_flag = fl
        amx = amx_json != "" ? amx_json : (amx_flag != "" ? amx_flag : "false")
        for (i = 1; i <= nlab; i++) { l = order[i]; for (j = 1; j <= n[l]; j++) { allpeak[++np] = V[l, "peak", j] } }
        printf "{\"check\":\"machine\",\"cpu_model\":%s,\"amx_bf16\":%s,\"amx_tile\":%s,\"avx512_bf16\":%s,\"amx_cpuid\":%s,", \
            str(jget(CPU, "cpu_model")), jget(CPU, "amx_bf16") == "" ? "null" : jget(CPU, "amx_bf16"), \
            jget(CPU, "amx_tile") == "" ? "null" : jget(CPU, "amx_tile"), \
            jget(CPU, "avx512_bf16") == "" ? "null" : jget(CPU, "avx512_bf16"), amx_json == "" ? "null" : amx_json
        printf "\"bf16_path_auto\":%s,\"sz_info_bf16_path\":%s,\"bf16_matmul_impl\":%s,\"fma_peak_gflops_median\":%s,", \
            str(path["bf16"]), str(jget(CPU, "sz_info_bf16_path")), str(impl), num(med(allpeak, np), "%.1f")
        printf "\"model\":%s,\"batch\":%d,\"seq\":%d,\"commit\":%s,\"date\":%s,\"openblas_env\":%s}\n", \
            str(model), batch, seq, str(jget(CPU, "commit")), str(jget(CPU, "date")), str(jget(CPU, "openblas_env"))
        # one line per configuration
        fp = n["fp32"] > 0 ? median_of("fp32", "step") : ""
        for (i = 1; i <= nlab; i++) {
            l = order[i]
            ms = n[l] > 0 ? median_of(l, "step") : ""
            mx = 0; for (j = 1; j <= n[l]; j++) if (V[l, "bytes", j] + 0 > mx) mx = V[l, "bytes", j] + 0
            printf "{\"check\":\"run\",\"run\":\"%s\",\"runs\":%d,\"errors\":%d,", l, n[l], errs[l]
            if (errs[l]) printf "\"last_error\":%s,", str(lasterr[l])
            if (commit[l] != "") printf "\"commit\":%s,", str(commit[l])
            printf "\"bf16_path\":%s,\"step_ms_median\":%s,\"step_ms_min_median\":%s,\"ratio_to_fp32\":%s,", \
                str(path[l]), num(ms, "%.1f"), num(n[l] ? median_of(l, "min") : "", "%.1f"), \
                num(ms != "" && fp > 0 ? ms / fp : "", "%.4f")
            printf "\"gflops_median\":%s,\"peak_bytes\":%s,\"predicted_peak_bytes\":%s,\"activation_bytes\":%s,", \
                num(n[l] ? median_of(l, "gflops") : "", "%.1f"), n[l] ? sprintf("%.0f", mx) : "null", \
                num(n[l] ? V[l, "pred", 1] : "", "%.0f"), num(n[l] ? V[l, "act", 1] : "", "%.0f")
            printf "\"step_ms\":%s,\"step_ms_min\":%s,\"rounds\":%s,\"loadavg_before\":%s}\n", \
                list(l, "step", "%.1f"), list(l, "min", "%.1f"), list(l, "round", "%d"), list(l, "load", "%.2f")
        }
        # the targets, defined at d12 batch 4 seq 64
        shape_ok = model == "d12" && batch == 4 && seq == 64
        shape_na = sprintf("not applicable: the targets are defined at d12 batch 4 seq 64 (these runs: %s batch %d seq %d)", model, batch, seq)
        have = n["fp32"] > 0 && n["bf16"] > 0
        if (have) {
            bm = median_of("bf16", "step"); fm = median_of("fp32", "step")
            bn = median_of("bf16", "min"); fn = median_of("fp32", "min")
            ratio = bm / fm; ratio_min = fn > 0 ? bn / fn : ""
            rr = ""; slower = 0; paired = 0
            for (j = 1; j <= n["bf16"]; j++) {
                r = V["bf16", "round", j]; f = at_round("fp32", "step", r)
                if (f == "") continue
                paired++; rr = rr (paired > 1 ? "," : "") sprintf("%.4f", V["bf16", "step", j] / f)
                if (V["bf16", "step", j] > f) slower++
            }
            loads = "\"loadavg_before_fp32\":" list("fp32", "load", "%.2f") ",\"loadavg_before_bf16\":" list("bf16", "load", "%.2f")
            figs = sprintf("\"bf16_path\":%s,\"fp32_step_ms_median\":%.1f,\"bf16_step_ms_median\":%.1f,\"ratio\":%.4f,\"fp32_step_ms_min_median\":%.1f,\"bf16_step_ms_min_median\":%.1f,\"ratio_min\":%s,\"ratio_per_round\":[%s],", \
                str(path["bf16"]), fm, bm, ratio, fn, bn, num(ratio_min, "%.4f"), rr)
        }
        printf "{\"check\":\"a_bf16_amx\",\"target\":\"bf16 (auto) step_ms <= 0.35 x fp32 step_ms where the CPU has AMX\",\"limit\":0.35,\"amx\":%s,", amx
        if (!shape_ok) print na(shape_na) "}"
        else if (amx != "true") print na("not applicable: no AMX") "}"
        else if (!have) print nm("needs fp32 and bf16 runs") "}"
        else { ok = ratio <= 0.35; if (!ok) failed = 1; print figs loads "," verdict(ok) "}" }
        printf "{\"check\":\"b_bf16_not_slower\",\"target\":\"bf16 (auto) step_ms <= fp32 step_ms (medians) on every machine\",\"limit\":1,"
        if (!shape_ok) print na(shape_na) "}"
        else if (!have) print nm("needs fp32 and bf16 runs") "}"
        else { ok = ratio <= 1; if (!ok) failed = 1; printf "%s\"rounds_bf16_slower\":%d,\"rounds_paired\":%d,%s,%s}\n", figs, slower, paired, loads, verdict(ok) }
        printf "{\"check\":\"c_fp32_gflops\",\"target\":\"fp32 gflops >= 0.6 x fma_peak_gflops of the same run\",\"limit\":0.6,"
        if (!shape_ok) print na(shape_na) "}"
        else if (n["fp32"] == 0) print nm("needs fp32 runs") "}"
        else {
            k = 0; for (j = 1; j <= n["fp32"]; j++) if (V["fp32", "over", j] != "" && V["fp32", "over", j] >= 0.6) k++
            mo = median_of("fp32", "over")
            ok = mo != "" && mo >= 0.6; if (!ok) failed = 1
            printf "\"gflops\":%s,\"fma_peak_gflops\":%s,\"gflops_over_peak\":%s,\"gflops_over_peak_median\":%s,\"runs_at_or_above\":%d,\"runs\":%d,\"loadavg_before\":%s,%s}\n", \
                list("fp32", "gflops", "%.1f"), list("fp32", "peak", "%.1f"), list("fp32", "over", "%.4f"), num(mo, "%.4f"), \
                k, n["fp32"], list("fp32", "load", "%.2f"), verdict(ok)
        }
        # before / after the linear-memory attention (issue 16, item 3): fp32, the same shape
        if ("before" in n) {
            L = 0; NH = 0
            if (model == "d2") { L = 2; NH = 4 } else if (model == "d6") { L = 6; NH = 6 } else if (model == "d12") { L = 12; NH = 12 }
            else if (split(model, mp, ",") == 3) { L = mp[1] + 0; NH = mp[2] + 0 }
            tt = L * 2 * batch * NH * seq * seq * 4; stats = L * 2 * batch * NH * seq * 4
            printf "{\"check\":\"before_after_attention\",\"target\":\"the fp32 peak falls by at least the T x T tensors (L x 2 x B.NH.T^2 x 4 bytes)\",\"model\":%s,\"batch\":%d,\"seq\":%d,\"before_commit\":%s,", \
                str(model), batch, seq, str(commit["before"])
            if (n["before"] == 0 || n["fp32"] == 0) { print nm("needs before and fp32 runs") "}" }
            else {
                bb = 0; for (j = 1; j <= n["before"]; j++) if (V["before", "bytes", j] + 0 > bb) bb = V["before", "bytes", j] + 0
                ab = 0; for (j = 1; j <= n["fp32"]; j++) if (V["fp32", "bytes", j] + 0 > ab) ab = V["fp32", "bytes", j] + 0
                fall = bb - ab; ok = L > 0 && fall >= tt; if (!ok) failed = 1
                printf "\"before_step_ms_median\":%.1f,\"after_step_ms_median\":%.1f,\"before_step_ms_min_median\":%.1f,\"after_step_ms_min_median\":%.1f,", \
                    median_of("before", "step"), median_of("fp32", "step"), median_of("before", "min"), median_of("fp32", "min")
                printf "\"before_step_ms\":%s,\"after_step_ms\":%s,\"before_peak_bytes\":%.0f,\"after_peak_bytes\":%.0f,\"peak_fall_bytes\":%.0f,\"tt_bytes\":%.0f,\"row_stats_bytes\":%.0f,", \
                    list("before", "step", "%.1f"), list("fp32", "step", "%.1f"), bb, ab, fall, tt, stats
                if (!ok && L > 0 && fall >= tt - stats)
                    printf "\"note\":\"the peak falls by the T x T tensors less the row statistics that replace them\","
                printf "\"loadavg_before_before\":%s,\"loadavg_before_after\":%s,%s}\n", list("before", "load", "%.2f"), list("fp32", "load", "%.2f"), verdict(ok)
            }
        }
        for (i = 1; i <= nlab; i++) if (errs[order[i]]) failed = 1
        exit failed
    }' "$1"
}

# ---- options ------------------------------------------------------------------------------------
rounds=3 steps="" warmup=1 shape="" model=d12 runs="" before="" out="" dry="" build=1 build_only=0 run_timeout=1800
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds|--steps|--warmup|--shape|--model|--runs|--before-commit|--out|--dry-run|--run-timeout)
            [ $# -ge 2 ] || die2 "$1 needs a value"
            case "$1" in
                --rounds) rounds=$2 ;; --steps) steps=$2 ;; --warmup) warmup=$2 ;; --shape) shape=$2 ;;
                --model) model=$2 ;; --runs) runs=$2 ;; --before-commit) before=$2 ;; --out) out=$2 ;;
                --dry-run) dry=$2 ;; --run-timeout) run_timeout=$2 ;;
            esac
            shift 2 ;;
        --no-build) build=0; shift ;;
        --build-only) build_only=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die2 "unknown option '$1'" ;;
    esac
done
if [ -n "$dry" ]; then
    [ -r "$dry" ] || die2 "--dry-run $dry: no such readable file"
    evaluate "$dry"
    exit $?
fi
for v in rounds warmup run_timeout ${steps:+steps}; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die2 "--${v/_/-} ${!v}: expected a whole number"
done
[ "$rounds" -ge 1 ] || die2 "--rounds must be at least 1"
[ -n "$shape" ] || { [ -n "$before" ] && shape=T1024 || shape=T64; }
case "$shape" in
    T64) B=4 T=64 ;;
    T1024) B=4 T=1024 ;;
    *x*) B=${shape%x*} T=${shape#*x}
         [[ $B =~ ^[1-9][0-9]*$ && $T =~ ^[1-9][0-9]*$ ]] || die2 "--shape $shape: expected T64, T1024 or BxT (e.g. 1x128)" ;;
    *) die2 "--shape $shape: expected T64, T1024 or BxT (e.g. 1x128)" ;;
esac
[ -n "$steps" ] || { [ "$T" -gt 256 ] && steps=2 || steps=5; }
if [ -z "$runs" ]; then
    if [ -n "$before" ]; then runs=before,fp32; elif [ "$T" -gt 256 ]; then runs=fp32,bf16; else runs=fp32,bf16,emulated,native; fi
fi
IFS=, read -r -a labels <<<"$runs"
for l in "${labels[@]}"; do
    case "$l" in
        fp32|bf16|emulated|native) ;;
        before) [ -n "$before" ] || die2 "--runs: 'before' needs --before-commit C" ;;
        *) die2 "--runs: unknown run '$l' (fp32, bf16, emulated, native, before)" ;;
    esac
done
before_sha=""
if [ -n "$before" ]; then
    git -C "$SZ_ROOT" rev-parse --git-dir >/dev/null 2>&1 || die2 "--before-commit needs a git checkout ($SZ_ROOT is not one)"
    before_sha=$(git -C "$SZ_ROOT" rev-parse --verify --quiet "$before^{commit}") ||
        die2 "--before-commit $before: not a commit of this repository"
fi

# ---- build --------------------------------------------------------------------------------------
sz_load_env
if [ "$build" = 1 ]; then
    blog=$SZ_BUILD_DIR/cpu-targets/build.log
    mkdir -p "${blog%/*}"
    sz_log "building this tree (scripts/build.sh; log $blog)"
    "$SZ_ROOT/scripts/build.sh" >"$blog" 2>&1 || { tail -30 "$blog" >&2; die2 "scripts/build.sh failed (log $blog)"; }
fi
bench=$SZ_BUILD_DIR/sz-bench
[ -x "$bench" ] || die2 "no $bench (run scripts/build.sh, or drop --no-build)"
before_bin=""
if [ -n "$before_sha" ]; then
    bdir=$SZ_BUILD_DIR/cpu-targets/before/${before_sha:0:12}
    if [ ! -x "$bdir/build/sz-bench" ]; then
        sz_log "building commit ${before_sha:0:12}'s sz-bench in $bdir (git archive; CUDA and tests off; minutes)"
        rm -rf "$bdir"
        mkdir -p "$bdir/src"
        git -C "$SZ_ROOT" archive "$before_sha" | tar -x -C "$bdir/src" || die2 "git archive $before_sha failed"
        cmake -S "$bdir/src" -B "$bdir/build" -DCMAKE_BUILD_TYPE=Release -DSZ_USE_CUDA=OFF -DSZ_BUILD_TESTS=OFF \
            >"$bdir/cmake.log" 2>&1 || { tail -30 "$bdir/cmake.log" >&2; die2 "configuring $before_sha failed (log $bdir/cmake.log)"; }
        cmake --build "$bdir/build" --target sz-bench -j"${SZ_JOBS:-$(nproc)}" >"$bdir/build.log" 2>&1 ||
            { tail -30 "$bdir/build.log" >&2; die2 "building $before_sha's sz-bench failed (log $bdir/build.log)"; }
    fi
    before_bin=$bdir/build/sz-bench
fi
if [ "$build_only" = 1 ]; then
    sz_log "built: $bench${before_bin:+ and $before_bin}"
    exit 0
fi
out=${out:-$SZ_BUILD_DIR/cpu-targets/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out/logs"

# ---- the CPU record -----------------------------------------------------------------------------
flag() { grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | grep -qw "$1" && echo true || echo false; }
cpu_model=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*: *//') || true
info_path=$(STARPU_SILENT=1 timeout 60 "$SZ_BUILD_DIR/sz-info" 2>&1 | sed -n 's/^ *bf16_path: *//p' | head -1) || true
ob=""
for v in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; do
    if [ -n "${!v+x}" ]; then ob="$ob${ob:+ }$v=${!v}"; fi
done
if [ -n "$ob" ]; then
    sz_log "unsetting $ob for this script's sz-bench runs only"
    ob="unset for these runs: $ob"
else
    ob="neither OPENBLAS_CORETYPE nor OPENBLAS_L2_SIZE set"
fi
commit=$(git -C "$SZ_ROOT" describe --always --dirty 2>/dev/null || echo unknown)
runs_file=$out/runs.jsonl
printf '{"ct_record":"cpu","cpu_model":"%s","amx_bf16":%s,"amx_tile":%s,"avx512_bf16":%s,"nproc":%s,"sz_info_bf16_path":"%s","openblas_env":"%s","commit":"%s","before_commit":"%s","date":"%s","shape":"%s","steps":%s,"warmup":%s,"rounds":%s}\n' \
    "$(jesc "$cpu_model")" "$(flag amx_bf16)" "$(flag amx_tile)" "$(flag avx512_bf16)" "$(nproc)" "$(jesc "$info_path")" \
    "$(jesc "$ob")" "$(jesc "$commit")" "${before_sha:0:12}" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(jesc "$shape")" \
    "$steps" "$warmup" "$rounds" >"$runs_file"
sz_log "CPU: ${cpu_model:-?}; amx_bf16 $(flag amx_bf16), avx512_bf16 $(flag avx512_bf16); auto: ${info_path:-?}"

# ---- the runs, alternating ----------------------------------------------------------------------
run_one() { # LABEL ROUND
    local lab=$1 r=$2 bin=$bench args=() load rc json log tag=""
    case "$lab" in
        fp32) args=(--precision fp32) ;;
        bf16) args=(--precision bf16 --bf16-compute auto) ;;
        emulated) args=(--precision bf16 --bf16-compute emulated) ;;
        native) args=(--precision bf16 --bf16-compute native) ;;
        before) bin=$before_bin args=(--precision fp32) tag=${before_sha:0:12} ;;
    esac
    log=$out/logs/$lab-r$r
    load=$(cut -d' ' -f1 /proc/loadavg)
    sz_log "round $r: $lab (load $load): ${bin#"$SZ_ROOT"/} --model $model --batch $B --seq $T --steps $steps --warmup $warmup ${args[*]} --json"
    rc=0
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE STARPU_SILENT=1 STARPU_FXT_TRACE=0 timeout "$run_timeout" \
        "$bin" --model "$model" --batch "$B" --seq "$T" --steps "$steps" --warmup "$warmup" "${args[@]}" --json \
        >"$log.out" 2>"$log.err" || rc=$?
    json=$(grep '^{' "$log.out" | tail -1) || true
    local pre="\"ct_run\":\"$lab\",\"ct_round\":$r,\"ct_loadavg\":$load${tag:+,\"ct_commit\":\"$tag\"}"
    if [ "$rc" = 0 ] && [ -n "$json" ]; then
        printf '{%s,%s\n' "$pre" "${json#\{}" >>"$runs_file"
    else
        local why="exit $rc"
        [ "$rc" = 124 ] && why="timed out after ${run_timeout}s"
        printf '{%s,"ct_error":"%s"}\n' "$pre" "$(jesc "$why, no JSON from sz-bench: $(tail -1 "$log.err")")" >>"$runs_file"
        sz_log "round $r: $lab failed: $(tail -1 "$log.err")"
    fi
}
nl=${#labels[@]}
for r in $(seq 1 "$rounds"); do
    for k in $(seq 0 $((nl - 1))); do
        run_one "${labels[$(((k + r - 1) % nl))]}" "$r"
    done
done
rc=0
evaluate "$runs_file" | tee "$out/targets.jsonl" || rc=$?
sz_log "runs: $runs_file; targets: $out/targets.jsonl"
exit "$rc"
