/* apps/llama/swiglu.c — an operation of the model's own, defined through starzero_starpu.h as
 * any app may: the fused SwiGLU product out = silu(gate) · up (silu(x) = x / (1 + e^(-x))) and its
 * backward, a typed argument struct, a CPU codelet with a history-based perf model, submitted with
 * sz_task_submit on the model's tensors. Elementwise (fixed static split), so the same bits
 * whatever the thread count. */
#include <math.h>
#include "starzero_starpu.h"
#include "starzero_llama.h"

struct swiglu_args {
    int64_t n;
};

void sz_llama_swiglu_fwd(float *out, const float *gate, const float *up, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= 16384)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* d/dg = up · s (1 + g (1 - s)), d/dup = g s, with s = sigmoid(g); both accumulate. */
void sz_llama_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= 16384)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], s = 1.0f / (1.0f + expf(-g)), d = dout[i];
        dgate[i] += d * up[i] * (s * (1.0f + g * (1.0f - s)));
        dup[i] += d * (g * s);
    }
}

static void fwd_cpu(void *b[], void *arg)
{
    const struct swiglu_args *a = sz_task_params(arg);
    sz_llama_swiglu_fwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), (size_t)a->n);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct swiglu_args *a = sz_task_params(arg);
    sz_llama_swiglu_bwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2),
                        sz_task_ptr(b, arg, 3), sz_task_ptr(b, arg, 4), (size_t)a->n);
}

static struct starpu_perfmodel fwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "llama_swiglu_fwd"};
static struct starpu_perfmodel bwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "llama_swiglu_bwd"};
static struct starpu_codelet fwd_cl = {.cpu_funcs = {fwd_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
                                       .name = "swiglu_fwd", .model = &fwd_model};
static struct starpu_codelet bwd_cl = {.cpu_funcs = {bwd_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
                                       .name = "swiglu_bwd", .model = &bwd_model};

sz_status sz_llama_op_swiglu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *gate, sz_tensor *up, int64_t n)
{
    struct swiglu_args a = {n};
    if (n < 1)
        return SZ_ERR_INVALID;
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, n, "out", 0},
                          {gate, SZ_READ, SZ_DTYPE_F32, n, "gate", 0},
                          {up, SZ_READ, SZ_DTYPE_F32, n, "up", 0}};
    return sz_task_submit(u, &fwd_cl, "swiglu", t, 3, &a, sizeof a);
}

sz_status sz_llama_op_swiglu_bwd(sz_unit *u, sz_tensor *dgate, sz_tensor *dup, sz_tensor *dout, sz_tensor *gate,
                                 sz_tensor *up, int64_t n)
{
    struct swiglu_args a = {n};
    if (n < 1)
        return SZ_ERR_INVALID;
    sz_task_tensor t[] = {{dgate, SZ_ACCUMULATE, SZ_DTYPE_F32, n, "dgate", 0},
                          {dup, SZ_ACCUMULATE, SZ_DTYPE_F32, n, "dup", 0},
                          {dout, SZ_READ, SZ_DTYPE_F32, n, "dout", 0},
                          {gate, SZ_READ, SZ_DTYPE_F32, n, "gate", 0},
                          {up, SZ_READ, SZ_DTYPE_F32, n, "up", 0}};
    return sz_task_submit(u, &bwd_cl, "swiglu_bwd", t, 5, &a, sizeof a);
}
