/* train/ds_config.c — DeepSpeed JSON config -> sz-train options (include/starzero_train.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include "starzero_train.h"

struct ctx {
    int argc;
    char **argv;
    char **args;
    int nargs, cap;
    struct { const char *opt; char key[112], value[64]; } set[64]; /* what each option came from */
    int nset;
    FILE *log;
    char *err;
    size_t errlen;
    const char *path;
    int failed;
};

static int given(const struct ctx *c, const char *opt)
{
    for (int i = 1; i < c->argc; i++)
        if (!strcmp(c->argv[i], opt))
            return 1;
    return 0;
}

static void push(struct ctx *c, const char *s)
{
    if (c->nargs + 2 > c->cap) {
        c->cap = c->cap ? 2 * c->cap : 32;
        char **n = realloc(c->args, (size_t)c->cap * sizeof *n);
        if (!n) {
            c->failed = 1;
            return;
        }
        c->args = n;
    }
    c->args[c->nargs++] = strdup(s);
    c->args[c->nargs] = NULL;
}

static int refuse(struct ctx *c, const char *fmt, ...);

/* key (its JSON path) became option [value]; two keys giving one option different values are refused */
static void use(struct ctx *c, const char *key, const char *shown, const char *opt, const char *value, const char *why)
{
    for (int i = 0; i < c->nset; i++)
        if (!strcmp(c->set[i].opt, opt)) {
            if (strcmp(c->set[i].value, value ? value : "")) {
                refuse(c, "%s (%s %s) and %s (%s %s) disagree: give one of them, or the option itself on the command "
                       "line", c->set[i].key, opt, c->set[i].value, key, opt, value ? value : "");
                return;
            }
            return; /* the same again */
        }
    if (c->nset < (int)(sizeof c->set / sizeof c->set[0])) {
        c->set[c->nset].opt = opt;
        snprintf(c->set[c->nset].key, sizeof c->set[c->nset].key, "%s", key);
        snprintf(c->set[c->nset].value, sizeof c->set[c->nset].value, "%s", value ? value : "");
        c->nset++;
    }
    push(c, opt);
    if (value)
        push(c, value);
    if (c->log)
        fprintf(c->log, "ds-config: %s = %s -> %s%s%s%s%s%s\n", key, shown, opt, value ? " " : "", value ? value : "",
                why ? " (" : "", why ? why : "", why ? ")" : "");
    if (c->log && given(c, opt))
        fprintf(c->log, "ds-config:   the command line's %s wins over it\n", opt);
}

static void ignore(struct ctx *c, const char *key, const cJSON *v, const char *why)
{
    if (!c->log)
        return;
    char *text = cJSON_PrintUnformatted(v);
    fprintf(c->log, "ds-config: %s = %s ignored: %s\n", key, text ? text : "?", why);
    free(text);
}

static int refuse(struct ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(c->err, c->errlen, "%s: ", c->path);
    if (n >= 0 && (size_t)n < c->errlen)
        vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    c->failed = 1;
    return -1;
}

/* What a JSON value is, for messages. */
static const char *type_of(const cJSON *v)
{
    return cJSON_IsNumber(v) ? "a number" : cJSON_IsString(v) ? "a string" : cJSON_IsBool(v) ? "a boolean"
           : cJSON_IsNull(v) ? "null" : cJSON_IsArray(v) ? "an array" : cJSON_IsObject(v) ? "an object" : "?";
}

/* A section's "enabled": a boolean, or absent (false); anything else is refused. */
static int enabled(struct ctx *c, const char *section, const cJSON *o)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "enabled");
    if (e && !cJSON_IsBool(e)) {
        refuse(c, "%s.enabled is %s, expected true or false", section, type_of(e));
        return 0;
    }
    return cJSON_IsTrue(e);
}

/* A number (DeepSpeed also writes "auto", which only its HF integration resolves). */
static int number(struct ctx *c, const char *key, const cJSON *v, double *out)
{
    if (cJSON_IsNumber(v)) {
        *out = v->valuedouble;
        return 1;
    }
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "auto")) {
        ignore(c, key, v, "\"auto\" is resolved by DeepSpeed's Hugging Face integration only; sz-train keeps its default");
        return 0;
    }
    refuse(c, "%s is %s, expected a number", key, type_of(v));
    return 0;
}

