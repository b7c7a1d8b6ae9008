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

#include <mpi.h>
#include <starpu.h>

/* Byte counters the communication and accounting tasks update from worker threads. */
#define SZ_NCATEGORIES 16   /* >= SZ_MEM_NCATEGORIES (starzero.h) */
struct sz_counters {
    int64_t sent, received;               /* communication bytes this rank sent / received */
    int64_t comm_ns;                      /* time spent inside the collectives */
    int64_t live[SZ_NCATEGORIES];         /* transient bytes alive now, per category */
    int64_t peak[SZ_NCATEGORIES];         /* and their peak */
    int64_t live_total, peak_total;       /* all transient categories together */
    /* timeline of live_total during the current step: (ns since the step began, bytes) */
#define SZ_TIMELINE 4096
    int64_t t0_ns;
    int ntimeline;
    int64_t timeline[SZ_TIMELINE][2];
    /* StarPU's own allocations on one memory node (the GPU's with a CUDA worker, else main RAM),
     * sampled by every account task and after each step (tasks/devwatch.c): their most */
    int sample_on;
    unsigned sample_node;
    int64_t node_peak;
};
void sz_counters_add(struct sz_counters *c, int category, int64_t bytes);
/* One sample of StarPU's allocations on c->sample_node (no-op unless c->sample_on). */
void sz_counters_sample(struct sz_counters *c);
/* Account one collective that moved `bytes` each way in `ns` nanoseconds. */
void sz_counters_comm(struct sz_counters *c, int64_t bytes, int64_t ns);
int64_t sz_now_ns(void);

