/* sz-prepare.c — turns text files into llm.c token files for a byte-level GPT-2 (vocab 256:
 * token = byte value). Concatenates the inputs, puts the last --val-fraction of the stream in
 * NAME_val.bin and the rest in NAME_train.bin. Standalone: links only the llm.c format sources of apps/gpt2.
 *   gcc -O2 -Wall -Wextra -Iinclude -Iapps/gpt2 apps/sz-prepare.c apps/gpt2/llmc_format.c apps/gpt2/gpt2_spec.c -lm -o sz-prepare
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starzero_gpt2.h"

#define BYTE_VOCAB 256

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sz-prepare [options] FILE...\n"
            "\n"
            "Tokenizes text files byte-level (vocab 256, token = byte value) into llm.c token\n"
            "files: DIR/NAME_train.bin and DIR/NAME_val.bin (header magic 20240520, version 1,\n"
            "uint16 tokens). The files are concatenated in the order given; a newline is added\n"
            "after a file that does not end with one. The last fraction F of the stream is the\n"
            "validation split, the rest the training split.\n"
            "\n"
            "options:\n"
            "  --val-fraction F   fraction of tokens for validation, 0 < F < 1 (default 0.1)\n"
            "  --out-dir DIR      where to write the files (default .)\n"
            "  --prefix NAME      file name prefix (default tiny)\n"
            "  --fortune          input is fortune(6) cookie files: each separator line \"%%\" is\n"
            "                     replaced by an empty line, so cookies read as paragraphs\n"
            "  -h, --help         print this help\n"
            "\n"
            "example:\n"
            "  sz-prepare --fortune --out-dir data /usr/share/games/fortunes/{fortunes,literature,wisdom}\n");
}

/* A growable byte buffer. */
typedef struct bytes {
    unsigned char *data;
    size_t len, cap;
} bytes;

static int bytes_reserve(bytes *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + extra)
        cap *= 2;
    unsigned char *p = realloc(b->data, cap);
    if (!p)
        return 0;
    b->data = p;
    b->cap = cap;
    return 1;
}

/* Appends the whole file to *b. Returns 0 and prints the reason on failure. */
static int append_file(bytes *b, const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "sz-prepare: %s: cannot open: %s\n", path, strerror(errno));
        return 0;
    }
    size_t start = b->len;
    for (;;) {
        if (!bytes_reserve(b, 1 << 16)) {
            fprintf(stderr, "sz-prepare: %s: out of memory\n", path);
            fclose(fp);
            return 0;
        }
        size_t got = fread(b->data + b->len, 1, b->cap - b->len, fp);
        b->len += got;
        if (got == 0) {
            if (ferror(fp)) {
                fprintf(stderr, "sz-prepare: %s: read error: %s\n", path, strerror(errno));
                fclose(fp);
                return 0;
            }
            break;
        }
    }
    fclose(fp);
    if (b->len > start && b->data[b->len - 1] != '\n') {
        if (!bytes_reserve(b, 1)) {
            fprintf(stderr, "sz-prepare: %s: out of memory\n", path);
            return 0;
        }
        b->data[b->len++] = '\n';
    }
    return 1;
}

/* In place: every line that is exactly "%" (fortune's cookie separator) becomes an empty line.
 * The input always ends with '\n' (append_file guarantees it). */
static void strip_fortune_separators(bytes *b)
{
    size_t w = 0;
    size_t line = 0;
    while (line < b->len) {
        size_t end = line;
        while (end < b->len && b->data[end] != '\n')
            end++;
        size_t n = end - line; /* line length without the newline */
        if (n == 1 && b->data[line] == '%') {
            /* drop the "%", keep the newline: an empty line between cookies */
        } else {
            memmove(b->data + w, b->data + line, n);
            w += n;
        }
        if (end < b->len)
            b->data[w++] = '\n';
        line = end + 1;
    }
    b->len = w;
}

static int write_split(const char *dir, const char *prefix, const char *split, const uint16_t *tokens,
                       size_t count)
{
    size_t need = strlen(dir) + strlen(prefix) + strlen(split) + 16;
    char *path = malloc(need);
    if (!path) {
        fprintf(stderr, "sz-prepare: out of memory\n");
        return 0;
    }
    snprintf(path, need, "%s/%s_%s.bin", dir, prefix, split);
    char err[512];
    sz_status st = sz_llmc_tokens_write(path, tokens, count, err, sizeof err);
    if (st != SZ_OK) {
        fprintf(stderr, "sz-prepare: %s\n", err);
        fprintf(stderr, "sz-prepare: check that --out-dir %s exists and is writable\n", dir);
        free(path);
        return 0;
    }
    printf("wrote %s: %zu tokens\n", path, count);
    free(path);
    return 1;
}

