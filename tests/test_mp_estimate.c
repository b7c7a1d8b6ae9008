/* tests/test_mp_estimate.c — sz-estimate's model parallelism (graph/zero_estimate.h, apps/common/
 * mp_estimate.c, the models' split in apps/common/arch.c and their activation tables): one MP rank's
 * parameters counted by hand for GPT-2 d12 and a small LLaMA-style model, the model-state formulas at
 * that Ψ, the MP traffic per block (the paper's 12·seq·hidden), P_a's checkpoint slices and the
 * paper's P_a example, activations of one MP rank by hand, N_m = 1 equal to the existing estimator,
 * the refusals, and the Table 3 fit (fits, one more layer does not). Pure arithmetic, no runtime. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sz_test.h"
#include "arch.h"
#include "mp_estimate.h"
#include "zero_estimate.h"

static int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-12 * fmax(1.0, fabs(want));
}
#define CHECK_CLOSE(got, want) CU_ASSERT(close_to((got), (want)))

static sz_arch_config model(sz_arch_kind kind, const char *spec, int vocab)
{
    sz_arch_config c;
    char err[256];
    CU_ASSERT_FATAL(sz_arch_config_from_string(&c, kind, spec, vocab, 1024, err, sizeof err) == SZ_OK);
    return c;
}

/* GPT-2 d12 (L 12, C 768, maxT 1024, Vp 50304), Megatron's split:
 *   split: wte Vp·C = 50304·768 = 38,633,472 (vocabulary-parallel, tied head) plus per layer qkvw 3C²,
 *     qkvb 3C, fcw 4C², fcb 4C (column), attprojw C², fcprojw 4C² (row) = 12C² + 7C = 7,083,264,
 *     x 12 = 84,999,168: 123,632,640;
 *   replicated: wpe maxT·C = 786,432, per layer ln1w, ln1b, ln2w, ln2b, attprojb, fcprojb = 6C = 4,608,
 *     x 12 = 55,296, lnfw, lnfb 2C = 1,536: 843,264;
 *   sum 124,475,904 = sz_gpt2_num_params; one of 4 ranks: 30,908,160 + 843,264 = 31,751,424. */
static void test_gpt2_rank_params(void)
{
    sz_arch_config c = model(SZ_ARCH_GPT2, "d12", 50257);
    double split, rep, psi;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(sz_mp_rank_params(&c, 4, &split, &rep, &psi, err, sizeof err), 0);
    CHECK_CLOSE(split, 123632640.0);
    CHECK_CLOSE(rep, 843264.0);
    CHECK_CLOSE(split + rep, (double)sz_arch_num_params(&c));
    CHECK_CLOSE(psi, 31751424.0);
    CHECK_CLOSE(sz_zero_mp_rank_params(split, rep, 4), 31751424.0);
    CHECK_CLOSE(sz_zero_mp_rank_params(split, rep, 1), 124475904.0);
    /* the DESIGN formulas at that Ψ: stage 1, N_d 2, mixed: 4Ψ + 12Ψ/2 = 10Ψ = 317,514,240 bytes;
     * stage 3, N_d 8: 16Ψ/8 = 63,502,848 */
    CHECK_CLOSE(sz_zero_model_state_bytes(1, psi, 2, 1), 317514240.0);
    CHECK_CLOSE(sz_zero_model_state_bytes(3, psi, 8, 1), 63502848.0);
    /* the split tensors by name */
    CU_ASSERT_EQUAL(sz_arch_mp_split(SZ_ARCH_GPT2, "qkvb"), SZ_MP_COLUMN);
    CU_ASSERT_EQUAL(sz_arch_mp_split(SZ_ARCH_GPT2, "attprojw"), SZ_MP_ROW);
    CU_ASSERT_EQUAL(sz_arch_mp_split(SZ_ARCH_GPT2, "attprojb"), SZ_MP_REPLICATED);
    CU_ASSERT_EQUAL(sz_arch_mp_split(SZ_ARCH_GPT2, "wte"), SZ_MP_VOCAB);
    CU_ASSERT_EQUAL(sz_arch_mp_split(SZ_ARCH_GPT2, "wpe"), SZ_MP_REPLICATED);
}

