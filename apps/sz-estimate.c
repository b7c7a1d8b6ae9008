/* apps/sz-estimate.c — the ZeRO estimator on the command line: model-state bytes per rank for
 * each stage and N_d (the paper's table; docs/ARCHITECTURE.md), communication per step, GPT-2 activation
 * bytes (full, checkpointed, checkpoints offloaded to a host pool), the communication buffer of
 * constant-size buckets, and the smallest N_d that fits a memory budget; with --model also the
 * predicted peak per rank of each stage and N_d, the step plan's fold (--plan prints one plan
 * and its fold). Text table or one JSON object.
 * Pure arithmetic: starts no runtime. Run `sz-estimate --help` for the options. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "arch.h"
#include "mp_estimate.h"
#include "opts.h"
#include "zero_estimate.h"

#define MAX_ND_VALUES 64

static const char *const k_stage_names[4] = {"DP", "P_os", "P_os+g", "P_os+g+p"};

struct opts {
    const char *params_str, *model, *precision, *budget_str, *extra_str, *bucket_str;
    double psi, budget, extra;
    int have_model, mixed, vocab, max_seq, batch, seq, micro_batches, max_nd, decimals, json, ckpt;
    int offload;          /* --offload-checkpoints: P_a+cpu, needs --ckpt */
    int plan, stage, rank, comm_worker, clip, nd_set; /* --plan and its configuration */
    int offload_optimizer; /* --plan --offload-optimizer: ZeRO-Offload (master, m, v on the host) */
    int64_t prefetch_bytes, max_live_bytes;
    int64_t bucket_bytes; /* --bucket-bytes: C_B bucket size (SZ_DEFAULT_BUCKET_BYTES unless given) */
    int vocab_set, max_seq_set, batch_set, seq_set;
    int nd[MAX_ND_VALUES], n_nd;
    sz_arch_kind kind;    /* --arch (gpt2 unless given) */
    sz_arch_config cfg;   /* --model's, of that architecture */
    sz_optimizer optimizer; /* --optimizer adamw|sgd */
    float momentum;       /* --momentum (SGD) */
    int opt_states;       /* fp32 optimizer state floats per element (sz_optimizer_states) */
    int kernel_threads;   /* --kernel-threads: OpenMP threads per compute task (0: the machine's cores / N_d) */
    double data_tokens;   /* --data-tokens: tokens sz-train's data loader holds (train + validation files) */
    const char *bf16_compute; /* --bf16-compute auto|native|emulated */
    sz_bf16_compute bc;   /* and parsed */
    int work_copies;      /* --bf16-work-copies */
    int fp16;             /* --precision fp16: mixed, on fp32 working copies, no rounding fold */
    sz_resolved_precision prec; /* what sz-train's CPU workers resolve this to (sz_precision_resolve_cpu):
                             .native the native bf16 path, .params_direct the units reading their bf16
                             parameters directly (unless --bf16-work-copies on the emulated path) */
    const char *bf16_why; /* why auto chose what it chose (NULL when forced) */
    /* model parallelism (Megatron's tensor parallelism; the estimator's only: sz-train has none yet) */
    int nm_set;           /* --mp given (the paper modes' default is 16) */
    int nm;               /* --mp / --tensor-parallel: N_m (1 unless given); ranks = N_m x N_d */
    int pa;               /* --partition-activations: P_a (needs --ckpt) */
    int paper_pa, paper_table3; /* --paper-pa, --paper-table3: the paper's analysis */
    double psi_model;     /* the whole model's Ψ (o->psi is one MP rank's) */
    double psi_split, psi_replicated; /* Megatron-partitioned and replicated parameters (whole model) */
};

/* Whether the output has the model-parallel parts: N_m > 1 or P_a asked for (N_m = 1 otherwise prints
 * what it printed before model parallelism existed). */
static int mp_on(const struct opts *o)
{
    return o->nm > 1 || o->pa;
}

/* The ZeRO configuration sz-train would give its model for these options at `stage`, the app's
 * host bytes included (the data loader's tokens, the batch's inputs and targets). */
