/* tests/test_estimate.c — the ZeRO estimator (graph/zero_estimate.c): the paper's check values,
 * the fp32 table, breakdowns summing to totals, communication volumes, shard padding, fitting a
 * budget, and GPT-2 d12 activation bytes against a count done by hand. Pure C, no runtime:
 *   gcc -O2 -Wall -Wextra -Iinclude -Igraph tests/test_estimate.c graph/zero_estimate.c \
 *       graph/gpt2_spec.c graph/status.c -lcunit -lm */
#include <math.h>

#include "sz_test.h"
#include "zero_estimate.h"

/* Relative comparison: the estimator works in doubles; values here are exact or nearly so. */
static int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-12 * fmax(1.0, fabs(want));
}
#define CHECK_CLOSE(got, want) CU_ASSERT(close_to((got), (want)))

static const int k_nds[] = {1, 2, 3, 4, 7, 8, 16, 63, 64, 1000, 4096};
enum { N_NDS = sizeof k_nds / sizeof k_nds[0] };

static void test_paper_values(void)
{
    const double psi = 7.5e9;
    CHECK_CLOSE(sz_zero_model_state_bytes(0, psi, 64, 1), 120e9);
    CHECK_CLOSE(sz_zero_model_state_bytes(1, psi, 64, 1), 31.40625e9);
    CHECK_CLOSE(sz_zero_model_state_bytes(2, psi, 64, 1), 16.640625e9);
    CHECK_CLOSE(sz_zero_model_state_bytes(3, psi, 64, 1), 1.875e9);
}

static void test_mixed_table(void)
{
    const double psi = 1e6;
    for (int i = 0; i < N_NDS; i++) {
        double n = k_nds[i];
        CHECK_CLOSE(sz_zero_model_state_bytes(0, psi, k_nds[i], 1), 16 * psi);
        CHECK_CLOSE(sz_zero_model_state_bytes(1, psi, k_nds[i], 1), 4 * psi + 12 * psi / n);
        CHECK_CLOSE(sz_zero_model_state_bytes(2, psi, k_nds[i], 1), 2 * psi + 14 * psi / n);
        CHECK_CLOSE(sz_zero_model_state_bytes(3, psi, k_nds[i], 1), 16 * psi / n);
    }
    /* N_d = 1: every stage holds all 16 bytes per parameter */
    for (int s = 0; s < 4; s++)
        CHECK_CLOSE(sz_zero_model_state_bytes(s, psi, 1, 1), 16 * psi);
}

static void test_fp32_table(void)
{
    /* spot checks, Ψ = 1e6, N = 4 */
    CHECK_CLOSE(sz_zero_model_state_bytes(0, 1e6, 4, 0), 16e6);
    CHECK_CLOSE(sz_zero_model_state_bytes(1, 1e6, 4, 0), 8e6 + 2e6);
    CHECK_CLOSE(sz_zero_model_state_bytes(2, 1e6, 4, 0), 4e6 + 3e6);
    CHECK_CLOSE(sz_zero_model_state_bytes(3, 1e6, 4, 0), 4e6);
    /* Ψ = 7.5e9, N = 64 */
    CHECK_CLOSE(sz_zero_model_state_bytes(1, 7.5e9, 64, 0), 60e9 + 0.9375e9);
    CHECK_CLOSE(sz_zero_model_state_bytes(2, 7.5e9, 64, 0), 30e9 + 1.40625e9);
    for (int i = 0; i < N_NDS; i++) {
        double n = k_nds[i], psi = 3.3e8;
        CHECK_CLOSE(sz_zero_model_state_bytes(1, psi, k_nds[i], 0), 8 * psi + 8 * psi / n);
        CHECK_CLOSE(sz_zero_model_state_bytes(2, psi, k_nds[i], 0), 4 * psi + 12 * psi / n);
        CHECK_CLOSE(sz_zero_model_state_bytes(3, psi, k_nds[i], 0), 16 * psi / n);
    }
}