static void num_opt(struct ctx *c, const char *key, const cJSON *v, const char *opt, int integer, double scale,
                    const char *why)
{
    double x;
    if (!number(c, key, v, &x))
        return;
    char shown[64], val[64];
    snprintf(shown, sizeof shown, "%.9g", x);
    if (integer) {
        if (x != floor(x) || fabs(x) > 2e9) {
            refuse(c, "%s = %s: not an integer", key, shown);
            return;
        }
        snprintf(val, sizeof val, "%.0f", x * scale);
    } else
        snprintf(val, sizeof val, "%.9g", x * scale);
    use(c, key, shown, opt, val, why);
}

static int truthy(const cJSON *o, const char *k)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k));
}

/* optimizer.type SGD: torch.optim.SGD's params (lr, momentum, weight_decay as L2; dampening 0 and
 * nesterov false are all sz-train has). */
static void sgd_params(struct ctx *c, const cJSON *p)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, p)
    {
        char key[96];
        snprintf(key, sizeof key, "optimizer.params.%s", e->string);
        if (!strcmp(e->string, "lr"))
            num_opt(c, key, e, "--lr", 0, 1, NULL);
        else if (!strcmp(e->string, "momentum"))
            num_opt(c, key, e, "--momentum", 0, 1, NULL);
        else if (!strcmp(e->string, "weight_decay"))
            num_opt(c, key, e, "--wd", 0, 1, "L2, added to the gradient, as torch.optim.SGD");
        else if (!strcmp(e->string, "dampening") && !(cJSON_IsNumber(e) && e->valuedouble == 0.0))
            refuse(c, "%s: sz-train's SGD has no dampening (0 only)", key);
        else if (!strcmp(e->string, "nesterov") && !cJSON_IsFalse(e))
            refuse(c, "%s: sz-train's SGD is not Nesterov's (false only)", key);
        else if (!strcmp(e->string, "betas") || !strcmp(e->string, "eps"))
            refuse(c, "%s: not a parameter of SGD (Adam's)", key);
        else if (strcmp(e->string, "dampening") && strcmp(e->string, "nesterov"))
            ignore(c, key, e, "no sz-train option");
    }
}

static void optimizer(struct ctx *c, const cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type"), *p = cJSON_GetObjectItemCaseSensitive(o, "params"), *e;
    int sgd = cJSON_IsString(t) && !strcasecmp(t->valuestring, "sgd");
    if (!cJSON_IsString(t) || (!sgd && strcasecmp(t->valuestring, "adam") && strcasecmp(t->valuestring, "adamw"))) {
        refuse(c, "optimizer.type %s: sz-train trains with AdamW or SGD (type Adam, AdamW or SGD)",
               cJSON_IsString(t) ? t->valuestring : "(missing)");
        return;
    }
    use(c, "optimizer.type", t->valuestring, "--optimizer", sgd ? "sgd" : "adamw",
        sgd ? "torch.optim.SGD" : "decoupled weight decay, as DeepSpeed's adam_w_mode");
    if (sgd) {
        sgd_params(c, p);
        return;
    }
    cJSON_ArrayForEach(e, p)
    {
        char key[96];
        snprintf(key, sizeof key, "optimizer.params.%s", e->string);
        if (!strcmp(e->string, "lr"))
            num_opt(c, key, e, "--lr", 0, 1, NULL);
        else if (!strcmp(e->string, "eps"))
            num_opt(c, key, e, "--eps", 0, 1, NULL);
        else if (!strcmp(e->string, "weight_decay"))
            num_opt(c, key, e, "--wd", 0, 1, NULL);
        else if (!strcmp(e->string, "betas")) {
            if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2) {
                refuse(c, "%s must be an array of two numbers", key);
                continue;
            }
            char k1[112], k2[112];
            snprintf(k1, sizeof k1, "%s[0]", key);
            snprintf(k2, sizeof k2, "%s[1]", key);
            num_opt(c, k1, cJSON_GetArrayItem(e, 0), "--beta1", 0, 1, NULL);
            num_opt(c, k2, cJSON_GetArrayItem(e, 1), "--beta2", 0, 1, NULL);
        } else if (!strcmp(e->string, "adam_w_mode") && cJSON_IsFalse(e))
            refuse(c, "%s = false (L2-regularised Adam): sz-train's AdamW decouples the weight decay", key);
        else
            ignore(c, key, e, "no sz-train option");
    }
}

