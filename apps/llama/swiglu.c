/* apps/llama/swiglu.c — an operation of the model's own, defined through starzero_starpu.h as
 * any app may: the fused SwiGLU product out = silu(gate) · up (silu(x) = x / (1 + e^(-x))) and its
 * backward, a typed argument struct, a CPU codelet with a history-based perf model, submitted with
 * sz_task_submit on the model's tensors. Elementwise (fixed static split), so the same bits
 * whatever the thread count. On the native bf16 path (sz_model_bf16_native) out (forward) and
 * dgate, dup, dout (backward) are bf16, the tensors the matmuls around it read and write: computed
 * in fp32 from the widened values by the same per-element formula, each bf16 result rounded once
 * (a bf16 destination that accumulates becomes round(f32(dst) + contribution)), so its bits are the
 * fp32 kernel's on the widened inputs, rounded. gate and up (the matmuls' fp32 outputs) stay fp32. */
#include <math.h>
#include "starzero_starpu.h"
#include "starzero_llama.h"

struct swiglu_args {
    int64_t n;
    int out_bf16;  /* forward: out bf16; backward: dgate and dup bf16 */
    int dout_bf16; /* backward: dout bf16 */
};

/* The per-element math, one copy for the fp32 and the bf16 kernels. */
static inline float swiglu_1(float g, float u) { return g / (1.0f + expf(-g)) * u; }

/* d/dg = up · s (1 + g (1 - s)), d/dup = g s, with s = sigmoid(g); both accumulate. */
static inline void swiglu_bwd_1(float *dg, float *du, float d, float g, float u)
{
    float s = 1.0f / (1.0f + expf(-g));
    *dg += d * u * (s * (1.0f + g * (1.0f - s)));
    *du += d * (g * s);
}

void sz_llama_swiglu_fwd(float *out, const float *gate, const float *up, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= 16384)
    for (size_t i = 0; i < n; i++)
        out[i] = swiglu_1(gate[i], up[i]);
}

void sz_llama_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= 16384)
    for (size_t i = 0; i < n; i++)
        swiglu_bwd_1(&dgate[i], &dup[i], dout[i], gate[i], up[i]);
}

void sz_llama_swiglu_fwd_bf16(uint16_t *out, const float *gate, const float *up, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= 16384)
    for (size_t i = 0; i < n; i++)
        out[i] = sz_bf16_from_f32(swiglu_1(gate[i], up[i]));
}

void sz_llama_swiglu_bwd_bf16(uint16_t *dgate, uint16_t *dup, const void *dout, int dout_bf16, const float *gate,
                              const float *up, size_t n)
{
    const uint16_t *d16 = dout;
    const float *d32 = dout;
#pragma omp parallel for schedule(static) if (n >= 16384)
    for (size_t i = 0; i < n; i++) {
        float dg = sz_bf16_to_f32(dgate[i]), du = sz_bf16_to_f32(dup[i]);
        swiglu_bwd_1(&dg, &du, dout_bf16 ? sz_bf16_to_f32(d16[i]) : d32[i], gate[i], up[i]);
        dgate[i] = sz_bf16_from_f32(dg);
        dup[i] = sz_bf16_from_f32(du);
    }
}

static void fwd_cpu(void *b[], void *arg)
{
    const struct swiglu_args *a = sz_task_params(arg);
    if (a->out_bf16)
        sz_llama_swiglu_fwd_bf16(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), (size_t)a->n);
    else
        sz_llama_swiglu_fwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), (size_t)a->n);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct swiglu_args *a = sz_task_params(arg);
    if (a->out_bf16)
        sz_llama_swiglu_bwd_bf16(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), a->dout_bf16,
                                 sz_task_ptr(b, arg, 3), sz_task_ptr(b, arg, 4), (size_t)a->n);
    else
        sz_llama_swiglu_bwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2),
                            sz_task_ptr(b, arg, 3), sz_task_ptr(b, arg, 4), (size_t)a->n);
}

static struct starpu_perfmodel fwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "llama_swiglu_fwd"};
static struct starpu_perfmodel bwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "llama_swiglu_bwd"};
static struct starpu_codelet fwd_cl = {.cpu_funcs = {fwd_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
                                       .name = "swiglu_fwd", .model = &fwd_model};
static struct starpu_codelet bwd_cl = {.cpu_funcs = {bwd_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
                                       .name = "swiglu_bwd", .model = &bwd_model};

/* SZ_DTYPE_BF16 for a bf16 tensor, else SZ_DTYPE_F32 (sz_task_submit then refuses anything else). */
static sz_dtype fb(const sz_tensor *t) { return t && sz_tensor_dtype(t) == SZ_DTYPE_BF16 ? SZ_DTYPE_BF16 : SZ_DTYPE_F32; }

sz_status sz_llama_op_swiglu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *gate, sz_tensor *up, int64_t n)
{
    if (n < 1)
        return sz_task_refuse(u, "swiglu", "n must be >= 1 (got %lld)", (long long)n);
    struct swiglu_args a = {n, fb(out) == SZ_DTYPE_BF16, 0}; /* out may be bf16 */
    sz_task_tensor t[] = {{out, SZ_WRITE, fb(out), n, "out", 0},
                          {gate, SZ_READ, SZ_DTYPE_F32, n, "gate", 0},
                          {up, SZ_READ, SZ_DTYPE_F32, n, "up", 0}};
    return sz_task_submit(u, &fwd_cl, "swiglu", t, 3, &a, sizeof a);
}

sz_status sz_llama_op_swiglu_bwd(sz_unit *u, sz_tensor *dgate, sz_tensor *dup, sz_tensor *dout, sz_tensor *gate,
                                 sz_tensor *up, int64_t n)
{
    if (n < 1)
        return sz_task_refuse(u, "swiglu_bwd", "n must be >= 1 (got %lld)", (long long)n);
    /* the native bf16 path: dgate and dup bf16 together (dgate's type; dup must match), then dout
     * either; with fp32 dgate and dup, dout fp32 too (sz_task_submit refuses other types) */
    int g16 = fb(dgate) == SZ_DTYPE_BF16;
    sz_dtype dt_out = g16 ? fb(dout) : SZ_DTYPE_F32;
    struct swiglu_args a = {n, g16, dt_out == SZ_DTYPE_BF16};
    sz_task_tensor t[] = {{dgate, SZ_ACCUMULATE, fb(dgate), n, "dgate", 0},
                          {dup, SZ_ACCUMULATE, fb(dgate), n, "dup", 0},
                          {dout, SZ_READ, dt_out, n, "dout", 0},
                          {gate, SZ_READ, SZ_DTYPE_F32, n, "gate", 0},
                          {up, SZ_READ, SZ_DTYPE_F32, n, "up", 0}};
    return sz_task_submit(u, &bwd_cl, "swiglu_bwd", t, 5, &a, sizeof a);
}
