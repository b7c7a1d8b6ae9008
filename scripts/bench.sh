#!/usr/bin/env bash
# scripts/bench.sh — the README's benchmark tables (not a test): sz-bench on GPT-2 for one rank, and
# for every ZeRO stage at N_d = 1, 2, 4 ranks on this node. Writes JSON lines to OUT (default
# build/bench.jsonl) and prints markdown tables. Knobs: SZ_BENCH_MODEL (d12), SZ_BENCH_STEPS (3).
# OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are left as the environment sets them.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
"$SZ_ROOT/scripts/setup.sh"
"$SZ_ROOT/scripts/build.sh" >/dev/null
sz_load_env
export STARPU_SILENT=1 STARPU_FXT_TRACE=0
out=${1:-$SZ_BUILD_DIR/bench.jsonl}
model=${SZ_BENCH_MODEL:-d12} steps=${SZ_BENCH_STEPS:-3}
: >"$out"
for nd in 1 2 4; do
    for stage in 0 1 2 3; do
        # shellcheck disable=SC2046
        mpirun $(sz_mpirun_flags) -np $nd "$SZ_BUILD_DIR/sz-bench" --model "$model" --batch 4 --seq 64 \
            --steps "$steps" --warmup 1 --zero-stage $stage --json | tail -1 >>"$out"
    done
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r0 = rows[0]
print(f"model {r0['model']} ({r0['params']:,} params), batch 4 x 64 per rank, fp32; "
      f"machine: FMA peak {r0['fma_peak_gflops']:.0f} GFLOP/s ({r0['fma_isa']}), OpenBLAS sgemm {r0['sgemm_gflops']:.0f}\n")
print("| N_d | stage | tokens/s | step ms | GFLOP/s | / peak | model states MB (formula) | peak MB | comm MB/step (formula) | comm GB/s | MPI GB/s |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    mb = lambda x: x / 1e6
    print(f"| {r['nd']} | {r['zero_stage']} | {r['tokens_per_s']:.0f} | {r['step_ms']:.0f} | {r['gflops']:.0f} | "
          f"{r['gflops_over_peak']:.2f} | {mb(r['model_state_bytes']):.0f} ({mb(r['model_state_bytes_formula']):.0f}) | "
          f"{mb(r['peak_bytes']):.0f} | {mb(r['comm_bytes_sent']):.1f} ({mb(r['comm_bytes_formula']):.1f}) | "
          f"{r['comm_gbps']:.2f} | {r['mpi_gbps']:.2f} |")
PY
