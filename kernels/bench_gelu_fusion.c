/* bench_gelu_fusion.c — GPT-2 d12's MLP GELU fused with its matmuls (matmul_gelu.c) against the
 * separate kernels, one thread, thread CPU time (so other processes' share of the cores does not
 * count), best of R runs, separate and fused alternating:
 *   fwd: fch = ln2 . fcw^T + fcb [N x 3072] and fch_gelu = gelu(fch): sz_k_matmul_fwd(_bf16) then
 *        sz_k_gelu_fwd(_mx), against sz_k_matmul_gelu_fwd;
 *   bwd: dfch = gelu'(fch) * (dfcproj . fcprojw) [N x 3072]: zero dfch_gelu and dfch (the step's two
 *        zero tasks), sz_k_matmul_bwd(_bf16) into dfch_gelu, sz_k_gelu_bwd(_mx), against
 *        sz_k_gelu_matmul_bwd (the input gradient only: the weight gradient is the same work).
 * fp32, and the native bf16 path's types (bf16 inputs, fch fp32, fch_gelu / dfch bf16), the GELU
 * kernels codelets/gelu.c would call for them. "product": the matmul alone (no GELU, no zeroing), so
 * fused - product is what the GELU still costs. Also says whether the fused results have the same bits. Not part of the library. Usage:
 * bench_gelu_fusion [N [R]]. Build from the repository root:
 *   gcc -O3 -march=native -fno-math-errno -fopenmp -Ikernels kernels/bench_gelu_fusion.c \
 *       $(ls kernels/*.c | grep -v /bench_) -ldnnl -lm -o /tmp/bench_gelu_fusion
 * (the library's flags, so the kernels are those of a Release build). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sz_kernels.h"

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *alloc(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    memset(p, 0, bytes);
    return p;
}

/* x[i] in [-2, 2), a fixed pattern; stored as bf16 when h */
static void fill(void *p, size_t n, int h, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        float v = (float)((i * 2654435761u + seed) % 4001) / 1000.0f - 2.0f;
        if (h) { uint32_t u; memcpy(&u, &v, 4); ((uint16_t *)p)[i] = (uint16_t)(u >> 16); }
        else ((float *)p)[i] = v;
    }
}

int main(int argc, char **argv)
{
    int N = argc > 1 ? atoi(argv[1]) : 256, R = argc > 2 ? atoi(argv[2]) : 15;
    const int C = 768, H = 3072;
    omp_set_num_threads(1);
    printf("N=%d, one thread, thread CPU time in ms, best of %d (separate and fused alternating)\n", N, R);
    printf("%-5s %-4s %10s %10s %10s %7s  %s\n", "prec", "op", "product", "separate", "fused", "ratio", "same bits");
    for (int bf = 0; bf < 2; bf++) {
        size_t ei = bf ? 2 : 4, eo = bf ? 2 : 4;   /* inputs; gout / dinp (bf16 on the native path) */
        sz_k_dtype in = bf ? SZ_K_BF16 : SZ_K_F32, od = bf ? SZ_K_BF16 : SZ_K_F32;
        void *ln2 = alloc((size_t)N * C * ei), *fcw = alloc((size_t)H * C * ei), *fcb = alloc((size_t)H * ei);
        void *dfcproj = alloc((size_t)N * C * ei), *fcprojw = alloc((size_t)C * H * ei);
        float *fch = alloc((size_t)N * H * 4), *fch2 = alloc((size_t)N * H * 4);
        void *g1 = alloc((size_t)N * H * eo), *g2 = alloc((size_t)N * H * eo);
        void *t = alloc((size_t)N * H * eo), *d1 = alloc((size_t)N * H * eo), *d2 = alloc((size_t)N * H * eo);
        fill(ln2, (size_t)N * C, bf, 1); fill(fcw, (size_t)H * C, bf, 2); fill(fcb, H, bf, 3);
        fill(dfcproj, (size_t)N * C, bf, 4); fill(fcprojw, (size_t)C * H, bf, 5);
        double best[2][3] = { { 1e30, 1e30, 1e30 }, { 1e30, 1e30, 1e30 } }; /* [fwd, bwd][separate, fused, product] */
        for (int r = -1; r < R; r++) {   /* r = -1 warms up (primitive creation, first touch) */
            double t0 = cpu_s();
            if (bf) sz_k_matmul_fwd_bf16(fch, SZ_K_F32, ln2, fcw, fcb, N, C, H);
            else sz_k_matmul_fwd(fch, ln2, fcw, fcb, N, C, H);
            if (bf) sz_k_gelu_fwd_mx(g1, od, fch, (size_t)N * H);   /* as codelets/gelu.c chooses */
            else sz_k_gelu_fwd(g1, fch, (size_t)N * H);
            double t1 = cpu_s();
            sz_k_matmul_gelu_fwd(fch2, g2, od, ln2, fcw, fcb, in, in, N, C, H);
            double t2 = cpu_s();
            memset(t, 0, (size_t)N * H * eo);
            memset(d1, 0, (size_t)N * H * eo);
            if (bf) sz_k_matmul_bwd_bf16(t, od, NULL, NULL, SZ_K_F32, dfcproj, NULL, fcprojw, N, H, C);
            else sz_k_matmul_bwd(t, NULL, NULL, dfcproj, NULL, fcprojw, N, H, C);
            if (bf) sz_k_gelu_bwd_mx(d1, od, fch, t, od, (size_t)N * H);
            else sz_k_gelu_bwd(d1, fch, t, (size_t)N * H);
            double t3 = cpu_s();
            sz_k_gelu_matmul_bwd(d2, od, NULL, NULL, SZ_K_F32, dfcproj, NULL, fcprojw, fch, in, in, N, H, C);
            double t4 = cpu_s();
            /* the products alone (no GELU, no zeroing), for the GELU's share */
            if (bf) sz_k_matmul_fwd_bf16(fch2, SZ_K_F32, ln2, fcw, fcb, N, C, H);
            else sz_k_matmul_fwd(fch2, ln2, fcw, fcb, N, C, H);
            double t5 = cpu_s();
            if (bf) sz_k_matmul_bwd_bf16(t, od, NULL, NULL, SZ_K_F32, dfcproj, NULL, fcprojw, N, H, C);
            else sz_k_matmul_bwd(t, NULL, NULL, dfcproj, NULL, fcprojw, N, H, C);
            double t6 = cpu_s();
            if (r < 0) continue;
            double v[2][3] = { { t1 - t0, t2 - t1, t5 - t4 }, { t3 - t2, t4 - t3, t6 - t5 } };
            for (int o = 0; o < 2; o++)
                for (int k = 0; k < 3; k++)
                    if (v[o][k] < best[o][k]) best[o][k] = v[o][k];
        }
        int same[2] = { memcmp(fch, fch2, (size_t)N * H * 4) == 0 && memcmp(g1, g2, (size_t)N * H * eo) == 0,
                        memcmp(d1, d2, (size_t)N * H * eo) == 0 };
        const char *op[2] = { "fwd", "bwd" };
        for (int o = 0; o < 2; o++)
            printf("%-5s %-4s %10.3f %10.3f %10.3f %7.3f  %s\n", bf ? "bf16" : "fp32", op[o], best[o][2] * 1e3,
                   best[o][0] * 1e3, best[o][1] * 1e3, best[o][1] / best[o][0], same[o] ? "yes" : "NO");
        free(ln2); free(fcw); free(fcb); free(dfcproj); free(fcprojw); free(fch); free(fch2);
        free(g1); free(g2); free(t); free(d1); free(d2);
    }
    sz_k_shutdown();
    return 0;
}
