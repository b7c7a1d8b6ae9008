/* tasks/precision.c — the one place a ZeRO configuration's precision is decided
 * (sz_precision_resolve, include/starzero.h): the storage types, the bf16 compute path (AUTO by
 * the CPU's rule, or with CUDA workers the GPU's: codelets/native_cuda.c), whether bf16
 * parameters are read directly and whether the gradients' rounding is folded into their writers.
 * sz_model_set_zero keeps the answer (m->prec); the models size their tensors and host buffers
 * from it, the plan's configuration and the storage read it. */
#include <math.h>
#include <string.h>
#include "sz_tasks.h"

/* The checks every resolution makes (errors logged on ctx, or stderr without one). */
static sz_status check(const sz_context *ctx, const sz_zero_config *z)
{
    if (!sz_precision_name(z->precision)) {
        sz_context_log(ctx, SZ_LOG_ERROR, "ZeRO config: unknown precision %d (fp32, bf16 or fp16)", (int)z->precision);
        return SZ_ERR_INVALID;
    }
    const sz_loss_scaling *ls = &z->loss_scaling;
    if (z->precision == SZ_PRECISION_FP16 &&
        (!(ls->loss_scale >= 0.0f) || !isfinite(ls->loss_scale) || ls->initial_scale_power < 0 ||
         ls->initial_scale_power > 64 || ls->loss_scale_window < 1 || ls->hysteresis < 1 ||
         !(ls->min_loss_scale > 0.0f) || !isfinite(ls->min_loss_scale))) {
        sz_context_log(ctx, SZ_LOG_ERROR, "fp16 loss scaling: loss_scale %g (>= 0; 0: dynamic), initial_scale_power "
                       "%d (0..64), loss_scale_window %d (>= 1), hysteresis %d (>= 1), min_loss_scale %g (> 0): "
                       "one is outside its range", (double)ls->loss_scale, ls->initial_scale_power,
                       ls->loss_scale_window, ls->hysteresis, (double)ls->min_loss_scale);
        return SZ_ERR_INVALID;
    }
    if (z->bf16_compute != SZ_BF16_COMPUTE_AUTO && z->bf16_compute != SZ_BF16_COMPUTE_NATIVE &&
        z->bf16_compute != SZ_BF16_COMPUTE_EMULATED) {
        sz_context_log(ctx, SZ_LOG_ERROR, "ZeRO config: unknown bf16 compute path %d (auto, native or emulated)",
                       (int)z->bf16_compute);
        return SZ_ERR_INVALID;
    }
    return SZ_OK;
}

/* The answer, once the bf16 compute path is known: on ranks with CUDA workers or not, with the
 * gradients' rounding fold switched on or off (sz_fold_switches.round). */
static void fill(const sz_zero_config *z, sz_bf16_compute path, int cuda, int fold_round, sz_resolved_precision *out)
{
    memset(out, 0, sizeof *out);
    out->kind = z->precision;
    out->mixed = z->precision != SZ_PRECISION_FP32;
    out->param = out->grad = z->precision == SZ_PRECISION_BF16   ? SZ_DTYPE_BF16
                             : z->precision == SZ_PRECISION_FP16 ? SZ_DTYPE_F16
                                                                 : SZ_DTYPE_F32;
    out->loss_scaling = z->precision == SZ_PRECISION_FP16;
    if (out->loss_scaling) { /* fp32 compute on fp32 working copies: no native path, no direct
                                parameters, no rounding fold (those kernels are bf16's) */
        out->compute = SZ_BF16_COMPUTE_EMULATED;
        out->act = SZ_DTYPE_F32;
        return;
    }
    out->compute = path;
    out->native = out->mixed && path == SZ_BF16_COMPUTE_NATIVE;
    out->act = out->native ? SZ_DTYPE_BF16 : SZ_DTYPE_F32;
    /* Decided whatever the precision, so that a prediction for the other precision (the budget's
     * advice) follows the same rule. Direct: the emulated ops widen each parameter on load, so the
     * bits are those of the working copies; not where CUDA workers may run the compute (their
     * kernels take fp32 parameters). Rounding folded: CPU kernels only. */
    out->params_direct = path == SZ_BF16_COMPUTE_NATIVE || (!cuda && !z->bf16_work_copies);
    out->grads_rounded = fold_round && !cuda;
}

sz_status sz_precision_resolve(sz_context *ctx, const sz_zero_config *z, sz_resolved_precision *out)
{
    if (!ctx || !z || !out)
        return SZ_ERR_INVALID;
    sz_status st = check(ctx, z);
    if (st != SZ_OK)
        return st;
    /* The bf16 compute path: AUTO is the CPU rule, or with CUDA workers the GPU rule (native on
     * sm_80+ GPUs when every op of the native path has its bf16 CUDA twin). NATIVE with CUDA
     * workers is refused where that rule says emulated, with its reason (the GPU, or the ops
     * without a twin). */
    sz_runtime_info info;
    int cuda = sz_context_runtime_info(ctx, &info) == SZ_OK && info.cuda_workers > 0;
    /* fp16, with CUDA workers too: fp32 compute on fp32 working copies (the emulated path); the
     * codelets that meet the fp16 storage (conversions, optimizers, norms, the clip factor with the
     * loss scale, NCCL's collectives) take it on CUDA as on the CPU (SZ_CL_CUDA_F16). */
    sz_bf16_compute path = z->bf16_compute;
    if (path == SZ_BF16_COMPUTE_AUTO || (path == SZ_BF16_COMPUTE_NATIVE && cuda)) {
        char why[384];
        sz_bf16_compute rule = sz_context_bf16_auto(ctx, why, sizeof why);
        if (path == SZ_BF16_COMPUTE_NATIVE && rule != SZ_BF16_COMPUTE_NATIVE) {
            sz_context_log(ctx, SZ_LOG_ERROR, "the native bf16 compute path cannot run on this rank's %d CUDA "
                           "worker(s): %s; use the emulated path (--bf16-compute emulated) or STARPU_NCUDA=0",
                           info.cuda_workers, why);
            return SZ_ERR_UNSUPPORTED;
        }
        path = rule;
    }
    fill(z, path, cuda, ctx->env.fold.round, out);
    return SZ_OK;
}

sz_status sz_precision_resolve_cpu(const sz_zero_config *z, sz_resolved_precision *out)
{
    if (!z || !out)
        return SZ_ERR_INVALID;
    sz_status st = check(NULL, z);
    if (st != SZ_OK)
        return st;
    sz_fold_switches fold;
    sz_fold_switches_read(&fold);
    const char *why;
    fill(z, z->bf16_compute == SZ_BF16_COMPUTE_AUTO ? sz_bf16_compute_auto(&why) : z->bf16_compute, 0, fold.round, out);
    return SZ_OK;
}

const sz_resolved_precision *sz_model_precision(const sz_model *m) { return m ? &m->prec : NULL; }

static const char *const k_names[] = {"fp32", "bf16", "fp16"};

const char *sz_precision_name(sz_precision p)
{
    return (int)p >= 0 && (int)p < (int)(sizeof k_names / sizeof k_names[0]) ? k_names[p] : NULL;
}

sz_status sz_precision_parse(const char *name, sz_precision *out)
{
    for (int i = 0; name && out && i < (int)(sizeof k_names / sizeof k_names[0]); i++)
        if (!strcmp(name, k_names[i])) {
            *out = (sz_precision)i;
            return SZ_OK;
        }
    return SZ_ERR_INVALID;
}