static void test_invalid(void)
{
    CU_ASSERT(sz_zero_model_state_bytes(-1, 1e6, 4, 1) < 0);
    CU_ASSERT(sz_zero_model_state_bytes(4, 1e6, 4, 1) < 0);
    CU_ASSERT(sz_zero_model_state_bytes(1, -1.0, 4, 1) < 0);
    CU_ASSERT(sz_zero_model_state_bytes(1, NAN, 4, 1) < 0);
    CU_ASSERT(sz_zero_model_state_bytes(1, 1e6, 0, 1) < 0);
    CU_ASSERT(sz_zero_comm_elems(5, 1e6, 4) < 0);
    CU_ASSERT(sz_zero_comm_elems_mb(2, 1e6, 4, 0) < 0);
    sz_zero_breakdown b = {1, 2, 3, 4, 5, 6, 7};
    CU_ASSERT_EQUAL(sz_zero_state_breakdown(1, 1e6, 0, 1, &b), SZ_ERR_INVALID);
    CU_ASSERT_EQUAL(b.params, 1); /* untouched */
    CU_ASSERT_EQUAL(sz_zero_state_breakdown(1, 1e6, 4, 1, NULL), SZ_ERR_INVALID);
}

static void test_breakdown(void)
{
    const double psi = 1.234567e9;
    for (int mixed = 0; mixed <= 1; mixed++)
        for (int s = 0; s < 4; s++)
            for (int i = 0; i < N_NDS; i++) {
                sz_zero_breakdown b;
                CU_ASSERT_EQUAL_FATAL(sz_zero_state_breakdown(s, psi, k_nds[i], mixed, &b), SZ_OK);
                double sum = b.params + b.param_shard + b.grads + b.grad_shard + b.master + b.adam_m + b.adam_v;
                CHECK_CLOSE(sum, sz_zero_model_state_bytes(s, psi, k_nds[i], mixed));
                /* what each stage holds in full and what it shards */
                CU_ASSERT((s <= 2) == (b.params > 0));
                CU_ASSERT((s == 3) == (b.param_shard > 0));
                CU_ASSERT((s <= 1) == (b.grads > 0));
                CU_ASSERT((s >= 2) == (b.grad_shard > 0));
                CU_ASSERT(mixed == (b.master > 0));
                double div = s == 0 ? 1.0 : k_nds[i];
                CHECK_CLOSE(b.adam_m, 4 * psi / div);
                CHECK_CLOSE(b.adam_v, 4 * psi / div);
                if (mixed)
                    CHECK_CLOSE(b.master, 4 * psi / div);
            }
    /* the paper's stage 1 at N = 64, field by field */
    sz_zero_breakdown b;
    CU_ASSERT_EQUAL(sz_zero_state_breakdown(1, 7.5e9, 64, 1, &b), SZ_OK);
    CHECK_CLOSE(b.params, 15e9);
    CHECK_CLOSE(b.grads, 15e9);
    CHECK_CLOSE(b.master, 0.46875e9);
    CHECK_CLOSE(b.adam_m, 0.46875e9);
    CHECK_CLOSE(b.adam_v, 0.46875e9);
    CU_ASSERT_EQUAL(b.param_shard, 0);
    CU_ASSERT_EQUAL(b.grad_shard, 0);
}

