/* codelets/matmul_gelu.c — the linear layer fused with the GELU around it (GPT-2's MLP), two ops
 * with the bits of the separate ones (kernels/matmul_gelu.c):
 *   matmul_gelu_fwd: out = inp . w^T (+ b) and gout = gelu(out), each output tile's GELU right
 *     after its product (the fc layer: fch and fch_gelu; matmul_fwd + gelu_fwd);
 *   gelu_matmul_bwd: the backward of a linear layer whose input inp was gelu(pre) (the fc
 *     projection): dinp = gelu'(pre) * (dout . w) OVERWRITTEN tile by tile, so the product (dfch_gelu)
 *     is no tensor; dw, db accumulate, or are set by the step's first writer of the gradients
 *     (matmul_bwd of a zeroed scratch + gelu_bwd of a zeroed dinp).
 * Operands fp32, or (the native bf16 path) bf16 inputs as matmul.c's; out and pre are fp32 (GELU
 * reads fp32), gout, dinp and (dw, db) fp32 or bf16. Or, as matmul.c's, fp32 activations with bf16
 * w and b (the emulated bf16 path): everything else fp32 (gout either), the weight widened tile by
 * tile, and the task on CPU workers only (sz_task_submit_cpu). The CUDA implementations (every type
 * combination but that CPU-only one) run cuBLAS's product and then an elementwise GELU epilogue on the
 * worker's stream: the product written into dinp (in dinp's type, as the CPU's scratch), then GELU's
 * backward in place. */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"
#include "sz_round.h"

struct matmul_gelu_args {
    int N, C, OC;
    int bf16;                        /* 1: the inputs are bf16 */
    int gout_dt, dinp_dt, dparam_dt; /* sz_k_dtype of gout (forward), dinp and (dw, db) (backward) */
    int wbf16;                       /* 1: fp32 inputs with bf16 w and b (bf16 is 0) */
    int round;                       /* backward: dw, db are bf16 gradients to round into (sz_round.h) */
};

enum { FWD_OUT, FWD_GOUT, FWD_INP, FWD_W, FWD_B };
static void fwd_cpu(void *b[], void *arg)
{
    const struct matmul_gelu_args *a = sz_task_params(arg);
    if (sz_k_matmul_gelu_fwd(sz_task_ptr(b, arg, FWD_OUT), sz_task_ptr(b, arg, FWD_GOUT), a->gout_dt,
                             sz_task_ptr(b, arg, FWD_INP), sz_task_ptr(b, arg, FWD_W), sz_task_ptr(b, arg, FWD_B),
                             a->bf16 ? SZ_K_BF16 : SZ_K_F32, a->bf16 || a->wbf16 ? SZ_K_BF16 : SZ_K_F32, a->N, a->C,
                             a->OC) < 0)
        sz_task_fail_nomem(arg, "out of memory");
}

enum { BWD_DINP, BWD_DW, BWD_DOUT, BWD_INP, BWD_W, BWD_PRE, BWD_DB };
static void bwd_cpu(void *b[], void *arg)
{
    const struct matmul_gelu_args *a = sz_task_params(arg);
    if (a->round) { /* dinp as below, then dw, db (the matmul's: inp is gelu(pre)) rounded tile by tile */
        void *dout = sz_task_ptr(b, arg, BWD_DOUT), *inp = sz_task_ptr(b, arg, BWD_INP);
        int rc = sz_k_gelu_matmul_bwd_set(sz_task_ptr(b, arg, BWD_DINP), a->dinp_dt, NULL, NULL, SZ_K_F32, dout, inp,
                                          sz_task_ptr(b, arg, BWD_W), sz_task_ptr(b, arg, BWD_PRE),
                                          a->bf16 ? SZ_K_BF16 : SZ_K_F32, a->bf16 || a->wbf16 ? SZ_K_BF16 : SZ_K_F32,
                                          a->N, a->C, a->OC, 0);
        if (rc >= 0)
            rc = sz_round_dparams(b, arg, BWD_DW, BWD_DB, dout, inp, a->bf16 ? SZ_K_BF16 : SZ_K_F32, a->N, a->C, a->OC);
        if (rc < 0)
            sz_task_fail_nomem(arg, "out of memory");
        return;
    }
    /* the step's first writer of a parameter's gradient (tasks/step.c) */
    int set = (sz_task_sets(arg, BWD_DW) ? SZ_K_SET_DW : 0) | (sz_task_sets(arg, BWD_DB) ? SZ_K_SET_DB : 0);
    if (sz_k_gelu_matmul_bwd_set(sz_task_ptr(b, arg, BWD_DINP), a->dinp_dt, sz_task_ptr(b, arg, BWD_DW),
                             sz_task_ptr(b, arg, BWD_DB), a->dparam_dt, sz_task_ptr(b, arg, BWD_DOUT),
                             sz_task_ptr(b, arg, BWD_INP), sz_task_ptr(b, arg, BWD_W), sz_task_ptr(b, arg, BWD_PRE),
                             a->bf16 ? SZ_K_BF16 : SZ_K_F32, a->bf16 || a->wbf16 ? SZ_K_BF16 : SZ_K_F32, a->N, a->C,
                             a->OC, set) < 0)
        sz_task_fail_nomem(arg, "out of memory");
}

