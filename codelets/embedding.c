/* codelets/embedding.c — a token embedding without a position table: the typed wrappers
 * sz_op_embedding_fwd/bwd, their argument struct, codelets and perf models; the math is
 * kernels/embedding.c. A token outside [0, V) fails the task (sz_task_fail) with the op,
 * the value and the row; the model's next call returns SZ_ERR_INVALID. On both bf16 paths the
 * forward reads a bf16 table (widened: kernels/bf16_act.c); the gradient is fp32, or, for
 * a unit whose writers round its bf16 gradients (codelets/sz_round.h), bf16: the backward's rounding
 * variant (CPU only) then sets it as the fp32 scatter-add onto zeros followed by the convert would. */
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_codelets.h"
#include "sz_cuda.h"
#include "sz_round.h"

struct embedding_args {
    int N, C, V;
    int p_dt; /* forward: sz_k_dtype of wte */
};

static void fwd_cpu(void *b[], void *arg)
{
    const struct embedding_args *a = sz_task_params(arg);
    const int *tok = sz_task_ptr(b, arg, 1);
    int64_t bad = a->p_dt ? sz_k_embedding_fwd_mx(sz_task_ptr(b, arg, 0), tok, sz_task_ptr(b, arg, 2), a->p_dt, a->N,
                                                  a->C, a->V)
                          : sz_k_embedding_fwd(sz_task_ptr(b, arg, 0), tok, sz_task_ptr(b, arg, 2), a->N, a->C, a->V);
    if (bad >= 0)
        sz_task_fail(arg, "embedding: token %d at row %lld is outside the vocabulary [0, %d)", tok[bad],
                     (long long)bad, a->V);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct embedding_args *a = sz_task_params(arg);
    const int *tok = sz_task_ptr(b, arg, 2);
    int64_t bad = sz_k_embedding_bwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), tok, a->N, a->C, a->V);
    if (bad >= 0)
        sz_task_fail(arg, "embedding_bwd: token %d at row %lld is outside the vocabulary [0, %d)", tok[bad],
                     (long long)bad, a->V);
}

/* The rounding variant: dwte (bf16) from the token rows' fp32 sums with the task's rule for it; the
 * scratch groups the rows by token (sz_k_embedding_bwd_round_ints int32, counted in the model's
 * host bytes: sz_embedding_round_host_bytes). */
enum { RND_DWTE, RND_DOUT, RND_TOK };
static void bwd_round_cpu(void *b[], void *arg)
{
    const struct embedding_args *a = sz_task_params(arg);
    const int *tok = sz_task_ptr(b, arg, RND_TOK);
    _Static_assert(sizeof(float) == sizeof(int32_t), "the scratch's floats hold int32");
    int32_t *idx = (int32_t *)sz_round_scratch(arg, sz_k_embedding_bwd_round_ints(a->N, a->V));
    if (!idx)
        return;
    int64_t bad = sz_k_embedding_bwd_round(sz_task_ptr(b, arg, RND_DWTE), sz_task_ptr(b, arg, RND_DOUT), tok, a->N,
                                           a->C, a->V, sz_task_round_mode(arg, RND_DWTE), idx);
    free(idx);
    if (bad >= 0)
        sz_task_fail(arg, "embedding_bwd: token %d at row %lld is outside the vocabulary [0, %d)", tok[bad],
                     (long long)bad, a->V);
}

#if SZ_WITH_CUDA
static void fwd_cuda(void *b[], void *arg)
{
    const struct embedding_args *a = sz_task_params(arg);
    const int *tok = sz_task_ptr(b, arg, 1);
    if (sz_cuda_check_ids(arg, "token", tok, a->N, a->V))
        return;
    sz_cuda_task_rc(arg, "embedding_fwd", sz_cuda_embedding_fwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), tok,
                                                                   sz_task_ptr(b, arg, 2), a->p_dt, a->N, a->C, a->V));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct embedding_args *a = sz_task_params(arg);
    const int *tok = sz_task_ptr(b, arg, 2);
    if (sz_cuda_check_ids(arg, "token", tok, a->N, a->V))
        return;
    sz_cuda_task_rc(arg, "embedding_bwd", sz_cuda_embedding_bwd(SZ_STREAM, sz_task_ptr(b, arg, 0),
                                                                sz_task_ptr(b, arg, 1), tok, a->N, a->C, a->V));
}
#endif

