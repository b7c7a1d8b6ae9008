/* apps/sz-train.c — trains GPT-2 (llm.c semantics) on llm.c token files with ZeRO data
 * parallelism across MPI ranks, one line (or one JSON object) per step. Start from an llm.c
 * checkpoint (--init) or a random GPT-2 (--config). `sz-train --help` lists the options.
 * --batch B is the per-rank micro-batch. The data order is llm.c's (apps/common/data.h): micro-batch
 * i of the run reads batch (i mod the batches the file holds) whole, nd*B rows of T tokens, rank r
 * taking rows r*B .. r*B+B-1; validation reads the first --val-steps batches of the val file. */
#include <limits.h>
#include <math.h>
#include <unistd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "gpt2/gpt2.h"
#include "arch.h"
#include "data.h"
#include "opts.h"
#include "starzero_train.h"

struct opts {
    const char *arch, *init, *config, *train, *val, *save, *precision, *decay, *trace, *save_state, *resume, *lr_schedule, *bf16_compute;
    const char *ds_config; /* --ds-config's file (its options are already in argv: with_ds_config) */
    int vocab, max_seq, batch, seq, steps, val_every, val_steps, json, stage, micro_batches, report, checkpoint,
        offload, offload_optimizer, no_arenas, allow_nonfinite, save_every, keep, warmup, global_batch,
        kernel_threads, overwrite_state, allow_other_data;
    double mem_budget, prefetch_bytes, max_live_bytes, bucket_bytes;
    unsigned long long seed;
    float lr, beta1, beta2, eps, wd, grad_clip, min_lr, momentum;
    float timeout;
    sz_optimizer optimizer;
    int momentum_set;
    sz_loss_scaling ls;  /* --precision fp16: --loss-scale, --initial-scale-power, ... (DeepSpeed's fp16 block) */
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sz-train (--init FILE | --config d2|d6|d12|L,H,C) --train FILE [options]\n"
            "(sz-estimate's and sz-bench's spellings work too: --model, --stage, --budget, --ckpt)\n"
            "model:    --arch gpt2|llama    the architecture (default gpt2; llama: RMSNorm, rotary attention,\n"
            "                               SwiGLU, no biases, untied head; --config and its presets apply)\n"
            "          --init FILE          start from an llm.c GPT-2 checkpoint (fp32, version 3)\n"
            "          --config NAME        random GPT-2: d2 (2 layers, 4 heads, 128 ch), d6, d12 (124M), or L,H,C\n"
            "          --vocab V            vocabulary for --config (default 50257)\n"
            "          --max-seq T          positions for --config (default 1024)\n"
            "          --seed S             init seed (default 1337)\n"
            "data:     --train FILE         llm.c token file (required)\n"
            "          --val FILE           llm.c token file for validation\n"
            "          --val-every N        validate every N steps and at the end (default 0: only at the end)\n"
            "          --val-steps N        validation reads the val file's first N batches (default 20;\n"
            "                               fewer if the file holds fewer), as llm.c does\n"
            "step:     --batch B --seq T --steps N   (defaults 4, 64, 10)\n"
            "optim:    --optimizer adamw|sgd  adamw (default; llm.c's, decoupled weight decay) or sgd\n"
            "                               (torch.optim.SGD: --wd is L2, added to the gradient)\n"
            "          --momentum M         SGD's momentum in [0, 1) (default 0: plain SGD, no state kept)\n"
            "          --lr (3e-4) --beta1 (0.9) --beta2 (0.999) --eps (1e-8) --wd (0)   (betas, eps: AdamW)\n"
            "          --decay matrices|all which tensors weight decay applies to (default matrices;\n"
            "                               all reproduces llm.c's CPU trainer)\n"
            "          --grad-clip X        clip the global gradient norm to X (default off)\n"
            "          --warmup N           linear warmup over the first N steps (lr x step / N; default 0)\n"
            "          --lr-schedule constant|cosine  after the warmup: constant (default) or llm.c's cosine\n"
            "                               decay from --lr to --min-lr (default 0) at step --steps\n"
            "          --precision fp32|bf16|fp16  bf16 or fp16: 16-bit params and grads (stored, communicated),\n"
            "                               fp32 master weights and optimizer state; fp16 computes in fp32 on\n"
            "                               working copies and scales the loss\n"
            "          --loss-scale S       fp16: a fixed loss scale; 0 (default) dynamic, DeepSpeed's rule:\n"
            "          --initial-scale-power P  start at 2^P (default 16); a step whose gradients overflow is\n"
            "          --hysteresis H       skipped, and after H such steps (default 2) the scale halves, never\n"
            "          --min-loss-scale M   below M (default 1); after --loss-scale-window W clean steps (default\n"
            "          --loss-scale-window W  1000) it doubles. --ds-config's fp16 block sets these too\n"
            "          --bf16-compute auto|native|emulated  how bf16 computes: native (bf16 activations, bf16\n"
            "                               matmuls through oneDNN with fp32 accumulation) or emulated (fp32\n"
            "                               activations and math, bf16 parameters widened as they load;\n"
            "                               fp32 working copies with CUDA workers); auto (default): native where the CPU\n"
            "                               has AMX or a fast AVX512-BF16 (AMD Zen 4+); printed as bf16_path\n"
            "          --kernel-threads N   OpenMP threads per compute task (default: this rank's cores); the\n"
            "                               results are bitwise the same whatever N\n"
            "ZeRO:     --zero-stage 0|1|2|3 (default 0) under mpirun: 0 plain data parallelism, 1 optimizer\n"
            "                               states, 2 + gradients, 3 + parameters partitioned across ranks\n"
            "          --micro-batches M    forward/backward passes per optimizer step (default 1)\n"
            "          --global-batch G     check that N_d x --batch x --micro-batches = G rows (DeepSpeed's\n"
            "                               train_batch_size; default 0: not checked)\n"
            "          --mem-budget BYTES   per rank (K, M, G = powers of 1000; KiB, MiB, GiB of 1024): a plan\n"
            "                               predicted to exceed it is refused before it runs, saying what fits\n"
            "          --prefetch-bytes B   stage 3: parameter bytes gathered ahead of the computing unit\n"
            "          --max-live-bytes B   stage 3: gathered parameter bytes alive at once\n"
            "ZeRO-R:   --checkpoint         activation checkpointing: keep each transformer block's input only,\n"
            "                               recompute the block's forward before its backward (same results)\n"
            "          --offload-checkpoints  P_a+cpu (with --checkpoint): checkpoints wait in a host pool\n"
            "                               between their forward and their recompute\n"
            "          --partition-activations  refused: needs model parallelism, which StarZeRO lacks yet\n"
            "ZeRO-Offload: --offload-optimizer  (GPU ranks only) fp32 master and optimizer state of the shard in\n"
            "                               pinned host memory, the optimizer as CPU tasks while the GPU computes;\n"
            "                               refused on a rank without a CUDA worker\n"
            "          --bucket-bytes B     reduce-scatters run through a constant B-byte buffer (default 32MiB)\n"
            "          --no-arenas          M_D off: long-lived tensors are placed one by one among the\n"
            "                               temporaries instead of in one contiguous arena (--report shows\n"
            "                               the device pool's fragmentation either way)\n"
            "failures: --timeout SECONDS    a collective that waits longer than max(SECONDS, 5x the slowest step)\n"
            "                               ends the job on every rank, saying which rank it waited for and where\n"
            "                               (default 600; 0: wait forever; exit status 4)\n"
            "config:   --ds-config FILE     a DeepSpeed JSON config: the keys that map onto these options\n"
            "                               (micro-batch, accumulation, clipping, AdamW or SGD, WarmupLR/WarmupCosineLR,\n"
            "                               bf16, zero_optimization, activation_checkpointing) become them, each\n"
            "                               key reported; the command line wins over the file\n"
            "output:   --save FILE          write an llm.c checkpoint (fp32) at the end (a regular file or none)\n"
            "          --save-state DIR     write the whole training state (parameters, fp32 master, optimizer\n"
            "                               state, step, data position), each rank its shard, into\n"
            "                               DIR/step-NNNNNNNN after the last step and every --save-every N.\n"
            "                               DIR belongs to one run: the run holds its lock while it lives, and\n"
            "                               a new run (no --resume) refuses a DIR holding another run's states\n"
            "          --overwrite-state    accept such a DIR: its other run's states are removed after this\n"
            "                               run's first save\n"
            "          --save-every N       also every N steps (default 0: only after the last step)\n"
            "          --keep N             keep only the newest N saves of this run's lineage, in save order\n"
            "                               (default 0: all); resuming an older save starts a new lineage\n"
            "          --resume DIR         continue from DIR's newest complete state, or the step-NNNNNNNN\n"
            "                               directory given (at any N_d and ZeRO stage; --steps counts from\n"
            "                               the start of training; the model comes from the state:\n"
            "                               --config/--init, if given, must match; so must the --train file's\n"
            "                               contents, unless --allow-other-data: then a note, and the data\n"
            "                               position carries over to the new file)\n"
            "          SIGTERM, SIGINT, SIGUSR1 or SIGUSR2 to any rank, or SIGUSR1/SIGUSR2 to Open MPI's\n"
            "                               mpirun (it forwards them to every rank), stops the run after the\n"
            "                               step in progress, saving the state with --save-state; exit 0. A\n"
            "                               second signal exits at once. SIGTERM/SIGINT to mpirun do NOT do\n"
            "                               that: mpirun tears the job down itself (SIGTERM to the ranks, SIGKILL\n"
            "                               about 1 s later, exit 1), so a state is saved only if the step and\n"
            "                               the save end before the kill; send SIGUSR1 to mpirun\n"
            "          --trace DIR          every rank writes its FxT trace into DIR (merge with\n"
            "                               starpu_fxt_tool, or use scripts/trace.sh)\n"
            "          --report             print measured memory per category and communication per step\n"
            "                               beside the ZeRO formulas (rank 0; max over ranks)\n"
            "          --allow-nonfinite    keep training after a step whose loss or gradient norm is not\n"
            "                               finite (by default the run stops there, exit status 3)\n"
            "          --json               one JSON object per step instead of text lines; the last line is\n"
            "                               the memory/communication report\n");
}

