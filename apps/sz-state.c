/* apps/sz-state.c — looks at a training state written by `sz-train --save-state DIR`: prints the
 * manifest of its newest complete step (or of the step directory given) once its own checksum and
 * its layout check out, verifies the size, crc32 and finiteness of every shard file (a NaN or
 * infinity is named by state, tensor and element), and with --export FILE writes the parameters
 * as an llm.c GPT-2 model file (the shards of every rank assembled, whatever N_d and ZeRO stage
 * saved them; under mixed precision the fp32 master, as `sz-train --save` writes it). --reseal
 * recomputes a hand-edited manifest's own checksum.
 *   sz-state DIR [--export FILE] [--quiet] | sz-state --reseal STEPDIR
 * Exit status: 0 when every file checks out (and the export is written), 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "starzero_gpt2.h"
#include "opts.h"
#include "starzero_train.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: sz-state DIR [--export FILE] [--quiet]\n"
               "       sz-state --reseal STEPDIR\n"
               "  DIR            a --save-state directory (its newest complete step) or one step-NNNNNNNN in it\n"
               "  --export FILE  write the parameters as an llm.c GPT-2 checkpoint (fp32, version 3); FILE must\n"
               "                 be a regular file or not exist\n"
               "  --quiet        print only the summary line, not the manifest\n"
               "  --reseal       after editing STEPDIR/manifest.json by hand, recompute its own checksum (its\n"
               "                 layout is still checked against the files and the model when it is read)\n");
}

/* Under mixed precision the parameters are the fp32 master (as sz-train --save writes them). */
static int has_master(const cJSON *man)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(man, "files"))
        if (!strcmp(sz_json_str(f, "kind", ""), "master"))
            return 1;
    return 0;
}

/* The llm.c flat parameters from the saved units: tensor t of layer l is parameter t->name of unit
 * "block<l>" (per-layer tensors) or of the unit holding a parameter of that name. */
static int export_gpt2(const char *stepdir, const cJSON *man, const char *path, char *err, size_t errlen)
{
    if (strcmp(sz_json_str(man, "arch", "?"), "gpt2")) {
        snprintf(err, errlen, "%s: architecture '%s': only GPT-2 states export to an llm.c file", stepdir,
                 sz_json_str(man, "arch", "?"));
        return -1;
    }
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(man, "model");
    sz_gpt2_config cfg = {.max_seq = (int)sz_json_num(mo, "max_seq", 0), .vocab = (int)sz_json_num(mo, "vocab", 0),
                          .padded_vocab = (int)sz_json_num(mo, "padded_vocab", 0),
                          .layers = (int)sz_json_num(mo, "layers", 0), .heads = (int)sz_json_num(mo, "heads", 0),
                          .channels = (int)sz_json_num(mo, "channels", 0)};
    if (sz_gpt2_config_validate(&cfg, err, errlen) != SZ_OK)
        return -1;
    const cJSON *units = cJSON_GetObjectItemCaseSensitive(man, "units");
    int nu = cJSON_GetArraySize(units), rc = 0;
    float **vals = calloc((size_t)nu + 1, sizeof *vals);
    size_t n = sz_gpt2_num_params(&cfg);
    float *flat = malloc(n * sizeof *flat);
    for (int u = 0; u < nu && vals; u++)
        vals[u] = malloc((size_t)sz_json_num(cJSON_GetArrayItem(units, u), "padded", 0) * sizeof(float) + 1);
    if (!vals || !flat) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    if (rc == 0)
        rc = sz_state_read_units(stepdir, man, has_master(man) ? "master" : "params", vals, err, errlen);
    for (int id = 0; id < SZ_GPT2_NUM_TENSORS && rc == 0; id++) {
        const sz_gpt2_tensor_spec *t = sz_gpt2_tensor(id);
        size_t rows, cols;
        sz_gpt2_tensor_shape(&cfg, id, &rows, &cols);
        for (int l = 0; l < (t->per_layer ? cfg.layers : 1) && rc == 0; l++) {
            char block[32];
            snprintf(block, sizeof block, "block%d", l);
            int found = 0;
            for (int u = 0; u < nu && !found; u++) {
                const cJSON *su = cJSON_GetArrayItem(units, u), *p;
                const char *un = sz_json_str(su, "name", "");
                if (t->per_layer ? strcmp(un, block) != 0 : strncmp(un, "block", 5) == 0)
                    continue;
                cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(su, "params"))
                    if (!strcmp(sz_json_str(p, "name", ""), t->name) &&
                        (size_t)sz_json_num(p, "numel", 0) == rows * cols) {
                        memcpy(flat + sz_gpt2_tensor_layer_offset(&cfg, id, l),
                               vals[u] + (size_t)sz_json_num(p, "offset", 0), rows * cols * sizeof(float));
                        found = 1;
                        break;
                    }
            }
            if (!found) {
                snprintf(err, errlen, "%s: no unit holds GPT-2 tensor %s%s%s", stepdir, t->name,
                         t->per_layer ? " of " : "", t->per_layer ? block : "");
                rc = -1;
            }
        }
    }
    if (rc == 0 && sz_llmc_checkpoint_write(path, &cfg, flat, n, err, errlen) != SZ_OK)
        rc = -1;
    for (int u = 0; vals && u < nu; u++)
        free(vals[u]);
    free(vals);
    free(flat);
    return rc;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *export = NULL;
    int quiet = 0, reseal = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else if (!strcmp(argv[i], "--reseal")) reseal = 1;
        else if (!strcmp(argv[i], "--export") && i + 1 < argc) export = argv[++i];
        else if (argv[i][0] != '-' && !dir) dir = argv[i];
        else { usage(stderr); return 2; }
    }
    if (!dir || (reseal && (export || quiet))) { usage(stderr); return 2; }
    char stepdir[4096], err[8192], note[4200];
    if (reseal) {
        if (sz_state_reseal(dir, err, sizeof err) != 0) {
            fprintf(stderr, "sz-state: --reseal %s\n", err);
            return 1;
        }
        printf("resealed %s/manifest.json (its own checksum recomputed)\n", dir);
        return 0;
    }
    if (export && sz_check_writable_file(export, err, sizeof err) != 0) { /* before reading anything */
        fprintf(stderr, "sz-state: --export %s\n", err);
        return 1;
    }
    cJSON *man = NULL;
    if (sz_state_find(dir, stepdir, sizeof stepdir, err, sizeof err) != 0 ||
        sz_state_manifest(stepdir, &man, note, sizeof note, err, sizeof err) != 0) {
        fprintf(stderr, "sz-state: %s\n", err);
        return 1;
    }
    if (note[0])
        fprintf(stderr, "sz-state: %s\n", note);
    if (!quiet) {
        char *text = cJSON_Print(man);
        printf("%s/manifest.json:\n%s\n", stepdir, text ? text : "?");
        free(text);
    }
    printf("files of %s:\n", stepdir);
    int rc = sz_state_verify(stepdir, man, stdout, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "sz-state: %s\n", err);
    else
        printf("all %d files verified (step %d, N_d %d)\n", cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(man, "files")),
               (int)sz_json_num(man, "step", 0), (int)sz_json_num(man, "nd", 0));
    if (rc == 0 && export) {
        if (export_gpt2(stepdir, man, export, err, sizeof err) != 0) {
            fprintf(stderr, "sz-state: --export %s: %s\n", export, err);
            rc = -1;
        } else
            printf("exported the parameters as %s\n", export);
    }
    cJSON_Delete(man);
    return rc == 0 ? 0 : 1;
}
