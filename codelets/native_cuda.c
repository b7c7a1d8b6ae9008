/* codelets/native_cuda.c — the native bf16 compute path on CUDA workers: which codelets the native
 * path hands bf16 tensors to and whether their CUDA implementation takes them (the table below), and
 * the rule that picks the path on a rank with CUDA workers (include/starzero.h,
 * sz_bf16_compute_decide_cuda, sz_context_bf16_auto): native when every such codelet's CUDA function
 * takes bf16 and every CUDA worker's GPU has bf16 tensor cores (compute capability 8.0 or later,
 * sz_cuda_device_peak), else emulated, with the reason. A rule on the device's properties, never a
 * timed probe, so every rank of a job on the same kind of node decides alike (sz_model_finalize
 * still checks that they agree). Every op the bundled models (GPT-2, LLaMA) run on the native path is
 * in the table; in a CUDA build one whose codelet has no CUDA function counts as missing too (it
 * would run on a CPU worker, its tensors copied to the host and back every step). An app's own ops
 * (through starzero_starpu.h) are not known here: a CPU-only one runs on CPU workers, whose kernels
 * take bf16.
 *
 * Status: the CUDA twins were written and compiled without a GPU; tests/test_cuda_kernels.c checks
 * each against its CPU twin and has not yet run on a GPU (README, "Running on GPUs"). */
#include <stdio.h>
#include <string.h>
#include "sz_tasks.h"
#include "starzero_starpu.h"
#include "sz_cuda.h"

/* Every codelet with a CUDA function that the native path (apps/gpt2/gpt2.c, apps/llama/llama.c:
 * the activations the matmuls read, their gradients, the logits, the bf16 parameters) gives bf16
 * tensors, and 1 where that CUDA function takes them (its bf16 twin exists, with its case in
 * tests/test_cuda_kernels.c). The generic ops (GELU, SiLU, mul, softmax_xent) are listed too: a
 * model may call them with bf16 tensors as their CPU kernels allow. Conversions, zeroing, sumsq, the
 * optimizers and the collectives read the tensors' dtypes on CUDA already. */
static const struct sz_native_cuda_op {
    const struct starpu_codelet *cl;
    int cuda_bf16;
} sz_native_cuda_ops[] = {
    /* matmul's types (cuda/matmul.cu: sz_cuda_matmul_*_any), the fused matmul + GELU pair, the norms
     * and their residual fusions (cuda/layernorm.cu: the sz_cuda_*_mx entry points), the lookups from
     * bf16 tables (cuda/encoder.cu) */
    {&sz_cl_matmul_fwd, 1},
    {&sz_cl_matmul_bwd, 1},
    {&sz_cl_matmul_gelu_fwd, 1},
    {&sz_cl_gelu_matmul_bwd, 1},
    {&sz_cl_layernorm_fwd, 1},
    {&sz_cl_layernorm_bwd, 1},
    {&sz_cl_residual_layernorm_fwd, 1},
    {&sz_cl_layernorm_residual_bwd, 1},
    {&sz_cl_rmsnorm_fwd, 1},
    {&sz_cl_rmsnorm_bwd, 1},
    {&sz_cl_residual_rmsnorm_fwd, 1},
    {&sz_cl_rmsnorm_residual_bwd, 1},
    {&sz_cl_encoder_fwd, 1},
    {&sz_cl_embedding_fwd, 1},
    /* attention, the losses, the elementwise ops, RoPE (cuda/attention.cu, softmax_xent.cu,
     * elementwise.cu, rope.cu: the sz_cuda_*_mx entry points) */
    {&sz_cl_attention_fwd, 1},
    {&sz_cl_attention_bwd, 1},
    {&sz_cl_softmax_xent_fused, 1},
    {&sz_cl_softmax_xent_bwd, 1},
    {&sz_cl_gelu_fwd, 1},
    {&sz_cl_gelu_bwd, 1},
    {&sz_cl_silu_fwd, 1},
    {&sz_cl_silu_bwd, 1},
    {&sz_cl_mul_fwd, 1},
    {&sz_cl_mul_bwd, 1},
    {&sz_cl_swiglu_fwd, 1},
    {&sz_cl_swiglu_bwd, 1},
    {&sz_cl_residual_bwd, 1},
    {&sz_cl_rope_bwd, 1},
};

