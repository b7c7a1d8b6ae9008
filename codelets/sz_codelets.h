/* codelets/sz_codelets.h — what StarZeRO's codelets share (one file per operation in codelets/:
 * its typed wrapper, its own argument struct, its codelet with a CPU implementation, a CUDA one
 * where written, and a history-based perf model).
 *
 * Every codelet takes a variable number of vector buffers and the cl_arg that sz_task_submit
 * packs (include/starzero_starpu.h): a sz_task_layout (tensor k -> buffer, offset, size, dtype)
 * followed by the op's own argument struct; kernels read them with sz_task_params / sz_task_ptr.
 * Internal to the library and its tests. */
#ifndef SZ_CODELETS_H
#define SZ_CODELETS_H

#include "sz_core.h"

/* The codelets of codelets/, one line each (each described beside its definition: SZ_DESCRIBE,
 * core/sz_core.h). tasks/registry.c lists these and the engine's own for sz-info --codelets. */
#define SZ_CODELETS(X) \
    X(sz_cl_scale) \
    X(sz_cl_encoder_fwd) \
    X(sz_cl_encoder_bwd) \
    X(sz_cl_encoder_bwd_tied) \
    X(sz_cl_layernorm_fwd) \
    X(sz_cl_layernorm_bwd) \
    X(sz_cl_matmul_fwd) \
    X(sz_cl_matmul_bwd) \
    X(sz_cl_matmul_bwd_tied) \
    X(sz_cl_attention_fwd) \
    X(sz_cl_attention_bwd) \
    X(sz_cl_gelu_fwd) \
    X(sz_cl_gelu_bwd) \
    X(sz_cl_matmul_gelu_fwd) \
    X(sz_cl_gelu_matmul_bwd) \
    X(sz_cl_residual_fwd) \
    X(sz_cl_residual_bwd) \
    X(sz_cl_softmax_xent_fwd) \
    X(sz_cl_softmax_xent_bwd) \
    X(sz_cl_softmax_xent_fused) \
    X(sz_cl_residual_layernorm_fwd) \
    X(sz_cl_layernorm_residual_bwd) \
    X(sz_cl_rmsnorm_fwd) \
    X(sz_cl_rmsnorm_bwd) \
    X(sz_cl_residual_rmsnorm_fwd) \
    X(sz_cl_rmsnorm_residual_bwd) \
    X(sz_cl_silu_fwd) \
    X(sz_cl_silu_bwd) \
    X(sz_cl_mul_fwd) \
    X(sz_cl_mul_bwd) \
    X(sz_cl_swiglu_fwd) \
    X(sz_cl_swiglu_bwd) \
    X(sz_cl_rope_fwd) \
    X(sz_cl_rope_bwd) \
    X(sz_cl_embedding_fwd) \
    X(sz_cl_embedding_bwd) \
    X(sz_cl_embedding_bwd_round) \
    X(sz_cl_mse_fwd) \
    X(sz_cl_mse_bwd) \
    X(sz_cl_sumsq) \
    X(sz_cl_adamw) \
    X(sz_cl_adamw_mixed) \
    X(sz_cl_sgd) \
    X(sz_cl_sgd_mixed)
#define SZ_DECLARE_CODELET(var) extern struct starpu_codelet var;
SZ_CODELETS(SZ_DECLARE_CODELET)

/* The optimizer updates and their helpers, submitted by tasks/optimizer.c on views of a unit's
 * owned range. sumsq: out = the squared norm of x (one float). */
sz_status sz_submit_sumsq(sz_unit *u, const sz_tensor *out, const sz_tensor *x, const char *name);
/* AdamW on a view; norm (one float, or NULL): the gradient's squared norm taken in the same pass,
 * written there (acc 0) or added to it (acc 1). */
sz_status sz_submit_adamw(sz_unit *u, const sz_tensor *p, const sz_tensor *g, const sz_tensor *m, const sz_tensor *v,
                          const sz_tensor *scale, const sz_tensor *norm, int acc, const sz_train_config *cfg, float wd,
                          int t, const char *name);
sz_status sz_submit_adamw_mixed(sz_unit *u, const sz_tensor *master, const sz_tensor *p, const sz_tensor *g,
                                const sz_tensor *m, const sz_tensor *v, const sz_tensor *scale, const sz_tensor *norm,
                                int acc, const sz_train_config *cfg, float wd, int t, const char *name);
/* codelets/sgd.c: SGD with momentum (PyTorch's) on a view; buf NULL without momentum; master
 * (fp32) with bf16 p and g under mixed precision, else NULL. norm as AdamW's. */
sz_status sz_submit_sgd(sz_unit *u, const sz_tensor *master, const sz_tensor *p, const sz_tensor *g,
                        const sz_tensor *buf, const sz_tensor *scale, const sz_tensor *norm, int acc, float lr,
                        float momentum, float wd, const char *name);
/* codelets/scale.c: x *= alpha (tests of the runtime and of CUDA); where: 0 any worker, else
 * STARPU_CPU / STARPU_CUDA. */
sz_status sz_submit_scale(const sz_tensor *x, float alpha, const char *name, uint32_t where);

/* codelets/adamw.c: AdamW's fused gradient norm into the float at out (acc: add to it); s = -1:
 * out of memory. */
void sz_adamw_put_sumsq(float *out, int acc, double s);

#endif