static void scheduler(struct ctx *c, const cJSON *s, double lr)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type"), *p = cJSON_GetObjectItemCaseSensitive(s, "params"), *e;
    int cosine = cJSON_IsString(t) && !strcmp(t->valuestring, "WarmupCosineLR");
    if (!cJSON_IsString(t) || (!cosine && strcmp(t->valuestring, "WarmupLR"))) {
        refuse(c, "scheduler.type %s: sz-train has WarmupLR (linear warmup, then constant) and WarmupCosineLR",
               cJSON_IsString(t) ? t->valuestring : "(missing)");
        return;
    }
    use(c, "scheduler.type", t->valuestring, "--lr-schedule", cosine ? "cosine" : "constant", NULL);
    cJSON_ArrayForEach(e, p)
    {
        char key[96];
        snprintf(key, sizeof key, "scheduler.params.%s", e->string);
        if (!strcmp(e->string, "warmup_num_steps"))
            num_opt(c, key, e, "--warmup", 1, 1, NULL);
        else if (!cosine && !strcmp(e->string, "warmup_max_lr"))
            num_opt(c, key, e, "--lr", 0, 1, "the rate after the warmup");
        else if (!cosine && !strcmp(e->string, "warmup_min_lr"))
            ignore(c, key, e, "sz-train's warmup starts at lr/warmup_num_steps, as llm.c's does");
        else if (!strcmp(e->string, "warmup_type") && cJSON_IsString(e) && strcmp(e->valuestring, "linear"))
            ignore(c, key, e, "sz-train's warmup is linear");
        else if (cosine && !strcmp(e->string, "total_num_steps"))
            num_opt(c, key, e, "--steps", 1, 1, "the cosine ends at the last step");
        else if (cosine && !strcmp(e->string, "cos_min_ratio")) {
            char why[96];
            snprintf(why, sizeof why, "x lr %g", lr);
            num_opt(c, key, e, "--min-lr", 0, lr, why);
        } else
            ignore(c, key, e, "no sz-train option");
    }
}

/* fp16.enabled: --precision fp16, and its loss scaling (DeepSpeed's names, each to its option). */
static void fp16(struct ctx *c, const cJSON *f)
{
    use(c, "fp16.enabled", "true", "--precision", "fp16", "fp16 parameters and gradients, fp32 master and optimizer state");
    static const struct { const char *key, *opt; int integer; } map[] = {
        {"loss_scale", "--loss-scale", 0},          {"initial_scale_power", "--initial-scale-power", 1},
        {"loss_scale_window", "--loss-scale-window", 1}, {"hysteresis", "--hysteresis", 1},
        {"min_loss_scale", "--min-loss-scale", 0}};
    const cJSON *e;
    cJSON_ArrayForEach(e, f)
    {
        if (c->failed)
            return;
        char key[96];
        snprintf(key, sizeof key, "fp16.%s", e->string);
        size_t i = 0;
        while (i < sizeof map / sizeof map[0] && strcmp(map[i].key, e->string))
            i++;
        if (!strcmp(e->string, "enabled"))
            continue;
        else if (i < sizeof map / sizeof map[0])
            num_opt(c, key, e, map[i].opt, map[i].integer, 1, NULL);
        else if (!strcmp(e->string, "consecutive_hysteresis") && !cJSON_IsTrue(e))
            ignore(c, key, e, "false, as StarZeRO's loss scaler does");
        else if (!strcmp(e->string, "auto_cast") && !cJSON_IsTrue(e))
            ignore(c, key, e, "false: StarZeRO computes in fp32 on fp32 working copies");
        else
            refuse(c, "%s: not supported (StarZeRO's fp16 takes loss_scale, initial_scale_power, loss_scale_window, "
                   "hysteresis, min_loss_scale)", key);
    }
}

