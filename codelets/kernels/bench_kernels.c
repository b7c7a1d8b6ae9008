/* bench_kernels.c — GFLOP/s of the GPT-2 d12 (124M) matmuls at N = B*T = 256 rows:
 * forward, backward dinp and backward dweight, in fp32 and bf16 (fp32 output).
 * Not part of the library. Usage: bench_kernels [N [shape]]. Build:
 *   gcc -O2 -fopenmp -Icodelets/kernels codelets/kernels/bench_kernels.c
 *       codelets/kernels/matmul.c codelets/kernels/matmul_bf16.c codelets/kernels/bf16.c
 *       -ldnnl -lm -o bench_kernels */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sz_kernels.h"
#include "sz_kernels_impl.h"   /* sz_mm_supported: is bf16 native here? */

typedef struct { const char *name; int C, OC; } sz_bench_shape;

/* n zeroed floats, 64-byte aligned (as StarPU's allocator gives; with plain
 * malloc, a reused 16-byte-aligned heap block can halve some shapes' speed). */
static void *sz_bench_alloc(size_t n)
{
    void *p = aligned_alloc(64, (n * 4 + 63) / 64 * 64);
    if (p) memset(p, 0, n * 4);
    return p;
}

/* Seconds per call of one of the six products (op 0 fwd, 1 dinp, 2 dweight). */
static double sz_bench_one(int op, int bf16, int N, int C, int OC, void *bufs[4], int reps)
{
    double best = 1e30;
    for (int r = -1; r < reps; r++) {   /* r = -1 warms up (primitive creation) */
        double t0 = omp_get_wtime();
        if (!bf16) {
            if (op == 0) sz_k_matmul_fwd(bufs[3], bufs[0], bufs[1], NULL, N, C, OC);
            if (op == 1) sz_k_matmul_bwd(bufs[3], NULL, NULL, bufs[2], bufs[0], bufs[1], N, C, OC);
            if (op == 2) sz_k_matmul_bwd(NULL, bufs[3], NULL, bufs[2], bufs[0], bufs[1], N, C, OC);
        } else {
            if (op == 0) sz_k_matmul_fwd_bf16(bufs[3], SZ_K_F32, bufs[0], bufs[1], NULL, N, C, OC);
            if (op == 1) sz_k_matmul_bwd_bf16(bufs[3], SZ_K_F32, NULL, NULL, SZ_K_F32, bufs[2], bufs[0], bufs[1], N, C, OC);
            if (op == 2) sz_k_matmul_bwd_bf16(NULL, SZ_K_F32, bufs[3], NULL, SZ_K_F32, bufs[2], bufs[0], bufs[1], N, C, OC);
        }
        double t = omp_get_wtime() - t0;
        if (r >= 0 && t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    int N = argc > 1 ? atoi(argv[1]) : 256;            /* rows; argv[2]: one shape only */
    const char *only = argc > 2 ? argv[2] : NULL;
    sz_bench_shape sh[] = { { "qkv", 768, 2304 }, { "attproj", 768, 768 }, { "fc", 768, 3072 },
                            { "fcproj", 3072, 768 }, { "lmhead", 768, 50304 } };
    const char *ops[] = { "fwd", "bwd_dinp", "bwd_dweight" };
    sz_mm_shape probe;   /* a bf16 forward tile: does oneDNN have a native kernel? */
    memset(&probe, 0, sizeof probe);
    probe.M = N; probe.N = 768; probe.K = 768; probe.a_sm = 768; probe.a_sk = 1;
    probe.b_sk = 1; probe.b_sn = 768; probe.ldd = 768; probe.a_dt = probe.b_dt = SZ_K_BF16;
    probe.bias_dt = -1;
    printf("N=%d threads=%d (GFLOP/s, best of 10); bf16 path: %s\n", N, omp_get_max_threads(),
           sz_mm_supported(&probe) ? "native oneDNN bf16"
                                   : "emulated (operands widened, fp32 oneDNN; no AVX512-BF16 kernel)");
    printf("%-8s %6s %6s  %-12s %9s %9s\n", "shape", "C", "OC", "op", "fp32", "bf16");
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        int C = sh[s].C, OC = sh[s].OC;
        if (only && strcmp(only, sh[s].name) != 0) continue;
        size_t big = (size_t)(C > OC ? C : OC) * (N > OC ? N : OC);
        void *bufs[4] = { sz_bench_alloc((size_t)N * C), sz_bench_alloc((size_t)OC * C),
                          sz_bench_alloc((size_t)N * OC), sz_bench_alloc(big) };
        for (size_t i = 0; i < (size_t)N * C; i++) ((float *)bufs[0])[i] = (float)(i % 7) * 0.1f;
        for (size_t i = 0; i < (size_t)OC * C; i++) ((float *)bufs[1])[i] = (float)(i % 5) * 0.1f;
        for (size_t i = 0; i < (size_t)N * OC; i++) ((float *)bufs[2])[i] = (float)(i % 3) * 0.1f;
        for (int op = 0; op < 3; op++) {
            double flop = 2.0 * N * C * OC;
            double t32 = sz_bench_one(op, 0, N, C, OC, bufs, 10);
            double t16 = sz_bench_one(op, 1, N, C, OC, bufs, 10);
            printf("%-8s %6d %6d  %-12s %9.1f %9.1f\n", sh[s].name, C, OC, ops[op],
                   flop / t32 * 1e-9, flop / t16 * 1e-9);
        }
        for (int i = 0; i < 4; i++) free(bufs[i]);
    }
    sz_k_shutdown();
    return 0;
}
