/* tests/test_estimate.c — the ZeRO estimator (graph/zero_estimate.c, and GPT-2's parts in
 * apps/gpt2/gpt2_estimate.c): the paper's check values,
 * the fp32 table, breakdowns summing to totals, communication volumes, shard padding, fitting a
 * budget, GPT-2 d12 activation bytes against a count done by hand, and ZeRO-R: offloaded
 * checkpoints (P_a+cpu) and the communication buffer of constant-size buckets (C_B) against hand
 * counts and against what sz-train measured. Pure C, no runtime:
 *   gcc -O2 -Wall -Wextra -Iinclude -Iapps/gpt2 -Igraph tests/test_estimate.c graph/zero_estimate.c \
 *       apps/gpt2/gpt2_estimate.c apps/gpt2/gpt2_spec.c graph/status.c -lcunit -lm
 * The last test runs the sz-estimate binary when it finds it ($SZ_ESTIMATE, or ../sz-estimate
 * from CTest's working directory build/tests). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sz_test.h"
#include "starzero_gpt2.h"

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

/* Other optimizers (sz_zero_model_state_bytes_opt): K = 4 + 4S mixed, 4S of optimizer state at
 * fp32; S = 2 is AdamW's table above; SGD with momentum S = 1, without S = 0 (docs/ARCHITECTURE.md). */
static void test_optimizer_tables(void)
{
    const double psi = 1e6;
    for (int i = 0; i < N_NDS; i++) {
        double n = k_nds[i];
        /* SGD + momentum, mixed (K = 8) and fp32 */
        CHECK_CLOSE(sz_zero_model_state_bytes_opt(0, psi, k_nds[i], 1, 1), 12 * psi);
        CHECK_CLOSE(sz_zero_model_state_bytes_opt(1, psi, k_nds[i], 1, 1), 4 * psi + 8 * psi / n);
        CHECK_CLOSE(sz_zero_model_state_bytes_opt(2, psi, k_nds[i], 1, 1), 2 * psi + 10 * psi / n);
        CHECK_CLOSE(sz_zero_model_state_bytes_opt(3, psi, k_nds[i], 1, 1), 12 * psi / n);
        CHECK_CLOSE(sz_zero_model_state_bytes_opt(1, psi, k_nds[i], 0, 1), 8 * psi + 4 * psi / n);
        CHECK_CLOSE(sz_zero_model_state_bytes_opt(2, psi, k_nds[i], 0, 1), 4 * psi + 8 * psi / n);
        /* plain SGD: the master alone (mixed), nothing at fp32 */
        CHECK_CLOSE(sz_zero_model_state_bytes_opt(1, psi, k_nds[i], 1, 0), 4 * psi + 4 * psi / n);
        CHECK_CLOSE(sz_zero_model_state_bytes_opt(2, psi, k_nds[i], 1, 0), 2 * psi + 6 * psi / n);
        CHECK_CLOSE(sz_zero_model_state_bytes_opt(1, psi, k_nds[i], 0, 0), 8 * psi);
        CHECK_CLOSE(sz_zero_model_state_bytes_opt(3, psi, k_nds[i], 0, 0), 8 * psi / n);
        for (int s = 0; s < 4; s++) /* AdamW's are S = 2 */
            CHECK_CLOSE(sz_zero_model_state_bytes_opt(s, psi, k_nds[i], 1, 2), sz_zero_model_state_bytes(s, psi, k_nds[i], 1));
        sz_zero_breakdown b;
        CU_ASSERT_EQUAL(sz_zero_state_breakdown_opt(1, psi, k_nds[i], 1, 1, &b), SZ_OK);
        CHECK_CLOSE(b.adam_m, 4 * psi / n); /* the momentum buffer */
        CHECK_CLOSE(b.adam_v, 0);
    }
    CU_ASSERT_EQUAL(sz_optimizer_states(SZ_OPTIMIZER_ADAMW, 0), 2);
    CU_ASSERT_EQUAL(sz_optimizer_states(SZ_OPTIMIZER_SGD, 0.9f), 1);
    CU_ASSERT_EQUAL(sz_optimizer_states(SZ_OPTIMIZER_SGD, 0), 0);
    CU_ASSERT_EQUAL(sz_optimizer_states(SZ_OPTIMIZER_SGD, 1.0f), -1);
    CU_ASSERT(sz_zero_model_state_bytes_opt(1, psi, 4, 1, 3) < 0);
    sz_zero_breakdown b;
    CU_ASSERT_EQUAL(sz_zero_state_breakdown_opt(1, psi, 4, 1, -1, &b), SZ_ERR_INVALID);
    /* the budget search with the optimizer's state: 4Ψ + 8Ψ/N <= 6Ψ from N = 4 */
    CU_ASSERT_EQUAL(sz_zero_min_nd_opt(1, psi, 1, 1, 6 * psi, 0, 1024), 4);
    sz_optimizer o;
    CU_ASSERT(sz_optimizer_parse("SGD", &o) == SZ_OK && o == SZ_OPTIMIZER_SGD);
    CU_ASSERT(sz_optimizer_parse("adam", &o) == SZ_ERR_INVALID);
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
    CU_ASSERT_EQUAL(sz_zero_padded(0, 5), 5); /* a unit without parameters: one element per rank, */
    CU_ASSERT_EQUAL(sz_zero_shard(0, 5), 1);  /* as the engine and the plan lay it out */
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
     *   per layer: 18 N C = 3,538,944; 4 N = 1,024; attention's statistics 2 B NH T = 6,144
     *     -> 3,546,112 floats
     *   x 12 layers                                                        = 42,553,344
     *   encoded + lnf: 2 N C = 393,216; lnf_mean, lnf_rstd, losses: 3 N = 768
     *   logits: N Vp = 12,877,824 (no probs: the fused softmax-cross-entropy overwrites the logits
     *   with their gradient)
     *   total = 55,825,152 floats = 223,300,608 bytes (llm.c's num_activations, 73,347,840, has
     *   preatt and att, 2 B NH T^2 = 393,216 per layer, where we keep the statistics, and probs) */
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes(&c, 4, 64), 223300608.0);
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes(&c, 4, 64) / 4 + 12 * (393216.0 - 6144.0) + 256.0 * 50304, 73347840.0);
    /* checkpointed: 12 block inputs 12 N C = 2,359,296; one block 3,546,112;
     *   head lnf + stats + losses + logits: N C + 3 N + N Vp = 13,075,200
     *   total = 18,980,608 floats = 75,922,432 bytes */
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_ckpt(&c, 4, 64), 75922432.0);
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