static void zero(struct ctx *c, const cJSON *z, int bf16)
{
    const cJSON *e;
    double size = bf16 ? 2 : 4;
    const char *why = bf16 ? "elements x 2 bytes (bf16 or fp16)" : "elements x 4 bytes (fp32)";
    cJSON_ArrayForEach(e, z)
    {
        char key[96];
        snprintf(key, sizeof key, "zero_optimization.%s", e->string);
        if (!strcmp(e->string, "stage"))
            num_opt(c, key, e, "--zero-stage", 1, 1, NULL);
        else if (!strcmp(e->string, "reduce_bucket_size"))
            num_opt(c, key, e, "--bucket-bytes", 1, size, why);
        else if (!strcmp(e->string, "stage3_prefetch_bucket_size"))
            num_opt(c, key, e, "--prefetch-bytes", 1, size, why);
        else if (!strcmp(e->string, "stage3_max_live_parameters"))
            num_opt(c, key, e, "--max-live-bytes", 1, size, why);
        else if (!strcmp(e->string, "offload_optimizer")) {
            const cJSON *dev = cJSON_GetObjectItemCaseSensitive(e, "device");
            if (cJSON_IsString(dev) && !strcmp(dev->valuestring, "cpu"))
                use(c, key, "{\"device\": \"cpu\"}", "--offload-optimizer", NULL, "ZeRO-Offload (GPU ranks only)");
            else
                ignore(c, key, e, "StarZeRO offloads the optimizer to the CPU only (device \"cpu\"), never to NVMe");
        } else if (!strcmp(e->string, "offload_param"))
            ignore(c, key, e, "ZeRO-Infinity's parameter offload is not in StarZeRO");
        else
            ignore(c, key, e, "StarZeRO has no such setting (its communication overlaps by the scheduler's design)");
    }
}

static void checkpointing(struct ctx *c, const cJSON *a)
{
    if (truthy(a, "partition_activations")) {
        refuse(c, "activation_checkpointing.partition_activations = true: ZeRO-R's P_a partitions checkpoints "
                  "across model-parallel ranks, and StarZeRO has no model parallelism yet");
        return;
    }
    use(c, "activation_checkpointing", "{...}", "--checkpoint", NULL, "a block's input kept, its forward recomputed");
    const cJSON *e;
    cJSON_ArrayForEach(e, a)
    {
        char key[96];
        snprintf(key, sizeof key, "activation_checkpointing.%s", e->string);
        if (!strcmp(e->string, "cpu_checkpointing") && cJSON_IsTrue(e))
            use(c, key, "true", "--offload-checkpoints", NULL, "P_a+cpu");
        else if (!strcmp(e->string, "partition_activations") || !strcmp(e->string, "cpu_checkpointing"))
            ; /* false: nothing to do */
        else
            ignore(c, key, e, "no sz-train option");
    }
}

/* The sections sz-train reads, each an object. */
static int is_section(const char *k)
{
    static const char *const sections[] = {"optimizer", "scheduler", "bf16", "fp16", "zero_optimization",
                                           "activation_checkpointing"};
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        if (!strcmp(k, sections[i]))
            return 1;
    return 0;
}

