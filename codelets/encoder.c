/* codelets/encoder.c — token + position embedding (llm.c encoder), forward and backward.
 * Forward overwrites out; backward accumulates into dwte and dwpe. A token outside the
 * embedding's rows [0, V) is refused (sz_task_fail) before anything is read or written. */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"

struct encoder_args {
    int B, T, C;
    int64_t V; /* rows of wte: tokens must lie in [0, V) */
    int p_dt;  /* forward: sz_k_dtype of wte and wpe (bf16 on both bf16 paths: read directly) */
};

enum { FWD_OUT, FWD_TOK, FWD_WTE, FWD_WPE };
static void fwd_cpu(void *b[], void *arg)
{
    const struct encoder_args *a = sz_task_params(arg);
    const int *tok = sz_task_ptr(b, arg, FWD_TOK);
    if (sz_task_check_ids(arg, "token", tok, (int64_t)a->B * a->T, a->V))
        return;
    if (a->p_dt)
        sz_k_encoder_fwd_mx(sz_task_ptr(b, arg, FWD_OUT), tok, sz_task_ptr(b, arg, FWD_WTE), sz_task_ptr(b, arg, FWD_WPE),
                            a->p_dt, a->B, a->T, a->C);
    else
        sz_k_encoder_fwd(sz_task_ptr(b, arg, FWD_OUT), tok, sz_task_ptr(b, arg, FWD_WTE), sz_task_ptr(b, arg, FWD_WPE),
                         a->B, a->T, a->C);
}

enum { BWD_DWTE, BWD_DWPE, BWD_DOUT, BWD_TOK };
static void bwd_cpu(void *b[], void *arg)
{
    const struct encoder_args *a = sz_task_params(arg);
    const int *tok = sz_task_ptr(b, arg, BWD_TOK);
    if (sz_task_check_ids(arg, "token", tok, (int64_t)a->B * a->T, a->V))
        return;
    sz_k_encoder_bwd(sz_task_ptr(b, arg, BWD_DWTE), sz_task_ptr(b, arg, BWD_DWPE), sz_task_ptr(b, arg, BWD_DOUT), tok,
                     a->B, a->T, a->C);
}

/* The tied variant (sz_op_encoder_bwd_tied): the sums into the output layer's fp32 rows of the
 * tokens, then those rows rounded into dwte with the rule the output layer's task left after them,
 * and dwpe's sums rounded with this task's rule for it. */
enum { TIED_DWTE, TIED_DWPE, TIED_ROWS, TIED_DOUT, TIED_TOK };
static void bwd_tied_cpu(void *b[], void *arg)
{
    const struct encoder_args *a = sz_task_params(arg);
    const int *tok = sz_task_ptr(b, arg, TIED_TOK);
    int64_t N = (int64_t)a->B * a->T;
    if (sz_task_check_ids(arg, "token", tok, N, a->V))
        return;
    /* rows: the tokens' rows, wpe's sums, the rule (sz_tied_rows_numel) */
    float *rows = sz_task_ptr(b, arg, TIED_ROWS);
    int64_t n = sz_task_numel(arg, TIED_ROWS);
    int32_t *slot = malloc((size_t)a->V * sizeof *slot);
    if (!slot) {
        sz_task_fail_nomem(arg, "out of memory (the tied embedding's token slots)");
        return;
    }
    sz_k_token_slots(slot, a->V, tok, N);
    sz_k_encoder_bwd_round(sz_task_ptr(b, arg, TIED_DWTE), sz_task_ptr(b, arg, TIED_DWPE), rows,
                           rows + n - 1 - (int64_t)a->T * a->C, slot, a->V, sz_task_ptr(b, arg, TIED_DOUT), tok, a->B,
                           a->T, a->C, (int)rows[n - 1], sz_task_round_mode(arg, TIED_DWPE));
    free(slot);
}

#if SZ_WITH_CUDA
static void fwd_cuda(void *b[], void *arg)
{
    const struct encoder_args *a = sz_task_params(arg);
    const int *tok = sz_task_ptr(b, arg, FWD_TOK);
    if (sz_cuda_check_ids(arg, "token", tok, (int64_t)a->B * a->T, a->V))
        return;
    sz_cuda_task_rc(arg, "encoder_fwd",
                    sz_cuda_encoder_fwd_mx(SZ_STREAM, sz_task_ptr(b, arg, FWD_OUT), tok, sz_task_ptr(b, arg, FWD_WTE),
                                           sz_task_ptr(b, arg, FWD_WPE), a->p_dt, a->B, a->T, a->C));
}

/* The forward checked the same tokens; out-of-range ids are skipped by the kernel anyway. */
static void bwd_cuda(void *b[], void *arg)
{
    const struct encoder_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "encoder_bwd", sz_cuda_encoder_bwd(SZ_STREAM, sz_task_ptr(b, arg, BWD_DWTE),
                                                            sz_task_ptr(b, arg, BWD_DWPE), sz_task_ptr(b, arg, BWD_DOUT),
                                                            sz_task_ptr(b, arg, BWD_TOK), a->B, a->T, a->C));
}
#endif