#if SZ_WITH_CUDA
/* cuBLAS's product with the task's operand types, then GELU (forward) or GELU's backward in place
 * on dinp (kernels/cuda/matmul.cu) on the worker's stream */
static void fwd_cuda(void *b[], void *arg)
{
    const struct matmul_gelu_args *a = sz_task_params(arg);
    if (sz_cuda_task_wbf16(arg, "matmul_gelu_fwd", a->wbf16))
        return;
    sz_cuda_task_rc(arg, "matmul_gelu_fwd",
                    sz_cuda_matmul_gelu_fwd(starpu_cublas_get_local_handle(), SZ_STREAM, sz_task_ptr(b, arg, FWD_OUT),
                                            sz_task_ptr(b, arg, FWD_GOUT), a->gout_dt, sz_task_ptr(b, arg, FWD_INP),
                                            sz_task_ptr(b, arg, FWD_W), sz_task_ptr(b, arg, FWD_B),
                                            a->bf16 ? SZ_CUDA_BF16 : SZ_CUDA_F32, a->N, a->C, a->OC));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct matmul_gelu_args *a = sz_task_params(arg);
    int set = (sz_task_sets(arg, BWD_DW) ? SZ_CUDA_SET_DW : 0) | (sz_task_sets(arg, BWD_DB) ? SZ_CUDA_SET_DB : 0);
    if (sz_cuda_task_wbf16(arg, "gelu_matmul_bwd", a->wbf16))
        return;
    sz_cuda_task_rc(arg, "gelu_matmul_bwd",
                    sz_cuda_gelu_matmul_bwd_set(starpu_cublas_get_local_handle(), SZ_STREAM,
                                                sz_task_ptr(b, arg, BWD_DINP), a->dinp_dt, sz_task_ptr(b, arg, BWD_DW),
                                                sz_task_ptr(b, arg, BWD_DB), a->dparam_dt,
                                                sz_task_ptr(b, arg, BWD_DOUT), sz_task_ptr(b, arg, BWD_INP),
                                                sz_task_ptr(b, arg, BWD_W), sz_task_ptr(b, arg, BWD_PRE),
                                                a->bf16 ? SZ_CUDA_BF16 : SZ_CUDA_F32, a->N, a->C, a->OC, set));
}
#endif