/* Whether --help describes option `a` (written "a " there): an unknown last option is named as
 * unknown, not as one lacking its value. */
static int documented(const char *a)
{
    char *text = NULL, pat[96];
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        return 1;
    usage(m);
    fclose(m);
    snprintf(pat, sizeof pat, "%s ", a);
    int found = text && strncmp(a, "--", 2) == 0 && strstr(text, pat) != NULL;
    free(text);
    return found;
}

/* One option with a value: numbers parse completely and lie in their range (apps/common/opts.c),
 * or the option is refused naming it, the value and the range. 1: not an option of this kind. */
static int parse_value(struct opts *o, const char *a, const char *v)
{
    const double inf = INFINITY;
    if (!strcmp(a, "--vocab")) return sz_opt_int(a, v, 1, 65536, &o->vocab);
    if (!strcmp(a, "--max-seq")) return sz_opt_int(a, v, 1, 1 << 20, &o->max_seq);
    if (!strcmp(a, "--batch")) return sz_opt_int(a, v, 1, 1 << 20, &o->batch);
    if (!strcmp(a, "--seq")) return sz_opt_int(a, v, 1, 1 << 20, &o->seq);
    if (!strcmp(a, "--steps")) return sz_opt_int(a, v, 0, INT_MAX, &o->steps);
    if (!strcmp(a, "--val-every")) return sz_opt_int(a, v, 0, INT_MAX, &o->val_every);
    if (!strcmp(a, "--val-steps") || !strcmp(a, "--val-batches")) return sz_opt_int(a, v, 1, INT_MAX, &o->val_steps);
    if (!strcmp(a, "--seed")) return sz_opt_u64(a, v, &o->seed);
    if (!strcmp(a, "--save-every")) return sz_opt_int(a, v, 0, INT_MAX, &o->save_every);
    if (!strcmp(a, "--keep")) return sz_opt_int(a, v, 0, INT_MAX, &o->keep);
    if (!strcmp(a, "--zero-stage")) return sz_opt_int(a, v, 0, 3, &o->stage);
    if (!strcmp(a, "--micro-batches")) return sz_opt_int(a, v, 1, 1 << 20, &o->micro_batches);
    if (!strcmp(a, "--mem-budget")) return sz_opt_bytes(a, v, &o->mem_budget);
    if (!strcmp(a, "--prefetch-bytes")) return sz_opt_bytes(a, v, &o->prefetch_bytes);
    if (!strcmp(a, "--max-live-bytes")) return sz_opt_bytes(a, v, &o->max_live_bytes);
    if (!strcmp(a, "--bucket-bytes")) return sz_opt_bytes(a, v, &o->bucket_bytes);
    if (!strcmp(a, "--timeout")) return sz_opt_real(a, v, 0, 0, inf, 0, &o->timeout);
    if (!strcmp(a, "--kernel-threads")) return sz_opt_int(a, v, 1, 4096, &o->kernel_threads);
    if (!strcmp(a, "--lr")) return sz_opt_real(a, v, 0, 0, inf, 0, &o->lr);
    if (!strcmp(a, "--min-lr")) return sz_opt_real(a, v, 0, 0, inf, 0, &o->min_lr);
    if (!strcmp(a, "--warmup")) return sz_opt_int(a, v, 0, INT_MAX, &o->warmup);
    if (!strcmp(a, "--global-batch")) return sz_opt_int(a, v, 0, INT_MAX, &o->global_batch);
    if (!strcmp(a, "--beta1")) return sz_opt_real(a, v, 0, 0, 1, 1, &o->beta1);
    if (!strcmp(a, "--beta2")) return sz_opt_real(a, v, 0, 0, 1, 1, &o->beta2);
    if (!strcmp(a, "--eps")) return sz_opt_real(a, v, 0, 1, inf, 0, &o->eps);
    if (!strcmp(a, "--wd")) return sz_opt_real(a, v, 0, 0, inf, 0, &o->wd);
    if (!strcmp(a, "--grad-clip")) return sz_opt_real(a, v, 0, 0, inf, 0, &o->grad_clip);
    if (!strcmp(a, "--optimizer")) return sz_opt_optimizer(a, v, &o->optimizer);
    if (!strcmp(a, "--momentum")) { o->momentum_set = 1; return sz_opt_real(a, v, 0, 0, 1, 1, &o->momentum); }
    if (!strcmp(a, "--loss-scale")) return sz_opt_real(a, v, 0, 0, inf, 0, &o->ls.loss_scale);
    if (!strcmp(a, "--initial-scale-power")) return sz_opt_int(a, v, 0, 64, &o->ls.initial_scale_power);
    if (!strcmp(a, "--loss-scale-window")) return sz_opt_int(a, v, 1, INT_MAX, &o->ls.loss_scale_window);
    if (!strcmp(a, "--hysteresis")) return sz_opt_int(a, v, 1, INT_MAX, &o->ls.hysteresis);
    if (!strcmp(a, "--min-loss-scale")) return sz_opt_real(a, v, 0, 1, inf, 0, &o->ls.min_loss_scale);
    fprintf(stderr, "sz-train: unknown option %s (see --help)\n", a);
    return -1;
}

/* --ds-config FILE: the DeepSpeed config's options (train/ds_config.c) go before the command
 * line's, so the command line wins; rank 0 reports every key on stderr. The arrays stay until exit. */
