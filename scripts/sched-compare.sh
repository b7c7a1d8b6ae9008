#!/usr/bin/env bash
# scripts/sched-compare.sh — the `zero` policy against StarPU's dmdas, prio, lws and eager where
# communication costs: sz-bench (ZeRO stage 3) on a cluster of network namespaces (scripts/cluster.sh,
# as root), ranks on separate nodes joined by rate-limited links, each policy with and without the
# communication worker (SZ_COMM_WORKER=1/0) and with and without a prefetch window (--prefetch-bytes
# W / 0). The configurations run in turn, round after round, each round starting one policy further
# on (alternating and rotated, so a drift in the machine's load does not always fall on the same
# policy); one JSON line per run on stdout (and --out FILE):
#   round, policy, comm_worker, prefetch_bytes, the cluster (nodes, ranks_per_node, cores_per_node,
#   rate), load1 (the 1-minute load average when it started), and sz-bench's step_ms, step_ms_min,
#   overlap (the fraction of communication time hidden under compute), comm_task_s, compute_task_s,
#   peak_bytes, comm_gbps, link_gbps, mpi_gbps, tokens_per_s, sched_policy (the policy in effect);
#   "result": "fail" with the exit status where sz-bench failed.
# Then a summary per configuration (the median step and overlap over the rounds), sorted by step.
#
# Usage: sched-compare.sh [--nodes N] [--ranks-per-node K] [--cores-per-node C] [--rate R]
#          [--model M] [--vocab V] [--batch B] [--seq T] [--steps S] [--warmup W] [--window BYTES]
#          [--rounds R] [--policies "zero dmdas prio lws eager"] [--comm-workers "1 0"]
#          [--windows "W 0"] [--out FILE] [--build DIR]
# Defaults: 2 nodes x 1 rank, 1 core each, 1gbit links, d6 with a 8192-token vocabulary, batch 16 x
# 64, 3 timed steps after 1, a 16M window, 2 rounds, the build in $SZ_BUILD_DIR or ./build.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/common.sh"
nodes=2 rpn=1 cores=1 rate=1gbit model=d6 vocab=8192 batch=16 seq=64 steps=3 warmup=1 window=16M rounds=2
policies="zero dmdas prio lws eager" out=/dev/null build=$SZ_BUILD_DIR cws="1 0" windows=
while [ $# -gt 0 ]; do
    case $1 in
        --nodes) nodes=$2 ;; --ranks-per-node) rpn=$2 ;; --cores-per-node) cores=$2 ;; --rate) rate=$2 ;;
        --model) model=$2 ;; --vocab) vocab=$2 ;; --batch) batch=$2 ;; --seq) seq=$2 ;; --steps) steps=$2 ;;
        --warmup) warmup=$2 ;; --window) window=$2 ;; --rounds) rounds=$2 ;; --policies) policies=$2 ;;
        --out) out=$2 ;; --build) build=$2 ;; --comm-workers) cws=$2 ;; --windows) windows=$2 ;;
        *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
    esac
    shift 2
done
[ -x "$build/sz-bench" ] || sz_die "no $build/sz-bench: build first (scripts/build.sh) or give --build"
sz_load_env
export SZ_CLUSTER=szcmp$$ SZ_CLUSTER_OWNER=$$ STARPU_SILENT=1 STARPU_FXT_TRACE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cl() { "$here/cluster.sh" "$@"; }
trap 'cl down >/dev/null 2>&1' EXIT
cl up "$nodes" --rate "$rate" --ranks-per-node "$rpn" --cores-per-node "$cores"
np=$((nodes * rpn))
: >"$out"
rows=$(mktemp)
trap 'cl down >/dev/null 2>&1; rm -f "$rows"' EXIT
windows=${windows:-$window 0}
read -r -a pols <<<"$policies"
for r in $(seq "$rounds"); do
    for i in $(seq 0 $((${#pols[@]} - 1))); do
        p=${pols[$(((i + r - 1) % ${#pols[@]}))]}
        for cw in $cws; do
            for pf in $windows; do
                load=$(cut -d' ' -f1 /proc/loadavg)
                rc=0
                res=$(STARPU_SCHED=$p SZ_COMM_WORKER=$cw timeout 600 "$here/cluster.sh" run -np "$np" \
                      "$build/sz-bench" --model "$model" --vocab "$vocab" --batch "$batch" --seq "$seq" \
                      --zero-stage 3 --steps "$steps" --warmup "$warmup" --prefetch-bytes "$pf" --json 2>/dev/null |
                      tail -1) || rc=$?
                head=$(printf '{"round": %d, "policy": "%s", "comm_worker": %d, "prefetch_bytes": "%s", "nodes": %d, "ranks_per_node": %d, "cores_per_node": %d, "rate": "%s", "model": "%s", "batch": %d, "seq": %d, "load1": %s' \
                       "$r" "$p" "$cw" "$pf" "$nodes" "$rpn" "$cores" "$rate" "$model" "$batch" "$seq" "$load")
                row=$(printf '%s\n' "$res" | HEAD=$head RC=$rc sz_jawk '
                    { if (!jok($0)) next; s = $0; ok = 1 }
                    END {
                        head = ENVIRON["HEAD"]; rc = ENVIRON["RC"]
                        if (!ok) { printf "%s, \"result\": \"fail\", \"exit\": %d}\n", head, rc; exit }
                        n = split("step_ms step_ms_min overlap comm_task_s compute_task_s peak_bytes comm_gbps link_gbps mpi_gbps tokens_per_s sched_policy", k, " ")
                        printf "%s, \"result\": \"pass\"", head
                        for (i = 1; i <= n; i++) { v = jraw(s, k[i]); printf ", \"%s\": %s", k[i], v == "" ? "null" : v }
                        printf "}\n"
                    }')
                echo "$row" | tee -a "$out" "$rows"
            done
        done
    done
done
# the summary: per configuration, the median step and overlap over the rounds, fastest first
sz_jawk '
    jok($0) && jget($0, "result") == "pass" {
        c = jget($0, "policy") " comm_worker=" jget($0, "comm_worker") " window=" jget($0, "prefetch_bytes")
        n[c]++; st[c, n[c]] = jget($0, "step_ms"); ov[c, n[c]] = jget($0, "overlap"); pk[c] = jget($0, "peak_bytes")
        ct[c] = jget($0, "comm_task_s"); kt[c] = jget($0, "compute_task_s")
    }
    function med(a, c, m,   i, j, t, v) {
        for (i = 1; i <= m; i++) v[i] = a[c, i] + 0
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
    }
    END {
        for (c in n) printf "{\"summary\": \"%s\", \"runs\": %d, \"median_step_ms\": %.1f, \"median_overlap\": %.3f, \"peak_bytes\": %s, \"comm_task_s\": %s, \"compute_task_s\": %s}\n", c, n[c], med(st, c, n[c]), med(ov, c, n[c]), pk[c], ct[c], kt[c]
    }' "$rows" | sort -t: -k4 -n | tee -a "$out"
