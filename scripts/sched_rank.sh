#!/usr/bin/env bash
# scripts/sched_rank.sh — ranks scripts/gpu-check.sh's scheduler rows (issue 15, item 7): the
# `zero` policy against StarPU's dmdas, prio and lws on the same GPU run, by three criteria:
#
#   step         the fastest step (step_ms; the lowest wins, a tie counts for zero)
#   device_peak  the lowest device peak: device_measured_peak_bytes (StarPU's allocations on the
#                GPU at their most) where every ranked row has it, else device_peak_bytes (the
#                engine's count)
#   overlap      overlap >= 0.8 where communication is shorter than compute (zero's row:
#                comm_task_s < compute_task_s; the others' overlap is not ranked); null where
#                communication is not shorter, so the criterion does not apply
#
# Input: a file of JSON lines ("#" lines are comments), one per row, as gpu-check.sh builds them
# ("part", "result", "policy", "step_ms", ...). Only rows with "result": "pass" (the run succeeded on
# the GPU) and a numeric step_ms and peak are ranked. Output, one JSON line each: every row again
# (its keys in order, values as written except numbers in Python's float form, "410.500" -> 410.5)
# with "zero_wins" added (the zero row: whether zero beats every ranked policy on step and
# device_peak, and the overlap verdict; another policy's row: whether zero beats that one on step
# and device_peak; null on a row not ranked), then a summary {"part": SUMMARY, "result": "pass" when
# zero ran and wins every criterion that applies, else "fail", "fastest", "lowest_device_peak", ...}.
# The ranking is a target that is measured, not a correctness check: gpu-check.sh does not count it
# toward its total. Bash and awk (scripts/json.awk) only: no Python (the GPU machine may lack it).
#
# Usage: sched_rank.sh ROWS.jsonl [--prefix P] [--summary PART] [--canned]
#   --prefix P      prepend P to every row's "part" (the dry run's canned rows: "canned_")
#   --summary PART  the summary's part name (default sched_ranking)
#   --canned        mark the summary "canned": true (rows made up to test this ranking)
# Exit status: 0, or 2 on a usage error, an unreadable file or a line that is not JSON (the message
# on stderr). Tested through gpu-check.sh's dry run by tests/gpu_check_cli.sh.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; }
if [ $# -eq 0 ] || [ "${1#-}" != "$1" ]; then usage; exit 2; fi
path=$1 prefix="" part=sched_ranking canned=0
shift
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || { echo "sched_rank.sh: unknown argument $1" >&2; exit 2; }; prefix=$2; shift 2 ;;
        --summary) [ $# -ge 2 ] || { echo "sched_rank.sh: unknown argument $1" >&2; exit 2; }; part=$2; shift 2 ;;
        --canned) canned=1; shift ;;
        *) echo "sched_rank.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -r "$path" ] && [ -f "$path" ] || { echo "sched_rank.sh: cannot read $path" >&2; exit 2; }

