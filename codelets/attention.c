/* codelets/attention.c — causal multi-head self-attention (llm.c layout) whose memory is linear in T:
 * the typed wrappers sz_op_attention_fwd/bwd, their argument struct, codelets and perf models; the
 * math is codelets/kernels/attention.c. Forward overwrites out and stats (per query row: softmax max
 * and 1/sum, [B,NH,T,2]); backward accumulates into dinp, recomputing the probabilities. */
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_tasks.h"

struct attention_args {
    int B, T, C, NH;
};

static void fwd_cpu(void *b[], void *arg)
{
    const struct attention_args *a = sz_task_params(arg);
    if (sz_k_attention_fwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), a->B, a->T, a->C,
                           a->NH) != 0)
        sz_task_fail(arg, "attention: out of memory (per-thread scratch of %d x %d floats)", a->C / a->NH + 4, a->T);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct attention_args *a = sz_task_params(arg);
    if (sz_k_attention_bwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2),
                           sz_task_ptr(b, arg, 3), a->B, a->T, a->C, a->NH) != 0)
        sz_task_fail(arg, "attention_bwd: out of memory (per-thread scratch of %d x %d floats)",
                     4 * (a->C / a->NH) + 8, a->T);
}

static struct starpu_perfmodel fwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_attention_fwd"};
static struct starpu_perfmodel bwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_attention_bwd"};
static struct starpu_codelet fwd_cl = {.cpu_funcs = {fwd_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
                                       .name = "attention_fwd", .model = &fwd_model};
static struct starpu_codelet bwd_cl = {.cpu_funcs = {bwd_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
                                       .name = "attention_bwd", .model = &bwd_model};

static sz_status check_shape(sz_unit *u, const char *op, int B, int T, int C, int NH)
{
    if (B < 1 || T < 1 || NH < 1 || C < NH || C % NH)
        return sz_op_invalid(u, op, "B = %d, T = %d, C = %d, NH = %d: need B, T >= 1 and C a multiple of NH", B, T, C,
                             NH);
    return SZ_OK;
}

sz_status sz_op_attention_fwd(sz_unit *u, sz_tensor *out, sz_tensor *stats, sz_tensor *inp, int B, int T, int C,
                              int NH)
{
    sz_status st = check_shape(u, "attention", B, T, C, NH);
    if (st != SZ_OK)
        return st;
    struct attention_args a = {B, T, C, NH};
    int64_t N = (int64_t)B * T, S = 2 * (int64_t)B * NH * T;
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, N * C, "out", 0},
                          {stats, SZ_WRITE, SZ_DTYPE_F32, S, "stats", 0},
                          {inp, SZ_READ, SZ_DTYPE_F32, N * 3 * C, "inp", 0}};
    return sz_task_submit(u, &fwd_cl, "attention", t, 3, &a, sizeof a);
}

sz_status sz_op_attention_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dout, sz_tensor *inp, sz_tensor *stats, int B,
                              int T, int C, int NH)
{
    sz_status st = check_shape(u, "attention_bwd", B, T, C, NH);
    if (st != SZ_OK)
        return st;
    struct attention_args a = {B, T, C, NH};
    int64_t N = (int64_t)B * T, S = 2 * (int64_t)B * NH * T;
    sz_task_tensor t[] = {{dinp, SZ_ACCUMULATE, SZ_DTYPE_F32, N * 3 * C, "dinp", 0},
                          {dout, SZ_READ, SZ_DTYPE_F32, N * C, "dout", 0},
                          {inp, SZ_READ, SZ_DTYPE_F32, N * 3 * C, "inp", 0},
                          {stats, SZ_READ, SZ_DTYPE_F32, S, "stats", 0}};
    return sz_task_submit(u, &bwd_cl, "attention_bwd", t, 4, &a, sizeof a);
}
