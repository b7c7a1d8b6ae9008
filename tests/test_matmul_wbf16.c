/* test_matmul_wbf16.c — CUnit suite for the matmuls of fp32 activations with bf16 weights (the emulated
 * bf16 path without working copies: kernels/matmul.c, sz_k_matmul_*_wbf16, and the GELU-fused
 * pair with w_dt BF16). Requirement: the bits of the fp32 kernels run on the weight widened to fp32
 * (the working copy the path no longer keeps), checked with memcmp on odd sizes and edge tiles, on
 * shapes whose fp32 backward packs B (row stride a multiple of 2 KiB) and that do not, at 1, 2 and 3
 * threads: forward with and without bias, dinp accumulated and set, dweight and dbias; one forward
 * against a double reference; the host bytes they count bound what they take; an unsupported type
 * pair is refused. */
#include <CUnit/Basic.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sz_kernels.h"
#include "sz_kernels_impl.h"

static uint32_t rng = 12345u;
static float frand(void) /* in [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xFFFFFF) / 8388608.0f - 1.0f;
}
static float *rand_f32(size_t n)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; x && i < n; i++) x[i] = frand();
    return x;
}
static uint16_t *rand_bf16(size_t n)
{
    uint16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; h && i < n; i++) h[i] = sz_f32_to_bf16_1(frand());
    return h;
}
static float *widen(const uint16_t *h, size_t n)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; x && i < n; i++) x[i] = sz_bf16_to_f32_1(h[i]);
    return x;
}
static float *copy_f32(const float *x, size_t n)
{
    float *y = malloc(n * sizeof *y);
    if (y) memcpy(y, x, n * sizeof *y);
    return y;
}

/* N, C, OC: odd sizes, edge tiles in both directions (tiles 256 x 384), C = 512 and 1024 (the fp32
 * dinp packs B there), 768 and 600 (several column blocks: it reads W in place, strided), 96, 384 and
 * smaller (one column block: it reads W densely) and 385 (one column more than a tile); OC = 2000
 * and 1700 (dinp's K over two chunks of 768: the panel widened and multiplied chunk by chunk, the
 * last chunk longer, with edge tiles in both directions and two row blocks). */