SZ_PERFMODEL(fwd_model, "sz_matmul_gelu_fwd");
SZ_PERFMODEL(bwd_model, "sz_gelu_matmul_bwd");
SZ_CODELET_CUDA(sz_cl_matmul_gelu_fwd, fwd_cpu, fwd_cuda, "matmul_gelu_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_matmul_gelu_fwd, SZ_TASK_MATMUL, SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "out = inp . w^T [+ b]; gout = gelu(out), tile by tile");
SZ_CODELET_CUDA(sz_cl_gelu_matmul_bwd, bwd_cpu, bwd_cuda, "gelu_matmul_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_gelu_matmul_bwd, SZ_TASK_MATMUL, SZ_CL_CUDA_SETS | SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "dinp = gelu'(pre) * (dout . w), tile by tile; dw [, db] +=");

static sz_status check_shape(sz_unit *u, const char *op, int N, int C, int OC)
{
    if (N < 1 || C < 1 || OC < 1)
        return sz_task_refuse(u, op, "N, C, OC must be >= 1 (got %d, %d, %d)", N, C, OC);
    return SZ_OK;
}

/* out (the pre-GELU values) gets its gradient from gout's: GELU's backward here, or the matmul that
 * reads gout (gelu_matmul_bwd, which sets it); both of inp's type, as matmul_bwd reads them */
static const sz_grad_spec matmul_gelu_grads[] = {{SZ_GRAD_INTERNAL, 3}, {SZ_GRAD_OUTPUT, 3}, {SZ_GRAD_INPUT, 3},
                                                 {SZ_GRAD_INPUT, 0},    {SZ_GRAD_INPUT, 0}};
/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status matmul_gelu_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct matmul_gelu_args *a = sz_record_params(r);
    if (!r->fused_into) {
        sz_status st = sz_op_gelu_bwd(u, SZ_RG(0), SZ_RT(0), SZ_RG(1), (int64_t)a->N * a->OC);
        if (st != SZ_OK)
            return st;
    }
    return sz_op_matmul_bwd(u, SZ_RG(2), SZ_RG(3), SZ_RG(4), SZ_RG(0), SZ_RT(2), SZ_RT(3), a->N, a->C, a->OC);
}

sz_status sz_op_matmul_gelu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *gout, sz_tensor *inp, sz_tensor *w,
                                sz_tensor *b, int N, int C, int OC)
{
    sz_status st = check_shape(u, "matmul_gelu_fwd", N, C, OC);
    if (st != SZ_OK)
        return st;
    /* the inputs' type is inp's: w and b match it, or inp is fp32 and w, b bf16; out is fp32 (GELU's
     * input), gout either */
    sz_dtype in = sz_fb(inp), wt = in == SZ_DTYPE_F32 ? sz_fb(w) : in;
    int mixed = in != wt;
    int64_t no = (int64_t)N * OC;
    struct matmul_gelu_args a = {N, C, OC, in == SZ_DTYPE_BF16, sz_kdt(gout), 0, 0, mixed, 0};
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, no, "out", 0},
                          {gout, SZ_WRITE, sz_fb(gout), no, "gout", 0},
                          {inp, SZ_READ, in, (int64_t)N * C, "inp", 0},
                          {w, SZ_READ, wt, (int64_t)OC * C, "w", 0},
                          {b, SZ_READ, wt, OC, "b", 1}};
    st = (mixed ? sz_task_submit_diff_cpu : sz_task_submit_diff)(u, &sz_cl_matmul_gelu_fwd, "matmul_gelu_fwd", t, 5,
                                                                 &a, sizeof a, matmul_gelu_grads, matmul_gelu_fwd_grad);
    struct sz_op_record *r = st == SZ_OK ? sz_tape_last(u) : NULL;
    if (r) /* a matmul reading gout alone differentiates the GELU too (gelu_matmul_bwd) */
        r->fusable_pos = 1;
    return st;
}

sz_status sz_op_gelu_matmul_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *db, sz_tensor *dout,
                                sz_tensor *inp, sz_tensor *w, sz_tensor *pre, int N, int C, int OC)
{
    sz_status st = check_shape(u, "gelu_matmul_bwd", N, C, OC);
    if (st != SZ_OK)
        return st;
    /* as matmul_bwd: the inputs' type is dout's (w's too, or dout and inp fp32 with w bf16); dinp and
     * (dw, db) are either for bf16 inputs, else fp32; pre is fp32 */
    sz_dtype in = sz_fb(dout), wt = in == SZ_DTYPE_F32 ? sz_fb(w) : in,
             di = in == SZ_DTYPE_BF16 ? sz_fb(dinp) : SZ_DTYPE_F32,
             dp = in == SZ_DTYPE_BF16 ? sz_fb(dw) : SZ_DTYPE_F32;
    /* or dw, db the bf16 gradients of a unit that rounds into them (either path; CPU workers) */
    int mixed = in != wt, round = sz_round_wanted(u, dw);
    dp = round ? SZ_DTYPE_BF16 : dp;
    int64_t ni = (int64_t)N * C;
    struct matmul_gelu_args a = {N, C, OC, in == SZ_DTYPE_BF16, 0, di == SZ_DTYPE_BF16, dp == SZ_DTYPE_BF16, mixed,
                                 round};
    sz_task_tensor t[] = {{dinp, SZ_WRITE, di, ni, "dinp", 0},
                          {dw, SZ_ACCUMULATE_OR_SET, dp, (int64_t)OC * C, "dw", 0},
                          {dout, SZ_READ, in, (int64_t)N * OC, "dout", 0},
                          {inp, SZ_READ, in, ni, "inp", 0},
                          {w, SZ_READ, wt, (int64_t)OC * C, "w", 0},
                          {pre, SZ_READ, SZ_DTYPE_F32, ni, "pre", 0},
                          {db, SZ_ACCUMULATE_OR_SET, dp, OC, "db", 1}};
    return (mixed || round ? sz_task_submit_cpu : sz_task_submit)(u, &sz_cl_gelu_matmul_bwd, "gelu_matmul_bwd", t, 7,
                                                                  &a, sizeof a);
}