static sz_zero_config zero_of(const struct opts *o, int stage)
{
    sz_zero_config z;
    sz_zero_config_defaults(&z);
    z.stage = stage;
    z.micro_batches = o->micro_batches;
    z.precision = o->fp16 ? SZ_PRECISION_FP16 : o->mixed ? SZ_PRECISION_BF16 : SZ_PRECISION_FP32;
    z.bf16_compute = o->bc;
    z.bf16_work_copies = o->work_copies;
    z.checkpoint = o->ckpt;
    z.offload_checkpoints = o->offload;
    z.prefetch_bytes = o->prefetch_bytes;
    z.max_live_bytes = o->max_live_bytes;
    z.bucket_bytes = o->bucket_bytes;
    z.offload_optimizer = o->offload_optimizer;
    z.optimizer = o->optimizer;
    z.momentum = o->momentum;
    z.host_bytes = (int64_t)o->data_tokens * 2 + 2 * (int64_t)o->batch * o->seq * 4;
    return z;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sz-estimate (--params N | --model d2|d6|d12|L,H,C) [options]\n"
            "\n"
            "Estimates, per data-parallel rank and for each ZeRO stage (0 DP, 1 P_os, 2 P_os+g,\n"
            "3 P_os+g+p), the persistent model-state bytes (params or their shard, grads or their\n"
            "shard, fp32 master, Adam m and v), the bytes communicated per step, and for a GPT-2\n"
            "model the activation bytes of one micro-batch (full, checkpointed, checkpoints\n"
            "offloaded), and the reduce-scatter buffer of constant-size buckets. Nothing is run or\n"
            "allocated.\n"
            "\n"
            "model:\n"
            "  --params N          parameter count: 7.5e9, 1.5e8, 124M, 1.5B; suffixes K=1e3,\n"
            "                      M=1e6, B or G=1e9, T=1e12\n"
            "  --model NAME        GPT-2: d2 (L2,H4,C128), d6 (6,6,384), d12 (12,12,768, 124M) or\n"
            "                      L,H,C; Ψ is its parameter count with the padded vocabulary\n"
            "  --arch gpt2|llama   the architecture --model names (default gpt2; llama: the LLaMA-style\n"
            "                      model of apps/llama, same presets, SwiGLU width 8C/3, no padded vocab)\n"
            "  --vocab V           vocabulary for --model (default 50257; padded to 128s)\n"
            "  --max-seq T         positions for --model (default 1024)\n"
            "setup:\n"
            "  --nd N[,N...]       data-parallel ranks N_d, the table's columns (default 1,2,4,8,16,64)\n"
            "  --precision P       mixed (default; 'bf16' is a synonym): bf16 params and grads, fp32\n"
            "                      master, Adam m and v (K = 12), bf16 communication; fp16: the same\n"
            "                      bytes, every unit on fp32 working copies; or fp32: fp32 params,\n"
            "                      grads, m and v, no master, fp32 communication\n"
            "  --bf16-compute M    auto (default), native or emulated, as sz-train's: how mixed\n"
            "                      precision computes. native (GPT-2 and --arch llama alike): bf16\n"
            "                      activations and matmul operands; the table and --plan count its\n"
            "                      activation bytes and the bf16 matmul kernels' host memory.\n"
            "                      emulated: fp32 activations. On both, the units read their bf16\n"
            "                      parameters directly (no fp32 working copies, no convert actions;\n"
            "                      sz-train keeps the copies with CUDA workers). auto applies sz-train's CPU\n"
            "                      rule on this machine (AMX-BF16, or AVX512-BF16 on AMD Zen 4+:\n"
            "                      native) and cannot see CUDA workers (sz-train computes emulated\n"
            "                      with them). Printed as bf16_path (native, emulated, or fp32)\n"
            "  --bf16-work-copies  emulated: fp32 working copies of the bf16 parameters, one unit at a\n"
            "                      time (convert actions), as sz-train computes with CUDA workers or\n"
            "                      sz_zero_config.bf16_work_copies (the same bits, more memory)\n"
            "  --optimizer O       adamw (default: fp32 m and v) or sgd (torch.optim.SGD): its fp32\n"
            "                      state per parameter counts in the model states (K = 12 for AdamW\n"
            "                      mixed; SGD: K = 8 with --momentum, 4 without)\n"
            "  --momentum M        SGD's momentum in [0, 1) (default 0: no momentum buffer)\n"
            "  --kernel-threads N  OpenMP threads of each compute task, as sz-train's ranks get them\n"
            "                      (default: this machine's cores / the first --nd value, at least 1):\n"
            "                      sizes the matmul kernels' host working memory (oneDNN scratchpads,\n"
            "                      queried from oneDNN, and packed tiles), one CPU worker\n"
            "  --data-tokens N     tokens sz-train's data loader holds in memory (the train file's plus\n"
            "                      the validation file's; default 0). Host buffers (--model only) = the\n"
            "                      matmul working memory + 2 bytes a token + the batch's inputs and\n"
            "                      targets (2 x B x T int32); counted in the plan and the budget\n"
            "  --micro-batches M   micro-batches per step (default 1): stages 2-3 communicate\n"
            "                      every micro-batch, stages 0-1 once per step\n"
            "activations (--model only):\n"
            "  --batch B           sequences per micro-batch (default 1)\n"
            "  --seq T             tokens per sequence (default: --max-seq)\n"
            "                      Reported: the activation bytes sz-train's model registers on the\n"
            "                      bf16 path in effect (with their gradients and the batch: what the\n"
            "                      plan and the budget count), full and under block checkpointing;\n"
            "                      beside them llm.c's fp32 ActivationTensors for B x T (the model's\n"
            "                      forward tensors for LLaMA); and the predicted peak per rank of each\n"
            "                      stage and N_d: rank 0's step plan folded, as --plan folds it\n"
            "ZeRO-R (sz-train's options of the same names):\n"
            "  --ckpt, --checkpoint  block checkpointing: count the checkpointed activations in the\n"
            "                      budget (default: the full ones)\n"
            "  --offload-checkpoints  P_a+cpu (needs --ckpt, --model): the block checkpoints wait in a\n"
            "                      host pool between their forward and their recompute. Reports the\n"
            "                      device-pool activations (at most 3 checkpoints on the device at\n"
            "                      once) and the host pool apart; the budget counts the device pool\n"
            "  --bucket-bytes B    C_B: every reduce-scatter runs in rounds through one buffer of B\n"
            "                      bytes per rank (default 32MiB, as sz-train; suffixes as --budget).\n"
            "                      Reports that buffer for each N_d: 0 at N_d=1, at most B for any\n"
            "                      model (with --model, capped by the largest unit's shard). Not\n"
            "                      counted in the budget: add it with --extra\n"
            "model parallelism (estimates only: sz-train --mp is not built yet):\n"
            "  --mp N_m            Megatron-LM's tensor parallelism over N_m ranks (also --tensor-parallel):\n"
            "                      QKV, fc, gate, up column-parallel; attention projection, fc projection,\n"
            "                      down row-parallel; embedding and head vocabulary-parallel; norms,\n"
            "                      row-parallel biases and position embeddings replicated. N_m must divide\n"
            "                      the heads, the MLP width and the padded vocabulary (refused otherwise,\n"
            "                      naming which). --nd stays the data-parallel degree N_d (the columns): a job\n"
            "                      is N_m x N_d ranks, as DeepSpeed and Megatron count them; the model states\n"
            "                      are the table's formulas at one MP rank's Ψ. Needs --model. Adds the\n"
            "                      activations of one MP rank, P_a's checkpoint slices and the model-parallel\n"
            "                      traffic per block (the paper's 12 x seq x hidden per sample)\n"
            "  --partition-activations  P_a (needs --ckpt): each MP rank keeps a 1/N_m slice of each block's\n"
            "                      checkpointed input, all-gathered before its recompute (nothing to partition\n"
            "                      at N_m = 1: said so, nothing changes)\n"
            "  --cpu-checkpointing P_a+cpu: the same as --offload-checkpoints (with P_a the slices go to the\n"
            "                      host pool)\n"
            "  --paper-pa          the ZeRO paper's P_a example (100B: hidden 8192, 125 layers, seq 1024,\n"
            "                      MP 16): checkpoints per GPU with and without P_a at the batch giving its\n"
            "                      ~33 GB (no --model needed)\n"
            "  --paper-table3      the largest GPT-2-like model (hidden 8192, 64 heads, seq 1024, vocab 50257;\n"
            "                      layers varied) each configuration of the paper's Table 3 (C1-C5, MP 16)\n"
            "                      fits on a 32 GB GPU: --mp (16), --nd (25: 400 GPUs), --batch (16),\n"
            "                      --budget (32GiB), --bucket-bytes apply; activations at 2 bytes (fp16)\n"
            "budget:\n"
            "  --budget BYTES      memory per rank; prints each stage's smallest N_d that fits\n"
            "                      model states + activations + --extra. Decimal suffixes K, M, G,\n"
            "                      T (also KB, MB, GB, TB) are powers of 1000; binary suffixes KiB,\n"
            "                      MiB, GiB, TiB are powers of 1024 (case matters). 80G = 80e9,\n"
            "                      80GiB = 85.9e9; no suffix or B: bytes (8.5e10 works too)\n"
            "  --extra BYTES       further bytes per rank to count in the budget (same suffixes)\n"
            "  --max-nd N          largest N_d the budget search considers (default 65536)\n"
            "the step plan (--model only):\n"
            "  --plan              print the ordered actions of one training step on one rank\n"
            "                      (gather, convert, fwd, ckpt_offload, ckpt_fetch, recompute,\n"
            "                      grad_alloc, bwd, release, reduce_scatter, all_gather, norm, clip,\n"
            "                      optimizer), each with its unit, element range, byte delta and the\n"
            "                      earlier actions it waits for (* : through the model's callbacks,\n"
            "                      assumed), a reduce-scatter as one action per bucket round (i/n), and\n"
            "                      the fold: the peak bytes per rank sz-train predicts (and measures)\n"
            "                      for the same configuration. Uses the one --nd value given (default\n"
            "                      1), --precision (mixed unless fp32), --micro-batches, --batch, --seq,\n"
            "                      --ckpt, --offload-checkpoints, --bucket-bytes and:\n"
            "  --stage S           ZeRO stage 0..3 (default 3)\n"
            "  --rank R            the rank whose plan it is (default 0)\n"
            "  --prefetch-bytes B  stage 3: parameter bytes gathered ahead (sz-train's option)\n"
            "  --max-live-bytes B  stage 3: gathered parameter bytes alive at once\n"
            "  --comm-worker       a communication worker (SZ_COMM_WORKER=1): the next unit's\n"
            "                      gradients are allocated before a unit's reduce-scatter\n"
            "  --clip              the update clips the gradients (also --grad-clip X, as sz-train:\n"
            "                      X > 0 clips, 0 does not)\n"
            "  --offload-optimizer ZeRO-Offload (sz-train's, GPU ranks): the optimizer actions on the\n"
            "                      host, the master, m and v counted as host bytes, not device peak\n"
            "                      With --json: {\"config\", \"actions\": [...], \"fold\"}\n"
            "output:\n"
            "  --decimals D        decimals of the GB (1e9 bytes) values in the table (default 1)\n"
            "  --json              one JSON object instead of the tables (all values in bytes)\n"
            "  -h, --help          print this help\n"
            "\n"
            "Model states are the paper's exact Ψ/N_d shares; stage 3's gathered units in flight,\n"
            "buffers and activation gradients are not included in them (the predicted peak has them).\n"
            "sz-train's spellings are accepted too: --zero-stage (--stage), --config (--model),\n"
            "--mem-budget (--budget), --checkpoint (--ckpt), --grad-clip X (--clip).\n"
            "Exit status: 0, or 2 for bad options.\n"
            "examples (the paper's check: 120, 31.4, 16.6, 1.9 GB; then ZeRO-R's options as sz-train\n"
            "takes them):\n"
            "  sz-estimate --params 7.5e9 --nd 64\n"
            "  sz-estimate --model d12 --vocab 256 --batch 4 --seq 256 --nd 1,2 --ckpt \\\n"
            "              --offload-checkpoints --bucket-bytes 1M\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno == ERANGE || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_nd_list(const char *s, struct opts *o)
{
    char buf[1024];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    o->n_nd = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->n_nd == MAX_ND_VALUES)
            return -1;
        if (parse_int(tok, 1, INT_MAX, &o->nd[o->n_nd]) != 0)
            return -1;
        o->n_nd++;
    }
    /* "4,,8" or a trailing comma: strtok_r skips empty fields; refuse them explicitly */
    if (o->n_nd == 0 || s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
        return -1;
    return 0;
}

#define BAD(...)                                                                              \
    do {                                                                                      \
        fprintf(stderr, "sz-estimate: " __VA_ARGS__);                                         \
        fprintf(stderr, " (see --help)\n");                                                   \
        return -1;                                                                            \
    } while (0)