static const int shapes[][3] = {{37, 29, 53}, {300, 96, 401}, {64, 512, 512}, {20, 768, 800},
                                {260, 1024, 130}, {5, 1, 7}, {3, 17, 1}, {70, 600, 90}, {30, 384, 70}, {40, 385, 33},
                                {300, 768, 2000}, {40, 1000, 1700}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static int same(const void *a, const void *b, size_t bytes, const char *what, int N, int C, int OC, int nt)
{
    int ok = memcmp(a, b, bytes) == 0;
    if (!ok) printf("\n  %s: bits differ at %d x %d x %d, %d thread(s)\n", what, N, C, OC, nt);
    return ok;
}

static void test_bits(void)
{
    int saved = omp_get_max_threads();
    for (size_t k = 0; k < NSHAPES; k++) {
        int N = shapes[k][0], C = shapes[k][1], OC = shapes[k][2];
        size_t nx = (size_t)N * C, nw = (size_t)OC * C, ny = (size_t)N * OC;
        float *x = rand_f32(nx), *dy = rand_f32(ny), *d0 = rand_f32(nx), *dw0 = rand_f32(nw), *db0 = rand_f32(OC);
        uint16_t *w16 = rand_bf16(nw), *b16 = rand_bf16(OC);
        float *w = widen(w16, nw), *b = widen(b16, OC);
        float *y1 = malloc(ny * 4), *y2 = malloc(ny * 4);
        CU_ASSERT_FATAL(x && dy && d0 && dw0 && db0 && w16 && b16 && w && b && y1 && y2);
        for (int nt = 1; nt <= 3; nt++) {
            omp_set_num_threads(nt);
            for (int hb = 0; hb < 2; hb++) {   /* forward, with a bias and without */
                memset(y1, 0xff, ny * 4);
                memset(y2, 0, ny * 4);
                CU_ASSERT(sz_k_matmul_fwd_wbf16(y1, x, w16, hb ? b16 : NULL, N, C, OC) >= 0);
                CU_ASSERT(sz_k_matmul_fwd(y2, x, w, hb ? b : NULL, N, C, OC) >= 0);
                CU_ASSERT(same(y1, y2, ny * 4, hb ? "fwd with bias" : "fwd", N, C, OC, nt));
            }
            for (int set = 0; set < 3; set++) {   /* accumulated; dinp set; dinp, dweight, dbias set */
                float *a1 = copy_f32(d0, nx), *a2 = copy_f32(d0, nx), *w1 = copy_f32(dw0, nw),
                      *w2 = copy_f32(dw0, nw), *c1 = copy_f32(db0, OC), *c2 = copy_f32(db0, OC);
                CU_ASSERT_FATAL(a1 && a2 && w1 && w2 && c1 && c2);
                if (set) memset(a1, 0xff, nx * 4);   /* not read: NaN there must not matter */
                if (set == 2) { memset(w1, 0xff, nw * 4); memset(c1, 0xff, OC * 4); }
                int s = set == 2 ? SZ_K_SET_DINP | SZ_K_SET_DW | SZ_K_SET_DB : set ? SZ_K_SET_DINP : 0;
                CU_ASSERT(sz_k_matmul_bwd_wbf16_set(a1, w1, c1, dy, x, w16, N, C, OC, s) >= 0);
                CU_ASSERT(sz_k_matmul_bwd_set(a2, w2, c2, dy, x, w, N, C, OC, s) >= 0);
                CU_ASSERT(same(a1, a2, nx * 4, set ? "dinp set" : "dinp accumulated", N, C, OC, nt));
                CU_ASSERT(same(w1, w2, nw * 4, "dweight", N, C, OC, nt));
                CU_ASSERT(same(c1, c2, OC * 4, "dbias", N, C, OC, nt));
                free(a1); free(a2); free(w1); free(w2); free(c1); free(c2);
            }
            /* the GELU-fused pair with bf16 weights against itself with the widened ones */
            float *g1 = malloc(ny * 4), *g2 = malloc(ny * 4);
            uint16_t *h1 = malloc(ny * 2), *h2 = malloc(ny * 2);
            CU_ASSERT_FATAL(g1 && g2 && h1 && h2);
            CU_ASSERT(sz_k_matmul_gelu_fwd(y1, g1, SZ_K_F32, x, w16, b16, SZ_K_F32, SZ_K_BF16, N, C, OC) >= 0);
            CU_ASSERT(sz_k_matmul_gelu_fwd(y2, g2, SZ_K_F32, x, w, b, SZ_K_F32, SZ_K_F32, N, C, OC) >= 0);
            CU_ASSERT(same(y1, y2, ny * 4, "matmul_gelu out", N, C, OC, nt));
            CU_ASSERT(same(g1, g2, ny * 4, "matmul_gelu gout", N, C, OC, nt));
            CU_ASSERT(sz_k_matmul_gelu_fwd(y1, h1, SZ_K_BF16, x, w16, NULL, SZ_K_F32, SZ_K_BF16, N, C, OC) >= 0);
            CU_ASSERT(sz_k_matmul_gelu_fwd(y2, h2, SZ_K_BF16, x, w, NULL, SZ_K_F32, SZ_K_F32, N, C, OC) >= 0);
            CU_ASSERT(same(h1, h2, ny * 2, "matmul_gelu bf16 gout", N, C, OC, nt));
            {
                float *pre = rand_f32(nx), *a1 = malloc(nx * 4), *a2 = malloc(nx * 4);
                float *w1 = copy_f32(dw0, nw), *w2 = copy_f32(dw0, nw), *c1 = copy_f32(db0, OC), *c2 = copy_f32(db0, OC);
                CU_ASSERT_FATAL(pre && a1 && a2 && w1 && w2 && c1 && c2);
                memset(a1, 0xff, nx * 4);   /* overwritten */
                memset(a2, 0, nx * 4);
                CU_ASSERT(sz_k_gelu_matmul_bwd(a1, SZ_K_F32, w1, c1, SZ_K_F32, dy, x, w16, pre, SZ_K_F32, SZ_K_BF16,
                                               N, C, OC) >= 0);
                CU_ASSERT(sz_k_gelu_matmul_bwd(a2, SZ_K_F32, w2, c2, SZ_K_F32, dy, x, w, pre, SZ_K_F32, SZ_K_F32,
                                               N, C, OC) >= 0);
                CU_ASSERT(same(a1, a2, nx * 4, "gelu_matmul dinp", N, C, OC, nt));
                CU_ASSERT(same(w1, w2, nw * 4, "gelu_matmul dweight", N, C, OC, nt));
                CU_ASSERT(same(c1, c2, OC * 4, "gelu_matmul dbias", N, C, OC, nt));
                free(pre); free(a1); free(a2); free(w1); free(w2); free(c1); free(c2);
            }
            free(g1); free(g2); free(h1); free(h2);
        }
        free(x); free(dy); free(d0); free(dw0); free(db0); free(w16); free(b16); free(w); free(b);
        free(y1); free(y2);
    }
    omp_set_num_threads(saved);
}

/* The forward and dinp against double references (the bits above then carry the fp32 kernels'
 * own checks in test_kernels over to these). */
static void test_reference(void)
{
    const int N = 45, C = 70, OC = 401;
    float *x = rand_f32((size_t)N * C), *dy = rand_f32((size_t)N * OC), *y = malloc((size_t)N * OC * 4);
    float *dx = calloc((size_t)N * C, 4);
    uint16_t *w = rand_bf16((size_t)OC * C), *b = rand_bf16(OC);
    CU_ASSERT_FATAL(x && dy && y && dx && w && b);
    CU_ASSERT(sz_k_matmul_fwd_wbf16(y, x, w, b, N, C, OC) >= 0);
    CU_ASSERT(sz_k_matmul_bwd_wbf16_set(dx, NULL, NULL, dy, x, w, N, C, OC, 0) >= 0);
    double worst = 0, worst_d = 0;
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double r = sz_bf16_to_f32_1(b[o]);
            for (int c = 0; c < C; c++) r += (double)x[i * C + c] * sz_bf16_to_f32_1(w[(size_t)o * C + c]);
            double e = fabs(r - y[(size_t)i * OC + o]) / (1.0 + fabs(r));
            worst = e > worst ? e : worst;
        }
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) {
            double r = 0;
            for (int o = 0; o < OC; o++) r += (double)dy[(size_t)i * OC + o] * sz_bf16_to_f32_1(w[(size_t)o * C + c]);
            double e = fabs(r - dx[i * C + c]) / (1.0 + fabs(r));
            worst_d = e > worst_d ? e : worst_d;
        }
    CU_ASSERT(worst < 1e-5);
    CU_ASSERT(worst_d < 1e-5);
    if (worst >= 1e-5 || worst_d >= 1e-5) printf("\n  relative error fwd %g, dinp %g\n", worst, worst_d);
    free(x); free(dy); free(y); free(dx); free(w); free(b);
}

