/* bench_kernels.c — GFLOP/s of the GPT-2 d12 (124M) matmuls at N = B*T = 256 rows:
 * forward, backward dinp and backward dweight, in fp32 and bf16 (fp32 output).
 * With a third argument "wbf16": the products of fp32 activations with bf16 weights (the emulated
 * bf16 path; sz_k_matmul_*_wbf16, each tile widening its weight panel) against the fp32 product on
 * a ready fp32 weight and against converting the weight to an fp32 working copy first (the copy
 * alone reported too): forward and dinp (dweight reads no weight: the fp32 kernel), milliseconds,
 * the three run in turn REPS times (alternating), medians. Threads: OMP_NUM_THREADS.
 * Not part of the library. Usage: bench_kernels [N [shape|all [wbf16 [reps]]]]. Build:
 *   gcc -O2 -fopenmp -Ikernels kernels/bench_kernels.c
 *       kernels/matmul.c kernels/matmul_bf16.c kernels/bf16.c
 *       -ldnnl -lm -o bench_kernels */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* The wbf16 comparison's clock: wall time, or with SZ_BENCH_CPUTIME=1 the process's CPU time divided
 * by the thread count (robust to other jobs on a loaded machine; run with OMP_WAIT_POLICY=passive so
 * that waiting threads do not spin). */
static double sz_bench_now(void)
{
    static int cpu = -1;
    if (cpu < 0) cpu = getenv("SZ_BENCH_CPUTIME") && getenv("SZ_BENCH_CPUTIME")[0] == '1';
    if (!cpu) return omp_get_wtime();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ((double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec) / omp_get_max_threads();
}

static int sz_bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double sz_bench_median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, sz_bench_cmp);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* The wbf16 comparison for one shape: op 0 forward, 1 dinp (accumulated). */
static void sz_bench_wbf16(const char *name, int N, int C, int OC, int reps)
{
    size_t nx = (size_t)N * C, nw = (size_t)OC * C, ny = (size_t)N * OC;
    float *x = sz_bench_alloc(nx), *w = sz_bench_alloc(nw), *wc = sz_bench_alloc(nw), *dy = sz_bench_alloc(ny);
    float *y = sz_bench_alloc(ny), *dx = sz_bench_alloc(nx);
    uint16_t *w16 = sz_bench_alloc((nw + 1) / 2);
    double *t = malloc(sizeof(double) * 4 * (size_t)reps);
    if (!x || !w || !wc || !dy || !y || !dx || !w16 || !t) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (size_t i = 0; i < nx; i++) x[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < nw; i++) w[i] = (float)(i % 5) * 0.1f - 0.2f;
    for (size_t i = 0; i < ny; i++) dy[i] = (float)(i % 3) * 0.1f;
    sz_k_f32_to_bf16(w16, w, nw);
    sz_k_bf16_to_f32(w, w16, nw);   /* the same values in both */
    const char *ops[] = { "fwd", "bwd_dinp" };
    for (int op = 0; op < 2; op++) {
        for (int r = -1; r < reps; r++) {   /* r = -1 warms up (primitives, scratch) */
            double t0 = sz_bench_now();
            if (op == 0) sz_k_matmul_fwd(y, x, w, NULL, N, C, OC);
            else sz_k_matmul_bwd(dx, NULL, NULL, dy, x, w, N, C, OC);
            double t1 = sz_bench_now();
            if (op == 0) sz_k_matmul_fwd_wbf16(y, x, w16, NULL, N, C, OC);
            else sz_k_matmul_bwd_wbf16_set(dx, NULL, NULL, dy, x, w16, N, C, OC, 0);
            double t2 = sz_bench_now();
            sz_k_bf16_to_f32(wc, w16, nw);
            double t3 = sz_bench_now();
            if (op == 0) sz_k_matmul_fwd(y, x, wc, NULL, N, C, OC);
            else sz_k_matmul_bwd(dx, NULL, NULL, dy, x, wc, N, C, OC);
            double t4 = sz_bench_now();
            if (r < 0) continue;
            t[r] = t1 - t0; t[reps + r] = t2 - t1; t[2 * reps + r] = t3 - t2; t[3 * reps + r] = t4 - t2;
        }
        double f32 = sz_bench_median(t, reps), wb = sz_bench_median(t + reps, reps);
        double cv = sz_bench_median(t + 2 * reps, reps), cvp = sz_bench_median(t + 3 * reps, reps);
        printf("%-8s %6d %6d %6d  %-9s %9.2f %9.2f %9.2f %11.2f %7.3f %7.3f\n", name, N, C, OC, ops[op],
               f32 * 1e3, wb * 1e3, cv * 1e3, cvp * 1e3, wb / f32, wb / cvp);
    }
    free(x); free(w); free(wc); free(dy); free(y); free(dx); free(w16); free(t);
}

int main(int argc, char **argv)
{
    int N = argc > 1 ? atoi(argv[1]) : 256;            /* rows; argv[2]: one shape only */
    const char *only = argc > 2 && strcmp(argv[2], "all") != 0 ? argv[2] : NULL;
    sz_bench_shape sh[] = { { "qkv", 768, 2304 }, { "attproj", 768, 768 }, { "fc", 768, 3072 },
                            { "fcproj", 3072, 768 }, { "lmhead", 768, 50304 } };
    if (argc > 3 && strcmp(argv[3], "wbf16") == 0) {
        int reps = argc > 4 ? atoi(argv[4]) : 9;
        reps = reps < 1 ? 1 : reps;
        printf("fp32 activations x bf16 weights, %d thread(s), ms (%s), median of %d alternating runs\n",
               omp_get_max_threads(), getenv("SZ_BENCH_CPUTIME") ? "CPU time / threads" : "wall", reps);
        printf("%-8s %6s %6s %6s  %-9s %9s %9s %9s %11s %7s %7s\n", "shape", "N", "C", "OC", "op", "fp32",
               "wbf16", "convert", "convert+mm", "wb/f32", "wb/cvmm");
        for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++)
            if (!only || strcmp(only, sh[s].name) == 0) sz_bench_wbf16(sh[s].name, N, sh[s].C, sh[s].OC, reps);
        sz_k_shutdown();
        return 0;
    }
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