/* The plan's shape of one MP rank (sz_arch_mp_shape): its tensors add up to that rank's Ψ. */
static void test_rank_shape(void)
{
    const struct { sz_arch_kind kind; const char *spec; int vocab, nm; } ms[] = {
        {SZ_ARCH_GPT2, "d12", 50257, 4}, {SZ_ARCH_GPT2, "d2", 256, 2}, {SZ_ARCH_LLAMA, "d2", 512, 2},
        {SZ_ARCH_LLAMA, "d6", 512, 2}};
    for (int k = 0; k < 4; k++) {
        sz_arch_config c = model(ms[k].kind, ms[k].spec, ms[k].vocab);
        sz_zero_config z;
        sz_zero_config_defaults(&z);
        z.precision = SZ_PRECISION_FP32;
        sz_model_shape s;
        char err[256];
        double psi;
        CU_ASSERT_EQUAL_FATAL(sz_mp_rank_params(&c, ms[k].nm, NULL, NULL, &psi, err, sizeof err), 0);
        CU_ASSERT_EQUAL_FATAL(sz_arch_shape(&c, 1, 8, &z, 1, 1, &s, err, sizeof err), SZ_OK);
        sz_arch_mp_shape(c.kind, &s, ms[k].nm);
        double sum = 0;
        for (int u = 0; u < s.nunits; u++)
            for (int i = 0; i < s.units[u].nparams; i++)
                sum += (double)s.units[u].params[i].rows * (double)s.units[u].params[i].cols;
        CHECK_CLOSE(sum, psi);
        sz_model_shape_free(&s);
    }
}

/* LLaMA-style d2 with vocabulary 512: L 2, C 128, F = sz_llama_hidden(128) = ceil((8·128+2)/3 = 342
 * to 32s) = 352, untied wte and lmw.
 *   split: wte, lmw 2·V·C = 131,072; per layer qkvw 3C², attprojw C², gatew, upw, downw 3CF
 *     = 65,536 + 135,168 = 200,704, x 2 = 401,408: 532,480;
 *   replicated: rms1w, rms2w 2C per layer = 512, rmsfw C = 128: 640;
 *   one of 2 ranks: 266,240 + 640 = 266,880. */
static void test_llama_rank_params(void)
{
    sz_arch_config c = model(SZ_ARCH_LLAMA, "d2", 512);
    double split, rep, psi;
    char err[256];
    CU_ASSERT_EQUAL(c.llama.hidden, 352);
    CU_ASSERT_EQUAL_FATAL(sz_mp_rank_params(&c, 2, &split, &rep, &psi, err, sizeof err), 0);
    CHECK_CLOSE(split, 532480.0);
    CHECK_CLOSE(rep, 640.0);
    CHECK_CLOSE(split + rep, (double)sz_arch_num_params(&c));
    CHECK_CLOSE(psi, 266880.0);
}

/* N_m must divide the heads, the MLP width and the (padded) vocabulary; the message names each. */
static void test_refusals(void)
{
    char err[256];
    sz_arch_config g = model(SZ_ARCH_GPT2, "d12", 50257); /* 12 heads, MLP 3072, Vp 50304 = 2^7·3·131 */
    CU_ASSERT_EQUAL(sz_arch_mp_check(&g, 12, err, sizeof err), 0);
    CU_ASSERT_EQUAL(sz_arch_mp_check(&g, 8, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "attention heads (12)"));
    CU_ASSERT_PTR_NULL(strstr(err, "MLP"));
    CU_ASSERT_PTR_NULL(strstr(err, "vocabulary"));
    CU_ASSERT_EQUAL(sz_arch_mp_check(&g, 5, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "attention heads (12), the MLP width (3072), the padded vocabulary (50304)"));
    sz_arch_config l = model(SZ_ARCH_LLAMA, "d2", 50257); /* 4 heads, F 352, V 50257 (odd) */
    CU_ASSERT_EQUAL(sz_arch_mp_check(&l, 2, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "the vocabulary (50257)"));
    CU_ASSERT_PTR_NULL(strstr(err, "heads"));
    sz_arch_config l2 = model(SZ_ARCH_LLAMA, "2,64,2048", 512); /* F = ceil(16386/3 = 5462 to 32s) = 5472 */
    CU_ASSERT_EQUAL(sz_arch_mp_check(&l2, 64, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "the MLP width (5472)"));
    double psi;
    CU_ASSERT_EQUAL(sz_mp_rank_params(&g, 7, NULL, NULL, &psi, err, sizeof err), -1);
    CU_ASSERT_EQUAL(sz_arch_mp_check(&g, 5, NULL, 0), -1); /* no room for the message: still refused */
    CU_ASSERT_EQUAL(sz_arch_mp_check(&g, 4, NULL, 0), 0);
}