/* The fused kernels take fp32 or bf16 operands, or fp32 ones with bf16 weights: bf16 inputs with fp32
 * weights are refused (-2), nothing written. */
static void test_refused_pair(void)
{
    float out[4] = {7, 7, 7, 7}, g[4] = {7, 7, 7, 7}, w[4] = {0}, pre[4] = {0};
    uint16_t x[4] = {0}, dy[4] = {0};
    CU_ASSERT_EQUAL(sz_k_matmul_gelu_fwd(out, g, SZ_K_F32, x, w, NULL, SZ_K_BF16, SZ_K_F32, 2, 2, 2), -2);
    CU_ASSERT_EQUAL(sz_k_gelu_matmul_bwd(out, SZ_K_F32, NULL, NULL, SZ_K_F32, dy, x, w, pre, SZ_K_BF16, SZ_K_F32,
                                         2, 2, 2), -2);
    for (int i = 0; i < 4; i++) CU_ASSERT(out[i] == 7 && g[i] == 7);
}

/* sz_k_matmul_wbf16_host_bytes bounds what the kernels take (their widened panels among it), and
 * counts at least the fp32 kernels' plus the panels, at 1 and 2 threads. Each shape runs on a thread
 * of its own, so that its OpenMP threads start without kept buffers (those of earlier calls would
 * hide what this shape takes); the next shape starts once that thread's OpenMP team has exited and
 * freed its buffers (they go after pthread_join returns: the live count is awaited back at its
 * level before the thread, which also checks that nothing kept leaks). */
struct hb_job { int N, C, OC, nt; };

