/* apps/llama/llama_internal.h — what llama.c and llama_spec.c share: the activation tables, so
 * that the tensors the model allocates and the estimator's count are written once. */
#ifndef SZ_LLAMA_INTERNAL_H
#define SZ_LLAMA_INTERNAL_H

#include "starzero_llama.h"

/* The size of an activation, in elements, for a micro-batch of N = B·T rows. */
typedef enum { LL_N, LL_NC, LL_N3C, LL_NF, LL_BNHT2, LL_NV } ll_size;

/* One block's forward tensors (sz_model_activation: shared by the blocks under checkpointing). */
enum {
    LL_RMS1, LL_RSTD1, LL_QKV, LL_ATTY, LL_STATS, LL_ATTPROJ, LL_RES2, LL_RMS2, LL_RSTD2, LL_GATE, LL_UP,
    LL_H, LL_DOWN, LL_NBLOCK
};
/* The head's forward tensors. */
enum { LL_RMSF, LL_RSTDF, LL_LOGITS, LL_LOSSES, LL_NHEAD }; /* logits: dlogits after the head's forward */

/* The gradient scratch (shared by the blocks, whose backwards run one after the other) and the
 * head's gradient of its norm (dlogits is the logits tensor itself: the fused softmax-cross-entropy
 * overwrites it). */
enum {
    LL_DRMS1, LL_DRQKV, LL_DQKV, LL_DATTY, LL_DATTPROJ, LL_DRES2, LL_DRMS2, LL_DGATE, LL_DUP, LL_DH, LL_DDOWN,
    LL_DRMSF, LL_NGRAD
};

typedef struct {
    const char *name;
    ll_size size;
    int bf16; /* 1: bf16 on the native bf16 path (sz_resolved_precision.native): an activation a matmul reads,
                 the logits, or a gradient a matmul reads or writes; 0: always fp32 */
} ll_act;

extern const ll_act sz_llama_block_acts[LL_NBLOCK];
extern const ll_act sz_llama_head_acts[LL_NHEAD];
extern const ll_act sz_llama_grad_acts[LL_NGRAD];
double sz_llama_size(const sz_llama_config *cfg, ll_size s, int B, int T);
/* sz_llama_activation_bytes on one of nm tensor-parallel ranks (Megatron's split; nm = 1 gives it),
 * with P_a (pa: needs checkpoint) keeping each block input as a 1/nm slice (llama_spec.c). */
double sz_llama_activation_bytes_mp(const sz_llama_config *c, int B, int T, int checkpoint, int offload, int nm,
                                    int pa);
/* An entry's element type: bf16 where it says so and the model computes natively, else fp32. */
static inline sz_dtype sz_llama_dtype(const ll_act *a, int native) { return native && a->bf16 ? SZ_DTYPE_BF16 : SZ_DTYPE_F32; }

#endif