/* Returns 0, -1 on a bad option (message printed), 1 after --help. */
static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.stage = 3, .precision = "mixed", .mixed = 1, .vocab = 50257, .max_seq = 1024, .batch = 1,
                       .micro_batches = 1, .max_nd = 65536, .decimals = 1, .bucket_bytes = SZ_DEFAULT_BUCKET_BYTES,
                       .nd = {1, 2, 4, 8, 16, 64}, .n_nd = 6, .bf16_compute = "auto", .nm = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--json")) { o->json = 1; continue; }
        if (!strcmp(a, "--ckpt") || !strcmp(a, "--checkpoint")) { o->ckpt = 1; continue; }
        if (!strcmp(a, "--offload-checkpoints") || !strcmp(a, "--cpu-checkpointing")) { o->offload = 1; continue; }
        if (!strcmp(a, "--partition-activations")) { o->pa = 1; continue; }
        if (!strcmp(a, "--paper-pa")) { o->paper_pa = 1; continue; }
        if (!strcmp(a, "--paper-table3")) { o->paper_table3 = 1; continue; }
        if (!strcmp(a, "--plan")) { o->plan = 1; continue; }
        if (!strcmp(a, "--comm-worker")) { o->comm_worker = 1; continue; }
        if (!strcmp(a, "--clip")) { o->clip = 1; continue; }
        if (!strcmp(a, "--bf16-work-copies")) { o->work_copies = 1; continue; }
        if (!strcmp(a, "--offload-optimizer")) { o->offload_optimizer = 1; continue; }
        if (strncmp(a, "--", 2) != 0)
            BAD("unexpected argument '%s'", a);
        if (!v)
            BAD("%s needs a value", a);
        i++;
        if (!strcmp(a, "--params")) {
            o->params_str = v;
            if (sz_parse_count(v, &o->psi) != 0 || !(o->psi > 0))
                BAD("--params %s: expected a positive count such as 7.5e9, 124M or 1.5B", v);
        } else if (!strcmp(a, "--mp") || !strcmp(a, "--tensor-parallel")) {
            if (parse_int(v, 1, 65536, &o->nm) != 0)
                BAD("%s %s: expected a model-parallel degree N_m >= 1", a, v);
            o->nm_set = 1;
        } else if (!strcmp(a, "--model")) {
            o->model = v;
        } else if (!strcmp(a, "--arch")) {
            if (sz_arch_parse(v, &o->kind) != 0)
                BAD("--arch %s: must be gpt2 or llama", v);
        } else if (!strcmp(a, "--vocab")) {
            if (parse_int(v, 1, INT_MAX, &o->vocab) != 0)
                BAD("--vocab %s: expected a positive integer", v);
            o->vocab_set = 1;
        } else if (!strcmp(a, "--max-seq")) {
            if (parse_int(v, 1, INT_MAX, &o->max_seq) != 0)
                BAD("--max-seq %s: expected a positive integer", v);
            o->max_seq_set = 1;
        } else if (!strcmp(a, "--grad-clip")) {
            float x;
            if (sz_opt_real(a, v, 0, 0, INFINITY, 0, &x) != 0)
                return -1;
            o->clip = x > 0;
        } else if (!strcmp(a, "--stage")) {
            if (parse_int(v, 0, 3, &o->stage) != 0)
                BAD("--stage %s: expected 0, 1, 2 or 3", v);
        } else if (!strcmp(a, "--rank")) {
            if (parse_int(v, 0, INT_MAX, &o->rank) != 0)
                BAD("--rank %s: expected an integer >= 0", v);
        } else if (!strcmp(a, "--prefetch-bytes") || !strcmp(a, "--max-live-bytes")) {
            double b;
            if (sz_parse_bytes(v, &b) != 0 || !(b >= 0) || !(b < 9e18))
                BAD("%s %s: expected bytes >= 0 such as 2M or 64MiB", a, v);
            *(!strcmp(a, "--prefetch-bytes") ? &o->prefetch_bytes : &o->max_live_bytes) = (int64_t)b;
        } else if (!strcmp(a, "--nd")) {
            o->nd_set = 1;
            if (parse_nd_list(v, o) != 0)
                BAD("--nd %s: expected a comma-separated list of at most %d positive integers, e.g. 1,8,64",
                    v, MAX_ND_VALUES);
        } else if (!strcmp(a, "--optimizer")) {
            if (sz_opt_optimizer(a, v, &o->optimizer) != 0)
                return -1;
        } else if (!strcmp(a, "--momentum")) {
            if (sz_opt_real(a, v, 0, 0, 1, 1, &o->momentum) != 0)
                return -1;
        } else if (!strcmp(a, "--precision")) {
            o->fp16 = !strcmp(v, "fp16");
            if (!strcmp(v, "mixed") || !strcmp(v, "bf16") || o->fp16)
                o->mixed = 1;
            else if (!strcmp(v, "fp32"))
                o->mixed = 0;
            else
                BAD("--precision %s: expected mixed (or bf16), fp16 or fp32", v);
            o->precision = v;
        } else if (!strcmp(a, "--bf16-compute")) {
            sz_bf16_compute bc;
            if (sz_bf16_compute_parse(v, &bc) != SZ_OK)
                BAD("--bf16-compute %s: must be auto, native or emulated", v);
            o->bf16_compute = v;
        } else if (!strcmp(a, "--batch")) {
            if (parse_int(v, 1, INT_MAX, &o->batch) != 0)
                BAD("--batch %s: expected a positive integer", v);
            o->batch_set = 1;
        } else if (!strcmp(a, "--seq")) {
            if (parse_int(v, 1, INT_MAX, &o->seq) != 0)
                BAD("--seq %s: expected a positive integer", v);
            o->seq_set = 1;
        } else if (!strcmp(a, "--micro-batches")) {
            if (parse_int(v, 1, INT_MAX, &o->micro_batches) != 0)
                BAD("--micro-batches %s: expected a positive integer", v);
        } else if (!strcmp(a, "--budget")) {
            o->budget_str = v;
            if (sz_parse_bytes(v, &o->budget) != 0 || !(o->budget > 0))
                BAD("--budget %s: expected positive bytes such as 80G (80e9), 80GiB (80*2^30) or 8.5e10", v);
        } else if (!strcmp(a, "--extra")) {
            o->extra_str = v;
            if (sz_parse_bytes(v, &o->extra) != 0 || !(o->extra >= 0))
                BAD("--extra %s: expected bytes >= 0 such as 2G or 512MiB", v);
        } else if (!strcmp(a, "--bucket-bytes")) {
            double b;
            o->bucket_str = v;
            if (sz_parse_bytes(v, &b) != 0 || !(b >= 1) || !(b < 9e18))
                BAD("--bucket-bytes %s: expected a positive byte size such as 1M (1e6), 32MiB or 64K", v);
            o->bucket_bytes = (int64_t)b;
        } else if (!strcmp(a, "--kernel-threads")) {
            if (parse_int(v, 1, 4096, &o->kernel_threads) != 0)
                BAD("--kernel-threads %s: expected a positive integer", v);
        } else if (!strcmp(a, "--data-tokens")) {
            if (sz_parse_count(v, &o->data_tokens) != 0 || o->data_tokens < 0)
                BAD("--data-tokens %s: expected a token count such as 41856 or 9B", v);
        } else if (!strcmp(a, "--max-nd")) {
            if (parse_int(v, 1, INT_MAX, &o->max_nd) != 0)
                BAD("--max-nd %s: expected a positive integer", v);
        } else if (!strcmp(a, "--decimals")) {
            if (parse_int(v, 0, 9, &o->decimals) != 0)
                BAD("--decimals %s: expected an integer 0..9", v);
        } else {
            BAD("unknown option %s", a);
        }
    }
    if (o->paper_pa || o->paper_table3) {
        if (o->paper_pa && o->paper_table3)
            BAD("give one of --paper-pa and --paper-table3");
        if (o->params_str || o->model || o->plan)
            BAD("--paper-pa and --paper-table3 set their own model: leave out --params, --model and --plan");
        return 0;
    }
    if (!o->params_str == !o->model)
        BAD("give exactly one of --params N or --model NAME");
    if (o->nm > 1 && !o->model)
        BAD("--mp %d needs --model: one MP rank's parameters are counted from the model's tensors (which "
            "Megatron partitions, which every rank replicates)", o->nm);
    if (o->pa && !o->ckpt)
        BAD("--partition-activations (P_a) needs --ckpt: it partitions the block checkpoints, and without "
            "activation checkpointing there are none");
    if (o->params_str && (o->vocab_set || o->max_seq_set || o->batch_set || o->seq_set || o->ckpt || o->offload))
        BAD("--vocab, --max-seq, --batch, --seq, --ckpt and --offload-checkpoints describe a GPT-2 model: use them "
            "with --model, not --params");
    if (o->momentum != 0.0f && o->optimizer != SZ_OPTIMIZER_SGD)
        BAD("--momentum %g: only --optimizer sgd has a momentum", (double)o->momentum);
    o->opt_states = sz_optimizer_states(o->optimizer, o->momentum);
    if (o->offload && !o->ckpt) /* as sz-train's --offload-checkpoints without --checkpoint */
        BAD("--offload-checkpoints needs --ckpt: offloading moves the block checkpoints to a host pool, and "
            "without activation checkpointing there are none");
    if (o->model) {
        char err[256] = "";
        if (sz_arch_config_from_string(&o->cfg, o->kind, o->model, o->vocab, o->max_seq, err, sizeof err) != SZ_OK)
            BAD("--model %s (--arch %s): %s", o->model, sz_arch_name(o->kind), err);
        o->psi = o->psi_model = (double)sz_arch_num_params(&o->cfg);
        o->have_model = 1;
        if (mp_on(o) && sz_mp_rank_params(&o->cfg, o->nm, &o->psi_split, &o->psi_replicated, &o->psi, err,
                                          sizeof err) != 0)
            BAD("--mp %d: N_m must divide the attention heads, the MLP width and the %s; it does not divide %s",
                o->nm, o->kind == SZ_ARCH_LLAMA ? "vocabulary" : "padded vocabulary", err);
        if (!o->seq_set)
            o->seq = o->max_seq;
        if (o->seq > o->max_seq)
            BAD("--seq %d is longer than the model's %d positions (raise --max-seq)", o->seq, o->max_seq);
    }
    if (o->plan) {
        if (!o->model)
            BAD("--plan needs --model: the plan is built from the model's units");
        if (o->n_nd > 1 && o->nd_set)
            BAD("--plan takes one --nd value (the ranks of the plan's configuration)");
        if (!o->nd_set)
            o->nd[0] = 1;
        if (o->rank >= o->nd[0])
            BAD("--rank %d: expected a rank below N_d = %d", o->rank, o->nd[0]);
    }
    if (o->extra_str && !o->budget_str)
        BAD("--extra counts bytes against --budget: give --budget too");
    /* sz-train's choice, by the engine's own rule (sz_precision_resolve on CPU workers) */
    sz_bf16_compute_parse(o->bf16_compute, &o->bc); /* checked above */
    o->bf16_why = NULL;
    if (o->bc == SZ_BF16_COMPUTE_AUTO)
        sz_bf16_compute_auto(&o->bf16_why);
    sz_zero_config z = zero_of(o, o->stage);
    if (sz_precision_resolve_cpu(&z, &o->prec) != SZ_OK)
        BAD("--precision %s: not resolved (the message above says why)", o->precision);
    return 0;
}

