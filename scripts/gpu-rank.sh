#!/usr/bin/env bash
# scripts/gpu-rank.sh — run one MPI rank on its own GPU: CUDA_VISIBLE_DEVICES = the local rank
# (Open MPI, MPICH or Slurm numbering) modulo the GPUs present, unless CUDA_VISIBLE_DEVICES is set
# or SZ_GPU_SHARE=1 (every rank sees every GPU: several ranks per GPU, for testing).
#   mpirun -np 2 scripts/gpu-rank.sh build-gpu/sz-train ...
# SZ_RANK_STATS=PREFIX: StarPU's worker statistics (STARPU_WORKER_STATS=1) of local rank N go to
# PREFIX.N instead of the shared stderr, where the ranks' lines interleave.
lr=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${SLURM_LOCALID:-0}}}
if [ -z "${CUDA_VISIBLE_DEVICES:-}" ] && [ "${SZ_GPU_SHARE:-0}" != 1 ]; then
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    [ "${n:-0}" -gt 0 ] && export CUDA_VISIBLE_DEVICES=$((lr % n))
fi
[ -n "${SZ_RANK_STATS:-}" ] && export STARPU_WORKER_STATS_FILE="$SZ_RANK_STATS.$lr"
exec "$@"
