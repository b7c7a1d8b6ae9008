/* codelets/sz_codelets.h — the StarPU codelets of StarZeRO (one file per operation in codelets/),
 * each with its CPU implementation, a CUDA one where written, and a history-based perf model.
 *
 * Every codelet takes a variable number of vector buffers and one packed `struct sz_targs`:
 * logical tensor k of the operation lives in buffer map[k] at element offset off[k] (tensors
 * are views: a unit's parameters are one flat handle, so two tensors of one task may share a
 * buffer). Internal to the library and its tests. */
#ifndef SZ_CODELETS_H
#define SZ_CODELETS_H

#include <mpi.h>
#include <starpu.h>

#define SZ_MAX_TENSORS 12

struct sz_targs {
    int nt;                        /* logical tensors */
    int map[SZ_MAX_TENSORS];       /* tensor -> buffer index */
    int64_t off[SZ_MAX_TENSORS];   /* element offset inside that buffer */
    int64_t numel[SZ_MAX_TENSORS]; /* element count of the view */
    unsigned char bf16[SZ_MAX_TENSORS]; /* 1: the view holds bf16 (uint16) elements, else fp32/int32 */
    int B, T, C, NH, N, OC, V, Vp; /* shapes (unused ones 0) */
    float f[6];                    /* scalars: AdamW lr, beta1, beta2, eps, wd; clip; scale */
    int t;                         /* AdamW step */
    /* communication tasks */
    MPI_Comm comm;                 /* our collectives' communicator (never StarPU-MPI's) */
    int nd, rank;                  /* data-parallel ranks, this rank */
    int64_t shard;                 /* elements per rank of the unit's padded flat buffer */
    int acc;                       /* reduce-scatter: 1 = add into the shard, 0 = overwrite */
    int64_t bucket;                /* reduce-scatter: elements per rank and round (C_B); 0 = all */
    struct sz_counters *stats;     /* where the task adds its bytes (model-owned, atomic) */
    int64_t bytes;                 /* gather/release/account: the bytes that become live (or not) */
    int category;                  /* account: which sz_mem category */
};

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
};
void sz_counters_add(struct sz_counters *c, int category, int64_t bytes);
/* Account one collective that moved `bytes` each way in `ns` nanoseconds. */
void sz_counters_comm(struct sz_counters *c, int64_t bytes, int64_t ns);
int64_t sz_now_ns(void);

/* Logical tensor k of a task as a float / int pointer, and its element count. */
static inline float *sz_tf(void *buffers[], const struct sz_targs *a, int k)
{
    return (float *)STARPU_VECTOR_GET_PTR(buffers[a->map[k]]) + a->off[k];
}
static inline int *sz_ti(void *buffers[], const struct sz_targs *a, int k)
{
    return (int *)STARPU_VECTOR_GET_PTR(buffers[a->map[k]]) + a->off[k];
}
static inline uint16_t *sz_th(void *buffers[], const struct sz_targs *a, int k)
{
    return (uint16_t *)STARPU_VECTOR_GET_PTR(buffers[a->map[k]]) + a->off[k];
}
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
/* Element i of tensor k as fp32, whatever its storage. */
static inline float sz_tget(void *buffers[], const struct sz_targs *a, int k, int64_t i)
{
    return a->bf16[k] ? sz_h2f(sz_th(buffers, a, k)[i]) : sz_tf(buffers, a, k)[i];
}
#define SZ_UNPACK(arg, a) struct sz_targs a; starpu_codelet_unpack_args((arg), &a)

/* One history-based perf model per codelet, named after it. */
#define SZ_PERFMODEL(var, sym) static struct starpu_perfmodel var = {.type = STARPU_HISTORY_BASED, .symbol = sym}
/* A CPU-only codelet over variable buffers. */
#define SZ_CODELET(var, fn, nm, pm) \
    struct starpu_codelet var = {.cpu_funcs = {fn}, .nbuffers = STARPU_VARIABLE_NBUFFERS, .name = nm, .model = &pm}

