/* codelets/matmul.c — linear layer out = inp . w^T (+ b) through oneDNN, forward and backward.
 * Forward overwrites out; backward accumulates into dinp (or sets it: a folded sz_op_zero), dw and db
 * (or sets them: the step's first writer of the gradients, tasks/step.c). The bias is optional (the
 * GPT-2 head has none): b and db may be NULL. Operands fp32, or (the native bf16 path) the inputs
 * bf16 — inp, w and b in the forward; dout, inp and w in the backward — with fp32 accumulation in
 * oneDNN's bf16 tiles (kernels/matmul_bf16.c); out, dinp and (dw, db) are then fp32 or bf16 each. Or
 * (the emulated bf16 path, no fp32 working copy of the parameters) fp32 activations with bf16
 * w and b: inp, dout, out, dinp, dw, db fp32, each tile widening its slice of w exactly
 * (kernels/matmul.c: sz_k_matmul_fwd_wbf16 / _bwd_wbf16_set, the bits of the fp32 op on w widened).
 * The CUDA implementation takes fp32 operands only: the bf16-weight tasks are submitted to CPU
 * workers (sz_task_submit_cpu), also where CUDA workers exist — simpler than a device-side widening,
 * and correct with any CUDA bf16 support the device kernels gain (they never see these tasks). A
 * model with CUDA workers that wants its products on the GPU hands these ops fp32 weights (working
 * copies) instead. */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"
#include "sz_round.h"

struct matmul_args {
    int N, C, OC;
    int bf16;                  /* 1: the inputs are bf16 (sz_k_matmul_*_bf16) */
    int out_dt, dinp_dt, dparam_dt; /* sz_k_dtype of out (forward), dinp and (dw, db) (backward) */
    int wbf16;                 /* 1: fp32 inputs with bf16 w and b (sz_k_matmul_*_wbf16; bf16 is 0) */
    int round;                 /* backward: dw, db are bf16 gradients to round into (sz_round.h) */
};

enum { FWD_OUT, FWD_INP, FWD_W, FWD_B };
static void fwd_cpu(void *b[], void *arg)
{
    const struct matmul_args *a = sz_task_params(arg);
    int rc = a->wbf16 ? sz_k_matmul_fwd_wbf16(sz_task_ptr(b, arg, FWD_OUT), sz_task_ptr(b, arg, FWD_INP),
                                              sz_task_ptr(b, arg, FWD_W), sz_task_ptr(b, arg, FWD_B), a->N, a->C, a->OC)
             : a->bf16 ? sz_k_matmul_fwd_bf16(sz_task_ptr(b, arg, FWD_OUT), a->out_dt, sz_task_ptr(b, arg, FWD_INP),
                                            sz_task_ptr(b, arg, FWD_W), sz_task_ptr(b, arg, FWD_B), a->N, a->C, a->OC)
                     : sz_k_matmul_fwd(sz_task_ptr(b, arg, FWD_OUT), sz_task_ptr(b, arg, FWD_INP),
                                       sz_task_ptr(b, arg, FWD_W), sz_task_ptr(b, arg, FWD_B), a->N, a->C, a->OC);
    if (rc < 0)
        sz_task_fail_nomem(arg, "out of memory");
}

/* matmul_bwd's tensors; its tied variant (bwd_tied_cpu) has ROWS and IDS in place of DB */
enum { BWD_DINP, BWD_DW, BWD_DOUT, BWD_INP, BWD_W, BWD_DB, BWD_ROWS = BWD_DB, BWD_IDS };

