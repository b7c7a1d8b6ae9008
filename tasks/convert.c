/* tasks/convert.c — mixed precision: copy a view converting between fp32 and bf16 or fp16 (each
 * view's type is in the task's layout): 16-bit parameters -> the fp32 working copy the compute
 * tasks read; fp32 working gradients -> 16-bit gradients, overwriting or accumulating dst += src
 * with one rounding per element (fp16: an overflow becomes inf), or (the first micro-batch) writing
 * what accumulating onto zeros gives. The loops are kernels/bf16.c's sz_k_convert; on CUDA
 * sz_cuda_convert (kernels/cuda/util.cu), bitwise the same. */
#include "sz_tasks.h"
#include "starzero_starpu.h"
#include "sz_cuda.h"
#include "sz_kernels.h"

struct convert_args {
    int mode;                  /* sz_convert_mode (graph/sz_plan.h): dst = src, dst += src, dst = 0 + src */
    struct sz_counters *stats; /* non-NULL: `bytes` of `category` become live (a copy allocated) */
    int category;
    int64_t bytes;
};

_Static_assert((int)SZ_CONVERT_SET == (int)SZ_K_CONVERT_SET && (int)SZ_CONVERT_ADD == (int)SZ_K_CONVERT_ADD &&
                   (int)SZ_CONVERT_ONTO_ZEROS == (int)SZ_K_CONVERT_ONTO_ZEROS,
               "the plan's convert modes are the kernel's");

static void convert_cpu(void *b[], void *arg)
{
    const struct convert_args *a = sz_task_params(arg);
    const sz_task_layout *l = sz_task_layout_of(arg);
    sz_k_convert(sz_task_ptr(b, arg, 0), (sz_k_dtype)sz_kdt_of(l->dtype[0]), sz_task_ptr(b, arg, 1),
                 (sz_k_dtype)sz_kdt_of(l->dtype[1]), (size_t)l->numel[0], a->mode);
    if (a->stats && a->bytes) /* a working copy allocated by this write */
        sz_counters_add(a->stats, a->category, a->bytes);
}

#if SZ_WITH_CUDA
static void convert_cuda(void *b[], void *arg)
{
    const struct convert_args *a = sz_task_params(arg);
    const sz_task_layout *l = sz_task_layout_of(arg);
    if (sz_cuda_task_rc(arg, "convert",
                        sz_cuda_convert(SZ_STREAM, sz_task_ptr(b, arg, 0), sz_kdt_of(l->dtype[0]),
                                        sz_task_ptr(b, arg, 1), sz_kdt_of(l->dtype[1]), (size_t)l->numel[0], a->mode)))
        return;
    if (a->stats && a->bytes)
        sz_counters_add(a->stats, a->category, a->bytes);
}
#endif

SZ_PERFMODEL(convert_model, "sz_convert");
SZ_CODELET_CUDA(sz_cl_convert, convert_cpu, convert_cuda, "convert", convert_model);
SZ_DESCRIBE(sz_cl_convert, SZ_TASK_CONVERT, SZ_CL_CUDA_F16, "copy converting fp32 <-> bf16 or fp16 [, accumulate]");

/* dst (W, or RW when mode is SZ_CONVERT_ADD) <- src converting between fp32 and bf16 or fp16; the write
 * that allocates a working copy counts `bytes` of `category` as live, and writes the token so it
 * stays in order with gathers and releases (bounding the copies in flight). */
sz_status sz_submit_convert(struct sz_model *m, const sz_tensor *dst, const sz_tensor *src, int mode, int category,
                            int64_t bytes, const char *name)
{
    struct convert_args a = {mode, &m->counters, category, bytes};
    sz_task_tensor tt[] = {{dst, mode == SZ_CONVERT_ADD ? SZ_ACCUMULATE : SZ_WRITE, SZ_DTYPE_ANY, src ? src->numel : -1, "dst", 0},
                           {src, SZ_READ, SZ_DTYPE_ANY, dst ? dst->numel : -1, "src", 0},
                           {m->token, SZ_ACCUMULATE, SZ_DTYPE_F32, 1, "token", 0}};
    return sz_task_submit_named(&m->core, 0xffff, name, "convert", &sz_cl_convert, tt, 3, &a, sizeof a);
}
