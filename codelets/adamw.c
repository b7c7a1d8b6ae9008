/* codelets/adamw.c — the AdamW update of one view (llm.c's gpt2_update, bias-corrected, decoupled
 * weight decay): param, m, v updated in place from grad times the clip scale (read as it is
 * read). With the optional norm tensor (one float) the task also takes the gradient's squared
 * norm in the same pass: written there (acc = 0) or added to it (acc = 1). */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"

struct adamw_args {
    int64_t n;
    float lr, beta1, beta2, eps, wd;
    int t;   /* step, >= 1 */
    int acc; /* the norm: 0 written, 1 added to */
};

void sz_adamw_put_sumsq(float *out, int acc, double s)
{
    *out = acc ? *out + (float)s : (float)s;
}

enum { P, G, M, V, SCALE, NORM };
static void adamw_cpu(void *b[], void *arg)
{
    const struct adamw_args *a = sz_task_params(arg);
    float *norm = sz_task_ptr(b, arg, NORM);
    double s = 0.0;
    int rc = sz_k_adamw_step(sz_task_ptr(b, arg, P), sz_task_ptr(b, arg, G), sz_task_ptr(b, arg, M),
                             sz_task_ptr(b, arg, V), (size_t)a->n, a->t, a->lr, a->beta1, a->beta2, a->eps, a->wd,
                             *(const float *)sz_task_ptr(b, arg, SCALE), norm ? &s : NULL);
    if (rc)
        sz_task_fail_nomem(arg, "out of memory");
    else if (norm)
        sz_adamw_put_sumsq(norm, a->acc, s);
}

#if SZ_WITH_CUDA
static void adamw_cuda(void *b[], void *arg)
{
    const struct adamw_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "adamw",
                    sz_cuda_adamw(SZ_STREAM, sz_task_ptr(b, arg, P), sz_task_ptr(b, arg, G), sz_task_ptr(b, arg, M),
                                  sz_task_ptr(b, arg, V), (size_t)a->n, a->t, a->lr, a->beta1, a->beta2, a->eps, a->wd,
                                  sz_task_ptr(b, arg, SCALE), sz_task_ptr(b, arg, NORM), a->acc));
}
#endif

SZ_PERFMODEL(adamw_model, "sz_adamw");
SZ_CODELET_CUDA(sz_cl_adamw, adamw_cpu, adamw_cuda, "adamw", adamw_model);
SZ_DESCRIBE(sz_cl_adamw, SZ_TASK_OPTIMIZER, 0, "AdamW on a view [, fused squared norm]");

sz_status sz_submit_adamw(sz_unit *u, const sz_tensor *p, const sz_tensor *g, const sz_tensor *m,
                          const sz_tensor *v, const sz_tensor *scale, const sz_tensor *norm, int acc,
                          const sz_train_config *cfg, float wd, int t, const char *name)
{
    int64_t n = p->numel;
    struct adamw_args a = {n, cfg->lr, cfg->beta1, cfg->beta2, cfg->eps, wd, t, acc};
    sz_task_tensor tt[] = {{p, SZ_READ_WRITE, SZ_DTYPE_F32, n, "param", 0}, {g, SZ_READ, SZ_DTYPE_F32, n, "grad", 0},
                           {m, SZ_READ_WRITE, SZ_DTYPE_F32, n, "m", 0},     {v, SZ_READ_WRITE, SZ_DTYPE_F32, n, "v", 0},
                           {scale, SZ_READ, SZ_DTYPE_F32, 1, "scale", 0},   {norm, SZ_READ_WRITE, SZ_DTYPE_F32, 1, "norm", 1}};
    return sz_task_submit_as(u, name, "adamw", &sz_cl_adamw, tt, 6, &a, sizeof a);
}