/* The backward's dinp alone (the rounding variants: dw, db rounded after it) */
static int bwd_dinp(void *b[], void *arg, const struct matmul_args *a)
{
    int set = sz_task_sets(arg, BWD_DINP) ? SZ_K_SET_DINP : 0;
    void *dinp = sz_task_ptr(b, arg, BWD_DINP), *dout = sz_task_ptr(b, arg, BWD_DOUT),
         *inp = sz_task_ptr(b, arg, BWD_INP), *w = sz_task_ptr(b, arg, BWD_W);
    if (!dinp)
        return 0;
    return a->wbf16 ? sz_k_matmul_bwd_wbf16_set(dinp, NULL, NULL, dout, inp, w, a->N, a->C, a->OC, set)
           : a->bf16 ? sz_k_matmul_bwd_bf16_set(dinp, a->dinp_dt, NULL, NULL, SZ_K_F32, dout, inp, w, a->N, a->C,
                                                a->OC, set)
                     : sz_k_matmul_bwd_set(dinp, NULL, NULL, dout, inp, w, a->N, a->C, a->OC, set);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct matmul_args *a = sz_task_params(arg);
    if (a->round) { /* dinp, then dw, db rounded into the bf16 gradients tile by tile */
        int rc = bwd_dinp(b, arg, a);
        if (rc >= 0)
            rc = sz_round_dparams(b, arg, BWD_DW, BWD_DB, sz_task_ptr(b, arg, BWD_DOUT), sz_task_ptr(b, arg, BWD_INP),
                                  a->bf16 ? SZ_K_BF16 : SZ_K_F32, a->N, a->C, a->OC);
        if (rc < 0)
            sz_task_fail_nomem(arg, "out of memory");
        return;
    }
    int set = (sz_task_sets(arg, BWD_DINP) ? SZ_K_SET_DINP : 0) | /* a folded sz_op_zero of dinp */
              (sz_task_sets(arg, BWD_DW) ? SZ_K_SET_DW : 0) | /* the step's first writer of the gradients */
              (sz_task_sets(arg, BWD_DB) ? SZ_K_SET_DB : 0);
    int rc = a->wbf16 ? sz_k_matmul_bwd_wbf16_set(sz_task_ptr(b, arg, BWD_DINP), sz_task_ptr(b, arg, BWD_DW),
                                                  sz_task_ptr(b, arg, BWD_DB), sz_task_ptr(b, arg, BWD_DOUT),
                                                  sz_task_ptr(b, arg, BWD_INP), sz_task_ptr(b, arg, BWD_W), a->N, a->C,
                                                  a->OC, set)
             : a->bf16 ? sz_k_matmul_bwd_bf16_set(sz_task_ptr(b, arg, BWD_DINP), a->dinp_dt, sz_task_ptr(b, arg, BWD_DW),
                                                sz_task_ptr(b, arg, BWD_DB), a->dparam_dt, sz_task_ptr(b, arg, BWD_DOUT),
                                                sz_task_ptr(b, arg, BWD_INP), sz_task_ptr(b, arg, BWD_W), a->N, a->C,
                                                a->OC, set)
                     : sz_k_matmul_bwd_set(sz_task_ptr(b, arg, BWD_DINP), sz_task_ptr(b, arg, BWD_DW),
                                           sz_task_ptr(b, arg, BWD_DB), sz_task_ptr(b, arg, BWD_DOUT),
                                           sz_task_ptr(b, arg, BWD_INP), sz_task_ptr(b, arg, BWD_W), a->N, a->C, a->OC,
                                           set);
    if (rc < 0)
        sz_task_fail_nomem(arg, "out of memory");
}

/* The tied output layer's backward (sz_op_matmul_bwd_tied): dinp as matmul_bwd's; dw rounded into
 * the bf16 gradient with the task's rule except the ids' rows, left in fp32 in rows, the rule
 * after them (for sz_op_encoder_bwd_tied). */
static void bwd_tied_cpu(void *b[], void *arg)
{
    const struct matmul_args *a = sz_task_params(arg);
    const int32_t *ids = sz_task_ptr(b, arg, BWD_IDS);
    if (sz_task_check_ids(arg, "token", ids, a->N, a->OC))
        return;
    int32_t *slot = malloc((size_t)a->OC * sizeof *slot);
    int rc = slot ? bwd_dinp(b, arg, a) : -1, mode = sz_task_round_mode(arg, BWD_DW);
    float *rows = sz_task_ptr(b, arg, BWD_ROWS);
    if (rc >= 0) {
        sz_k_token_slots(slot, a->OC, ids, a->N);
        rc = sz_k_matmul_dweight_round_rows(sz_task_ptr(b, arg, BWD_DW), rows, slot, sz_task_ptr(b, arg, BWD_DOUT),
                                            sz_task_ptr(b, arg, BWD_INP), a->bf16 ? SZ_K_BF16 : SZ_K_F32, a->N, a->C,
                                            a->OC, mode);
        rows[sz_task_numel(arg, BWD_ROWS) - 1] = (float)mode; /* its last float: sz_tied_rows_numel */
    }
    free(slot);
    if (rc < 0)
        sz_task_fail_nomem(arg, "out of memory");
}