/* ---- ZeRO-R: offloaded checkpoints (P_a+cpu) ---------------------------------------------- */

static sz_gpt2_config gpt2(const char *spec, int vocab)
{
    sz_gpt2_config c = {0};
    char err[256];
    CU_ASSERT_EQUAL(sz_gpt2_config_from_string(&c, spec, vocab, 1024, err, sizeof err), SZ_OK);
    return c;
}

static void test_offload_hand(void)
{
    /* d6 (L = 6, C = 384, NH = 6), V = Vp = 256, B = 2, T = 64: N = 128, N·C = 49,152 floats, so one
     * block checkpoint is 196,608 bytes.
     *   host pool: all 6 checkpoints                         = 1,179,648
     *   on the device at once: 3 (own, fetched ahead, rewritten) = 589,824
     *   checkpointed activations: 6 NC + (18 NC + 4 N + 2 B NH T) + NC + 3 N + N Vp
     *     = 294,912 + (884,736 + 512 + 1,536) + 49,152 + 384 + 32,768 = 1,264,000 floats = 5,056,000
     *   device pool with offload: 5,056,000 - 1,179,648 + 589,824 = 4,466,176 */
    sz_gpt2_config c = gpt2("d6", 256);
    CU_ASSERT_EQUAL(sz_gpt2_checkpoint_host_bytes(&c, 2, 64), 1179648.0);
    CU_ASSERT_EQUAL(sz_gpt2_checkpoint_device_bytes(&c, 2, 64), 589824.0);
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_ckpt(&c, 2, 64), 5056000.0);
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_offload(&c, 2, 64), 4466176.0);
    /* offload lowers the device pool by (L - 3) checkpoints */
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_ckpt(&c, 2, 64) - sz_gpt2_activation_bytes_offload(&c, 2, 64),
                    3 * 196608.0);
    /* d2 (L = 2, C = 128), B = 2, T = 64: N·C = 16,384 floats = 65,536 bytes per checkpoint; both fit on
     * the device at once (there is no block l-1 and l+1 around a block), so nothing is saved there:
     * 1,515,008 = (2 NC + 18 NC + 4 N + 2 B NH T + NC + 3 N + N Vp) x 4 either way */
    sz_gpt2_config d2 = gpt2("d2", 256);
    CU_ASSERT_EQUAL(sz_gpt2_checkpoint_host_bytes(&d2, 2, 64), 131072.0);
    CU_ASSERT_EQUAL(sz_gpt2_checkpoint_device_bytes(&d2, 2, 64), 131072.0);
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_ckpt(&d2, 2, 64), 1515008.0);
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_offload(&d2, 2, 64), 1515008.0);
    /* one layer: its checkpoint is on the device whenever it is needed */
    sz_gpt2_config one = gpt2("1,4,64", 256);
    CU_ASSERT_EQUAL(sz_gpt2_checkpoint_device_bytes(&one, 2, 16), sz_gpt2_checkpoint_host_bytes(&one, 2, 16));
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_offload(&one, 2, 16), sz_gpt2_activation_bytes_ckpt(&one, 2, 16));
    /* the setting switch, and its refusal: offload needs checkpointing (as sz_model_set_zero) */
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_device(&c, 2, 64, 0, 0), sz_gpt2_activation_bytes(&c, 2, 64));
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_device(&c, 2, 64, 1, 0), 5056000.0);
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_device(&c, 2, 64, 1, 1), 4466176.0);
    CU_ASSERT(sz_gpt2_activation_bytes_device(&c, 2, 64, 0, 1) < 0);
    /* bad arguments */
    CU_ASSERT(sz_gpt2_checkpoint_host_bytes(NULL, 2, 64) < 0);
    CU_ASSERT(sz_gpt2_checkpoint_device_bytes(&c, 0, 64) < 0);
    CU_ASSERT(sz_gpt2_activation_bytes_offload(&c, 2, 1025) < 0);
}

