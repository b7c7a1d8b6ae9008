/* codelets/adamw_mixed.c — AdamW for mixed precision: the fp32 master weights, Adam m and v are
 * updated from the bf16 or fp16 gradients (times the clip scale; a NaN scale is fp16's skipped
 * step: nothing changes), then the 16-bit parameters are the master rounded to nearest even, all in one pass (no widened copy of the gradient: for wte that copy
 * was 154 MB, mapped afresh and faulted in every step). Optional norm as in codelets/adamw.c. */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"

struct adamw_mixed_args {
    int64_t n;
    float lr, beta1, beta2, eps, wd;
    int t;   /* step, >= 1 */
    int acc; /* the norm: 0 written, 1 added to */
};

enum { MASTER, P, G, M, V, SCALE, NORM };
static void adamw_mixed_cpu(void *b[], void *arg)
{
    const struct adamw_mixed_args *a = sz_task_params(arg);
    float *norm = sz_task_ptr(b, arg, NORM);
    double s = 0.0;
    int rc = sz_k_adamw_step_mixed(sz_task_ptr(b, arg, MASTER), sz_task_ptr(b, arg, P), sz_task_ptr(b, arg, G),
                                   (sz_k_dtype)sz_kdt_of(sz_task_layout_of(arg)->dtype[P]), sz_task_ptr(b, arg, M),
                                   sz_task_ptr(b, arg, V), (size_t)a->n, a->t, a->lr, a->beta1, a->beta2, a->eps,
                                   a->wd, *(const float *)sz_task_ptr(b, arg, SCALE), norm ? &s : NULL);
    if (rc)
        sz_task_fail_nomem(arg, "out of memory");
    else if (norm)
        sz_adamw_put_sumsq(norm, a->acc, s);
}

#if SZ_WITH_CUDA
static void adamw_mixed_cuda(void *b[], void *arg)
{
    const struct adamw_mixed_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "adamw_mixed",
                    sz_cuda_adamw_mixed(SZ_STREAM, sz_task_ptr(b, arg, MASTER), sz_task_ptr(b, arg, P),
                                        sz_task_ptr(b, arg, G), sz_kdt_of(sz_task_layout_of(arg)->dtype[P]),
                                        sz_task_ptr(b, arg, M), sz_task_ptr(b, arg, V),
                                        (size_t)a->n, a->t, a->lr, a->beta1, a->beta2, a->eps, a->wd,
                                        sz_task_ptr(b, arg, SCALE), sz_task_ptr(b, arg, NORM), a->acc));
}
#endif

SZ_PERFMODEL(adamw_mixed_model, "sz_adamw_mixed");
SZ_CODELET_CUDA(sz_cl_adamw_mixed, adamw_mixed_cpu, adamw_mixed_cuda, "adamw_mixed", adamw_mixed_model);
SZ_DESCRIBE(sz_cl_adamw_mixed, SZ_TASK_OPTIMIZER, SZ_CL_CUDA_F16, "AdamW: fp32 master, bf16 or fp16 params and grads");

sz_status sz_submit_adamw_mixed(sz_unit *u, const sz_tensor *master, const sz_tensor *p, const sz_tensor *g,
                                const sz_tensor *m, const sz_tensor *v, const sz_tensor *scale, const sz_tensor *norm,
                                int acc, const sz_train_config *cfg, float wd, int t, const char *name)
{
    int64_t n = master->numel;
    sz_dtype dt = p && p->dtype == SZ_DTYPE_F16 ? SZ_DTYPE_F16 : SZ_DTYPE_BF16; /* p and g alike */
    struct adamw_mixed_args a = {n, cfg->lr, cfg->beta1, cfg->beta2, cfg->eps, wd, t, acc};
    sz_task_tensor tt[] = {{master, SZ_READ_WRITE, SZ_DTYPE_F32, n, "master", 0},
                           {p, SZ_READ_WRITE, dt, n, "param", 0},
                           {g, SZ_READ, dt, n, "grad", 0},
                           {m, SZ_READ_WRITE, SZ_DTYPE_F32, n, "m", 0},
                           {v, SZ_READ_WRITE, SZ_DTYPE_F32, n, "v", 0},
                           {scale, SZ_READ, SZ_DTYPE_F32, 1, "scale", 0},
                           {norm, SZ_READ_WRITE, SZ_DTYPE_F32, 1, "norm", 1}};
    return sz_task_submit_as(u, name, "adamw_mixed", &sz_cl_adamw_mixed, tt, 7, &a,
                                sizeof a);
}