static const char *bf16_path(const struct opts *o)
{
    return !o->mixed ? "fp32" : o->fp16 ? "fp16" : o->prec.native ? "native" : "emulated";
}

/* ---- what is computed once and printed either way --------------------------------------- */

struct result {
    double act, act_ckpt;  /* -1 when there is no model */
    double act_offload;    /* device-pool activations with offloaded checkpoints (-1: no model) */
    double host_pool;      /* the host pool: every block checkpoint */
    double ckpt_device;    /* block checkpoints on the device pool at once (at most) */
    int64_t largest_unit;  /* elements of the model's largest unit; -1 without a model (no cap) */
    int64_t comm_buf[MAX_ND_VALUES]; /* C_B buffer bytes per rank, for each --nd value */
    double host_buffers;   /* host buffers beside the engine's tensors (-1: no model) */
    /* what sz-train's model registers on this bf16 path, the plan's SZ_MEM_ACTIVATIONS (-1: no model):
     * full, checkpointed, checkpointed and offloaded (device part; eng_host the host pool) */
    int64_t eng_act, eng_act_ckpt, eng_act_offload, eng_host;
    int64_t peak[4][MAX_ND_VALUES]; /* the plan's fold for rank 0 at each stage and --nd value (-1: none) */
    double extra;          /* per-rank bytes counted against the budget besides model states */
    int min_nd[4];
};

/* One MP rank of N_m (sz-train has no model parallelism yet: what its engine would hold): the split
 * tensors' 1/N_m (sz_arch_mp_shape); under P_a each block checkpoint a 1/N_m slice (whole elements)
 * plus one gathered input for the recompute, with offloading the slices in the host pool. The
 * other activations stay those of the whole model: an upper bound until the engine's
 * tensor-parallel operations exist. */
static void mp_rank_shape(const struct opts *o, const sz_zero_config *z, sz_model_shape *s)
{
    sz_arch_mp_shape(o->kind, s, o->nm);
    if (!o->pa || !z->checkpoint)
        return;
    int64_t kept = 0, whole = 0, gathered = 0;
    for (int u = 0; u < s->nunits; u++)
        if (s->ckpt_bytes[u] > 0) {
            int64_t slice = (s->ckpt_bytes[u] / 4 + o->nm - 1) / o->nm * 4; /* fp32 elements */
            whole += s->ckpt_bytes[u];
            kept += slice;
            gathered = s->ckpt_bytes[u] > gathered ? s->ckpt_bytes[u] : gathered;
            s->ckpt_bytes[u] = slice;
        }
    if (z->offload_checkpoints)
        s->host_pool_bytes = kept;
    else
        s->activation_bytes += kept - whole;
    s->activation_bytes += gathered;
}

/* The model as sz-train's engine would build it under z on a rank of N_d nd (its kernel threads: the
 * machine's cores shared by the ranks, or --kernel-threads): 0, or -1 (message printed). */
static int model_shape(const struct opts *o, const sz_zero_config *z, int nd, sz_model_shape *s)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = o->kernel_threads > 0 ? o->kernel_threads : (int)(cores / nd > 1 ? cores / nd : 1);
    char err[256] = "";
    sz_status st = sz_arch_shape(&o->cfg, o->batch, o->seq, z, 1, threads, s, err, sizeof err);
    if (st != SZ_OK)
        fprintf(stderr, "sz-estimate: %s\n", err[0] ? err : sz_status_string(st));
    if (st == SZ_OK && o->nm > 1)
        mp_rank_shape(o, z, s);
    return st == SZ_OK ? 0 : -1;
}

/* What sz-train's rank holds on the host beside the engine's tensors (SZ_MEM_HOST_BUFFERS): the
 * model's kernels' working memory (its shape's), the data loader's tokens, the batch. */
static int64_t host_buffer_bytes(const struct opts *o, int nd)
{
    sz_zero_config z = zero_of(o, o->stage);
    sz_model_shape s;
    if (model_shape(o, &z, nd, &s) != 0)
        return -1;
    int64_t bytes = z.host_bytes + s.host_buffer_bytes;
    sz_model_shape_free(&s);
    return bytes;
}

/* The activation bytes sz-train's model registers (the plan's SZ_MEM_ACTIVATIONS) with and without
 * checkpointing and offloading; *host gets the host pool's. */
static int64_t engine_activation_bytes(const struct opts *o, int ckpt, int offload, int64_t *host)
{
    sz_zero_config z = zero_of(o, o->stage);
    z.checkpoint = ckpt;
    z.offload_checkpoints = offload;
    sz_model_shape s;
    if (model_shape(o, &z, 1, &s) != 0)
        return -1;
    int64_t bytes = s.activation_bytes;
    if (host)
        *host = s.host_pool_bytes;
    sz_model_shape_free(&s);
    return bytes;
}

/* The step plan of `rank` at `stage` and N_d `nd` as sz-train's engine builds it: its folded peak,
 * and printed with `print`. 0, or -1 when it cannot be built. */
static int plan_peak(const struct opts *o, int stage, int nd, int rank, int64_t *peak, FILE *print)
{
    sz_zero_config z = zero_of(o, stage);
    sz_model_shape s;
    if (model_shape(o, &z, nd, &s) != 0)
        return -1;
    sz_status st = sz_model_shape_plan(&s, &z, nd, rank, o->clip, o->comm_worker, peak, print, o->json);
    sz_model_shape_free(&s);
    return st == SZ_OK ? 0 : -1;
}

/* Elements of the largest unit one MP rank holds (the C_B buffer's cap). */
static int64_t rank_largest_unit(const struct opts *o)
{
    sz_zero_config z = zero_of(o, o->stage);
    sz_model_shape s;
    if (model_shape(o, &z, 1, &s) != 0)
        return -1;
    int64_t m = 0;
    for (int u = 0; u < s.nunits; u++) {
        int64_t n = 0;
        for (int i = 0; i < s.units[u].nparams; i++)
            n += s.units[u].params[i].rows * s.units[u].params[i].cols;
        m = n > m ? n : m;
    }
    sz_model_shape_free(&s);
    return m;
}

