#!/usr/bin/env bash
# tests/trace_train.sh — scripts/trace.sh end to end: a traced 2-rank ZeRO-3 training merged by
# starpu_fxt_tool has the gather, forward, backward, reduce-scatter and optimizer tasks of both ranks.
set -u
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
root=$(cd "$(dirname "$0")/.." && pwd)
SZ_NO_SETUP=1 SZ_TRACE_STEPS=2 "$root/scripts/trace.sh" "$dir" || { echo "FAIL: scripts/trace.sh"; exit 1; }
[ -s "$dir/paje.trace" ] || { echo "FAIL: no paje.trace"; exit 1; }
has_task() { # KIND RANK: a task whose name starts with KIND: ran on RANK
    awk -v k="$1" -v r="$2" 'BEGIN{RS=""} $0 ~ ("Name: " k ":") && $0 ~ ("MPIRank: " r "\n|MPIRank: " r "$") {f=1} END{exit !f}' "$dir/tasks.rec"
}
for kind in gather fwd bwd rs adam; do
    for rank in 0 1; do
        has_task "$kind" "$rank" || { echo "FAIL: no '$kind:' task of rank $rank in tasks.rec"; exit 1; }
    done
done
echo "trace_train: gather, fwd, bwd, rs and adam tasks of ranks 0 and 1 are in the merged trace"