static int with_ds_config(int argc, char **argv, int *pargc, char ***pargv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--ds-config")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "sz-train: --ds-config needs a value (see --help)\n");
                return -1;
            }
            path = argv[i + 1];
        }
    *pargc = argc;
    *pargv = argv;
    if (!path)
        return 0;
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    r = r ? r : getenv("PMIX_RANK") ? getenv("PMIX_RANK") : getenv("PMI_RANK");
    char **ds = NULL, err[1024];
    int nds = 0;
    if (sz_ds_config_read(path, argc, argv, &ds, &nds, !r || !strcmp(r, "0") ? stderr : NULL, err, sizeof err) != 0) {
        fprintf(stderr, "sz-train: --ds-config %s\n", err);
        return -1;
    }
    char **all = calloc((size_t)argc + (size_t)nds + 1, sizeof *all);
    if (!all)
        return -1;
    int n = 0;
    all[n++] = argv[0];
    for (int i = 0; i < nds; i++)
        all[n++] = ds[i];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ds-config")) {
            i++;
            continue;
        }
        all[n++] = argv[i];
    }
    free(ds); /* the strings live on in all[] */
    *pargc = n;
    *pargv = all;
    return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.vocab = 50257, .max_seq = 1024, .batch = 4, .seq = 64, .steps = 10, .val_steps = 20,
                       .micro_batches = 1,
                       .seed = 1337, .lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                       .precision = "fp32", .decay = "matrices", .lr_schedule = "constant", .timeout = 600,
                       .bf16_compute = "auto"};
    sz_zero_config zd;
    sz_zero_config_defaults(&zd);
    o->ls = zd.loss_scaling;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); exit(0); }
        if (!strcmp(a, "--json")) { o->json = 1; continue; }
        if (!strcmp(a, "--report")) { o->report = 1; continue; }
        if (!strcmp(a, "--checkpoint")) { o->checkpoint = 1; continue; }
        if (!strcmp(a, "--offload-checkpoints")) { o->offload = 1; continue; }
        if (!strcmp(a, "--offload-optimizer")) { o->offload_optimizer = 1; continue; }
        if (!strcmp(a, "--no-arenas")) { o->no_arenas = 1; continue; }
        if (!strcmp(a, "--allow-nonfinite")) { o->allow_nonfinite = 1; continue; }
        if (!strcmp(a, "--overwrite-state")) { o->overwrite_state = 1; continue; }
        if (!strcmp(a, "--allow-other-data")) { o->allow_other_data = 1; continue; }
        if (!strcmp(a, "--partition-activations")) {
            fprintf(stderr, "sz-train: --partition-activations (ZeRO-R's P_a) partitions activation checkpoints across "
                            "model-parallel ranks, and StarZeRO has no model parallelism yet: there is nothing to "
                            "partition. Use --checkpoint to keep only each block's input.\n");
            return -1;
        }
        if (!v) {
            fprintf(stderr, documented(a) ? "sz-train: %s needs a value (see --help)\n"
                                          : "sz-train: unknown option %s (see --help)\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "--arch")) o->arch = v;
        else if (!strcmp(a, "--init")) o->init = v;
        else if (!strcmp(a, "--config")) o->config = v;
        else if (!strcmp(a, "--train")) o->train = v;
        else if (!strcmp(a, "--val")) o->val = v;
        else if (!strcmp(a, "--save")) o->save = v;
        else if (!strcmp(a, "--trace")) o->trace = v;
        else if (!strcmp(a, "--save-state")) o->save_state = v;
        else if (!strcmp(a, "--resume")) o->resume = v;
        else if (!strcmp(a, "--precision")) o->precision = v;
        else if (!strcmp(a, "--bf16-compute")) o->bf16_compute = v;
        else if (!strcmp(a, "--decay")) o->decay = v;
        else if (!strcmp(a, "--lr-schedule")) o->lr_schedule = v;
        else if (parse_value(o, a, v) != 0) return -1;
    }
    if ((o->init && o->config) || (!o->init && !o->config && !o->resume)) {
        fprintf(stderr, "sz-train: give exactly one of --init FILE or --config NAME (or --resume DIR)\n");
        return -1;
    }
    if (!o->train) { fprintf(stderr, "sz-train: --train FILE is required\n"); return -1; }
    if (o->batch < 1 || o->seq < 1 || o->steps < 0 || o->val_steps < 1) {
        fprintf(stderr, "sz-train: --batch, --seq, --val-steps must be >= 1 and --steps >= 0\n");
        return -1;
    }
    if (o->stage < 0 || o->stage > 3 || o->micro_batches < 1) {
        fprintf(stderr, "sz-train: --zero-stage must be 0..3 and --micro-batches >= 1\n");
        return -1;
    }
    if (o->momentum_set && o->optimizer != SZ_OPTIMIZER_SGD) {
        fprintf(stderr, "sz-train: --momentum %g: only --optimizer sgd has a momentum (AdamW's are --beta1, --beta2)\n",
                (double)o->momentum);
        return -1;
    }
    if (sz_lr_kind_parse(o->lr_schedule) < 0) {
        fprintf(stderr, "sz-train: --lr-schedule %s: must be constant or cosine\n", o->lr_schedule);
        return -1;
    }
    if (o->min_lr > o->lr) {
        fprintf(stderr, "sz-train: --min-lr %g: out of range (allowed: 0 <= x <= --lr %g)\n", o->min_lr, o->lr);
        return -1;
    }
    if (strcmp(o->decay, "matrices") && strcmp(o->decay, "all")) {
        fprintf(stderr, "sz-train: --decay must be 'matrices' or 'all', not '%s'\n", o->decay);
        return -1;
    }
    sz_precision pr;
    if (sz_precision_parse(o->precision, &pr) != SZ_OK) {
        fprintf(stderr, "sz-train: --precision %s: must be fp32, bf16 or fp16\n", o->precision);
        return -1;
    }
    sz_bf16_compute bc;
    if (sz_bf16_compute_parse(o->bf16_compute, &bc) != SZ_OK) {
        fprintf(stderr, "sz-train: --bf16-compute %s: must be auto, native or emulated\n", o->bf16_compute);
        return -1;
    }
    return 0;
}

/* Every path the run will write, checked before any work on every rank that writes it (--trace:
 * every rank, before the runtime starts; --save: rank 0), so that a typo costs seconds, not the
 * run. Collective: every rank learns whether any failed. */
static int check_trace_dir(const struct opts *o)
{
    char err[600];
    if (o->trace && sz_check_writable_dir(o->trace, err, sizeof err) != 0) {
        fprintf(stderr, "sz-train: --trace %s\n", err);
        return -1;
    }
    return 0;
}

/* A data or model file as the ranks compare it: its size and a hash of its 1 KiB header. */
/* A file's size and a hash of its whole contents (read in 1 MiB pieces: cheap next to training,
 * which reads the token files whole anyway), for the ranks to compare; -1 for a file that cannot be
 * read (each rank then says so in its own check). */
static long long file_hash(const char *path, uint64_t *h)
{
    static struct { char path[4096]; long long size; uint64_t h; } seen[4]; /* each file is read once */
    static int nseen;
    for (int i = 0; i < nseen; i++)
        if (!strcmp(seen[i].path, path)) {
            *h = seen[i].h;
            return seen[i].size;
        }
    struct stat sb; /* a FIFO would block the open: not read (its own check names it) */
    FILE *f = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? fopen(path, "rb") : NULL;
    static unsigned char buf[1 << 20];
    long long size = 0;
    *h = 14695981039346656037ull;
    size_t n;
    while (f && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) { /* FNV-1a over 8-byte words, then the tail byte by byte */
            uint64_t w;
            memcpy(&w, buf + i, 8);
            *h = (*h ^ w) * 1099511628211ull;
        }
        for (; i < n; i++)
            *h = (*h ^ buf[i]) * 1099511628211ull;
        size += (long long)n;
    }
    if (!f)
        return -1;
    fclose(f);
    if (nseen < 4 && strlen(path) < sizeof seen[0].path) {
        snprintf(seen[nseen].path, sizeof seen[nseen].path, "%s", path);
        seen[nseen].size = size;
        seen[nseen++].h = *h;
    }
    return size;
}

static void file_setting(sz_settings *s, const char *name, const char *path)
{
    if (!path)
        return;
    uint64_t h;
    long long size = file_hash(path, &h);
    sz_settings_add(s, name, "%lld bytes, contents hash %016llx", size, (unsigned long long)h);
}

/* Everything that must be equal on every rank, checked before anything is allocated. */
static sz_status agree(sz_context *ctx, const struct opts *o, const sz_arch_config *cfg)
{
    sz_settings *s = NULL;
    sz_status st = sz_settings_init(&s);
    if (st != SZ_OK)
        return st;
    sz_runtime_info info;
    sz_context_runtime_info(ctx, &info);
    sz_settings_add(s, "the StarZeRO version", "%d.%d (StarPU %s)", SZ_VERSION_MAJOR, SZ_VERSION_MINOR,
                    info.starpu_version);
    sz_settings_add(s, "the architecture", "%s", sz_arch_name(cfg->kind));
    char desc[128];
    sz_arch_format(cfg, desc, sizeof desc);
    sz_settings_add(s, "the model (--config/--init, --vocab, --max-seq)", "%s", desc);
    sz_settings_add(s, "--init", "%s", o->init ? "given" : "not given");
    file_setting(s, "the --init file", o->init);
    sz_settings_add(s, "--zero-stage", "%d", o->stage);
    sz_settings_add(s, "--micro-batches", "%d", o->micro_batches);
    sz_settings_add(s, "--precision", "%s", o->precision);
    sz_settings_add(s, "--bf16-compute", "%s", o->bf16_compute);
    sz_settings_add(s, "--bucket-bytes", "%.0f", o->bucket_bytes);
    sz_settings_add(s, "--prefetch-bytes", "%.0f", o->prefetch_bytes);
    sz_settings_add(s, "--max-live-bytes", "%.0f", o->max_live_bytes);
    sz_settings_add(s, "--checkpoint", "%s", o->checkpoint ? "on" : "off");
    sz_settings_add(s, "--offload-checkpoints", "%s", o->offload ? "on" : "off");
    sz_settings_add(s, "--offload-optimizer", "%s", o->offload_optimizer ? "on" : "off");
    sz_settings_add(s, "--no-arenas", "%s", o->no_arenas ? "given" : "not given");
    sz_settings_add(s, "--mem-budget", o->mem_budget > 0 ? "%.0f bytes" : "not given (the machine's)", o->mem_budget);
    sz_settings_add(s, "--batch", "%d", o->batch);
    sz_settings_add(s, "--seq", "%d", o->seq);
    sz_settings_add(s, "--steps", "%d", o->steps);
    sz_settings_add(s, "--val-every", "%d", o->val_every);
    sz_settings_add(s, "--val-steps", "%d", o->val_steps);
    sz_settings_add(s, "--allow-nonfinite", "%s", o->allow_nonfinite ? "given" : "not given");
    sz_settings_add(s, "--optimizer", "%s", sz_optimizer_name(o->optimizer));
    sz_settings_add(s, "--momentum", "%.9g", o->momentum);
    sz_settings_add(s, "--lr", "%.9g", o->lr);
    sz_settings_add(s, "--beta1", "%.9g", o->beta1);
    sz_settings_add(s, "--beta2", "%.9g", o->beta2);
    sz_settings_add(s, "--eps", "%.9g", o->eps);
    sz_settings_add(s, "--wd", "%.9g", o->wd);
    sz_settings_add(s, "--decay", "%s", o->decay);
    sz_settings_add(s, "--grad-clip", "%.9g", o->grad_clip);
    sz_settings_add(s, "the fp16 loss scaling (--loss-scale, --initial-scale-power, --loss-scale-window, --hysteresis, "
                    "--min-loss-scale)", "%.9g %d %d %d %.9g", o->ls.loss_scale, o->ls.initial_scale_power,
                    o->ls.loss_scale_window, o->ls.hysteresis, o->ls.min_loss_scale);
    sz_settings_add(s, "--seed", "%llu", o->seed);
    file_setting(s, "the --train file", o->train);
    sz_settings_add(s, "--val", "%s", o->val ? "given" : "not given");
    file_setting(s, "the --val file", o->val);
    sz_settings_add(s, "--save", "%s", o->save ? "given" : "not given");
    /* what decides when the ranks communicate or what they compute besides the above */
    sz_settings_add(s, "the schedule (--warmup, --lr-schedule, --min-lr)", "%d %s %.9g", o->warmup, o->lr_schedule,
                    o->min_lr);
    sz_settings_add(s, "--save-state", "%s", o->save_state ? "given" : "not given");
    sz_settings_add(s, "--save-every", "%d", o->save_every);
    sz_settings_add(s, "--keep", "%d", o->keep);
    sz_settings_add(s, "--overwrite-state", "%s", o->overwrite_state ? "given" : "not given");
    sz_settings_add(s, "--resume", "%s", o->resume ? "given" : "not given");
    sz_settings_add(s, "--report", "%s", o->report ? "given" : "not given");
    sz_settings_add(s, "--json", "%s", o->json ? "given" : "not given");
    sz_settings_add(s, "--global-batch", "%d", o->global_batch);
    sz_settings_add(s, "--allow-other-data", "%s", o->allow_other_data ? "given" : "not given");
    file_setting(s, "the --ds-config file", o->ds_config);
    st = sz_settings_count(s) > 0 ? sz_context_agree(ctx, s, "sz-train", NULL, 0) : SZ_ERR_NOMEM;
    sz_settings_free(s);
    return st;
}

