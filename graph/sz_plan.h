/* graph/sz_plan.h — the step plan as data (pure C, no runtime): from a model's units and a ZeRO
 * configuration, the ordered list of actions of one training step (or of one evaluation pass) on
 * one rank — gather, convert, forward, checkpoint offload/fetch, recompute, gradient allocation,
 * backward, release, reduce-scatter, all-gather, norms, clip, optimizer — each with its unit, its
 * element range, the bytes it makes live (+) or frees (-) per memory category, and the earlier
 * actions it waits for (derived from the buffers each action reads and writes, as the runtime
 * derives the tasks' dependencies from their data handles).
 *
 * The list is read twice: tasks/step.c submits exactly it (one loop, one submit function per
 * kind; a task's scheduling position is its action's index), and sz_plan_fold() folds its byte
 * deltas into the predicted peak the engine checks against the memory budget. What each stage
 * stores (sz_plan_storage), the padding of a unit's flat buffer and the owned shard's range are
 * written here once; tasks/model.c allocates by them and graph/zero_estimate.c's formulas read them. */
#ifndef SZ_PLAN_H
#define SZ_PLAN_H
#include <stdint.h>
#include <stdio.h>
#include "starzero.h"

/* ---- layout: padding, shards, what each stage stores ---------------------------------------- */

/* A unit's flat buffer: sz_zero_padded (include/starzero.h, defined in graph/plan.c: the one
 * padding rule, nd for a unit without parameters). */
/* The slice rank `rank` owns of a padded buffer: elements [*lo, *lo + *n). */
void sz_plan_shard_range(int64_t padded, int nd, int rank, int64_t *lo, int64_t *n);

/* What a unit keeps for good at a stage: bytes per element of each model-state category (0: not
 * held) and whether over the whole padded buffer (0) or only the owned shard (1). ZeRO's formula (sz_zero_model_state_bytes):
 * stage 0 everything full; 1 shards the optimizer state (master, m, v); 2 also the gradients;
 * 3 also the parameters. Parameters and gradients are 2 bytes under mixed precision, else 4. */
typedef struct sz_plan_storage {
    int bytes[SZ_MEM_NCATEGORIES];
    int sharded[SZ_MEM_NCATEGORIES];
} sz_plan_storage;
/* opt_states: the optimizer's fp32 state floats per element (sz_optimizer_states: AdamW 2, SGD
 * with momentum 1 in SZ_MEM_OPT_STATE0, plain SGD 0). */
void sz_plan_storage_of(int stage, int mixed, int opt_states, sz_plan_storage *out);
/* Bytes of category `cat` one unit of `padded` elements keeps at nd ranks under s. */
int64_t sz_plan_unit_state(const sz_plan_storage *s, int cat, int64_t padded, int nd);

/* ---- the plan --------------------------------------------------------------------------------- */

typedef struct sz_plan_unit {
    int64_t numel;            /* parameters (unpadded) */
    const int *uses;          /* tied earlier units it reads and accumulates gradients into */
    int nuses;
    int has_backward;
    int checkpointable;       /* recomputed under checkpointing */
    int backward_skips_params;/* its backward reads no parameter (sz_unit_desc) */
    int64_t ckpt_bytes;       /* bytes of its input checkpoint when offloaded (0: none) */
    int bf16_params;          /* its compute accepts bf16 parameters (sz_unit_desc): it reads them
                                 directly where sz_plan_config.bf16_direct says so */
    int round_grads;          /* its backward writes each of its parameters' gradients once, whole, by
                                 a task that can round its fp32 result into the bf16 gradients with a
                                 GRAD_CONVERT's rule (e.g. kernels/matmul_round.c): see
                                 sz_plan_config.fold_round */
    int round_tied_grads;     /* with round_grads: the units using it (tied) write its gradients by
                                 tasks that round too (sz_unit_desc.round_tied_grads), so it is
                                 rounded although other backwards write its gradients */
} sz_plan_unit;