#if SZ_WITH_CUDA
/* cuBLAS with the operand types of the task (fp32, or bf16 inputs with fp32 accumulation and each
 * destination fp32 or bf16); the backward's dinp set rather than added to where the engine folded a
 * zero into the task, dw and db where the task is the step's first writer of them (as the CPU's). */
static void fwd_cuda(void *b[], void *arg)
{
    const struct matmul_args *a = sz_task_params(arg);
    if (sz_cuda_task_wbf16(arg, "matmul_fwd", a->wbf16))
        return;
    sz_cuda_task_rc(arg, "matmul_fwd",
                    sz_cuda_matmul_fwd_any(starpu_cublas_get_local_handle(), SZ_STREAM, sz_task_ptr(b, arg, FWD_OUT),
                                           a->out_dt, sz_task_ptr(b, arg, FWD_INP), sz_task_ptr(b, arg, FWD_W),
                                           sz_task_ptr(b, arg, FWD_B), a->bf16 ? SZ_CUDA_BF16 : SZ_CUDA_F32, a->N,
                                           a->C, a->OC));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct matmul_args *a = sz_task_params(arg);
    int set = (sz_task_sets(arg, BWD_DINP) ? SZ_CUDA_SET_A : 0) | (sz_task_sets(arg, BWD_DW) ? SZ_CUDA_SET_DW : 0) |
              (sz_task_sets(arg, BWD_DB) ? SZ_CUDA_SET_DB : 0);
    if (sz_cuda_task_wbf16(arg, "matmul_bwd", a->wbf16))
        return;
    sz_cuda_task_rc(arg, "matmul_bwd",
                    sz_cuda_matmul_bwd_any(starpu_cublas_get_local_handle(), SZ_STREAM, sz_task_ptr(b, arg, BWD_DINP),
                                           a->dinp_dt, sz_task_ptr(b, arg, BWD_DW), sz_task_ptr(b, arg, BWD_DB),
                                           a->dparam_dt, sz_task_ptr(b, arg, BWD_DOUT), sz_task_ptr(b, arg, BWD_INP),
                                           sz_task_ptr(b, arg, BWD_W), a->bf16 ? SZ_CUDA_BF16 : SZ_CUDA_F32, a->N,
                                           a->C, a->OC, set));
}
#endif