static void test_comm(void)
{
    const double psi = 7.5e9;
    for (int s = 0; s < 4; s++) {
        CU_ASSERT_EQUAL(sz_zero_comm_elems(s, psi, 1), 0.0);
        CU_ASSERT_EQUAL(sz_zero_comm_elems_mb(s, psi, 1, 8), 0.0);
    }
    for (int i = 0; i < N_NDS; i++) {
        int nd = k_nds[i];
        double per = psi * (nd - 1) / nd;
        CHECK_CLOSE(sz_zero_comm_elems(0, psi, nd), 2 * per);
        CHECK_CLOSE(sz_zero_comm_elems(1, psi, nd), 2 * per);
        CHECK_CLOSE(sz_zero_comm_elems(2, psi, nd), 2 * per);
        CHECK_CLOSE(sz_zero_comm_elems(3, psi, nd), 3 * per);
        CHECK_CLOSE(sz_zero_comm_elems(3, psi, nd), 1.5 * sz_zero_comm_elems(0, psi, nd));
        /* bytes follow the dtype: bf16 under mixed precision, fp32 otherwise */
        for (int s = 0; s < 4; s++) {
            CHECK_CLOSE(sz_zero_comm_bytes(s, psi, nd, 1), 2 * sz_zero_comm_elems(s, psi, nd));
            CHECK_CLOSE(sz_zero_comm_bytes(s, psi, nd, 0), 4 * sz_zero_comm_elems(s, psi, nd));
            CHECK_CLOSE(sz_zero_comm_elems_mb(s, psi, nd, 1), sz_zero_comm_elems(s, psi, nd));
        }
        /* M = 4 micro-batches */
        CHECK_CLOSE(sz_zero_comm_elems_mb(0, psi, nd, 4), 2 * per);
        CHECK_CLOSE(sz_zero_comm_elems_mb(1, psi, nd, 4), 2 * per);
        CHECK_CLOSE(sz_zero_comm_elems_mb(2, psi, nd, 4), 4 * per + per);
        CHECK_CLOSE(sz_zero_comm_elems_mb(3, psi, nd, 4), 12 * per);
        CHECK_CLOSE(sz_zero_comm_bytes_mb(2, psi, nd, 1, 4), 2 * 5 * per);
    }
    /* the paper's large-N_d limits: 2Ψ and 3Ψ */
    CU_ASSERT(fabs(sz_zero_comm_elems(0, 1.0, 1 << 30) - 2.0) < 1e-8);
    CU_ASSERT(fabs(sz_zero_comm_elems(3, 1.0, 1 << 30) - 3.0) < 1e-8);
}

static void test_shard(void)
{
    CU_ASSERT_EQUAL(sz_zero_padded(10, 3), 12);
    CU_ASSERT_EQUAL(sz_zero_shard(10, 3), 4);
    CU_ASSERT_EQUAL(sz_zero_padded(12, 3), 12);
    CU_ASSERT_EQUAL(sz_zero_shard(12, 3), 4);
    CU_ASSERT_EQUAL(sz_zero_padded(10, 1), 10);
    CU_ASSERT_EQUAL(sz_zero_shard(10, 1), 10);
    CU_ASSERT_EQUAL(sz_zero_padded(1, 64), 64);
    CU_ASSERT_EQUAL(sz_zero_shard(1, 64), 1);
    CU_ASSERT_EQUAL(sz_zero_padded(0, 5), 0);
    CU_ASSERT_EQUAL(sz_zero_shard(0, 5), 0);
    CU_ASSERT_EQUAL(sz_zero_padded(124475904, 5), 124475905); /* GPT-2 d12 with Vp = 50304 */
    CU_ASSERT_EQUAL(sz_zero_shard(124475904, 5), 24895181);
    CU_ASSERT_EQUAL(sz_zero_padded(124475904, 64), 124475904);
    CU_ASSERT_EQUAL(sz_zero_padded(-1, 3), -1);
    CU_ASSERT_EQUAL(sz_zero_padded(10, 0), -1);
    CU_ASSERT_EQUAL(sz_zero_shard(10, -2), -1);
    CU_ASSERT_EQUAL(sz_zero_padded(INT64_MAX, 2), -1);
    CU_ASSERT_EQUAL(sz_zero_padded(INT64_MAX - 1, 2), INT64_MAX - 1);
}