static void test_offload_measured(void)
{
    /* sz-train --config d6 --vocab 256 --batch 2 --seq 64 --checkpoint [--offload-checkpoints]
     * --bucket-bytes 1M --steps 1 --json, one rank, measured: "checkpoints on device" 589,824,
     * "host pool (checkpoints)" 1,179,648, device_peak_bytes 188,846,592 -> 188,256,768 (589,824
     * less). The d2 run: 131,072 and 131,072, device peak 12,382,720 either way. Bytes, exact. (The
     * peaks were measured while attention still saved its T x T tensors; the differences hold.) */
    sz_gpt2_config d6 = gpt2("d6", 256), d2 = gpt2("d2", 256);
    CU_ASSERT_EQUAL(sz_gpt2_checkpoint_device_bytes(&d6, 2, 64), 589824.0);
    CU_ASSERT_EQUAL(sz_gpt2_checkpoint_host_bytes(&d6, 2, 64), 1179648.0);
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_ckpt(&d6, 2, 64) - sz_gpt2_activation_bytes_offload(&d6, 2, 64),
                    188846592.0 - 188256768.0);
    CU_ASSERT_EQUAL(sz_gpt2_checkpoint_device_bytes(&d2, 2, 64), 131072.0);
    CU_ASSERT_EQUAL(sz_gpt2_checkpoint_host_bytes(&d2, 2, 64), 131072.0);
    CU_ASSERT_EQUAL(sz_gpt2_activation_bytes_ckpt(&d2, 2, 64), sz_gpt2_activation_bytes_offload(&d2, 2, 64));
    /* docs/BENCHMARKS.md (d12, --vocab 256, B = 4, T = 256): device-pool peak 1590.6 -> 1562.3 MB, 37.7 MB in the
     * host pool, at most 9.4 MB of it on the device; equal to the prediction within the 0.05 MB the
     * figures are rounded to (the prediction: 28,311,552, 37,748,736 and 9,437,184 bytes) */
    sz_gpt2_config d12 = gpt2("d12", 256);
    double saved = sz_gpt2_activation_bytes_ckpt(&d12, 4, 256) - sz_gpt2_activation_bytes_offload(&d12, 4, 256);
    CU_ASSERT_EQUAL(saved, 28311552.0);
    CU_ASSERT_EQUAL(sz_gpt2_checkpoint_host_bytes(&d12, 4, 256), 37748736.0);
    CU_ASSERT_EQUAL(sz_gpt2_checkpoint_device_bytes(&d12, 4, 256), 9437184.0);
    CU_ASSERT(fabs(saved / 1e6 - (1590.6 - 1562.3)) <= 0.1); /* two roundings */
    CU_ASSERT(fabs(sz_gpt2_checkpoint_host_bytes(&d12, 4, 256) / 1e6 - 37.7) <= 0.05);
    CU_ASSERT(fabs(sz_gpt2_checkpoint_device_bytes(&d12, 4, 256) / 1e6 - 9.4) <= 0.05);
}

