/* graph/sz_devcheck.h — the run-time check of a GPU's measured memory against its budget (issue
 * 15, item 5: "at run time the measured device peak stays under it"). Pure C: the numbers measured
 * after a step go in (tasks/devwatch.c samples them: StarPU's accounting of the GPU's memory node,
 * and cudaMemGetInfo), a verdict and the message a user reads come out, so the comparison and the
 * wording are unit-tested without a GPU (tests/test_devcheck.c). */
#ifndef SZ_DEVCHECK_H
#define SZ_DEVCHECK_H

#include <stddef.h>
#include <stdint.h>

/* Device memory outside the plan that a rank may take on its GPU beside the budget: the CUDA
 * runtime's own (kernel modules loaded on first use, cuBLAS's workspaces, NCCL's channel buffers).
 * Used only by the cudaMemGetInfo half of the check: StarPU's accounting has none of it. */
#define SZ_GPU_RUNTIME_ALLOWANCE_BYTES ((int64_t)1 << 30)

/* What StarPU 1.3's own allocator adds on a CUDA memory node beside the bytes it is asked for,
 * counted against each GPU's budget on top of the plan's device peak (tasks/model.c): requests up
 * to 4 MiB are cut from 32 MiB chunks (in 16 KiB blocks) that its accounting counts whole, and up
 * to 4 entirely free chunks are kept (src/datawizard/malloc.c: CHUNK_SIZE, CHUNK_ALLOC_MAX,
 * CHUNK_ALLOC_MIN, CHUNKS_NFREE). Five chunks: the four kept free and the one being filled. An
 * allowance for the usual case, not a bound: small buffers scattered over many part-filled chunks
 * can take more (the run-time check below then says so). */
#define SZ_STARPU_CUDA_SLACK_BYTES ((int64_t)5 * (32 << 20))

typedef struct sz_device_sample {
    int rank;                 /* MPI rank */
    int host;                 /* 1: the node is main RAM (a CPU-only rank, SZ_DEVWATCH_BUDGET), not a GPU */
    int device;               /* CUDA device id (as the process sees them) */
    int node;                 /* its StarPU memory node */
    int step;                 /* the optimizer step just finished (1-based) */
    int sharers;              /* ranks of this node driving the same device (>= 1) */
    int64_t budget;           /* the per-GPU budget in bytes (<= 0: none, nothing is checked) */
    int64_t predicted;        /* the plan's device peak (the fold's, before the first step) */
    int64_t engine_peak;      /* the engine's own count of its device bytes at their peak */
    int64_t starpu_peak;      /* StarPU's allocations on the node, the most sampled (-1: unknown) */
    int64_t starpu_limit;     /* what StarPU may allocate there (STARPU_LIMIT_CUDA_MEM, or 90%) */
    int64_t cuda_start_used;  /* cudaMemGetInfo total - free when the budget was taken (-1: unknown) */
    int64_t cuda_used;        /* the same, the most after a step (-1: unknown) */
    int64_t allowance;        /* per rank: SZ_GPU_RUNTIME_ALLOWANCE_BYTES */
} sz_device_sample;

/* 0 when the sample stays within the budget (or there is none); 1 when it does not, with msg (if
 * given) naming the rank, device, node, step, every number involved and what to do. Two checks:
 * (1) StarPU's allocations on the GPU's memory node (the engine's tensors, StarPU's rounding and
 *     its cache of freed buffers, the GPU arena) at most the budget;
 * (2) the device's memory in use (every process on it) grown since the budget was taken by at
 *     most sharers x (budget + allowance). */
int sz_device_budget_check(const sz_device_sample *s, char *msg, size_t len);

#endif