SZ_PERFMODEL(fwd_model, "sz_encoder_fwd");
SZ_PERFMODEL(bwd_model, "sz_encoder_bwd");
SZ_CODELET_CUDA(sz_cl_encoder_fwd, fwd_cpu, fwd_cuda, "encoder_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_encoder_fwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16, "out = wte[tokens] + wpe");
SZ_CODELET_CUDA(sz_cl_encoder_bwd, bwd_cpu, bwd_cuda, "encoder_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_encoder_bwd, SZ_TASK_COMPUTE, 0, "dwte, dwpe += from dout");
SZ_PERFMODEL(bwd_tied_model, "sz_encoder_bwd_tied");
SZ_CODELET(sz_cl_encoder_bwd_tied, bwd_tied_cpu, "encoder_bwd_tied", bwd_tied_model);
SZ_DESCRIBE(sz_cl_encoder_bwd_tied, SZ_TASK_COMPUTE, 0,
            "rows += from dout; dwte's token rows, dwpe rounded into bf16");

/* The vocabulary: wte's rows (at least one). */
static int64_t vocab(const sz_tensor *wte, int C) { return wte && C > 0 ? wte->numel / C : 0; }

static sz_status check_shape(sz_unit *u, const char *op, int B, int T, int C)
{
    if (B < 1 || T < 1 || C < 1)
        return sz_task_refuse(u, op, "B, T, C must be >= 1 (got %d, %d, %d)", B, T, C);
    return SZ_OK;
}

static const sz_grad_spec encoder_grads[] = {{SZ_GRAD_OUTPUT, SZ_GRAD_TYPE_F32}, {SZ_GRAD_NONE, 0}, {SZ_GRAD_INPUT, 0},
                                              {SZ_GRAD_INPUT, 0}};
/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h); with a tied
 * wte whose gradient its writers round, the other unit's matmul_bwd_tied left the shared rows in
 * r->tied */
static sz_status encoder_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct encoder_args *a = sz_record_params(r);
    sz_tensor *dwte = SZ_RG(2);
    if (sz_tensor_dtype(dwte) == SZ_DTYPE_BF16 && r->tied)
        return sz_op_encoder_bwd_tied(u, dwte, SZ_RG(3), r->tied, SZ_RG(0), SZ_RT(1), a->B, a->T, a->C);
    return sz_op_encoder_bwd(u, dwte, SZ_RG(3), SZ_RG(0), SZ_RT(1), a->B, a->T, a->C);
}

sz_status sz_op_encoder_fwd(sz_unit *u, sz_tensor *out, sz_tensor *tok, sz_tensor *wte, sz_tensor *wpe, int B, int T,
                            int C)
{
    sz_status st = check_shape(u, "encoder_fwd", B, T, C);
    if (st != SZ_OK)
        return st;
    int64_t N = (int64_t)B * T;
    struct encoder_args a = {B, T, C, vocab(wte, C), sz_kdt(wte)};
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, N * C, "out", 0},
                          {tok, SZ_READ, SZ_DTYPE_I32, N, "tokens", 0},
                          {wte, SZ_READ, sz_fb(wte), C, "wte", 0},
                          {wpe, SZ_READ, sz_fb(wte), (int64_t)T * C, "wpe", 0}};
    st = sz_task_submit_diff(u, &sz_cl_encoder_fwd, "encoder_fwd", t, 4, &a, sizeof a, encoder_grads,
                             encoder_fwd_grad);
    struct sz_op_record *r = st == SZ_OK ? sz_tape_last(u) : NULL;
    if (r) /* wte may be tied (GPT-2's head): the rows both backwards write, in fp32 where they round */
        r->tied_numel = sz_tied_rows_numel(B, T, a.V, C);
    return st;
}

sz_status sz_op_encoder_bwd(sz_unit *u, sz_tensor *dwte, sz_tensor *dwpe, sz_tensor *dout, sz_tensor *tok, int B,
                            int T, int C)
{
    sz_status st = check_shape(u, "encoder_bwd", B, T, C);
    if (st != SZ_OK)
        return st;
    int64_t N = (int64_t)B * T;
    struct encoder_args a = {B, T, C, vocab(dwte, C), 0};
    sz_task_tensor t[] = {{dwte, SZ_ACCUMULATE, SZ_DTYPE_F32, C, "dwte", 0},
                          {dwpe, SZ_ACCUMULATE, SZ_DTYPE_F32, (int64_t)T * C, "dwpe", 0},
                          {dout, SZ_READ, SZ_DTYPE_F32, N * C, "dout", 0},
                          {tok, SZ_READ, SZ_DTYPE_I32, N, "tokens", 0}};
    return sz_task_submit(u, &sz_cl_encoder_bwd, "encoder_bwd", t, 4, &a, sizeof a);
}

sz_status sz_op_encoder_bwd_tied(sz_unit *u, sz_tensor *dwte, sz_tensor *dwpe, sz_tensor *rows, sz_tensor *dout,
                                 sz_tensor *tok, int B, int T, int C)
{
    sz_status st = check_shape(u, "encoder_bwd_tied", B, T, C);
    if (st != SZ_OK)
        return st;
    int64_t N = (int64_t)B * T, V = vocab(dwte, C);
    struct encoder_args a = {B, T, C, V, 0};
    sz_task_tensor t[] = {{dwte, SZ_ACCUMULATE, SZ_DTYPE_BF16, V * C, "dwte", 0},
                          {dwpe, SZ_ACCUMULATE_OR_SET, SZ_DTYPE_BF16, (int64_t)T * C, "dwpe", 0},
                          {rows, SZ_ACCUMULATE, SZ_DTYPE_F32, sz_tied_rows_numel(B, T, V, C), "rows", 0},
                          {dout, SZ_READ, SZ_DTYPE_F32, N * C, "dout", 0},
                          {tok, SZ_READ, SZ_DTYPE_I32, N, "tokens", 0}};
    return sz_task_submit_cpu(u, &sz_cl_encoder_bwd_tied, "encoder_bwd_tied", t, 5, &a, sizeof a);
}