static void compute(const struct opts *o, struct result *r)
{
    r->act = r->act_ckpt = r->act_offload = r->host_pool = r->ckpt_device = r->host_buffers = -1.0;
    r->largest_unit = -1;
    r->eng_act = r->eng_act_ckpt = r->eng_act_offload = r->eng_host = -1;
    for (int s = 0; s < 4; s++)
        for (int i = 0; i < o->n_nd; i++)
            r->peak[s][i] = -1;
    if (o->have_model) {
        r->host_buffers = (double)host_buffer_bytes(o, o->nd[0]);
        r->eng_act = engine_activation_bytes(o, 0, 0, NULL);
        r->eng_act_ckpt = engine_activation_bytes(o, 1, 0, NULL);
        r->eng_act_offload = engine_activation_bytes(o, 1, 1, &r->eng_host);
        for (int s = 0; s < 4; s++)
            for (int i = 0; i < o->n_nd; i++)
                if (plan_peak(o, s, o->nd[i], 0, &r->peak[s][i], NULL) != 0)
                    r->peak[s][i] = -1;
    }
    if (o->have_model) { /* the model's forward tensors (fp32), and P_a+cpu's pools: every block
                          * checkpoint in the host pool, the device pool the rest of checkpointing's */
        r->act = sz_arch_activation_bytes(&o->cfg, o->batch, o->seq, 0, 0);
        r->act_ckpt = sz_arch_activation_bytes(&o->cfg, o->batch, o->seq, 1, 0);
        r->act_offload = sz_arch_activation_bytes(&o->cfg, o->batch, o->seq, 1, 1);
        r->largest_unit = sz_arch_largest_unit_numel(&o->cfg);
        if (mp_on(o)) { /* one MP rank's (Megatron's split; P_a's slices) */
            r->act = sz_arch_activation_bytes_mp(&o->cfg, o->batch, o->seq, 0, 0, o->nm, 0);
            r->act_ckpt = sz_arch_activation_bytes_mp(&o->cfg, o->batch, o->seq, 1, 0, o->nm, o->pa);
            r->act_offload = sz_arch_activation_bytes_mp(&o->cfg, o->batch, o->seq, 1, 1, o->nm, o->pa);
            r->largest_unit = rank_largest_unit(o);
        }
        r->host_pool = (double)r->eng_host;
        r->ckpt_device = r->act_offload - r->act_ckpt + r->host_pool;
    }
    for (int i = 0; i < o->n_nd; i++)
        r->comm_buf[i] = sz_zero_comm_buffer_bytes(o->bucket_bytes, o->nd[i], r->largest_unit);
    /* the budget counts the activations the plan counts (this bf16 path's) */
    r->extra = o->extra + (o->have_model ? r->host_buffers + (double)engine_activation_bytes(o, o->ckpt, o->offload, NULL)
                                         : 0.0);
    for (int s = 0; s < 4; s++)
        r->min_nd[s] = o->budget_str ? sz_zero_min_nd_opt(s, o->psi, o->mixed, o->opt_states, o->budget, r->extra, o->max_nd) : -1;
}

/* Which activations the budget counts: none (no model), full, checkpointed, or offloaded (the
 * device pool of checkpointed activations whose checkpoints wait in the host pool). */
static const char *activations_counted(const struct opts *o)
{
    return !o->have_model ? "none" : o->offload ? "offloaded" : o->ckpt ? "checkpointed" : "full";
}

/* ---- JSON ---------------------------------------------------------------------------------- */

/* C_B: the bucket size in effect, the largest unit capping the buffer (with a model), and the
 * buffer bytes per rank for each N_d, in the order of "nd". */
static void add_comm_buffer_json(cJSON *root, const struct opts *o, const struct result *r)
{
    cJSON_AddNumberToObject(root, "bucket_bytes", (double)o->bucket_bytes);
    if (r->largest_unit > 0)
        cJSON_AddNumberToObject(root, "largest_unit_elems", (double)r->largest_unit);
    cJSON *bufs = cJSON_AddArrayToObject(root, "comm_buffer_bytes");
    for (int i = 0; i < o->n_nd; i++)
        cJSON_AddItemToArray(bufs, cJSON_CreateNumber((double)r->comm_buf[i]));
}

/* The model-parallel traffic of one block per step (graph/zero_estimate.h), elements. */
struct mp_traffic {
    double btc, block, block_sent, pa, pa_sent;
    int elem_bytes;
};

static struct mp_traffic mp_traffic_of(const struct opts *o)
{
    struct mp_traffic t = {.btc = sz_arch_block_io(&o->cfg, o->batch, o->seq), .elem_bytes = o->mixed ? 2 : 4};
    t.block = sz_zero_mp_block_elems(t.btc, o->ckpt, o->nm);
    t.block_sent = sz_zero_mp_block_elems_sent(t.btc, o->ckpt, o->nm);
    t.pa = o->pa && o->ckpt ? sz_zero_pa_block_elems(t.btc, o->nm) : 0.0;
    t.pa_sent = o->pa && o->ckpt ? sz_zero_pa_block_elems_sent(t.btc, o->nm) : 0.0;
    return t;
}

static void add_mp_json(cJSON *root, const struct opts *o)
{
    cJSON *m = cJSON_AddObjectToObject(root, "model_parallel");
    cJSON_AddNumberToObject(m, "nm", o->nm);
    cJSON_AddItemToObject(m, "nd", cJSON_CreateIntArray(o->nd, o->n_nd));
    cJSON *ranks = cJSON_AddArrayToObject(m, "ranks");
    for (int i = 0; i < o->n_nd; i++)
        cJSON_AddItemToArray(ranks, cJSON_CreateNumber((double)o->nm * o->nd[i]));
    cJSON_AddNumberToObject(m, "params_model", o->psi_model);
    cJSON_AddNumberToObject(m, "params_split", o->psi_split);
    cJSON_AddNumberToObject(m, "params_replicated", o->psi_replicated);
    cJSON_AddNumberToObject(m, "params_per_rank", o->psi);
    cJSON_AddBoolToObject(m, "partition_activations", o->pa && o->nm > 1);
    cJSON_AddBoolToObject(m, "cpu_checkpointing", o->offload);
    cJSON_AddBoolToObject(m, "runtime", 0); /* sz-train --mp is not built yet */
    struct mp_traffic t = mp_traffic_of(o);
    int L = sz_arch_field(&o->cfg, "layers");
    cJSON *tr = cJSON_AddObjectToObject(m, "traffic");
    cJSON_AddNumberToObject(tr, "block_io_elems", t.btc);
    cJSON_AddNumberToObject(tr, "per_block_elems", t.block);
    cJSON_AddNumberToObject(tr, "per_block_sent_elems", t.block_sent);
    cJSON_AddNumberToObject(tr, "pa_per_block_elems", t.pa);
    cJSON_AddNumberToObject(tr, "pa_per_block_sent_elems", t.pa_sent);
    cJSON_AddNumberToObject(tr, "blocks_elems", (double)L * (t.block + t.pa));
    cJSON_AddNumberToObject(tr, "blocks_bytes", (double)L * (t.block + t.pa) * t.elem_bytes);
    cJSON_AddNumberToObject(tr, "elem_bytes", t.elem_bytes);
}