static struct starpu_perfmodel fwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_embedding_fwd"};
static struct starpu_perfmodel bwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_embedding_bwd"};
SZ_CODELET_CUDA(sz_cl_embedding_fwd, fwd_cpu, fwd_cuda, "embedding_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_embedding_fwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16, "out = wte[tokens]");
SZ_CODELET_CUDA(sz_cl_embedding_bwd, bwd_cpu, bwd_cuda, "embedding_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_embedding_bwd, SZ_TASK_COMPUTE, 0, "dwte += dout at the token rows");
SZ_PERFMODEL(bwd_round_model, "sz_embedding_bwd_round");
SZ_CODELET(sz_cl_embedding_bwd_round, bwd_round_cpu, "embedding_bwd_round", bwd_round_model);
SZ_DESCRIBE(sz_cl_embedding_bwd_round, SZ_TASK_COMPUTE, 0, "dwte (bf16) rounded from the token rows' sums of dout");

int64_t sz_embedding_round_host_bytes(int workers, int64_t N, int64_t V)
{
    if (N < 1 || V < 1)
        return 0;
    return (N + V + 1) * 4 * (workers > 0 ? workers : 1); /* sz_k_embedding_bwd_round_ints int32 */
}

static const sz_grad_spec embedding_grads[] = {{SZ_GRAD_OUTPUT, SZ_GRAD_TYPE_F32}, {SZ_GRAD_NONE, 0},
                                                {SZ_GRAD_INPUT, 0}};
/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status embedding_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct embedding_args *a = sz_record_params(r);
    return sz_op_embedding_bwd(u, SZ_RG(2), SZ_RG(0), SZ_RT(1), a->N, a->C, a->V);
}

sz_status sz_op_embedding_fwd(sz_unit *u, sz_tensor *out, sz_tensor *tokens, sz_tensor *wte, int N, int C, int V)
{
    if (N < 1 || C < 1 || V < 1)
        return sz_op_invalid(u, "embedding", "N = %d, C = %d, V = %d: need all >= 1", N, C, V);
    struct embedding_args a = {N, C, V, sz_kdt(wte)}; /* wte may be bf16 */
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, (int64_t)N * C, "out", 0},
                          {tokens, SZ_READ, SZ_DTYPE_I32, N, "tokens", 0},
                          {wte, SZ_READ, sz_fb(wte), (int64_t)V * C, "wte", 0}};
    return sz_task_submit_diff(u, &sz_cl_embedding_fwd, "embedding", t, 3, &a, sizeof a, embedding_grads,
                               embedding_fwd_grad);
}

sz_status sz_op_embedding_bwd(sz_unit *u, sz_tensor *dwte, sz_tensor *dout, sz_tensor *tokens, int N, int C, int V)
{
    if (N < 1 || C < 1 || V < 1)
        return sz_op_invalid(u, "embedding_bwd", "N = %d, C = %d, V = %d: need all >= 1", N, C, V);
    struct embedding_args a = {N, C, V, 0};
    if (sz_round_wanted(u, dwte)) { /* set (or added into) whole, rounded: its first writer */
        sz_task_tensor r[] = {{dwte, SZ_ACCUMULATE_OR_SET, SZ_DTYPE_BF16, (int64_t)V * C, "dwte", 0},
                              {dout, SZ_READ, SZ_DTYPE_F32, (int64_t)N * C, "dout", 0},
                              {tokens, SZ_READ, SZ_DTYPE_I32, N, "tokens", 0}};
        return sz_task_submit_cpu(u, &sz_cl_embedding_bwd_round, "embedding_bwd", r, 3, &a, sizeof a);
    }
    sz_task_tensor t[] = {{dwte, SZ_ACCUMULATE, SZ_DTYPE_F32, (int64_t)V * C, "dwte", 0},
                          {dout, SZ_READ, SZ_DTYPE_F32, (int64_t)N * C, "dout", 0},
                          {tokens, SZ_READ, SZ_DTYPE_I32, N, "tokens", 0}};
    return sz_task_submit(u, &sz_cl_embedding_bwd, "embedding_bwd", t, 3, &a, sizeof a);
}