typedef enum sz_plan_pass {
    SZ_PASS_STEP = 0,         /* micro_batches x (forward, backward), then the update */
    SZ_PASS_EVAL,             /* one forward pass (every unit released after its forward) */
} sz_plan_pass;

typedef struct sz_plan_config {
    sz_plan_pass pass;
    int stage, nd, rank, micro_batches;
    int mixed;                /* bf16 parameters and gradients, fp32 working gradients */
    int native;               /* mixed on the native bf16 path (bf16 activations; what is printed) */
    int bf16_direct;          /* mixed: units with bf16_params read the bf16 parameters directly
                                 (stage 3: the gathered copy, kept until the release) and get no fp32
                                 working copy (no CONVERT) — on the native path, and on the emulated
                                 one without CUDA workers (sz_model_set_zero decides it). The other
                                 units, and all of them with bf16_direct 0, compute on fp32 working
                                 copies, one unit at a time. */
    int opt_states;           /* the optimizer's fp32 state floats per element (AdamW 2, SGD 1 or 0) */
    int checkpoint, offload;  /* activation checkpointing; offloaded checkpoints (P_a+cpu) */
    int64_t prefetch_bytes;   /* stage 3: parameter bytes gathered ahead of the unit computing */
    int64_t max_live_bytes;   /* stage 3: gathered bytes alive at once for a prefetch (0: no limit) */
    int64_t bucket_elems;     /* reduce-scatter: elements per rank and round (0: the whole shard) */
    int comm_worker;          /* a communication worker: the next unit's gradients are allocated
                                 before a unit's reduce-scatter */
    int clip;                 /* the update clips the gradients by their global norm */
    int fold_grads;           /* the gradients' zeroing left to their first writers (SZ_GRADS_FIRST_WRITERS;
                                 stages 0-1 fp32: ZERO_GRADS right before the unit's first backward) */
    int fold_round;           /* mixed, with fold_grads: the GRAD_CONVERT of a unit with round_grads whose
                                 gradients no other unit's backward writes (or only units with round_grads,
                                 where it has round_tied_grads) is folded into their writers
                                 (sz_plan.rounded): no fp32 working gradients, no GRAD_CONVERT; stages 0-1
                                 write the full bf16 gradients (first micro-batch ZERO_GRADS flag
                                 SZ_GRADS_FIRST_WRITERS | SZ_GRADS_ROUNDED: the padding zeroed, the
                                 first writers write bf16(0 + g), later micro-batches add: bf16(old + g)),
                                 stages 2-3 a fresh bf16 copy per micro-batch (GRAD_ALLOC of SZ_BUF_GRAD,
                                 padded * 2 bytes, first writers bf16(g)) freed by the reduce-scatter */
    int offload_optimizer;    /* ZeRO-Offload: master, m, v on the host; optimizer actions there */
    int comm_on_host;         /* the communication buffer lives in host memory (CUDA workers with the
                                 host-copy collectives, which are CPU tasks): not part of the device peak */
    int64_t extra[SZ_MEM_NCATEGORIES]; /* persistent bytes beside the units' model states
                                          (activations, host pool, communication buffer) */
} sz_plan_config;