int sz_native_cuda_missing(const char **names, int max)
{
    int n = 0;
    for (size_t i = 0; i < sizeof sz_native_cuda_ops / sizeof sz_native_cuda_ops[0]; i++) {
        const struct sz_native_cuda_op *o = &sz_native_cuda_ops[i];
        /* without CUDA no codelet has a CUDA function and no rank has CUDA workers: nothing missing */
        if (!SZ_WITH_CUDA || (o->cuda_bf16 && o->cl->cuda_funcs[0]))
            continue;
        if (names && n < max)
            names[n] = o->cl->name;
        n++;
    }
    return n;
}

int sz_native_cuda_listed(const char *name)
{
    for (size_t i = 0; name && i < sizeof sz_native_cuda_ops / sizeof sz_native_cuda_ops[0]; i++)
        if (!strcmp(sz_native_cuda_ops[i].cl->name, name))
            return sz_native_cuda_ops[i].cuda_bf16;
    return -1;
}

sz_bf16_compute sz_bf16_compute_decide_cuda(int cc_major, int cc_minor, const char *gpu, int nmissing,
                                            const char *const *missing, char *why, size_t len)
{
    char w[320];
    sz_bf16_compute c = SZ_BF16_COMPUTE_EMULATED;
    if (cc_major < 8) {
        snprintf(w, sizeof w, "CUDA workers on %s, compute capability %d.%d: no bf16 tensor cores (8.0 or later "
                 "needed), so the GPUs compute in fp32 working copies", gpu && *gpu ? gpu : "a GPU", cc_major,
                 cc_minor);
    } else if (nmissing > 0) {
        int o = snprintf(w, sizeof w, "CUDA workers: %d op(s) of the native path have no bf16 CUDA implementation "
                         "yet (", nmissing);
        for (int i = 0; i < nmissing && i < 4 && o > 0 && (size_t)o < sizeof w; i++)
            o += snprintf(w + o, sizeof w - (size_t)o, "%s%s", i ? ", " : "", missing[i]);
        if (o > 0 && (size_t)o < sizeof w)
            snprintf(w + o, sizeof w - (size_t)o, "%s)", nmissing > 4 ? ", ..." : "");
    } else {
        c = SZ_BF16_COMPUTE_NATIVE;
        snprintf(w, sizeof w, "CUDA workers on %s, compute capability %d.%d: bf16 tensor cores, and every op of the "
                 "native path has its bf16 CUDA implementation (not yet run on a GPU)", gpu && *gpu ? gpu : "a GPU",
                 cc_major, cc_minor);
    }
    if (why && len)
        snprintf(why, len, "%s", w);
    return c;
}

/* The lowest compute capability among this rank's CUDA workers' devices (and that device's name);
 * 0 when none could be read. */
static int lowest_cc(int *major, int *minor, char *name, size_t name_len)
{
    *major = *minor = 0;
    if (name_len)
        name[0] = 0;
#if SZ_WITH_CUDA
    int ids[STARPU_NMAXWORKERS], n = starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS);
    int found = 0;
    for (int i = 0; i < n; i++) {
        char nm[128];
        int sms, clk, ma, mi, fpc;
        double tf;
        if (sz_cuda_device_peak(starpu_worker_get_devid(ids[i]), nm, sizeof nm, &sms, &clk, &ma, &mi, &fpc, &tf))
            continue;
        if (!found || ma * 10 + mi < *major * 10 + *minor) {
            *major = ma, *minor = mi;
            if (name_len)
                snprintf(name, name_len, "%s", nm);
        }
        found = 1;
    }
    return found;
#else
    return 0;
#endif
}

sz_bf16_compute sz_context_bf16_auto(const sz_context *ctx, char *why, size_t len)
{
    sz_runtime_info info;
    if (!ctx || sz_context_runtime_info(ctx, &info) != SZ_OK || info.cuda_workers < 1) {
        const char *w;
        sz_bf16_compute c = sz_bf16_compute_auto(&w);
        if (why && len)
            snprintf(why, len, "%s", w);
        return c;
    }
    int ma, mi;
    char gpu[128];
    const char *missing[4];
    if (!lowest_cc(&ma, &mi, gpu, sizeof gpu)) {
        if (why && len)
            snprintf(why, len, "CUDA workers whose device properties could not be read: the fp32 working copies");
        return SZ_BF16_COMPUTE_EMULATED;
    }
    int nm = sz_native_cuda_missing(missing, 4);
    return sz_bf16_compute_decide_cuda(ma, mi, gpu, nm, missing, why, len);
}
