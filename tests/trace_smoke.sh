#!/usr/bin/env bash
# tests/trace_smoke.sh — a StarPU program run with FxT tracing on leaves a trace file, and the
# StarPU build's starpu_fxt_tool turns it into paje.trace with our task names in it.
# Usage: trace_smoke.sh PROGRAM [STARPU_FXT_TOOL]. Exits 77 when the StarPU in use has no FxT.
set -eu
prog=$1
fxt_tool=${2:-starpu_fxt_tool}
command -v "$fxt_tool" >/dev/null || { echo "skipped: $fxt_tool not found (StarPU without FxT?)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
STARPU_FXT_TRACE=1 STARPU_FXT_PREFIX="$dir/" "$prog" >"$dir/run.log" 2>&1 || { cat "$dir/run.log"; exit 1; }
ls "$dir"/prof_file_* >/dev/null 2>&1 || { echo "no FxT trace file written in $dir"; ls -la "$dir"; exit 1; }
(cd "$dir" && "$fxt_tool" -i prof_file_* >fxt.log 2>&1) || { cat "$dir/fxt.log"; exit 1; }
[ -s "$dir/paje.trace" ] || { echo "starpu_fxt_tool wrote no paje.trace"; exit 1; }
grep -q "scale:test" "$dir/paje.trace" "$dir/tasks.rec" || { echo "task name 'scale:test' not in the trace"; exit 1; }
echo "trace ok: $(ls "$dir"/prof_file_*), paje.trace $(wc -c <"$dir/paje.trace") bytes"