/* Logical tensors of each codelet, in order (the task builder in tasks/ops.c follows this). */
extern struct starpu_codelet sz_cl_scale;           /* x (RW); f[0] = alpha. Has a CUDA version. */
extern struct starpu_codelet sz_cl_zero;            /* x (W) */
extern struct starpu_codelet sz_cl_encoder_fwd;     /* out, tokens, wte, wpe */
extern struct starpu_codelet sz_cl_encoder_bwd;     /* dwte, dwpe, dout, tokens */
extern struct starpu_codelet sz_cl_layernorm_fwd;   /* out, mean, rstd, inp, w, b */
extern struct starpu_codelet sz_cl_layernorm_bwd;   /* dinp, dw, db, dout, inp, w, mean, rstd */
extern struct starpu_codelet sz_cl_matmul_fwd;      /* out, inp, w [, b] */
extern struct starpu_codelet sz_cl_matmul_bwd;      /* dinp, dw, dout, inp, w [, db] */
extern struct starpu_codelet sz_cl_gelu_fwd;        /* out, inp */
extern struct starpu_codelet sz_cl_gelu_bwd;        /* dinp, inp, dout */
extern struct starpu_codelet sz_cl_residual_fwd;    /* out, a, b */
extern struct starpu_codelet sz_cl_residual_bwd;    /* da, db, dout */
extern struct starpu_codelet sz_cl_softmax_xent_fwd;/* losses, probs, logits, targets */
extern struct starpu_codelet sz_cl_softmax_xent_bwd;/* dlogits, probs, targets */
extern struct starpu_codelet sz_cl_sumsq;           /* out (one float), x */
extern struct starpu_codelet sz_cl_clip_scale;      /* out (scale, norm), this rank's per-unit sums, token; f[5] = clip;
                                                       with nd > 1 the sums of all ranks are all-gathered first */
extern struct starpu_codelet sz_cl_adamw;           /* param, grad, m, v, scale [, norm]; f[0..4], t */
/* Communication (blocking collectives on `comm`, serialised in submission order by a token
 * handle so every rank issues them in the same order: through shared memory when every rank is on
 * this node, else MPI's). Sums are taken in rank order. */
extern struct starpu_codelet sz_cl_reduce_scatter;  /* full (R, nd*shard), shard (RW), recv buffer (RW), token */
extern struct starpu_codelet sz_cl_all_gather;      /* full (W; own slice already in place if 1 tensor + token) [, shard (R)], token */
/* codelets/exchange.c: with every rank's device pool mapped here (sched/devpool.c), the
 * collectives read their peers' buffers in place. Each returns 1 when done that way, 0 when some
 * rank's buffer is outside its pool (the caller then uses MPI); the same answer on every rank.
 * All-gather of S elements per rank (shard NULL: in place); reduce-scatter of a shard (sums in
 * rank order, onto the shard when acc). */
int sz_shm_all_gather(const struct sz_targs *a, size_t es, void *full, const void *shard, int64_t S);
int sz_shm_reduce_scatter(const struct sz_targs *a, size_t es, const void *full, void *shard, int64_t S);
/* sched/devpool.c: the byte offset of [p, p + len) in this rank's shared pool (-1: not inside, or
 * the pools are not shared), and where rank `rank`'s pool holds that offset in this process. */
int64_t sz_shared_offset(const void *p, size_t len);
const void *sz_shared_peer(int rank, int64_t off);
/* codelets/reduce_scatter.c: sum nd pieces of len elements, src[r] from rank r, in rank order into
 * shard[o, o + len) (onto it when acc); bf16 is summed in fp32 and rounded once. */
void sz_reduce_pieces(const struct sz_targs *a, void *shard, const void *const *src, int64_t o, int64_t len, int acc);
extern struct starpu_codelet sz_cl_account;         /* any tensors: adds `bytes` to `category` (live memory) */
/* Mixed precision. */
extern struct starpu_codelet sz_cl_convert;         /* dst, src: copy converting fp32 <-> bf16; acc = 1: dst += src */
extern struct starpu_codelet sz_cl_adamw_mixed;     /* master (fp32), param (bf16), grad (bf16), m, v, scale [, norm] */
/* AdamW's fused gradient norm into tensor k (acc: add to it); s = -1: out of memory. */
void sz_adamw_put_sumsq(void *buffers[], const struct sz_targs *a, int k, double s);

#endif