static void test_min_nd(void)
{
    const double psi = 7.5e9;
    /* 32 GB per rank, mixed: stage 0 needs 120 GB at any N; stage 1 4Ψ + 12Ψ/N <= 32e9 -> N >= 45;
     * stage 2 15e9 + 105e9/N <= 32e9 -> N >= 7 (105/17 = 6.2); stage 3 120e9/N -> N >= 4 */
    CU_ASSERT_EQUAL(sz_zero_min_nd(0, psi, 1, 32e9, 0, 1024), -1);
    CU_ASSERT_EQUAL(sz_zero_min_nd(1, psi, 1, 32e9, 0, 1024), 45);
    CU_ASSERT_EQUAL(sz_zero_min_nd(2, psi, 1, 32e9, 0, 1024), 7);
    CU_ASSERT_EQUAL(sz_zero_min_nd(3, psi, 1, 32e9, 0, 1024), 4);
    /* 2 GB of activations on top: stage 1 would need 90e9/N <= 0 */
    CU_ASSERT_EQUAL(sz_zero_min_nd(1, psi, 1, 32e9, 2e9, 1024), -1);
    CU_ASSERT_EQUAL(sz_zero_min_nd(3, psi, 1, 32e9, 2e9, 1024), 4);
    CU_ASSERT_EQUAL(sz_zero_min_nd(3, psi, 1, 32e9, 3e9, 1024), 5); /* 120/29 = 4.1 */
    /* exact fits count (<=), and max_nd bounds the search */
    CU_ASSERT_EQUAL(sz_zero_min_nd(0, psi, 1, 120e9, 0, 1), 1);
    CU_ASSERT_EQUAL(sz_zero_min_nd(3, psi, 1, 1.875e9, 0, 1024), 64);
    CU_ASSERT_EQUAL(sz_zero_min_nd(3, psi, 1, 1.875e9, 0, 64), 64);
    CU_ASSERT_EQUAL(sz_zero_min_nd(3, psi, 1, 1.875e9, 0, 63), -1);
    /* the answer agrees with a linear scan */
    for (int s = 0; s < 4; s++)
        for (double budget = 1e9; budget < 130e9; budget *= 1.7) {
            int want = -1;
            for (int nd = 1; nd <= 300 && want < 0; nd++)
                if (sz_zero_model_state_bytes(s, psi, nd, 0) + 1e8 <= budget)
                    want = nd;
            CU_ASSERT_EQUAL(sz_zero_min_nd(s, psi, 0, budget, 1e8, 300), want);
        }
    CU_ASSERT_EQUAL(sz_zero_min_nd(4, psi, 1, 1e12, 0, 8), -1);
    CU_ASSERT_EQUAL(sz_zero_min_nd(3, psi, 1, 1e12, 0, 0), -1);
    CU_ASSERT_EQUAL(sz_zero_min_nd(3, psi, 1, 1e12, -1, 8), -1);
}

static void test_gpt2_activations(void)
{
    sz_gpt2_config c;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(sz_gpt2_config_from_string(&c, "d12", 50257, 1024, err, sizeof err), SZ_OK);
    /* d12: L = 12, C = 768, NH = 12, Vp = 50304; B = 4, T = 64, N = B*T = 256.
     *   per layer: 18 N C = 3,538,944; 4 N = 1,024; 2 B NH T^2 = 393,216  -> 3,933,184 floats
     *   x 12 layers                                                        = 47,198,208
     *   encoded + lnf: 2 N C = 393,216; lnf_mean, lnf_rstd, losses: 3 N = 768
     *   logits + probs: 2 N Vp = 25,755,648
     *   total = 73,347,840 floats (llm.c's num_activations) = 293,391,360 bytes */
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes(&c, 4, 64), 293391360.0);
    /* checkpointed: 12 block inputs 12 N C = 2,359,296; one block 3,933,184;
     *   head lnf + stats + losses + logits + probs: N C + 3 N + 2 N Vp = 25,953,024
     *   total = 32,245,504 floats = 128,982,016 bytes */
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_ckpt(&c, 4, 64), 128982016.0);
    /* with one layer there is nothing to gain but the embedding output */
    sz_gpt2_config one;
    CU_ASSERT_EQUAL_FATAL(sz_gpt2_config_from_string(&one, "1,4,64", 256, 32, err, sizeof err), SZ_OK);
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_ckpt(&one, 2, 16), sz_gpt2_activation_bytes(&one, 2, 16));
    /* bad arguments */
    CU_ASSERT(sz_gpt2_activation_bytes(NULL, 4, 64) < 0);
    CU_ASSERT(sz_gpt2_activation_bytes(&c, 0, 64) < 0);
    CU_ASSERT(sz_gpt2_activation_bytes(&c, 4, 0) < 0);
    CU_ASSERT(sz_gpt2_activation_bytes(&c, 4, 1025) < 0);
    CU_ASSERT(sz_gpt2_activation_bytes_ckpt(&c, 4, 1025) < 0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("zero_estimate",
             {"paper check values (7.5B, N=64, mixed)", test_paper_values},
             {"mixed-precision table", test_mixed_table},
             {"fp32 table", test_fp32_table},
             {"invalid arguments", test_invalid},
             {"breakdown sums to the total", test_breakdown},
             {"communication volume", test_comm},
             {"shard padding", test_shard},
             {"smallest N_d within a budget", test_min_nd},
             {"GPT-2 d12 activation bytes", test_gpt2_activations});
    return sz_test_run();
}