/* Per block and step, B·T·C = 4·256·768 = 786,432: checkpointing 12·786,432 = 9,437,184 (the paper's
 * convention), a ring at N_m 4 sends 3/4 of it: 7,077,888; without checkpointing 8·786,432 = 6,291,456;
 * P_a's all-gather 786,432, sent 589,824; nothing at N_m 1. */
static void test_traffic(void)
{
    const double btc = 786432.0;
    CHECK_CLOSE(sz_zero_mp_block_elems(btc, 1, 4), 9437184.0);
    CHECK_CLOSE(sz_zero_mp_block_elems(btc, 0, 4), 6291456.0);
    CHECK_CLOSE(sz_zero_mp_block_elems_sent(btc, 1, 4), 7077888.0);
    CHECK_CLOSE(sz_zero_pa_block_elems(btc, 4), 786432.0);
    CHECK_CLOSE(sz_zero_pa_block_elems_sent(btc, 4), 589824.0);
    CHECK_CLOSE(sz_zero_mp_block_elems(btc, 1, 1), 0.0);
    CHECK_CLOSE(sz_zero_mp_block_elems_sent(btc, 1, 1), 0.0);
    CHECK_CLOSE(sz_zero_pa_block_elems(btc, 1), 0.0);
    /* the paper's ratio: P_a adds 1/12 of MP's traffic, "less than 10%" */
    CU_ASSERT(sz_zero_pa_block_elems(btc, 16) / sz_zero_mp_block_elems(btc, 1, 16) < 0.1);
    CHECK_CLOSE(sz_zero_mp_block_elems(-1.0, 1, 4), -1.0);
    CHECK_CLOSE(sz_zero_mp_block_elems(btc, 1, 0), -1.0);
}

/* The paper's P_a example: 125 layers, seq 1024, hidden 8192, MP 16, fp16: 125·1024·8192·2 =
 * 2,097,152,000 bytes a sequence; ~33 GB is the batch 16: 33,554,432,000 bytes; with P_a /16 =
 * 2,097,152,000. fp32 (sz-train's checkpoints) reaches the same bytes at batch 8. */
static void test_paper_pa(void)
{
    double host = -1;
    const double btc = 16.0 * 1024 * 8192;
    CHECK_CLOSE(sz_zero_mp_checkpoint_bytes(125, btc, 2, 16, 0, 0, &host), 33554432000.0);
    CHECK_CLOSE(host, 0.0);
    CHECK_CLOSE(sz_zero_mp_checkpoint_bytes(125, btc, 2, 16, 1, 0, NULL), 2097152000.0);
    CHECK_CLOSE(sz_zero_mp_checkpoint_bytes(125, btc, 2, 16, 1, 1, &host), 0.0);
    CHECK_CLOSE(host, 2097152000.0);
    CHECK_CLOSE(sz_zero_mp_checkpoint_bytes(125, btc, 2, 16, 0, 1, NULL), -1.0); /* P_a+cpu needs P_a */
    CHECK_CLOSE(sz_zero_mp_checkpoint_bytes(2, 10.0, 4, 4, 1, 0, NULL), 2 * 3 * 4.0); /* ceil(10/4) = 3 */
    sz_mp_pa_example e;
    CU_ASSERT_EQUAL_FATAL(sz_mp_pa_example_of(125, 8192, 1024, 16, 2, 33e9, &e), 0);
    CU_ASSERT_EQUAL(e.batch, 16);
    CHECK_CLOSE(e.per_sample, 2097152000.0);
    CHECK_CLOSE(e.without_pa, 33554432000.0);
    CHECK_CLOSE(e.with_pa, 2097152000.0);
    CU_ASSERT_EQUAL_FATAL(sz_mp_pa_example_of(125, 8192, 1024, 16, 4, 33e9, &e), 0);
    CU_ASSERT_EQUAL(e.batch, 8);
    CHECK_CLOSE(e.without_pa, 33554432000.0);
}

