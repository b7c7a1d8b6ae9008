/* codelets/convert.c — mixed precision: copy a view converting between fp32 and bf16 (each view's
 * type is in the task's layout): bf16 parameters -> the fp32 working copy the compute tasks read;
 * fp32 working gradients -> bf16 gradients, overwriting or (acc = 1) accumulating dst += src with
 * one rounding per element. */
#include "sz_tasks.h"
#include "starzero_starpu.h"
#include "sz_cuda.h"

struct convert_args {
    int acc;                   /* 1: dst += src, else dst = src */
    struct sz_counters *stats; /* non-NULL: `bytes` of `category` become live (a copy allocated) */
    int category;
    int64_t bytes;
};

/* One loop per pair of types, so each vectorizes (element-wise getters would not). */
static void convert_cpu(void *b[], void *arg)
{
    const struct convert_args *a = sz_task_params(arg);
    const sz_task_layout *l = sz_task_layout_of(arg);
    int64_t n = l->numel[0];
    int acc = a->acc;
    int h0 = l->dtype[0] == SZ_DTYPE_BF16, h1 = l->dtype[1] == SZ_DTYPE_BF16;
    if (h0 && h1) {
        uint16_t *dst = sz_task_ptr(b, arg, 0);
        const uint16_t *src = sz_task_ptr(b, arg, 1);
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++)
            dst[i] = acc ? sz_f2h(sz_h2f(dst[i]) + sz_h2f(src[i])) : src[i];
    } else if (h0) {
        uint16_t *dst = sz_task_ptr(b, arg, 0);
        const float *src = sz_task_ptr(b, arg, 1);
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++)
            dst[i] = sz_f2h(acc ? sz_h2f(dst[i]) + src[i] : src[i]);
    } else if (h1) {
        float *dst = sz_task_ptr(b, arg, 0);
        const uint16_t *src = sz_task_ptr(b, arg, 1);
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++)
            dst[i] = acc ? dst[i] + sz_h2f(src[i]) : sz_h2f(src[i]);
    } else {
        float *dst = sz_task_ptr(b, arg, 0);
        const float *src = sz_task_ptr(b, arg, 1);
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++)
            dst[i] = acc ? dst[i] + src[i] : src[i];
    }
    if (a->stats && a->bytes) /* a working copy allocated by this write */
        sz_counters_add(a->stats, a->category, a->bytes);
}

#if SZ_WITH_CUDA
static void convert_cuda(void *b[], void *arg)
{
    const struct convert_args *a = sz_task_params(arg);
    const sz_task_layout *l = sz_task_layout_of(arg);
    int h0 = l->dtype[0] == SZ_DTYPE_BF16, h1 = l->dtype[1] == SZ_DTYPE_BF16;
    if (sz_cuda_task_rc(arg, "convert", sz_cuda_convert(SZ_STREAM, sz_task_ptr(b, arg, 0), h0, sz_task_ptr(b, arg, 1),
                                                        h1, (size_t)l->numel[0], a->acc)))
        return;
    if (a->stats && a->bytes)
        sz_counters_add(a->stats, a->category, a->bytes);
}
#endif

SZ_PERFMODEL(convert_model, "sz_convert");
SZ_CODELET_CUDA(sz_cl_convert, convert_cpu, convert_cuda, "convert", convert_model);

/* dst (W, or RW when acc) <- src converting between fp32 and bf16; the write that allocates a
 * working copy counts `bytes` of `category` as live, and writes the token so it stays in order
 * with gathers and releases (bounding the copies in flight). */
sz_status sz_submit_convert(struct sz_model *m, const sz_tensor *dst, const sz_tensor *src, int acc, int category,
                            int64_t bytes, const char *name)
{
    struct convert_args a = {acc, &m->counters, category, bytes};
    sz_task_tensor tt[] = {{dst, acc ? SZ_ACCUMULATE : SZ_WRITE, SZ_DTYPE_ANY, src ? src->numel : -1, "dst", 0},
                           {src, SZ_READ, SZ_DTYPE_ANY, dst ? dst->numel : -1, "src", 0},
                           {m->token, SZ_ACCUMULATE, SZ_DTYPE_F32, 1, "token", 0}};
    return sz_task_submit_named(m, 0xffff, name, "convert", &sz_cl_convert, tt, 3, &a, sizeof a);
}
