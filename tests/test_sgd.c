/* tests/test_sgd.c — the SGD kernel (kernels/sgd.c, torch.optim.SGD semantics):
 *  - against a double reference over several steps: fp32, mixed precision (bf16 or fp16 gradients,
 *    gdt 1 or 2, onto the fp32 master, the 16-bit copy rounded from it), with and without momentum,
 *    Nesterov, the clip scale (bitwise the same as scaling the gradients first);
 *  - PyTorch's numbers: three steps of torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.1)
 *    (and momentum 0) on p = 1 with gradient 0.5, worked out by hand (the weight decay is L2,
 *    added to the gradient, not AdamW's decoupled one);
 *  - deterministic: the same bits with 1 and 3 threads over several chunks (fp32, bf16 and fp16
 *    gradients), and the fused squared norm equals sz_k_sumsq's bitwise, changing nothing else. */
#include <CUnit/Basic.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sz_kernels.h"
#include "sz_kernels_impl.h"
#include "sz_test_data.h"

static int close_to(const char *what, const float *got, const double *want, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1.0 + fabs(want[i])))) {
            printf("\n  %s[%zu] = %.9g, want %.9g\n", what, i, got[i], want[i]);
            return 0;
        }
    return 1;
}

static void test_reference(void)
{
    enum { P = 37, STEPS = 4 };
    const float lr = 0.05f, wd = 0.01f, scale = 0.75f;
    for (int mode = 0; mode < 5; mode++) { /* 0 momentum 0.9, 1 no momentum, 2 Nesterov, 3 mixed bf16, 4 mixed fp16 */
        float mom = mode == 1 ? 0.0f : 0.9f;
        int nest = mode == 2, mixed = mode >= 3 ? mode - 2 : 0; /* the gradients' sz_k_dtype */
        float *p = rnd(P, 1), *buf = calloc(P, sizeof(float));
        double *rp = dup_d(p, P), rb[P] = {0};
        uint16_t pb[P];
        for (int t = 0; t < STEPS; t++) {
            float *g = rnd(P, 1);
            uint16_t *h = malloc(P * sizeof *h);
            for (int i = 0; i < P; i++) {
                h[i] = mixed == SZ_K_F16 ? sz_k_f32_to_f16_1(g[i]) : sz_f32_to_bf16_1(g[i]);
                if (mixed)
                    g[i] = sz_ldx(h, mixed, i); /* the values the mixed kernel sees */
            }
            for (int i = 0; i < P; i++) {
                double d = (double)scale * g[i] + (double)wd * rp[i];
                if (mom != 0.0f) {
                    rb[i] = (double)mom * rb[i] + d;
                    d = nest ? d + (double)mom * rb[i] : rb[i];
                }
                rp[i] -= (double)lr * d;
            }
            int rc = mixed ? sz_k_sgd_step(p, pb, h, mixed, buf, P, lr, mom, wd, 0, scale, NULL)
                           : sz_k_sgd_step(p, NULL, g, 0, mom != 0.0f ? buf : NULL, P, lr, mom, wd, nest, scale, NULL);
            CU_ASSERT_EQUAL(rc, 0);
            free(g);
            free(h);
        }
        char what[64];
        snprintf(what, sizeof what, "sgd mode %d param", mode);
        CU_ASSERT(close_to(what, p, rp, P, 1e-6));
        if (mom != 0.0f) {
            snprintf(what, sizeof what, "sgd mode %d momentum", mode);
            CU_ASSERT(close_to(what, buf, rb, P, 1e-6));
        }
        if (mixed) {
            int ok = 1;
            for (int i = 0; i < P; i++)
                ok &= pb[i] == (mixed == SZ_K_F16 ? sz_k_f32_to_f16_1(p[i]) : sz_f32_to_bf16_1(p[i]));
            CU_ASSERT(ok); /* the 16-bit parameters are the master rounded */
        }
        free(p), free(rp), free(buf);
    }
    /* the clip scale is bitwise the gradients scaled first */
    float *p1 = rnd(P, 1), *p2 = dup_f(p1, P), *g = rnd(P, 1), *gs = malloc(P * sizeof *gs);
    float b1[P] = {0}, b2[P] = {0};
    for (int i = 0; i < P; i++)
        gs[i] = g[i] * scale;
    sz_k_sgd_step(p1, NULL, g, 0, b1, P, lr, 0.9f, wd, 0, scale, NULL);
    sz_k_sgd_step(p2, NULL, gs, 0, b2, P, lr, 0.9f, wd, 0, 1.0f, NULL);
    CU_ASSERT(!memcmp(p1, p2, sizeof b1) && !memcmp(b1, b2, sizeof b1));
    free(p1), free(p2), free(g), free(gs);
}

/* torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.1), p = 1, grad 0.5 at every step:
 *   d1 = 0.5 + 0.1*1 = 0.6,        buf1 = 0.6,                     p1 = 1 - 0.06 = 0.94
 *   d2 = 0.5 + 0.094 = 0.594,      buf2 = 0.54 + 0.594 = 1.134,     p2 = 0.94 - 0.1134 = 0.8266
 *   d3 = 0.5 + 0.08266 = 0.58266,  buf3 = 1.0206 + 0.58266 = 1.60326, p3 = 0.8266 - 0.160326 = 0.666274
 * momentum 0: p = 0.94, 0.94 - 0.1*0.594 = 0.8806, 0.8806 - 0.1*0.58806 = 0.821794. (AdamW-style
 * decoupled decay would give 0.94 at step 1 only by coincidence of these numbers: its step 2 differs.) */