static int print_json(const struct opts *o, const struct result *r)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "params", mp_on(o) ? o->psi_model : o->psi);
    if (mp_on(o))
        add_mp_json(root, o);
    if (o->have_model) {
        cJSON *m = cJSON_AddObjectToObject(root, "model");
        cJSON_AddStringToObject(m, "name", o->model);
        cJSON_AddStringToObject(m, "arch", sz_arch_name(o->kind));
        static const char *const fields[] = {"hidden", "layers", "heads", "channels", "vocab", "padded_vocab", "max_seq"};
        for (int i = 0; i < (int)(sizeof fields / sizeof fields[0]); i++) {
            int v = sz_arch_field(&o->cfg, fields[i]);
            if (v < 0 && !strcmp(fields[i], "padded_vocab")) /* an unpadded vocabulary */
                v = sz_arch_vocab(&o->cfg);
            if (v >= 0)
                cJSON_AddNumberToObject(m, fields[i], v);
        }
    }
    cJSON_AddStringToObject(root, "precision", o->fp16 ? "fp16" : o->mixed ? "mixed" : "fp32");
    cJSON_AddStringToObject(root, "bf16_path", bf16_path(o));
    if (o->mixed)
        cJSON_AddStringToObject(root, "bf16_params", o->prec.params_direct ? "direct" : "working copies");
    cJSON_AddStringToObject(root, "optimizer", sz_optimizer_name(o->optimizer));
    cJSON_AddNumberToObject(root, "momentum", o->momentum);
    cJSON_AddNumberToObject(root, "optimizer_state_floats", o->opt_states);
    cJSON_AddNumberToObject(root, "comm_dtype_bytes", o->mixed ? 2 : 4);
    cJSON_AddNumberToObject(root, "micro_batches", o->micro_batches);
    cJSON_AddItemToObject(root, "nd", cJSON_CreateIntArray(o->nd, o->n_nd));
    add_comm_buffer_json(root, o, r);
    cJSON *stages = cJSON_AddArrayToObject(root, "stages");
    for (int s = 0; s < 4; s++) {
        cJSON *st = cJSON_CreateObject();
        cJSON_AddNumberToObject(st, "stage", s);
        cJSON_AddStringToObject(st, "name", k_stage_names[s]);
        cJSON *per = cJSON_AddArrayToObject(st, "per_nd");
        for (int i = 0; i < o->n_nd; i++) {
            int nd = o->nd[i];
            sz_zero_breakdown b;
            sz_zero_state_breakdown_opt(s, o->psi, nd, o->mixed, o->opt_states, &b);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "nd", nd);
            cJSON_AddNumberToObject(e, "model_state_bytes", sz_zero_model_state_bytes_opt(s, o->psi, nd, o->mixed, o->opt_states));
            cJSON *bd = cJSON_AddObjectToObject(e, "breakdown");
            cJSON_AddNumberToObject(bd, "params", b.params);
            cJSON_AddNumberToObject(bd, "param_shard", b.param_shard);
            cJSON_AddNumberToObject(bd, "grads", b.grads);
            cJSON_AddNumberToObject(bd, "grad_shard", b.grad_shard);
            cJSON_AddNumberToObject(bd, "master", b.master);
            cJSON_AddNumberToObject(bd, "adam_m", b.adam_m);
            cJSON_AddNumberToObject(bd, "adam_v", b.adam_v);
            cJSON_AddNumberToObject(e, "comm_elems", sz_zero_comm_elems_mb(s, o->psi, nd, o->micro_batches));
            cJSON_AddNumberToObject(e, "comm_bytes",
                                    sz_zero_comm_bytes_mb(s, o->psi, nd, o->mixed, o->micro_batches));
            if (o->have_model && r->peak[s][i] >= 0) /* the plan's fold: --plan's peak_bytes */
                cJSON_AddNumberToObject(e, "predicted_peak_bytes", (double)r->peak[s][i]);
            cJSON_AddItemToArray(per, e);
        }
        cJSON_AddItemToArray(stages, st);
    }
    if (o->have_model) {
        cJSON_AddNumberToObject(root, "batch", o->batch);
        cJSON_AddNumberToObject(root, "seq", o->seq);
        cJSON_AddNumberToObject(root, "activation_bytes", r->act);
        cJSON_AddNumberToObject(root, "activation_bytes_ckpt", r->act_ckpt);
        /* what sz-train registers on this bf16 path, as the plan counts it */
        cJSON_AddNumberToObject(root, "engine_activation_bytes", (double)r->eng_act);
        cJSON_AddNumberToObject(root, "engine_activation_bytes_ckpt", (double)r->eng_act_ckpt);
        cJSON_AddNumberToObject(root, "host_buffer_bytes", r->host_buffers);
        cJSON_AddBoolToObject(root, "checkpoint", o->ckpt);
        cJSON_AddBoolToObject(root, "offload_checkpoints", o->offload);
        if (o->offload) {
            cJSON_AddNumberToObject(root, "activation_bytes_offload", r->act_offload);
            cJSON_AddNumberToObject(root, "engine_activation_bytes_offload", (double)r->eng_act_offload);
            cJSON_AddNumberToObject(root, "checkpoints_on_device_bytes", r->ckpt_device);
            cJSON_AddNumberToObject(root, "host_pool_bytes", r->host_pool);
        }
    }
    if (o->budget_str) {
        cJSON *b = cJSON_AddObjectToObject(root, "budget");
        cJSON_AddNumberToObject(b, "budget_bytes", o->budget);
        cJSON_AddStringToObject(b, "activations", activations_counted(o));
        cJSON_AddNumberToObject(b, "extra_bytes", r->extra);
        cJSON_AddNumberToObject(b, "max_nd", o->max_nd);
        cJSON *mins = cJSON_AddArrayToObject(b, "min_nd");
        for (int s = 0; s < 4; s++)
            cJSON_AddItemToArray(mins, r->min_nd[s] > 0 ? cJSON_CreateNumber(r->min_nd[s]) : cJSON_CreateNull());
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "sz-estimate: out of memory while writing JSON\n");
        return 1;
    }
    puts(text);
    cJSON_free(text);
    return 0;
}

/* ---- text ------------------------------------------------------------------------------------ */

static void print_header_row(const struct opts *o)
{
    printf("  %-14s", "stage");
    for (int i = 0; i < o->n_nd; i++) {
        char h[32];
        snprintf(h, sizeof h, "N_d=%d", o->nd[i]);
        printf(" %10s", h);
    }
    printf("\n");
}

static void print_stage_label(int s)
{
    char l[32];
    snprintf(l, sizeof l, "%d %s", s, k_stage_names[s]);
    printf("  %-14s", l);
}

/* P_a+cpu: the device pool and the host pool, apart. */
static void print_offload(const struct opts *o, const struct result *r)
{
    /* how many checkpoints the device holds at once, as the estimator counted them */
    const int d = o->decimals, L = sz_arch_field(&o->cfg, "layers"), on_device = (int)llround(r->ckpt_device * L / r->host_pool);
    printf("  checkpoints offloaded (P_a+cpu): device pool %.*f GB (%.0f bytes), %.0f bytes less than\n"
           "    checkpointing alone, with at most %d of the %d block checkpoints there at once (%.0f bytes);\n"
           "    host pool %.*f GB (%.0f bytes: all %d checkpoints, not part of the device peak)\n",
           d, r->act_offload / 1e9, r->act_offload, r->act_ckpt - r->act_offload, on_device, L, r->ckpt_device, d,
           r->host_pool / 1e9, r->host_pool, L);
}

/* C_B: the reduce-scatter buffer per rank for each N_d, in bytes (exact; often under 0.1 GB). */
static void print_comm_buffer(const struct opts *o, const struct result *r)
{
    printf("\nCommunication buffer per rank (C_B: reduce-scatter rounds through one buffer; --bucket-bytes %s = "
           "%lld bytes), bytes:\n", o->bucket_str ? o->bucket_str : "32MiB (default)", (long long)o->bucket_bytes);
    print_header_row(o);
    printf("  %-14s", "any stage");
    for (int i = 0; i < o->n_nd; i++)
        printf(" %10lld", (long long)r->comm_buf[i]);
    printf("\n");
    if (r->largest_unit > 0)
        printf("  (never more than the largest unit needs: 4 bytes x its %lld elements, padded to a multiple\n"
               "  of N_d; no buffer at N_d=1)\n", (long long)r->largest_unit);
    else
        printf("  (at most the bucket for any model; a model's largest unit can cap it: give --model)\n");
}

/* N_m, the ranks, one MP rank's Ψ (what the tables below are per rank of). */
static void print_mp_header(const struct opts *o)
{
    printf("model parallelism: N_m = %d (Megatron-LM tensor parallelism; an estimate: sz-train --mp is not built "
           "yet)\n  the columns are N_d, the data-parallel degree; ranks = N_m x N_d:", o->nm);
    for (int i = 0; i < o->n_nd; i++)
        printf(" %lld", (long long)o->nm * o->nd[i]);
    printf("\n  Ψ per MP rank = %.0f split / %d + %.0f replicated = %.0f parameters (the model states and\n"
           "  DP communication below are per rank, at this Ψ)\n", o->psi_split, o->nm, o->psi_replicated, o->psi);
    if (o->pa && o->nm == 1)
        printf("  P_a (--partition-activations): nothing to partition at N_m = 1 (each checkpoint stays whole)\n");
}

/* The model-parallel traffic per block and step (within each MP group). */
static void print_mp_traffic(const struct opts *o)
{
    struct mp_traffic t = mp_traffic_of(o);
    const int L = sz_arch_field(&o->cfg, "layers");
    printf("\nModel-parallel traffic per step (N_m = %d, within each MP group), one micro-batch of B·T·C = %.0f:\n",
           o->nm, t.btc);
    printf("  per block: %.0f elements = %d x B·T·C (the paper's %d x seq x hidden per sample: all-reduces of B·T·C,\n"
           "    2 in forward, 2 in backward%s, each counted as twice its message); a ring sends %.0f per rank\n",
           t.block, o->ckpt ? 12 : 8, o->ckpt ? 12 : 8, o->ckpt ? ", 2 in the recompute" : " (no recompute)",
           t.block_sent);
    if (o->pa && o->ckpt && o->nm > 1)
        printf("  P_a: + one all-gather of B·T·C per block before its recompute: %.0f elements (%.1f%% of the\n"
               "    above); a ring sends %.0f per rank\n", t.pa, 100.0 * t.pa / t.block, t.pa_sent);
    printf("  all %d blocks: %.0f elements, %.0f bytes at %d bytes each\n", L, L * (t.block + t.pa),
           L * (t.block + t.pa) * t.elem_bytes, t.elem_bytes);
}