/* ---- ZeRO-R: communication buckets (C_B) ------------------------------------------------------ */

static void test_comm_buffer(void)
{
    /* one rank exchanges nothing: no buffer */
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(1000000, 1, -1), 0);
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(0, 1, 7087872), 0);
    /* 1M = 1e6 bytes: N_d = 2 -> 125,000 elements per rank and round, 2 x 125,000 x 4 = 1,000,000;
     * N_d = 3 -> floor(1e6 / 12) = 83,333 -> 999,996; N_d = 64 -> 3,906 -> 999,936 */
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(1000000, 2, -1), 1000000);
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(1000000, 3, -1), 999996);
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(1000000, 64, -1), 999936);
    /* 0 is the default, 32 MiB, as in sz_zero_config */
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(0, 2, -1), 33554432);
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(SZ_DEFAULT_BUCKET_BYTES, 4, -1), 33554432);
    /* never under one element per rank and round */
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(1, 2, -1), 8);
    /* never more than the largest unit's shard: 10 elements over 3 ranks pad to 12, 4 each */
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(1000000, 3, 10), 3 * 4 * 4);
    /* invalid */
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(-1, 2, -1), -1);
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(1000000, 0, -1), -1);
}

static void test_comm_buffer_gpt2(void)
{
    /* the largest unit: d2 with V = 256, maxT = 1024 is a block (12 C² + 13 C = 198,272 > the
     * embedding's (256 + 1024) 128 = 163,840); with V = 50257 (Vp = 50304) the embedding,
     * (50304 + 1024) 128 = 6,569,984; d12 with V = 50257: (50304 + 1024) 768 = 39,419,904; with
     * V = 256 a block, 12 768² + 13 768 = 7,087,872 */
    sz_gpt2_config d2s = gpt2("d2", 256), d2 = gpt2("d2", 50257), d12 = gpt2("d12", 50257), d12s = gpt2("d12", 256);
    CU_ASSERT_EQUAL(sz_gpt2_largest_unit_numel(&d2s), 198272);
    CU_ASSERT_EQUAL(sz_gpt2_largest_unit_numel(&d2), 6569984);
    CU_ASSERT_EQUAL(sz_gpt2_largest_unit_numel(&d12), 39419904);
    CU_ASSERT_EQUAL(sz_gpt2_largest_unit_numel(&d12s), 7087872);
    CU_ASSERT_EQUAL(sz_gpt2_largest_unit_numel(NULL), -1);
    /* independent of the model's size: 1M buckets give the same buffer for d2 and d12 at every
     * N_d, and the same as with no model at all */
    static const int nds[] = {2, 3, 4, 8, 64};
    for (int i = 0; i < 5; i++) {
        int64_t a = sz_zero_comm_buffer_bytes(1000000, nds[i], sz_gpt2_largest_unit_numel(&d2));
        int64_t b = sz_zero_comm_buffer_bytes(1000000, nds[i], sz_gpt2_largest_unit_numel(&d12));
        CU_ASSERT_EQUAL(a, b);
        CU_ASSERT_EQUAL(a, sz_zero_comm_buffer_bytes(1000000, nds[i], -1));
        CU_ASSERT(a <= 1000000 && a > 1000000 - 4 * nds[i]);
    }
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(1000000, 2, sz_gpt2_largest_unit_numel(&d12)), 1000000);
    /* the default 32 MiB: d12 (V = 50257) fills it; d2 is capped by its embedding's shard:
     * 2 x 3,284,992 x 4 = 26,279,936; a byte-level d2 by a block's: 2 x 99,136 x 4 = 793,088, which
     * caps 1M buckets too; d12 with V = 256 by a block's: 2 x 3,543,936 x 4 = 28,351,488 */
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(0, 2, sz_gpt2_largest_unit_numel(&d12)), 33554432);
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(0, 2, sz_gpt2_largest_unit_numel(&d2)), 26279936);
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(0, 2, sz_gpt2_largest_unit_numel(&d2s)), 793088);
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(1000000, 2, sz_gpt2_largest_unit_numel(&d2s)), 793088);
    CU_ASSERT_EQUAL(sz_zero_comm_buffer_bytes(0, 2, sz_gpt2_largest_unit_numel(&d12s)), 28351488);
}