/* One MP rank's forward tensors, GPT-2 d12, B 4, T 256 (N 1,024, NC 786,432), N_m 4, checkpointing
 * with P_a (fp32):
 *   block: replicated ln1, attproj, residual2, ln2, fcproj, residual3 = 6NC, 4 statistics of N = 4N;
 *     split qkv 3NC, atty NC, fch 4NC, fch_gelu 4NC = 12NC / 4 = 3NC, attention statistics
 *     2·B·H·T / 4 = 24,576 / 4 = 6,144: 9NC + 4N + 6,144 = 7,088,128;
 *   head: lnf NC, its statistics 2N, losses N, logits N·Vp / 4 = 12,877,824: 13,667,328;
 *   checkpoints: 12 slices of NC/4 = 196,608 plus one gathered input NC: 3,145,728;
 *   23,901,184 floats = 95,604,736 bytes. */
static void test_gpt2_activations(void)
{
    sz_arch_config c = model(SZ_ARCH_GPT2, "d12", 50257);
    CHECK_CLOSE(sz_arch_activation_bytes_mp(&c, 4, 256, 1, 0, 4, 1), 95604736.0);
    /* without P_a the 12 inputs whole and no gathered one: 12 NC + 7,088,128 + 13,667,328 */
    CHECK_CLOSE(sz_arch_activation_bytes_mp(&c, 4, 256, 1, 0, 4, 0), (12 * 786432.0 + 7088128 + 13667328) * 4);
    /* P_a+cpu: 3 slices on the device and the gathered input */
    CHECK_CLOSE(sz_arch_activation_bytes_mp(&c, 4, 256, 1, 1, 4, 1), (3 * 196608.0 + 786432 + 7088128 + 13667328) * 4);
    CHECK_CLOSE(sz_arch_activation_bytes_mp(&c, 4, 256, 0, 0, 4, 1), -1.0); /* P_a needs checkpointing */
    /* N_m = 1 (with or without P_a: nothing to partition) is the estimator's existing figure */
    const int ck[3][2] = {{0, 0}, {1, 0}, {1, 1}};
    for (int k = 0; k < 2; k++) {
        sz_arch_config m = k ? model(SZ_ARCH_LLAMA, "d6", 50257) : c;
        for (int i = 0; i < 3; i++) {
            double want = sz_arch_activation_bytes(&m, 2, 128, ck[i][0], ck[i][1]);
            CHECK_CLOSE(sz_arch_activation_bytes_mp(&m, 2, 128, ck[i][0], ck[i][1], 1, 0), want);
            if (ck[i][0])
                CHECK_CLOSE(sz_arch_activation_bytes_mp(&m, 2, 128, ck[i][0], ck[i][1], 1, 1), want);
        }
    }
}

/* LLaMA d2, V 512, B 1, T 64 (N 64, NC 8,192, NF 64·352 = 22,528), N_m 2, checkpointing with P_a:
 *   block: replicated rms1, attproj, res2, rms2, down = 5NC, rstd1, rstd2 = 2N; split qkv 3NC, atty NC,
 *     gate, up, h 3NF, statistics 2·B·H·T = 512, halved: (4NC + 3NF + 512) / 2 = 50,432:
 *     40,960 + 128 + 50,432 = 91,520;
 *   head: rmsf NC, rstdf N, losses N, logits N·V / 2 = 16,384: 24,704;
 *   io: the last block's output NC = 8,192; checkpoints 2 slices of 4,096 plus one gathered 8,192;
 *   8,192 + 8,192 + 8,192 + 91,520 + 24,704 = 140,800 floats = 563,200 bytes. */
