/* tests/test_bf16_gpu_rule.c — the bf16 compute path's GPU rule (codelets/native_cuda.c), which
 * needs no GPU to check: sz_bf16_compute_decide_cuda on made-up devices (a pre-Ampere GPU, ops
 * without a bf16 CUDA twin, an sm_90 GPU with every twin) and the sentences that say why;
 * sz_native_cuda_missing agrees with itself and names only the engine's codelets; every op the
 * LLaMA-style and GPT-2 models hand bf16 tensors (the SwiGLU included) is in the rule's table with
 * its bf16 CUDA twin and, in a CUDA build, a CUDA function; and without CUDA workers sz_context_bf16_auto is exactly the CPU rule. */
#include <stdio.h>
#include <string.h>
#include "starzero.h"
#include "sz_tasks.h"

static int failures;
#define CHECK(c, ...)                                                  \
    do {                                                               \
        if (!(c)) {                                                    \
            printf("FAILED %s:%d: ", __FILE__, __LINE__);             \
            printf(__VA_ARGS__);                                       \
            printf("\n");                                              \
            failures++;                                                \
        }                                                              \
    } while (0)

int main(int argc, char **argv)
{
    char why[512];
    const char *two[2] = {"layernorm_fwd", "matmul_bwd"};
    /* a V100 (7.0): no bf16 tensor cores, emulated whatever the ops */
    CHECK(sz_bf16_compute_decide_cuda(7, 0, "Tesla V100", 0, NULL, why, sizeof why) == SZ_BF16_COMPUTE_EMULATED,
          "sm_70 gave native");
    CHECK(strstr(why, "Tesla V100") && strstr(why, "7.0") && strstr(why, "no bf16 tensor cores"), "why: %s", why);
    /* an H200 (9.0) with two ops lacking their twin: emulated, naming them */
    CHECK(sz_bf16_compute_decide_cuda(9, 0, "NVIDIA H200", 2, two, why, sizeof why) == SZ_BF16_COMPUTE_EMULATED,
          "missing ops gave native");
    CHECK(strstr(why, "2 op(s)") && strstr(why, "layernorm_fwd, matmul_bwd)"), "why: %s", why);
    /* more than four missing: the first four and an ellipsis */
    const char *six[6] = {"a", "b", "c", "d", "e", "f"};
    sz_bf16_compute_decide_cuda(8, 0, "A100", 6, six, why, sizeof why);
    CHECK(strstr(why, "6 op(s)") && strstr(why, "(a, b, c, d, ...)") && !strstr(why, ", e"), "why: %s", why);
    /* an sm_80 / sm_90 GPU with every twin: native */
    CHECK(sz_bf16_compute_decide_cuda(9, 0, "NVIDIA H200", 0, NULL, why, sizeof why) == SZ_BF16_COMPUTE_NATIVE,
          "sm_90 with every twin gave emulated");
    CHECK(strstr(why, "NVIDIA H200") && strstr(why, "9.0") && strstr(why, "bf16 tensor cores"), "why: %s", why);
    CHECK(sz_bf16_compute_decide_cuda(8, 6, NULL, 0, NULL, NULL, 0) == SZ_BF16_COMPUTE_NATIVE, "sm_86 gave emulated");
    /* the table: the count and the names agree, each name a registered codelet with a CUDA function */
    const char *names[64];
    int n = sz_native_cuda_missing(names, 64), n0 = sz_native_cuda_missing(NULL, 0);
    CHECK(n == n0 && n >= 0 && n <= 64, "missing %d vs %d", n, n0);
    for (int i = 0; i < n && i < 64; i++) {
        int found = 0;
        for (int k = 0; k < sz_codelets_count(); k++) {
            sz_codelet_desc d;
            if (sz_codelet_info(k, &d) == SZ_OK && !strcmp(d.name, names[i]) && d.cuda > 0)
                found = 1;
        }
        CHECK(found, "missing op '%s' is not a codelet with a CUDA function", names[i]);
    }
    /* every codelet the LLaMA-style model hands bf16 tensors on the native path (apps/llama/llama.c)
     * is in the rule's table with its bf16 CUDA twin, and in a CUDA build has its CUDA function (the
     * SwiGLU was an app op without one: it ran on CPU workers, its tensors copied to the host and
     * back); the GPT-2 ones likewise */
    const char *llama_ops[] = {"embedding_fwd", "rmsnorm_fwd", "rmsnorm_bwd", "residual_rmsnorm_fwd",
                               "rmsnorm_residual_bwd", "matmul_fwd", "matmul_bwd", "rope_bwd", "attention_fwd",
                               "attention_bwd", "swiglu_fwd", "swiglu_bwd", "residual_bwd", "softmax_xent_fused"};
    const char *gpt2_ops[] = {"encoder_fwd", "layernorm_fwd", "layernorm_bwd", "residual_layernorm_fwd",
                              "layernorm_residual_bwd", "matmul_gelu_fwd", "gelu_matmul_bwd"};
    for (size_t i = 0; i < sizeof llama_ops / sizeof llama_ops[0] + sizeof gpt2_ops / sizeof gpt2_ops[0]; i++) {
        size_t nl = sizeof llama_ops / sizeof llama_ops[0];
        const char *op = i < nl ? llama_ops[i] : gpt2_ops[i - nl];
        CHECK(sz_native_cuda_listed(op) == 1, "native-path op '%s' not in the GPU rule's table with its bf16 twin "
              "(listed: %d)", op, sz_native_cuda_listed(op));
        int found = 0, cuda = 0;
        for (int k = 0; k < sz_codelets_count(); k++) {
            sz_codelet_desc d;
            if (sz_codelet_info(k, &d) == SZ_OK && !strcmp(d.name, op))
                found = 1, cuda = d.cuda;
        }
        CHECK(found, "native-path op '%s' is not a registered codelet", op);
#ifdef SZ_HAVE_CUDA
        CHECK(cuda > 0, "native-path op '%s' has no CUDA function in this CUDA build", op);
#else
        (void)cuda;
#endif
    }
    CHECK(sz_native_cuda_listed("no_such_op") == -1 && sz_native_cuda_listed(NULL) == -1, "an unknown name listed");
    printf("native path's ops without a bf16 CUDA twin in this build: %d", n);
    for (int i = 0; i < n && i < 64; i++)
        printf("%s%s", i ? ", " : " (", names[i]);
    printf("%s\n", n ? ")" : "");
    /* without CUDA workers: the CPU rule, and its sentence */
    sz_context *ctx = NULL;
    if (sz_context_init(&ctx, NULL, &argc, &argv) != SZ_OK) {
        printf("FAILED: sz_context_init\n");
        return 1;
    }
    sz_runtime_info info;
    CHECK(sz_context_runtime_info(ctx, &info) == SZ_OK, "runtime info");
    if (info.cuda_workers == 0) {
        const char *cw;
        sz_bf16_compute cpu = sz_bf16_compute_auto(&cw);
        CHECK(sz_context_bf16_auto(ctx, why, sizeof why) == cpu && !strcmp(why, cw), "no CUDA: %s vs %s", why, cw);
    } else {
        sz_bf16_compute c = sz_context_bf16_auto(ctx, why, sizeof why);
        printf("CUDA workers: bf16 auto = %s (%s)\n", sz_bf16_compute_name(c), why);
        CHECK(strstr(why, "CUDA workers") != NULL, "why: %s", why);
    }
    sz_context_free(ctx);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