typedef enum sz_action_kind {
    SZ_ACT_GATHER = 0,        /* stage 3: all-gather the unit's parameters from the shards (+) */
    SZ_ACT_CONVERT,           /* mixed: the fp32 working copy of the unit's parameters (+) */
    SZ_ACT_RELEASE,           /* free a transient buffer of the unit: `buf` (-) */
    SZ_ACT_CKPT_ALLOC,        /* the unit's input checkpoint allocated for the write that makes it (+) */
    SZ_ACT_FWD,               /* the unit's forward callback */
    SZ_ACT_CKPT_OFFLOAD,      /* the unit's checkpoint moved to the host pool, device copy freed (-) */
    SZ_ACT_CKPT_FETCH,        /* the unit's checkpoint back from the host pool (+) */
    SZ_ACT_RECOMPUTE,         /* checkpointing: the unit's forward again, before its backward */
    SZ_ACT_ZERO_GRADS,        /* stages 0-1: the persistent full gradients zeroed (first micro-batch;
                                 mixed: only those of units no GRAD_CONVERT writes); flag
                                 SZ_GRADS_FIRST_WRITERS: see there */
    SZ_ACT_GRAD_ALLOC,        /* the unit's (working) gradients allocated and zeroed (+); flag as
                                 ZERO_GRADS's */
    SZ_ACT_BWD,               /* the unit's backward callback */
    SZ_ACT_GRAD_CONVERT,      /* mixed: fp32 working gradients -> bf16 (added into the full ones at 0-1;
                                 flag: sz_convert_mode) */
    SZ_ACT_REDUCE_SCATTER,    /* one bucket round (ZeRO-R's C_B) of the unit's gradients into the
                                 owners' shards: elements [lo, lo + n) of ours; the last round frees
                                 the full-size gradients at stages 2-3 (-) */
    SZ_ACT_ALL_GATHER,        /* in place: the updated shards (1-2) or the reduced gradients (0) */
    SZ_ACT_NORM,              /* squared norm of the owned gradient slice */
    SZ_ACT_CLIP,              /* the global norm and clip factor (all ranks) */
    SZ_ACT_OPTIMIZER,         /* the optimizer (AdamW, SGD) on elements [lo, lo + n) of the unit */
    SZ_ACT_NKINDS
} sz_action_kind;

/* How a GRAD_CONVERT writes the bf16 gradients (its action's flag): replace them (stages 2-3: a
 * fresh copy), add into them (stages 0-1, later micro-batches), or write what adding onto zeros
 * would (stages 0-1, first micro-batch: bf16(0 + g), so -0 becomes +0 as the addition makes it;
 * the full gradients need no zeroing first). */
typedef enum sz_convert_mode {
    SZ_CONVERT_SET = 0,
    SZ_CONVERT_ADD = 1,
    SZ_CONVERT_ONTO_ZEROS = 2,
} sz_convert_mode;

/* A ZERO_GRADS or GRAD_ALLOC action's flag: 0, the whole buffer is zeroed; SZ_GRADS_FIRST_WRITERS,
 * only its padding is, and each parameter's gradient is left to the first task that touches it in
 * the backward actions that follow: one that writes it whole sets it (an SZ_ACCUMULATE_OR_SET
 * tensor, on a CPU or a CUDA worker whose kernel sets: core/fold.c), any other gets it zeroed just before; the next BWD action zeroes the rest at
 * its end (tasks/step.c, core/fold.c). The config's fold_grads chooses. */
enum { SZ_GRADS_FIRST_WRITERS = 1, SZ_GRADS_ROUNDED = 2 /* with FIRST_WRITERS: they round into bf16 (fold_round) */ };

typedef enum sz_plan_buf {
    SZ_BUF_NONE = 0,
    SZ_BUF_PARAM,             /* the unit's full parameters (stage 3: the gathered copy) */
    SZ_BUF_WORK,              /* mixed: the fp32 working parameters */
    SZ_BUF_GRAD,              /* the unit's full gradients (bf16 under mixed precision) */
    SZ_BUF_WGRAD,             /* the gradients backward writes (fp32 working ones under mixed) */
    SZ_BUF_CKPT,              /* the unit's offloaded checkpoint, device copy */
} sz_plan_buf;

enum { SZ_NODE_DEVICE = 0, SZ_NODE_HOST = 1 };