static int check_outputs(const struct opts *o, sz_context *ctx, int rank)
{
    char err[600];
    double bad = 0;
    if (rank == 0 && o->save && sz_check_writable_file(o->save, err, sizeof err) != 0) {
        fprintf(stderr, "sz-train: --save %s\n", err);
        bad = 1;
    }
    if (o->save_state && sz_check_writable_dir(o->save_state, err, sizeof err) != 0) { /* every rank writes */
        fprintf(stderr, "sz-train: --save-state %s\n", err);
        bad = 1;
    }
    if (sz_context_sum(ctx, &bad, 1) != SZ_OK)
        return -1;
    return bad > 0 ? -1 : 0;
}

/* A step whose loss or gradient norm is not finite stops the run (unless --allow-nonfinite). */
static int step_is_finite(const struct opts *o, int step, float loss, float norm, int lead)
{
    if (o->allow_nonfinite || (isfinite(loss) && isfinite(norm)))
        return 1;
    fflush(stdout);
    if (lead)
        fprintf(stderr, "sz-train: step %d: the loss is %g and the gradient norm %g: not finite, stopping "
                        "(the parameters after it are not saved; --allow-nonfinite trains on)\n", step, loss, norm);
    return 0;
}

/* ---- the training state (train/state_io.c): what sz-train adds to the manifest, and
 * what it checks when resuming ---------------------------------------------------------------- */
static cJSON *state_info(const struct opts *o, sz_arch_config *cfg, const sz_tokens *train, int nd,
                         long next_mb, const sz_loss_scaler *scaler)
{
    cJSON *a = cJSON_CreateObject(), *mo = cJSON_CreateObject(), *z = cJSON_CreateObject(),
          *op = cJSON_CreateObject(), *d = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "arch", sz_arch_name(cfg->kind));
    const char *names[8];
    int *fields[8], nf = sz_arch_fields(cfg, names, fields, 8);
    for (int i = 0; i < nf; i++)
        cJSON_AddNumberToObject(mo, names[i], *fields[i]);
    cJSON_AddItemToObject(a, "model", mo);
    cJSON_AddStringToObject(a, "precision", o->precision);
    cJSON_AddNumberToObject(z, "stage", o->stage);
    cJSON_AddNumberToObject(z, "nd", nd);
    cJSON_AddNumberToObject(z, "micro_batches", o->micro_batches);
    cJSON_AddBoolToObject(z, "checkpoint", o->checkpoint);
    cJSON_AddBoolToObject(z, "offload_checkpoints", o->offload);
    cJSON_AddNumberToObject(z, "bucket_bytes", o->bucket_bytes);
    cJSON_AddNumberToObject(z, "prefetch_bytes", o->prefetch_bytes);
    cJSON_AddNumberToObject(z, "max_live_bytes", o->max_live_bytes);
    cJSON_AddItemToObject(a, "zero", z);
    cJSON_AddNumberToObject(a, "batch", o->batch);
    cJSON_AddNumberToObject(a, "seq", o->seq);
    cJSON_AddStringToObject(op, "name", sz_optimizer_name(o->optimizer));
    cJSON_AddNumberToObject(op, "momentum", o->momentum);
    cJSON_AddNumberToObject(op, "lr", o->lr);
    cJSON_AddNumberToObject(op, "beta1", o->beta1);
    cJSON_AddNumberToObject(op, "beta2", o->beta2);
    cJSON_AddNumberToObject(op, "eps", o->eps);
    cJSON_AddNumberToObject(op, "weight_decay", o->wd);
    cJSON_AddNumberToObject(op, "grad_clip", o->grad_clip);
    cJSON_AddStringToObject(op, "decay", o->decay);
    cJSON_AddStringToObject(op, "lr_schedule", o->lr_schedule);
    cJSON_AddNumberToObject(op, "warmup", o->warmup);
    cJSON_AddNumberToObject(op, "min_lr", o->min_lr);
    cJSON_AddItemToObject(a, "optimizer", op);
    cJSON_AddStringToObject(d, "train", o->train);
    uint64_t h;
    long long bytes = file_hash(o->train, &h);
    char hex[24];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    cJSON_AddStringToObject(d, "train_hash", hex); /* its contents, checked on --resume */
    cJSON_AddNumberToObject(d, "train_bytes", (double)bytes);
    cJSON_AddNumberToObject(d, "train_tokens", (double)train->ntokens);
    cJSON_AddNumberToObject(d, "train_batches", (double)train->nbatches);
    cJSON_AddNumberToObject(d, "rows_per_micro_batch", (double)nd * o->batch);
    cJSON_AddNumberToObject(d, "seq", o->seq);
    cJSON_AddNumberToObject(d, "next_micro_batch", (double)next_mb);
    cJSON_AddItemToObject(a, "data", d);
    cJSON_AddNumberToObject(a, "seed", (double)o->seed);
    if (!strcmp(o->precision, "fp16")) { /* the loss scaler resumes where it was */
        cJSON *ls = cJSON_CreateObject();
        cJSON_AddNumberToObject(ls, "scale", scaler->scale);
        cJSON_AddNumberToObject(ls, "good_steps", scaler->good_steps);
        cJSON_AddNumberToObject(ls, "hysteresis_left", scaler->hysteresis_left);
        cJSON_AddNumberToObject(ls, "skipped", (double)scaler->skipped);
        cJSON_AddItemToObject(a, "loss_scaler", ls);
    }
    if (o->init)
        cJSON_AddStringToObject(a, "init", o->init);
    return a;
}

/* The model shape a state was saved with; with cfg already known (--config/--init), each field
 * must match, and a mismatch is refused naming it. */
static int state_config(const cJSON *man, const char *stepdir, int have, const char *want_arch, sz_arch_config *cfg)
{
    const char *arch = sz_json_str(man, "arch", "?");
    sz_arch_kind kind;
    if (sz_arch_parse(arch, &kind) != 0 || ((have || want_arch) && kind != cfg->kind)) {
        fprintf(stderr, "sz-train: %s: the state is of architecture '%s', this run trains '%s' (field arch)\n",
                stepdir, arch, sz_arch_name(cfg->kind));
        return -1;
    }
    if (!have) { /* the shape comes from the state; the rest of the config from the architecture's defaults */
        char err[256];
        if (sz_arch_config_from_string(cfg, kind, "d2", 256, 1024, err, sizeof err) != SZ_OK) {
            fprintf(stderr, "sz-train: %s\n", err);
            return -1;
        }
    }
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(man, "model");
    const char *names[8];
    int *fields[8], nf = sz_arch_fields(cfg, names, fields, 8);
    for (int i = 0; i < nf; i++) {
        int saved = (int)sz_json_num(mo, names[i], -1);
        if (have && saved != *fields[i]) {
            fprintf(stderr, "sz-train: %s: the state's model has %s = %d, this run's %d (field model.%s)\n", stepdir,
                    names[i], saved, *fields[i], names[i]);
            return -1;
        }
        *fields[i] = saved;
    }
    return 0;
}

/* Precision must match; the data position carries over where the batch layout is the same, and
 * is otherwise where an uninterrupted run at this layout would be (step x micro-batches). */
