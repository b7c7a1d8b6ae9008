/* codelets/sgd.c — SGD with momentum as torch.optim.SGD (dampening 0, not Nesterov) on one view
 * (kernels/sgd.c): g = scale * grad + wd * p, buf = momentum * buf + g, p -= lr * buf;
 * without momentum there is no buffer (the tensor is absent) and p -= lr * g. Two codelets: fp32
 * (param, grad fp32) and mixed precision (the fp32 master updated from bf16 gradients, the bf16
 * parameters rounded from it in the same pass). The optional norm tensor (one float) receives
 * the gradient's squared norm taken in the same pass, as codelets/adamw.c's. */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"

struct sgd_args {
    int64_t n;
    float lr, momentum, wd;
    int acc; /* the norm: 0 written, 1 added to */
};

enum { P, G, MASTER, BUF, SCALE, NORM };

static void sgd_run(void *b[], void *arg, int mixed)
{
    const struct sgd_args *a = sz_task_params(arg);
    float *norm = sz_task_ptr(b, arg, NORM);
    double s = 0.0;
    float scale = *(const float *)sz_task_ptr(b, arg, SCALE);
    int gdt = sz_kdt_of(sz_task_layout_of(arg)->dtype[G]); /* 1 bf16, 2 fp16 when mixed */
    int rc = mixed ? sz_k_sgd_step(sz_task_ptr(b, arg, MASTER), sz_task_ptr(b, arg, P), sz_task_ptr(b, arg, G), gdt,
                                   sz_task_ptr(b, arg, BUF), (size_t)a->n, a->lr, a->momentum, a->wd, 0, scale,
                                   norm ? &s : NULL)
                   : sz_k_sgd_step(sz_task_ptr(b, arg, P), NULL, sz_task_ptr(b, arg, G), 0, sz_task_ptr(b, arg, BUF),
                                   (size_t)a->n, a->lr, a->momentum, a->wd, 0, scale, norm ? &s : NULL);
    if (rc)
        sz_task_fail_nomem(arg, "out of memory");
    else if (norm)
        sz_adamw_put_sumsq(norm, a->acc, s);
}
static void sgd_cpu(void *b[], void *arg) { sgd_run(b, arg, 0); }
static void sgd_mixed_cpu(void *b[], void *arg) { sgd_run(b, arg, 1); }

#if SZ_WITH_CUDA
/* The update, then (with a norm) the gradient's squared norm as sz_cuda_sumsq takes it (the gradient
 * is only read, so it is the norm the separate task would take; 0 on a skipped step, as the CPU's). */
static void sgd_cuda_run(void *b[], void *arg, int mixed)
{
    const struct sgd_args *a = sz_task_params(arg);
    float *norm = sz_task_ptr(b, arg, NORM);
    const void *g = sz_task_ptr(b, arg, G);
    int gdt = sz_kdt_of(sz_task_layout_of(arg)->dtype[G]); /* 1 bf16, 2 fp16 when mixed */
    int rc = mixed ? sz_cuda_sgd_any(SZ_STREAM, sz_task_ptr(b, arg, MASTER), sz_task_ptr(b, arg, P), g, gdt,
                                     sz_task_ptr(b, arg, BUF), (size_t)a->n, a->lr, a->momentum, a->wd, 0,
                                     sz_task_ptr(b, arg, SCALE), norm, a->acc)
                   : sz_cuda_sgd_any(SZ_STREAM, sz_task_ptr(b, arg, P), NULL, g, gdt, sz_task_ptr(b, arg, BUF),
                                     (size_t)a->n, a->lr, a->momentum, a->wd, 0, sz_task_ptr(b, arg, SCALE), norm,
                                     a->acc);
    sz_cuda_task_rc(arg, mixed ? "sgd_mixed" : "sgd", rc);
}
static void sgd_cuda(void *b[], void *arg) { sgd_cuda_run(b, arg, 0); }
static void sgd_mixed_cuda(void *b[], void *arg) { sgd_cuda_run(b, arg, 1); }
#endif

SZ_PERFMODEL(sgd_model, "sz_sgd");
SZ_PERFMODEL(sgd_mixed_model, "sz_sgd_mixed");
SZ_CODELET_CUDA(sz_cl_sgd, sgd_cpu, sgd_cuda, "sgd", sgd_model);
SZ_DESCRIBE(sz_cl_sgd, SZ_TASK_OPTIMIZER, 0, "SGD (momentum buffer if any) on a view [, fused squared norm]");
SZ_CODELET_CUDA(sz_cl_sgd_mixed, sgd_mixed_cpu, sgd_mixed_cuda, "sgd_mixed", sgd_mixed_model);
SZ_DESCRIBE(sz_cl_sgd_mixed, SZ_TASK_OPTIMIZER, SZ_CL_CUDA_F16, "SGD: fp32 master, bf16 or fp16 params and grads");

sz_status sz_submit_sgd(sz_unit *u, const sz_tensor *master, const sz_tensor *p, const sz_tensor *g,
                        const sz_tensor *buf, const sz_tensor *scale, const sz_tensor *norm, int acc, float lr,
                        float momentum, float wd, const char *name)
{
    int mixed = master != NULL;
    int64_t n = p->numel;
    if ((buf != NULL) != (momentum != 0.0f))
        return sz_op_invalid(u, "sgd", "momentum %g %s a buffer", (double)momentum, buf ? "with" : "without");
    struct sgd_args a = {n, lr, momentum, wd, acc};
    sz_dtype dt = !mixed ? SZ_DTYPE_F32 : p && p->dtype == SZ_DTYPE_F16 ? SZ_DTYPE_F16 : SZ_DTYPE_BF16;
    sz_task_tensor tt[] = {{p, SZ_READ_WRITE, dt, n, "param", 0},
                           {g, SZ_READ, dt, n, "grad", 0},
                           {master, SZ_READ_WRITE, SZ_DTYPE_F32, n, "master", 1},
                           {buf, SZ_READ_WRITE, SZ_DTYPE_F32, n, "momentum", 1},
                           {scale, SZ_READ, SZ_DTYPE_F32, 1, "scale", 0},
                           {norm, SZ_READ_WRITE, SZ_DTYPE_F32, 1, "norm", 1}};
    return sz_task_submit_as(u, name, mixed ? "sgd_mixed" : "sgd",
                                mixed ? &sz_cl_sgd_mixed : &sz_cl_sgd, tt, 6, &a, sizeof a);
}
