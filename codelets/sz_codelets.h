/* codelets/sz_codelets.h — the StarPU codelets of StarZeRO (one file per operation in codelets/),
 * each with its CPU implementation, a CUDA one where written, and a history-based perf model.
 * Shapes travel as one packed struct per task (STARPU_VALUE); buffers are vector handles.
 * Internal to the library and its tests. */
#ifndef SZ_CODELETS_H
#define SZ_CODELETS_H

#include <starpu.h>

/* The float / int pointer of buffer i inside a codelet. */
#define SZ_BUF_F(buffers, i) ((float *)STARPU_VECTOR_GET_PTR((buffers)[i]))
#define SZ_BUF_I(buffers, i) ((int *)STARPU_VECTOR_GET_PTR((buffers)[i]))
#define SZ_BUF_N(buffers, i) ((size_t)STARPU_VECTOR_GET_NX((buffers)[i]))

/* Shape arguments shared by the GPT-2 codelets (unused fields are 0). */
struct sz_shape {
    int B, T, C, NH, N, OC, V, Vp;
    int64_t n;
};

/* AdamW hyper-parameters of one update task. */
struct sz_adamw_args {
    float lr, beta1, beta2, eps, wd;
    int t;
};

/* One history-based perf model per codelet, named after it. */
#define SZ_PERFMODEL(var, sym) static struct starpu_perfmodel var = {.type = STARPU_HISTORY_BASED, .symbol = sym}

/* scale: x[i] *= alpha on one float vector (RW); alpha a STARPU_VALUE float. Has a CUDA version. */
extern struct starpu_codelet sz_cl_scale;
/* zero: fill one vector (W) with zero bytes. */
extern struct starpu_codelet sz_cl_zero;
/* encoder (token + position embedding): fwd W out, R tokens, R wte, R wpe; bwd RW dwte, RW dwpe, R dout, R tokens */
extern struct starpu_codelet sz_cl_encoder_fwd, sz_cl_encoder_bwd;
/* layernorm: fwd W out, W mean, W rstd, R inp, R w, R b; bwd RW dinp, RW dw, RW db, R dout, R inp, R w, R mean, R rstd */
extern struct starpu_codelet sz_cl_layernorm_fwd, sz_cl_layernorm_bwd;
/* matmul (variable buffers): fwd W out, R inp, R w [, R b]; bwd R dout, R inp, R w, RW dinp, RW dw [, RW db] */
extern struct starpu_codelet sz_cl_matmul_fwd, sz_cl_matmul_bwd;
/* attention: fwd W out, W preatt, W att, R inp; bwd RW dinp, R dout, R inp, R att */
extern struct starpu_codelet sz_cl_attention_fwd, sz_cl_attention_bwd;
/* gelu: fwd W out, R inp; bwd RW dinp, R inp, R dout */
extern struct starpu_codelet sz_cl_gelu_fwd, sz_cl_gelu_bwd;
/* residual: fwd W out, R a, R b; bwd RW da, RW db, R dout */
extern struct starpu_codelet sz_cl_residual_fwd, sz_cl_residual_bwd;
/* softmax + cross-entropy: fwd W losses, W probs, R logits, R targets; bwd W dlogits, R probs, R targets */
extern struct starpu_codelet sz_cl_softmax_xent_fwd, sz_cl_softmax_xent_bwd;
/* sumsq (variable buffers): W out (one float) = sum of squares of every R vector after it */
extern struct starpu_codelet sz_cl_sumsq;
/* clip_scale (variable buffers): W scale (one float) from R partial sums of squares; arg: clip */
extern struct starpu_codelet sz_cl_clip_scale;
/* adamw: RW param, R grad, RW m, RW v, R scale (grads are multiplied by scale first) */
extern struct starpu_codelet sz_cl_adamw;

#endif