static int state_resume_checks(const struct opts *o, const cJSON *man, const char *stepdir, int nd, int *step,
                               long *next_mb, int lead)
{
    const char *prec = sz_json_str(man, "precision", "?");
    if (strcmp(prec, o->precision)) {
        fprintf(stderr, "sz-train: %s: the state was saved at precision %s, this run is %s (field precision): "
                        "resume it with --precision %s\n", stepdir, prec, o->precision, prec);
        return -1;
    }
    *step = (int)sz_json_num(man, "step", 0);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(man, "data"), *z = cJSON_GetObjectItemCaseSensitive(man, "zero");
    long rows = (long)sz_json_num(d, "rows_per_micro_batch", -1), seq = (long)sz_json_num(d, "seq", -1);
    long mbs = (long)sz_json_num(z, "micro_batches", -1);
    double nmb = sz_json_num(d, "next_micro_batch", -1);
    if (!(nmb >= 0 && nmb <= 9007199254740992.0 && nmb == floor(nmb))) {
        fprintf(stderr, "sz-train: %s: data.next_micro_batch is %.17g, not a position in the data (an integer >= 0): "
                        "the manifest is damaged or was edited\n", stepdir, nmb);
        return -1;
    }
    const char *was = sz_json_str(d, "train_hash", NULL); /* (states before this field: not checked) */
    uint64_t h;
    long long bytes = file_hash(o->train, &h);
    char now[24];
    snprintf(now, sizeof now, "%016llx", (unsigned long long)h);
    if (was && strcmp(was, now)) {
        if (!o->allow_other_data) {
            fprintf(stderr, "sz-train: %s: the state was trained on %s (%.0f bytes, contents hash %s); this run's "
                            "--train %s is %lld bytes, hash %s: resume on the same file, or pass --allow-other-data "
                            "to continue on this one\n", stepdir, sz_json_str(d, "train", "?"),
                    sz_json_num(d, "train_bytes", -1), was, o->train, bytes, now);
            return -1;
        }
        if (lead)
            printf("note: --allow-other-data: the state was trained on %s (contents hash %s); continuing on %s "
                   "(hash %s) from its data position\n", sz_json_str(d, "train", "?"), was, o->train, now);
    }
    if (rows == (long)nd * o->batch && seq == o->seq && mbs == o->micro_batches)
        *next_mb = (long)nmb;
    else {
        *next_mb = (long)*step * o->micro_batches;
        if (lead)
            printf("note: the state's batches were %ld rows x %ld tokens, %ld micro-batch(es) per step; this run's "
                   "%ld x %d, %d: the data continues at micro-batch %ld, where a run at this layout would be\n",
                   rows, seq, mbs, (long)nd * o->batch, o->seq, o->micro_batches, *next_mb);
    }
    if (lead && !o->json)
        printf("resuming from %s: step %d (saved at N_d %d, ZeRO stage %d)\n", stepdir, *step,
               (int)sz_json_num(man, "nd", 0), (int)sz_json_num(z, "stage", 0));
    return 0;
}

/* fp16: the loss scaler the state was saved with (its field loss_scaler), restored before the
 * first step so that the resumed run scales and skips as the uninterrupted one would. */
static int resume_scaler(sz_model *m, const cJSON *man, const char *stepdir)
{
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(man, "loss_scaler");
    sz_loss_scaler s = {.scale = (float)sz_json_num(ls, "scale", -1), .good_steps = (int)sz_json_num(ls, "good_steps", -1),
                        .hysteresis_left = (int)sz_json_num(ls, "hysteresis_left", -1),
                        .skipped = (int64_t)sz_json_num(ls, "skipped", -1)};
    if (!cJSON_IsObject(ls) || sz_model_set_loss_scaler(m, &s) != SZ_OK) {
        fprintf(stderr, "sz-train: %s: the state has no usable loss_scaler (scale, good_steps, hysteresis_left, "
                        "skipped), which an fp16 run needs to resume; it was not saved by an fp16 run of this "
                        "version\n", stepdir);
        return -1;
    }
    return 0;
}

/* Tests only: SZ_TEST_SAVE_DELAY_MS makes a save pause between the shards and the manifest, so a
 * test can kill the run in the middle of a save. */