static void test_llama_activations(void)
{
    sz_arch_config c = model(SZ_ARCH_LLAMA, "d2", 512);
    CHECK_CLOSE(sz_arch_activation_bytes_mp(&c, 1, 64, 1, 0, 2, 1), 563200.0);
}

/* Table 3: the fit is the largest layer count that fits (one more does not), the configurations
 * order as the paper's (P_a and P_os+g each let a larger model fit, P_a+cpu larger still), and
 * one case by hand. */
static void test_table3(void)
{
    sz_mp_fit_setup s = {.heads = 64, .channels = 8192, .vocab = 50257, .seq = 1024, .batch = 16, .nm = 16,
                         .nd = 25, .elem_bytes = 2, .budget = 34359738368.0, .bucket_bytes = 33554432,
                         .max_layers = 4096};
    int L[5];
    for (int i = 0; i < 5; i++) {
        sz_mp_fit f, g;
        L[i] = sz_mp_fit_largest(&s, &sz_mp_table3[i], &f);
        CU_ASSERT_FATAL(L[i] > 0);
        CU_ASSERT(f.total <= s.budget);
        CU_ASSERT_EQUAL_FATAL(sz_mp_fit_memory(&s, &sz_mp_table3[i], L[i] + 1, &g), 0);
        CU_ASSERT(g.total > s.budget);
        CHECK_CLOSE(f.total, f.states + f.activations + f.buffer);
    }
    CU_ASSERT(L[1] > L[0] && L[3] > L[2] && L[2] > L[0] && L[3] > L[1] && L[4] > L[3]);
    /* C1 at 64 layers by hand (C 8192, Vp 50304, maxT 1024): Ψ = Vp·C + maxT·C + L(12C² + 13C) + 2C =
     * 412,090,368 + 8,388,608 + 64·805,412,864 + 16,384 = 51,966,918,656; one MP rank: split
     * (Vp·C + L(12C² + 7C)) / 16 = (412,090,368 + 64·805,363,712) / 16 = 51,955,367,936 / 16 =
     * 3,247,210,496, plus replicated maxT·C + 6CL + 2C = 11,550,720: 3,258,761,216; stage 1 at N_d 25:
     * 4Ψ + 12Ψ/25 = 4.48Ψ = 14,599,250,247.68 bytes; checkpoints 64·16·1024·8192·2 = 17,179,869,184;
     * C_B: 4·25·floor(33,554,432 / 100) = 33,554,400. */
    sz_mp_fit f;
    CU_ASSERT_EQUAL_FATAL(sz_mp_fit_memory(&s, &sz_mp_table3[0], 64, &f), 0);
    CHECK_CLOSE(f.psi, 51966918656.0);
    CHECK_CLOSE(f.psi_rank, 3258761216.0);
    CHECK_CLOSE(f.states, 14599250247.68);
    CHECK_CLOSE(f.checkpoints, 17179869184.0);
    CHECK_CLOSE(f.host, 0.0);
    CHECK_CLOSE(f.buffer, 33554400.0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("mp_estimate", {"GPT-2 d12: one MP rank's parameters", test_gpt2_rank_params},
             {"LLaMA d2: one MP rank's parameters", test_llama_rank_params},
             {"the plan's shape of one MP rank", test_rank_shape},
             {"N_m must divide heads, MLP, vocabulary", test_refusals},
             {"MP traffic per block (12 seq hidden)", test_traffic},
             {"P_a checkpoints and the paper's example", test_paper_pa},
             {"GPT-2 activations of one MP rank", test_gpt2_activations},
             {"LLaMA activations of one MP rank", test_llama_activations},
             {"Table 3 fit", test_table3});
    return sz_test_run();
}