static void *hb_run(void *p)
{
    const struct hb_job *j = p;
    int N = j->N, C = j->C, OC = j->OC, nt = j->nt;
    omp_set_num_threads(nt);
    float *x = calloc((size_t)N * C, 4), *y = calloc((size_t)N * OC, 4), *g = calloc((size_t)N * OC, 4);
    float *dx = calloc((size_t)N * C, 4), *dw = calloc((size_t)OC * C, 4), *db = calloc((size_t)OC, 4);
    uint16_t *w = calloc((size_t)OC * C, 2), *b = calloc((size_t)OC, 2);
    CU_ASSERT(x && y && g && dx && dw && db && w && b);   /* no _FATAL off CUnit's thread */
    if (!(x && y && g && dx && dw && db && w && b)) return NULL;
    size_t sc, pk, sc32, pk32;
    sz_k_matmul_wbf16_host_bytes(N, C, OC, nt, &sc, &pk);
    sz_k_matmul_host_bytes(N, C, OC, nt, &sc32, &pk32);
    /* the dinp panel per thread, kept: all of W (C <= 384 columns, one tile) or OC x (384 + 16) floats */
    CU_ASSERT(sc >= (size_t)OC * (C <= 384 ? C : 400) * 4 * nt);
    CU_ASSERT(sc + pk >= sc32 + pk32);
    int64_t before = sz_k_matmul_host_live();
    sz_k_matmul_host_peak_reset();
    CU_ASSERT(sz_k_matmul_fwd_wbf16(y, x, w, b, N, C, OC) >= 0);
    CU_ASSERT(sz_k_matmul_fwd_wbf16(y, x, w, NULL, N, C, OC) >= 0);
    CU_ASSERT(sz_k_matmul_bwd_wbf16_set(dx, dw, db, y, x, w, N, C, OC, 0) >= 0);
    CU_ASSERT(sz_k_matmul_bwd_wbf16_set(dx, dw, db, y, x, w, N, C, OC, SZ_K_SET_DINP) >= 0);
    CU_ASSERT(sz_k_matmul_gelu_fwd(y, g, SZ_K_F32, x, w, b, SZ_K_F32, SZ_K_BF16, N, C, OC) >= 0);
    CU_ASSERT(sz_k_gelu_matmul_bwd(dx, SZ_K_F32, dw, db, SZ_K_F32, y, x, w, x, SZ_K_F32, SZ_K_BF16, N, C, OC) >= 0);
    int64_t used = sz_k_matmul_host_peak() - before;
    CU_ASSERT(used >= (int64_t)((size_t)OC * (C <= 384 ? C : 400) * 4) && used <= (int64_t)(sc + pk));
    if (used > (int64_t)(sc + pk) || used < (int64_t)((size_t)OC * (C <= 384 ? C : 400) * 4))
        printf("\n  %d x %d x %d, %d thread(s): used %lld, counted %zu\n", N, C, OC, nt, (long long)used, sc + pk);
    free(x); free(y); free(g); free(dx); free(dw); free(db); free(w); free(b);
    return NULL;
}

static void test_host_bytes(void)
{
    const int hs[][3] = {{64, 512, 512}, {130, 96, 200}, {32, 128, 1536}, {300, 768, 401}};
    for (int nt = 1; nt <= 2; nt++)
        for (size_t k = 0; k < sizeof hs / sizeof hs[0]; k++) {
            struct hb_job j = {hs[k][0], hs[k][1], hs[k][2], nt};
            pthread_t th;
            int64_t live0 = sz_k_matmul_host_live();
            CU_ASSERT_FATAL(pthread_create(&th, NULL, hb_run, &j) == 0);
            pthread_join(th, NULL);
            for (int ms = 0; ms < 10000 && sz_k_matmul_host_live() != live0; ms++) {
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
            }
            CU_ASSERT_EQUAL(sz_k_matmul_host_live(), live0);
        }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("matmul with bf16 weights", NULL, NULL);
    struct { const char *name; void (*fn)(void); } tests[] = {
        { "bits of the fp32 kernels on the widened weight (1-3 threads)", test_bits },
        { "forward and dinp against double references", test_reference },
        { "bf16 inputs with fp32 weights refused", test_refused_pair },
        { "host memory within what is counted", test_host_bytes },
    };
    for (size_t i = 0; s && i < sizeof tests / sizeof tests[0]; i++)
        if (!CU_add_test(s, tests[i].name, tests[i].fn)) s = NULL;
    if (!s) { CU_cleanup_registry(); return 1; }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    CU_cleanup_registry();
    sz_k_shutdown();
    return fails > 100 ? 100 : (int)fails;
}