sz_status sz_ds_config_read(const char *path, int argc, char **argv, char ***args, int *nargs, FILE *log, char *err,
                      size_t errlen)
{
    struct ctx c = {.argc = argc, .argv = argv, .log = log, .err = err, .errlen = errlen, .path = path};
    err[0] = 0;
    *args = NULL;
    *nargs = 0;
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) { /* a FIFO would block the open forever */
        snprintf(err, errlen, "%s: not a regular file (a DeepSpeed config is a JSON file)", path);
        return SZ_ERR_INVALID;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return SZ_ERR_IO;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;
    size_t got = text ? fread(text, 1, (size_t)len, f) : 0;
    fclose(f);
    if (!text || got != (size_t)len) {
        free(text);
        snprintf(err, errlen, "%s: cannot read", path);
        return SZ_ERR_IO;
    }
    text[len] = 0;
    const char *end = NULL; /* one object and nothing after it but white space */
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root || !cJSON_IsObject(root)) {
        const char *at = root ? NULL : end ? end : cJSON_GetErrorPtr();
        snprintf(err, errlen, "%s: not one JSON object%s (near byte %ld)", path,
                 at && *at && root == NULL && at > text ? ", or text after it" : "", at ? (long)(at - text) : 0L);
        free(text);
        cJSON_Delete(root);
        return SZ_ERR_FORMAT;
    }
    free(text);
    /* the element size of the byte conversions: --precision on the command line, else bf16.enabled or
     * fp16.enabled (2 bytes either way) */
    int bf16 = truthy(cJSON_GetObjectItemCaseSensitive(root, "bf16"), "enabled") ||
               truthy(cJSON_GetObjectItemCaseSensitive(root, "fp16"), "enabled");
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--precision"))
            bf16 = !strcmp(argv[i + 1], "bf16") || !strcmp(argv[i + 1], "fp16");
    double lr = 3e-4; /* the base of cos_min_ratio: the command line's --lr, else the optimizer's */
    const cJSON *olr = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "optimizer"), "params"), "lr");
    if (cJSON_IsNumber(olr))
        lr = olr->valuedouble;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--lr"))
            lr = atof(argv[i + 1]);
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        if (c.failed)
            break;
        const char *k = e->string;
        if (!strcmp(k, "train_micro_batch_size_per_gpu"))
            num_opt(&c, k, e, "--batch", 1, 1, "per rank");
        else if (!strcmp(k, "gradient_accumulation_steps"))
            num_opt(&c, k, e, "--micro-batches", 1, 1, NULL);
        else if (!strcmp(k, "gradient_clipping"))
            num_opt(&c, k, e, "--grad-clip", 0, 1, NULL);
        else if (!strcmp(k, "train_batch_size"))
            num_opt(&c, k, e, "--global-batch", 1, 1, "checked: N_d x --batch x --micro-batches must equal it");
        else if (is_section(k) && !cJSON_IsObject(e))
            refuse(&c, "%s is %s, expected an object ({...})", k, type_of(e));
        else if (!strcmp(k, "optimizer"))
            optimizer(&c, e);
        else if (!strcmp(k, "scheduler"))
            scheduler(&c, e, lr);
        else if (!strcmp(k, "bf16")) {
            if (enabled(&c, k, e))
                use(&c, "bf16.enabled", "true", "--precision", "bf16", NULL);
            else
                ignore(&c, "bf16", e, "not enabled: fp32, sz-train's default");
        } else if (!strcmp(k, "fp16")) {
            if (enabled(&c, k, e))
                fp16(&c, e);
            else
                ignore(&c, "fp16", e, "not enabled");
        } else if (!strcmp(k, "zero_optimization"))
            zero(&c, e, bf16);
        else if (!strcmp(k, "activation_checkpointing"))
            checkpointing(&c, e);
        else if (!strcmp(k, "checkpoint"))
            ignore(&c, k, e, "DeepSpeed's checkpoint section has no interval: give --save-state DIR --save-every N");
        else
            ignore(&c, k, e, "no sz-train option");
    }
    cJSON_Delete(root);
    if (c.failed) {
        sz_ds_args_free(c.args, c.nargs);
        if (err[0]) /* a key refused, with its reason */
            return SZ_ERR_INVALID;
        snprintf(err, errlen, "%s: out of memory", path);
        return SZ_ERR_NOMEM;
    }
    *args = c.args;
    *nargs = c.nargs;
    return SZ_OK;
}

void sz_ds_args_free(char **args, int nargs)
{
    for (int i = 0; i < nargs; i++)
        free(args[i]);
    free(args);
}