int main(int argc, char **argv)
{
    double val_fraction = 0.1;
    const char *out_dir = ".";
    const char *prefix = "tiny";
    int fortune = 0;
    char **files = calloc((size_t)argc + 1, sizeof *files);
    int nfiles = 0;
    if (!files) {
        fprintf(stderr, "sz-prepare: out of memory\n");
        return 1;
    }

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        /* options taking a value accept "--opt V" and "--opt=V" */
        const char *opts[] = {"--val-fraction", "--out-dir", "--prefix"};
        int which = -1;
        for (int k = 0; k < 3; k++) {
            size_t n = strlen(opts[k]);
            if (strncmp(a, opts[k], n) == 0 && (a[n] == '\0' || a[n] == '=')) {
                which = k;
                if (a[n] == '=') {
                    val = a + n + 1;
                } else if (i + 1 < argc) {
                    val = argv[++i];
                } else {
                    fprintf(stderr, "sz-prepare: %s needs a value (see --help)\n", opts[k]);
                    free(files);
                    return 1;
                }
            }
        }
        if (which == 0) {
            char *end = NULL;
            errno = 0;
            val_fraction = strtod(val, &end);
            if (errno != 0 || end == val || *end != '\0' || !(val_fraction > 0.0 && val_fraction < 1.0)) {
                fprintf(stderr,
                        "sz-prepare: bad --val-fraction \"%s\": need a number strictly between 0 and 1 "
                        "(e.g. 0.1)\n",
                        val);
                free(files);
                return 1;
            }
        } else if (which == 1) {
            out_dir = val;
        } else if (which == 2) {
            prefix = val;
            if (!*prefix || strchr(prefix, '/')) {
                fprintf(stderr, "sz-prepare: bad --prefix \"%s\": need a non-empty name without '/'\n",
                        prefix);
                free(files);
                return 1;
            }
        } else if (strcmp(a, "--fortune") == 0) {
            fortune = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            free(files);
            return 0;
        } else if (strcmp(a, "--") == 0) {
            while (++i < argc)
                files[nfiles++] = argv[i];
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "sz-prepare: unknown option %s (see --help)\n", a);
            free(files);
            return 1;
        } else {
            files[nfiles++] = argv[i];
        }
    }
    if (nfiles == 0) {
        fprintf(stderr, "sz-prepare: no input files\n");
        usage(stderr);
        free(files);
        return 1;
    }

    bytes text = {0};
    for (int i = 0; i < nfiles; i++) {
        if (!append_file(&text, files[i])) {
            free(text.data);
            free(files);
            return 1;
        }
    }
    free(files);
    if (fortune)
        strip_fortune_separators(&text);
    if (text.len == 0) {
        fprintf(stderr, "sz-prepare: the input is empty: nothing to tokenize\n");
        free(text.data);
        return 1;
    }
    if (text.len > (size_t)INT32_MAX) {
        fprintf(stderr, "sz-prepare: %zu bytes is more than an llm.c token file holds (%d)\n", text.len,
                INT32_MAX);
        free(text.data);
        return 1;
    }

    size_t n = text.len;
    size_t n_val = (size_t)((double)n * val_fraction + 0.5);
    size_t n_train = n - n_val;
    if (n_val == 0 || n_train == 0) {
        fprintf(stderr,
                "sz-prepare: the input has only %zu tokens: a validation fraction of %g leaves the %s "
                "split empty\n",
                n, val_fraction, n_val == 0 ? "validation" : "training");
        free(text.data);
        return 1;
    }

    uint16_t *tokens = malloc(n * sizeof *tokens);
    if (!tokens) {
        fprintf(stderr, "sz-prepare: out of memory for %zu tokens\n", n);
        free(text.data);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        tokens[i] = text.data[i]; /* byte-level: token id = byte value, < BYTE_VOCAB */
    free(text.data);

    int ok = write_split(out_dir, prefix, "train", tokens, n_train) &&
             write_split(out_dir, prefix, "val", tokens + n_train, n_val);
    if (ok)
        printf("total %zu tokens (vocab %d, byte-level): %zu train, %zu val (%.1f%%)\n", n, BYTE_VOCAB,
               n_train, n_val, 100.0 * (double)n_val / (double)n);
    free(tokens);
    return ok ? 0 : 1;
}