typedef struct sz_action {
    sz_action_kind kind;
    int unit;                 /* -1: the whole model (clip) */
    int micro_batch;          /* -1: the update */
    sz_plan_buf buf;          /* the buffer it allocates, frees or writes */
    int flag;                 /* REDUCE_SCATTER: accumulate into the destination; GRAD_CONVERT:
                                 an sz_convert_mode; ZERO_GRADS, GRAD_ALLOC: 0 or SZ_GRADS_FIRST_WRITERS (| SZ_GRADS_ROUNDED);
                                 CLIP: 1 clip, 0 only the norm (for the report); OPTIMIZER: also
                                 take the range's squared norm (no separate NORM) */
    int round, rounds;        /* REDUCE_SCATTER: this round (0..rounds-1) of the unit's reduce-scatter */
    int64_t lo, n;            /* element range of the unit's flat buffer it works on */
    int node;                 /* memory node of its bytes: SZ_NODE_DEVICE (the device pool) */
    int64_t delta[SZ_MEM_NCATEGORIES]; /* bytes it allocates (+) or frees (-); at most one non-zero */
    int wait_lo, nwaits;      /* what it waits for: p->waits[wait_lo .. wait_lo + nwaits) */
    int64_t sent;             /* bytes this rank sends to the others (gathers, reduce-scatter rounds,
                                 the norms' all-gather) */
} sz_action;

/* What the actions read and write, as data: per unit its full (stage 3: gathered) parameters,
 * mixed precision's working copy, the full gradients, the gradients backward writes (the full
 * ones in fp32), the owned parameter and gradient shards (views of the full buffers below stage 3
 * resp. 2), the optimizer state, the offloaded checkpoint's device and host copies; for the model
 * the per-unit squared norms, the clip factor and the activations (the model's own tensors, a
 * chain through its compute callbacks). */
typedef enum sz_plan_res {
    SZ_RES_PARAM = 0, SZ_RES_WORK, SZ_RES_GRAD, SZ_RES_WGRAD, SZ_RES_PSHARD, SZ_RES_GSHARD, SZ_RES_OPT,
    SZ_RES_CKPT, SZ_RES_CKPT_HOST,
    SZ_RES_UNIT_KINDS,        /* the per-unit ones above, then the model's: */
    SZ_RES_NORMS = SZ_RES_UNIT_KINDS, SZ_RES_CLIP, SZ_RES_ACT,
    SZ_RES_NKINDS
} sz_plan_res;

/* One wait: action `action` (earlier in the list) last wrote data this action reads or writes,
 * or read data it writes (then it must run first). res: the data. assumed: the access on one
 * side is the model's, which the plan can only assume (a unit's forward and backward use their
 * tied units, the activations chain the compute callbacks, checkpoints are the units' inputs);
 * 0: both accesses are the engine's own (it submits them: a gather writes the parameters the
 * unit's own forward reads, a backward writes its unit's gradients, ...). */
typedef struct sz_wait {
    int action;
    unsigned char res;        /* sz_plan_res */
    unsigned char assumed;
} sz_wait;

typedef struct sz_plan {
    sz_plan_config cfg;
    int nunits;
    int64_t *padded, *shard;  /* per unit */
    char *bf16_params;        /* per unit: sz_plan_unit.bf16_params */
    char *rounded;            /* per unit: its gradients' rounding folded into their writers (fold_round) */
    sz_action *a;
    int n, cap;
    int *mb_begin;            /* micro_batches + 1 entries: first action of each micro-batch; the
                                 last is the update's first action (pass STEP) */
    sz_wait *waits;           /* every action's waits, ascending by action within one action's */
    int nwaits, waits_cap;
} sz_plan;

/* The most actions a plan may have (its list and waits then take about a GB): a bigger one means
 * buckets far too small for the model (every reduce-scatter round is an action) or a shape no
 * machine can hold, and is refused before anything is built. */
#define SZ_PLAN_MAX_ACTIONS (1 << 22)

/* Builds the plan of cfg->pass for these units into *out (free with sz_plan_free). SZ_ERR_INVALID
 * for a bad configuration or unit table, or a plan of more than about SZ_PLAN_MAX_ACTIONS actions;
 * SZ_ERR_NOMEM. */