SR_PATH=$path SR_PREFIX=$prefix SR_PART=$part SR_CANNED=$canned awk -f "$here/json.awk" -f <(cat <<'AWK'
function b(x) { return x ? "true" : "false" }
function jesc(x) { gsub(/\\/, "\\\\", x); gsub(/"/, "\\\"", x); return x }
function jq(x) { return "\"" jesc(x) "\"" }
{
    line = $0; sub(/^[ \t\r]+/, "", line); sub(/[ \t\r]+$/, "", line)
    if (line == "" || substr(line, 1, 1) == "#") next
    if (!jok(line)) {
        printf "sched_rank.sh: %s line %d is not JSON\n", ENVIRON["SR_PATH"], FNR > "/dev/stderr"
        bad = 1; exit 2
    }
    R[++n] = line
}
END {
    if (bad) exit 2
    # ranked: "result": "pass" and a numeric step_ms; the peak from the measured figure where every
    # one of those has it (>= 0), else the engine's count; then only rows with that peak
    m = 0; measured = 1
    for (i = 1; i <= n; i++)
        if (jraw(R[i], "result") == "\"pass\"" && jisnum(jraw(R[i], "step_ms"))) {
            C[++m] = i
            v = jraw(R[i], "device_measured_peak_bytes")
            if (!jisnum(v) || v + 0 < 0) measured = 0
        }
    pk = measured ? "device_measured_peak_bytes" : "device_peak_bytes"
    nr = 0; zero = 0
    for (j = 1; j <= m; j++) {
        i = C[j]
        if (!jisnum(jraw(R[i], pk))) continue
        K[++nr] = i; inr[i] = 1
        ST[i] = jraw(R[i], "step_ms") + 0; PK[i] = jraw(R[i], pk) + 0
        POL[i] = jraw(R[i], "policy"); if (POL[i] == "") POL[i] = "null"
        if (!zero && POL[i] == "\"zero\"") zero = i
    }
    nothers = zero ? nr - 1 : nr
    overlap = "null"; zov = "null"
    if (zero) {
        comm = jraw(R[zero], "comm_task_s"); comp = jraw(R[zero], "compute_task_s"); ov = jraw(R[zero], "overlap")
        if (jisnum(ov)) zov = jnumfmt(ov)
        if (jisnum(comm) && jisnum(comp) && comm + 0 < comp + 0) overlap = b(jisnum(ov) && ov + 0 >= 0.8)
        zstep = 1; zpeak = 1
        for (j = 1; j <= nr; j++) if (K[j] != zero) {
            if (!(ST[zero] <= ST[K[j]])) zstep = 0
            if (!(PK[zero] <= PK[K[j]])) zpeak = 0
        }
    }
    prefix = ENVIRON["SR_PREFIX"]
    for (i = 1; i <= n; i++) {
        if (!zero || !inr[i]) zw = "null"
        else if (i == zero) zw = "{\"step\": " b(zstep) ", \"device_peak\": " b(zpeak) ", \"overlap\": " overlap "}"
        else zw = "{\"step\": " b(ST[zero] <= ST[i]) ", \"device_peak\": " b(PK[zero] <= PK[i]) "}"
        jok(R[i])
        out = ""; haszw = 0; haspart = 0; nk = 0
        for (k = 1; k <= jnkeys; k++) { # keys in order, a duplicate kept at its first place, last value
            if (!(JK[k] in at)) { at[JK[k]] = ++nk; KN[nk] = JK[k] }
            KV[at[JK[k]]] = JV[k]
        }
        for (k = 1; k <= nk; k++) {
            v = KV[k]
            if (KN[k] == "zero_wins") { v = zw; haszw = 1 }
            else if (KN[k] == "part") { v = "\"" jesc(prefix) (substr(v, 1, 1) == "\"" ? substr(v, 2, length(v) - 2) : v) "\""; haspart = 1 }
            else if (jisnum(v)) v = jnumfmt(v)
            out = out (k > 1 ? ", " : "") "\"" KN[k] "\": " v
        }
        delete at
        if (!haszw) out = out (nk ? ", " : "") "\"zero_wins\": " zw
        if (!haspart) out = out ", \"part\": " jq(prefix)
        print "{" out "}"
    }
    # the summary
    s = "{\"part\": " jq(ENVIRON["SR_PART"]) ", \"result\": "
    all = zero && nothers > 0 && zstep && zpeak && overlap != "false"
    s = s (all ? "\"pass\"" : "\"fail\"")
    if (ENVIRON["SR_CANNED"] == 1) s = s ", \"canned\": true"
    s = s ", \"counts_toward_total\": false, \"ranked\": ["
    for (j = 1; j <= nr; j++) s = s (j > 1 ? ", " : "") POL[K[j]]
    s = s "], \"peak_from\": \"" pk "\""
    if (nr) { # the first lowest, zero first among equals
        f = K[1]; l = K[1]
        for (j = 2; j <= nr; j++) {
            i = K[j]
            if (ST[i] < ST[f] || (ST[i] == ST[f] && POL[i] == "\"zero\"" && POL[f] != "\"zero\"")) f = i
            if (PK[i] < PK[l] || (PK[i] == PK[l] && POL[i] == "\"zero\"" && POL[l] != "\"zero\"")) l = i
        }
        s = s ", \"fastest\": " POL[f] ", \"lowest_device_peak\": " POL[l]
    }
    if (!zero) s = s ", \"reason\": \"the zero row did not run on the GPU: nothing to rank\", \"zero_wins_all\": false"
    else {
        s = s ", \"zero_overlap\": " zov ", \"overlap_applies\": " b(overlap != "null") ", \"zero_wins_all\": " b(all)
        if (!nothers) s = s ", \"reason\": \"no other policy's row ran on the GPU: nothing to rank against\""
    }
    print s "}"
}
AWK
) "$path"
