#!/usr/bin/env bash
# scripts/fit.sh [BUDGET] — the paper's "how big a model fits", reproduced here: for each ZeRO stage
# with and without activation checkpointing and checkpoint offload, on N_d = 4 ranks, the largest
# GPT-2 config (of SZ_FIT_CONFIGS, smallest first) that trains one step (batch SZ_FIT_BATCH (1) x 256 per rank)
# under --mem-budget BUDGET (default 1G). Configs the plan predicts over budget are refused before
# anything is allocated, so only the fitting ones run. Prints a markdown table.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
sz_load_env
export STARPU_SILENT=1 STARPU_FXT_TRACE=0
budget=${1:-1G}
configs=${SZ_FIT_CONFIGS:-"d6 8,8,512 d12 16,16,768"}
data="$SZ_BUILD_DIR/data"
mkdir -p "$data"
[ -s "$data/fit_train.bin" ] || "$SZ_BUILD_DIR/sz-prepare" --out-dir "$data" --prefix fit \
    /usr/share/common-licenses/GPL-3 >/dev/null
echo "| stage | checkpointing | offload | largest config that trains (params) | device peak MB per rank |"
echo "|---|---|---|---|---|"
for stage in 0 1 2 3; do
    for variant in "" "--checkpoint" "--checkpoint --offload-checkpoints"; do
        best="none" peak=""
        for cfg in $configs; do
            # shellcheck disable=SC2046,SC2086
            out=$(timeout 300 mpirun $(sz_mpirun_flags) -np 4 "$SZ_BUILD_DIR/sz-train" --config "$cfg" --max-seq 256 \
                  --train "$data/fit_train.bin" --batch "${SZ_FIT_BATCH:-1}" --seq 256 --steps 1 --zero-stage $stage $variant \
                  --mem-budget "$budget" --json 2>/dev/null | tail -1) || break
            best="$cfg ($(echo "$out" | sed 's/.*"params": \([0-9]*\).*/\1/'))"
            peak=$(echo "$out" | sed 's/.*"device_peak_bytes": \([0-9]*\).*/\1/' | awk '{printf "%.0f", $1/1e6}')
        done
        echo "| $stage | $([ -n "$variant" ] && echo yes || echo no) | $(case "$variant" in *offload*) echo yes;; *) echo no;; esac) | $best | $peak |"
    done
done