static int save_delay_ms(void)
{
    const char *e = getenv("SZ_TEST_SAVE_DELAY_MS");
    return e ? atoi(e) : 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Mean loss over the first K batches of the val file (forward only; every rank its rows). */
static sz_status evaluate(sz_arch_model *g, int rank, const sz_tokens *val, long K, int *in, int *tg, float *out)
{
    double s = 0.0;
    for (long k = 0; k < K; k++) {
        sz_tokens_batch(val, k, rank, in, tg);
        float l;
        sz_status st = sz_arch_set_batch(g, in, tg);
        if (st == SZ_OK)
            st = sz_model_eval(sz_arch_model_of(g), &l);
        if (st != SZ_OK)
            return st;
        s += l;
    }
    *out = (float)(s / K);
    return SZ_OK;
}

/* Largest value over ranks of one int64 report field. */
static int64_t max_over(const sz_memory_report *reps, int nd, size_t offset)
{
    int64_t m = 0;
    for (int r = 0; r < nd; r++) {
        int64_t v = *(const int64_t *)((const char *)&reps[r] + offset);
        m = v > m ? v : m;
    }
    return m;
}
#define MAXR(reps, nd, field) max_over((reps), (nd), offsetof(sz_memory_report, field))

/* The report: measured per category (max over ranks) beside the ZeRO formula (docs/ARCHITECTURE.md; rank 0 only). */
static void report(const struct opts *o, const sz_arch_config *cfg, const sz_memory_report *reps, int nd)
{
    const sz_memory_report *r0 = &reps[0];
    double psi = (double)r0->nparams;
    const char *prec_name = sz_precision_name(r0->precision);
    int mixed = r0->precision != SZ_PRECISION_FP32;
    sz_zero_breakdown f;
    int states = sz_optimizer_states(o->optimizer, o->momentum);
    sz_zero_state_breakdown_opt(o->stage, psi, nd, mixed, states, &f);
    double formula[SZ_MEM_NCATEGORIES] = {[SZ_MEM_PARAMS] = f.params, [SZ_MEM_PARAM_SHARD] = f.param_shard,
                                          [SZ_MEM_GRADS] = f.grads, [SZ_MEM_GRAD_SHARD] = f.grad_shard,
                                          [SZ_MEM_MASTER] = f.master, [SZ_MEM_OPT_STATE0] = f.adam_m,
                                          [SZ_MEM_OPT_STATE1] = f.adam_v};
    double ms_formula = sz_zero_model_state_bytes_opt(o->stage, psi, nd, mixed, states);
    double comm_formula = sz_zero_comm_bytes_mb(o->stage, psi, nd, mixed, o->micro_batches);
    double act_llmc = cfg->kind == SZ_ARCH_GPT2 ? sz_gpt2_activation_bytes(&cfg->gpt2, o->batch, o->seq)
                                                : sz_arch_activation_bytes(cfg, o->batch, o->seq, 0, 0);
    int64_t ms = MAXR(reps, nd, model_state_bytes), peak = MAXR(reps, nd, peak_bytes);
    int64_t sent = MAXR(reps, nd, comm_bytes_sent);
    char label[64]; /* a category's name; the optimizer's states by their own names */
    if (o->json) {
        printf("{\"report\": true, \"optimizer\": \"%s\", \"optimizer_state_floats\": %d, \"precision\": \"%s\", \"bf16_path\": \"%s\", \"stage\": %d, \"nd\": %d, \"micro_batches\": %d, \"params\": %lld, "
               "\"params_padded\": %lld, \"model_state_bytes\": %lld, \"model_state_bytes_formula\": %.0f, "
               "\"activation_bytes\": %lld, \"activation_bytes_llmc\": %.0f, \"comm_bytes_sent\": %lld, "
               "\"comm_bytes_formula\": %.0f, \"peak_bytes\": %lld, \"rss_peak_bytes\": %lld, "
               "\"runtime_allowance_bytes\": %lld, \"device_peak_bytes\": %lld, \"predicted_peak_bytes\": %lld, "
               "\"budget_from_machine\": %d, \"host_buffer_bytes\": %lld, \"matmul_host_peak_bytes\": %lld, "
               "\"mem_budget\": %lld, \"overlap\": %.4f, \"comm_task_s\": %.4f, \"compute_task_s\": %.4f, "
               "\"arenas\": %d, ",
               sz_optimizer_name(o->optimizer), states, prec_name, r0->bf16_path, o->stage, nd, o->micro_batches, (long long)r0->nparams,
               (long long)r0->nparams_padded, (long long)ms,
               ms_formula, (long long)MAXR(reps, nd, bytes[SZ_MEM_ACTIVATIONS]), act_llmc, (long long)sent,
               comm_formula, (long long)peak, (long long)MAXR(reps, nd, rss_peak_bytes),
               (long long)SZ_RUNTIME_ALLOWANCE_BYTES, (long long)MAXR(reps, nd, device_peak_bytes),
               (long long)MAXR(reps, nd, predicted_peak_bytes), r0->budget_from_machine,
               (long long)MAXR(reps, nd, bytes[SZ_MEM_HOST_BUFFERS]), (long long)MAXR(reps, nd, matmul_host_peak_bytes),
               (long long)r0->mem_budget, r0->overlap, r0->comm_task_s, r0->compute_task_s, r0->arenas);
        printf("\"starpu_node_peak_bytes\": %lld, ", (long long)MAXR(reps, nd, starpu_node_peak_bytes));
        int gpu_ranks = 0;
        for (int r = 0; r < nd; r++)
            gpu_ranks += reps[r].gpu_device >= 0;
        if (gpu_ranks) /* the measured device peak (tasks/devwatch.c), only when GPUs ran */
            printf("\"gpu_ranks\": %d, \"device_measured_peak_bytes\": %lld, \"gpu_cuda_used_bytes\": %lld, "
                   "\"gpu_cuda_used_at_start_bytes\": %lld, \"gpu_arena_bytes\": %lld, \"gpu_sharers\": %d, ",
                   gpu_ranks, (long long)MAXR(reps, nd, starpu_node_peak_bytes),
                   (long long)MAXR(reps, nd, gpu_cuda_used_bytes), (long long)MAXR(reps, nd, gpu_cuda_used_at_start_bytes),
                   (long long)MAXR(reps, nd, gpu_arena_bytes), r0->gpu_sharers);
        if (r0->pool_active)
            printf("\"pool\": {\"footprint\": %lld, \"peak_used\": %lld, \"arena_at_peak\": %lld, "
                   "\"free_at_peak\": %lld, \"largest_free_at_peak\": %lld, \"worst_free\": %lld, "
                   "\"worst_largest_free\": %lld, \"frag_growth\": %lld, \"failures\": %lld}, ",
                   (long long)r0->pool.footprint, (long long)r0->pool.peak_used, (long long)r0->pool.arena_at_peak,
                   (long long)r0->pool.free_at_peak, (long long)r0->pool.largest_free_at_peak,
                   (long long)r0->pool.worst_free, (long long)r0->pool.worst_largest_free,
                   (long long)r0->pool.frag_growth, (long long)r0->pool.failures);
        printf("\"timeline\": [");
        for (int i = 0; i < r0->ntimeline; i++)
            printf("%s[%.3f, %lld]", i ? ", " : "", r0->timeline_ms[i], (long long)r0->timeline_bytes[i]);
        printf("], ");
        printf("\"ranks\": [");
        for (int r = 0; r < nd; r++) {
            printf("%s{\"rank\": %d, \"model_state_bytes\": %lld, \"peak_bytes\": %lld, \"rss_peak_bytes\": %lld, "
                   "\"comm_bytes_sent\": %lld, "
                   "\"comm_bytes_received\": %lld, \"bytes\": {", r ? ", " : "", r, (long long)reps[r].model_state_bytes,
                   (long long)reps[r].peak_bytes, (long long)reps[r].rss_peak_bytes, (long long)reps[r].comm_bytes_sent,
                   (long long)reps[r].comm_bytes_received);
            for (int c = 0; c < SZ_MEM_NCATEGORIES; c++)
                printf("%s\"%s\": %lld", c ? ", " : "",
                       sz_mem_category_label((sz_mem_category)c, o->optimizer, label, sizeof label),
                       (long long)reps[r].bytes[c]);
            printf("}}");
        }
        printf("]}\n");
        return;
    }
    printf("\nmemory per rank, ZeRO stage %d, N_d = %d, %d micro-batch(es), %s; Ψ = %lld (%lld padded)\n",
           o->stage, nd, o->micro_batches, mixed ? (r0->precision == SZ_PRECISION_FP16 ? "fp16 mixed precision" : "bf16 mixed precision") : "fp32", (long long)r0->nparams,
           (long long)r0->nparams_padded);
    printf("  %-28s %16s %16s\n", "category", "measured (max)", "formula");
    for (int c = 0; c < SZ_MEM_NCATEGORIES; c++) {
        int64_t v = 0;
        for (int r = 0; r < nd; r++)
            v = reps[r].bytes[c] > v ? reps[r].bytes[c] : v;
        int state = c == SZ_MEM_PARAMS || c == SZ_MEM_PARAM_SHARD || c == SZ_MEM_GRADS || c == SZ_MEM_GRAD_SHARD ||
                    c == SZ_MEM_MASTER || c == SZ_MEM_OPT_STATE0 || c == SZ_MEM_OPT_STATE1;
        sz_mem_category_label((sz_mem_category)c, o->optimizer, label, sizeof label);
        if (state)
            printf("  %-28s %16lld %16.0f\n", label, (long long)v, formula[c]);
        else
            printf("  %-28s %16lld %16s\n", label, (long long)v, "");
    }
    printf("  %-28s %16lld %16.0f\n", "model states", (long long)ms, ms_formula);
    printf("  %-28s %16lld %16lld  (predicted by the plan before the first step)\n", "peak (all categories)",
           (long long)peak, (long long)MAXR(reps, nd, predicted_peak_bytes));
    printf("  %-28s %16lld\n", "device pool peak", (long long)MAXR(reps, nd, device_peak_bytes));
    if (r0->gpu_device >= 0)
        printf("  %-28s %16lld  (StarPU's allocations on the GPU at their most, its cache included; "
               "cudaMemGetInfo: %lld in use, %lld at start)\n", "device peak measured",
               (long long)MAXR(reps, nd, starpu_node_peak_bytes), (long long)MAXR(reps, nd, gpu_cuda_used_bytes),
               (long long)MAXR(reps, nd, gpu_cuda_used_at_start_bytes));
    printf("  %-28s %16lld  (measured; counted in host buffers above)\n", "matmul working memory",
           (long long)MAXR(reps, nd, matmul_host_peak_bytes));
    printf("  %-28s %16lld  (the process: the engine's bytes + the runtime, allowed %lld more than the budget)\n",
           "peak resident set (RSS)", (long long)MAXR(reps, nd, rss_peak_bytes), (long long)SZ_RUNTIME_ALLOWANCE_BYTES);
    if (r0->pool_active) {
        const sz_pool_stats *p = &r0->pool;
        printf("device pool (rank 0, arenas %s): footprint %.1f MB, peak in use %.1f MB (arena %.1f MB); "
               "at the peak %.1f MB free inside the footprint, largest free block %.1f MB",
               r0->arenas ? "on" : "off", p->footprint / 1e6, p->peak_used / 1e6, p->arena_at_peak / 1e6,
               p->free_at_peak / 1e6, p->largest_free_at_peak / 1e6);
        printf("; worst moment %.1f MB free, largest block %.1f MB; footprint growth from fragmentation %.1f MB",
               p->worst_free / 1e6, p->worst_largest_free / 1e6, p->frag_growth / 1e6);
        if (p->failures)
            printf("; %lld requests found no free block", (long long)p->failures);
        printf("\n");
    }
    if (r0->mem_budget > 0)
        printf("  %-28s %16lld  (measured peak %s the budget%s)\n", "memory budget", (long long)r0->mem_budget,
               peak <= r0->mem_budget ? "within" : "OVER", r0->budget_from_machine ? "; the machine's share" : "");
    printf("  (activations include their gradients; %s forward activations alone: %.0f)\n",
           cfg->kind == SZ_ARCH_GPT2 ? "llm.c's" : "the model's", act_llmc);
    printf("communication per step, bytes sent per rank: measured %lld, formula %.0f\n", (long long)sent, comm_formula);
    if (r0->overlap >= 0)
        printf("overlap (last step, rank 0): %.2f of the communication time ran while compute ran "
               "(communication tasks %.3f s, compute %.3f s)\n", r0->overlap, r0->comm_task_s, r0->compute_task_s);
    if (r0->ntimeline > 0) {
        printf("live transient bytes during the last step (rank 0; ms: MB):");
        for (int i = 0; i < r0->ntimeline; i += r0->ntimeline > 16 ? r0->ntimeline / 16 : 1)
            printf(" %.0f:%.1f", r0->timeline_ms[i], r0->timeline_bytes[i] / 1e6);
        printf("\n");
    }
    if (o->stage == 3 && nd > 1 && cfg->kind == SZ_ARCH_GPT2) /* the head's one gather serves its forward and backward */
        printf("  (stage 3: the head gathers the tied embedding, whose own backward needs no gather, and keeps\n"
               "   its gather from its forward through its backward: %.0f bytes per micro-batch under the formula)\n",
               (double)sz_zero_shard(2 * (int64_t)cfg->gpt2.channels, nd) * (nd - 1) * (mixed ? 2 : 4));
}

int main(int argc, char **argv)
{
    struct opts o;
    sz_opt_prog("sz-train");
    char **pargv = NULL;
    int pargc = 0;
    static const char *const mine[] = {"--zero-stage", "--config", "--mem-budget", "--checkpoint", NULL};
    sz_opt_spellings(argc, argv, mine); /* sz-estimate's and sz-bench's spellings of the same options */
    if (with_ds_config(argc, argv, &pargc, &pargv) != 0)
        return 2;
    int prc = parse(pargc, pargv, &o);
    if (prc != 0)
        return 2;
    for (int i = 1; i + 1 < argc; i++) /* (parse never sees it) */
        if (!strcmp(argv[i], "--ds-config"))
            o.ds_config = argv[i + 1];
    char err[1400] = "", stepdir[4096] = "", note[4400] = "";
    sz_arch_config cfg = {0};
    sz_status st = SZ_OK;
    if (o.arch && sz_arch_parse(o.arch, &cfg.kind) != 0) {
        fprintf(stderr, "sz-train: --arch %s: must be gpt2 or llama\n", o.arch);
        return 2;
    }
    if (cfg.kind == SZ_ARCH_LLAMA && (o.init || o.save)) {
        fprintf(stderr, "sz-train: %s: llm.c checkpoint files hold GPT-2 models, which --arch llama cannot read or "
                        "write: start it from --config and keep its state with --save-state DIR / --resume DIR\n",
                o.init ? "--init" : "--save");
        return 2;
    }
    if (o.init)
        st = sz_llmc_checkpoint_read_header(o.init, &cfg.gpt2, err, sizeof err);
    else if (o.config)
        st = sz_arch_config_from_string(&cfg, cfg.kind, o.config, o.vocab, o.max_seq, err, sizeof err);
    if (st != SZ_OK) {
        fprintf(stderr, "sz-train: %s\n", err);
        return 1;
    }
    cJSON *man = NULL; /* --resume: the state's manifest */
    if (o.resume && (sz_state_find(o.resume, stepdir, sizeof stepdir, err, sizeof err) != 0 ||
                     sz_state_manifest(stepdir, &man, note, sizeof note, err, sizeof err) != 0)) {
        fprintf(stderr, "sz-train: --resume %s\n", err);
        return 1;
    }
    if (man && state_config(man, stepdir, o.init || o.config, o.arch, &cfg) != 0) {
        cJSON_Delete(man);
        return 1;
    }

    if (check_trace_dir(&o) != 0)
        return 1;
    sz_context *ctx = NULL;
    sz_context_config ccfg;
    sz_context_config_defaults(&ccfg);
    ccfg.trace_dir = o.trace;
    ccfg.timeout_s = o.timeout;
    if (o.kernel_threads > 0)
        ccfg.kernel_threads = o.kernel_threads;
    ccfg.gpu_mem_limit = (int64_t)o.mem_budget; /* --mem-budget is each GPU's too (STARPU_LIMIT_CUDA_MEM) */
    if ((st = sz_context_init(&ctx, &ccfg, &argc, &argv)) != SZ_OK) {
        fprintf(stderr, "sz-train: cannot start the runtime: %s\n", sz_status_string(st));
        return 1;
    }
    int nd = sz_context_world_size(ctx), rank = sz_context_rank(ctx), lead = rank == 0, rc = 1;
    if ((st = agree(ctx, &o, &cfg)) != SZ_OK) { /* every rank the same run, before anything is allocated */
        if (st == SZ_ERR_INVALID)
            fprintf(stderr, "sz-train: rank %d stops: every rank must be started with the same options and the same "
                    "files (the message above names the first difference)\n", rank);
        else
            fprintf(stderr, "sz-train: the ranks could not compare their settings: %s\n", sz_status_string(st));
        sz_context_free(ctx);
        return 1;
    }
    sz_arch_model *g = NULL;
    int *in = malloc((size_t)o.batch * o.seq * sizeof *in), *tg = malloc((size_t)o.batch * o.seq * sizeof *tg);
    sz_memory_report *reps = calloc((size_t)nd, sizeof *reps);
    sz_tokens train = {0}, val = {0};
    sz_state_dir *sdir = NULL; /* --save-state: the directory this run owns and holds locked */
    if (lead && note[0])
        fprintf(stderr, "sz-train: %s\n", note);
    if (check_outputs(&o, ctx, rank) != 0)
        goto out;
    if (o.save_state && sz_state_dir_open(&sdir, ctx, o.save_state, man ? stepdir : NULL, man, o.overwrite_state,
                                          lead ? stderr : NULL, err, sizeof err) != 0) {
        fprintf(stderr, "sz-train: --save-state %s\n", err);
        goto out;
    }
    if (o.global_batch > 0 && (long)nd * o.batch * o.micro_batches != o.global_batch) {
        if (lead)
            fprintf(stderr, "sz-train: --global-batch %d: this run's global batch is %d rank(s) x --batch %d x "
                            "--micro-batches %d = %ld rows\n", o.global_batch, nd, o.batch, o.micro_batches,
                    (long)nd * o.batch * o.micro_batches);
        goto out;
    }
    if (sz_tokens_open(&train, o.train, sz_arch_vocab(&cfg), nd, o.batch, o.seq, err, sizeof err) != 0 ||
        (o.val && sz_tokens_open(&val, o.val, sz_arch_vocab(&cfg), nd, o.batch, o.seq, err, sizeof err) != 0)) {
        fprintf(stderr, "sz-train: %s\n", err);
        goto out;
    }
    long val_batches = o.val ? sz_tokens_val_batches(&val, o.val_steps) : 0;
    sz_precision precision = SZ_PRECISION_FP32;
    sz_precision_parse(o.precision, &precision); /* checked by parse() */
    sz_zero_config zero = {.stage = o.stage, .micro_batches = o.micro_batches, .precision = precision,
                           .loss_scaling = o.ls,
                           .mem_budget = (int64_t)o.mem_budget, .prefetch_bytes = (int64_t)o.prefetch_bytes,
                           .max_live_bytes = (int64_t)o.max_live_bytes, .checkpoint = o.checkpoint,
                           .bucket_bytes = (int64_t)o.bucket_bytes, .offload_checkpoints = o.offload,
                           .arenas = !o.no_arenas, .offload_optimizer = o.offload_optimizer,
                           .optimizer = o.optimizer, .momentum = o.momentum,
                           /* the data loader: the token files held whole, the batch's inputs and targets;
                              --save-state: the largest unit's shard, the buffer each state file goes through */
                           .host_bytes = sz_tokens_host_bytes(&train) + sz_tokens_host_bytes(&val) +
                                         2 * (int64_t)o.batch * o.seq * (int64_t)sizeof *in +
                                         (o.save_state ? (sz_arch_largest_unit_numel(&cfg) + nd - 1) / nd * 4 : 0)};
    sz_bf16_compute_parse(o.bf16_compute, &zero.bf16_compute); /* checked by parse() */
    if ((st = sz_arch_create(&g, ctx, &cfg, o.batch, o.seq, &zero, err, sizeof err)) != SZ_OK) {
        fprintf(stderr, "sz-train: %s\n", err);
        goto out;
    }
    /* preemption (include/starzero_train.h): a signal to any rank asks the run to stop; every rank
     * finishes the step in progress, the ranks agree on it after each step (sz_stop_agree), the
     * state is saved if --save-state was given, and the run exits 0. A second signal exits at once.
     * Installed after the runtime started: ours replace StarPU's handlers. */
    if (sz_stop_catch("sz-train") != SZ_OK) {
        fprintf(stderr, "sz-train: cannot install the signal handlers\n");
        goto out;
    }
    sz_state_dir_set_save_delay(sdir, save_delay_ms());
    int first = 1;      /* the first step this run trains */
    int stopped = 0;    /* the signal that stopped the run before --steps */
    int step_done = 0;
    char where[4200] = "";
    long next_mb = 0;   /* the next micro-batch of the data order */
    if (man) {
        int saved;
        if (state_resume_checks(&o, man, stepdir, nd, &saved, &next_mb, lead) != 0 ||
            sz_state_load(sz_arch_model_of(g), ctx, stepdir, man, err, sizeof err) != 0) {
            if (err[0])
                fprintf(stderr, "sz-train: --resume %s\n", err);
            goto out;
        }
        if (precision == SZ_PRECISION_FP16 && resume_scaler(sz_arch_model_of(g), man, stepdir) != 0)
            goto out;
        first = saved + 1;
        if (first > o.steps && lead)
            printf("the state is at step %d and --steps is %d: nothing left to train\n", saved, o.steps);
    } else {
        st = o.init ? sz_arch_load(g, o.init, err, sizeof err) : sz_arch_init_random(g, o.seed);
        if (st != SZ_OK) {
            fprintf(stderr, "sz-train: %s\n", o.init ? err : sz_status_string(st));
            goto out;
        }
    }
    char desc[128];
    sz_arch_format(&cfg, desc, sizeof desc);
    sz_runtime_info info;
    sz_context_runtime_info(ctx, &info);
    char opt_desc[48];
    if (o.optimizer == SZ_OPTIMIZER_SGD)
        snprintf(opt_desc, sizeof opt_desc, "SGD (momentum %g)", (double)o.momentum);
    else
        snprintf(opt_desc, sizeof opt_desc, "AdamW");
    /* with CUDA workers under bf16 and --bf16-compute auto: the GPU rule's reason beside the path */
    char gpu_why[400] = "";
    if (info.cuda_workers > 0 && !strcmp(o.precision, "bf16") && !strcmp(o.bf16_compute, "auto")) {
        char why[384];
        sz_context_bf16_auto(ctx, why, sizeof why);
        snprintf(gpu_why, sizeof gpu_why, ": %s", why);
    }
    if (lead && !o.json)
        printf("%s %s, %lld parameters; %d rank(s) x batch %d x %d, %d micro-batch(es), ZeRO stage %d, %s "
               "(bf16_path %s%s), %s; %zu train tokens (%ld batches); StarPU policy '%s'%s\n", sz_arch_title(cfg.kind), desc,
               (long long)sz_model_nparams(sz_arch_model_of(g)), nd,
               o.batch, o.seq, o.micro_batches, o.stage, o.precision, sz_model_bf16_path(sz_arch_model_of(g)), gpu_why, opt_desc,
               train.ntokens, train.nbatches, info.sched_policy,
               nd > 1 ? (info.shared_collectives ? "; collectives through shared memory" : "; collectives through MPI") : "");

    sz_gpu_budget_info gb; /* a GPU rank: its per-GPU budget, as decided at start */
    if (lead && sz_context_gpu_budget(ctx, &gb) == SZ_OK) {
        char text[2048]; /* every device of the rank, each its own budget; the figures: the smallest's */
        sz_gpu_budget_info all[16];
        int ndev = sz_context_gpu_budgets(ctx, all, 16);
        sz_gpu_budgets_describe(all, ndev < 16 ? ndev : 16, (int64_t)o.mem_budget, text, sizeof text);
        if (o.json)
            printf("{\"gpu_budget\": \"%s\", \"budget_per_rank_bytes\": %lld, \"gpu_free_at_start_bytes\": %lld, "
                   "\"gpu_budget_device\": %d, \"gpu_budget_sharers\": %d, \"gpu_budget_devices\": %d}\n", text,
                   (long long)(o.mem_budget > 0 ? (int64_t)o.mem_budget : gb.share_bytes), (long long)gb.free_bytes,
                   gb.device, gb.sharers, ndev);
        else
            printf("%s (rank 0)%s\n", text, o.mem_budget > 0 ? "" : "; no --mem-budget given");
    }

    sz_train_config tc;
    sz_train_config_defaults(&tc);
    tc.lr = o.lr;
    tc.beta1 = o.beta1;
    tc.beta2 = o.beta2;
    tc.eps = o.eps;
    tc.weight_decay = o.wd;
    tc.grad_clip = o.grad_clip;
    tc.decay = strcmp(o.decay, "all") ? SZ_DECAY_MATRICES : SZ_DECAY_ALL;
    double flops = sz_arch_flops(g) * o.micro_batches * nd; /* all ranks together */
    int tokens = nd * o.batch * o.seq * o.micro_batches;
    sz_lr_schedule sched = {(sz_lr_kind)sz_lr_kind_parse(o.lr_schedule), o.lr, o.min_lr, o.warmup, o.steps};
    sz_loss_scaler scaler; /* fp16: the loss scale and the skipped steps (scale 1, none skipped otherwise) */
    for (int step = first; step <= o.steps; step++) {
        double t0 = now_ms(), sum = 0.0;
        /* a skipped fp16 step does not advance the schedule either (DeepSpeed's lr scheduler) */
        sz_model_loss_scaler(sz_arch_model_of(g), &scaler);
        tc.lr = (float)sz_lr_at(&sched, step - (int)scaler.skipped);
        for (int mb = 0; mb < o.micro_batches; mb++) {
            sz_tokens_batch(&train, next_mb++, rank, in, tg);
            float l;
            if ((st = sz_arch_set_batch(g, in, tg)) != SZ_OK ||
                (st = sz_model_forward_backward(sz_arch_model_of(g), &l)) != SZ_OK) {
                fprintf(stderr, "sz-train: step %d failed: %s\n", step, sz_status_string(st));
                goto out;
            }
            sum += l;
        }
        if ((st = sz_model_update(sz_arch_model_of(g), &tc, step)) != SZ_OK) {
            fprintf(stderr, "sz-train: step %d update failed: %s\n", step, sz_status_string(st));
            goto out;
        }
        float loss = (float)(sum / o.micro_batches);
        double ms = now_ms() - t0, tps = tokens / (ms / 1e3), gf = flops / (ms / 1e3) / 1e9;
        float norm = sz_model_last_grad_norm(sz_arch_model_of(g));
        float scale_used = scaler.scale;
        sz_model_loss_scaler(sz_arch_model_of(g), &scaler);
        char fp16[160] = "";
        if (precision == SZ_PRECISION_FP16 && o.json)
            snprintf(fp16, sizeof fp16, ", \"loss_scale\": %.17g, \"skipped\": %s, \"skipped_steps\": %lld", scale_used,
                     scaler.last_skipped ? "true" : "false", (long long)scaler.skipped);
        else if (precision == SZ_PRECISION_FP16)
            snprintf(fp16, sizeof fp16, "  scale %g%s", scale_used,
                     scaler.last_skipped ? "  overflow: step skipped" : "");
        char gn[32] = "null"; /* JSON has no inf or NaN (an fp16 overflow's norm, --allow-nonfinite) */
        if (isfinite(norm))
            snprintf(gn, sizeof gn, "%.6f", norm);
        if (lead && o.json)
            printf("{\"step\": %d, \"loss\": %.6f, \"ms\": %.3f, \"tokens_per_s\": %.1f, \"gflops\": %.2f, "
                   "\"grad_norm\": %s, \"lr\": %g%s}\n", step, loss, ms, tps, gf, gn, tc.lr, fp16);
        else if (lead)
            printf("step %4d/%d: loss %.6f  %8.1f ms  %9.0f tok/s  %7.1f GFLOP/s  |g| %.4f  lr %.3g%s\n", step,
                   o.steps, loss, ms, tps, gf, norm, tc.lr, fp16);
        /* an fp16 overflow is the loss scaler's to handle (the step was skipped): only the loss counts */
        if (!step_is_finite(&o, step, loss, scaler.last_skipped ? 0.0f : norm, lead)) {
            rc = 3;
            goto out;
        }
        int last = step == o.steps;
        if (!last && (stopped = sz_stop_agree(ctx)) != 0)
            last = 1; /* as if it were the last step: validate, save the state */
        if (o.val && ((o.val_every > 0 && step % o.val_every == 0) || last)) {
            float vl;
            if ((st = evaluate(g, rank, &val, val_batches, in, tg, &vl)) != SZ_OK) {
                fprintf(stderr, "sz-train: validation failed: %s\n", sz_status_string(st));
                goto out;
            }
            if (lead && o.json)
                printf("{\"step\": %d, \"val_loss\": %.6f, \"val_batches\": %ld}\n", step, vl, val_batches);
            else if (lead)
                printf("step %4d/%d: val loss %.6f (%ld batches)\n", step, o.steps, vl, val_batches);
        }
        if (o.save_state && ((o.save_every > 0 && step % o.save_every == 0) || last)) {
            if (sz_state_save(sdir, sz_arch_model_of(g), ctx, step,
                              state_info(&o, &cfg, &train, nd, next_mb, &scaler), o.keep,
                              where, sizeof where, err, sizeof err) != 0) {
                fprintf(stderr, "sz-train: --save-state: %s\n", err);
                goto out;
            }
            if (lead && o.json) { /* the path escaped by cJSON: any file name makes valid JSON */
                cJSON *line = cJSON_CreateObject();
                cJSON_AddNumberToObject(line, "step", step);
                cJSON_AddStringToObject(line, "state", where);
                char *text = cJSON_PrintUnformatted(line);
                printf("%s\n", text ? text : "{}");
                free(text);
                cJSON_Delete(line);
            }
            else if (lead)
                printf("step %4d/%d: state saved in %s\n", step, o.steps, where);
        }
        fflush(stdout);
        step_done = step;
        if (stopped)
            break;
    }
    if (stopped && lead) {
        if (o.save_state)
            printf("sz-train: stopped by signal %d after step %d: the training state is in %s (--resume %s continues)\n",
                   stopped, step_done, where, o.save_state);
        else
            printf("sz-train: stopped by signal %d after step %d: no --save-state given, the training state was "
                   "not saved\n", stopped, step_done);
        fflush(stdout);
    }
    if (o.save) {
        if ((st = sz_arch_save(g, o.save, err, sizeof err)) != SZ_OK) { /* collective */
            fprintf(stderr, "sz-train: %s\n", err[0] ? err : sz_status_string(st));
            goto out;
        }
        if (lead && !o.json)
            printf("saved %s\n", o.save);
    }
    if ((o.report || o.json) && sz_model_memory_report_all(sz_arch_model_of(g), lead ? reps : NULL) == SZ_OK && lead &&
        o.steps > 0)
        report(&o, &cfg, reps, nd);
    rc = 0;
out:
    free(in);
    free(tg);
    free(reps);
    sz_arch_free(g);
    sz_state_dir_close(sdir);
    sz_context_free(ctx);
    sz_tokens_close(&train);
    sz_tokens_close(&val);
    cJSON_Delete(man);
    return rc;
}