static int print_text(const struct opts *o, const struct result *r)
{
    const int d = o->decimals;
    if (o->have_model) {
        char desc[128];
        sz_arch_format(&o->cfg, desc, sizeof desc);
        printf("%s %s (%s): Ψ = %.0f parameters\n", sz_arch_title(o->kind), o->model, desc,
               mp_on(o) ? o->psi_model : o->psi);
    } else {
        printf("Ψ = %.0f parameters (%.4g)\n", o->psi, o->psi);
    }
    if (mp_on(o))
        print_mp_header(o);
    static const char *const states[3] = {"no optimizer state", "the momentum buffer", "Adam m and v"};
    if (o->mixed)
        printf("precision: mixed (%s params and grads; fp32 master, %s: K = %d)\n", o->fp16 ? "fp16" : "bf16",
               states[o->opt_states],
               4 + 4 * o->opt_states);
    else
        printf("precision: fp32 (params, grads, %s; no master)\n", states[o->opt_states]);
    printf("bf16_path: %s", bf16_path(o));
    if (o->mixed)
        printf(" (--bf16-compute %s%s%s)", o->bf16_compute, o->bf16_why ? ": " : "", o->bf16_why ? o->bf16_why : "");
    printf("\n");
    if (o->mixed)
        printf("bf16 parameters: %s\n", o->prec.params_direct ? "read directly by the units' ops (no fp32 working copies; "
                                                        "sz-train keeps them with CUDA workers)"
                                                      : "fp32 working copies, one unit at a time");
    printf("optimizer: %s", sz_optimizer_name(o->optimizer));
    if (o->optimizer == SZ_OPTIMIZER_SGD)
        printf(" (momentum %g)", (double)o->momentum);
    printf("\n\n");

    printf("Model states per rank, GB (1e9 bytes):\n");
    print_header_row(o);
    for (int s = 0; s < 4; s++) {
        print_stage_label(s);
        for (int i = 0; i < o->n_nd; i++)
            printf(" %10.*f", d, sz_zero_model_state_bytes_opt(s, o->psi, o->nd[i], o->mixed, o->opt_states) / 1e9);
        printf("\n");
    }

    printf("\nCommunication sent per rank per step (%d micro-batch%s, %s), GB:\n", o->micro_batches,
           o->micro_batches == 1 ? "" : "es", o->mixed ? "bf16" : "fp32");
    print_header_row(o);
    for (int s = 0; s < 4; s++) {
        print_stage_label(s);
        for (int i = 0; i < o->n_nd; i++)
            printf(" %10.*f", d, sz_zero_comm_bytes_mb(s, o->psi, o->nd[i], o->mixed, o->micro_batches) / 1e9);
        printf("\n");
    }

    if (o->have_model) {
        printf("\nActivations per rank, one micro-batch of B=%d x T=%d:\n", o->batch, o->seq);
        printf("  as sz-train holds them (bf16_path %s; with their gradients and the batch; the plan counts these):\n"
               "    full %.*f GB (%lld bytes); block checkpointing %.*f GB (%lld bytes)", bf16_path(o), d,
               r->eng_act / 1e9, (long long)r->eng_act, d, r->eng_act_ckpt / 1e9, (long long)r->eng_act_ckpt);
        if (o->offload)
            printf("; checkpoints offloaded %.*f GB (%lld bytes; host pool %lld)", d, r->eng_act_offload / 1e9,
                   (long long)r->eng_act_offload, (long long)r->eng_host);
        if (mp_on(o))
            printf("\n    (sz-train has no model parallelism yet: these count P_a's checkpoint slices but the other\n"
                   "    activations whole, an upper bound; the plan and the budget count them)");
        printf("\n  %s full %.*f GB (%.0f bytes); block checkpointing%s %.*f GB (%.0f bytes)\n",
               mp_on(o) ? "the model's forward tensors on one MP rank (Megatron's split; fp32):\n   "
                        : "the model's forward tensors (fp32):",
               d, r->act / 1e9, r->act, o->pa && o->nm > 1 ? " with P_a" : "", d, r->act_ckpt / 1e9, r->act_ckpt);
        if (o->offload)
            print_offload(o, r);
        printf("  host buffers beside them (matmul working memory, data loader, batch; in the budget): %.0f bytes\n",
               r->host_buffers);
    }

    if (o->have_model) {
        printf("\nPredicted peak per rank (rank 0's step plan folded, as --plan prints it and sz-train predicts and\n"
               "measures it; %s, %d micro-batch%s%s%s), GB:\n", bf16_path(o), o->micro_batches,
               o->micro_batches == 1 ? "" : "es", o->ckpt ? ", checkpointing" : "",
               o->offload ? ", checkpoints offloaded" : "");
        print_header_row(o);
        for (int s = 0; s < 4; s++) {
            print_stage_label(s);
            for (int i = 0; i < o->n_nd; i++)
                if (r->peak[s][i] >= 0)
                    printf(" %10.*f", d, r->peak[s][i] / 1e9);
                else
                    printf(" %10s", "-");
            printf("\n");
        }
    }

    if (o->have_model && o->nm > 1)
        print_mp_traffic(o);

    print_comm_buffer(o, r);

    if (o->budget_str) {
        printf("\nBudget %s = %.0f bytes per rank", o->budget_str, o->budget);
        if (r->extra > 0) {
            printf(", of which %.*f GB go to", d, r->extra / 1e9);
            if (o->have_model)
                printf(" %s activations and host buffers", o->offload ? "device-pool (checkpoints offloaded)" : activations_counted(o));
            if (o->have_model && o->extra > 0)
                printf(" and");
            if (o->extra > 0)
                printf(" --extra %s", o->extra_str);
        }
        printf(":\n  %-14s %s\n", "stage", "smallest N_d that fits");
        for (int s = 0; s < 4; s++) {
            print_stage_label(s);
            if (r->min_nd[s] > 0)
                printf(" %d (%.*f GB of model states)\n", r->min_nd[s], d,
                       sz_zero_model_state_bytes_opt(s, o->psi, r->min_nd[s], o->mixed, o->opt_states) / 1e9);
            else
                printf(" none up to N_d=%d\n", o->max_nd);
        }
    }
    return 0;
}

/* ---- --plan: the model's units as its library declares them (sz_arch_shape), planned by the engine */

static int print_plan(const struct opts *o)
{
    int64_t peak;
    if (mp_on(o) && !o->json)
        printf("model parallelism: N_m = %d: the plan of one MP rank (DP rank %d of N_d = %d; %lld ranks): its split\n"
               "  tensors' 1/N_m%s; the other activations whole (sz-train --mp is not built yet: an upper bound)\n",
               o->nm, o->rank, o->nd[0], (long long)o->nm * o->nd[0],
               o->pa && o->ckpt && o->nm > 1 ? ", P_a's checkpoint slices and one gathered input" : "");
    if (plan_peak(o, o->stage, o->nd[0], o->rank, &peak, stdout) != 0) {
        fprintf(stderr, "sz-estimate: could not build the plan for this configuration\n");
        return 1;
    }
    return 0;
}

/* ---- the paper's analysis (--paper-pa, --paper-table3) ------------------------------------ */

/* §6.1: the 100B model, hidden 8192, 125 layers, seq 1024, MP 16; fp16 checkpoints (the paper's
 * precision) and fp32 ones (what sz-train's engine keeps), each at the batch nearest 33 GB. */
static int print_paper_pa(const struct opts *o)
{
    const int nm = o->nm_set ? o->nm : 16, L = 125, C = 8192, T = 1024;
    sz_mp_pa_example e16, e32;
    if (sz_mp_pa_example_of(L, C, T, nm, 2, 33e9, &e16) != 0 || sz_mp_pa_example_of(L, C, T, nm, 4, 33e9, &e32) != 0)
        return 1;
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "example", "ZeRO paper P_a: hidden 8192, 125 layers, seq 1024");
        cJSON_AddNumberToObject(root, "nm", nm);
        const sz_mp_pa_example *es[2] = {&e16, &e32};
        const char *names[2] = {"fp16", "fp32"};
        for (int i = 0; i < 2; i++) {
            cJSON *x = cJSON_AddObjectToObject(root, names[i]);
            cJSON_AddNumberToObject(x, "batch", es[i]->batch);
            cJSON_AddNumberToObject(x, "per_sample_bytes", es[i]->per_sample);
            cJSON_AddNumberToObject(x, "checkpoint_bytes", es[i]->without_pa);
            cJSON_AddNumberToObject(x, "checkpoint_bytes_pa", es[i]->with_pa);
        }
        char *text = cJSON_Print(root);
        cJSON_Delete(root);
        puts(text);
        cJSON_free(text);
        return 0;
    }
    printf("The ZeRO paper's P_a example: hidden %d, %d layers, sequence %d, MP %d (Ψ ≈ 12·L·C² = %.1fB)\n", C, L, T,
           nm, 12.0 * L * C * C / 1e9);
    printf("  block checkpoints per GPU = L x B x T x C x bytes; each MP rank keeps them all, or a 1/%d slice with P_a\n",
           nm);
    printf("  fp16 (the paper's): %.0f bytes per sequence; the paper's ~33 GB is a per-GPU batch of %d:\n"
           "    without P_a %.0f bytes (%.1f GB), with P_a %.0f bytes (%.2f GB)\n",
           e16.per_sample, e16.batch, e16.without_pa, e16.without_pa / 1e9, e16.with_pa, e16.with_pa / 1e9);
    printf("  fp32 (sz-train's checkpoints): the same bytes at a batch of %d: %.0f (%.1f GB), with P_a %.0f (%.2f GB)\n",
           e32.batch, e32.without_pa, e32.without_pa / 1e9, e32.with_pa, e32.with_pa / 1e9);
    return 0;
}