/* bf16 <-> fp32 of one element, round to nearest even (as codelets/kernels). */
static inline float sz_h2f(uint16_t h)
{
    union { uint32_t u; float f; } v = {.u = (uint32_t)h << 16};
    return v.f;
}
static inline uint16_t sz_f2h(float f)
{
    union { float f; uint32_t u; } v = {.f = f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((v.u >> 16) | 0x40); /* quiet NaN */
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

/* One history-based perf model per codelet, named after it. */
#define SZ_PERFMODEL(var, sym) static struct starpu_perfmodel var = {.type = STARPU_HISTORY_BASED, .symbol = sym}
/* A CPU-only codelet over variable buffers. */
#define SZ_CODELET(var, fn, nm, pm) \
    struct starpu_codelet var = {.cpu_funcs = {fn}, .nbuffers = STARPU_VARIABLE_NBUFFERS, .name = nm, .model = &pm}

/* Every codelet the engine registers, one line each: its variable and what its tensors are (the
 * wrapper beside it in codelets/<op>.c is the reference). This list is the registry sz-info
 * --codelets prints (codelets/registry.c); adding an op adds its line here. */
#define SZ_CODELETS(X) \
    X(sz_cl_scale,            "x (RW) *= alpha") \
    X(sz_cl_zero,             "x (W) = 0") \
    X(sz_cl_encoder_fwd,      "out = wte[tokens] + wpe") \
    X(sz_cl_encoder_bwd,      "dwte, dwpe += from dout") \
    X(sz_cl_encoder_bwd_tied, "rows += from dout; dwte's token rows, dwpe rounded into bf16") \
    X(sz_cl_layernorm_fwd,    "out, mean, rstd from inp, w [, b]") \
    X(sz_cl_layernorm_bwd,    "dinp, dw [, db] += from dout") \
    X(sz_cl_matmul_fwd,       "out = inp . w^T [+ b]") \
    X(sz_cl_matmul_bwd,       "dinp, dw [, db] += from dout") \
    X(sz_cl_matmul_bwd_tied,  "dinp += from dout; dw rounded into bf16 but the ids' rows (fp32, in rows)") \
    X(sz_cl_attention_fwd,    "out, stats from qkv") \
    X(sz_cl_attention_bwd,    "dqkv += from dout, qkv, stats") \
    X(sz_cl_gelu_fwd,         "out = gelu(inp)") \
    X(sz_cl_gelu_bwd,         "dinp += gelu'(inp) * dout") \
    X(sz_cl_matmul_gelu_fwd,  "out = inp . w^T [+ b]; gout = gelu(out), tile by tile") \
    X(sz_cl_gelu_matmul_bwd,  "dinp = gelu'(pre) * (dout . w), tile by tile; dw [, db] +=") \
    X(sz_cl_residual_fwd,     "out = a + b") \
    X(sz_cl_residual_bwd,     "da, db += dout") \
    X(sz_cl_softmax_xent_fwd, "losses, probs from logits, targets") \
    X(sz_cl_softmax_xent_bwd, "dlogits = (probs - onehot) * scale") \
    X(sz_cl_softmax_xent_fused, "losses, logits := dlogits in one pass") \
    X(sz_cl_residual_layernorm_fwd, "res = a + b; out, mean, rstd = layernorm(res)") \
    X(sz_cl_layernorm_residual_bwd, "dres += layernorm'; da, db += dres; dw [, db_ln] +=") \
    X(sz_cl_rmsnorm_fwd, "out, rstd from inp, w (RMSNorm)") \
    X(sz_cl_rmsnorm_bwd, "dinp, dw += from dout") \
    X(sz_cl_residual_rmsnorm_fwd, "res = a + b; out, rstd = rmsnorm(res)") \
    X(sz_cl_rmsnorm_residual_bwd, "dres += rmsnorm'; da, db += dres; dw +=") \
    X(sz_cl_silu_fwd, "out = silu(inp)") \
    X(sz_cl_silu_bwd, "dinp += silu'(inp) * dout") \
    X(sz_cl_mul_fwd, "out = a * b") \
    X(sz_cl_mul_bwd, "da += dout * b, db += dout * a") \
    X(sz_cl_swiglu_fwd, "out = silu(gate) * up (LLaMA's MLP gate)") \
    X(sz_cl_swiglu_bwd, "dgate += dout * up * silu'(gate), dup += dout * silu(gate)") \
    X(sz_cl_rope_fwd, "rotary embedding of q, k in qkv") \
    X(sz_cl_rope_bwd, "dqkv += rotated back dout") \
    X(sz_cl_embedding_fwd, "out = wte[tokens]") \
    X(sz_cl_embedding_bwd, "dwte += dout at the token rows") \
    X(sz_cl_embedding_bwd_round, "dwte (bf16) rounded from the token rows' sums of dout") \
    X(sz_cl_mse_fwd, "losses = mean over C of (pred - target)^2") \
    X(sz_cl_mse_bwd, "dpred = 2 (pred - target) / C * scale") \
    X(sz_cl_sumsq,            "out = sum x^2 (double)") \
    X(sz_cl_clip_scale,       "clip factor and global norm from every rank's sums (CUDA: sums on the device, ranks' through host MPI)") \
    X(sz_cl_adamw,            "AdamW on a view [, fused squared norm]") \
    X(sz_cl_adamw_mixed,      "AdamW: fp32 master, bf16 params and grads") \
    X(sz_cl_sgd,              "SGD (momentum buffer if any) on a view [, fused squared norm]") \
    X(sz_cl_sgd_mixed,        "SGD: fp32 master, bf16 params and grads") \
    X(sz_cl_reduce_scatter,   "rank-ordered reduce-scatter of a unit's gradients (CUDA: NCCL only, SZ_NCCL=1)") \
    X(sz_cl_all_gather,       "all-gather of a unit's parameters (CUDA: NCCL only, SZ_NCCL=1)") \
    X(sz_cl_account,          "live-bytes accounting in dataflow order (CUDA: host counters, nothing on the stream)") \
    X(sz_cl_convert,          "copy converting fp32 <-> bf16 [, accumulate]")
#define SZ_DECLARE_CODELET(var, doc) extern struct starpu_codelet var;
SZ_CODELETS(SZ_DECLARE_CODELET)
#undef SZ_DECLARE_CODELET

/* The registry (codelets/registry.c): n codelets, their descriptions. */
extern struct starpu_codelet *const sz_codelet_table[];
extern const char *const sz_codelet_doc[];
extern const int sz_codelet_count;

/* ---- communication ---------------------------------------------------------------------------
 * Blocking collectives on `comm`, serialised in submission order by a token handle so every rank
 * issues them in the same order: through shared memory when every rank is on this node, else
 * MPI's. Sums are taken in rank order. What every communication task's arguments start with: */
struct sz_comm {
    MPI_Comm comm;              /* our collectives' communicator (never StarPU-MPI's) */
    int nd, rank;               /* data-parallel ranks, this rank */
    struct sz_counters *stats;  /* where the task adds its bytes (model-owned, atomic) */
};
/* codelets/exchange.c: with every rank's device pool mapped here (sched/devpool.c), the
 * collectives read their peers' buffers in place. Each returns 1 when done that way, 0 when some
 * rank's buffer is outside its pool (the caller then uses MPI); the same answer on every rank.
 * All-gather of S elements of es bytes per rank (shard NULL: in place); reduce-scatter of a
 * shard (sums in rank order, onto the shard when acc). */
int sz_shm_all_gather(const struct sz_comm *a, size_t es, void *full, const void *shard, int64_t S);
int sz_shm_reduce_scatter(const struct sz_comm *a, size_t es, const void *full, void *shard, int64_t S, int acc);
/* The same for elements [o, o + len) of every rank's piece (one bucket round of the plan). */
int sz_shm_reduce_scatter_piece(const struct sz_comm *a, size_t es, const void *full, void *shard, int64_t S,
                                int64_t o, int64_t len, int acc);
/* sched/devpool.c: the byte offset of [p, p + len) in this rank's shared pool (-1: not inside, or
 * the pools are not shared), and where rank `rank`'s pool holds that offset in this process. */
int64_t sz_shared_offset(const void *p, size_t len);
const void *sz_shared_peer(int rank, int64_t off);
/* codelets/reduce_scatter.c: sum a->nd pieces of len elements (es bytes: 4 fp32, 2 bf16), src[r]
 * from rank r, in rank order into shard[o, o + len) (onto it when acc); bf16 is summed in fp32
 * and rounded once. */
void sz_reduce_pieces(const struct sz_comm *a, size_t es, void *shard, const void *const *src, int64_t o,
                      int64_t len, int acc);

/* codelets/adamw.c: AdamW's fused gradient norm into the float at out (acc: add to it); s = -1:
 * out of memory. */
void sz_adamw_put_sumsq(float *out, int acc, double s);

#endif
