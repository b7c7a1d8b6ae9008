#!/usr/bin/env bash
# scripts/trace.sh [OUTDIR] — a short traced training (GPT-2 d2, ZeRO stage 3, 2 ranks): every rank
# writes its FxT trace, starpu_fxt_tool merges the ranks into OUTDIR/paje.trace (plus tasks.rec and
# dag.dot). Open it with ViTE (Debian package `vite`): vite OUTDIR/paje.trace
# Knobs: SZ_TRACE_STEPS (3), SZ_TRACE_STAGE (3), SZ_TRACE_RANKS (2); SZ_NO_SETUP=1 skips set-up and
# build (the tests use that: they run inside an existing build).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
out=$(mkdir -p "${1:-$SZ_ROOT/build/trace}" && cd "${1:-$SZ_ROOT/build/trace}" && pwd)
if [ "${SZ_NO_SETUP:-0}" != 1 ]; then
    "$SZ_ROOT/scripts/setup.sh"
    "$SZ_ROOT/scripts/build.sh" >/dev/null
fi
sz_load_env
command -v starpu_fxt_tool >/dev/null || sz_die "starpu_fxt_tool not found: the StarPU in use was built without FxT"
data="$SZ_BUILD_DIR/data"
mkdir -p "$data"
[ -s "$data/trace_train.bin" ] || "$SZ_BUILD_DIR/sz-prepare" --out-dir "$data" --prefix trace \
    /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 >/dev/null
rm -rf "$out/raw" && mkdir -p "$out/raw"
# shellcheck disable=SC2046
STARPU_SILENT=1 mpirun $(sz_mpirun_flags) -np "${SZ_TRACE_RANKS:-2}" "$SZ_BUILD_DIR/sz-train" --config d2 \
    --vocab 256 --max-seq 64 --train "$data/trace_train.bin" --batch 4 --seq 64 \
    --steps "${SZ_TRACE_STEPS:-3}" --zero-stage "${SZ_TRACE_STAGE:-3}" --trace "$out/raw" >"$out/train.log"
(cd "$out" && starpu_fxt_tool -i raw/prof_file_* >fxt_tool.log 2>&1) \
    || { tail -20 "$out/fxt_tool.log"; sz_die "starpu_fxt_tool failed (log: $out/fxt_tool.log)"; }
echo "trace of ${SZ_TRACE_RANKS:-2} ranks merged into $out:"
ls -la "$out/paje.trace" "$out/tasks.rec" "$out/dag.dot" | awk '{print "  " $NF " (" $5 " bytes)"}'
echo "task names: $(grep '^Name:' "$out/tasks.rec" | sed 's/Name: \([a-z_]*\):.*/\1/;s/Name: //' | sort | uniq -c | tr -s ' ' | tr '\n' ',')"
echo "open with ViTE:  apt-get install vite && vite $out/paje.trace"