static void test_pytorch(void)
{
    const double want_p[3] = {0.94, 0.8266, 0.666274}, want_b[3] = {0.6, 1.134, 1.60326};
    const double want_p0[3] = {0.94, 0.8806, 0.821794};
    float p = 1.0f, b = 0.0f, q = 1.0f, g = 0.5f;
    for (int t = 0; t < 3; t++) {
        sz_k_sgd_step(&p, NULL, &g, 0, &b, 1, 0.1f, 0.9f, 0.1f, 0, 1.0f, NULL);
        sz_k_sgd_step(&q, NULL, &g, 0, NULL, 1, 0.1f, 0.0f, 0.1f, 0, 1.0f, NULL);
        CU_ASSERT(close_to("pytorch sgd p", &p, &want_p[t], 1, 1e-6));
        CU_ASSERT(close_to("pytorch sgd momentum buffer", &b, &want_b[t], 1, 1e-6));
        CU_ASSERT(close_to("pytorch sgd (momentum 0) p", &q, &want_p0[t], 1, 1e-6));
    }
}

static void test_determinism(void)
{
    const size_t n = 3 * SZ_SUMSQ_CHUNK + 999;
    float *p0 = rnd(n, 1), *g = rnd(n, 1), *b0 = rnd(n, 1);
    uint16_t *h = malloc(n * sizeof *h), *e = malloc(n * sizeof *e);
    for (size_t i = 0; i < n; i++) {
        h[i] = sz_f32_to_bf16_1(g[i]);
        e[i] = sz_k_f32_to_f16_1(g[i]);
    }
    double want32 = sz_k_sumsq(g, 0, (int64_t)n), want16 = sz_k_sumsq(h, 1, (int64_t)n);
    double wantf16 = sz_k_sumsq(e, 2, (int64_t)n);
    float *snap_p = NULL, *snap_b = NULL, *snap_m = NULL, *snap_f = NULL;
    uint16_t *snap_fb = NULL;
    int saved = omp_get_max_threads();
    for (int nt = 1; nt <= 3; nt += 2) {
        omp_set_num_threads(nt);
        float *p = dup_f(p0, n), *b = dup_f(b0, n), *r = dup_f(p0, n), *rb = dup_f(b0, n);
        float *m = dup_f(p0, n), *mb = dup_f(b0, n), *f = dup_f(p0, n), *fb = dup_f(b0, n);
        uint16_t *pb = malloc(n * sizeof *pb), *fp = malloc(n * sizeof *fp);
        double s32 = -1, s16 = -1, sf16 = -1;
        CU_ASSERT(sz_k_sgd_step(p, NULL, g, 0, b, n, 0.1f, 0.9f, 0.01f, 0, 0.5f, &s32) == 0);
        CU_ASSERT(sz_k_sgd_step(r, NULL, g, 0, rb, n, 0.1f, 0.9f, 0.01f, 0, 0.5f, NULL) == 0);
        CU_ASSERT(sz_k_sgd_step(m, pb, h, 1, mb, n, 0.1f, 0.9f, 0.01f, 0, 0.5f, &s16) == 0);
        CU_ASSERT(sz_k_sgd_step(f, fp, e, 2, fb, n, 0.1f, 0.9f, 0.01f, 0, 0.5f, &sf16) == 0);
        CU_ASSERT(s32 == want32 && s16 == want16 && sf16 == wantf16);           /* the fused norm */
        CU_ASSERT(!memcmp(p, r, n * sizeof *p) && !memcmp(b, rb, n * sizeof *b)); /* changes nothing else */
        if (!snap_p) {
            snap_p = p, snap_b = b, snap_m = m, snap_f = f, snap_fb = fp;
        } else {
            CU_ASSERT(!memcmp(p, snap_p, n * sizeof *p) && !memcmp(b, snap_b, n * sizeof *b) &&
                      !memcmp(m, snap_m, n * sizeof *m) && !memcmp(f, snap_f, n * sizeof *f) &&
                      !memcmp(fp, snap_fb, n * sizeof *fp)); /* 1 and 3 threads: the same bits */
            free(p), free(b), free(m), free(f), free(fp);
        }
        free(r), free(rb), free(mb), free(fb), free(pb);
    }
    omp_set_num_threads(saved);
    free(snap_p), free(snap_b), free(snap_m), free(snap_f), free(snap_fb), free(p0), free(g), free(b0), free(h), free(e);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("sgd", NULL, NULL);
    if (!s || !CU_add_test(s, "against a double reference", test_reference) ||
        !CU_add_test(s, "torch.optim.SGD's numbers by hand", test_pytorch) ||
        !CU_add_test(s, "deterministic, fused norm", test_determinism)) {
        CU_cleanup_registry();
        return 1;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
