/* bench_round.c — the linear layer's parameter gradients of GPT-2 d12 (124M) at N = B*T rows, rounded
 * into bf16 gradients two ways, alternating REPS times, medians in ms: today's first writer into an
 * fp32 working gradient followed by the GRAD_CONVERT (sz_k_matmul_bwd_set / _bf16_set, then
 * sz_k_convert), and the folded writer (sz_k_matmul_dparams_round). fp32 inputs (the emulated bf16
 * path) and bf16 inputs (the native path), convert mode ADD (stages 0-1, later micro-batches) and
 * SET. Also checks the two give the same bits. Threads: OMP_NUM_THREADS. Not part of the library.
 * Usage: bench_round [N [reps]]. Build:
 *   gcc -O2 -march=native -fopenmp -Ikernels kernels/bench_round.c
 *       kernels/matmul.c kernels/matmul_bf16.c kernels/matmul_round.c
 *       kernels/bf16.c -ldnnl -lm -o bench_round */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sz_kernels.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void *filled(size_t n, size_t es, unsigned seed)
{
    void *p = aligned_alloc(64, (n * es + 63) / 64 * 64);
    for (size_t i = 0; p && i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        float f = ((seed >> 8) / 16777216.0f - 0.5f) * 0.2f;
        if (es == 4) ((float *)p)[i] = f;
        else { uint32_t u; memcpy(&u, &f, 4); ((uint16_t *)p)[i] = (uint16_t)(u >> 16); }
    }
    return p;
}

int main(int argc, char **argv)
{
    int N = argc > 1 ? atoi(argv[1]) : 256, reps = argc > 2 ? atoi(argv[2]) : 5;
    const struct { const char *name; int C, OC; } sh[] = {
        {"qkv", 768, 2304}, {"attproj", 768, 768}, {"fc", 768, 3072}, {"fcproj", 3072, 768}};
    printf("N %d, %d threads, %d reps (medians, ms)\n", N, omp_get_max_threads(), reps);
    printf("%-8s %-4s %-4s %10s %10s %6s\n", "shape", "in", "mode", "set+conv", "folded", "bits");
    for (int in = 0; in < 2; in++)
        for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++)
            for (int mode = 0; mode < 2; mode++) { /* SET, ADD */
                int C = sh[k].C, OC = sh[k].OC;
                size_t es = in ? 2 : 4, oc = (size_t)OC * C;
                void *dout = filled((size_t)N * OC, es, 1), *inp = filled((size_t)N * C, es, 2);
                float *w32 = aligned_alloc(64, oc * 4), *b32 = malloc((size_t)OC * 4);
                uint16_t *g0 = filled(oc, 2, 3), *g1 = malloc(oc * 2), *gb0 = filled(OC, 2, 4), *gb1 = malloc((size_t)OC * 2);
                memcpy(g1, g0, oc * 2), memcpy(gb1, gb0, (size_t)OC * 2);
                double ta[64], tb[64];
                int n = reps < 64 ? reps : 64;
                for (int r = -1; r < n; r++) { /* r = -1: warm-up */
                    double t0 = now_ms();
                    if (in) sz_k_matmul_bwd_bf16_set(NULL, SZ_K_F32, w32, b32, SZ_K_F32, dout, inp, NULL, N, C, OC,
                                                     SZ_K_SET_DW | SZ_K_SET_DB);
                    else sz_k_matmul_bwd_set(NULL, w32, b32, dout, inp, NULL, N, C, OC, SZ_K_SET_DW | SZ_K_SET_DB);
                    sz_k_convert(g0, SZ_K_BF16, w32, SZ_K_F32, oc, mode);
                    sz_k_convert(gb0, SZ_K_BF16, b32, SZ_K_F32, (size_t)OC, mode);
                    double t1 = now_ms();
                    sz_k_matmul_dparams_round(g1, gb1, dout, inp, in ? SZ_K_BF16 : SZ_K_F32, N, C, OC, mode);
                    double t2 = now_ms();
                    if (r >= 0) ta[r] = t1 - t0, tb[r] = t2 - t1;
                }
                qsort(ta, (size_t)n, sizeof *ta, cmp_d);
                qsort(tb, (size_t)n, sizeof *tb, cmp_d);
                int same = !memcmp(g0, g1, oc * 2) && !memcmp(gb0, gb1, (size_t)OC * 2);
                printf("%-8s %-4s %-4s %10.3f %10.3f %6s\n", sh[k].name, in ? "bf16" : "f32", mode ? "ADD" : "SET",
                       ta[n / 2], tb[n / 2], same ? "same" : "DIFFER");
                free(dout), free(inp), free(w32), free(b32), free(g0), free(g1), free(gb0), free(gb1);
            }
    return 0;
}