SZ_PERFMODEL(fwd_model, "sz_matmul_fwd");
SZ_PERFMODEL(bwd_model, "sz_matmul_bwd");
SZ_CODELET_CUDA(sz_cl_matmul_fwd, fwd_cpu, fwd_cuda, "matmul_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_matmul_fwd, SZ_TASK_MATMUL, SZ_CL_NATIVE | SZ_CL_CUDA_BF16, "out = inp . w^T [+ b]");
SZ_CODELET_CUDA(sz_cl_matmul_bwd, bwd_cpu, bwd_cuda, "matmul_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_matmul_bwd, SZ_TASK_MATMUL, SZ_CL_CUDA_SETS | SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "dinp, dw [, db] += from dout");
SZ_PERFMODEL(bwd_tied_model, "sz_matmul_bwd_tied");
SZ_CODELET(sz_cl_matmul_bwd_tied, bwd_tied_cpu, "matmul_bwd_tied", bwd_tied_model);
SZ_DESCRIBE(sz_cl_matmul_bwd_tied, SZ_TASK_MATMUL, 0,
            "dinp += from dout; dw rounded into bf16 but the ids' rows (fp32, in rows)");

/* kind 0: the fp32 kernels, 1: the bf16 ones, 2: the bf16-weight ones */
static int64_t host_bytes(int kind, int workers, int threads, int64_t rows, int n, const int64_t *in, const int64_t *out)
{
    if (rows < 1 || n < 0 || (n && (!in || !out)))
        return 0;
    int nthr = threads > 0 ? threads : 1;
    workers = workers > 0 ? workers : 1;
    void (*of)(int, int, int, int, size_t *, size_t *) =
        kind == 2 ? sz_k_matmul_wbf16_host_bytes : kind == 1 ? sz_k_matmul_bf16_host_bytes : sz_k_matmul_host_bytes;
    size_t scratch = 0, pack = 0;
    for (int i = 0; i < n; i++) {
        size_t s, p;
        of((int)rows, (int)in[i], (int)out[i], nthr, &s, &p);
        scratch = s > scratch ? s : scratch;
        pack = p > pack ? p : pack;
    }
    return (int64_t)(scratch + pack) * workers;
}

int64_t sz_matmul_host_bytes(int workers, int threads, int64_t rows, int n, const int64_t *in, const int64_t *out)
{
    return host_bytes(0, workers, threads, rows, n, in, out);
}

int64_t sz_matmul_host_bytes_bf16(int workers, int threads, int64_t rows, int n, const int64_t *in, const int64_t *out)
{
    return host_bytes(1, workers, threads, rows, n, in, out);
}

int64_t sz_matmul_host_bytes_wbf16(int workers, int threads, int64_t rows, int n, const int64_t *in, const int64_t *out)
{
    return host_bytes(2, workers, threads, rows, n, in, out);
}

int64_t sz_matmul_round_host_bytes(int workers, int n, const int64_t *in, const int64_t *out)
{
    if (n < 0 || (n && (!in || !out)))
        return 0;
    size_t most = 0;
    for (int i = 0; i < n; i++) {
        size_t b = sz_k_matmul_dparams_round_bytes((int)in[i], (int)out[i]);
        most = b > most ? b : most;
    }
    return (int64_t)most * (workers > 0 ? workers : 1);
}

static sz_status check_shape(sz_unit *u, const char *op, int N, int C, int OC)
{
    if (N < 1 || C < 1 || OC < 1)
        return sz_task_refuse(u, op, "N, C, OC must be >= 1 (got %d, %d, %d)", N, C, OC);
    return SZ_OK;
}

/* out's and inp's gradients of inp's type (what matmul_bwd reads beside inp) */
static const sz_grad_spec matmul_grads[] = {{SZ_GRAD_OUTPUT, 2}, {SZ_GRAD_INPUT, 2}, {SZ_GRAD_INPUT, 0},
                                             {SZ_GRAD_INPUT, 0}};
/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status matmul_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct matmul_args *a = sz_record_params(r);
    const sz_op_record *p = r->fused_from; /* inp is matmul_gelu's GELU output: its pre-GELU gradient, set */
    if (p)
        return sz_op_gelu_matmul_bwd(u, sz_record_grad(u, p, 0), SZ_RG(2), SZ_RG(3), SZ_RG(0), SZ_RT(1), SZ_RT(2),
                                     sz_record_tensor(p, 0), a->N, a->C, a->OC);
    sz_tensor *dw = SZ_RG(2); /* a tied weight rounded by its writers: the shared rows stay fp32 */
    if (r->tied && r->tied_with && sz_tensor_dtype(dw) == SZ_DTYPE_BF16 && !r->t[3].tensor)
        return sz_op_matmul_bwd_tied(u, SZ_RG(1), dw, r->tied, SZ_RG(0), SZ_RT(1), SZ_RT(2),
                                     sz_record_tensor(r->tied_with, 1), a->N, a->C, a->OC);
    return sz_op_matmul_bwd(u, SZ_RG(1), dw, SZ_RG(3), SZ_RG(0), SZ_RT(1), SZ_RT(2), a->N, a->C, a->OC);
}

sz_status sz_op_matmul_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, sz_tensor *w, sz_tensor *b, int N, int C,
                           int OC)
{
    sz_status st = check_shape(u, "matmul_fwd", N, C, OC);
    if (st != SZ_OK)
        return st;
    /* the inputs' type is inp's: w and b match it (out is then either), or inp is fp32 and w, b are
     * bf16 (out fp32) */
    sz_dtype in = sz_fb(inp), wt = in == SZ_DTYPE_F32 ? sz_fb(w) : in,
             od = in == SZ_DTYPE_BF16 ? sz_fb(out) : SZ_DTYPE_F32;
    int mixed = in != wt;
    struct matmul_args a = {N, C, OC, in == SZ_DTYPE_BF16, od == SZ_DTYPE_BF16, 0, 0, mixed, 0};
    sz_task_tensor t[] = {{out, SZ_WRITE, od, (int64_t)N * OC, "out", 0},
                          {inp, SZ_READ, in, (int64_t)N * C, "inp", 0},
                          {w, SZ_READ, wt, (int64_t)OC * C, "w", 0},
                          {b, SZ_READ, wt, OC, "b", 1}};
    st = (mixed ? sz_task_submit_diff_cpu : sz_task_submit_diff)(u, &sz_cl_matmul_fwd, "matmul_fwd", t, 4, &a, sizeof a,
                                                                 matmul_grads, matmul_fwd_grad);
    struct sz_op_record *r = st == SZ_OK ? sz_tape_last(u) : NULL;
    if (r) /* its backward can take a GELU that wrote inp along (matmul_gelu_fwd) */
        r->absorbs_pos = 1;
    return st;
}

