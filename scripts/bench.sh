#!/usr/bin/env bash
# scripts/bench.sh [OUT] — the benchmark tables of docs/BENCHMARKS.md (not a test): sz-bench on GPT-2 for every
# ZeRO stage at N_d = 1, 2, 4 ranks on this node, then stage 3 at N_d = 2 and 4 under the `zero`
# policy and StarPU's prio, dmdas, lws and eager. Writes JSON lines to OUT (default
# build/bench.jsonl) and prints markdown tables. Knobs: SZ_BENCH_MODEL (d12), SZ_BENCH_STEPS (3),
# SZ_BENCH_PARTS ("stages policies"), SZ_BENCH_PREFETCH (the policies' stage-3 prefetch window,
# default 200M), SZ_BENCH_ROUNDS (1: the policies run that many times, in turn, and the table gives
# each one's median step and every run's). Policy rows go to OUT with -policies before .jsonl.
# OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are left as the environment sets them.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
"$SZ_ROOT/scripts/setup.sh"
"$SZ_ROOT/scripts/build.sh" >/dev/null
sz_load_env
export STARPU_SILENT=1 STARPU_FXT_TRACE=0
out=${1:-$SZ_BUILD_DIR/bench.jsonl}
model=${SZ_BENCH_MODEL:-d12} steps=${SZ_BENCH_STEPS:-3}
parts=${SZ_BENCH_PARTS:-stages policies}
pout=${out%.jsonl}-policies.jsonl
bench() { # FILE NP STAGE [POLICY [ARGS...]]
    local file=$1 np=$2 stage=$3 pol=${4:-}
    shift 4 2>/dev/null || shift $#
    # shellcheck disable=SC2046
    STARPU_SCHED=$pol mpirun $(sz_mpirun_flags) -x STARPU_SCHED -np "$np" "$SZ_BUILD_DIR/sz-bench" --model "$model" \
        --batch 4 --seq 64 --steps "$steps" --warmup 1 --zero-stage "$stage" "$@" --json | tail -1 >>"$file"
}
case "$parts" in *stages*) : >"$out"; for nd in 1 2 4; do for stage in 0 1 2 3; do bench "$out" $nd $stage; done; done ;; esac
case "$parts" in *policies*) : >"$pout"; for nd in 2 4; do for _ in $(seq "${SZ_BENCH_ROUNDS:-1}"); do
    for pol in zero prio dmdas lws eager; do
        bench "$pout" $nd 3 $pol --prefetch-bytes "${SZ_BENCH_PREFETCH:-200M}"; done; done; done ;; esac
python3 - "$out" "$pout" "$parts" <<'PY'
import json, os, sys
load = lambda f: [json.loads(l) for l in open(f) if l.strip()] if os.path.exists(f) else []
rows = load(sys.argv[1]) if "stages" in sys.argv[3] else []
pol = load(sys.argv[2]) if "policies" in sys.argv[3] else []
r0 = (rows or pol)[0]
print(f"model {r0['model']} ({r0['params']:,} params), batch 4 x 64 per rank, fp32; "
      f"machine: FMA peak {r0['fma_peak_gflops']:.0f} GFLOP/s ({r0['fma_isa']}), bf16 dot-product peak "
      f"{r0.get('bf16_dot_peak_gflops', 0):.0f}, OpenBLAS sgemm {r0['sgemm_gflops']:.0f}\n")
if rows:
    print("| N_d | stage | tokens/s | step ms | GFLOP/s | / peak | model states MB (formula) | peak MB | comm MB/step (formula) | comm GB/s | MPI GB/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    mb = lambda x: x / 1e6
    print(f"| {r['nd']} | {r['zero_stage']} | {r['tokens_per_s']:.0f} | {r['step_ms']:.0f} | {r['gflops']:.0f} | "
          f"{r['gflops_over_peak']:.2f} | {mb(r['model_state_bytes']):.0f} ({mb(r['model_state_bytes_formula']):.0f}) | "
          f"{mb(r['peak_bytes']):.0f} | {mb(r['comm_bytes_sent']):.1f} ({mb(r['comm_bytes_formula']):.1f}) | "
          f"{r['comm_gbps']:.2f} | {r['mpi_gbps']:.2f} |")
if pol:
    print("\nstage 3, policies (STARPU_SCHED; `zero` is the default):\n")
    print("| N_d | policy | step ms (median) | every run's step ms | peak MB | overlap | comm tasks s | compute s |")
    print("|---|---|---|---|---|---|---|---|")
    groups = {}
    for r in pol:
        groups.setdefault((r['nd'], r['sched_policy']), []).append(r)
    for (nd, name), rs in groups.items():
        steps = sorted(x['step_ms'] for x in rs)
        med = steps[len(steps) // 2] if len(steps) % 2 else (steps[len(steps) // 2 - 1] + steps[len(steps) // 2]) / 2
        r = rs[0]
        ov = f"{r['overlap']:.2f}" if r['overlap'] >= 0 else "n/a"
        cs = f"{r['comm_task_s']:.2f} | {r['compute_task_s']:.2f}" if r['overlap'] >= 0 else "n/a | n/a"
        every = " / ".join(f"{x['step_ms']:.0f}" for x in rs)
        print(f"| {nd} | {name} | {med:.0f} | {every} | {max(x['peak_bytes'] for x in rs)/1e6:.0f} | {ov} | {cs} |")
PY
