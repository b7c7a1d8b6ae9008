/* codelets/native_cuda.c — the native bf16 compute path on CUDA workers: which codelets the native
 * path hands bf16 tensors to and whether their CUDA implementation takes them (their descriptors:
 * SZ_CL_NATIVE, SZ_CL_CUDA_BF16), and
 * the rule that picks the path on a rank with CUDA workers (include/starzero.h,
 * sz_bf16_compute_decide_cuda, sz_context_bf16_auto): native when every such codelet's CUDA function
 * takes bf16 and every CUDA worker's GPU has bf16 tensor cores (compute capability 8.0 or later,
 * sz_cuda_device_peak), else emulated, with the reason. A rule on the device's properties, never a
 * timed probe, so every rank of a job on the same kind of node decides alike (sz_model_finalize
 * still checks that they agree). Every op the bundled models (GPT-2, LLaMA) run on the native path
 * says SZ_CL_NATIVE; in a CUDA build one whose codelet has no CUDA function counts as missing too (it
 * would run on a CPU worker, its tensors copied to the host and back every step). An app's own ops
 * (through starzero_starpu.h) are not known here: a CPU-only one runs on CPU workers, whose kernels
 * take bf16.
 *
 * Status: the CUDA twins were written and compiled without a GPU; tests/test_cuda_kernels.c checks
 * each against its CPU twin and has not yet run on a GPU (README, "Running on GPUs"). */
#include <stdio.h>
#include <string.h>
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_cuda.h"

/* The codelets whose descriptors say the native path hands them bf16 tensors (SZ_CL_NATIVE: the
 * activations the matmuls read, their gradients, the logits, the bf16 parameters of
 * apps/gpt2/gpt2.c and apps/llama/llama.c; the generic ops GELU, SiLU, mul and softmax_xent too, as
 * a model may call them with bf16 tensors as their CPU kernels allow); missing: one whose CUDA
 * function does not take them (no SZ_CL_CUDA_BF16) or, in a CUDA build, that has none.
 * Conversions, zeroing, sumsq, the optimizers and the collectives read the tensors' dtypes on CUDA
 * already. */
int sz_native_cuda_missing(const char **names, int max)
{
    int n = 0, nd;
    const sz_op_desc *const *d = sz_op_descs(&nd);
    for (int i = 0; i < nd; i++) {
        /* without CUDA no codelet has a CUDA function and no rank has CUDA workers: nothing missing */
        if (!(d[i]->supports & SZ_CL_NATIVE) || !SZ_WITH_CUDA ||
            ((d[i]->supports & SZ_CL_CUDA_BF16) && d[i]->cl->cuda_funcs[0]))
            continue;
        if (names && n < max)
            names[n] = d[i]->cl->name;
        n++;
    }
    return n;
}

int sz_native_cuda_listed(const char *name)
{
    int nd;
    const sz_op_desc *const *d = sz_op_descs(&nd);
    for (int i = 0; name && i < nd; i++)
        if ((d[i]->supports & SZ_CL_NATIVE) && !strcmp(d[i]->cl->name, name))
            return (d[i]->supports & SZ_CL_CUDA_BF16) != 0;
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