/* ---- the command line ---------------------------------------------------------------------- */

/* The sz-estimate binary: $SZ_ESTIMATE, or ../sz-estimate (CTest runs this from build/tests). */
static const char *estimate_bin(void)
{
    const char *env = getenv("SZ_ESTIMATE");
    if (env && access(env, X_OK) == 0)
        return env;
    return access("../sz-estimate", X_OK) == 0 ? "../sz-estimate" : NULL;
}

/* Runs sz-estimate with `args` (stderr too) into out; returns its exit status, -1 if it did not run. */
static int run_estimate(const char *bin, const char *args, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The number after "key": in cJSON's output (the index-th element when it is an array); NAN if absent. */
static double json_number(const char *text, const char *key, int index)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(text, k);
    if (!p)
        return NAN;
    p += strlen(k);
    p += strspn(p, " \t[");
    for (int i = 0; i < index; i++) {
        p = strchr(p, ',');
        if (!p)
            return NAN;
        p += strspn(p, ", \t");
    }
    return strtod(p, NULL);
}

static void test_cli(void)
{
    const char *bin = estimate_bin();
    if (!bin) {
        printf("(sz-estimate not found: command-line checks skipped) ");
        return;
    }
    static char out[1 << 16];
    /* the refusal: offload without checkpointing, exit status 2 and the reason */
    CU_ASSERT_EQUAL(run_estimate(bin, "--model d2 --offload-checkpoints", out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--offload-checkpoints needs --ckpt"));
    CU_ASSERT_EQUAL(run_estimate(bin, "--params 1e9 --ckpt --offload-checkpoints", out, sizeof out), 2);
    CU_ASSERT_EQUAL(run_estimate(bin, "--params 1e9 --bucket-bytes 1Gb", out, sizeof out), 2);
    /* the new JSON keys, with the numbers of the tests above */
    CU_ASSERT_EQUAL_FATAL(run_estimate(bin, "--model d6 --vocab 256 --batch 2 --seq 64 --nd 1,2 --checkpoint "
                                            "--offload-checkpoints --bucket-bytes 1M --json", out, sizeof out), 0);
    CU_ASSERT_EQUAL(json_number(out, "activation_bytes_ckpt", 0), 5056000.0);
    CU_ASSERT_EQUAL(json_number(out, "activation_bytes_offload", 0), 4466176.0);
    CU_ASSERT_EQUAL(json_number(out, "checkpoints_on_device_bytes", 0), 589824.0);
    CU_ASSERT_EQUAL(json_number(out, "host_pool_bytes", 0), 1179648.0);
    CU_ASSERT_EQUAL(json_number(out, "bucket_bytes", 0), 1000000.0);
    CU_ASSERT_EQUAL(json_number(out, "largest_unit_elems", 0), 1774464.0);
    CU_ASSERT_EQUAL(json_number(out, "comm_buffer_bytes", 0), 0.0);
    CU_ASSERT_EQUAL(json_number(out, "comm_buffer_bytes", 1), 1000000.0);
    /* without the option the offload keys are absent and the default bucket is reported */
    /* --plan: the model's units are needed, one N_d, a rank below it */
    CU_ASSERT_EQUAL(run_estimate(bin, "--params 1e9 --plan", out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--plan needs --model"));
    CU_ASSERT_EQUAL(run_estimate(bin, "--model d2 --plan --nd 1,2", out, sizeof out), 2);
    CU_ASSERT_EQUAL(run_estimate(bin, "--model d2 --plan --nd 2 --rank 2", out, sizeof out), 2);
    CU_ASSERT_EQUAL(run_estimate(bin, "--model d2 --plan --stage 4", out, sizeof out), 2);
    /* d2, vocab 256, B 4 x T 32, stage 3, 2 ranks, fp32, clipping: what sz-train measures
     * (tests/sched_cli.sh compares the two on every run) */
    CU_ASSERT_EQUAL_FATAL(run_estimate(bin, "--model d2 --vocab 256 --max-seq 64 --batch 4 --seq 32 --nd 2 --stage 3 "
                                            "--precision fp32 --clip --plan --json", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"kind\":\"reduce_scatter\""));
    /* the engine's bytes (262,144 below the unfused softmax-cross-entropy's probs + dlogits, 2 N Vp x 4,
     * and another 262,144 below since gelu_matmul_bwd keeps no dfch_gelu, 4 N C x 4); the host buffers
     * beside them (the matmul kernels' working memory, as oneDNN sizes it on this CPU, and the batch's
     * inputs and targets) come on top */
    CU_ASSERT_EQUAL(json_number(out, "device_peak_bytes", 0), 9795584.0);
    CU_ASSERT(json_number(out, "host_buffers", 0) >= 2.0 * 4 * 32 * 4);
    CU_ASSERT_EQUAL(json_number(out, "peak_bytes", 0), 9795584.0 + json_number(out, "host_buffers", 0));
    CU_ASSERT_EQUAL(json_number(out, "model_state_bytes", 0), 3502080.0);
    CU_ASSERT_EQUAL_FATAL(run_estimate(bin, "--model d12 --nd 2 --json", out, sizeof out), 0);
    CU_ASSERT_PTR_NULL(strstr(out, "host_pool_bytes"));
    CU_ASSERT_EQUAL(json_number(out, "bucket_bytes", 0), 33554432.0);
    CU_ASSERT_EQUAL(json_number(out, "comm_buffer_bytes", 0), 33554432.0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("zero_estimate",
             {"paper check values (7.5B, N=64, mixed)", test_paper_values},
             {"mixed-precision table", test_mixed_table},
             {"fp32 table", test_fp32_table},
             {"SGD tables (other optimizers' state)", test_optimizer_tables},
             {"invalid arguments", test_invalid},
             {"breakdown sums to the total", test_breakdown},
             {"communication volume", test_comm},
             {"shard padding", test_shard},
             {"smallest N_d within a budget", test_min_nd},
             {"GPT-2 d12 activation bytes", test_gpt2_activations},
             {"offloaded checkpoints: hand counts", test_offload_hand},
             {"offloaded checkpoints: against sz-train's measurements", test_offload_measured},
             {"communication buffer (C_B)", test_comm_buffer},
             {"communication buffer of GPT-2 models", test_comm_buffer_gpt2},
             {"sz-estimate: refusal and JSON keys", test_cli});
    return sz_test_run();
}
