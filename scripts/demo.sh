#!/usr/bin/env bash
# scripts/demo.sh — the main job: set up, build, show the runtime on 2 MPI ranks (sz-info), then
# prepare a real English corpus (the fortune-cookie texts of Debian's `fortunes` package, byte-level
# tokens) and train a small GPT-2 on it with ZeRO stage 3 on 2 ranks for a few hundred steps,
# printing train and val loss, then the memory per rank beside the ZeRO formula.
# Knobs: SZ_DEMO_CONFIG (default d2), SZ_DEMO_STEPS (300), SZ_DEMO_BATCH (4 per rank),
# SZ_DEMO_SEQ (128), SZ_DEMO_RANKS (2), SZ_DEMO_STAGE (3).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
"$SZ_ROOT/scripts/setup.sh"
"$SZ_ROOT/scripts/build.sh" >/dev/null
sz_load_env
export STARPU_FXT_TRACE=${STARPU_FXT_TRACE:-0} STARPU_SILENT=${STARPU_SILENT:-1}

echo "== the runtime on 2 ranks =="
# shellcheck disable=SC2046
mpirun $(sz_mpirun_flags) -np 2 "$SZ_BUILD_DIR/sz-info"

echo "== corpus =="
data="$SZ_BUILD_DIR/data"
mkdir -p "$data"
fortunes=$(ls /usr/share/games/fortunes/* | grep -v -e '\.dat$' -e '\.u8$' -e '/art$' -e '/ascii-art$' \
            -e '/perl$' -e '/translate-me$')
"$SZ_BUILD_DIR/sz-prepare" --fortune --out-dir "$data" --prefix fortunes $fortunes

echo "== training GPT-2 ${SZ_DEMO_CONFIG:-d2} on it: ZeRO stage ${SZ_DEMO_STAGE:-3}, ${SZ_DEMO_RANKS:-2} ranks =="
# shellcheck disable=SC2046
exec mpirun $(sz_mpirun_flags) -np "${SZ_DEMO_RANKS:-2}" "$SZ_BUILD_DIR/sz-train" --config "${SZ_DEMO_CONFIG:-d2}" \
    --vocab 256 --max-seq 256 --train "$data/fortunes_train.bin" --val "$data/fortunes_val.bin" \
    --batch "${SZ_DEMO_BATCH:-4}" --seq "${SZ_DEMO_SEQ:-128}" --steps "${SZ_DEMO_STEPS:-300}" \
    --zero-stage "${SZ_DEMO_STAGE:-3}" --lr 1e-3 --wd 0.1 --grad-clip 1.0 --val-every 50 \
    --save "$data/demo_model.bin" --report
