/* codelets/sz_round.h — the ops' side of mixed precision's gradient rounding folded into the
 * gradients' writers (graph/sz_plan.h fold_round, issue 16): a unit with sz_unit.rounded hands its
 * ops the bf16 gradients; each op computes its parameter gradients in fp32 exactly as the first
 * writer of an fp32 working gradient would (set, from zero) and rounds them into the bf16 ones with
 * the GRAD_CONVERT's rule the task carries (sz_task_round_mode: SET, ONTO_ZEROS, ADD), so the bits
 * equal writer + GRAD_CONVERT. The linear layers round tile by tile (kernels/matmul_round.c); the
 * norms' C-float gradients go through a small fp32 scratch and sz_k_convert (these helpers). */
#ifndef SZ_ROUND_H
#define SZ_ROUND_H
#include <stdlib.h>
#include "sz_core.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"

/* 1 when the op's parameter gradient dw (bf16) is one to round into (the unit's are) */
static inline int sz_round_wanted(const sz_unit *u, const sz_tensor *dw)
{
    return sz_unit_rounds(u) && dw && dw->dtype == SZ_DTYPE_BF16;
}

/* tensor k (bf16, may be absent) of the task from n fp32 values with its rule */
static inline void sz_round_into(void *b[], const void *arg, int k, const float *src, size_t n)
{
    void *dst = sz_task_ptr(b, arg, k);
    if (dst)
        sz_k_convert(dst, SZ_K_BF16, src, SZ_K_F32, n, sz_task_round_mode(arg, k));
}

/* A norm's backward into the given parameter gradients dw and db (NULL: none) with the extra
 * SZ_K_SET_* flags `set` (its codelet's bwd_run). */
typedef void (*sz_round_norm_run)(void *b[], void *arg, void *dw, void *db, int set);

/* A norm's bwd_cpu: run into the task's own parameter gradients (tensors kw and kb; kb < 0: no
 * bias), or (round) set them in an fp32 scratch as a first writer would and round that into the
 * bf16 ones with the task's rule. */
static inline void sz_round_norm_bwd(void *b[], void *arg, sz_round_norm_run run, int round, int kw, int kb, int C)
{
    void *db = kb >= 0 ? sz_task_ptr(b, arg, kb) : NULL;
    if (!round) {
        run(b, arg, sz_task_ptr(b, arg, kw), db, 0);
        return;
    }
    float *s = sz_round_scratch(arg, (size_t)(kb >= 0 ? 2 : 1) * C);
    if (!s)
        return;
    run(b, arg, s, db ? s + C : NULL, SZ_K_SET_DW | (kb >= 0 ? SZ_K_SET_DB : 0));
    sz_round_into(b, arg, kw, s, (size_t)C);
    if (kb >= 0)
        sz_round_into(b, arg, kb, s + C, (size_t)C);
    free(s);
}

/* the linear layer's dweight (tensor kw) and dbias (kb) from dout[N,OC] and inp[N,C] (in_dt) */
static inline int sz_round_dparams(void *b[], const void *arg, int kw, int kb, const void *dout, const void *inp,
                                   sz_k_dtype in_dt, int N, int C, int OC)
{
    uint16_t *dw = sz_task_ptr(b, arg, kw), *db = sz_task_ptr(b, arg, kb);
    int mw = sz_task_round_mode(arg, kw), mb = sz_task_round_mode(arg, kb);
    if (!dw || !db || mw == mb)
        return sz_k_matmul_dparams_round(dw, db, dout, inp, in_dt, N, C, OC, dw ? mw : mb);
    int r = sz_k_matmul_dparams_round(dw, NULL, dout, inp, in_dt, N, C, OC, mw);
    return r < 0 ? r : sz_k_matmul_dparams_round(NULL, db, dout, inp, in_dt, N, C, OC, mb);
}
#endif