static int print_paper_table3(const struct opts *o)
{
    sz_mp_fit_setup su = {.heads = 64, .channels = 8192, .vocab = 50257, .seq = 1024,
                          .batch = o->batch_set ? o->batch : 16, .nm = o->nm_set ? o->nm : 16,
                          .nd = o->nd_set ? o->nd[0] : 25, .elem_bytes = 2,
                          .budget = o->budget_str ? o->budget : 34359738368.0, .bucket_bytes = o->bucket_bytes,
                          .max_layers = 4096};
    if (o->seq_set)
        su.seq = o->seq;
    sz_mp_fit f[5], at[5]; /* the largest fit; our memory at the paper's size */
    int layers[5];
    for (int i = 0; i < 5; i++)
        if ((layers[i] = sz_mp_fit_largest(&su, &sz_mp_table3[i], &f[i])) < 0 ||
            (sz_mp_table3[i].paper_psi > 0 &&
             sz_mp_fit_memory(&su, &sz_mp_table3[i], sz_mp_fit_layers_for(&su, sz_mp_table3[i].paper_psi), &at[i]) != 0)) {
            fprintf(stderr, "sz-estimate: --paper-table3: MP %d does not split the model family (64 heads, hidden "
                    "8192, padded vocabulary 50304) or the setup is invalid\n", su.nm);
            return 2;
        }
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON *st = cJSON_AddObjectToObject(root, "setup");
        cJSON_AddStringToObject(st, "model", "GPT-2-like: 64 heads, hidden 8192, vocab 50257 (padded 50304), layers varied");
        cJSON_AddNumberToObject(st, "nm", su.nm);
        cJSON_AddNumberToObject(st, "nd", su.nd);
        cJSON_AddNumberToObject(st, "gpus", (double)su.nm * su.nd);
        cJSON_AddNumberToObject(st, "batch", su.batch);
        cJSON_AddNumberToObject(st, "seq", su.seq);
        cJSON_AddNumberToObject(st, "budget_bytes", su.budget);
        cJSON_AddNumberToObject(st, "bucket_bytes", (double)su.bucket_bytes);
        cJSON_AddNumberToObject(st, "activation_elem_bytes", su.elem_bytes);
        cJSON *cs = cJSON_AddArrayToObject(root, "configs");
        for (int i = 0; i < 5; i++) {
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "name", sz_mp_table3[i].name);
            cJSON_AddStringToObject(c, "what", sz_mp_table3[i].what);
            cJSON_AddNumberToObject(c, "stage", sz_mp_table3[i].stage);
            cJSON_AddBoolToObject(c, "pa", sz_mp_table3[i].pa);
            cJSON_AddBoolToObject(c, "cpu", sz_mp_table3[i].cpu);
            cJSON_AddNumberToObject(c, "layers", layers[i]);
            cJSON_AddNumberToObject(c, "params", layers[i] ? f[i].psi : 0);
            cJSON_AddNumberToObject(c, "params_per_rank", layers[i] ? f[i].psi_rank : 0);
            cJSON_AddNumberToObject(c, "model_state_bytes", layers[i] ? f[i].states : 0);
            cJSON_AddNumberToObject(c, "activation_bytes", layers[i] ? f[i].activations : 0);
            cJSON_AddNumberToObject(c, "checkpoint_bytes", layers[i] ? f[i].checkpoints : 0);
            cJSON_AddNumberToObject(c, "host_bytes", layers[i] ? f[i].host : 0);
            cJSON_AddNumberToObject(c, "buffer_bytes", layers[i] ? f[i].buffer : 0);
            cJSON_AddNumberToObject(c, "total_bytes", layers[i] ? f[i].total : 0);
            if (sz_mp_table3[i].paper_psi > 0) {
                cJSON_AddNumberToObject(c, "paper_params", sz_mp_table3[i].paper_psi);
                cJSON *a = cJSON_AddObjectToObject(c, "at_paper_size"); /* this estimate of the paper's model */
                cJSON_AddNumberToObject(a, "layers", at[i].layers);
                cJSON_AddNumberToObject(a, "params", at[i].psi);
                cJSON_AddNumberToObject(a, "model_state_bytes", at[i].states);
                cJSON_AddNumberToObject(a, "activation_bytes", at[i].activations);
                cJSON_AddNumberToObject(a, "total_bytes", at[i].total);
                cJSON_AddNumberToObject(a, "uncounted_bytes", su.budget - at[i].total);
            } else {
                cJSON_AddNullToObject(c, "paper_params");
            }
            cJSON_AddItemToArray(cs, c);
        }
        char *text = cJSON_Print(root);
        cJSON_Delete(root);
        puts(text);
        cJSON_free(text);
        return 0;
    }
    printf("The ZeRO paper's Table 3 with MP %d on %d GPUs of %.0f bytes (N_d = %d), GPT-2-like models of hidden 8192,\n"
           "64 heads, vocabulary 50257 (padded 50304), sequence %d, per-GPU batch %d, mixed precision (K = 12),\n"
           "activations and checkpoints at 2 bytes, C_B %lld bytes: the most layers that fit\n",
           su.nm, su.nm * su.nd, su.budget, su.nd, su.seq, su.batch, (long long)su.bucket_bytes);
    printf("  %-3s %-17s %6s %9s %8s %10s %10s %10s %10s %9s\n", "", "configuration", "layers", "Ψ", "paper",
           "states GB", "ckpts GB", "activ. GB", "total GB", "host GB");
    for (int i = 0; i < 5; i++) {
        char paper[16] = "-";
        if (sz_mp_table3[i].paper_psi > 0)
            snprintf(paper, sizeof paper, "%.0fB", sz_mp_table3[i].paper_psi / 1e9);
        printf("  %-3s %-17s %6d %8.1fB %8s %10.2f %10.2f %10.2f %10.2f %9.2f\n", sz_mp_table3[i].name,
               sz_mp_table3[i].what, layers[i], f[i].psi / 1e9, paper, f[i].states / 1e9, f[i].checkpoints / 1e9,
               f[i].activations / 1e9, f[i].total / 1e9, f[i].host / 1e9);
    }
    printf("\n  at the paper's sizes (the layer count nearest its model), this estimate's memory per GPU:\n");
    printf("  %-3s %6s %9s %10s %10s %10s %14s\n", "", "layers", "Ψ", "states GB", "activ. GB", "total GB",
           "uncounted GB");
    for (int i = 0; i < 5; i++)
        if (sz_mp_table3[i].paper_psi > 0)
            printf("  %-3s %6d %8.1fB %10.2f %10.2f %10.2f %14.2f\n", sz_mp_table3[i].name, at[i].layers,
                   at[i].psi / 1e9, at[i].states / 1e9, at[i].activations / 1e9, at[i].total / 1e9,
                   (su.budget - at[i].total) / 1e9);
    printf("  (uncounted: what the paper's run used beyond this estimate at its largest model, or left free)\n");
    printf("  (activ.: the kept checkpoints on the GPU, P_a's gathered input, one block's and the head's forward\n"
           "  tensors of one MP rank; total: states + activ. + C_B; ckpts: the %s checkpoints of the L blocks\n"
           "  wherever they are; the paper's figures are the largest models it trained: docs/BENCHMARKS.md)\n",
           "rank's");
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    sz_opt_prog("sz-estimate");
    static const char *const mine[] = {"--stage", "--model", "--budget", "--ckpt", NULL};
    sz_opt_spellings(argc, argv, mine); /* sz-train's spellings of the same options */
    int p = parse(argc, argv, &o);
    if (p < 0)
        return 2;
    if (p > 0)
        return 0;
    if (o.paper_pa)
        return print_paper_pa(&o);
    if (o.paper_table3)
        return print_paper_table3(&o);
    if (o.plan)
        return print_plan(&o);
    struct result r;
    compute(&o, &r);
    return o.json ? print_json(&o, &r) : print_text(&o, &r);
}