sz_status sz_op_matmul_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *db, sz_tensor *dout,
                           sz_tensor *inp, sz_tensor *w, int N, int C, int OC)
{
    sz_status st = check_shape(u, "matmul_bwd", N, C, OC);
    if (st != SZ_OK)
        return st;
    /* the inputs' type is dout's: inp and w match it (dinp and (dw, db) are then either), or dout and
     * inp are fp32 and w is bf16 (dinp, dw, db fp32) */
    sz_dtype in = sz_fb(dout), wt = in == SZ_DTYPE_F32 ? sz_fb(w) : in,
             di = in == SZ_DTYPE_BF16 ? sz_fb(dinp) : SZ_DTYPE_F32,
             dp = in == SZ_DTYPE_BF16 ? sz_fb(dw) : SZ_DTYPE_F32;
    /* or dw, db the bf16 gradients of a unit that rounds into them (either path; CPU workers) */
    int mixed = in != wt, round = sz_round_wanted(u, dw);
    dp = round ? SZ_DTYPE_BF16 : dp;
    struct matmul_args a = {N, C, OC, in == SZ_DTYPE_BF16, 0, di == SZ_DTYPE_BF16, dp == SZ_DTYPE_BF16, mixed, round};
    sz_task_tensor t[] = {{dinp, SZ_ACCUMULATE_OR_SET, di, (int64_t)N * C, "dinp", 0},
                          {dw, SZ_ACCUMULATE_OR_SET, dp, (int64_t)OC * C, "dw", 0},
                          {dout, SZ_READ, in, (int64_t)N * OC, "dout", 0},
                          {inp, SZ_READ, in, (int64_t)N * C, "inp", 0},
                          {w, SZ_READ, wt, (int64_t)OC * C, "w", 0},
                          {db, SZ_ACCUMULATE_OR_SET, dp, OC, "db", 1}};
    return (mixed || round ? sz_task_submit_cpu : sz_task_submit)(u, &sz_cl_matmul_bwd, "matmul_bwd", t, 6, &a,
                                                                  sizeof a);
}

int64_t sz_tied_rows_numel(int64_t B, int64_t T, int64_t V, int64_t C)
{
    int64_t N = B * T;
    return B < 1 || T < 1 || V < 1 || C < 1 ? 0 : ((N < V ? N : V) + T) * C + 1;
}

sz_status sz_op_matmul_bwd_tied(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *rows, sz_tensor *dout,
                                sz_tensor *inp, sz_tensor *w, sz_tensor *ids, int N, int C, int OC)
{
    sz_status st = check_shape(u, "matmul_bwd_tied", N, C, OC);
    if (st != SZ_OK)
        return st;
    /* as matmul_bwd's: the inputs' type is dout's, or fp32 dout and inp with a bf16 w; dw bf16 */
    sz_dtype in = sz_fb(dout), wt = in == SZ_DTYPE_F32 ? sz_fb(w) : in,
             di = in == SZ_DTYPE_BF16 ? sz_fb(dinp) : SZ_DTYPE_F32;
    struct matmul_args a = {N, C, OC, in == SZ_DTYPE_BF16, 0, di == SZ_DTYPE_BF16, 1, in != wt, 1};
    sz_task_tensor t[] = {{dinp, SZ_ACCUMULATE_OR_SET, di, (int64_t)N * C, "dinp", 0},
                          {dw, SZ_ACCUMULATE_OR_SET, SZ_DTYPE_BF16, (int64_t)OC * C, "dw", 0},
                          {dout, SZ_READ, in, (int64_t)N * OC, "dout", 0},
                          {inp, SZ_READ, in, (int64_t)N * C, "inp", 0},
                          {w, SZ_READ, wt, (int64_t)OC * C, "w", 0},
                          {rows, SZ_WRITE, SZ_DTYPE_F32, (N < OC ? N : OC) * (int64_t)C + 1, "rows", 0},
                          {ids, SZ_READ, SZ_DTYPE_I32, N, "ids", 0}};
    return sz_task_submit_cpu(u, &sz_cl_matmul_bwd_tied, "matmul_bwd_tied", t, 7, &a, sizeof a);
}