sz_status sz_plan_build(const sz_plan_unit *units, int nunits, const sz_plan_config *cfg, sz_plan *out);
void sz_plan_free(sz_plan *p);

/* Parameter bytes the unit's compute tasks need present: the stage-3 gathered copy and the mixed
 * precision working copy (what the prefetch window counts). */
int64_t sz_plan_params_bytes(const sz_plan *p, int unit);
/* C_B: elements per rank and round of a reduce-scatter, so that the receive buffer (nd rounds of
 * fp32-sized elements; bf16 fits) is bucket_bytes (0: SZ_DEFAULT_BUCKET_BYTES), never more than
 * the largest unit (maxpad elements) needs (sz_zero_comm_buffer_bytes). One rank exchanges
 * nothing: maxpad. */
int64_t sz_plan_bucket_elems(int64_t bucket_bytes, int nd, int64_t maxpad);

/* The fold over the plan: transient bytes after each action (running sum of the deltas; the
 * engine's live-bytes counters follow it, every accounting task being ordered on one token), their
 * peak overall and per category, and the persistent bytes (units' model states by sz_plan_storage
 * plus cfg->extra). */
typedef struct sz_fold {
    int64_t persistent[SZ_MEM_NCATEGORIES];
    int64_t transient_peak[SZ_MEM_NCATEGORIES]; /* each category's own peak */
    int64_t bytes[SZ_MEM_NCATEGORIES];          /* persistent + transient peak (the memory report's) */
    int64_t state_bytes;      /* model states: params or shard, grads or shard, master, m, v */
    int64_t persistent_bytes; /* all persistent categories */
    int64_t transient_bytes;  /* peak of all transient categories together */
    int peak_action;          /* the action after which it is reached (-1: never above 0) */
    int64_t peak_bytes;       /* persistent_bytes + transient_bytes: the predicted peak */
    int64_t device_peak_bytes;/* the same without what lives on the host (host_bytes) */
    int64_t host_bytes;       /* persistent bytes on the host: the host pool, the host buffers, under
                                 offload_optimizer the fp32 master, m and v, under comm_on_host the
                                 communication buffer */
    int64_t sent_bytes;       /* bytes this rank sends in the pass (the actions' `sent`) */
} sz_fold;
/* live_after: NULL or p->n entries, the transient bytes alive after each action. */
void sz_plan_fold(const sz_plan *p, sz_fold *out, int64_t *live_after);

/* The waits' transitive closure: a malloc'ed p->n * p->n bytes, c[k * p->n + j] = 1 when action k
 * waits for j directly or through its waits (NULL: out of memory). */
unsigned char *sz_plan_closure(const sz_plan *p);
/* Checks dependencies observed on a real step against the plan (tasks/depcheck.c records them):
 * dep is p->n * p->n bytes, dep[k * p->n + j] = 1 when a task of action k accessed data whose
 * last writer (or, for a write, a reader since) was a task of action j < k, leaving out the
 * ordering token and the communication scratch buffer. Every observed dependency must be among
 * the plan's waits or their closure (the waits are sufficient), and every wait that is not
 * `assumed` must be among the observed ones or their closure (it is real). Returns the number of
 * violations; msg (len bytes) tells the first. */
int sz_plan_check_deps(const sz_plan *p, const unsigned char *dep, char *msg, size_t len);

const char *sz_action_kind_name(sz_action_kind k);
const char *sz_plan_res_name(sz_plan_res r);
const char *sz_mem_category_key(int cat); /* short JSON-friendly key: "gathered", "grads_in_flight" */
/* One line per action ("12 gather block3 [0,4096) gathered +16384 live 16384"), names[i] naming
 * unit i (NULL: "unit i"). json: one JSON object {"config":..., "actions":[...], "fold":...}. */
void sz_plan_print(FILE *f, const sz_plan *p, const char *const *names, int json);
#endif
